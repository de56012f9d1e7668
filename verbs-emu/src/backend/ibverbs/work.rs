//! Exact translations between the verbs vocabulary ([`crate::verbs`]) and
//! the C structs of [`super::ffi`]: QP attributes, address vectors, send and
//! receive work requests, work completions, port and device attributes.
//!
//! Nothing here calls libibverbs, so every translation is unit-tested on any
//! machine. Immediate data in the verbs types is the 32-bit value as it goes
//! on the wire (big-endian there); the C structs hold it as `__be32`, so the
//! C field is `imm.to_be()`. An invalidated or to-be-invalidated rkey shares
//! that field in host order, as in C.

use std::ffi::CStr;
use std::os::raw::c_int;

use super::ffi::*;
use crate::verbs::{
    AhAttr, DeviceAttr, Mtu, PortAttr, QpAttr, QpAttrMask, QpCap, SendFlags, SendOp, SendWr, Sge,
    VerbsError, WcFlags, WcOpcode, WcStatus, WorkCompletion,
};
use roce::wire::{Qpn, Rkey, ROCE_UDP_PORT};

/// The largest PSN (24 bits).
const PSN_MAX: u32 = 0x00ff_ffff;

fn check_range(verb: &'static str, what: &str, value: u32, max: u32) -> Result<(), VerbsError> {
    if value > max {
        return Err(VerbsError::invalid(
            verb,
            format!("{what} is {value}, at most {max} allowed"),
        ));
    }
    Ok(())
}

/// `ibv_qp_cap` from the verbs capabilities.
pub fn qp_cap_to_raw(cap: &QpCap) -> ibv_qp_cap {
    ibv_qp_cap {
        max_send_wr: cap.max_send_wr,
        max_recv_wr: cap.max_recv_wr,
        max_send_sge: cap.max_send_sge,
        max_recv_sge: cap.max_recv_sge,
        max_inline_data: cap.max_inline_data,
    }
}

/// The verbs capabilities from `ibv_qp_cap` (what the library granted).
pub fn qp_cap_from_raw(cap: &ibv_qp_cap) -> QpCap {
    QpCap {
        max_send_wr: cap.max_send_wr,
        max_recv_wr: cap.max_recv_wr,
        max_send_sge: cap.max_send_sge,
        max_recv_sge: cap.max_recv_sge,
        max_inline_data: cap.max_inline_data,
    }
}

/// `ibv_ah_attr` for a RoCE destination: always global (`is_global = 1`),
/// LID 0. A destination UDP port other than 4791 cannot be expressed to a
/// NIC and is refused.
pub fn ah_attr_to_raw(verb: &'static str, ah: &AhAttr) -> Result<ibv_ah_attr, VerbsError> {
    if let Some(port) = ah.dport {
        if port != ROCE_UDP_PORT {
            return Err(VerbsError::invalid(
                verb,
                format!(
                    "destination UDP port {port}: a RoCEv2 NIC always sends to {ROCE_UDP_PORT}"
                ),
            ));
        }
    }
    check_range(verb, "flow_label", ah.flow_label, 0x000f_ffff)?;
    check_range(verb, "sl", ah.sl.into(), 15)?;
    Ok(ibv_ah_attr {
        grh: ibv_global_route {
            dgid: ibv_gid::from_bytes(ah.dgid.0),
            flow_label: ah.flow_label,
            sgid_index: ah.sgid_index,
            hop_limit: ah.hop_limit,
            traffic_class: ah.traffic_class,
        },
        dlid: 0,
        sl: ah.sl,
        src_path_bits: 0,
        static_rate: 0,
        is_global: 1,
        port_num: ah.port_num,
    })
}

/// `ibv_qp_attr` and the `ibv_qp_attr_mask` for a modify. Only the fields
/// named by the mask are copied (the rest stay zero, which the library
/// ignores). The attribute ranges are the one validator's
/// (`transport::check_modify`, which `modify_qp` runs first); here only
/// what that validator does not see is refused with the field's name: PSNs
/// beyond 24 bits and an address vector a RoCE NIC cannot use. The mask
/// bits are rdma-core's, so the mask passes through as is.
pub fn qp_attr_to_raw(attr: &QpAttr) -> Result<(ibv_qp_attr, c_int), VerbsError> {
    const VERB: &str = "ibv_modify_qp";
    let mask = attr.mask;
    let has = |bit: QpAttrMask| mask.contains(bit);
    let mut raw = ibv_qp_attr::default();
    if has(QpAttrMask::STATE) {
        raw.qp_state = attr.qp_state.value();
    }
    if has(QpAttrMask::CUR_STATE) {
        raw.cur_qp_state = attr.cur_qp_state.value();
    }
    if has(QpAttrMask::ACCESS_FLAGS) {
        raw.qp_access_flags = attr.qp_access_flags.bits();
    }
    if has(QpAttrMask::PKEY_INDEX) {
        raw.pkey_index = attr.pkey_index;
    }
    if has(QpAttrMask::PORT) {
        raw.port_num = attr.port_num;
    }
    if has(QpAttrMask::QKEY) {
        raw.qkey = attr.qkey;
    }
    if has(QpAttrMask::AV) {
        raw.ah_attr = ah_attr_to_raw(VERB, &attr.ah_attr)?;
    }
    if has(QpAttrMask::PATH_MTU) {
        raw.path_mtu = attr.path_mtu.value();
    }
    if has(QpAttrMask::TIMEOUT) {
        raw.timeout = attr.timeout;
    }
    if has(QpAttrMask::RETRY_CNT) {
        raw.retry_cnt = attr.retry_cnt;
    }
    if has(QpAttrMask::RNR_RETRY) {
        raw.rnr_retry = attr.rnr_retry;
    }
    if has(QpAttrMask::RQ_PSN) {
        check_range(VERB, "rq_psn", attr.rq_psn, PSN_MAX)?;
        raw.rq_psn = attr.rq_psn;
    }
    if has(QpAttrMask::SQ_PSN) {
        check_range(VERB, "sq_psn", attr.sq_psn, PSN_MAX)?;
        raw.sq_psn = attr.sq_psn;
    }
    if has(QpAttrMask::MAX_QP_RD_ATOMIC) {
        raw.max_rd_atomic = attr.max_rd_atomic;
    }
    if has(QpAttrMask::MAX_DEST_RD_ATOMIC) {
        raw.max_dest_rd_atomic = attr.max_dest_rd_atomic;
    }
    if has(QpAttrMask::MIN_RNR_TIMER) {
        raw.min_rnr_timer = attr.min_rnr_timer;
    }
    if has(QpAttrMask::DEST_QPN) {
        raw.dest_qp_num = attr.dest_qp_num.value();
    }
    let unsupported = mask.difference(
        QpAttrMask::STATE
            | QpAttrMask::CUR_STATE
            | QpAttrMask::ACCESS_FLAGS
            | QpAttrMask::PKEY_INDEX
            | QpAttrMask::PORT
            | QpAttrMask::QKEY
            | QpAttrMask::AV
            | QpAttrMask::PATH_MTU
            | QpAttrMask::TIMEOUT
            | QpAttrMask::RETRY_CNT
            | QpAttrMask::RNR_RETRY
            | QpAttrMask::RQ_PSN
            | QpAttrMask::SQ_PSN
            | QpAttrMask::MAX_QP_RD_ATOMIC
            | QpAttrMask::MAX_DEST_RD_ATOMIC
            | QpAttrMask::MIN_RNR_TIMER
            | QpAttrMask::DEST_QPN,
    );
    if !unsupported.is_empty() {
        return Err(VerbsError::invalid(
            VERB,
            format!(
                "attributes {:?} have no field in QpAttr to take them from",
                unsupported.names()
            ),
        ));
    }
    Ok((raw, mask.bits() as c_int))
}

/// `ibv_sge` of a verbs SGE.
pub fn sge_to_raw(sge: &Sge) -> ibv_sge {
    ibv_sge {
        addr: sge.addr,
        length: sge.length,
        lkey: sge.lkey.value(),
    }
}

/// Fills an `ibv_send_wr` (everything but `next`, `sg_list` and `num_sge`)
/// for `wr`; `ah` is the C address handle of `wr.ud`, looked up by the
/// caller. Requests no NIC would accept are refused here with the reason:
/// an atomic needs exactly one 8-byte SGE and cannot be inline; a READ
/// cannot be inline; a UD destination allows only SENDs.
pub fn encode_send(wr: &SendWr<'_>, ah: Option<*mut ibv_ah>) -> Result<ibv_send_wr, VerbsError> {
    const VERB: &str = "ibv_post_send";
    let inline = wr.flags.contains(SendFlags::INLINE);
    let atomic = matches!(wr.op, SendOp::CompareSwap { .. } | SendOp::FetchAdd { .. });
    if atomic {
        if wr.sg_list.len() != 1 || wr.sg_list[0].length != 8 {
            let lengths: Vec<u32> = wr.sg_list.iter().map(|sge| sge.length).collect();
            return Err(VerbsError::invalid(
                VERB,
                format!(
                    "an atomic needs exactly one 8-byte SGE for the old value, got lengths {lengths:?}"
                ),
            ));
        }
        if inline {
            return Err(VerbsError::invalid(VERB, "an atomic cannot be inline"));
        }
    }
    if matches!(wr.op, SendOp::Read { .. }) && inline {
        return Err(VerbsError::invalid(VERB, "an RDMA READ cannot be inline"));
    }
    let mut raw = ibv_send_wr {
        wr_id: wr.wr_id,
        opcode: wr.op.wr_opcode(),
        send_flags: wr.flags.bits(),
        ..Default::default()
    };
    let rdma = |remote_addr: u64, rkey: Rkey| ibv_send_wr_wr {
        rdma: ibv_send_wr_rdma {
            remote_addr,
            rkey: rkey.value(),
        },
    };
    match wr.op {
        SendOp::Send => {}
        SendOp::SendWithImm(imm) => raw.imm_data = imm.to_be(),
        SendOp::SendWithInv(rkey) => raw.imm_data = rkey.value(),
        SendOp::Write { remote_addr, rkey }
        | SendOp::Read { remote_addr, rkey }
        | SendOp::AtomicWrite { remote_addr, rkey } => {
            raw.wr = rdma(remote_addr, rkey);
        }
        SendOp::WriteWithImm {
            remote_addr,
            rkey,
            imm,
        } => {
            raw.imm_data = imm.to_be();
            raw.wr = rdma(remote_addr, rkey);
        }
        SendOp::CompareSwap {
            remote_addr,
            rkey,
            compare,
            swap,
        } => {
            raw.wr.atomic = ibv_send_wr_atomic {
                remote_addr,
                compare_add: compare,
                swap,
                rkey: rkey.value(),
            };
        }
        SendOp::FetchAdd {
            remote_addr,
            rkey,
            add,
        } => {
            raw.wr.atomic = ibv_send_wr_atomic {
                remote_addr,
                compare_add: add,
                swap: 0,
                rkey: rkey.value(),
            };
        }
        // `invalidate_rkey` shares the union with `imm_data`.
        SendOp::LocalInv(rkey) => raw.imm_data = rkey.value(),
        SendOp::BindMw { .. } => {
            // A hardware bind names its `ibv_mw`, which the verbs
            // vocabulary does not carry.
            return Err(VerbsError::Unavailable(
                "memory window binds through the hardware backend".into(),
            ));
        }
    }
    if let Some(ud) = wr.ud {
        if !matches!(wr.op, SendOp::Send | SendOp::SendWithImm(_)) {
            return Err(VerbsError::invalid(
                VERB,
                format!("a UD destination allows only SEND, not {:?}", wr.op),
            ));
        }
        raw.wr.ud = ibv_send_wr_ud {
            ah: ah.unwrap_or(std::ptr::null_mut()),
            remote_qpn: ud.remote_qpn.value(),
            remote_qkey: ud.remote_qkey,
        };
    }
    Ok(raw)
}

/// The operation an `ibv_send_wr` describes, when it is one of ours (the
/// inverse of [`encode_send`] for connected QPs).
pub fn decode_send_op(raw: &ibv_send_wr) -> Option<SendOp> {
    // SAFETY: every view of `raw.wr` is plain integers and pointers, valid
    // for any bit pattern; `opcode` selects the view that was written.
    let rdma = unsafe { raw.wr.rdma };
    // SAFETY: as above.
    let atomic = unsafe { raw.wr.atomic };
    let rkey = Rkey::new(rdma.rkey);
    Some(match raw.opcode {
        IBV_WR_SEND => SendOp::Send,
        IBV_WR_SEND_WITH_IMM => SendOp::SendWithImm(u32::from_be(raw.imm_data)),
        IBV_WR_SEND_WITH_INV => SendOp::SendWithInv(Rkey::new(raw.imm_data)),
        IBV_WR_RDMA_WRITE => SendOp::Write {
            remote_addr: rdma.remote_addr,
            rkey,
        },
        IBV_WR_RDMA_WRITE_WITH_IMM => SendOp::WriteWithImm {
            remote_addr: rdma.remote_addr,
            rkey,
            imm: u32::from_be(raw.imm_data),
        },
        IBV_WR_RDMA_READ => SendOp::Read {
            remote_addr: rdma.remote_addr,
            rkey,
        },
        IBV_WR_ATOMIC_WRITE => SendOp::AtomicWrite {
            remote_addr: rdma.remote_addr,
            rkey,
        },
        IBV_WR_ATOMIC_CMP_AND_SWP => SendOp::CompareSwap {
            remote_addr: atomic.remote_addr,
            rkey: Rkey::new(atomic.rkey),
            compare: atomic.compare_add,
            swap: atomic.swap,
        },
        IBV_WR_ATOMIC_FETCH_AND_ADD => SendOp::FetchAdd {
            remote_addr: atomic.remote_addr,
            rkey: Rkey::new(atomic.rkey),
            add: atomic.compare_add,
        },
        _ => return None,
    })
}

/// The verbs completion of an `ibv_wc`.
///
/// A status this API does not name (the tag-matching statuses 22 and 23)
/// becomes `GeneralErr`, and an opcode it does not name (TSO, tag
/// matching, driver-specific) becomes `Recv` or `Send` by its receive bit;
/// neither arises from the operations this backend posts.
pub fn wc_from_raw(wc: &ibv_wc) -> WorkCompletion {
    let flags = WcFlags(wc.wc_flags);
    let opcode = WcOpcode::from_value(wc.opcode).unwrap_or(if wc.opcode & IBV_WC_RECV != 0 {
        WcOpcode::Recv
    } else {
        WcOpcode::Send
    });
    WorkCompletion {
        wr_id: wc.wr_id,
        status: WcStatus::from_value(wc.status).unwrap_or(WcStatus::GeneralErr),
        opcode,
        vendor_err: wc.vendor_err,
        byte_len: wc.byte_len,
        imm_data: if flags.contains(WcFlags::WITH_IMM) {
            u32::from_be(wc.imm_data)
        } else {
            0
        },
        invalidated_rkey: if flags.contains(WcFlags::WITH_INV) {
            wc.imm_data
        } else {
            0
        },
        qp_num: Qpn::new(wc.qp_num),
        src_qp: Qpn::new(wc.src_qp),
        wc_flags: flags,
    }
}

/// The `ibv_wc` a provider would have written for `wc` (the inverse of
/// [`wc_from_raw`]).
pub fn wc_to_raw(wc: &WorkCompletion) -> ibv_wc {
    let imm_data = if wc.wc_flags.contains(WcFlags::WITH_INV) {
        wc.invalidated_rkey
    } else {
        wc.imm_data.to_be()
    };
    ibv_wc {
        wr_id: wc.wr_id,
        status: wc.status.value(),
        opcode: wc.opcode.value(),
        vendor_err: wc.vendor_err,
        byte_len: wc.byte_len,
        imm_data,
        qp_num: wc.qp_num.value(),
        src_qp: wc.src_qp.value(),
        wc_flags: wc.wc_flags.bits(),
        sl: if wc.wc_flags.contains(WcFlags::GRH) {
            ROCEV2_IPV4_PACKET_TYPE
        } else {
            0
        },
        ..Default::default()
    }
}

/// What a ConnectX reports in `sl` for a UD receive over RoCE: the
/// packet's type, bit 3 set for a UDP header (RoCEv2) and bits 2:0 the L3
/// header (2: IPv4). The emulated device receives RoCEv2 over IPv4 only;
/// UCX's UD transport reads this to find the destination address in the
/// 40-byte GRH area (the last 4 bytes for IPv4, all 16 for IPv6 or a GRH).
pub const ROCEV2_IPV4_PACKET_TYPE: u8 = 0x8 | 0x2;

/// The verbs port attributes of an `ibv_port_attr`. An MTU code outside
/// 1..=5 is an error naming it.
pub fn port_attr_from_raw(raw: &ibv_port_attr) -> Result<PortAttr, VerbsError> {
    let mtu = |what: &str, code: u32| {
        Mtu::from_value(code).ok_or_else(|| {
            VerbsError::invalid(
                "ibv_query_port",
                format!("the device reports {what} code {code}, not an IB MTU (1..=5)"),
            )
        })
    };
    Ok(PortAttr {
        state: raw.state,
        max_mtu: mtu("max_mtu", raw.max_mtu)?,
        active_mtu: mtu("active_mtu", raw.active_mtu)?,
        gid_tbl_len: u32::try_from(raw.gid_tbl_len).unwrap_or(0),
        link_layer_ethernet: raw.link_layer == IBV_LINK_LAYER_ETHERNET,
        lid: raw.lid,
    })
}

/// The verbs device attributes of an `ibv_device_attr` for device `name`.
pub fn device_attr_from_raw(name: &str, raw: &ibv_device_attr) -> DeviceAttr {
    // fw_ver is NUL-terminated within its 64 bytes; tolerate a full array.
    let bytes: Vec<u8> = raw.fw_ver.iter().map(|&c| c as u8).collect();
    let fw_ver = CStr::from_bytes_until_nul(&bytes)
        .map(|text| text.to_string_lossy().into_owned())
        .unwrap_or_else(|_| String::from_utf8_lossy(&bytes).into_owned());
    DeviceAttr {
        name: name.to_owned(),
        node_guid: u64::from_be(raw.node_guid),
        fw_ver,
        vendor_id: raw.vendor_id,
        max_mr_size: raw.max_mr_size,
        max_qp_wr: u32::try_from(raw.max_qp_wr).unwrap_or(0),
        max_cqe: u32::try_from(raw.max_cqe).unwrap_or(0),
        phys_port_cnt: raw.phys_port_cnt,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::backend::AhHandle;
    use crate::verbs::{AccessFlags, Gid, QpState, UdDest};
    use roce::wire::Lkey;

    const REMOTE: u64 = 0x1122_3344_5566_7788;

    fn rkey() -> Rkey {
        Rkey::new(0xdead_beef)
    }

    fn sge(length: u32) -> Sge {
        Sge {
            addr: 0x7f00_0000_1000,
            length,
            lkey: Lkey::new(0x1234),
        }
    }

    fn send(op: SendOp, sg_list: &[Sge]) -> SendWr<'_> {
        SendWr {
            wr_id: 77,
            sg_list,
            op,
            flags: SendFlags::SIGNALED,
            ud: None,
        }
    }

    #[test]
    fn a_ud_receive_with_a_grh_reports_the_rocev2_ipv4_packet_type_in_sl() {
        let mut wc = WorkCompletion::empty();
        assert_eq!(wc_to_raw(&wc).sl, 0);
        wc.wc_flags = WcFlags::GRH;
        assert_eq!(wc_to_raw(&wc).sl, 0b1010);
    }

    #[test]
    fn every_send_op_round_trips_through_ibv_send_wr() {
        let eight = [sge(8)];
        let two = [sge(64), sge(4096)];
        let ops = [
            SendOp::Send,
            SendOp::SendWithImm(0x0102_0304),
            SendOp::SendWithInv(Rkey::new(0x55)),
            SendOp::Write {
                remote_addr: REMOTE,
                rkey: rkey(),
            },
            SendOp::WriteWithImm {
                remote_addr: REMOTE,
                rkey: rkey(),
                imm: 7,
            },
            SendOp::Read {
                remote_addr: REMOTE,
                rkey: rkey(),
            },
            SendOp::CompareSwap {
                remote_addr: REMOTE,
                rkey: rkey(),
                compare: 1,
                swap: 2,
            },
            SendOp::FetchAdd {
                remote_addr: REMOTE,
                rkey: rkey(),
                add: 3,
            },
        ];
        for op in ops {
            let sges: &[Sge] = match op {
                SendOp::CompareSwap { .. } | SendOp::FetchAdd { .. } => &eight,
                _ => &two,
            };
            let raw = encode_send(&send(op, sges), None).unwrap();
            assert_eq!(raw.wr_id, 77);
            assert_eq!(raw.opcode, op.wr_opcode());
            assert_eq!(raw.send_flags, IBV_SEND_SIGNALED);
            assert_eq!(decode_send_op(&raw), Some(op), "{op:?}");
            assert!(raw.next.is_null() && raw.sg_list.is_null());
        }
    }

    #[test]
    fn verbs_opcodes_and_flags_are_rdma_cores() {
        assert_eq!(SendOp::Send.wr_opcode(), IBV_WR_SEND);
        assert_eq!(SendOp::SendWithImm(0).wr_opcode(), IBV_WR_SEND_WITH_IMM);
        assert_eq!(
            SendOp::SendWithInv(rkey()).wr_opcode(),
            IBV_WR_SEND_WITH_INV
        );
        assert_eq!(SendFlags::INLINE.bits(), IBV_SEND_INLINE);
        assert_eq!(SendFlags::FENCE.bits(), IBV_SEND_FENCE);
        assert_eq!(SendFlags::SOLICITED.bits(), IBV_SEND_SOLICITED);
        assert_eq!(AccessFlags::REMOTE_ATOMIC.bits(), IBV_ACCESS_REMOTE_ATOMIC);
        assert_eq!(
            QpAttrMask::MAX_DEST_RD_ATOMIC.bits() as c_int,
            IBV_QP_MAX_DEST_RD_ATOMIC
        );
        assert_eq!(QpState::Err.value(), IBV_QPS_ERR);
        assert_eq!(WcOpcode::RecvRdmaWithImm.value(), IBV_WC_RECV_RDMA_WITH_IMM);
        assert_eq!(WcFlags::WITH_INV.bits(), IBV_WC_WITH_INV);
        assert_eq!(Mtu::Mtu4096.value(), IBV_MTU_4096);
    }

    #[test]
    fn immediate_data_is_big_endian_in_the_c_struct() {
        let raw = encode_send(&send(SendOp::SendWithImm(0x0102_0304), &[]), None).unwrap();
        assert_eq!(raw.imm_data.to_ne_bytes(), [1, 2, 3, 4]);
        let inv = encode_send(
            &send(SendOp::SendWithInv(Rkey::new(0x0102_0304)), &[]),
            None,
        )
        .unwrap();
        assert_eq!(inv.imm_data, 0x0102_0304, "an rkey stays in host order");
    }

    #[test]
    fn atomics_fill_the_atomic_view_of_the_union() {
        let op = SendOp::CompareSwap {
            remote_addr: REMOTE,
            rkey: rkey(),
            compare: 10,
            swap: 20,
        };
        let raw = encode_send(&send(op, &[sge(8)]), None).unwrap();
        // SAFETY: the test reads the view encode_send wrote.
        let atomic = unsafe { raw.wr.atomic };
        assert_eq!(
            (
                atomic.remote_addr,
                atomic.compare_add,
                atomic.swap,
                atomic.rkey
            ),
            (REMOTE, 10, 20, rkey().value())
        );
    }

    #[test]
    fn atomic_without_one_eight_byte_sge_is_refused() {
        let op = SendOp::FetchAdd {
            remote_addr: REMOTE,
            rkey: rkey(),
            add: 1,
        };
        for sges in [&[][..], &[sge(4)], &[sge(8), sge(8)]] {
            let error = encode_send(&send(op, sges), None).unwrap_err();
            assert!(
                error.to_string().contains("exactly one 8-byte SGE"),
                "{error}"
            );
        }
        let eight = [sge(8)];
        let mut inline = send(op, &eight);
        inline.flags = SendFlags::INLINE;
        let error = encode_send(&inline, None).unwrap_err();
        assert!(error.to_string().contains("cannot be inline"), "{error}");
    }

    #[test]
    fn ud_destination_fills_the_ud_view_and_allows_only_sends() {
        let dest = UdDest {
            ah: AhHandle(9),
            remote_qpn: Qpn::new(0x42),
            remote_qkey: 0x1111_1111,
        };
        let ah = 0x1000 as *mut ibv_ah;
        let mut wr = send(SendOp::SendWithImm(5), &[]);
        wr.ud = Some(dest);
        let raw = encode_send(&wr, Some(ah)).unwrap();
        // SAFETY: the ud view was written.
        let ud = unsafe { raw.wr.ud };
        assert_eq!(
            (ud.ah, ud.remote_qpn, ud.remote_qkey),
            (ah, 0x42, 0x1111_1111)
        );
        wr.op = SendOp::Write {
            remote_addr: REMOTE,
            rkey: rkey(),
        };
        let error = encode_send(&wr, Some(ah)).unwrap_err();
        assert!(error.to_string().contains("allows only SEND"), "{error}");
    }

    #[test]
    fn completions_round_trip_through_ibv_wc() {
        let base = WorkCompletion::empty();
        let completions = [
            WorkCompletion {
                wr_id: 42,
                opcode: WcOpcode::RecvRdmaWithImm,
                byte_len: 4096,
                imm_data: 0xcafe_f00d,
                qp_num: Qpn::new(0x11),
                wc_flags: WcFlags::WITH_IMM,
                ..base
            },
            WorkCompletion {
                wr_id: 7,
                status: WcStatus::RemAccessErr,
                opcode: WcOpcode::RdmaWrite,
                vendor_err: 0x88,
                qp_num: Qpn::new(0x12),
                ..base
            },
            WorkCompletion {
                wr_id: 8,
                opcode: WcOpcode::Recv,
                byte_len: 40 + 256,
                qp_num: Qpn::new(0x13),
                src_qp: Qpn::new(0x99),
                wc_flags: WcFlags::GRH,
                ..base
            },
            WorkCompletion {
                wr_id: 9,
                opcode: WcOpcode::Recv,
                invalidated_rkey: 0x0abc_def0,
                wc_flags: WcFlags::WITH_INV,
                ..base
            },
        ];
        for completion in completions {
            assert_eq!(wc_from_raw(&wc_to_raw(&completion)), completion);
        }
        let raw = wc_to_raw(&completions[0]);
        assert_eq!(raw.imm_data.to_ne_bytes(), 0xcafe_f00d_u32.to_be_bytes());
    }

    #[test]
    fn unknown_wc_values_fold_into_known_ones() {
        let mut raw = ibv_wc {
            status: 22,
            opcode: IBV_WC_RECV + 5,
            ..Default::default()
        };
        let wc = wc_from_raw(&raw);
        assert_eq!(
            (wc.status, wc.opcode),
            (WcStatus::GeneralErr, WcOpcode::Recv)
        );
        raw.opcode = 7; // IBV_WC_TSO
        assert_eq!(wc_from_raw(&raw).opcode, WcOpcode::Send);
        for status in 0..=21 {
            raw.status = status;
            assert_eq!(wc_from_raw(&raw).status.value(), status);
        }
    }

    fn av() -> AhAttr {
        AhAttr {
            dgid: Gid::from_ip("10.0.0.5".parse().unwrap()),
            sgid_index: 3,
            hop_limit: 64,
            traffic_class: 106,
            flow_label: 0x12345,
            sl: 3,
            port_num: 1,
            dport: None,
        }
    }

    #[test]
    fn rc_rtr_attributes_map_field_by_field() {
        let attr = QpAttr::new()
            .with_state(QpState::Rtr)
            .with_av(av())
            .with_path_mtu(Mtu::Mtu1024)
            .with_dest_qpn(Qpn::new(0x00ab_cdef))
            .with_rq_psn(0x0012_3456)
            .with_max_dest_rd_atomic(16)
            .with_min_rnr_timer(12);
        let (raw, mask) = qp_attr_to_raw(&attr).unwrap();
        assert_eq!(
            mask,
            IBV_QP_STATE
                | IBV_QP_AV
                | IBV_QP_PATH_MTU
                | IBV_QP_DEST_QPN
                | IBV_QP_RQ_PSN
                | IBV_QP_MAX_DEST_RD_ATOMIC
                | IBV_QP_MIN_RNR_TIMER
        );
        assert_eq!(raw.qp_state, IBV_QPS_RTR);
        assert_eq!(raw.path_mtu, IBV_MTU_1024);
        assert_eq!((raw.dest_qp_num, raw.rq_psn), (0x00ab_cdef, 0x0012_3456));
        assert_eq!((raw.max_dest_rd_atomic, raw.min_rnr_timer), (16, 12));
        let ah = raw.ah_attr;
        assert_eq!((ah.is_global, ah.dlid, ah.sl, ah.port_num), (1, 0, 3, 1));
        assert_eq!(ah.grh.dgid.bytes(), av().dgid.0);
        assert_eq!(
            (
                ah.grh.sgid_index,
                ah.grh.hop_limit,
                ah.grh.traffic_class,
                ah.grh.flow_label
            ),
            (3, 64, 106, 0x12345)
        );
        // Fields outside the mask stay zero.
        assert_eq!((raw.sq_psn, raw.timeout, raw.qkey), (0, 0, 0));
    }

    #[test]
    fn rts_and_init_attributes_map_field_by_field() {
        let rts = QpAttr::new()
            .with_state(QpState::Rts)
            .with_sq_psn(0x00ff_ffff)
            .with_timeout(14)
            .with_retry_cnt(7)
            .with_rnr_retry(7)
            .with_max_rd_atomic(16);
        let (raw, mask) = qp_attr_to_raw(&rts).unwrap();
        assert_eq!(
            (
                raw.qp_state,
                raw.sq_psn,
                raw.timeout,
                raw.retry_cnt,
                raw.rnr_retry,
                raw.max_rd_atomic
            ),
            (IBV_QPS_RTS, 0x00ff_ffff, 14, 7, 7, 16)
        );
        assert_eq!(
            mask,
            IBV_QP_STATE
                | IBV_QP_SQ_PSN
                | IBV_QP_TIMEOUT
                | IBV_QP_RETRY_CNT
                | IBV_QP_RNR_RETRY
                | IBV_QP_MAX_QP_RD_ATOMIC
        );
        let init = QpAttr::new()
            .with_state(QpState::Init)
            .with_pkey_index(0)
            .with_port(1)
            .with_qkey(0x1111_1111)
            .with_access_flags(AccessFlags::LOCAL_WRITE | AccessFlags::REMOTE_READ);
        let (raw, mask) = qp_attr_to_raw(&init).unwrap();
        assert_eq!(
            (raw.qp_state, raw.port_num, raw.qkey, raw.qp_access_flags),
            (
                IBV_QPS_INIT,
                1,
                0x1111_1111,
                IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_READ
            )
        );
        assert_eq!(
            mask,
            IBV_QP_STATE | IBV_QP_PKEY_INDEX | IBV_QP_PORT | IBV_QP_QKEY | IBV_QP_ACCESS_FLAGS
        );
    }

    #[test]
    fn out_of_range_attributes_name_the_field() {
        let bad_psn = QpAttr::new().with_rq_psn(1 << 24);
        let error = qp_attr_to_raw(&bad_psn).unwrap_err();
        assert!(error.to_string().contains("rq_psn is 16777216"), "{error}");
        let mut port = av();
        port.dport = Some(4792);
        let error = qp_attr_to_raw(&QpAttr::new().with_av(port)).unwrap_err();
        assert!(
            error.to_string().contains("always sends to 4791"),
            "{error}"
        );
        port.dport = Some(4791);
        assert!(qp_attr_to_raw(&QpAttr::new().with_av(port)).is_ok());
        let mut alt = QpAttr::new();
        alt.mask = QpAttrMask::ALT_PATH;
        let error = qp_attr_to_raw(&alt).unwrap_err();
        assert!(error.to_string().contains("ALT_PATH"), "{error}");
    }

    #[test]
    fn port_and_device_attributes_convert() {
        let raw = ibv_port_attr {
            state: IBV_PORT_ACTIVE,
            max_mtu: IBV_MTU_4096,
            active_mtu: IBV_MTU_1024,
            gid_tbl_len: 16,
            link_layer: IBV_LINK_LAYER_ETHERNET,
            ..Default::default()
        };
        let port = port_attr_from_raw(&raw).unwrap();
        assert_eq!(
            (port.state, port.max_mtu, port.active_mtu, port.gid_tbl_len),
            (4, Mtu::Mtu4096, Mtu::Mtu1024, 16)
        );
        assert!(port.link_layer_ethernet);
        let bad = ibv_port_attr {
            active_mtu: 0,
            ..raw
        };
        let error = port_attr_from_raw(&bad).unwrap_err();
        assert!(error.to_string().contains("active_mtu code 0"), "{error}");

        let mut device = ibv_device_attr {
            node_guid: 0x248a_0703_0049_d468_u64.to_be(),
            vendor_id: 0x02c9,
            max_qp_wr: 32768,
            max_cqe: 4_194_303,
            phys_port_cnt: 1,
            max_mr_size: u64::MAX,
            ..Default::default()
        };
        for (slot, byte) in device.fw_ver.iter_mut().zip(b"28.39.1002\0") {
            *slot = *byte as std::os::raw::c_char;
        }
        let attr = device_attr_from_raw("mlx5_0", &device);
        assert_eq!(attr.node_guid, 0x248a_0703_0049_d468);
        assert_eq!(attr.fw_ver, "28.39.1002");
        assert_eq!(
            (attr.vendor_id, attr.max_qp_wr, attr.max_cqe),
            (0x02c9, 32768, 4_194_303)
        );
        assert_eq!(attr.name, "mlx5_0");
    }

    #[test]
    fn qp_cap_round_trips() {
        let cap = QpCap {
            max_send_wr: 1,
            max_recv_wr: 2,
            max_send_sge: 3,
            max_recv_sge: 4,
            max_inline_data: 5,
        };
        assert_eq!(qp_cap_from_raw(&qp_cap_to_raw(&cap)), cap);
    }

    mod properties {
        use proptest::prelude::*;

        use super::*;

        fn any_rkey() -> impl Strategy<Value = Rkey> {
            any::<u32>().prop_map(Rkey::new)
        }

        fn any_op() -> impl Strategy<Value = SendOp> {
            prop_oneof![
                Just(SendOp::Send),
                any::<u32>().prop_map(SendOp::SendWithImm),
                any_rkey().prop_map(SendOp::SendWithInv),
                (any::<u64>(), any_rkey())
                    .prop_map(|(remote_addr, rkey)| SendOp::Write { remote_addr, rkey }),
                (any::<u64>(), any_rkey(), any::<u32>()).prop_map(|(remote_addr, rkey, imm)| {
                    SendOp::WriteWithImm {
                        remote_addr,
                        rkey,
                        imm,
                    }
                }),
                (any::<u64>(), any_rkey())
                    .prop_map(|(remote_addr, rkey)| SendOp::Read { remote_addr, rkey }),
                (any::<u64>(), any_rkey(), any::<u64>(), any::<u64>()).prop_map(
                    |(remote_addr, rkey, compare, swap)| SendOp::CompareSwap {
                        remote_addr,
                        rkey,
                        compare,
                        swap,
                    }
                ),
                (any::<u64>(), any_rkey(), any::<u64>()).prop_map(|(remote_addr, rkey, add)| {
                    SendOp::FetchAdd {
                        remote_addr,
                        rkey,
                        add,
                    }
                }),
            ]
        }

        proptest! {
            #[test]
            fn any_send_op_round_trips(op in any_op(), wr_id in any::<u64>(), signaled in any::<bool>()) {
                let eight = [sge(8)];
                let sges: &[Sge] = match op {
                    SendOp::CompareSwap { .. } | SendOp::FetchAdd { .. } => &eight,
                    _ => &[],
                };
                let wr = SendWr {
                    wr_id,
                    sg_list: sges,
                    op,
                    flags: if signaled { SendFlags::SIGNALED } else { SendFlags::EMPTY },
                    ud: None,
                };
                let raw = encode_send(&wr, None).unwrap();
                prop_assert_eq!(raw.wr_id, wr_id);
                prop_assert_eq!(raw.send_flags, wr.flags.bits());
                prop_assert_eq!(decode_send_op(&raw), Some(op));
            }

            #[test]
            fn any_completion_round_trips(
                wr_id in any::<u64>(),
                status in 0u32..=21,
                opcode in prop::sample::select(vec![0u32, 1, 2, 3, 4, 5, 6, 128, 129]),
                vendor_err in any::<u32>(),
                byte_len in any::<u32>(),
                value in any::<u32>(),
                qp_num in 0u32..=0x00ff_ffff,
                src_qp in 0u32..=0x00ff_ffff,
                flags in prop::sample::select(vec![0u32, 1, 2, 3, 8, 9]),
            ) {
                let flags = WcFlags(flags);
                let wc = WorkCompletion {
                    wr_id,
                    status: WcStatus::from_value(status).unwrap(),
                    opcode: WcOpcode::from_value(opcode).unwrap(),
                    vendor_err,
                    byte_len,
                    imm_data: if flags.contains(WcFlags::WITH_IMM) { value } else { 0 },
                    invalidated_rkey: if flags.contains(WcFlags::WITH_INV) { value } else { 0 },
                    qp_num: Qpn::new(qp_num),
                    src_qp: Qpn::new(src_qp),
                    wc_flags: flags,
                };
                prop_assert_eq!(wc_from_raw(&wc_to_raw(&wc)), wc);
            }

            #[test]
            fn psns_above_24_bits_are_always_refused(psn in 0x0100_0000u32..) {
                prop_assert!(qp_attr_to_raw(&QpAttr::new().with_sq_psn(psn)).is_err());
                prop_assert!(qp_attr_to_raw(&QpAttr::new().with_rq_psn(psn)).is_err());
            }

            #[test]
            fn masks_pass_through_unchanged(bits in any::<u32>()) {
                // Every supported bit, alone or combined, reaches C as is;
                // any other bit is refused.
                let unsupported = QpAttrMask::EN_SQD_ASYNC_NOTIFY.bits()
                    | QpAttrMask::ALT_PATH.bits()
                    | QpAttrMask::PATH_MIG_STATE.bits()
                    | QpAttrMask::CAP.bits()
                    | QpAttrMask::RATE_LIMIT.bits();
                // Bits 0..=20 (STATE up to DEST_QPN) less the unsupported.
                let supported = (((IBV_QP_DEST_QPN as u32) << 1) - 1) & !unsupported;
                prop_assert_eq!(supported, 0x0013_bffb);
                let mut attr = QpAttr::new();
                attr.mask = QpAttrMask(bits & supported);
                let (_, mask) = qp_attr_to_raw(&attr).unwrap();
                prop_assert_eq!(mask as u32, bits & supported);
                attr.mask = QpAttrMask(bits);
                prop_assert_eq!(qp_attr_to_raw(&attr).is_ok(), bits & !supported == 0);
            }
        }
    }
}
