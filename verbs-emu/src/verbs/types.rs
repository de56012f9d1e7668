//! The verbs vocabulary: the values of rdma-core's `verbs.h` as Rust types.
//!
//! Numeric values are rdma-core's (ROCEV2.md §5.8-§5.10), so a backend over
//! libibverbs converts with `as` and a table lookup, and the emulator reports
//! the same numbers a real NIC would.

use core::fmt;
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};

use serde::{Deserialize, Serialize};

use super::handle::{AhHandle, CqHandle};
pub use roce::transport::{
    AccessFlags, Mtu, QpAttrMask, QpState, QpType, SendFlags, SendOp, WcOpcode, WcStatus,
};
use roce::wire::{Lkey, Qpn};

roce::flags! {
    /// `ibv_wc_flags`.
    WcFlags: u32 {
        /// A GRH is present in the receive buffer (UD).
        GRH = 1,
        /// `imm_data` is valid.
        WITH_IMM = 2,
        /// The IP checksum was checked and is good.
        IP_CSUM_OK = 4,
        /// `invalidated_rkey` is valid.
        WITH_INV = 8,
    }
}

/// A 16-byte global identifier. On RoCEv2 it is the IP address, IPv4 as an
/// IPv4-mapped IPv6 address (`::ffff:a.b.c.d`).
#[derive(Clone, Copy, PartialEq, Eq, Hash, Default, Serialize, Deserialize)]
pub struct Gid(pub [u8; 16]);

impl Gid {
    /// The GID of an IP address.
    pub fn from_ip(ip: IpAddr) -> Gid {
        match ip {
            IpAddr::V4(v4) => Gid(v4.to_ipv6_mapped().octets()),
            IpAddr::V6(v6) => Gid(v6.octets()),
        }
    }

    /// The IP address this GID stands for (IPv4 when it is IPv4-mapped).
    pub fn to_ip(self) -> IpAddr {
        let v6 = Ipv6Addr::from(self.0);
        match v6.to_ipv4_mapped() {
            Some(v4) => IpAddr::V4(v4),
            None => IpAddr::V6(v6),
        }
    }

    /// The IPv4 address, when the GID is IPv4-mapped.
    pub fn to_ipv4(self) -> Option<Ipv4Addr> {
        Ipv6Addr::from(self.0).to_ipv4_mapped()
    }

    /// The raw bytes.
    pub const fn raw(&self) -> &[u8; 16] {
        &self.0
    }
}

impl fmt::Debug for Gid {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "Gid({})", Ipv6Addr::from(self.0))
    }
}

impl fmt::Display for Gid {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Display::fmt(&Ipv6Addr::from(self.0), f)
    }
}

/// One scatter/gather element: `length` bytes at `addr` inside the memory
/// region whose local key is `lkey` (`ibv_sge`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Sge {
    /// Start address in the process's address space.
    pub addr: u64,
    /// Length in bytes.
    pub length: u32,
    /// Local key of the memory region containing the range.
    pub lkey: Lkey,
}

/// Where a UD send goes (`wr.ud`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct UdDest {
    /// The address handle, from [`crate::verbs::AddressHandle::handle`].
    pub ah: AhHandle,
    /// The destination QP number.
    pub remote_qpn: Qpn,
    /// The destination Q_Key.
    pub remote_qkey: u32,
}

/// A send work request (`ibv_send_wr`, one element; lists are slices).
#[derive(Debug, Clone, Copy)]
pub struct SendWr<'a> {
    /// Returned in the completion.
    pub wr_id: u64,
    /// Local buffers (gathered for SEND/WRITE, scattered for READ/atomics).
    pub sg_list: &'a [Sge],
    /// The operation.
    pub op: SendOp,
    /// SIGNALED, INLINE, SOLICITED, FENCE.
    pub flags: SendFlags,
    /// The destination of a UD send; `None` for connected QPs.
    pub ud: Option<UdDest>,
}

/// A receive work request (`ibv_recv_wr`).
#[derive(Debug, Clone, Copy)]
pub struct RecvWr<'a> {
    /// Returned in the completion.
    pub wr_id: u64,
    /// Buffers the received payload is scattered into.
    pub sg_list: &'a [Sge],
}

/// A work completion (`ibv_wc`).
///
/// After an error only `wr_id`, `status`, `qp_num` and `vendor_err` are
/// meaningful (ROCEV2.md §5.8).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct WorkCompletion {
    /// The work request id.
    pub wr_id: u64,
    /// Outcome.
    pub status: WcStatus,
    /// What completed.
    pub opcode: WcOpcode,
    /// Vendor syndrome (0 in the emulator unless stated).
    pub vendor_err: u32,
    /// Bytes transferred (receives: bytes received).
    pub byte_len: u32,
    /// Immediate data, valid with `WITH_IMM`: the number the sender
    /// posted (C's `ntohl(wc.imm_data)`).
    pub imm_data: u32,
    /// Invalidated remote key, valid with `WITH_INV`.
    pub invalidated_rkey: u32,
    /// The local QP.
    pub qp_num: Qpn,
    /// The source QP (UD receives).
    pub src_qp: Qpn,
    /// Completion flags.
    pub wc_flags: WcFlags,
}

impl WorkCompletion {
    /// A blank completion (for output arrays).
    pub const fn empty() -> WorkCompletion {
        WorkCompletion {
            wr_id: 0,
            status: WcStatus::Success,
            opcode: WcOpcode::Send,
            vendor_err: 0,
            byte_len: 0,
            imm_data: 0,
            invalidated_rkey: 0,
            qp_num: Qpn::new(0),
            src_qp: Qpn::new(0),
            wc_flags: WcFlags::EMPTY,
        }
    }

    /// True when the status is SUCCESS.
    pub fn is_ok(&self) -> bool {
        self.status == WcStatus::Success
    }

    /// The immediate data, when present.
    pub fn imm(&self) -> Option<u32> {
        self.wc_flags
            .contains(WcFlags::WITH_IMM)
            .then_some(self.imm_data)
    }
}

impl Default for WorkCompletion {
    fn default() -> Self {
        WorkCompletion::empty()
    }
}

/// Address vector (`ibv_ah_attr` with its GRH): how to reach a peer.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct AhAttr {
    /// Destination GID.
    pub dgid: Gid,
    /// Index of the local source GID.
    pub sgid_index: u8,
    /// IP TTL / hop limit.
    pub hop_limit: u8,
    /// IP traffic class (DSCP << 2 | ECN).
    pub traffic_class: u8,
    /// IPv6 flow label.
    pub flow_label: u32,
    /// Service level.
    pub sl: u8,
    /// Local port number (1-based).
    pub port_num: u8,
    /// Destination UDP port. Not part of `ibv_ah_attr` (always 4791 on a
    /// real NIC); the emulator needs it when several devices share one host
    /// address on different ports. `None` means the device's default.
    pub dport: Option<u16>,
}

impl AhAttr {
    /// An address vector to `dgid` with rdma-core's usual defaults (hop
    /// limit 64, port 1).
    pub fn to_gid(dgid: Gid) -> AhAttr {
        AhAttr {
            dgid,
            sgid_index: 0,
            hop_limit: 64,
            traffic_class: 0,
            flow_label: 0,
            sl: 0,
            port_num: 1,
            dport: None,
        }
    }
}

/// QP capabilities (`ibv_qp_cap`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct QpCap {
    /// Send queue depth.
    pub max_send_wr: u32,
    /// Receive queue depth.
    pub max_recv_wr: u32,
    /// SGEs per send WR.
    pub max_send_sge: u32,
    /// SGEs per receive WR.
    pub max_recv_sge: u32,
    /// Largest inline payload.
    pub max_inline_data: u32,
}

impl Default for QpCap {
    fn default() -> Self {
        QpCap {
            max_send_wr: 128,
            max_recv_wr: 512,
            max_send_sge: 4,
            max_recv_sge: 4,
            max_inline_data: 220,
        }
    }
}

/// The attributes a modify applies (`ibv_qp_attr` plus its mask). Each
/// `with_*` setter also sets the mask bit, so the mask always says exactly
/// which fields were given.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct QpAttr {
    /// Which fields are set.
    pub mask: QpAttrMask,
    /// Target state.
    pub qp_state: QpState,
    /// Asserted current state.
    pub cur_qp_state: QpState,
    /// Remote access rights for incoming requests.
    pub qp_access_flags: AccessFlags,
    /// P_Key table index.
    pub pkey_index: u16,
    /// Port (1-based).
    pub port_num: u8,
    /// Q_Key (UD).
    pub qkey: u32,
    /// Primary path address vector.
    pub ah_attr: AhAttr,
    /// Path MTU.
    pub path_mtu: Mtu,
    /// Local ACK timeout exponent: 4.096 us x 2^timeout (0 = infinite).
    pub timeout: u8,
    /// Transport retries (0..=7).
    pub retry_cnt: u8,
    /// RNR retries (0..=7, 7 = infinite).
    pub rnr_retry: u8,
    /// Expected PSN of the receive queue.
    pub rq_psn: u32,
    /// First PSN of the send queue.
    pub sq_psn: u32,
    /// Outstanding READ/atomic requests this QP may issue.
    pub max_rd_atomic: u8,
    /// Outstanding READ/atomic requests it accepts.
    pub max_dest_rd_atomic: u8,
    /// RNR NAK timer code (ROCEV2.md §5.6).
    pub min_rnr_timer: u8,
    /// Destination QP number.
    pub dest_qp_num: Qpn,
}

impl Default for QpAttr {
    fn default() -> Self {
        QpAttr {
            mask: QpAttrMask::EMPTY,
            qp_state: QpState::Reset,
            cur_qp_state: QpState::Reset,
            qp_access_flags: AccessFlags::EMPTY,
            pkey_index: 0,
            port_num: 1,
            qkey: 0,
            ah_attr: AhAttr::to_gid(Gid::default()),
            path_mtu: Mtu::Mtu1024,
            timeout: 14,
            retry_cnt: 7,
            rnr_retry: 7,
            rq_psn: 0,
            sq_psn: 0,
            max_rd_atomic: 1,
            max_dest_rd_atomic: 1,
            min_rnr_timer: 12,
            dest_qp_num: Qpn::new(0),
        }
    }
}

macro_rules! with {
    ($($(#[$m:meta])* $fn:ident($field:ident: $ty:ty) => $bit:ident;)*) => {
        impl QpAttr {
            $( $(#[$m])* #[must_use] pub fn $fn(mut self, v: $ty) -> QpAttr {
                self.$field = v;
                self.mask |= QpAttrMask::$bit;
                self
            } )*
        }
    };
}

with! {
    /// Target state.
    with_state(qp_state: QpState) => STATE;
    /// Asserted current state.
    with_cur_state(cur_qp_state: QpState) => CUR_STATE;
    /// Remote access rights.
    with_access_flags(qp_access_flags: AccessFlags) => ACCESS_FLAGS;
    /// P_Key index.
    with_pkey_index(pkey_index: u16) => PKEY_INDEX;
    /// Port number.
    with_port(port_num: u8) => PORT;
    /// Q_Key.
    with_qkey(qkey: u32) => QKEY;
    /// Address vector.
    with_av(ah_attr: AhAttr) => AV;
    /// Path MTU.
    with_path_mtu(path_mtu: Mtu) => PATH_MTU;
    /// ACK timeout exponent.
    with_timeout(timeout: u8) => TIMEOUT;
    /// Retry count.
    with_retry_cnt(retry_cnt: u8) => RETRY_CNT;
    /// RNR retry count.
    with_rnr_retry(rnr_retry: u8) => RNR_RETRY;
    /// Receive PSN.
    with_rq_psn(rq_psn: u32) => RQ_PSN;
    /// Send PSN.
    with_sq_psn(sq_psn: u32) => SQ_PSN;
    /// Initiator depth.
    with_max_rd_atomic(max_rd_atomic: u8) => MAX_QP_RD_ATOMIC;
    /// Responder resources.
    with_max_dest_rd_atomic(max_dest_rd_atomic: u8) => MAX_DEST_RD_ATOMIC;
    /// RNR NAK timer.
    with_min_rnr_timer(min_rnr_timer: u8) => MIN_RNR_TIMER;
    /// Destination QP.
    with_dest_qpn(dest_qp_num: Qpn) => DEST_QPN;
}

impl QpAttr {
    /// An empty attribute set (no mask bits).
    pub fn new() -> QpAttr {
        QpAttr::default()
    }
}

/// Creation attributes of a QP (`ibv_qp_init_attr`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct QpInitAttr {
    /// Transport.
    pub qp_type: QpType,
    /// CQ for send completions.
    pub send_cq: CqHandle,
    /// CQ for receive completions.
    pub recv_cq: CqHandle,
    /// Queue sizes.
    pub cap: QpCap,
    /// Every send WR generates a completion.
    pub sq_sig_all: bool,
    /// The QP's congestion control (reaction point); `None`: the device's
    /// setting. Emulated devices only: a NIC's is set in its firmware.
    pub cc: Option<roce::cc::CcConfig>,
    /// The QP's CNP interval (notification point); `None`: the device's.
    /// Emulated devices only.
    pub min_time_between_cnps: Option<roce::time::Duration>,
}

/// Port attributes (`ibv_port_attr`, the fields used here).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct PortAttr {
    /// `ibv_port_state`: 4 = ACTIVE.
    pub state: u32,
    /// Largest MTU.
    pub max_mtu: Mtu,
    /// Active MTU.
    pub active_mtu: Mtu,
    /// Number of GIDs.
    pub gid_tbl_len: u32,
    /// Link layer: true for Ethernet (RoCE).
    pub link_layer_ethernet: bool,
    /// LID (0 on RoCE).
    pub lid: u16,
}

/// What a device is (`ibv_device` plus `ibv_device_attr` essentials).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct DeviceAttr {
    /// Device name, e.g. `rxe_lo` or `mlx5_0`.
    pub name: String,
    /// Node GUID (host order).
    pub node_guid: u64,
    /// Firmware or emulator version string.
    pub fw_ver: String,
    /// Vendor id.
    pub vendor_id: u32,
    /// Largest MR.
    pub max_mr_size: u64,
    /// Largest QP depth.
    pub max_qp_wr: u32,
    /// Largest CQ.
    pub max_cqe: u32,
    /// Number of physical ports.
    pub phys_port_cnt: u8,
}

/// What a peer needs to reach one QP, exchanged out of band (over TCP,
/// a file, anything serde writes). The MR fields are present when the QP's
/// owner offers a buffer for RDMA.
///
/// Its serde form is portable JSON that another implementation can write
/// by hand: the GID in its usual text form (`"::ffff:127.0.0.1"`, or
/// IPv4 `"127.0.0.1"`, read as the IPv4-mapped GID), the MTU as a number of
/// bytes (`4096`):
///
/// ```json
/// {"lid":0,"qpn":17,"psn":1234,"gid":"::ffff:127.0.0.1","udp_port":4791,
///  "mtu":1024,"mr":{"addr":4096,"rkey":257,"len":65536}}
/// ```
///
/// Reading it validates every field (QPN and PSN are 24 bits, the MTU is
/// one of 256..4096, the UDP port is not 0, an offered region is not
/// empty and does not wrap) and refuses unknown fields, naming the field
/// and what was expected.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(try_from = "EndpointJson", into = "EndpointJson")]
pub struct Endpoint {
    /// LID (0 on RoCE).
    pub lid: u16,
    /// QP number.
    pub qpn: u32,
    /// First PSN this QP sends with (the peer's `rq_psn`).
    pub psn: u32,
    /// GID of the QP's port.
    pub gid: Gid,
    /// UDP port the device listens on (4791 on real NICs).
    pub udp_port: u16,
    /// Path MTU the owner supports.
    pub mtu: Mtu,
    /// A memory region offered to the peer.
    pub mr: Option<RemoteMr>,
}

/// The attributes [`QueuePair::connect_with`](super::QueuePair::connect_with)
/// gives a QP on its way to RTS. [`ConnectAttr::new`] holds perftest's
/// usual values; change the fields for others.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ConnectAttr {
    /// First PSN this QP sends with (`sq_psn`; the peer's `rq_psn`).
    pub psn: u32,
    /// Path MTU.
    pub mtu: Mtu,
    /// Rights incoming requests get (`qp_access_flags`).
    pub access: AccessFlags,
    /// P_Key index.
    pub pkey_index: u16,
    /// Local ACK timeout exponent: 4.096 us x 2^timeout (0: none).
    pub timeout: u8,
    /// Transport retries (0..=7).
    pub retry_cnt: u8,
    /// RNR retries (0..=7, 7 = infinite).
    pub rnr_retry: u8,
    /// RNR NAK timer code this QP's receive side sends (ROCEV2.md §5.6).
    pub min_rnr_timer: u8,
    /// READs and atomics this QP keeps outstanding as requester.
    pub max_rd_atomic: u8,
    /// READs and atomics it accepts as responder.
    pub max_dest_rd_atomic: u8,
}

impl ConnectAttr {
    /// perftest's values: `timeout` 14, 7 retries, 7 RNR retries, RNR
    /// timer 12, 16 outstanding READs/atomics each way, P_Key index 0.
    pub fn new(psn: u32, mtu: Mtu, access: AccessFlags) -> ConnectAttr {
        ConnectAttr {
            psn,
            mtu,
            access,
            pkey_index: 0,
            timeout: 14,
            retry_cnt: 7,
            rnr_retry: 7,
            min_rnr_timer: 12,
            max_rd_atomic: 16,
            max_dest_rd_atomic: 16,
        }
    }
}

/// The JSON form of an [`Endpoint`].
#[derive(Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
struct EndpointJson {
    lid: u16,
    qpn: u32,
    psn: u32,
    gid: String,
    udp_port: u16,
    mtu: u32,
    #[serde(default)]
    mr: Option<RemoteMr>,
}

impl From<Endpoint> for EndpointJson {
    fn from(e: Endpoint) -> EndpointJson {
        EndpointJson {
            lid: e.lid,
            qpn: e.qpn,
            psn: e.psn,
            gid: e.gid.to_string(),
            udp_port: e.udp_port,
            mtu: e.mtu.bytes(),
            mr: e.mr,
        }
    }
}

impl TryFrom<EndpointJson> for Endpoint {
    type Error = String;

    fn try_from(j: EndpointJson) -> core::result::Result<Endpoint, String> {
        if j.qpn > 0xFF_FFFF {
            return Err(format!(
                "endpoint qpn {}: expected 24 bits (0..=16777215)",
                j.qpn
            ));
        }
        if j.psn > 0xFF_FFFF {
            return Err(format!(
                "endpoint psn {}: expected 24 bits (0..=16777215)",
                j.psn
            ));
        }
        let ip: IpAddr = j.gid.parse().map_err(|_| {
            format!(
                "endpoint gid {:?}: expected a GID in IPv6 text form (e.g. \"::ffff:127.0.0.1\") or an IPv4 address",
                j.gid
            )
        })?;
        let mtu = Mtu::from_bytes(j.mtu).ok_or_else(|| {
            format!(
                "endpoint mtu {}: expected 256, 512, 1024, 2048 or 4096",
                j.mtu
            )
        })?;
        if j.udp_port == 0 {
            return Err(
                "endpoint udp_port 0: expected the device's UDP port (4791 on NICs)".into(),
            );
        }
        if let Some(m) = j.mr {
            if m.len == 0 || m.addr.checked_add(m.len).is_none() {
                return Err(format!(
                    "endpoint mr {{addr {:#x}, len {}}}: expected a non-empty range that does not wrap",
                    m.addr, m.len
                ));
            }
        }
        Ok(Endpoint {
            lid: j.lid,
            qpn: j.qpn,
            psn: j.psn,
            gid: Gid::from_ip(ip),
            udp_port: j.udp_port,
            mtu,
            mr: j.mr,
        })
    }
}

/// A memory region as a peer sees it: address, key and length.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct RemoteMr {
    /// Start address (or 0 for ZERO_BASED regions).
    pub addr: u64,
    /// Remote key.
    pub rkey: u32,
    /// Length in bytes.
    pub len: u64,
}

#[cfg(test)]
mod tests {
    use super::*;
    use roce::wire::Rkey;

    #[test]
    fn an_endpoint_is_portable_json_and_is_validated() {
        let e = Endpoint {
            lid: 0,
            qpn: 17,
            psn: 1234,
            gid: Gid::from_ip(IpAddr::V4(Ipv4Addr::new(127, 0, 0, 1))),
            udp_port: 4791,
            mtu: Mtu::Mtu1024,
            mr: Some(RemoteMr {
                addr: 4096,
                rkey: 257,
                len: 65536,
            }),
        };
        let json = serde_json::to_string(&e).unwrap();
        assert_eq!(
            json,
            r#"{"lid":0,"qpn":17,"psn":1234,"gid":"::ffff:127.0.0.1","udp_port":4791,"mtu":1024,"mr":{"addr":4096,"rkey":257,"len":65536}}"#
        );
        assert_eq!(serde_json::from_str::<Endpoint>(&json).unwrap(), e);
        // Written by hand elsewhere: an IPv4 GID, no region.
        let other: Endpoint = serde_json::from_str(
            r#"{"lid":0,"qpn":5,"psn":0,"gid":"10.0.0.2","udp_port":4791,"mtu":4096}"#,
        )
        .unwrap();
        assert_eq!(other.gid.to_ipv4(), Some(Ipv4Addr::new(10, 0, 0, 2)));
        assert_eq!((other.mtu, other.mr), (Mtu::Mtu4096, None));
        for (bad, says) in [
            (
                json.replace("\"qpn\":17", "\"qpn\":16777216"),
                "qpn 16777216",
            ),
            (
                json.replace("\"psn\":1234", "\"psn\":99999999"),
                "psn 99999999",
            ),
            (
                json.replace("::ffff:127.0.0.1", "localhost"),
                "gid \"localhost\"",
            ),
            (json.replace("\"mtu\":1024", "\"mtu\":1500"), "mtu 1500"),
            (
                json.replace("\"udp_port\":4791", "\"udp_port\":0"),
                "udp_port 0",
            ),
            (json.replace("\"len\":65536", "\"len\":0"), "endpoint mr"),
            (
                json.replace("\"lid\":0", "\"lid\":0,\"extra\":1"),
                "unknown field `extra`",
            ),
        ] {
            let err = serde_json::from_str::<Endpoint>(&bad)
                .unwrap_err()
                .to_string();
            assert!(err.contains(says), "{bad}: {err}");
        }
    }

    #[test]
    fn values_match_rdma_core() {
        assert_eq!(WcStatus::RemAccessErr.value(), 10);
        assert_eq!(WcStatus::RetryExcErr.value(), 12);
        assert_eq!(WcStatus::from_value(13), Some(WcStatus::RnrRetryExcErr));
        assert_eq!(WcOpcode::RecvRdmaWithImm.value(), 129);
        assert_eq!(QpAttrMask::DEST_QPN.bits(), 1 << 20);
        assert_eq!(QpAttrMask::RATE_LIMIT.bits(), 1 << 25);
        assert_eq!(Mtu::Mtu4096.bytes(), 4096);
        assert_eq!(Mtu::Mtu256.value(), 1);
        assert_eq!(Mtu::for_link_mtu(1500), Mtu::Mtu1024);
        assert_eq!(Mtu::for_link_mtu(65536), Mtu::Mtu4096);
        assert_eq!(SendOp::SendWithInv(Rkey::new(1)).wr_opcode(), 9);
    }

    #[test]
    fn qp_attr_setters_set_mask_bits() {
        let a = QpAttr::new()
            .with_state(QpState::Init)
            .with_port(1)
            .with_pkey_index(0)
            .with_access_flags(AccessFlags::REMOTE_WRITE);
        assert_eq!(
            a.mask,
            QpAttrMask::STATE
                | QpAttrMask::PORT
                | QpAttrMask::PKEY_INDEX
                | QpAttrMask::ACCESS_FLAGS
        );
        assert_eq!(a.qp_access_flags, AccessFlags::REMOTE_WRITE);
    }

    #[test]
    fn gid_round_trips_ipv4_mapped() {
        let g = Gid::from_ip("10.0.0.5".parse().unwrap());
        assert_eq!(&g.0[10..], &[255, 255, 10, 0, 0, 5]);
        assert_eq!(g.to_ip(), "10.0.0.5".parse::<IpAddr>().unwrap());
        let s = serde_json::to_string(&g).unwrap();
        assert_eq!(serde_json::from_str::<Gid>(&s).unwrap(), g);
    }
}
