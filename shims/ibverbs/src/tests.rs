//! The exports driven as a C program drives them: through the symbols and
//! the context's ops table, two contexts of the default device in one
//! process connected by LID only, an RDMA WRITE whose bytes must land, and
//! the errors rdma-core gives for verbs the emulation refuses.

use std::os::raw::{c_char, c_int, c_void};
use std::ptr;
use std::time::{Duration, Instant};

use verbs_emu::backend::ibverbs::ffi::*;

mod device_memory;
mod windows;

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
    fn ibv_create_srq(p: *mut ibv_pd, a: *mut ibv_srq_init_attr) -> *mut ibv_srq;
    fn ibv_destroy_srq(s: *mut ibv_srq) -> c_int;
    fn ibv_modify_srq(s: *mut ibv_srq, a: *mut ibv_srq_attr, m: c_int) -> c_int;
    fn ibv_query_srq(s: *mut ibv_srq, a: *mut ibv_srq_attr) -> c_int;
    fn ibv_get_async_event(c: *mut ibv_context, e: *mut ibv_async_event) -> c_int;
    fn ibv_ack_async_event(e: *mut ibv_async_event);
    fn ibv_query_device(c: *mut ibv_context, a: *mut ibv_device_attr) -> c_int;
    fn ibv_create_ah(p: *mut ibv_pd, a: *mut ibv_ah_attr) -> *mut ibv_ah;
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
    // SAFETY: forwarded.
    unsafe { connect_via(s, peer, None) }
}

/// RESET -> RTS towards `peer`, through a GRH to `dgid` when given.
unsafe fn connect_via(s: &Side, peer: &Side, dgid: Option<ibv_gid>) {
    // SAFETY: forwarded; both QPs are live.
    unsafe { connect_qp(s.qp, peer.qp, peer.lid, IBV_ACCESS_REMOTE_WRITE, dgid) }
}

/// RESET -> RTS of `qp` towards `peer_qp` at `peer_lid`, granting `access`
/// to the peer, through a GRH to `dgid` when given: the attributes
/// `ibv_rc_pingpong` uses (MTU 1024, PSNs 0, one READ or atomic in flight).
///
/// # Safety
///
/// `qp` and `peer_qp` are live QPs of this library.
pub(crate) unsafe fn connect_qp(
    qp: *mut ibv_qp,
    peer_qp: *mut ibv_qp,
    peer_lid: u16,
    access: u32,
    dgid: Option<ibv_gid>,
) {
    // SAFETY (whole body): modify on a live QP with stack attributes.
    unsafe {
        let mut a = ibv_qp_attr {
            qp_state: IBV_QPS_INIT,
            port_num: 1,
            qp_access_flags: access,
            ..Default::default()
        };
        let m = IBV_QP_STATE | IBV_QP_PKEY_INDEX | IBV_QP_PORT | IBV_QP_ACCESS_FLAGS;
        assert_eq!(ibv_modify_qp(qp, &mut a, m), 0);
        let mut a = ibv_qp_attr {
            qp_state: IBV_QPS_RTR,
            path_mtu: IBV_MTU_1024,
            dest_qp_num: (*peer_qp).qp_num,
            rq_psn: 0,
            max_dest_rd_atomic: 1,
            min_rnr_timer: 12,
            ah_attr: ibv_ah_attr {
                dlid: peer_lid,
                port_num: 1,
                is_global: u8::from(dgid.is_some()),
                grh: ibv_global_route {
                    dgid: dgid.unwrap_or_default(),
                    hop_limit: 64,
                    ..Default::default()
                },
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
        assert_eq!(ibv_modify_qp(qp, &mut a, m), 0);
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
        assert_eq!(ibv_modify_qp(qp, &mut a, m), 0);
        assert_eq!((*qp).state, IBV_QPS_RTS);
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
        assert_eq!(a.lid, b.lid, "two openings of one device, one port");
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
        assert_eq!(ibv_resize_cq(a.cq, 32), 0);
        assert!((*a.cq).cqe >= 32);
        assert_eq!(ibv_resize_cq(a.cq, 0), libc::EINVAL);
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

/// RDMA WRITE `msg` from `a`'s buffer to `b`'s at `offset` and wait for its
/// completion on `a`.
unsafe fn write_and_wait(a: &Side, b: &Side, msg: &[u8], offset: usize, wr_id: u64) {
    // SAFETY: forwarded.
    let wc = unsafe { write_wc(a, b, msg, offset, wr_id, (*b.mr).rkey) };
    assert_eq!(
        (wc.wr_id, wc.status, wc.opcode),
        (wr_id, IBV_WC_SUCCESS, IBV_WC_RDMA_WRITE)
    );
}

/// RDMA WRITE `msg` to `b`'s buffer at `offset` under `rkey`; its
/// completion on `a`.
unsafe fn write_wc(a: &Side, b: &Side, msg: &[u8], offset: usize, wr_id: u64, rkey: u32) -> ibv_wc {
    // SAFETY (whole body): posts and polls on live objects; the SGE points
    // into `a`'s registered buffer.
    unsafe {
        let src = a.buf.as_ptr().cast_mut();
        ptr::copy_nonoverlapping(msg.as_ptr(), src, msg.len());
        let mut sge = ibv_sge {
            addr: src as u64,
            length: msg.len() as u32,
            lkey: (*a.mr).lkey,
        };
        let mut wr = ibv_send_wr {
            wr_id,
            sg_list: &mut sge,
            num_sge: 1,
            opcode: IBV_WR_RDMA_WRITE,
            send_flags: IBV_SEND_SIGNALED,
            ..Default::default()
        };
        wr.wr.rdma = ibv_send_wr_rdma {
            remote_addr: b.buf.as_ptr() as u64 + offset as u64,
            rkey,
        };
        let ops = &(*a.ctx).ops;
        let mut bad = ptr::null_mut();
        assert_eq!((ops.post_send.unwrap())(a.qp, &mut wr, &mut bad), 0);
        let mut wc = ibv_wc::default();
        let start = Instant::now();
        while (ops.poll_cq.unwrap())(a.cq, 1, &mut wc) == 0 {
            assert!(start.elapsed() < Duration::from_secs(10), "no completion");
            std::thread::yield_now();
        }
        wc
    }
}

/// The next asynchronous event of `ctx`, waiting up to 5 s for it.
unsafe fn next_async_event(ctx: *mut ibv_context) -> Option<ibv_async_event> {
    // SAFETY (whole body): a live context's fd, a stack event.
    unsafe {
        let mut p = libc::pollfd {
            fd: (*ctx).async_fd,
            events: libc::POLLIN,
            revents: 0,
        };
        if libc::poll(&mut p, 1, 5000) != 1 {
            return None;
        }
        let mut ev = ibv_async_event {
            element: ptr::null_mut(),
            event_type: -1,
        };
        assert_eq!(ibv_get_async_event(ctx, &mut ev), 0);
        ibv_ack_async_event(&mut ev);
        Some(ev)
    }
}

#[test]
fn asynchronous_events_reach_the_context_that_owns_the_qp() {
    // SAFETY (whole body): the C calling sequence on objects this test
    // creates and destroys in order.
    unsafe {
        let list = ibv_get_device_list(ptr::null_mut());
        let a = side(*list);
        let b = side(*list);
        ibv_free_device_list(list);
        connect(&a, &b);
        connect(&b, &a);
        // A WRITE under a wrong R_Key: the requester's completion says so,
        // the responder's QP goes to error with IBV_EVENT_QP_ACCESS_ERR.
        let wc = write_wc(&a, &b, b"denied", 0, 9, (*b.mr).rkey ^ 0x5A5A00);
        assert_eq!((wc.wr_id, wc.status), (9, IBV_WC_REM_ACCESS_ERR));
        let ev = next_async_event(b.ctx).expect("no event on the responder's context");
        assert_eq!(
            (ev.element, ev.event_type),
            (b.qp.cast(), crate::events::event_type::QP_ACCESS_ERR)
        );
        close_side(&a);
        close_side(&b);
    }
}

/// Destroy a side's objects and close its context.
unsafe fn close_side(s: &Side) {
    // SAFETY (whole body): the side's own objects, destroyed children first.
    unsafe {
        assert_eq!(ibv_destroy_qp(s.qp), 0);
        assert_eq!(ibv_dereg_mr(s.mr), 0);
        assert_eq!(ibv_destroy_cq(s.cq), 0);
        assert_eq!(ibv_dealloc_pd(s.pd), 0);
        assert_eq!(ibv_close_device(s.ctx), 0);
    }
}

#[test]
fn contexts_of_one_device_share_its_port_gids_and_qpn_space() {
    // SAFETY (whole body): the C calling sequence on objects this test
    // creates and destroys in order.
    unsafe {
        let mut n = 0;
        let list = ibv_get_device_list(&mut n);
        let dev = *list;
        let a = side(dev);
        let b = side(dev);
        let mut gid_a = ibv_gid::default();
        let mut gid_b = ibv_gid::default();
        assert_eq!(ibv_query_gid(a.ctx, 1, 0, &mut gid_a), 0);
        assert_eq!(ibv_query_gid(b.ctx, 1, 0, &mut gid_b), 0);
        assert_eq!(gid_a.bytes(), gid_b.bytes(), "one port, one GID table");
        assert_ne!((*a.qp).qp_num, (*b.qp).qp_num, "one QPN space");
        // As rdma-core's tests do: each side names the peer by the GID its
        // own context reports.
        connect_via(&a, &b, Some(gid_a));
        connect_via(&b, &a, Some(gid_b));
        write_and_wait(&a, &b, b"a to b", 8, 1);
        assert_eq!(&b.buf[8..14], b"a to b");
        write_and_wait(&b, &a, b"b to a", 16, 2);
        assert_eq!(&a.buf[16..22], b"b to a");

        // Closing one context leaves the other working: b's QP, reset and
        // connected to a third context, still moves data.
        close_side(&a);
        let c = side(dev);
        ibv_free_device_list(list);
        let mut reset = ibv_qp_attr {
            qp_state: IBV_QPS_RESET,
            ..Default::default()
        };
        assert_eq!(ibv_modify_qp(b.qp, &mut reset, IBV_QP_STATE), 0);
        connect_via(&b, &c, Some(gid_b));
        connect_via(&c, &b, Some(gid_b));
        write_and_wait(&b, &c, b"b to c", 24, 3);
        assert_eq!(&c.buf[24..30], b"b to c");
        close_side(&b);
        close_side(&c);
    }
}

/// A QP of `s`'s context receiving from `srq`, in RESET.
unsafe fn srq_qp(s: &Side, srq: *mut ibv_srq) -> *mut ibv_qp {
    let mut init = ibv_qp_init_attr {
        qp_context: ptr::null_mut(),
        send_cq: s.cq,
        recv_cq: s.cq,
        srq,
        cap: ibv_qp_cap {
            max_send_wr: 16,
            max_recv_wr: 0,
            max_send_sge: 1,
            max_recv_sge: 0,
            max_inline_data: 0,
        },
        qp_type: IBV_QPT_RC,
        sq_sig_all: 0,
    };
    // SAFETY: a live PD and CQ of the side, a live SRQ.
    let qp = unsafe { ibv_create_qp(s.pd, &mut init) };
    assert!(!qp.is_null());
    qp
}

/// Move `qp` to `state` (INIT with its port attributes).
unsafe fn move_to(qp: *mut ibv_qp, state: u32) {
    let mut a = ibv_qp_attr {
        qp_state: state,
        port_num: 1,
        qp_access_flags: IBV_ACCESS_REMOTE_WRITE,
        ..Default::default()
    };
    let mask = if state == IBV_QPS_INIT {
        IBV_QP_STATE | IBV_QP_PKEY_INDEX | IBV_QP_PORT | IBV_QP_ACCESS_FLAGS
    } else {
        IBV_QP_STATE
    };
    // SAFETY: a live QP, stack attributes.
    assert_eq!(unsafe { ibv_modify_qp(qp, &mut a, mask) }, 0);
}

#[test]
fn srq_receives_survive_a_qp_in_error_and_a_destroyed_qp() {
    // SAFETY (whole body): the C calling sequence on objects this test
    // creates and destroys in order; receive SGEs point into b's
    // registered buffer, which outlives them.
    unsafe {
        let list = ibv_get_device_list(ptr::null_mut());
        let a = side(*list);
        let b = side(*list);
        ibv_free_device_list(list);
        let mut init = ibv_srq_init_attr {
            srq_context: ptr::null_mut(),
            attr: ibv_srq_attr {
                max_wr: 16,
                max_sge: 1,
                srq_limit: 0,
            },
        };
        let srq = ibv_create_srq(b.pd, &mut init);
        assert!(!srq.is_null());
        let receiver = srq_qp(&b, srq);
        let failing = srq_qp(&b, srq);
        let destroyed = srq_qp(&b, srq);
        let b1 = Side {
            ctx: b.ctx,
            pd: b.pd,
            cq: b.cq,
            qp: receiver,
            mr: b.mr,
            buf: Vec::new(),
            lid: b.lid,
        };
        connect(&a, &b1);
        connect(&b1, &a);
        move_to(failing, IBV_QPS_INIT);
        move_to(destroyed, IBV_QPS_INIT);
        // Nine receives: the pool lends three to each QP that takes them.
        const N: usize = 9;
        for i in 0..N {
            let mut sge = ibv_sge {
                addr: b.buf.as_ptr() as u64 + 64 * i as u64,
                length: 64,
                lkey: (*b.mr).lkey,
            };
            let mut wr = ibv_recv_wr {
                wr_id: 100 + i as u64,
                next: ptr::null_mut(),
                sg_list: &mut sge,
                num_sge: 1,
            };
            let mut bad = ptr::null_mut();
            assert_eq!(crate::post::post_srq_recv(srq, &mut wr, &mut bad), 0);
        }
        // Armed below what it holds: the limit event waits.
        let mut limit = ibv_srq_attr {
            max_wr: 0,
            max_sge: 0,
            srq_limit: 3,
        };
        assert_eq!(ibv_modify_srq(srq, &mut limit, IBV_SRQ_LIMIT), 0);
        // One QP fails (its lent receives are flushed), one is destroyed:
        // neither may take the program's receives with it.
        move_to(failing, IBV_QPS_ERR);
        let ev = next_async_event(b.ctx).expect("no last-WQE event");
        assert_eq!(
            (ev.element, ev.event_type),
            (
                failing.cast(),
                crate::events::event_type::QP_LAST_WQE_REACHED
            )
        );
        assert_eq!(ibv_destroy_qp(destroyed), 0);

        let ops = &(*a.ctx).ops;
        for i in 0..N {
            let mut sge = ibv_sge {
                addr: a.buf.as_ptr() as u64,
                length: 16,
                lkey: (*a.mr).lkey,
            };
            let mut wr = ibv_send_wr {
                wr_id: i as u64,
                sg_list: &mut sge,
                num_sge: 1,
                opcode: IBV_WR_SEND,
                send_flags: IBV_SEND_SIGNALED,
                ..Default::default()
            };
            let mut bad = ptr::null_mut();
            assert_eq!((ops.post_send.unwrap())(a.qp, &mut wr, &mut bad), 0);
        }
        let mut sent = 0;
        let mut received = Vec::new();
        let start = Instant::now();
        while sent < N || received.len() < N {
            assert!(
                start.elapsed() < Duration::from_secs(10),
                "{sent} sends and receives {received:?} completed"
            );
            let mut wc = ibv_wc::default();
            if (ops.poll_cq.unwrap())(a.cq, 1, &mut wc) == 1 {
                assert_eq!(wc.status, IBV_WC_SUCCESS, "send {}", wc.wr_id);
                sent += 1;
            }
            if (ops.poll_cq.unwrap())(b.cq, 1, &mut wc) == 1 {
                assert_eq!(
                    (wc.status, wc.qp_num),
                    (IBV_WC_SUCCESS, (*receiver).qp_num),
                    "receive {}",
                    wc.wr_id
                );
                received.push(wc.wr_id);
            }
            std::thread::yield_now();
        }
        received.sort_unstable();
        assert_eq!(received, (100..100 + N as u64).collect::<Vec<_>>());
        // Emptied below its limit: the SRQ says so once, and disarms.
        let ev = next_async_event(b.ctx).expect("no SRQ limit event");
        assert_eq!(
            (ev.element, ev.event_type),
            (srq.cast(), crate::events::event_type::SRQ_LIMIT_REACHED)
        );
        let mut now = ibv_srq_attr::default();
        assert_eq!(ibv_query_srq(srq, &mut now), 0);
        assert_eq!((now.max_wr, now.srq_limit), (16, 0));

        assert_eq!(ibv_destroy_qp(receiver), 0);
        assert_eq!(ibv_destroy_qp(failing), 0);
        assert_eq!(ibv_destroy_srq(srq), 0);
        close_side(&a);
        close_side(&b);
    }
}

#[test]
fn inline_data_is_read_at_post_time_and_a_null_address_is_refused() {
    // SAFETY (whole body): the C calling sequence on objects this test
    // creates; inline SGEs point at a live stack array or are refused.
    unsafe {
        let list = ibv_get_device_list(ptr::null_mut());
        let a = side(*list);
        let b = side(*list);
        ibv_free_device_list(list);
        let mut init = ibv_qp_init_attr {
            qp_context: ptr::null_mut(),
            send_cq: a.cq,
            recv_cq: a.cq,
            srq: ptr::null_mut(),
            cap: ibv_qp_cap {
                max_send_wr: 16,
                max_recv_wr: 16,
                max_send_sge: 2,
                max_recv_sge: 1,
                max_inline_data: 64,
            },
            qp_type: IBV_QPT_RC,
            sq_sig_all: 0,
        };
        let inline_qp = ibv_create_qp(a.pd, &mut init);
        assert!(!inline_qp.is_null());
        let a2 = Side {
            ctx: a.ctx,
            pd: a.pd,
            cq: a.cq,
            qp: inline_qp,
            mr: a.mr,
            buf: Vec::new(),
            lid: a.lid,
        };
        connect(&a2, &b);
        connect(&b, &a2);
        let ops = &(*a.ctx).ops;
        // An unregistered stack buffer, copied while the post runs.
        let data = *b"inline bytes";
        let mut sge = [
            ibv_sge {
                addr: data.as_ptr() as u64,
                length: data.len() as u32,
                lkey: 0,
            },
            ibv_sge {
                addr: 0,
                length: 8,
                lkey: 0,
            },
        ];
        let mut wr = ibv_send_wr {
            wr_id: 1,
            sg_list: sge.as_mut_ptr(),
            num_sge: 2,
            opcode: IBV_WR_RDMA_WRITE,
            send_flags: IBV_SEND_SIGNALED | IBV_SEND_INLINE,
            ..Default::default()
        };
        wr.wr.rdma = ibv_send_wr_rdma {
            remote_addr: b.buf.as_ptr() as u64 + 32,
            rkey: (*b.mr).rkey,
        };
        // A null address with data: refused, never read.
        let mut bad = ptr::null_mut();
        assert_eq!(
            (ops.post_send.unwrap())(inline_qp, &mut wr, &mut bad),
            libc::EINVAL
        );
        assert_eq!(bad, ptr::addr_of_mut!(wr));
        // A range that wraps the address space: refused too.
        (*wr.sg_list.add(1)).addr = u64::MAX - 3;
        assert_eq!(
            (ops.post_send.unwrap())(inline_qp, &mut wr, &mut bad),
            libc::EINVAL
        );
        // The readable one alone goes.
        wr.num_sge = 1;
        assert_eq!((ops.post_send.unwrap())(inline_qp, &mut wr, &mut bad), 0);
        let mut wc = ibv_wc::default();
        let start = Instant::now();
        while (ops.poll_cq.unwrap())(a.cq, 1, &mut wc) == 0 {
            assert!(start.elapsed() < Duration::from_secs(10), "no completion");
            std::thread::yield_now();
        }
        assert_eq!((wc.wr_id, wc.status), (1, IBV_WC_SUCCESS));
        assert_eq!(&b.buf[32..32 + data.len()], &data);
        assert_eq!(ibv_destroy_qp(inline_qp), 0);
        close_side(&a);
        close_side(&b);
    }
}

#[test]
fn the_device_answers_queries_and_refusals_as_a_roce_nic_does() {
    // SAFETY (whole body): queries and creations on a context this test
    // opens and closes; the extended query goes through the slot the inline
    // ibv_query_device_ex calls.
    unsafe {
        let list = ibv_get_device_list(ptr::null_mut());
        let a = side(*list);
        ibv_free_device_list(list);
        let mut attr = ibv_device_attr::default();
        assert_eq!(ibv_query_device(a.ctx, &mut attr), 0);
        assert_eq!(
            (attr.vendor_id, attr.vendor_part_id, attr.phys_port_cnt),
            (0xFF_FFFF, 0x524C, 1)
        );
        assert!(attr.max_qp > 0 && attr.max_cqe > 0 && attr.max_pkeys > 0);

        let vctx = (a.ctx as *mut u8)
            .sub(std::mem::offset_of!(verbs_context, context))
            .cast::<verbs_context>();
        let slot = (*vctx).query_device_ex.expect("query_device_ex slot");
        let query = std::mem::transmute::<unsafe extern "C" fn(), query_device_ex_fn>(slot);
        let mut ex = ibv_device_attr_ex::default();
        let size = std::mem::size_of::<ibv_device_attr_ex>();
        assert_eq!(query(a.ctx, ptr::null(), &mut ex, size), 0);
        assert_eq!(ex.orig_attr.vendor_id, attr.vendor_id);
        assert_eq!(ex.phys_port_cnt_ex, 1);
        let input = ibv_query_device_ex_input { comp_mask: 1 };
        assert_eq!(query(a.ctx, &input, &mut ex, size), libc::EINVAL);

        // More entries than max_cqe, or a completion vector the device
        // lacks: EINVAL.
        let too_many = attr.max_cqe + 1;
        let cq = ibv_create_cq(a.ctx, too_many, ptr::null_mut(), ptr::null_mut(), 0);
        assert!(cq.is_null());
        assert_eq!(errno(), libc::EINVAL);
        let cq = ibv_create_cq(a.ctx, 8, ptr::null_mut(), ptr::null_mut(), 1);
        assert!(cq.is_null());
        assert_eq!(errno(), libc::EINVAL);

        // An AH without a GRH and without a LID names no peer on RoCE.
        let mut ah = ibv_ah_attr {
            port_num: 1,
            ..Default::default()
        };
        assert!(ibv_create_ah(a.pd, &mut ah).is_null());
        assert_eq!(errno(), libc::EINVAL);
        close_side(&a);
    }
}

/// `IBV_ACCESS_ON_DEMAND` (`enum ibv_access_flags`).
const IBV_ACCESS_ON_DEMAND: u32 = 1 << 6;

#[test]
fn on_demand_paging_works_through_the_c_interface() {
    // SAFETY (whole body): the C calling sequence on objects this test
    // creates and destroys in order; the ops-table slots are called with
    // their C types.
    unsafe {
        let list = ibv_get_device_list(ptr::null_mut());
        let a = side(*list);
        let b = side(*list);
        ibv_free_device_list(list);
        let vctx = (a.ctx as *mut u8)
            .sub(std::mem::offset_of!(verbs_context, context))
            .cast::<verbs_context>();

        // The capabilities, as test_odp.py reads them.
        let slot = (*vctx).query_device_ex.expect("query_device_ex slot");
        let query = std::mem::transmute::<unsafe extern "C" fn(), query_device_ex_fn>(slot);
        let mut ex = ibv_device_attr_ex::default();
        let size = std::mem::size_of::<ibv_device_attr_ex>();
        assert_eq!(query(a.ctx, ptr::null(), &mut ex, size), 0);
        assert_eq!(ex.odp_caps.general_caps, 0b11, "ODP and implicit ODP");
        assert_eq!(
            ex.odp_caps.per_transport_caps[0], 0x3F,
            "RC: every operation"
        );
        assert_eq!(ex.xrc_odp_caps, 0);

        connect(&a, &b);
        connect(&b, &a);
        let rights = IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_REMOTE_READ;
        let odp = (rights | IBV_ACCESS_ON_DEMAND) as c_int;
        // The implicit region (rdma-core's NULL, SIZE_MAX) takes a WRITE
        // into b's ordinary buffer.
        let implicit = ibv_reg_mr(b.pd, ptr::null_mut(), usize::MAX, odp);
        assert!(!implicit.is_null(), "errno {}", errno());
        assert_eq!(
            ((*implicit).addr, (*implicit).length),
            (ptr::null_mut(), usize::MAX)
        );
        let wc = write_wc(
            &a,
            &b,
            b"through the whole address space",
            200,
            11,
            (*implicit).rkey,
        );
        assert_eq!((wc.wr_id, wc.status), (11, IBV_WC_SUCCESS));
        assert_eq!(&b.buf[200..231], b"through the whole address space");

        // advise_mr through its slot, with rdma-core's answers.
        let slot = (*vctx).advise_mr.expect("advise_mr slot");
        let advise = std::mem::transmute::<unsafe extern "C" fn(), crate::odp::AdviseMrFn>(slot);
        let mut sg = ibv_sge {
            addr: b.buf.as_ptr() as u64,
            length: 64,
            lkey: (*implicit).lkey,
        };
        let (prefetch_write, flush) = (1, 1);
        assert_eq!(advise(b.pd, prefetch_write, flush, &mut sg, 1), 0);
        assert_eq!(advise(b.pd, 3, flush, &mut sg, 1), libc::EOPNOTSUPP);
        assert_eq!(advise(b.pd, prefetch_write, 2, &mut sg, 1), libc::EINVAL);
        assert_eq!(
            advise(b.pd, prefetch_write, flush, &mut sg, 0),
            libc::EINVAL
        );
        sg.lkey = (*b.mr).lkey;
        assert_eq!(
            advise(b.pd, prefetch_write, flush, &mut sg, 1),
            libc::ENOENT
        );
        assert_eq!(advise(b.pd, prefetch_write, 0, &mut sg, 1), libc::EINVAL);

        // An ODP region over a page the process may not touch: a peer's
        // WRITE there is NAKed (a remote access error), no signal.
        let page = libc::mmap(
            ptr::null_mut(),
            4096,
            libc::PROT_NONE,
            libc::MAP_PRIVATE | libc::MAP_ANONYMOUS,
            -1,
            0,
        );
        assert_ne!(page, libc::MAP_FAILED);
        let fenced = ibv_reg_mr(b.pd, page, 4096, odp);
        assert!(!fenced.is_null(), "errno {}", errno());
        let src = a.buf.as_ptr().cast_mut();
        let mut sge = ibv_sge {
            addr: src as u64,
            length: 16,
            lkey: (*a.mr).lkey,
        };
        let mut wr = ibv_send_wr {
            wr_id: 12,
            sg_list: &mut sge,
            num_sge: 1,
            opcode: IBV_WR_RDMA_WRITE,
            send_flags: IBV_SEND_SIGNALED,
            ..Default::default()
        };
        wr.wr.rdma = ibv_send_wr_rdma {
            remote_addr: page as u64 + 64,
            rkey: (*fenced).rkey,
        };
        let ops = &(*a.ctx).ops;
        let mut bad = ptr::null_mut();
        assert_eq!((ops.post_send.unwrap())(a.qp, &mut wr, &mut bad), 0);
        let mut wc = ibv_wc::default();
        let start = Instant::now();
        while (ops.poll_cq.unwrap())(a.cq, 1, &mut wc) == 0 {
            assert!(start.elapsed() < Duration::from_secs(10), "no completion");
            std::thread::yield_now();
        }
        assert_eq!((wc.wr_id, wc.status), (12, IBV_WC_REM_ACCESS_ERR));

        assert_eq!(ibv_dereg_mr(fenced), 0);
        assert_eq!(ibv_dereg_mr(implicit), 0);
        libc::munmap(page, 4096);
        close_side(&a);
        close_side(&b);
    }
}
