//! The exports driven as a C program drives them: through the symbols and
//! the context's ops table, two contexts of the default device in one
//! process connected by LID only, an RDMA WRITE whose bytes must land, and
//! the errors rdma-core gives for verbs the emulation refuses.

use std::os::raw::{c_char, c_int, c_void};
use std::ptr;
use std::time::{Duration, Instant};

use verbs_emu::backend::ibverbs::ffi::*;

extern "C" {
    fn ibv_get_device_list(n: *mut c_int) -> *mut *mut ibv_device;
    fn ibv_free_device_list(l: *mut *mut ibv_device);
    fn ibv_get_device_name(d: *mut ibv_device) -> *const c_char;
    fn ibv_open_device(d: *mut ibv_device) -> *mut ibv_context;
    fn ibv_close_device(c: *mut ibv_context) -> c_int;
    fn ibv_query_port(c: *mut ibv_context, port: u8, a: *mut ibv_port_attr) -> c_int;
    fn ibv_query_gid(c: *mut ibv_context, port: u8, i: c_int, g: *mut ibv_gid) -> c_int;
    fn ibv_alloc_pd(c: *mut ibv_context) -> *mut ibv_pd;
    fn ibv_dealloc_pd(p: *mut ibv_pd) -> c_int;
    fn ibv_reg_mr(p: *mut ibv_pd, a: *mut c_void, l: usize, acc: c_int) -> *mut ibv_mr;
    fn ibv_reg_mr_iova(
        p: *mut ibv_pd,
        a: *mut c_void,
        l: usize,
        io: u64,
        acc: c_int,
    ) -> *mut ibv_mr;
    fn ibv_dereg_mr(m: *mut ibv_mr) -> c_int;
    fn ibv_create_cq(
        c: *mut ibv_context,
        n: c_int,
        ctx: *mut c_void,
        ch: *mut ibv_comp_channel,
        v: c_int,
    ) -> *mut ibv_cq;
    fn ibv_resize_cq(c: *mut ibv_cq, n: c_int) -> c_int;
    fn ibv_destroy_cq(c: *mut ibv_cq) -> c_int;
    fn ibv_create_qp(p: *mut ibv_pd, a: *mut ibv_qp_init_attr) -> *mut ibv_qp;
    fn ibv_modify_qp(q: *mut ibv_qp, a: *mut ibv_qp_attr, m: c_int) -> c_int;
    fn ibv_destroy_qp(q: *mut ibv_qp) -> c_int;
    fn ibv_query_ece(q: *mut ibv_qp, e: *mut c_void) -> c_int;
    fn ibv_cmd_alloc_pd() -> c_int;
}

fn errno() -> c_int {
    std::io::Error::last_os_error().raw_os_error().unwrap_or(0)
}

struct Side {
    ctx: *mut ibv_context,
    pd: *mut ibv_pd,
    cq: *mut ibv_cq,
    qp: *mut ibv_qp,
    mr: *mut ibv_mr,
    buf: Vec<u8>,
    lid: u16,
}

unsafe fn side(dev: *mut ibv_device) -> Side {
    // SAFETY (whole body): the calls a C program makes, on objects just
    // created.
    unsafe {
        let ctx = ibv_open_device(dev);
        assert!(!ctx.is_null());
        let mut port = ibv_port_attr::default();
        assert_eq!(ibv_query_port(ctx, 1, &mut port), 0);
        assert_eq!(port.state, IBV_PORT_ACTIVE);
        assert_eq!(port.link_layer, IBV_LINK_LAYER_ETHERNET);
        let mut gid = ibv_gid::default();
        assert_eq!(ibv_query_gid(ctx, 1, 0, &mut gid), 0);
        let g = gid.bytes();
        assert_eq!(g[..12], [0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff]);
        assert_eq!(
            u16::from_be_bytes([g[14], g[15]]),
            port.lid,
            "LID = low address bits"
        );
        let pd = ibv_alloc_pd(ctx);
        let cq = ibv_create_cq(ctx, 16, ptr::null_mut(), ptr::null_mut(), 0);
        let mut buf = vec![0u8; 4096];
        let access = (IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE) as c_int;
        let mr = ibv_reg_mr(pd, buf.as_mut_ptr().cast(), buf.len(), access);
        let mut init = ibv_qp_init_attr {
            qp_context: ptr::null_mut(),
            send_cq: cq,
            recv_cq: cq,
            srq: ptr::null_mut(),
            cap: ibv_qp_cap {
                max_send_wr: 16,
                max_recv_wr: 16,
                max_send_sge: 1,
                max_recv_sge: 1,
                max_inline_data: 0,
            },
            qp_type: IBV_QPT_RC,
            sq_sig_all: 0,
        };
        let qp = ibv_create_qp(pd, &mut init);
        assert!(!pd.is_null() && !cq.is_null() && !mr.is_null() && !qp.is_null());
        Side {
            ctx,
            pd,
            cq,
            qp,
            mr,
            buf,
            lid: port.lid,
        }
    }
}

/// RESET -> RTS towards `peer`, by LID only (no GRH), as
/// `ibv_rc_pingpong` without `-g` does.
unsafe fn connect(s: &Side, peer: &Side) {
    // SAFETY (whole body): modify on a live QP with stack attributes.
    unsafe {
        let mut a = ibv_qp_attr {
            qp_state: IBV_QPS_INIT,
            port_num: 1,
            qp_access_flags: IBV_ACCESS_REMOTE_WRITE,
            ..Default::default()
        };
        let m = IBV_QP_STATE | IBV_QP_PKEY_INDEX | IBV_QP_PORT | IBV_QP_ACCESS_FLAGS;
        assert_eq!(ibv_modify_qp(s.qp, &mut a, m), 0);
        let mut a = ibv_qp_attr {
            qp_state: IBV_QPS_RTR,
            path_mtu: IBV_MTU_1024,
            dest_qp_num: (*peer.qp).qp_num,
            rq_psn: 0,
            max_dest_rd_atomic: 1,
            min_rnr_timer: 12,
            ah_attr: ibv_ah_attr {
                dlid: peer.lid,
                port_num: 1,
                ..Default::default()
            },
            ..Default::default()
        };
        let m = IBV_QP_STATE
            | IBV_QP_AV
            | IBV_QP_PATH_MTU
            | IBV_QP_DEST_QPN
            | IBV_QP_RQ_PSN
            | IBV_QP_MAX_DEST_RD_ATOMIC
            | IBV_QP_MIN_RNR_TIMER;
        assert_eq!(ibv_modify_qp(s.qp, &mut a, m), 0);
        let mut a = ibv_qp_attr {
            qp_state: IBV_QPS_RTS,
            timeout: 14,
            retry_cnt: 7,
            rnr_retry: 7,
            sq_psn: 0,
            max_rd_atomic: 1,
            ..Default::default()
        };
        let m = IBV_QP_STATE
            | IBV_QP_TIMEOUT
            | IBV_QP_RETRY_CNT
            | IBV_QP_RNR_RETRY
            | IBV_QP_SQ_PSN
            | IBV_QP_MAX_QP_RD_ATOMIC;
        assert_eq!(ibv_modify_qp(s.qp, &mut a, m), 0);
        assert_eq!((*s.qp).state, IBV_QPS_RTS);
    }
}

#[test]
fn a_c_style_program_writes_across_two_contexts() {
    // SAFETY (whole body): the C calling sequence on objects this test
    // creates and destroys in order.
    unsafe {
        let mut n = 0;
        let list = ibv_get_device_list(&mut n);
        assert_eq!(n, 1);
        let name = std::ffi::CStr::from_ptr(ibv_get_device_name(*list));
        assert_eq!(name.to_str().unwrap(), "rocelab0");
        let a = side(*list);
        let mut b = side(*list);
        ibv_free_device_list(list);
        assert_ne!(a.lid, b.lid, "two openings, two addresses");
        connect(&a, &b);
        connect(&b, &a);

        let mut a_buf = a.buf;
        let msg = b"written by context a";
        a_buf[..msg.len()].copy_from_slice(msg);
        let mut sge = ibv_sge {
            addr: a_buf.as_ptr() as u64,
            length: msg.len() as u32,
            lkey: (*a.mr).lkey,
        };
        let mut wr = ibv_send_wr {
            wr_id: 7,
            sg_list: &mut sge,
            num_sge: 1,
            opcode: IBV_WR_RDMA_WRITE,
            send_flags: IBV_SEND_SIGNALED,
            ..Default::default()
        };
        wr.wr.rdma = ibv_send_wr_rdma {
            remote_addr: b.buf.as_ptr() as u64 + 100,
            rkey: (*b.mr).rkey,
        };
        let ops = &(*a.ctx).ops;
        let mut bad = ptr::null_mut();
        assert_eq!((ops.post_send.unwrap())(a.qp, &mut wr, &mut bad), 0);
        let mut wc = ibv_wc::default();
        let start = Instant::now();
        loop {
            let got = (ops.poll_cq.unwrap())(a.cq, 1, &mut wc);
            assert!(got >= 0);
            if got == 1 {
                break;
            }
            assert!(start.elapsed() < Duration::from_secs(10), "no completion");
            std::thread::yield_now();
        }
        assert_eq!(
            (wc.wr_id, wc.status, wc.opcode),
            (7, IBV_WC_SUCCESS, IBV_WC_RDMA_WRITE)
        );
        // Context b's progress thread delivered the WRITE before its ACK.
        assert_eq!(&b.buf[100..100 + msg.len()], msg);

        // An opcode the emulation does not carry: EINVAL, bad_wr names it.
        wr.opcode = 10; // IBV_WR_LOCAL_INV
        assert_eq!(
            (ops.post_send.unwrap())(a.qp, &mut wr, &mut bad),
            libc::EINVAL
        );
        assert_eq!(bad, ptr::addr_of_mut!(wr));
        // Unsupported verbs answer rdma-core's errno.
        assert_eq!(ibv_query_ece(a.qp, ptr::null_mut()), libc::EOPNOTSUPP);
        assert_eq!(ibv_resize_cq(a.cq, 32), libc::EOPNOTSUPP);
        assert_eq!(ibv_cmd_alloc_pd(), libc::EOPNOTSUPP);
        let odd = ibv_reg_mr_iova(a.pd, a_buf.as_mut_ptr().cast(), 64, 0x1000, 1);
        assert!(odd.is_null());
        assert_eq!(errno(), libc::EOPNOTSUPP);
        assert!(ibv_alloc_pd(ptr::null_mut()).is_null());
        assert_eq!(errno(), libc::EINVAL);
        // A PD with live children is busy.
        assert_eq!(ibv_dealloc_pd(a.pd), libc::EBUSY);

        for s in [
            (a.ctx, a.pd, a.cq, a.qp, a.mr),
            (b.ctx, b.pd, b.cq, b.qp, b.mr),
        ] {
            assert_eq!(ibv_destroy_qp(s.3), 0);
            assert_eq!(ibv_dereg_mr(s.4), 0);
            assert_eq!(ibv_destroy_cq(s.2), 0);
            assert_eq!(ibv_dealloc_pd(s.1), 0);
            assert_eq!(ibv_close_device(s.0), 0);
        }
        b.buf.clear();
    }
}
