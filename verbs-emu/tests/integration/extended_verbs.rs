//! What the extended verbs of rdma-core's test suite hold the UDP backend
//! to, beyond the plain verbs: receive WRs within the QP's SGE limit.

use std::net::{Ipv4Addr, SocketAddrV4};
use std::sync::Arc;

use verbs_emu::backend::udp::{UdpBackend, UdpConfig};
use verbs_emu::verbs::{Context, PostError, QpAttr, QpCap, QpState, QpType, RecvWr, VerbsError};

use super::ALL;

#[test]
fn receive_with_more_sges_than_the_qp_takes_is_refused() {
    let cfg = UdpConfig::new(SocketAddrV4::new(Ipv4Addr::new(127, 61, 0, 1), 4791));
    let ctx = Context::from_backend(Arc::new(UdpBackend::open(cfg).expect("bind")));
    let pd = ctx.alloc_pd().unwrap();
    let cq = ctx.create_cq(16).unwrap();
    let mr = pd.alloc_mr(4096, ALL).unwrap();
    let qp = pd
        .qp_builder(QpType::Ud)
        .cq(&cq)
        .cap(QpCap {
            max_send_wr: 4,
            max_recv_wr: 4,
            max_send_sge: 1,
            max_recv_sge: 1,
            max_inline_data: 0,
        })
        .build()
        .unwrap();
    assert_eq!(qp.cap().max_recv_sge, 1);
    qp.modify(
        &QpAttr::new()
            .with_state(QpState::Init)
            .with_pkey_index(0)
            .with_port(1)
            .with_qkey(0x1111_1111),
    )
    .unwrap();
    let two = [mr.sge(0, 64).unwrap(), mr.sge(64, 64).unwrap()];
    // SAFETY: the SGEs name `mr`, which outlives the QP.
    let r = unsafe {
        qp.post_recv(&[RecvWr {
            wr_id: 1,
            sg_list: &two,
        }])
    };
    match r {
        Err(PostError {
            index: 0,
            error: VerbsError::InvalidArgument { why, .. },
        }) => assert!(why.contains("2 SGEs"), "{why}"),
        other => panic!("two SGEs on a one-SGE receive queue: {other:?}"),
    }
    // One SGE is within the limit and accepted.
    // SAFETY: as above.
    unsafe {
        qp.post_recv(&[RecvWr {
            wr_id: 2,
            sg_list: &two[..1],
        }])
    }
    .unwrap();
}
