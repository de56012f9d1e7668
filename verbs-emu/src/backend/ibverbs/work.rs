//! Plain-data descriptions of what the hardware backend asks of a NIC, and
//! their exact translation to and from the C structs: QP attributes for each
//! state transition, send work requests, and work completions.
//!
//! Nothing here calls libibverbs, so every translation is unit-tested on any
//! machine. Immediate data is a host-order `u32` here and big-endian in the C
//! structs (`__be32`), as `ibv_post_send` and `ibv_poll_cq` expect.

use std::os::raw::{c_int, c_uint};

use super::error::{IbverbsError, Result};
use super::ffi::*;

/// The largest PSN (24 bits).
const PSN_MASK: u32 = 0x00ff_ffff;

/// Transport service type of a queue pair.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum QpType {
    /// Reliable connected.
    Rc,
    /// Unreliable connected.
    Uc,
    /// Unreliable datagram.
    Ud,
}

impl QpType {
    /// The `enum ibv_qp_type` value.
    pub fn raw(self) -> u32 {
        match self {
            Self::Rc => IBV_QPT_RC,
            Self::Uc => IBV_QPT_UC,
            Self::Ud => IBV_QPT_UD,
        }
    }

    /// The type for an `enum ibv_qp_type` value, if it is one of ours.
    pub fn from_raw(raw: u32) -> Option<Self> {
        match raw {
            IBV_QPT_RC => Some(Self::Rc),
            IBV_QPT_UC => Some(Self::Uc),
            IBV_QPT_UD => Some(Self::Ud),
            _ => None,
        }
    }
}

/// Memory-region and QP access rights (`enum ibv_access_flags`).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub struct AccessFlags(c_uint);

impl AccessFlags {
    /// No access beyond local read.
    pub const NONE: Self = Self(0);
    /// The local NIC may write (needed for receives and READ responses).
    pub const LOCAL_WRITE: Self = Self(IBV_ACCESS_LOCAL_WRITE);
    /// Peers may RDMA WRITE.
    pub const REMOTE_WRITE: Self = Self(IBV_ACCESS_REMOTE_WRITE);
    /// Peers may RDMA READ.
    pub const REMOTE_READ: Self = Self(IBV_ACCESS_REMOTE_READ);
    /// Peers may perform atomics.
    pub const REMOTE_ATOMIC: Self = Self(IBV_ACCESS_REMOTE_ATOMIC);
    /// PCIe relaxed ordering (an optional flag: kernels may ignore it).
    pub const RELAXED_ORDERING: Self = Self(IBV_ACCESS_RELAXED_ORDERING);

    /// The raw `ibv_access_flags` bits.
    pub fn bits(self) -> c_uint {
        self.0
    }

    /// Flags from raw bits (unknown bits are passed to the library as is).
    pub fn from_bits(bits: c_uint) -> Self {
        Self(bits)
    }

    /// Whether every flag of `other` is set.
    pub fn contains(self, other: Self) -> bool {
        self.0 & other.0 == other.0
    }

    /// Whether any flag in `IBV_ACCESS_OPTIONAL_RANGE` is set, which makes
    /// the header's `ibv_reg_mr` macro call `ibv_reg_mr_iova2`.
    pub fn has_optional(self) -> bool {
        self.0 & IBV_ACCESS_OPTIONAL_RANGE != 0
    }
}

impl std::ops::BitOr for AccessFlags {
    type Output = Self;
    fn bitor(self, other: Self) -> Self {
        Self(self.0 | other.0)
    }
}

/// Path MTU (`enum ibv_mtu`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Mtu {
    /// 256 bytes.
    Mtu256,
    /// 512 bytes.
    Mtu512,
    /// 1024 bytes.
    Mtu1024,
    /// 2048 bytes.
    Mtu2048,
    /// 4096 bytes.
    Mtu4096,
}

impl Mtu {
    /// The MTU of exactly `bytes` (256, 512, 1024, 2048 or 4096).
    pub fn from_bytes(bytes: u32) -> Option<Self> {
        match bytes {
            256 => Some(Self::Mtu256),
            512 => Some(Self::Mtu512),
            1024 => Some(Self::Mtu1024),
            2048 => Some(Self::Mtu2048),
            4096 => Some(Self::Mtu4096),
            _ => None,
        }
    }

    /// Payload bytes per packet.
    pub fn bytes(self) -> u32 {
        256 << (self.raw() - 1)
    }

    /// The `enum ibv_mtu` value.
    pub fn raw(self) -> u32 {
        match self {
            Self::Mtu256 => IBV_MTU_256,
            Self::Mtu512 => IBV_MTU_512,
            Self::Mtu1024 => IBV_MTU_1024,
            Self::Mtu2048 => IBV_MTU_2048,
            Self::Mtu4096 => IBV_MTU_4096,
        }
    }

    /// The MTU for an `enum ibv_mtu` value (as `ibv_port_attr` reports it).
    pub fn from_raw(raw: u32) -> Option<Self> {
        match raw {
            IBV_MTU_256 => Some(Self::Mtu256),
            IBV_MTU_512 => Some(Self::Mtu512),
            IBV_MTU_1024 => Some(Self::Mtu1024),
            IBV_MTU_2048 => Some(Self::Mtu2048),
            IBV_MTU_4096 => Some(Self::Mtu4096),
            _ => None,
        }
    }
}

/// RESET to INIT: the local port and what peers may do.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct InitAttributes {
    /// Physical port, counted from 1.
    pub port_num: u8,
    /// P_Key table index (0 on RoCE).
    pub pkey_index: u16,
    /// Remote access rights (RC and UC).
    pub access: AccessFlags,
    /// Q_Key (UD only).
    pub qkey: u32,
}

/// INIT to RTR: the remote side (from the out-of-band exchange) and the path.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct RtrAttributes {
    /// Path MTU.
    pub path_mtu: Mtu,
    /// The peer's QP number (RC, UC).
    pub dest_qp_num: u32,
    /// The first PSN this QP expects (the peer's initial send PSN).
    pub rq_psn: u32,
    /// READ/atomic requests this QP serves at once (RC).
    pub max_dest_rd_atomic: u8,
    /// RNR NAK timer code, 0..=31 (RC).
    pub min_rnr_timer: u8,
    /// The peer's GID (RoCE addresses are always global).
    pub dgid: [u8; 16],
    /// Our GID table index (selects RoCE v1/v2 and the source IP).
    pub sgid_index: u8,
    /// IP TTL / hop limit.
    pub hop_limit: u8,
    /// IP traffic class (DSCP and ECN bits).
    pub traffic_class: u8,
    /// IPv6 flow label (20 bits).
    pub flow_label: u32,
    /// Service level (maps to the Ethernet priority on RoCE).
    pub service_level: u8,
    /// Local port, counted from 1.
    pub port_num: u8,
}

/// RTR to RTS: the requester's timers and initial PSN.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct RtsAttributes {
    /// First PSN this QP sends.
    pub sq_psn: u32,
    /// Local ACK timeout code, 0..=31: 4.096 us * 2^timeout (RC).
    pub timeout: u8,
    /// Transport retries, 0..=7 (RC).
    pub retry_cnt: u8,
    /// RNR retries, 0..=7, 7 meaning forever (RC).
    pub rnr_retry: u8,
    /// READ/atomic requests this QP keeps outstanding (RC).
    pub max_rd_atomic: u8,
}

fn check_range(verb: &'static str, what: &str, value: u32, max: u32) -> Result<()> {
    if value > max {
        return Err(IbverbsError::InvalidArgument {
            verb,
            reason: format!("{what} is {value}, at most {max} allowed"),
        });
    }
    Ok(())
}

/// The `ibv_modify_qp` attributes and mask that move a QP of `qp_type` from
/// RESET to INIT, as rdma-core's example programs set them.
pub fn init_attributes(qp_type: QpType, init: &InitAttributes) -> (ibv_qp_attr, c_int) {
    let mut attr = ibv_qp_attr {
        qp_state: IBV_QPS_INIT,
        pkey_index: init.pkey_index,
        port_num: init.port_num,
        ..Default::default()
    };
    let mut mask = IBV_QP_STATE | IBV_QP_PKEY_INDEX | IBV_QP_PORT;
    match qp_type {
        QpType::Rc | QpType::Uc => {
            attr.qp_access_flags = init.access.bits();
            mask |= IBV_QP_ACCESS_FLAGS;
        }
        QpType::Ud => {
            attr.qkey = init.qkey;
            mask |= IBV_QP_QKEY;
        }
    }
    (attr, mask)
}

/// The attributes and mask for INIT to RTR. Errors name the out-of-range
/// field.
pub fn rtr_attributes(qp_type: QpType, rtr: &RtrAttributes) -> Result<(ibv_qp_attr, c_int)> {
    const VERB: &str = "ibv_modify_qp(RTR)";
    let mut attr = ibv_qp_attr {
        qp_state: IBV_QPS_RTR,
        ..Default::default()
    };
    let mut mask = IBV_QP_STATE;
    if qp_type == QpType::Ud {
        return Ok((attr, mask));
    }
    check_range(VERB, "rq_psn", rtr.rq_psn, PSN_MASK)?;
    check_range(VERB, "dest_qp_num", rtr.dest_qp_num, PSN_MASK)?;
    check_range(VERB, "flow_label", rtr.flow_label, 0x000f_ffff)?;
    check_range(VERB, "service_level", rtr.service_level.into(), 15)?;
    attr.path_mtu = rtr.path_mtu.raw();
    attr.dest_qp_num = rtr.dest_qp_num;
    attr.rq_psn = rtr.rq_psn;
    attr.ah_attr = ibv_ah_attr {
        grh: ibv_global_route {
            dgid: ibv_gid::from_bytes(rtr.dgid),
            flow_label: rtr.flow_label,
            sgid_index: rtr.sgid_index,
            hop_limit: rtr.hop_limit,
            traffic_class: rtr.traffic_class,
        },
        dlid: 0,
        sl: rtr.service_level,
        src_path_bits: 0,
        static_rate: 0,
        is_global: 1,
        port_num: rtr.port_num,
    };
    mask |= IBV_QP_AV | IBV_QP_PATH_MTU | IBV_QP_DEST_QPN | IBV_QP_RQ_PSN;
    if qp_type == QpType::Rc {
        check_range(VERB, "min_rnr_timer", rtr.min_rnr_timer.into(), 31)?;
        attr.max_dest_rd_atomic = rtr.max_dest_rd_atomic;
        attr.min_rnr_timer = rtr.min_rnr_timer;
        mask |= IBV_QP_MAX_DEST_RD_ATOMIC | IBV_QP_MIN_RNR_TIMER;
    }
    Ok((attr, mask))
}

/// The attributes and mask for RTR to RTS.
pub fn rts_attributes(qp_type: QpType, rts: &RtsAttributes) -> Result<(ibv_qp_attr, c_int)> {
    const VERB: &str = "ibv_modify_qp(RTS)";
    check_range(VERB, "sq_psn", rts.sq_psn, PSN_MASK)?;
    let mut attr = ibv_qp_attr {
        qp_state: IBV_QPS_RTS,
        sq_psn: rts.sq_psn,
        ..Default::default()
    };
    let mut mask = IBV_QP_STATE | IBV_QP_SQ_PSN;
    if qp_type == QpType::Rc {
        check_range(VERB, "timeout", rts.timeout.into(), 31)?;
        check_range(VERB, "retry_cnt", rts.retry_cnt.into(), 7)?;
        check_range(VERB, "rnr_retry", rts.rnr_retry.into(), 7)?;
        attr.timeout = rts.timeout;
        attr.retry_cnt = rts.retry_cnt;
        attr.rnr_retry = rts.rnr_retry;
        attr.max_rd_atomic = rts.max_rd_atomic;
        mask |= IBV_QP_TIMEOUT | IBV_QP_RETRY_CNT | IBV_QP_RNR_RETRY | IBV_QP_MAX_QP_RD_ATOMIC;
    }
    Ok((attr, mask))
}

/// The remote end of an RDMA or atomic operation.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct RemoteSegment {
    /// Virtual address in the peer's memory region.
    pub addr: u64,
    /// The peer region's rkey.
    pub rkey: u32,
}

/// What a send work request does (`enum ibv_wr_opcode` and its union).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum SendOp {
    /// SEND: consumes a receive WQE at the peer.
    Send,
    /// SEND with immediate data (host order here).
    SendWithImm {
        /// Immediate data.
        imm: u32,
    },
    /// RDMA WRITE.
    Write {
        /// Where to write.
        remote: RemoteSegment,
    },
    /// RDMA WRITE with immediate (consumes a receive WQE at the peer).
    WriteWithImm {
        /// Where to write.
        remote: RemoteSegment,
        /// Immediate data.
        imm: u32,
    },
    /// RDMA READ into the local SGEs.
    Read {
        /// Where to read from.
        remote: RemoteSegment,
    },
    /// 64-bit compare and swap; the old value lands in the one 8-byte SGE.
    CompareSwap {
        /// The 8-byte aligned target.
        remote: RemoteSegment,
        /// Value compared with the target.
        compare: u64,
        /// Value stored when equal.
        swap: u64,
    },
    /// 64-bit fetch and add; the old value lands in the one 8-byte SGE.
    FetchAdd {
        /// The 8-byte aligned target.
        remote: RemoteSegment,
        /// Value added.
        add: u64,
    },
}

impl SendOp {
    fn opcode(self) -> u32 {
        match self {
            Self::Send => IBV_WR_SEND,
            Self::SendWithImm { .. } => IBV_WR_SEND_WITH_IMM,
            Self::Write { .. } => IBV_WR_RDMA_WRITE,
            Self::WriteWithImm { .. } => IBV_WR_RDMA_WRITE_WITH_IMM,
            Self::Read { .. } => IBV_WR_RDMA_READ,
            Self::CompareSwap { .. } => IBV_WR_ATOMIC_CMP_AND_SWP,
            Self::FetchAdd { .. } => IBV_WR_ATOMIC_FETCH_AND_ADD,
        }
    }

    fn is_atomic(self) -> bool {
        matches!(self, Self::CompareSwap { .. } | Self::FetchAdd { .. })
    }
}

/// Flags of a send work request (`enum ibv_send_flags`).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct SendFlags {
    /// Generate a completion (otherwise only errors and the QP's
    /// `sq_sig_all` do).
    pub signaled: bool,
    /// Copy the payload into the WQE at post time (lkeys are ignored).
    pub inline: bool,
    /// Set the solicited-event bit.
    pub solicited: bool,
    /// Wait for earlier READs and atomics first.
    pub fence: bool,
}

impl SendFlags {
    /// The raw `ibv_send_flags` bits.
    pub fn bits(self) -> c_uint {
        let mut bits = 0;
        if self.fence {
            bits |= IBV_SEND_FENCE;
        }
        if self.signaled {
            bits |= IBV_SEND_SIGNALED;
        }
        if self.solicited {
            bits |= IBV_SEND_SOLICITED;
        }
        if self.inline {
            bits |= IBV_SEND_INLINE;
        }
        bits
    }

    /// Flags from raw bits (bits we do not model are dropped).
    pub fn from_bits(bits: c_uint) -> Self {
        Self {
            fence: bits & IBV_SEND_FENCE != 0,
            signaled: bits & IBV_SEND_SIGNALED != 0,
            solicited: bits & IBV_SEND_SOLICITED != 0,
            inline: bits & IBV_SEND_INLINE != 0,
        }
    }
}

/// The UD destination of a send (address handle, QPN and Q_Key).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct UdDestination {
    /// `ibv_ah` created on the sending QP's PD.
    pub ah: *mut ibv_ah,
    /// The destination QP number.
    pub remote_qpn: u32,
    /// The destination's Q_Key.
    pub remote_qkey: u32,
}

/// Fills `wr` (everything but `sg_list`, `num_sge` and `next`) for `op`.
/// Atomics need exactly one 8-byte SGE; `sge_lengths` are the lengths of the
/// SGEs the caller attaches.
pub fn encode_send(
    wr_id: u64,
    op: SendOp,
    flags: SendFlags,
    ud: Option<UdDestination>,
    sge_lengths: &[u32],
) -> Result<ibv_send_wr> {
    const VERB: &str = "ibv_post_send";
    if op.is_atomic() {
        if sge_lengths != [8] {
            return Err(IbverbsError::InvalidArgument {
                verb: VERB,
                reason: format!(
                    "an atomic needs exactly one 8-byte SGE for the old value, got lengths {sge_lengths:?}"
                ),
            });
        }
        if flags.inline {
            return Err(IbverbsError::InvalidArgument {
                verb: VERB,
                reason: "an atomic cannot be inline".to_owned(),
            });
        }
    }
    if matches!(op, SendOp::Read { .. }) && flags.inline {
        return Err(IbverbsError::InvalidArgument {
            verb: VERB,
            reason: "an RDMA READ cannot be inline".to_owned(),
        });
    }
    let mut wr = ibv_send_wr {
        wr_id,
        opcode: op.opcode(),
        send_flags: flags.bits(),
        ..Default::default()
    };
    match op {
        SendOp::Send => {}
        SendOp::SendWithImm { imm } => wr.imm_data = imm.to_be(),
        SendOp::Write { remote } | SendOp::Read { remote } => {
            wr.wr.rdma = ibv_send_wr_rdma {
                remote_addr: remote.addr,
                rkey: remote.rkey,
            };
        }
        SendOp::WriteWithImm { remote, imm } => {
            wr.imm_data = imm.to_be();
            wr.wr.rdma = ibv_send_wr_rdma {
                remote_addr: remote.addr,
                rkey: remote.rkey,
            };
        }
        SendOp::CompareSwap {
            remote,
            compare,
            swap,
        } => {
            wr.wr.atomic = ibv_send_wr_atomic {
                remote_addr: remote.addr,
                compare_add: compare,
                swap,
                rkey: remote.rkey,
            };
        }
        SendOp::FetchAdd { remote, add } => {
            wr.wr.atomic = ibv_send_wr_atomic {
                remote_addr: remote.addr,
                compare_add: add,
                swap: 0,
                rkey: remote.rkey,
            };
        }
    }
    if let Some(ud) = ud {
        if !matches!(op, SendOp::Send | SendOp::SendWithImm { .. }) {
            return Err(IbverbsError::InvalidArgument {
                verb: VERB,
                reason: format!("UD supports only SEND, not {op:?}"),
            });
        }
        wr.wr.ud = ibv_send_wr_ud {
            ah: ud.ah,
            remote_qpn: ud.remote_qpn,
            remote_qkey: ud.remote_qkey,
        };
    }
    Ok(wr)
}

/// Reads back the operation `encode_send` put into `wr`, if its opcode is
/// one we model (the inverse of [`encode_send`]; UD destinations are not
/// part of `SendOp`).
pub fn decode_send_op(wr: &ibv_send_wr) -> Option<SendOp> {
    let rdma = || {
        // SAFETY: every view of `wr.wr` is plain integers and pointers,
        // valid for any bit pattern; `opcode` selects the view written.
        let rdma = unsafe { wr.wr.rdma };
        RemoteSegment {
            addr: rdma.remote_addr,
            rkey: rdma.rkey,
        }
    };
    // SAFETY: as above, for the atomic view.
    let atomic = || unsafe { wr.wr.atomic };
    Some(match wr.opcode {
        IBV_WR_SEND => SendOp::Send,
        IBV_WR_SEND_WITH_IMM => SendOp::SendWithImm {
            imm: u32::from_be(wr.imm_data),
        },
        IBV_WR_RDMA_WRITE => SendOp::Write { remote: rdma() },
        IBV_WR_RDMA_WRITE_WITH_IMM => SendOp::WriteWithImm {
            remote: rdma(),
            imm: u32::from_be(wr.imm_data),
        },
        IBV_WR_RDMA_READ => SendOp::Read { remote: rdma() },
        IBV_WR_ATOMIC_CMP_AND_SWP => {
            let a = atomic();
            SendOp::CompareSwap {
                remote: RemoteSegment {
                    addr: a.remote_addr,
                    rkey: a.rkey,
                },
                compare: a.compare_add,
                swap: a.swap,
            }
        }
        IBV_WR_ATOMIC_FETCH_AND_ADD => {
            let a = atomic();
            SendOp::FetchAdd {
                remote: RemoteSegment {
                    addr: a.remote_addr,
                    rkey: a.rkey,
                },
                add: a.compare_add,
            }
        }
        _ => return None,
    })
}

macro_rules! wc_statuses {
    ($($value:literal => $variant:ident, $text:literal;)*) => {
        /// Status of a work completion (`enum ibv_wc_status`), with
        /// `ibv_wc_status_str`'s wording.
        #[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
        pub enum WcStatus {
            $(
                #[doc = $text]
                $variant,
            )*
            /// A status this backend does not know (a newer library).
            Unknown(u32),
        }

        impl WcStatus {
            /// The status for a raw `enum ibv_wc_status` value.
            pub fn from_raw(raw: u32) -> Self {
                match raw {
                    $($value => Self::$variant,)*
                    other => Self::Unknown(other),
                }
            }

            /// The raw `enum ibv_wc_status` value.
            pub fn raw(self) -> u32 {
                match self {
                    $(Self::$variant => $value,)*
                    Self::Unknown(other) => other,
                }
            }

            /// `ibv_wc_status_str`'s text.
            pub fn text(self) -> &'static str {
                match self {
                    $(Self::$variant => $text,)*
                    Self::Unknown(_) => "unknown",
                }
            }
        }
    };
}

wc_statuses! {
    0 => Success, "success";
    1 => LocLenErr, "local length error";
    2 => LocQpOpErr, "local QP operation error";
    3 => LocEecOpErr, "local EE context operation error";
    4 => LocProtErr, "local protection error";
    5 => WrFlushErr, "Work Request Flushed Error";
    6 => MwBindErr, "memory management operation error";
    7 => BadRespErr, "bad response error";
    8 => LocAccessErr, "local access error";
    9 => RemInvReqErr, "remote invalid request error";
    10 => RemAccessErr, "remote access error";
    11 => RemOpErr, "remote operation error";
    12 => RetryExcErr, "transport retry counter exceeded";
    13 => RnrRetryExcErr, "RNR retry counter exceeded";
    14 => LocRddViolErr, "local RDD violation error";
    15 => RemInvRdReqErr, "remote invalid RD request";
    16 => RemAbortErr, "aborted error";
    17 => InvEecnErr, "invalid EE context number";
    18 => InvEecStateErr, "invalid EE context state";
    19 => FatalErr, "fatal error";
    20 => RespTimeoutErr, "response timeout error";
    21 => GeneralErr, "general error";
    22 => TmErr, "TM error";
    23 => TmRndvIncomplete, "TM software rendezvous";
}

/// What a work completion completed (`enum ibv_wc_opcode`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum WcOpcode {
    /// A SEND (with or without immediate) finished.
    Send,
    /// An RDMA WRITE finished.
    RdmaWrite,
    /// An RDMA READ finished.
    RdmaRead,
    /// A compare-and-swap finished.
    CompSwap,
    /// A fetch-and-add finished.
    FetchAdd,
    /// A receive WQE was consumed by a SEND.
    Recv,
    /// A receive WQE was consumed by an RDMA WRITE with immediate.
    RecvRdmaWithImm,
    /// Any other opcode (memory windows, TSO, tag matching, ...).
    Other(u32),
}

impl WcOpcode {
    /// The opcode for a raw `enum ibv_wc_opcode` value.
    pub fn from_raw(raw: u32) -> Self {
        match raw {
            IBV_WC_SEND => Self::Send,
            IBV_WC_RDMA_WRITE => Self::RdmaWrite,
            IBV_WC_RDMA_READ => Self::RdmaRead,
            IBV_WC_COMP_SWAP => Self::CompSwap,
            IBV_WC_FETCH_ADD => Self::FetchAdd,
            IBV_WC_RECV => Self::Recv,
            IBV_WC_RECV_RDMA_WITH_IMM => Self::RecvRdmaWithImm,
            other => Self::Other(other),
        }
    }

    /// The raw `enum ibv_wc_opcode` value.
    pub fn raw(self) -> u32 {
        match self {
            Self::Send => IBV_WC_SEND,
            Self::RdmaWrite => IBV_WC_RDMA_WRITE,
            Self::RdmaRead => IBV_WC_RDMA_READ,
            Self::CompSwap => IBV_WC_COMP_SWAP,
            Self::FetchAdd => IBV_WC_FETCH_ADD,
            Self::Recv => IBV_WC_RECV,
            Self::RecvRdmaWithImm => IBV_WC_RECV_RDMA_WITH_IMM,
            Self::Other(other) => other,
        }
    }
}

/// A work completion read from a CQ.
///
/// Only `wr_id`, `status`, `vendor_err` and `qp_num` are defined for an
/// error completion; the library leaves the other fields unspecified.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Completion {
    /// The work request's id.
    pub wr_id: u64,
    /// Outcome.
    pub status: WcStatus,
    /// What completed.
    pub opcode: WcOpcode,
    /// Vendor syndrome of an error.
    pub vendor_err: u32,
    /// Bytes received (receives) or transferred.
    pub byte_len: u32,
    /// Immediate data in host order, when `IBV_WC_WITH_IMM` is set.
    pub imm: Option<u32>,
    /// The local QP.
    pub qp_num: u32,
    /// The sending QP (UD receives).
    pub src_qp: u32,
    /// Whether a 40-byte GRH precedes a UD payload in the receive buffer.
    pub grh: bool,
}

impl Completion {
    /// Whether the work request succeeded.
    pub fn is_success(&self) -> bool {
        self.status == WcStatus::Success
    }

    /// The completion as `ibv_poll_cq` would have written it (used by tests
    /// and by code that hands completions to C).
    pub fn to_raw(&self) -> ibv_wc {
        let mut wc_flags = 0;
        if self.imm.is_some() {
            wc_flags |= IBV_WC_WITH_IMM;
        }
        if self.grh {
            wc_flags |= IBV_WC_GRH;
        }
        ibv_wc {
            wr_id: self.wr_id,
            status: self.status.raw(),
            opcode: self.opcode.raw(),
            vendor_err: self.vendor_err,
            byte_len: self.byte_len,
            imm_data: self.imm.unwrap_or(0).to_be(),
            qp_num: self.qp_num,
            src_qp: self.src_qp,
            wc_flags,
            ..Default::default()
        }
    }
}

impl From<&ibv_wc> for Completion {
    fn from(wc: &ibv_wc) -> Self {
        Self {
            wr_id: wc.wr_id,
            status: WcStatus::from_raw(wc.status),
            opcode: WcOpcode::from_raw(wc.opcode),
            vendor_err: wc.vendor_err,
            byte_len: wc.byte_len,
            imm: (wc.wc_flags & IBV_WC_WITH_IMM != 0).then(|| u32::from_be(wc.imm_data)),
            qp_num: wc.qp_num,
            src_qp: wc.src_qp,
            grh: wc.wc_flags & IBV_WC_GRH != 0,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn remote() -> RemoteSegment {
        RemoteSegment {
            addr: 0x1122_3344_5566_7788,
            rkey: 0xdead_beef,
        }
    }

    #[test]
    fn every_send_op_round_trips_through_ibv_send_wr() {
        let ops = [
            SendOp::Send,
            SendOp::SendWithImm { imm: 0x0102_0304 },
            SendOp::Write { remote: remote() },
            SendOp::WriteWithImm {
                remote: remote(),
                imm: 7,
            },
            SendOp::Read { remote: remote() },
            SendOp::CompareSwap {
                remote: remote(),
                compare: 1,
                swap: 2,
            },
            SendOp::FetchAdd {
                remote: remote(),
                add: 3,
            },
        ];
        for (index, op) in ops.into_iter().enumerate() {
            let lengths: &[u32] = if op.is_atomic() { &[8] } else { &[64, 4096] };
            let flags = SendFlags {
                signaled: index % 2 == 0,
                ..Default::default()
            };
            let wr = encode_send(index as u64, op, flags, None, lengths).unwrap();
            assert_eq!(wr.wr_id, index as u64);
            assert_eq!(decode_send_op(&wr), Some(op));
            assert_eq!(SendFlags::from_bits(wr.send_flags), flags);
            assert!(wr.next.is_null() && wr.sg_list.is_null());
        }
    }

    #[test]
    fn immediate_data_is_big_endian_in_the_c_struct() {
        let wr = encode_send(
            0,
            SendOp::SendWithImm { imm: 0x0102_0304 },
            SendFlags::default(),
            None,
            &[],
        )
        .unwrap();
        assert_eq!(wr.imm_data.to_ne_bytes(), [1, 2, 3, 4]);
        assert_eq!(wr.opcode, IBV_WR_SEND_WITH_IMM);
    }

    #[test]
    fn atomics_fill_the_atomic_view_of_the_union() {
        let wr = encode_send(
            9,
            SendOp::CompareSwap {
                remote: remote(),
                compare: 10,
                swap: 20,
            },
            SendFlags::default(),
            None,
            &[8],
        )
        .unwrap();
        // SAFETY: test reads the view encode_send wrote.
        let atomic = unsafe { wr.wr.atomic };
        assert_eq!(
            (
                atomic.remote_addr,
                atomic.compare_add,
                atomic.swap,
                atomic.rkey
            ),
            (remote().addr, 10, 20, remote().rkey)
        );
        // The rdma view shares remote_addr at offset 0 but not rkey.
        // SAFETY: all views are plain integers.
        assert_eq!(unsafe { wr.wr.rdma.remote_addr }, remote().addr);
    }

    #[test]
    fn atomic_without_one_eight_byte_sge_is_refused() {
        let op = SendOp::FetchAdd {
            remote: remote(),
            add: 1,
        };
        for lengths in [&[][..], &[4], &[8, 8]] {
            let error = encode_send(0, op, SendFlags::default(), None, lengths).unwrap_err();
            assert!(
                error.to_string().contains("exactly one 8-byte SGE"),
                "{error}"
            );
        }
    }

    #[test]
    fn inline_read_is_refused_and_ud_write_is_refused() {
        let flags = SendFlags {
            inline: true,
            ..Default::default()
        };
        assert!(encode_send(0, SendOp::Read { remote: remote() }, flags, None, &[8]).is_err());
        let ud = UdDestination {
            ah: std::ptr::null_mut(),
            remote_qpn: 5,
            remote_qkey: 0x1111_1111,
        };
        let error = encode_send(
            0,
            SendOp::Write { remote: remote() },
            SendFlags::default(),
            Some(ud),
            &[8],
        )
        .unwrap_err();
        assert!(
            error.to_string().contains("UD supports only SEND"),
            "{error}"
        );
        let wr = encode_send(0, SendOp::Send, SendFlags::default(), Some(ud), &[8]).unwrap();
        // SAFETY: the ud view was written.
        let view = unsafe { wr.wr.ud };
        assert_eq!((view.remote_qpn, view.remote_qkey), (5, 0x1111_1111));
    }

    #[test]
    fn completion_round_trips_through_ibv_wc() {
        let completions = [
            Completion {
                wr_id: 42,
                status: WcStatus::Success,
                opcode: WcOpcode::RecvRdmaWithImm,
                vendor_err: 0,
                byte_len: 4096,
                imm: Some(0xcafe_f00d),
                qp_num: 0x11,
                src_qp: 0,
                grh: false,
            },
            Completion {
                wr_id: 7,
                status: WcStatus::RemAccessErr,
                opcode: WcOpcode::RdmaWrite,
                vendor_err: 0x88,
                byte_len: 0,
                imm: None,
                qp_num: 0x12,
                src_qp: 0,
                grh: false,
            },
            Completion {
                wr_id: 8,
                status: WcStatus::Success,
                opcode: WcOpcode::Recv,
                vendor_err: 0,
                byte_len: 40 + 256,
                imm: None,
                qp_num: 0x13,
                src_qp: 0x99,
                grh: true,
            },
        ];
        for completion in completions {
            let raw = completion.to_raw();
            assert_eq!(Completion::from(&raw), completion);
        }
    }

    #[test]
    fn wc_status_values_and_texts_match_rdma_core() {
        for raw in 0..24 {
            let status = WcStatus::from_raw(raw);
            assert_eq!(status.raw(), raw);
            assert_ne!(status.text(), "unknown");
        }
        assert_eq!(WcStatus::from_raw(12), WcStatus::RetryExcErr);
        assert_eq!(
            WcStatus::RetryExcErr.text(),
            "transport retry counter exceeded"
        );
        assert_eq!(WcStatus::from_raw(99), WcStatus::Unknown(99));
        assert_eq!(WcOpcode::from_raw(129), WcOpcode::RecvRdmaWithImm);
        assert_eq!(WcOpcode::from_raw(9), WcOpcode::Other(9));
    }

    fn rtr() -> RtrAttributes {
        RtrAttributes {
            path_mtu: Mtu::Mtu1024,
            dest_qp_num: 0x00ab_cdef,
            rq_psn: 0x0012_3456,
            max_dest_rd_atomic: 16,
            min_rnr_timer: 12,
            dgid: [0xfe, 0x80, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 1],
            sgid_index: 3,
            hop_limit: 64,
            traffic_class: 106,
            flow_label: 0,
            service_level: 3,
            port_num: 1,
        }
    }

    #[test]
    fn rc_rtr_sets_the_address_vector_and_responder_fields() {
        let (attr, mask) = rtr_attributes(QpType::Rc, &rtr()).unwrap();
        assert_eq!(attr.qp_state, IBV_QPS_RTR);
        assert_eq!(attr.path_mtu, IBV_MTU_1024);
        assert_eq!((attr.dest_qp_num, attr.rq_psn), (0x00ab_cdef, 0x0012_3456));
        assert_eq!((attr.max_dest_rd_atomic, attr.min_rnr_timer), (16, 12));
        assert_eq!(attr.ah_attr.is_global, 1);
        assert_eq!(attr.ah_attr.grh.dgid.bytes(), rtr().dgid);
        assert_eq!(
            (
                attr.ah_attr.grh.sgid_index,
                attr.ah_attr.grh.hop_limit,
                attr.ah_attr.grh.traffic_class
            ),
            (3, 64, 106)
        );
        assert_eq!((attr.ah_attr.sl, attr.ah_attr.port_num), (3, 1));
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
        let (_, uc_mask) = rtr_attributes(QpType::Uc, &rtr()).unwrap();
        assert_eq!(
            uc_mask,
            IBV_QP_STATE | IBV_QP_AV | IBV_QP_PATH_MTU | IBV_QP_DEST_QPN | IBV_QP_RQ_PSN
        );
        assert_eq!(rtr_attributes(QpType::Ud, &rtr()).unwrap().1, IBV_QP_STATE);
    }

    #[test]
    fn out_of_range_attributes_name_the_field() {
        let mut bad = rtr();
        bad.rq_psn = 1 << 24;
        let error = rtr_attributes(QpType::Rc, &bad).unwrap_err();
        assert!(error.to_string().contains("rq_psn is 16777216"), "{error}");
        let rts = RtsAttributes {
            sq_psn: 0,
            timeout: 14,
            retry_cnt: 8,
            rnr_retry: 7,
            max_rd_atomic: 1,
        };
        let error = rts_attributes(QpType::Rc, &rts).unwrap_err();
        assert!(
            error.to_string().contains("retry_cnt is 8, at most 7"),
            "{error}"
        );
        // UC ignores the RC-only timers.
        assert!(rts_attributes(QpType::Uc, &rts).is_ok());
    }

    #[test]
    fn init_masks_follow_the_transport() {
        let init = InitAttributes {
            port_num: 1,
            pkey_index: 0,
            access: AccessFlags::LOCAL_WRITE | AccessFlags::REMOTE_WRITE,
            qkey: 0x1111_1111,
        };
        let (rc, rc_mask) = init_attributes(QpType::Rc, &init);
        assert_eq!(
            rc.qp_access_flags,
            IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE
        );
        assert_eq!(
            rc_mask,
            IBV_QP_STATE | IBV_QP_PKEY_INDEX | IBV_QP_PORT | IBV_QP_ACCESS_FLAGS
        );
        let (ud, ud_mask) = init_attributes(QpType::Ud, &init);
        assert_eq!((ud.qkey, ud.qp_access_flags), (0x1111_1111, 0));
        assert_eq!(
            ud_mask,
            IBV_QP_STATE | IBV_QP_PKEY_INDEX | IBV_QP_PORT | IBV_QP_QKEY
        );
    }

    #[test]
    fn rts_sets_requester_fields() {
        let rts = RtsAttributes {
            sq_psn: 0x00ff_ffff,
            timeout: 14,
            retry_cnt: 7,
            rnr_retry: 7,
            max_rd_atomic: 16,
        };
        let (attr, mask) = rts_attributes(QpType::Rc, &rts).unwrap();
        assert_eq!(attr.qp_state, IBV_QPS_RTS);
        assert_eq!(
            (
                attr.sq_psn,
                attr.timeout,
                attr.retry_cnt,
                attr.rnr_retry,
                attr.max_rd_atomic
            ),
            (0x00ff_ffff, 14, 7, 7, 16)
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
        assert_eq!(
            rts_attributes(QpType::Ud, &rts).unwrap().1,
            IBV_QP_STATE | IBV_QP_SQ_PSN
        );
    }

    #[test]
    fn access_and_mtu_conversions() {
        assert!(!(AccessFlags::LOCAL_WRITE | AccessFlags::REMOTE_READ).has_optional());
        assert!(AccessFlags::RELAXED_ORDERING.has_optional());
        assert_eq!(IBV_ACCESS_OPTIONAL_RANGE, 0x3ff0_0000);
        for bytes in [256, 512, 1024, 2048, 4096] {
            let mtu = Mtu::from_bytes(bytes).unwrap();
            assert_eq!(mtu.bytes(), bytes);
            assert_eq!(Mtu::from_raw(mtu.raw()), Some(mtu));
        }
        assert_eq!(Mtu::from_bytes(1500), None);
        assert_eq!(QpType::from_raw(QpType::Ud.raw()), Some(QpType::Ud));
    }
}
