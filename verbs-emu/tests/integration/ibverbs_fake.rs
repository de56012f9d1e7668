//! The hardware backend end to end, against a loopback stand-in for
//! libibverbs.
//!
//! No RDMA device is reachable here, so `tests/data/fake_ibverbs.c` (built
//! against the real `<infiniband/verbs.h>`, so its structs have rdma-core's
//! layout) plays one: it exports the verbs the backend resolves, serves the
//! inline verbs through the context's function table and `ibv_query_port`
//! through `verbs_context`, and moves bytes between registered regions. The
//! tests drive it through the public verbs API, so everything between an
//! application and a provider runs: handle tables, attribute and work
//! request translation, list linking and chunking, `bad_wr` mapping,
//! completion translation, the completion channel.
//!
//! What this cannot show is how a real NIC and kernel behave; it shows that
//! this backend speaks to a provider exactly as rdma-core's headers do.

use crate::mr_bytes::{bytes, edit};
use std::os::raw::c_int;
use std::path::PathBuf;
use std::sync::{Arc, Mutex, MutexGuard, OnceLock};
use std::time::{Duration, Instant};

use verbs_emu::backend::ibverbs::ffi::*;
use verbs_emu::backend::ibverbs::{IbverbsBackend, IbverbsError, Library};
use verbs_emu::backend::{Backend, CqHandle};
use verbs_emu::verbs::{
    AccessFlags, AhAttr, CompletionQueue, Context, Gid, MemoryRegion, Mtu, QpAttr, QpState, QpType,
    QueuePair, RecvWr, SendFlags, SendOp, SendWr, UdDest, VerbsError, WcFlags, WcOpcode, WcStatus,
};
use verbs_emu::wire::{Qpn, Rkey};

use super::ibverbs_abi::compile_c;

const FAKE_SOURCE: &str = include_str!("../data/fake_ibverbs.c");
const TIMEOUT: Duration = Duration::from_secs(5);

/// The fake keeps global state and is not thread-safe: one test at a time.
fn serial() -> MutexGuard<'static, ()> {
    static LOCK: Mutex<()> = Mutex::new(());
    LOCK.lock().unwrap_or_else(|poison| poison.into_inner())
}

/// The built fake library, once per test binary (`None`: skipped).
fn fake_library() -> Option<PathBuf> {
    static PATH: OnceLock<Option<PathBuf>> = OnceLock::new();
    PATH.get_or_init(|| {
        compile_c(
            "fake",
            FAKE_SOURCE,
            "libfake_ibverbs.so",
            &["-shared", "-fPIC"],
        )
    })
    .clone()
}

fn all_access() -> AccessFlags {
    AccessFlags::LOCAL_WRITE
        | AccessFlags::REMOTE_WRITE
        | AccessFlags::REMOTE_READ
        | AccessFlags::REMOTE_ATOMIC
}

/// Two RC QPs of one fake device connected to each other, with a region
/// each.
struct Pair {
    /// A second handle on the fake, for its test hooks.
    hooks: libloading::Library,
    context: Context,
    cq: CompletionQueue,
    a: QueuePair,
    b: QueuePair,
    mr_a: MemoryRegion,
    mr_b: MemoryRegion,
}

impl Pair {
    fn new(path: PathBuf) -> Self {
        // A second handle on the fake for its test hooks (same instance).
        // SAFETY: the fake's constructors do nothing.
        let hooks = unsafe { libloading::Library::new(&path) }.expect("load the fake");
        let library = Library::load_from(path.to_str().unwrap()).expect("load");
        let backend = IbverbsBackend::new(library.open(None).expect("open fake0"));
        let context = Context::from_backend(Arc::new(backend));
        let pd = context.alloc_pd().unwrap();
        let cq = context.create_cq(256).unwrap();
        let build = || {
            pd.qp_builder(QpType::Rc)
                .cq(&cq)
                .max_send_wr(100)
                .max_recv_wr(64)
                .build()
                .unwrap()
        };
        let (a, b) = (build(), build());
        let mr_a = pd.alloc_mr(8192, all_access()).unwrap();
        let mr_b = pd.alloc_mr(8192, all_access()).unwrap();
        let end_a = a.endpoint(0x1000, 0, Some(&mr_a)).unwrap();
        let end_b = b.endpoint(0x2000, 0, Some(&mr_b)).unwrap();
        a.connect(0x1000, &end_b, Mtu::Mtu1024, all_access())
            .unwrap();
        b.connect(0x2000, &end_a, Mtu::Mtu1024, all_access())
            .unwrap();
        Self {
            hooks,
            context,
            cq,
            a,
            b,
            mr_a,
            mr_b,
        }
    }

    /// The fake's record of the last `ibv_modify_qp` on `qpn`.
    fn last_modify(&self, qpn: Qpn) -> (ibv_qp_attr, c_int) {
        type Hook = unsafe extern "C" fn(u32, *mut ibv_qp_attr, *mut c_int) -> c_int;
        // SAFETY: the fake defines this hook with exactly this prototype.
        let hook: libloading::Symbol<'_, Hook> =
            unsafe { self.hooks.get(b"fake_last_modify\0") }.unwrap();
        let mut attr = ibv_qp_attr::default();
        let mut mask = 0;
        // SAFETY: valid out-pointers.
        assert_eq!(unsafe { hook(qpn.value(), &mut attr, &mut mask) }, 0);
        (attr, mask)
    }

    fn compat_query_port_calls(&self) -> c_int {
        // SAFETY: the fake defines this hook with this prototype.
        let hook: libloading::Symbol<'_, unsafe extern "C" fn() -> c_int> =
            unsafe { self.hooks.get(b"fake_compat_query_port_calls\0") }.unwrap();
        // SAFETY: no arguments.
        unsafe { hook() }
    }

    fn write(&self, wr_id: u64, offset: usize, len: u32, rkey: Rkey) -> SendWr<'static> {
        let sges = Box::leak(Box::new([self.mr_a.sge(offset, len).unwrap()]));
        SendWr {
            wr_id,
            sg_list: &sges[..],
            op: SendOp::Write {
                remote_addr: self.mr_b.addr() + offset as u64,
                rkey,
            },
            flags: SendFlags::SIGNALED,
            ud: None,
        }
    }
}

macro_rules! fake_or_skip {
    () => {{
        let guard = serial();
        let Some(path) = fake_library() else { return };
        (guard, path)
    }};
}

#[test]
fn fake_device_is_listed_opened_and_queried_like_hardware() {
    let (_guard, path) = fake_or_skip!();
    let library = Library::load_from(path.to_str().unwrap()).unwrap();
    let devices = library.devices().unwrap();
    assert_eq!(devices.len(), 1);
    assert_eq!(devices[0].name, "fake0");
    assert_eq!(
        devices[0].node_guid, 0x0002_c903_00a1_b2c3,
        "be64 GUID in host order"
    );
    let missing = library.open(Some("mlx5_9")).unwrap_err();
    assert!(
        matches!(&missing, IbverbsError::DeviceNotFound { available, .. } if available == "fake0"),
        "{missing}"
    );

    let pair = Pair::new(path);
    let backend = pair.context.backend();
    let device = backend.query_device().unwrap();
    assert_eq!(
        (
            device.name.as_str(),
            device.fw_ver.as_str(),
            device.vendor_id
        ),
        ("fake0", "1.2.3", 0x02c9)
    );
    assert_eq!(device.node_guid, 0x0002_c903_00a1_b2c3);
    let port = backend.query_port(1).unwrap();
    assert_eq!(
        (port.state, port.max_mtu, port.active_mtu),
        (4, Mtu::Mtu4096, Mtu::Mtu1024)
    );
    assert!(port.link_layer_ethernet);
    // The extended verbs_context::query_port answered, not the compat symbol.
    assert_eq!(pair.compat_query_port_calls(), 0);
    let error = backend.query_port(2).unwrap_err();
    assert!(
        matches!(&error, VerbsError::Os { verb: "ibv_query_port", source } if source.raw_os_error() == Some(libc::EINVAL)),
        "{error}"
    );
    assert_eq!(
        backend.query_gid(1, 0).unwrap(),
        Gid::from_ip("10.0.0.1".parse().unwrap())
    );
    let error = backend.query_gid(1, 5).unwrap_err();
    assert!(
        error.to_string().starts_with("ibv_query_gid failed"),
        "{error}"
    );
}

#[test]
fn connect_sends_rdma_cores_attributes_and_the_granted_caps_come_back() {
    let (_guard, path) = fake_or_skip!();
    let pair = Pair::new(path);
    assert_eq!(pair.a.state().unwrap(), QpState::Rts);
    // The fake rounds the send queue up and reports its inline limit.
    assert_eq!(
        (pair.a.cap().max_send_wr, pair.a.cap().max_inline_data),
        (128, 64)
    );
    let (rts, mask) = pair.last_modify(pair.a.qpn());
    assert_eq!(
        mask,
        IBV_QP_STATE
            | IBV_QP_SQ_PSN
            | IBV_QP_TIMEOUT
            | IBV_QP_RETRY_CNT
            | IBV_QP_RNR_RETRY
            | IBV_QP_MAX_QP_RD_ATOMIC
    );
    assert_eq!(
        (
            rts.qp_state,
            rts.sq_psn,
            rts.timeout,
            rts.retry_cnt,
            rts.rnr_retry,
            rts.max_rd_atomic
        ),
        (IBV_QPS_RTS, 0x1000, 14, 7, 7, 16)
    );
    // The fake refuses an RTR without a global address vector, so the
    // connect above proves AV, dgid and is_global crossed correctly.
    // A transition the state machine forbids never reaches the library.
    let error = pair
        .a
        .modify(&QpAttr::new().with_state(QpState::Rtr))
        .unwrap_err();
    assert!(
        matches!(error, VerbsError::InvalidTransition { .. }),
        "{error}"
    );
    assert_eq!(pair.last_modify(pair.a.qpn()).0.qp_state, IBV_QPS_RTS);
}

#[test]
fn write_read_send_and_atomics_move_the_right_bytes() {
    let (_guard, path) = fake_or_skip!();
    let pair = Pair::new(path);
    for (index, byte) in edit(&pair.mr_a).iter_mut().enumerate() {
        *byte = (index % 251) as u8;
    }
    let rkey_b = pair.mr_b.rkey();

    // RDMA WRITE a -> b.
    let write = pair.write(1, 100, 1000, rkey_b);
    // SAFETY: the SGE lies in mr_a, which outlives the completion below.
    unsafe { pair.a.post_send(&[write]) }.unwrap();
    let wc = pair.cq.poll_n(1, TIMEOUT).unwrap();
    assert_eq!(
        (wc[0].wr_id, wc[0].status, wc[0].opcode),
        (1, WcStatus::Success, WcOpcode::RdmaWrite)
    );
    assert_eq!(wc[0].byte_len, 1000);
    assert_eq!(wc[0].qp_num, pair.a.qpn());
    assert_eq!(bytes(&pair.mr_b)[100..1100], bytes(&pair.mr_a)[100..1100]);
    assert!(bytes(&pair.mr_b)[..100].iter().all(|&b| b == 0));

    // RDMA READ b -> a at another offset.
    let read_sge = [pair.mr_a.sge(4096, 1000).unwrap()];
    let read = SendWr {
        wr_id: 2,
        sg_list: &read_sge,
        op: SendOp::Read {
            remote_addr: pair.mr_b.addr() + 100,
            rkey: rkey_b,
        },
        flags: SendFlags::SIGNALED,
        ud: None,
    };
    // SAFETY: as above.
    unsafe { pair.a.post_send(&[read]) }.unwrap();
    let wc = pair.cq.poll_n(1, TIMEOUT).unwrap();
    assert_eq!(
        (wc[0].wr_id, wc[0].opcode, wc[0].byte_len),
        (2, WcOpcode::RdmaRead, 1000)
    );
    assert_eq!(bytes(&pair.mr_a)[4096..5096], bytes(&pair.mr_a)[100..1100]);

    // SEND with immediate into a posted receive.
    let recv_sge = [pair.mr_b.sge(6000, 512).unwrap()];
    // SAFETY: the receive buffer lies in mr_b.
    unsafe {
        pair.b.post_recv(&[RecvWr {
            wr_id: 30,
            sg_list: &recv_sge,
        }])
    }
    .unwrap();
    let send_sge = [pair.mr_a.sge(0, 300).unwrap()];
    let send = SendWr {
        wr_id: 3,
        sg_list: &send_sge,
        op: SendOp::SendWithImm(0xdead_beef),
        flags: SendFlags::SIGNALED,
        ud: None,
    };
    // SAFETY: as above.
    unsafe { pair.a.post_send(&[send]) }.unwrap();
    let mut wcs = pair.cq.poll_n(2, TIMEOUT).unwrap();
    wcs.sort_by_key(|wc| wc.wr_id);
    assert_eq!((wcs[0].wr_id, wcs[0].opcode), (3, WcOpcode::Send));
    let recv = wcs[1];
    assert_eq!(
        (recv.wr_id, recv.opcode, recv.byte_len),
        (30, WcOpcode::Recv, 300)
    );
    assert_eq!(
        recv.imm(),
        Some(0xdead_beef),
        "immediate data survives both byte orders"
    );
    assert_eq!((recv.qp_num, recv.src_qp), (pair.b.qpn(), pair.a.qpn()));
    assert_eq!(bytes(&pair.mr_b)[6000..6300], bytes(&pair.mr_a)[..300]);

    // Fetch-and-add and compare-and-swap on a word of mr_b.
    edit(&pair.mr_b)[7000..7008].copy_from_slice(&40u64.to_ne_bytes());
    let old_sge = [pair.mr_a.sge(7000, 8).unwrap()];
    let target = pair.mr_b.addr() + 7000;
    let ops = [
        SendOp::FetchAdd {
            remote_addr: target,
            rkey: rkey_b,
            add: 2,
        },
        SendOp::CompareSwap {
            remote_addr: target,
            rkey: rkey_b,
            compare: 42,
            swap: 7,
        },
    ];
    for (index, op) in ops.into_iter().enumerate() {
        let wr = SendWr {
            wr_id: 40 + index as u64,
            sg_list: &old_sge,
            op,
            flags: SendFlags::SIGNALED,
            ud: None,
        };
        // SAFETY: as above.
        unsafe { pair.a.post_send(&[wr]) }.unwrap();
        let wc = pair.cq.poll_n(1, TIMEOUT).unwrap();
        assert!(wc[0].is_ok(), "{:?}", wc[0]);
        let old = u64::from_ne_bytes(bytes(&pair.mr_a)[7000..7008].try_into().unwrap());
        assert_eq!(old, [40, 42][index]);
    }
    let now = u64::from_ne_bytes(bytes(&pair.mr_b)[7000..7008].try_into().unwrap());
    assert_eq!(now, 7);
}

#[test]
fn bad_rkey_completes_with_remote_access_error() {
    let (_guard, path) = fake_or_skip!();
    let pair = Pair::new(path);
    let bad = pair.write(9, 0, 64, Rkey::new(pair.mr_b.rkey().value() ^ 0x55));
    // SAFETY: the SGE lies in mr_a.
    unsafe { pair.a.post_send(&[bad]) }.unwrap();
    let wc = pair.cq.poll_n(1, TIMEOUT).unwrap();
    assert_eq!((wc[0].wr_id, wc[0].status), (9, WcStatus::RemAccessErr));
}

#[test]
fn long_lists_are_posted_in_chunks_in_order() {
    let (_guard, path) = fake_or_skip!();
    let pair = Pair::new(path);
    // 40 requests: more than one 16-request chunk, two SGEs each.
    let sges: Vec<[verbs_emu::verbs::Sge; 2]> = (0..40)
        .map(|index| {
            [
                pair.mr_a.sge(index * 100, 50).unwrap(),
                pair.mr_a.sge(index * 100 + 50, 50).unwrap(),
            ]
        })
        .collect();
    let wrs: Vec<SendWr<'_>> = sges
        .iter()
        .enumerate()
        .map(|(index, sge)| SendWr {
            wr_id: 1000 + index as u64,
            sg_list: sge,
            op: SendOp::Write {
                remote_addr: pair.mr_b.addr() + index as u64 * 100,
                rkey: pair.mr_b.rkey(),
            },
            flags: if index % 2 == 0 {
                SendFlags::SIGNALED
            } else {
                SendFlags::EMPTY
            },
            ud: None,
        })
        .collect();
    // SAFETY: every SGE lies in mr_a.
    unsafe { pair.a.post_send(&wrs) }.unwrap();
    let wcs = pair.cq.poll_n(20, TIMEOUT).unwrap();
    let ids: Vec<u64> = wcs.iter().map(|wc| wc.wr_id).collect();
    let expected: Vec<u64> = (0..40).step_by(2).map(|index| 1000 + index).collect();
    assert_eq!(ids, expected, "signaled requests only, in posting order");
    assert!(wcs.iter().all(|wc| wc.byte_len == 100));
}

#[test]
fn a_refused_request_reports_its_index_and_the_ones_before_it_run() {
    let (_guard, path) = fake_or_skip!();
    let pair = Pair::new(path);
    let rkey = pair.mr_b.rkey();
    // The provider refuses the third (the fake does not do SEND_WITH_INV):
    // bad_wr maps back to index 2 of the list.
    let mut wrs = vec![pair.write(1, 0, 8, rkey), pair.write(2, 8, 8, rkey)];
    wrs.push(SendWr {
        wr_id: 3,
        sg_list: &[],
        op: SendOp::SendWithInv(Rkey::new(5)),
        flags: SendFlags::SIGNALED,
        ud: None,
    });
    // SAFETY: SGEs lie in mr_a.
    let error = unsafe { pair.a.post_send(&wrs) }.unwrap_err();
    assert_eq!(error.index, 2);
    assert!(
        matches!(&error.error, VerbsError::Os { verb: "ibv_post_send", source } if source.raw_os_error() == Some(libc::EINVAL)),
        "{error}"
    );
    let ids: Vec<u64> = pair
        .cq
        .poll_n(2, TIMEOUT)
        .unwrap()
        .iter()
        .map(|wc| wc.wr_id)
        .collect();
    assert_eq!(ids, [1, 2]);

    // Our own validation stops at index 1 (an atomic needs one 8-byte SGE)
    // after posting index 0.
    let short = [pair.mr_a.sge(0, 4).unwrap()];
    let wrs = [
        pair.write(4, 0, 8, rkey),
        SendWr {
            wr_id: 5,
            sg_list: &short,
            op: SendOp::FetchAdd {
                remote_addr: pair.mr_b.addr(),
                rkey,
                add: 1,
            },
            flags: SendFlags::SIGNALED,
            ud: None,
        },
        pair.write(6, 0, 8, rkey),
    ];
    // SAFETY: SGEs lie in mr_a.
    let error = unsafe { pair.a.post_send(&wrs) }.unwrap_err();
    assert_eq!(error.index, 1);
    assert!(
        error.to_string().contains("exactly one 8-byte SGE"),
        "{error}"
    );
    let ids: Vec<u64> = pair
        .cq
        .poll_n(1, TIMEOUT)
        .unwrap()
        .iter()
        .map(|wc| wc.wr_id)
        .collect();
    assert_eq!(ids, [4]);
    assert!(
        !pair.cq.wait(Duration::from_millis(1)).unwrap(),
        "nothing else ran"
    );
}

#[test]
fn wait_sleeps_on_the_channel_and_consumes_nothing() {
    let (_guard, path) = fake_or_skip!();
    let pair = Pair::new(path);
    let start = Instant::now();
    assert!(!pair.cq.wait(Duration::from_millis(30)).unwrap());
    assert!(
        start.elapsed() >= Duration::from_millis(30),
        "{:?}",
        start.elapsed()
    );

    let write = pair.write(77, 0, 16, pair.mr_b.rkey());
    // SAFETY: the SGE lies in mr_a.
    unsafe { pair.a.post_send(&[write]) }.unwrap();
    assert!(pair.cq.wait(TIMEOUT).unwrap());
    assert!(
        pair.cq.wait(TIMEOUT).unwrap(),
        "waiting twice still sees it"
    );
    let wc = pair.cq.poll_n(1, TIMEOUT).unwrap();
    assert_eq!(wc[0].wr_id, 77);
    assert!(!pair.cq.wait(Duration::from_millis(1)).unwrap());

    // A completion that arrives while the waiter sleeps wakes it through
    // the completion channel (the fake writes its eventfd when armed).
    std::thread::scope(|scope| {
        let waiter = scope.spawn(|| pair.cq.wait(TIMEOUT).unwrap());
        std::thread::sleep(Duration::from_millis(20));
        let write = pair.write(78, 0, 16, pair.mr_b.rkey());
        // SAFETY: the SGE lies in mr_a.
        unsafe { pair.a.post_send(&[write]) }.unwrap();
        assert!(waiter.join().unwrap());
    });
    assert_eq!(pair.cq.poll_n(1, TIMEOUT).unwrap()[0].wr_id, 78);
}

#[test]
fn handles_are_checked_and_parents_in_use_are_busy() {
    let (_guard, path) = fake_or_skip!();
    let pair = Pair::new(path.clone());
    let backend = pair.context.backend();
    let error = backend.destroy_cq(pair.cq.handle()).unwrap_err();
    assert!(
        matches!(error, VerbsError::Busy { object: "CQ", .. }),
        "{error}"
    );
    let error = backend.poll_cq(CqHandle(12345), &mut []).unwrap_err();
    assert!(matches!(error, VerbsError::UnknownHandle { .. }), "{error}");

    // A PD with a region is busy; once the region is gone it deallocates,
    // and destroyed handles are unknown afterwards.
    let pd = backend.alloc_pd().unwrap();
    let mut buffer = vec![0u8; 256];
    // SAFETY: `buffer` outlives the registration (deregistered below).
    let keys = unsafe {
        backend.reg_mr(
            pd,
            buffer.as_mut_ptr(),
            buffer.len(),
            AccessFlags::LOCAL_WRITE,
        )
    }
    .unwrap();
    assert!(keys.pinned && keys.pin_error.is_none());
    let error = backend.dealloc_pd(pd).unwrap_err();
    assert!(
        matches!(error, VerbsError::Busy { object: "PD", .. }),
        "{error}"
    );
    backend.dereg_mr(keys.handle).unwrap();
    let error = backend.dereg_mr(keys.handle).unwrap_err();
    assert!(
        matches!(error, VerbsError::UnknownHandle { object: "MR", .. }),
        "{error}"
    );
    backend.dealloc_pd(pd).unwrap();
    let error = backend.dealloc_pd(pd).unwrap_err();
    assert!(
        matches!(error, VerbsError::UnknownHandle { object: "PD", .. }),
        "{error}"
    );
    drop(buffer);

    // Another device's handle is unknown here too.
    let other = IbverbsBackend::new(
        Library::load_from(path.to_str().unwrap())
            .unwrap()
            .open(None)
            .unwrap(),
    );
    let error = other.poll_cq(pair.cq.handle(), &mut []).unwrap_err();
    assert!(matches!(error, VerbsError::UnknownHandle { .. }), "{error}");
}

#[test]
fn optional_access_flags_register_through_reg_mr_iova2() {
    let (_guard, path) = fake_or_skip!();
    let pair = Pair::new(path);
    let pd = pair.context.alloc_pd().unwrap();
    // Relaxed ordering is in IBV_ACCESS_OPTIONAL_RANGE: the fake's
    // ibv_reg_mr refuses it, its ibv_reg_mr_iova2 (with iova = addr) takes it.
    let relaxed = AccessFlags(IBV_ACCESS_RELAXED_ORDERING) | AccessFlags::LOCAL_WRITE;
    let mr = pd.alloc_mr(4096, relaxed).unwrap();
    assert!(mr.pinned());
    assert_ne!(mr.lkey().value(), 0);
}

#[test]
fn ud_sends_go_through_an_address_handle_and_land_behind_a_grh() {
    let (_guard, path) = fake_or_skip!();
    let pair = Pair::new(path);
    let pd = pair.context.alloc_pd().unwrap();
    let cq = pair.context.create_cq(64).unwrap();
    let mr = pd.alloc_mr(4096, AccessFlags::LOCAL_WRITE).unwrap();
    const QKEY: u32 = 0x1111_1111;
    let ud_qp = || {
        let qp = pd
            .qp_builder(QpType::Ud)
            .cq(&cq)
            .max_send_wr(8)
            .max_recv_wr(8)
            .build()
            .unwrap();
        for attr in [
            QpAttr::new()
                .with_state(QpState::Init)
                .with_pkey_index(0)
                .with_port(1)
                .with_qkey(QKEY),
            QpAttr::new().with_state(QpState::Rtr),
            QpAttr::new().with_state(QpState::Rts).with_sq_psn(0x42),
        ] {
            qp.modify(&attr).unwrap();
        }
        qp
    };
    let (sender, receiver) = (ud_qp(), ud_qp());
    let (init, mask) = pair.last_modify(receiver.qpn());
    assert_eq!(
        (init.qp_state, init.sq_psn, mask),
        (IBV_QPS_RTS, 0x42, IBV_QP_STATE | IBV_QP_SQ_PSN)
    );
    let gid = pair.context.query_gid(1, 0).unwrap();
    let ah = pd.create_ah(&AhAttr::to_gid(gid)).unwrap();

    edit(&mr)[..256].fill(0xa5);
    let recv_sge = [mr.sge(1024, 40 + 256).unwrap()];
    // SAFETY: the buffer lies in `mr`, alive until the end of the test.
    unsafe {
        receiver.post_recv(&[RecvWr {
            wr_id: 7,
            sg_list: &recv_sge,
        }])
    }
    .unwrap();
    let send_sge = [mr.sge(0, 256).unwrap()];
    let send = |qkey: u32, wr_id: u64| SendWr {
        wr_id,
        sg_list: &send_sge,
        op: SendOp::SendWithImm(0x0102_0304),
        flags: SendFlags::SIGNALED,
        ud: Some(UdDest {
            ah: ah.handle(),
            remote_qpn: receiver.qpn(),
            remote_qkey: qkey,
        }),
    };
    // A wrong Q_Key is dropped on the wire, as UD does: the send completes,
    // nothing is received.
    // SAFETY: as above.
    unsafe { sender.post_send(&[send(QKEY ^ 1, 1)]) }.unwrap();
    let wc = cq.poll_n(1, TIMEOUT).unwrap();
    assert_eq!((wc[0].wr_id, wc[0].status), (1, WcStatus::Success));
    assert!(!cq.wait(Duration::from_millis(5)).unwrap());

    // SAFETY: as above.
    unsafe { sender.post_send(&[send(QKEY, 2)]) }.unwrap();
    let mut wcs = cq.poll_n(2, TIMEOUT).unwrap();
    wcs.sort_by_key(|wc| wc.wr_id);
    let recv = wcs[1];
    assert_eq!((wcs[0].wr_id, recv.wr_id), (2, 7));
    assert_eq!((recv.opcode, recv.byte_len), (WcOpcode::Recv, 40 + 256));
    assert!(recv.wc_flags.contains(WcFlags::GRH));
    assert_eq!((recv.src_qp, recv.imm()), (sender.qpn(), Some(0x0102_0304)));
    assert!(bytes(&mr)[1064..1320].iter().all(|&b| b == 0xa5));

    // A destination is required on UD and refused on RC.
    let mut no_dest = send(QKEY, 3);
    no_dest.ud = None;
    // SAFETY: as above.
    let error = unsafe { sender.post_send(&[no_dest]) }.unwrap_err();
    assert!(error.to_string().contains("needs a destination"), "{error}");
    // SAFETY: as above; refused before anything is posted.
    let error = unsafe { pair.a.post_send(&[send(QKEY, 4)]) }.unwrap_err();
    assert!(error.to_string().contains("only a UD QP"), "{error}");
}
