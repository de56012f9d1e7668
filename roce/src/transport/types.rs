//! The engine's vocabulary: work requests, completions, QP attributes,
//! configuration, packets in and out, and errors.
//!
//! Numeric values follow rdma-core `verbs.h` (ROCEV2.md §5.8, §5.9) so that
//! the verbs layer and the hardware backend convert without tables.

use core::fmt;

use crate::cc::CcConfig;
use crate::time::Duration;
use crate::wire::{Ecn, Lkey, Qpn, Rkey, RoceHeaders};

use super::memory::{AccessFlags, Payload, PayloadDesc, WindowBind, MAX_PIECES};

/// Most scatter/gather entries in one work request.
pub const MAX_SGE: usize = MAX_PIECES;

/// A scatter/gather entry: `length` bytes at `addr` in the region `lkey`
/// names.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Sge {
    /// Start address.
    pub addr: u64,
    /// Length in bytes.
    pub length: u32,
    /// Local key.
    pub lkey: Lkey,
}

/// A fixed-capacity list of up to [`MAX_SGE`] SGEs (no heap).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct SgeList {
    sges: [Sge; MAX_SGE],
    count: u8,
}

impl SgeList {
    /// An empty list (a zero-length message).
    pub const fn new() -> SgeList {
        SgeList {
            sges: [Sge {
                addr: 0,
                length: 0,
                lkey: Lkey::new(0),
            }; MAX_SGE],
            count: 0,
        }
    }

    /// A list of one SGE.
    pub fn one(addr: u64, length: u32, lkey: Lkey) -> SgeList {
        let mut l = SgeList::new();
        l.sges[0] = Sge { addr, length, lkey };
        l.count = 1;
        l
    }

    /// From a slice; `None` when it holds more than [`MAX_SGE`] entries.
    pub fn from_slice(sges: &[Sge]) -> Option<SgeList> {
        if sges.len() > MAX_SGE {
            return None;
        }
        let mut l = SgeList::new();
        l.sges[..sges.len()].copy_from_slice(sges);
        l.count = sges.len() as u8;
        Some(l)
    }

    /// The entries.
    pub fn as_slice(&self) -> &[Sge] {
        &self.sges[..self.count as usize]
    }

    /// Total length in bytes (saturating).
    pub fn total_len(&self) -> u64 {
        self.as_slice().iter().map(|s| s.length as u64).sum()
    }
}

/// The operation of a send work request, with its operation-specific
/// fields (`ibv_wr_opcode` plus `wr.rdma` / `wr.atomic` / `imm_data` /
/// `invalidate_rkey`): the one type of the engine and the verbs API,
/// which re-exports it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SendOp {
    /// IBV_WR_SEND.
    Send,
    /// IBV_WR_SEND_WITH_IMM. The value is a plain number whose big-endian
    /// bytes go on the wire, as `htonl(imm)` gives in C.
    SendWithImm(u32),
    /// IBV_WR_SEND_WITH_INV: the peer's R_Key to invalidate.
    SendWithInv(Rkey),
    /// IBV_WR_RDMA_WRITE.
    Write {
        /// Remote address.
        remote_addr: u64,
        /// Remote key.
        rkey: Rkey,
    },
    /// IBV_WR_RDMA_WRITE_WITH_IMM.
    WriteWithImm {
        /// Remote address.
        remote_addr: u64,
        /// Remote key.
        rkey: Rkey,
        /// Immediate data.
        imm: u32,
    },
    /// IBV_WR_RDMA_READ: read into the local SGEs.
    Read {
        /// Remote address.
        remote_addr: u64,
        /// Remote key.
        rkey: Rkey,
    },
    /// IBV_WR_ATOMIC_CMP_AND_SWP: the original value lands in the (8-byte)
    /// local SGE.
    CompareSwap {
        /// Remote address (8-byte aligned).
        remote_addr: u64,
        /// Remote key.
        rkey: Rkey,
        /// Compare value.
        compare: u64,
        /// Swap value.
        swap: u64,
    },
    /// IBV_WR_ATOMIC_FETCH_AND_ADD.
    FetchAdd {
        /// Remote address (8-byte aligned).
        remote_addr: u64,
        /// Remote key.
        rkey: Rkey,
        /// Value to add.
        add: u64,
    },
    /// IBV_WR_ATOMIC_WRITE (IBTA 1.5): write the 8 bytes of the local SGE
    /// (or inline data) at once to an 8-byte aligned remote address; the
    /// remote region needs remote write access. RC only.
    AtomicWrite {
        /// Remote address (8-byte aligned).
        remote_addr: u64,
        /// Remote key.
        rkey: Rkey,
    },
    /// IBV_WR_LOCAL_INV: invalidate a bound type 2 memory window of the
    /// QP's protection domain. Local: no packet; it runs once every
    /// earlier WR has completed.
    LocalInv(Rkey),
    /// IBV_WR_BIND_MW (and `ibv_bind_mw` for type 1): bind the memory
    /// window that `rkey`'s upper 24 bits name under the key `rkey` (the
    /// fields of [`WindowBind`]). Local: no packet; it runs once every
    /// earlier WR has completed. A refusal completes it with
    /// [`WcStatus::MwBindErr`].
    BindMw {
        /// The key the window takes.
        rkey: Rkey,
        /// The region the window is bound to.
        lkey: Lkey,
        /// First address of the window.
        addr: u64,
        /// Length in bytes (0: unbound under the new key).
        len: u64,
        /// The window's remote rights.
        access: AccessFlags,
    },
}

impl SendOp {
    /// The `ibv_wr_opcode` value.
    pub const fn wr_opcode(self) -> u32 {
        match self {
            SendOp::Write { .. } => 0,
            SendOp::WriteWithImm { .. } => 1,
            SendOp::Send => 2,
            SendOp::SendWithImm(_) => 3,
            SendOp::Read { .. } => 4,
            SendOp::CompareSwap { .. } => 5,
            SendOp::FetchAdd { .. } => 6,
            SendOp::SendWithInv(_) => 9,
            SendOp::LocalInv(_) => 7,
            SendOp::BindMw { .. } => 8,
            SendOp::AtomicWrite { .. } => 15,
        }
    }

    /// The completion opcode it produces.
    pub const fn wc_opcode(self) -> WcOpcode {
        match self {
            SendOp::Send | SendOp::SendWithImm(_) | SendOp::SendWithInv(_) => WcOpcode::Send,
            SendOp::Write { .. } | SendOp::WriteWithImm { .. } => WcOpcode::RdmaWrite,
            SendOp::Read { .. } => WcOpcode::RdmaRead,
            SendOp::CompareSwap { .. } => WcOpcode::CompSwap,
            SendOp::FetchAdd { .. } => WcOpcode::FetchAdd,
            SendOp::LocalInv(_) => WcOpcode::LocalInv,
            SendOp::BindMw { .. } => WcOpcode::BindMw,
            SendOp::AtomicWrite { .. } => WcOpcode::AtomicWrite,
        }
    }

    /// READ, atomic or ATOMIC WRITE: needs a responder resource, counts
    /// against `max_rd_atomic` and is answered by a response, not an ACK.
    pub const fn is_read_or_atomic(self) -> bool {
        matches!(
            self,
            SendOp::Read { .. }
                | SendOp::CompareSwap { .. }
                | SendOp::FetchAdd { .. }
                | SendOp::AtomicWrite { .. }
        )
    }

    /// Answered by RDMA READ responses: a READ, and an ATOMIC WRITE (one
    /// response without payload).
    pub const fn is_read_like(self) -> bool {
        matches!(self, SendOp::Read { .. } | SendOp::AtomicWrite { .. })
    }

    /// A memory window bind or a local invalidation: executed by the QP
    /// itself, no packet.
    pub const fn is_local(self) -> bool {
        matches!(self, SendOp::LocalInv(_) | SendOp::BindMw { .. })
    }

    /// The memory window bind this op asks for, if it is one.
    pub const fn window_bind(self) -> Option<WindowBind> {
        match self {
            SendOp::BindMw {
                rkey,
                lkey,
                addr,
                len,
                access,
            } => Some(WindowBind {
                rkey,
                lkey,
                addr,
                len,
                access,
            }),
            _ => None,
        }
    }

    /// An atomic.
    pub const fn is_atomic(self) -> bool {
        matches!(self, SendOp::CompareSwap { .. } | SendOp::FetchAdd { .. })
    }
}

flags! {
    /// `ibv_send_flags`: the one send flag type of the crate (the verbs
    /// API re-exports it).
    SendFlags: u32 {
        /// IBV_SEND_FENCE: wait for earlier READs and atomics to complete.
        FENCE = 1,
        /// IBV_SEND_SIGNALED: produce a CQE on success.
        SIGNALED = 2,
        /// IBV_SEND_SOLICITED: set SE on the last packet.
        SOLICITED = 4,
        /// IBV_SEND_INLINE: copy the payload at post time; no lkey check.
        INLINE = 8,
        /// IBV_SEND_IP_CSUM: IP checksum offload (raw packet QPs only).
        IP_CSUM = 16,
    }
}

impl SendFlags {
    /// From raw bits.
    pub const fn from_bits(b: u32) -> SendFlags {
        SendFlags(b)
    }
}

/// An opaque address handle the caller defines (a peer's IP, a simulator
/// node id). The engine copies it from the QP's AV (RC/UC) or the work
/// request (UD) into every [`Transmit`], and never interprets it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default, PartialOrd, Ord)]
pub struct AddressHandle(pub u64);

/// Where a UD send goes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct UdDest {
    /// The address handle.
    pub ah: AddressHandle,
    /// Remote QPN.
    pub remote_qpn: Qpn,
    /// Remote Q_Key.
    pub remote_qkey: u32,
}

/// A send work request (`ibv_send_wr`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct SendWr {
    /// Caller's id, returned in the completion.
    pub wr_id: u64,
    /// The operation.
    pub op: SendOp,
    /// Local buffers (source for SEND/WRITE, destination for READ and for
    /// the atomic result).
    pub sges: SgeList,
    /// Flags.
    pub flags: SendFlags,
    /// UD destination (UD QPs only).
    pub ud: Option<UdDest>,
}

impl SendWr {
    /// A signaled request with one SGE.
    pub fn new(wr_id: u64, op: SendOp, sge: Sge) -> SendWr {
        SendWr {
            wr_id,
            op,
            sges: SgeList::one(sge.addr, sge.length, sge.lkey),
            flags: SendFlags::SIGNALED,
            ud: None,
        }
    }
}

/// A receive work request (`ibv_recv_wr`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RecvWr {
    /// Caller's id.
    pub wr_id: u64,
    /// Buffers.
    pub sges: SgeList,
}

value_enum! {
    /// `ibv_wc_status`; `as_str` is `ibv_wc_status_str`.
    WcStatus {
        /// Success.
        Success = 0, "success";
        /// Local length error.
        LocLenErr = 1, "local length error";
        /// Local QP operation error.
        LocQpOpErr = 2, "local QP operation error";
        /// Local EE context operation error.
        LocEecOpErr = 3, "local EE context operation error";
        /// Local protection error.
        LocProtErr = 4, "local protection error";
        /// Work request flushed.
        WrFlushErr = 5, "Work Request Flushed Error";
        /// Memory window bind error.
        MwBindErr = 6, "memory management operation error";
        /// Bad response.
        BadRespErr = 7, "bad response error";
        /// Local access error.
        LocAccessErr = 8, "local access error";
        /// Remote invalid request.
        RemInvReqErr = 9, "remote invalid request error";
        /// Remote access error.
        RemAccessErr = 10, "remote access error";
        /// Remote operation error.
        RemOpErr = 11, "remote operation error";
        /// Transport retry counter exceeded.
        RetryExcErr = 12, "transport retry counter exceeded";
        /// RNR retry counter exceeded.
        RnrRetryExcErr = 13, "RNR retry counter exceeded";
        /// Local RDD violation.
        LocRddViolErr = 14, "local RDD violation error";
        /// Remote invalid RD request.
        RemInvRdReqErr = 15, "remote invalid RD request";
        /// Remote aborted.
        RemAbortErr = 16, "aborted error";
        /// Invalid EE context number.
        InvEecnErr = 17, "invalid EE context number";
        /// Invalid EE context state.
        InvEecStateErr = 18, "invalid EE context state";
        /// Fatal.
        FatalErr = 19, "fatal error";
        /// Response timeout.
        RespTimeoutErr = 20, "response timeout error";
        /// General error.
        GeneralErr = 21, "general error";
    }
}

value_enum! {
    /// `ibv_wc_opcode`.
    WcOpcode {
        /// A SEND completed.
        Send = 0, "SEND";
        /// An RDMA WRITE completed.
        RdmaWrite = 1, "RDMA_WRITE";
        /// An RDMA READ completed.
        RdmaRead = 2, "RDMA_READ";
        /// A compare-and-swap completed.
        CompSwap = 3, "COMP_SWAP";
        /// A fetch-and-add completed.
        FetchAdd = 4, "FETCH_ADD";
        /// A memory window bind completed.
        BindMw = 5, "BIND_MW";
        /// A local invalidate completed.
        LocalInv = 6, "LOCAL_INV";
        /// An ATOMIC WRITE completed.
        AtomicWrite = 9, "ATOMIC_WRITE";
        /// A SEND was received.
        Recv = 128, "RECV";
        /// An RDMA WRITE with immediate was received.
        RecvRdmaWithImm = 129, "RECV_RDMA_WITH_IMM";
    }
}

/// A work completion (`ibv_wc`). For a flushed WR only `wr_id`, `status`,
/// `qp_num` and `is_recv` are meaningful.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Completion {
    /// The WR's id.
    pub wr_id: u64,
    /// Status.
    pub status: WcStatus,
    /// Opcode.
    pub opcode: WcOpcode,
    /// True for a receive-queue completion.
    pub is_recv: bool,
    /// The local QP.
    pub qp_num: Qpn,
    /// Bytes: the message length (send side) or bytes received.
    pub byte_len: u32,
    /// Immediate data (`IBV_WC_WITH_IMM`), as the wire bits.
    pub imm_data: Option<u32>,
    /// The R_Key a SEND_WITH_INV invalidated (`IBV_WC_WITH_INV`).
    pub invalidated_rkey: Option<Rkey>,
    /// UD: the source QP from the DETH.
    pub src_qp: Option<Qpn>,
    /// UD: a GRH area precedes the data (`IBV_WC_GRH`).
    pub grh: bool,
    /// The SE bit of the last packet (solicited event).
    pub solicited: bool,
}

value_enum! {
    /// `ibv_qp_type` (the ones this API supports).
    QpType {
        /// Reliable connected.
        Rc = 2, "RC";
        /// Unreliable connected.
        Uc = 3, "UC";
        /// Unreliable datagram.
        Ud = 4, "UD";
    }
}

value_enum! {
    /// `ibv_qp_state`.
    QpState {
        /// Reset.
        Reset = 0, "RESET";
        /// Initialised.
        Init = 1, "INIT";
        /// Ready to receive.
        Rtr = 2, "RTR";
        /// Ready to send.
        Rts = 3, "RTS";
        /// Send queue drained.
        Sqd = 4, "SQD";
        /// Send queue error.
        Sqe = 5, "SQE";
        /// Error.
        Err = 6, "ERR";
    }
}

value_enum! {
    /// `ibv_mtu`: the path MTU, the largest payload of one packet (IB MTU
    /// enum values 1..5). The one MTU type of the crate: the verbs API
    /// re-exports it.
    Mtu {
        /// 256 bytes.
        Mtu256 = 1, "256";
        /// 512 bytes.
        Mtu512 = 2, "512";
        /// 1024 bytes.
        Mtu1024 = 3, "1024";
        /// 2048 bytes.
        Mtu2048 = 4, "2048";
        /// 4096 bytes.
        Mtu4096 = 5, "4096";
    }
}

impl Mtu {
    /// The MTU in bytes.
    pub const fn bytes(self) -> u32 {
        128 << (self as u32)
    }

    /// The IB MTU of exactly `bytes`, if it is one of 256..4096.
    pub const fn from_bytes(bytes: u32) -> Option<Mtu> {
        match bytes {
            256 => Some(Mtu::Mtu256),
            512 => Some(Mtu::Mtu512),
            1024 => Some(Mtu::Mtu1024),
            2048 => Some(Mtu::Mtu2048),
            4096 => Some(Mtu::Mtu4096),
            _ => None,
        }
    }

    /// The largest IB MTU that fits a link MTU of `link_mtu` bytes, leaving
    /// rxe's 80 bytes for headers (ROCEV2.md §1.8).
    pub const fn for_link_mtu(link_mtu: u32) -> Mtu {
        let room = link_mtu.saturating_sub(80);
        if room >= 4096 {
            Mtu::Mtu4096
        } else if room >= 2048 {
            Mtu::Mtu2048
        } else if room >= 1024 {
            Mtu::Mtu1024
        } else if room >= 512 {
            Mtu::Mtu512
        } else {
            Mtu::Mtu256
        }
    }
}

impl Default for Mtu {
    /// 1024 bytes, the IBTA default path MTU.
    fn default() -> Mtu {
        Mtu::Mtu1024
    }
}

/// `ibv_qp_attr_mask` (ROCEV2.md §5.9): which fields of a [`QpAttr`] a
/// modify applies, with rdma-core's bit values. The one mask type of the
/// crate: the engine, the verbs API (`verbs::QpAttr::mask`) and the
/// hardware backend all use it.
#[derive(Clone, Copy, PartialEq, Eq, Hash, Default, serde::Serialize, serde::Deserialize)]
pub struct QpAttrMask(pub u32);

impl QpAttrMask {
    /// No attributes.
    pub const EMPTY: QpAttrMask = QpAttrMask(0);
    /// IBV_QP_STATE: `qp_state`.
    pub const STATE: QpAttrMask = QpAttrMask(1 << 0);
    /// IBV_QP_CUR_STATE: `cur_qp_state`.
    pub const CUR_STATE: QpAttrMask = QpAttrMask(1 << 1);
    /// IBV_QP_EN_SQD_ASYNC_NOTIFY: `en_sqd_async_notify`.
    pub const EN_SQD_ASYNC_NOTIFY: QpAttrMask = QpAttrMask(1 << 2);
    /// IBV_QP_ACCESS_FLAGS: `qp_access_flags`.
    pub const ACCESS_FLAGS: QpAttrMask = QpAttrMask(1 << 3);
    /// IBV_QP_PKEY_INDEX: `pkey_index`.
    pub const PKEY_INDEX: QpAttrMask = QpAttrMask(1 << 4);
    /// IBV_QP_PORT: `port_num`.
    pub const PORT: QpAttrMask = QpAttrMask(1 << 5);
    /// IBV_QP_QKEY: `qkey`.
    pub const QKEY: QpAttrMask = QpAttrMask(1 << 6);
    /// IBV_QP_AV: `ah_attr`.
    pub const AV: QpAttrMask = QpAttrMask(1 << 7);
    /// IBV_QP_PATH_MTU: `path_mtu`.
    pub const PATH_MTU: QpAttrMask = QpAttrMask(1 << 8);
    /// IBV_QP_TIMEOUT: `timeout`.
    pub const TIMEOUT: QpAttrMask = QpAttrMask(1 << 9);
    /// IBV_QP_RETRY_CNT: `retry_cnt`.
    pub const RETRY_CNT: QpAttrMask = QpAttrMask(1 << 10);
    /// IBV_QP_RNR_RETRY: `rnr_retry`.
    pub const RNR_RETRY: QpAttrMask = QpAttrMask(1 << 11);
    /// IBV_QP_RQ_PSN: `rq_psn`.
    pub const RQ_PSN: QpAttrMask = QpAttrMask(1 << 12);
    /// IBV_QP_MAX_QP_RD_ATOMIC: `max_rd_atomic`.
    pub const MAX_QP_RD_ATOMIC: QpAttrMask = QpAttrMask(1 << 13);
    /// IBV_QP_ALT_PATH: `alt_ah_attr` and friends.
    pub const ALT_PATH: QpAttrMask = QpAttrMask(1 << 14);
    /// IBV_QP_MIN_RNR_TIMER: `min_rnr_timer`.
    pub const MIN_RNR_TIMER: QpAttrMask = QpAttrMask(1 << 15);
    /// IBV_QP_SQ_PSN: `sq_psn`.
    pub const SQ_PSN: QpAttrMask = QpAttrMask(1 << 16);
    /// IBV_QP_MAX_DEST_RD_ATOMIC: `max_dest_rd_atomic`.
    pub const MAX_DEST_RD_ATOMIC: QpAttrMask = QpAttrMask(1 << 17);
    /// IBV_QP_PATH_MIG_STATE: `path_mig_state`.
    pub const PATH_MIG_STATE: QpAttrMask = QpAttrMask(1 << 18);
    /// IBV_QP_CAP: `cap`.
    pub const CAP: QpAttrMask = QpAttrMask(1 << 19);
    /// IBV_QP_DEST_QPN: `dest_qp_num`.
    pub const DEST_QPN: QpAttrMask = QpAttrMask(1 << 20);
    /// IBV_QP_RATE_LIMIT: `rate_limit`.
    pub const RATE_LIMIT: QpAttrMask = QpAttrMask(1 << 25);

    const NAMES: [(u32, &'static str); 22] = [
        (1 << 0, "STATE"),
        (1 << 1, "CUR_STATE"),
        (1 << 2, "EN_SQD_ASYNC_NOTIFY"),
        (1 << 3, "ACCESS_FLAGS"),
        (1 << 4, "PKEY_INDEX"),
        (1 << 5, "PORT"),
        (1 << 6, "QKEY"),
        (1 << 7, "AV"),
        (1 << 8, "PATH_MTU"),
        (1 << 9, "TIMEOUT"),
        (1 << 10, "RETRY_CNT"),
        (1 << 11, "RNR_RETRY"),
        (1 << 12, "RQ_PSN"),
        (1 << 13, "MAX_QP_RD_ATOMIC"),
        (1 << 14, "ALT_PATH"),
        (1 << 15, "MIN_RNR_TIMER"),
        (1 << 16, "SQ_PSN"),
        (1 << 17, "MAX_DEST_RD_ATOMIC"),
        (1 << 18, "PATH_MIG_STATE"),
        (1 << 19, "CAP"),
        (1 << 20, "DEST_QPN"),
        (1 << 25, "RATE_LIMIT"),
    ];

    /// From raw bits.
    pub const fn from_bits(b: u32) -> QpAttrMask {
        QpAttrMask(b)
    }

    /// The raw bits, as rdma-core defines them.
    pub const fn bits(self) -> u32 {
        self.0
    }

    /// True when every bit of `o` is set.
    pub const fn contains(self, o: QpAttrMask) -> bool {
        self.0 & o.0 == o.0
    }

    /// True when any bit of `o` is set.
    pub const fn intersects(self, o: QpAttrMask) -> bool {
        self.0 & o.0 != 0
    }

    /// Bits in `self` that are not in `o`.
    #[must_use]
    pub const fn difference(self, o: QpAttrMask) -> QpAttrMask {
        QpAttrMask(self.0 & !o.0)
    }

    /// True when no bit is set.
    pub const fn is_empty(self) -> bool {
        self.0 == 0
    }

    /// Names of the set bits (rdma-core's without `IBV_QP_`), for messages.
    pub fn names(self) -> Vec<&'static str> {
        QpAttrMask::NAMES
            .iter()
            .filter(|(bit, _)| self.0 & bit != 0)
            .map(|&(_, name)| name)
            .collect()
    }
}

impl core::ops::BitOr for QpAttrMask {
    type Output = QpAttrMask;
    fn bitor(self, rhs: QpAttrMask) -> QpAttrMask {
        QpAttrMask(self.0 | rhs.0)
    }
}

impl core::ops::BitOrAssign for QpAttrMask {
    fn bitor_assign(&mut self, rhs: QpAttrMask) {
        self.0 |= rhs.0;
    }
}

impl core::ops::BitAnd for QpAttrMask {
    type Output = QpAttrMask;
    fn bitand(self, rhs: QpAttrMask) -> QpAttrMask {
        QpAttrMask(self.0 & rhs.0)
    }
}

impl fmt::Debug for QpAttrMask {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "QpAttrMask({})", self.names().join(" | "))
    }
}

impl fmt::Display for QpAttrMask {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let mut first = true;
        for (bit, name) in QpAttrMask::NAMES {
            if self.0 & bit != 0 {
                if !first {
                    f.write_str("|")?;
                }
                f.write_str(name)?;
                first = false;
            }
        }
        let unknown = self.0 & !QpAttrMask::NAMES.iter().fold(0, |a, (b, _)| a | b);
        if unknown != 0 {
            if !first {
                f.write_str("|")?;
            }
            write!(f, "{unknown:#x}")?;
        } else if first {
            f.write_str("none")?;
        }
        Ok(())
    }
}

/// QP attributes (`ibv_qp_attr`), applied by [`modify`](super::Qp::modify)
/// for the bits set in the mask.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct QpAttr {
    /// Target state.
    pub qp_state: QpState,
    /// CUR_STATE: the state the caller believes the QP is in.
    pub cur_qp_state: QpState,
    /// `qp_access_flags` (remote rights the responder grants).
    pub qp_access_flags: super::memory::AccessFlags,
    /// PKEY_INDEX: the entry of [`QpConfig::pkey_table`] holding this
    /// QP's P_Key.
    pub pkey_index: u16,
    /// PORT (kept, not interpreted).
    pub port_num: u8,
    /// QKEY (UD).
    pub qkey: u32,
    /// AV: where packets of this QP go (RC/UC).
    pub ah: AddressHandle,
    /// PATH_MTU.
    pub path_mtu: Mtu,
    /// Local ACK timeout exponent: 4.096 µs × 2^timeout; 0 = no timer.
    pub timeout: u8,
    /// Retry count, 0..=7 (7 means 7 retries unless `rxe_retry_cnt7_infinite`).
    pub retry_cnt: u8,
    /// RNR retry count, 0..=7 (7 = infinite).
    pub rnr_retry: u8,
    /// RQ_PSN: the responder's first expected PSN.
    pub rq_psn: u32,
    /// MAX_QP_RD_ATOMIC: READs/atomics in flight as requester.
    pub max_rd_atomic: u8,
    /// MIN_RNR_TIMER: code sent in RNR NAKs (ROCEV2.md §5.6).
    pub min_rnr_timer: u8,
    /// SQ_PSN: the requester's first PSN.
    pub sq_psn: u32,
    /// MAX_DEST_RD_ATOMIC: responder resources.
    pub max_dest_rd_atomic: u8,
    /// DEST_QPN.
    pub dest_qp_num: Qpn,
}

impl Default for QpAttr {
    fn default() -> QpAttr {
        QpAttr {
            qp_state: QpState::Reset,
            cur_qp_state: QpState::Reset,
            qp_access_flags: super::memory::AccessFlags::EMPTY,
            pkey_index: 0,
            port_num: 1,
            qkey: 0,
            ah: AddressHandle(0),
            path_mtu: Mtu::Mtu1024,
            timeout: 14,
            retry_cnt: 7,
            rnr_retry: 7,
            rq_psn: 0,
            max_rd_atomic: 1,
            min_rnr_timer: 12,
            sq_psn: 0,
            max_dest_rd_atomic: 1,
            dest_qp_num: Qpn::new(0),
        }
    }
}

/// Where a retransmission starts (a NIC transport setting). In files:
/// `"go_back_n"`, `"go_back0"` or `"selective_repeat"`.
#[derive(
    Debug, Clone, Copy, PartialEq, Eq, Hash, Default, serde::Serialize, serde::Deserialize,
)]
#[serde(rename_all = "snake_case")]
pub enum RetransmitMode {
    /// Go-back-N: resend from the NAKed or timed-out PSN, resuming a
    /// partially acknowledged message (ROCEV2.md §5.3). What every current
    /// NIC does.
    #[default]
    GoBackN,
    /// Go-back-0: restart the whole message from its first packet, and the
    /// responder drops a message's partial progress when it detects a gap
    /// (the early NICs of Guo et al. 2016; livelocks under steady loss).
    /// Both ends of a connection must use the same mode.
    GoBack0,
    /// Selective repeat as IRN does it (Mittal et al., SIGCOMM 2018): the
    /// responder holds and places packets past a gap (within
    /// [`QpConfig::reorder_window`]) and answers each with a sequence NAK
    /// whose BTH PSN is the first missing PSN, as any NAK's, and whose AETH
    /// MSN field carries the PSN just received (the selective
    /// acknowledgement; equal to the BTH PSN when there is none). The
    /// requester resends only the PSNs below the highest one acknowledged
    /// that were not, once each, and a resend again only when a packet
    /// sent after it has arrived first. Timeouts resend every
    /// unacknowledged PSN; READ responses and RNR NAKs still go back N.
    /// Both ends of a connection must use the same mode: a go-back-N peer
    /// reads the MSN of such a NAK as an MSN.
    SelectiveRepeat,
}

/// IRN's two retransmission timeouts (RTO_low when few packets are
/// outstanding, RTO_high otherwise), which replace the Local ACK Timeout
/// of [`QpAttr::timeout`] when configured.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RetransmitTimeouts {
    /// The timeout when at most `few` PSNs are outstanding (IRN: 100 µs).
    pub low: Duration,
    /// The timeout otherwise (IRN: 320 µs).
    pub high: Duration,
    /// The outstanding PSNs up to which `low` applies (IRN: N = 3).
    pub few: u32,
}

/// Multipath ([`QpConfig::multipath`]): one QP's request packets spread
/// over several paths by entropy, with a lost packet's path avoided for a
/// while. Needs selective repeat and a responder that places out of order
/// (`reorder_window` at least the window) to pay off: paths reorder.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct MultipathConfig {
    /// Paths (entropy values) per QP, numbered 0..paths: the packet's
    /// [`Transmit::path`]. The network maps a path to a plane and a UDP
    /// source port.
    pub paths: u16,
    /// How long the path of a lost packet is avoided.
    pub avoid: Duration,
    /// How much later than a hole a reported packet must have been sent
    /// for the hole to count as lost (the reordering paths may cause).
    pub reorder: Duration,
}

/// Which of a multipath QP's paths a transmit opportunity may use: those
/// whose number `i` has `i % count == index` (a NIC port of `count` asks
/// for its own paths; [`Lane::ANY`]: every path).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Lane {
    /// This lane's number, below `count`.
    pub index: u16,
    /// Lanes in all (at least 1).
    pub count: u16,
}

impl Lane {
    /// Every path.
    pub const ANY: Lane = Lane { index: 0, count: 1 };

    /// Whether path `path` belongs to this lane.
    pub fn holds(self, path: u16) -> bool {
        path % self.count.max(1) == self.index
    }
}

/// Creation-time configuration of a QP: the `ibv_qp_init_attr` part and
/// the implementation policies of ROCEV2.md §8.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct QpConfig {
    /// Transport type.
    pub qp_type: QpType,
    /// This QP's number.
    pub qpn: Qpn,
    /// Send queue depth.
    pub max_send_wr: u32,
    /// Receive queue depth.
    pub max_recv_wr: u32,
    /// Every send WR gets a CQE (`sq_sig_all`).
    pub sq_sig_all: bool,
    /// Retransmission start policy.
    pub retransmit: RetransmitMode,
    /// AckReq on the last packet of every message, and once more after this
    /// many packets without it (rxe: 64). 0 = only message ends.
    pub ack_req_every: u32,
    /// Stop sending packets, first tries and go-back-N retries alike,
    /// when this many PSNs are unacknowledged (rxe: 128). A rewind resends
    /// what the window allows and then waits for ACKs like a first try, as
    /// rxe does.
    pub max_unacked_psns: u32,
    /// PSNs past the expected one that the responder may hold and place
    /// out of order (its bitmap; 0: none, every packet past a gap is
    /// dropped, as a NIC without out-of-order placement does). A held
    /// packet's data is placed at once; its completion, ACK and MSN wait
    /// for the gap to fill. With go-back-N the responder NAKs only what it
    /// cannot hold; with selective repeat it NAKs every held packet.
    pub reorder_window: u32,
    /// Retransmission timeouts replacing the Local ACK Timeout (`None`:
    /// 4.096 µs × 2^timeout).
    pub rto: Option<RetransmitTimeouts>,
    /// Send each packet of a plain RDMA WRITE as a WRITE ONLY with its own
    /// RETH (address, key and its own length), as IRN puts a RETH in every
    /// WRITE packet: a responder that places out of order can then place
    /// every packet on arrival, not only those whose message's first
    /// packet it has seen. Any RoCE responder accepts it (16 bytes more
    /// per packet; the responder's MSN counts packets). WRITE with
    /// immediate keeps its one message: its completion needs the total.
    pub write_reth_every_packet: bool,
    /// Spread request packets over paths ([`MultipathConfig`]; `None`: one
    /// path, the QP's own entropy).
    pub multipath: Option<MultipathConfig>,
    /// rxe quirk: treat `retry_cnt == 7` as infinite (spec: 7 retries).
    pub rxe_retry_cnt7_infinite: bool,
    /// Local status for a receive buffer too small for the SEND
    /// (hardware: LOC_LEN_ERR; rxe: REM_INV_REQ_ERR).
    pub recv_too_small_status: WcStatus,
    /// ECN codepoint put on outgoing data packets (ECT(0) for DCQCN).
    pub ecn: Ecn,
    /// Notification point: send a CNP on CE, at most once per this
    /// interval. `None` disables the NP.
    pub min_time_between_cnps: Option<Duration>,
    /// Congestion control of this QP's sends (the reaction point).
    pub cc: CcConfig,
    /// Depth of the rate limiter's token bucket, as time at the current
    /// rate ([`crate::cc::Pacer`]): zero spaces every data packet by its
    /// serialization time; more lets a caller that comes by now and then
    /// send what the rate allowed since, in one go.
    pub pacing_burst: Duration,
    /// How much lateness of a caller that comes back after the pacer
    /// held a packet is made up for ([`crate::cc::Pacer::with_catch_up`]);
    /// zero: none, what the simulator (always on time) uses.
    pub pacing_catch_up: Duration,
    /// Pace data at the congestion control's rate even when that is the
    /// line rate (the simulator, whose port serializes at that rate
    /// anyway). Off, a QP at full speed is not paced at all, as a ConnectX
    /// QP without a rate limiter, and the link (the socket) sets its pace.
    pub pace_at_line_rate: bool,
    /// Advertise end-to-end credits (free receive WQEs) in ACKs. Off by
    /// default: rxe and most RoCE NICs send code 31, "no credit
    /// information", and rely on RNR NAKs.
    pub advertise_credits: bool,
    /// The port's active MTU: the largest message of a UD QP, which has no
    /// path MTU of its own (a ConnectX port's `active_mtu`; default 1024).
    pub port_mtu: Mtu,
    /// The port's P_Key table: [`QpAttr::pkey_index`] picks this QP's
    /// P_Key, which it sends in every BTH and matches against every
    /// received one (ROCEV2.md §1.5). Unused entries are 0 (invalid).
    pub pkey_table: [u16; PKEY_TABLE_LEN],
}

impl QpConfig {
    /// Defaults: RC, queues of 1024, go-back-N, rxe AckReq and window
    /// policies, spec retry_cnt, LOC_LEN_ERR, ECT(0), no CNPs, no CC.
    pub fn new(qpn: Qpn) -> QpConfig {
        QpConfig {
            qp_type: QpType::Rc,
            qpn,
            max_send_wr: 1024,
            max_recv_wr: 1024,
            sq_sig_all: false,
            retransmit: RetransmitMode::GoBackN,
            ack_req_every: 64,
            max_unacked_psns: 128,
            reorder_window: 0,
            rto: None,
            write_reth_every_packet: false,
            multipath: None,
            rxe_retry_cnt7_infinite: false,
            recv_too_small_status: WcStatus::LocLenErr,
            ecn: Ecn::Ect0,
            min_time_between_cnps: None,
            cc: CcConfig::None,
            pacing_burst: Duration::ZERO,
            pacing_catch_up: Duration::ZERO,
            pace_at_line_rate: true,
            advertise_credits: false,
            port_mtu: Mtu::Mtu1024,
            pkey_table: DEFAULT_PKEY_TABLE,
        }
    }
}

/// Entries of [`QpConfig::pkey_table`].
pub const PKEY_TABLE_LEN: usize = 4;

/// The default P_Key table: the default partition, full member, at index 0.
pub const DEFAULT_PKEY_TABLE: [u16; PKEY_TABLE_LEN] = [0xFFFF, 0, 0, 0];

/// IBA P_Key matching (rxe `pkey_match`): the partition numbers (low 15
/// bits) must be equal and non-zero, and at least one side must be a full
/// member (bit 15). Two limited members of one partition do not talk, and
/// 0x0000 and 0x8000 match nothing.
pub const fn pkey_match(a: u16, b: u16) -> bool {
    a & 0x7FFF != 0 && a & 0x7FFF == b & 0x7FFF && (a | b) & 0x8000 != 0
}

/// The AETH credit table (ROCEV2.md §5.7): code 0..=30 to credits.
const CREDIT_TABLE: [u32; 31] = [
    0, 1, 2, 3, 4, 6, 8, 12, 16, 24, 32, 48, 64, 96, 128, 192, 256, 384, 512, 768, 1024, 1536,
    2048, 3072, 4096, 6144, 8192, 12288, 16384, 24576, 32768,
];

/// Credits for an AETH credit code; `None` for 31 (no credit information).
pub fn credits_from_code(code: u8) -> Option<u32> {
    CREDIT_TABLE.get(code as usize).copied()
}

/// The largest credit code whose credit count does not exceed `free`
/// receive WQEs.
pub fn credit_code(free: u32) -> u8 {
    CREDIT_TABLE.iter().rposition(|&c| c <= free).unwrap_or(0) as u8
}

/// A packet the engine wants sent. The caller resolves `payload` through
/// the memory trait when it needs bytes, and sends to `dest`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Transmit {
    /// Where it goes.
    pub dest: AddressHandle,
    /// Transport headers.
    pub headers: RoceHeaders,
    /// ECN codepoint for the IP header.
    pub ecn: Ecn,
    /// The payload (length and where its bytes live).
    pub payload: PayloadDesc,
    /// The path a multipath request takes ([`MultipathConfig::paths`]);
    /// `None` for everything else, which takes the QP's own.
    pub path: Option<u16>,
}

impl Transmit {
    /// A placeholder to reuse with
    /// [`Qp::poll_transmit_into`](super::Qp::poll_transmit_into); every
    /// field is overwritten by a successful poll.
    pub const EMPTY: Transmit = Transmit {
        dest: AddressHandle(0),
        headers: RoceHeaders {
            bth: crate::wire::BthRepr {
                opcode: crate::wire::Opcode::RcAcknowledge,
                solicited: false,
                migreq: false,
                pad_count: 0,
                tver: 0,
                pkey: 0xFFFF,
                fecn: false,
                becn: false,
                dest_qp: Qpn::new(0),
                ack_req: false,
                psn: crate::wire::Psn::new(0),
            },
            deth: None,
            reth: None,
            atomic_eth: None,
            aeth: None,
            atomic_ack_eth: None,
            immdt: None,
            ieth: None,
        },
        ecn: Ecn::NotEct,
        payload: PayloadDesc::EMPTY,
        path: None,
    };
}

/// A received packet, as the caller hands it to the engine.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Received<'a> {
    /// Transport headers (parsed and ICRC-checked by the caller).
    pub headers: RoceHeaders,
    /// ECN codepoint of the IP header.
    pub ecn: Ecn,
    /// The payload bytes (or only the length).
    pub payload: Payload<'a>,
    /// UD: the 40-byte GRH area (IPv6 header, or 20 zero bytes then the
    /// IPv4 header) to place before the data. `None`: zeros.
    pub grh: Option<&'a [u8; 40]>,
    /// The sender's address, in the form of this QP's AV
    /// ([`QpAttr::ah`]): RC and UC accept packets only from the address
    /// they are connected to (a RoCEv2 NIC compares the source GID, not
    /// the UDP source port, which varies per flow); UD reports it with the
    /// receive.
    pub src: AddressHandle,
}

/// Why `modify` refused (nothing was changed).
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
pub enum ModifyError {
    /// The state table has no such transition for this QP type.
    #[error("invalid QP transition {from} -> {to}")]
    InvalidTransition {
        /// Current state.
        from: QpState,
        /// Requested state.
        to: QpState,
    },
    /// Required attributes are missing from the mask.
    #[error("QP transition {from} -> {to} requires attributes {missing}")]
    MissingAttributes {
        /// Current state.
        from: QpState,
        /// Requested state.
        to: QpState,
        /// The missing bits.
        missing: QpAttrMask,
    },
    /// The mask has attributes this transition does not accept.
    #[error("QP transition {from} -> {to} does not accept attributes {unexpected}")]
    UnexpectedAttributes {
        /// Current state.
        from: QpState,
        /// Requested state.
        to: QpState,
        /// The refused bits.
        unexpected: QpAttrMask,
    },
    /// CUR_STATE does not match the QP's state.
    #[error("CUR_STATE says {claimed} but the QP is in {actual}")]
    CurStateMismatch {
        /// What the caller claimed.
        claimed: QpState,
        /// The real state.
        actual: QpState,
    },
    /// An attribute value is out of range.
    #[error("attribute {attr} out of range: {why}")]
    InvalidValue {
        /// The attribute.
        attr: QpAttrMask,
        /// Why.
        why: &'static str,
    },
}

/// Why a post was refused (the WR was not queued).
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
pub enum PostError {
    /// The QP state does not accept this post (e.g. post_send below RTS).
    #[error("QP in state {0} does not accept this post")]
    BadState(QpState),
    /// The queue is full.
    #[error("queue full ({0} outstanding)")]
    QueueFull(u32),
    /// The operation is not available on this QP type.
    #[error("operation not supported on {0:?} QPs")]
    Unsupported(QpType),
    /// The WR is malformed.
    #[error("invalid work request: {0}")]
    Invalid(&'static str),
}

/// Counters of what the engine saw and did (drops are counted, never
/// surfaced as errors).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct QpStats {
    /// Request packets sent, first transmissions.
    pub tx_requests: u64,
    /// Request packets sent again by a retransmission.
    pub tx_retransmits: u64,
    /// Responses (ACK/NAK/read responses/atomic ACKs) sent.
    pub tx_responses: u64,
    /// CNPs sent.
    pub tx_cnps: u64,
    /// Packets received.
    pub rx_packets: u64,
    /// Packets dropped (wrong state, transport, out of sequence, bad Q_Key, ...).
    pub rx_dropped: u64,
    /// Duplicate requests seen by the responder.
    pub rx_duplicates: u64,
    /// NAK PSN sequence errors sent.
    pub tx_nak_seq: u64,
    /// RNR NAKs sent.
    pub tx_rnr_naks: u64,
    /// NAKs received (any code).
    pub rx_naks: u64,
    /// RNR NAKs received.
    pub rx_rnr_naks: u64,
    /// Local ACK timeouts that fired.
    pub timeouts: u64,
    /// Retransmission rounds started (NAK, timeout, implied NAK, RNR).
    pub retries: u64,
    /// CNPs received.
    pub rx_cnps: u64,
    /// CE-marked packets received.
    pub rx_ce: u64,
    /// Atomics executed by the responder (replays excluded).
    pub atomics_executed: u64,
    /// Stale or duplicate responses ignored.
    pub stale_responses: u64,
    /// RC/UC packets dropped because they came from another address than
    /// the one the QP is connected to (also counted in `rx_dropped`).
    pub rx_bad_source: u64,
    /// Packets dropped because their BTH P_Key does not match the QP's
    /// under the membership rules (also counted in `rx_dropped`).
    pub rx_bad_pkey: u64,
    /// UD packets dropped for a Q_Key other than the QP's (also counted in
    /// `rx_dropped`).
    pub rx_bad_qkey: u64,
    /// READ or atomic requests refused (NAK invalid request) because
    /// `max_dest_rd_atomic` of them were already owed responses.
    pub rx_rd_atomic_overflow: u64,
    /// Class C/A NAKs sent that moved the responder to ERR: invalid
    /// request (0x61).
    pub tx_nak_invalid_request: u64,
    /// ... remote access error (0x62): a bad R_Key, range or right.
    pub tx_nak_remote_access: u64,
    /// ... remote operational error (0x63).
    pub tx_nak_remote_op: u64,
    /// SENDs with Invalidate refused because their R_Key may not be
    /// invalidated by a peer (IBA class J: no ACK, QP to ERR).
    pub rx_bad_invalidate: u64,
    /// READ responses carrying more bytes than their READ had room left
    /// for: the READ completed with LOC_PROT_ERR at once (rxe's do_read).
    pub rx_read_overruns: u64,
    /// Requests the responder received past its expected PSN and dropped
    /// (each packet of a gap; one NAK per gap is sent, `tx_nak_seq`).
    /// Requests held in the reorder window are counted in `rx_ooo_held`
    /// instead: nothing was lost or NAKed for them.
    pub rx_out_of_sequence: u64,
    /// PSN sequence error NAKs received.
    pub rx_nak_seq: u64,
    /// Retries started by an implied NAK (a READ or atomic passed over, or
    /// a gap in READ responses).
    pub implied_naks: u64,
    /// Invalid request NAKs (0x61) received by the requester.
    pub rx_nak_invalid_request: u64,
    /// Remote access error NAKs (0x62) received by the requester.
    pub rx_nak_remote_access: u64,
    /// CNPs received (counted in `rx_cnps`) that changed nothing: the QP
    /// has no congestion control algorithm, or is not sending.
    pub rx_cnps_ignored: u64,
    /// Requests past the expected PSN held and placed out of order
    /// ([`QpConfig::reorder_window`]).
    pub rx_ooo_held: u64,
    /// Requests past the expected PSN dropped because they fell beyond
    /// the reorder window or could not be placed before the gap filled
    /// (a SEND's first packet, a READ or atomic request).
    pub rx_ooo_dropped: u64,
    /// Held requests that completed in order when their gap filled.
    pub ooo_drained: u64,
    /// Selective acknowledgements sent (sequence NAKs naming a held PSN).
    pub tx_sacks: u64,
    /// Selective acknowledgements received.
    pub rx_sacks: u64,
    /// Request packets resent by selective repeat (also counted in
    /// `tx_retransmits`).
    pub sr_retransmits: u64,
    /// Times multipath started avoiding a path after a loss on it.
    pub path_failovers: u64,
    /// READ responses past a gap placed at their address at once
    /// (requester, selective repeat with a reorder window).
    pub rx_read_ooo_placed: u64,
    /// Trimmed requests received (headers only: a switch cut the payload).
    pub rx_trimmed: u64,
    /// NAKs sent for trimmed requests.
    pub tx_trim_naks: u64,
    /// NAKs for trimmed requests received (each PSN resent at once).
    pub rx_trim_naks: u64,
}

/// How many transport counters [`QpStats::hw_counters`] lists.
pub const HW_COUNTERS: usize = 15;

impl QpStats {
    /// These counters under the names of mlx5's `rdma statistic` hardware
    /// counters (its Q-counters and congestion counters: per device, and
    /// per QP through `rdma statistic qp`), as the simulator's `rdma
    /// statistic` dumps name them, so that the same eyes (and the doctor)
    /// read an emulated device, a simulated NIC and a real one alike. The
    /// one table of these names: the emulation's device and QP counters,
    /// perftest's counter block and `rocelab devices --counters` all list
    /// them in this order.
    ///
    /// | name | side | counts |
    /// | --- | --- | --- |
    /// | `out_of_sequence` | responder | requests past the expected PSN dropped (each packet of a gap; not those held in a reorder window) |
    /// | `duplicate_request` | responder | requests already executed, received again |
    /// | `out_of_buffer` | responder | RNR NAKs sent: no receive WQE was posted |
    /// | `resp_remote_access_errors` | responder | remote access error NAKs (0x62) sent |
    /// | `rnr_nak_retry_err` | requester | RNR NAKs received |
    /// | `packet_seq_err` | requester | PSN sequence error NAKs received |
    /// | `implied_nak_seq_err` | requester | retries started by an implied NAK |
    /// | `req_remote_invalid_request` | requester | invalid request NAKs (0x61) received |
    /// | `req_remote_access_errors` | requester | remote access error NAKs (0x62) received |
    /// | `local_ack_timeout_err` | requester | ACK timer expiries |
    /// | `roce_adp_retrans` | requester | request packets sent again |
    /// | `np_ecn_marked_roce_packets` | notification point | packets received with CE |
    /// | `np_cnp_sent` | notification point | CNPs sent |
    /// | `rp_cnp_handled` | reaction point | CNPs received and acted on |
    /// | `rp_cnp_ignored` | reaction point | CNPs received, no algorithm that acts on them |
    pub fn hw_counters(&self) -> [(&'static str, u64); HW_COUNTERS] {
        [
            ("out_of_sequence", self.rx_out_of_sequence),
            ("duplicate_request", self.rx_duplicates),
            ("out_of_buffer", self.tx_rnr_naks),
            ("resp_remote_access_errors", self.tx_nak_remote_access),
            ("rnr_nak_retry_err", self.rx_rnr_naks),
            ("packet_seq_err", self.rx_nak_seq),
            ("implied_nak_seq_err", self.implied_naks),
            ("req_remote_invalid_request", self.rx_nak_invalid_request),
            ("req_remote_access_errors", self.rx_nak_remote_access),
            ("local_ack_timeout_err", self.timeouts),
            ("roce_adp_retrans", self.tx_retransmits),
            ("np_ecn_marked_roce_packets", self.rx_ce),
            ("np_cnp_sent", self.tx_cnps),
            (
                "rp_cnp_handled",
                self.rx_cnps.saturating_sub(self.rx_cnps_ignored),
            ),
            ("rp_cnp_ignored", self.rx_cnps_ignored),
        ]
    }
}
