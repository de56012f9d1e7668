//! The QP attributes of a run, as perftest's `ctx_connect` sets them: the
//! address vector to a peer's endpoint (`-S`, `-T`), the INIT, RTR and RTS
//! attributes of a connected QP (`-u`), the UD Q_Key and the outstanding
//! RDMA READs and atomics each way.
//!
//! Contract: pure functions of the configuration and the peer's endpoint.

use crate::perftest::Config;
use crate::verbs::{AccessFlags, AhAttr, Endpoint, Mtu, QpAttr, QpState, QpType};
use roce::wire::Qpn;

/// The Q_Key of every UD QP of a run.
pub(super) const QKEY: u32 = 0x1111_1111;

/// The address vector to a peer's endpoint with `-S` (service level) and
/// `-T` (traffic class: the IP TOS byte on RoCEv2).
pub(super) fn address_vector(cfg: &Config, rep: &Endpoint) -> AhAttr {
    let mut av = AhAttr::to_gid(rep.gid);
    av.dport = Some(rep.udp_port);
    av.sl = cfg.sl;
    av.traffic_class = cfg.traffic_class;
    av
}

/// The INIT, RTR and RTS attributes of a connected QP, as perftest's
/// `ctx_connect` sets them: `-u` the retransmission timeout, retry and RNR
/// retry 7, RNR timer 12, `-o` outstanding reads each way (RC; 16 by
/// default).
pub(super) fn connect_attrs(
    cfg: &Config,
    local_psn: u32,
    rep: &Endpoint,
    mtu: Mtu,
    access: AccessFlags,
) -> (QpAttr, QpAttr, QpAttr) {
    let rc = cfg.connection == QpType::Rc;
    let init = QpAttr::new()
        .with_state(QpState::Init)
        .with_pkey_index(0)
        .with_port(1)
        .with_access_flags(access);
    let mut rtr = QpAttr::new()
        .with_state(QpState::Rtr)
        .with_av(address_vector(cfg, rep))
        .with_path_mtu(mtu)
        .with_dest_qpn(Qpn::new(rep.qpn))
        .with_rq_psn(rep.psn);
    let mut rts = QpAttr::new()
        .with_state(QpState::Rts)
        .with_sq_psn(local_psn);
    if rc {
        rtr = rtr
            .with_max_dest_rd_atomic(cfg.outstanding_reads())
            .with_min_rnr_timer(12);
        rts = rts
            .with_timeout(cfg.qp_timeout)
            .with_retry_cnt(7)
            .with_rnr_retry(7)
            .with_max_rd_atomic(cfg.outstanding_reads());
    }
    (init, rtr, rts)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::perftest::run::oob::tests::peer_info;
    use crate::perftest::Test;

    #[test]
    fn connect_attributes_carry_timeout_service_level_and_traffic_class() {
        let mut cfg = Config::new(Test::WriteBw);
        cfg.qp_timeout = 9;
        cfg.sl = 3;
        cfg.traffic_class = 0x68;
        let ep = peer_info(1, 64, Some(1 << 20)).endpoints[0];
        let (init, rtr, rts) = connect_attrs(&cfg, 7, &ep, Mtu::Mtu1024, AccessFlags::LOCAL_WRITE);
        assert_eq!(init.qp_state, QpState::Init);
        assert_eq!(rtr.ah_attr.sl, 3);
        assert_eq!(rtr.ah_attr.traffic_class, 0x68);
        assert_eq!(rtr.ah_attr.dgid, ep.gid);
        assert_eq!(rtr.dest_qp_num, Qpn::new(ep.qpn));
        assert_eq!((rtr.rq_psn, rtr.path_mtu), (ep.psn, Mtu::Mtu1024));
        assert_eq!((rts.timeout, rts.retry_cnt, rts.sq_psn), (9, 7, 7));
        assert_eq!(rts.max_rd_atomic, 16);
    }
}
