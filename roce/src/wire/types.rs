//! Protocol numbers and the transport-level header set.
//!
//! These types are the contract between [`crate::wire`] (bytes) and
//! [`crate::transport`] (the engine): the engine speaks [`RoceHeaders`] and
//! payload lengths; the wire layer turns them into bytes and back.

use core::fmt;

/// 24-bit packet sequence number with modular arithmetic (ROCEV2.md §5.1).
///
/// Comparison splits the space in halves: `a` is after `b` when
/// `((a - b) << 8) as i32 > 0`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub struct Psn(u32);

impl Psn {
    /// The PSN mask: 24 bits.
    pub const MASK: u32 = 0x00FF_FFFF;

    /// Make a PSN from the low 24 bits of `v`.
    pub const fn new(v: u32) -> Psn {
        Psn(v & Self::MASK)
    }

    /// The 24-bit value.
    pub const fn value(self) -> u32 {
        self.0
    }

    /// `self + n` modulo 2^24.
    #[must_use]
    pub const fn add(self, n: u32) -> Psn {
        Psn(self.0.wrapping_add(n) & Self::MASK)
    }

    /// `self - n` modulo 2^24.
    #[must_use]
    pub const fn sub(self, n: u32) -> Psn {
        Psn(self.0.wrapping_sub(n) & Self::MASK)
    }

    /// The next PSN.
    #[must_use]
    pub const fn next(self) -> Psn {
        self.add(1)
    }

    /// Signed distance `self - other` in the modular half-space: positive
    /// when `self` is after `other`.
    pub const fn diff(self, other: Psn) -> i32 {
        (self.0.wrapping_sub(other.0) << 8) as i32 >> 8
    }

    /// Number of PSNs from `other` up to `self` (`self - other` mod 2^24).
    pub const fn distance_from(self, other: Psn) -> u32 {
        self.0.wrapping_sub(other.0) & Self::MASK
    }

    /// True when `self` is strictly after `other`.
    pub const fn is_after(self, other: Psn) -> bool {
        self.diff(other) > 0
    }

    /// True when `self` is strictly before `other`.
    pub const fn is_before(self, other: Psn) -> bool {
        self.diff(other) < 0
    }
}

impl PartialOrd for Psn {
    fn partial_cmp(&self, other: &Self) -> Option<core::cmp::Ordering> {
        Some(self.diff(*other).cmp(&0))
    }
}

impl fmt::Display for Psn {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}", self.0)
    }
}

macro_rules! newtype_u32 {
    ($(#[$m:meta])* $name:ident, $mask:expr) => {
        $(#[$m])*
        #[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Default)]
        pub struct $name(u32);

        impl $name {
            /// Make one from `v`, keeping the bits the field has.
            pub const fn new(v: u32) -> $name {
                $name(v & $mask)
            }

            /// The raw value.
            pub const fn value(self) -> u32 {
                self.0
            }
        }

        impl fmt::Display for $name {
            fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                write!(f, "{:#x}", self.0)
            }
        }
    };
}

newtype_u32!(
    /// 24-bit queue pair number. `0xFFFFFF` is multicast, 1 is the GSI QP.
    Qpn,
    0x00FF_FFFF
);
newtype_u32!(
    /// 24-bit message sequence number carried in the AETH.
    Msn,
    0x00FF_FFFF
);
newtype_u32!(
    /// Remote key of a memory region.
    Rkey,
    u32::MAX
);
newtype_u32!(
    /// Local key of a memory region.
    Lkey,
    u32::MAX
);

impl Msn {
    /// The next MSN, modulo 2^24.
    #[must_use]
    pub const fn next(self) -> Msn {
        Msn::new(self.0.wrapping_add(1))
    }
}

/// The transport a BTH opcode belongs to (opcode bits 7..5).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Transport {
    /// Reliable Connected (0x00-0x1F).
    Rc,
    /// Unreliable Connected (0x20-0x3F).
    Uc,
    /// Reliable Datagram (0x40-0x5F): table entries only, no QPs.
    Rd,
    /// Unreliable Datagram (0x60-0x7F).
    Ud,
    /// Congestion notification (0x80-0x9F).
    Cnp,
}

macro_rules! opcodes {
    ($( $(#[$m:meta])* $name:ident = $val:expr, $text:expr; )*) => {
        /// A BTH opcode we know (ROCEV2.md §2). Parse with `TryFrom<u8>`.
        #[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
        #[repr(u8)]
        #[allow(non_camel_case_types)]
        pub enum Opcode {
            $( $(#[$m])* $name = $val, )*
        }

        impl Opcode {
            /// Every known opcode, in numeric order.
            pub const ALL: &'static [Opcode] = &[$(Opcode::$name,)*];

            /// The name as the IBTA and tshark spell it, e.g.
            /// `"RC SEND_ONLY"`.
            pub const fn name(self) -> &'static str {
                match self { $(Opcode::$name => $text,)* }
            }
        }

        impl TryFrom<u8> for Opcode {
            type Error = super::Error;
            fn try_from(v: u8) -> Result<Opcode, super::Error> {
                match v {
                    $( $val => Ok(Opcode::$name), )*
                    other => Err(super::Error::UnknownOpcode(other)),
                }
            }
        }
    };
}

opcodes! {
    /// RC SEND_FIRST.
    RcSendFirst = 0x00, "RC SEND_FIRST";
    /// RC SEND_MIDDLE.
    RcSendMiddle = 0x01, "RC SEND_MIDDLE";
    /// RC SEND_LAST.
    RcSendLast = 0x02, "RC SEND_LAST";
    /// RC SEND_LAST_WITH_IMMEDIATE.
    RcSendLastImm = 0x03, "RC SEND_LAST_WITH_IMMEDIATE";
    /// RC SEND_ONLY.
    RcSendOnly = 0x04, "RC SEND_ONLY";
    /// RC SEND_ONLY_WITH_IMMEDIATE.
    RcSendOnlyImm = 0x05, "RC SEND_ONLY_WITH_IMMEDIATE";
    /// RC RDMA_WRITE_FIRST.
    RcWriteFirst = 0x06, "RC RDMA_WRITE_FIRST";
    /// RC RDMA_WRITE_MIDDLE.
    RcWriteMiddle = 0x07, "RC RDMA_WRITE_MIDDLE";
    /// RC RDMA_WRITE_LAST.
    RcWriteLast = 0x08, "RC RDMA_WRITE_LAST";
    /// RC RDMA_WRITE_LAST_WITH_IMMEDIATE.
    RcWriteLastImm = 0x09, "RC RDMA_WRITE_LAST_WITH_IMMEDIATE";
    /// RC RDMA_WRITE_ONLY.
    RcWriteOnly = 0x0A, "RC RDMA_WRITE_ONLY";
    /// RC RDMA_WRITE_ONLY_WITH_IMMEDIATE.
    RcWriteOnlyImm = 0x0B, "RC RDMA_WRITE_ONLY_WITH_IMMEDIATE";
    /// RC RDMA_READ_REQUEST.
    RcReadRequest = 0x0C, "RC RDMA_READ_REQUEST";
    /// RC RDMA_READ_RESPONSE_FIRST.
    RcReadResponseFirst = 0x0D, "RC RDMA_READ_RESPONSE_FIRST";
    /// RC RDMA_READ_RESPONSE_MIDDLE.
    RcReadResponseMiddle = 0x0E, "RC RDMA_READ_RESPONSE_MIDDLE";
    /// RC RDMA_READ_RESPONSE_LAST.
    RcReadResponseLast = 0x0F, "RC RDMA_READ_RESPONSE_LAST";
    /// RC RDMA_READ_RESPONSE_ONLY.
    RcReadResponseOnly = 0x10, "RC RDMA_READ_RESPONSE_ONLY";
    /// RC ACKNOWLEDGE.
    RcAcknowledge = 0x11, "RC ACKNOWLEDGE";
    /// RC ATOMIC_ACKNOWLEDGE.
    RcAtomicAcknowledge = 0x12, "RC ATOMIC_ACKNOWLEDGE";
    /// RC CMP_SWAP.
    RcCompareSwap = 0x13, "RC CMP_SWAP";
    /// RC FETCH_ADD.
    RcFetchAdd = 0x14, "RC FETCH_ADD";
    /// RC SEND_LAST_WITH_INVALIDATE.
    RcSendLastInv = 0x16, "RC SEND_LAST_WITH_INVALIDATE";
    /// RC SEND_ONLY_WITH_INVALIDATE.
    RcSendOnlyInv = 0x17, "RC SEND_ONLY_WITH_INVALIDATE";
    /// RC ATOMIC_WRITE (IBTA 1.5): a RETH and 8 bytes written at once.
    RcAtomicWrite = 0x1D, "RC ATOMIC_WRITE";
    /// UC SEND_FIRST.
    UcSendFirst = 0x20, "UC SEND_FIRST";
    /// UC SEND_MIDDLE.
    UcSendMiddle = 0x21, "UC SEND_MIDDLE";
    /// UC SEND_LAST.
    UcSendLast = 0x22, "UC SEND_LAST";
    /// UC SEND_LAST_WITH_IMMEDIATE.
    UcSendLastImm = 0x23, "UC SEND_LAST_WITH_IMMEDIATE";
    /// UC SEND_ONLY.
    UcSendOnly = 0x24, "UC SEND_ONLY";
    /// UC SEND_ONLY_WITH_IMMEDIATE.
    UcSendOnlyImm = 0x25, "UC SEND_ONLY_WITH_IMMEDIATE";
    /// UC RDMA_WRITE_FIRST.
    UcWriteFirst = 0x26, "UC RDMA_WRITE_FIRST";
    /// UC RDMA_WRITE_MIDDLE.
    UcWriteMiddle = 0x27, "UC RDMA_WRITE_MIDDLE";
    /// UC RDMA_WRITE_LAST.
    UcWriteLast = 0x28, "UC RDMA_WRITE_LAST";
    /// UC RDMA_WRITE_LAST_WITH_IMMEDIATE.
    UcWriteLastImm = 0x29, "UC RDMA_WRITE_LAST_WITH_IMMEDIATE";
    /// UC RDMA_WRITE_ONLY.
    UcWriteOnly = 0x2A, "UC RDMA_WRITE_ONLY";
    /// UC RDMA_WRITE_ONLY_WITH_IMMEDIATE.
    UcWriteOnlyImm = 0x2B, "UC RDMA_WRITE_ONLY_WITH_IMMEDIATE";
    /// UD SEND_ONLY.
    UdSendOnly = 0x64, "UD SEND_ONLY";
    /// UD SEND_ONLY_WITH_IMMEDIATE.
    UdSendOnlyImm = 0x65, "UD SEND_ONLY_WITH_IMMEDIATE";
    /// RoCEv2 congestion notification packet.
    Cnp = 0x81, "CNP";
}

impl Opcode {
    /// The raw opcode byte.
    pub const fn value(self) -> u8 {
        self as u8
    }

    /// Which transport the opcode belongs to.
    pub const fn transport(self) -> Transport {
        match (self as u8) >> 5 {
            0 => Transport::Rc,
            1 => Transport::Uc,
            2 => Transport::Rd,
            3 => Transport::Ud,
            _ => Transport::Cnp,
        }
    }

    /// The operation bits (4..0), equal across RC and UC for the same op.
    const fn op(self) -> u8 {
        (self as u8) & 0x1F
    }

    /// Carries a DETH (UD).
    pub const fn has_deth(self) -> bool {
        matches!(self.transport(), Transport::Ud)
    }

    /// Carries a RETH: WRITE FIRST/ONLY (with or without immediate), READ
    /// REQUEST and ATOMIC WRITE.
    pub const fn has_reth(self) -> bool {
        !matches!(self.transport(), Transport::Ud | Transport::Cnp)
            && matches!(self.op(), 0x06 | 0x0A | 0x0B)
            || matches!(self, Opcode::RcReadRequest | Opcode::RcAtomicWrite)
    }

    /// Carries an AtomicETH.
    pub const fn has_atomic_eth(self) -> bool {
        matches!(self, Opcode::RcCompareSwap | Opcode::RcFetchAdd)
    }

    /// Carries an AETH.
    pub const fn has_aeth(self) -> bool {
        matches!(
            self,
            Opcode::RcReadResponseFirst
                | Opcode::RcReadResponseLast
                | Opcode::RcReadResponseOnly
                | Opcode::RcAcknowledge
                | Opcode::RcAtomicAcknowledge
        )
    }

    /// Carries an AtomicAckETH.
    pub const fn has_atomic_ack_eth(self) -> bool {
        matches!(self, Opcode::RcAtomicAcknowledge)
    }

    /// Carries immediate data.
    pub const fn has_immdt(self) -> bool {
        match self.transport() {
            Transport::Rc | Transport::Uc => matches!(self.op(), 0x03 | 0x05 | 0x09 | 0x0B),
            Transport::Ud => matches!(self, Opcode::UdSendOnlyImm),
            _ => false,
        }
    }

    /// Carries an IETH (send with invalidate).
    pub const fn has_ieth(self) -> bool {
        matches!(self, Opcode::RcSendLastInv | Opcode::RcSendOnlyInv)
    }

    /// Length in bytes of the extension headers after the BTH (CNP: the 16
    /// reserved bytes).
    pub const fn ext_header_len(self) -> usize {
        if matches!(self, Opcode::Cnp) {
            return 16;
        }
        let mut n = 0;
        if self.has_deth() {
            n += 8;
        }
        if self.has_reth() {
            n += 16;
        }
        if self.has_atomic_eth() {
            n += 28;
        }
        if self.has_aeth() {
            n += 4;
        }
        if self.has_atomic_ack_eth() {
            n += 8;
        }
        if self.has_immdt() {
            n += 4;
        }
        if self.has_ieth() {
            n += 4;
        }
        n
    }

    /// May carry payload bytes.
    pub const fn has_payload(self) -> bool {
        !matches!(
            self,
            Opcode::RcReadRequest
                | Opcode::RcAcknowledge
                | Opcode::RcAtomicAcknowledge
                | Opcode::RcCompareSwap
                | Opcode::RcFetchAdd
                | Opcode::Cnp
        )
    }

    /// A request (sent by a requester) rather than a response or a CNP.
    pub const fn is_request(self) -> bool {
        !matches!(
            self,
            Opcode::RcReadResponseFirst
                | Opcode::RcReadResponseMiddle
                | Opcode::RcReadResponseLast
                | Opcode::RcReadResponseOnly
                | Opcode::RcAcknowledge
                | Opcode::RcAtomicAcknowledge
                | Opcode::Cnp
        )
    }

    /// FIRST packet of a multi-packet message.
    pub const fn is_first(self) -> bool {
        matches!(self.op(), 0x00 | 0x06 | 0x0D)
            && !matches!(self.transport(), Transport::Ud | Transport::Cnp)
    }

    /// MIDDLE packet of a multi-packet message.
    pub const fn is_middle(self) -> bool {
        matches!(self.op(), 0x01 | 0x07 | 0x0E)
            && !matches!(self.transport(), Transport::Ud | Transport::Cnp)
    }

    /// LAST packet of a multi-packet message.
    pub const fn is_last(self) -> bool {
        matches!(self.op(), 0x02 | 0x03 | 0x08 | 0x09 | 0x0F | 0x16)
            && !matches!(self.transport(), Transport::Ud | Transport::Cnp)
    }

    /// ONLY packet (a whole message in one packet), including READ requests,
    /// atomics, acknowledges and UD sends.
    pub const fn is_only(self) -> bool {
        !self.is_first() && !self.is_middle() && !self.is_last()
    }
}

impl fmt::Display for Opcode {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// The two ECN bits of the IP header (ROCEV2.md §6.1).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub enum Ecn {
    /// 00: not ECN-capable.
    #[default]
    NotEct,
    /// 10: ECN-capable transport (0).
    Ect0,
    /// 01: ECN-capable transport (1).
    Ect1,
    /// 11: congestion experienced.
    Ce,
}

impl Ecn {
    /// From the two low bits of the TOS / traffic class byte.
    pub const fn from_bits(b: u8) -> Ecn {
        match b & 3 {
            0 => Ecn::NotEct,
            2 => Ecn::Ect0,
            1 => Ecn::Ect1,
            _ => Ecn::Ce,
        }
    }

    /// The two bits.
    pub const fn bits(self) -> u8 {
        match self {
            Ecn::NotEct => 0,
            Ecn::Ect0 => 2,
            Ecn::Ect1 => 1,
            Ecn::Ce => 3,
        }
    }
}

/// Base Transport Header fields (ROCEV2.md §1.5).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct BthRepr {
    /// The opcode.
    pub opcode: Opcode,
    /// Solicited event.
    pub solicited: bool,
    /// MigReq bit.
    pub migreq: bool,
    /// Pad count, `(-payload_len) & 3`.
    pub pad_count: u8,
    /// Transport header version (0).
    pub tver: u8,
    /// Partition key (0xFFFF by default).
    pub pkey: u16,
    /// FECN bit.
    pub fecn: bool,
    /// BECN bit (set in CNPs).
    pub becn: bool,
    /// Destination QP.
    pub dest_qp: Qpn,
    /// Acknowledge request.
    pub ack_req: bool,
    /// Packet sequence number.
    pub psn: Psn,
}

/// RDMA Extended Transport Header.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RethRepr {
    /// Remote virtual address.
    pub va: u64,
    /// Remote key.
    pub rkey: Rkey,
    /// DMA length: the whole message length.
    pub dma_len: u32,
}

/// NAK error codes (AETH syndrome type 11).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum NakCode {
    /// 0: PSN sequence error.
    PsnSequenceError,
    /// 1: invalid request.
    InvalidRequest,
    /// 2: remote access error.
    RemoteAccessError,
    /// 3: remote operational error.
    RemoteOperationalError,
    /// 4: invalid RD request.
    InvalidRdRequest,
    /// 5-31: reserved, kept as the raw code.
    Reserved(u8),
}

/// The AETH syndrome, decoded (ROCEV2.md §5.7).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum AethSyndrome {
    /// ACK with the 5-bit credit code (31 = no credit information).
    Ack {
        /// Credit count code, 0..=31.
        credits: u8,
    },
    /// RNR NAK with the 5-bit timer code.
    RnrNak {
        /// Timer code, 0..=31 (ROCEV2.md §5.6).
        timer: u8,
    },
    /// NAK with an error code.
    Nak(NakCode),
    /// Syndrome type 10 (reserved), with its low 5 bits.
    Reserved(u8),
}

/// ACK Extended Transport Header.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct AethRepr {
    /// The syndrome.
    pub syndrome: AethSyndrome,
    /// Message sequence number.
    pub msn: Msn,
}

/// Atomic Extended Transport Header.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct AtomicEthRepr {
    /// Remote virtual address (8-byte aligned).
    pub va: u64,
    /// Remote key.
    pub rkey: Rkey,
    /// Swap (CMP_SWAP) or add (FETCH_ADD) data.
    pub swap_add: u64,
    /// Compare data (CMP_SWAP; 0 for FETCH_ADD).
    pub compare: u64,
}

/// Atomic acknowledge extended transport header.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct AtomicAckEthRepr {
    /// The remote value before the atomic.
    pub orig: u64,
}

/// Datagram Extended Transport Header.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct DethRepr {
    /// Queue key.
    pub qkey: u32,
    /// Source QP.
    pub src_qp: Qpn,
}

/// The transport-level header set of one packet: BTH plus whichever
/// extension headers its opcode carries. This is what the engine emits and
/// consumes; the wire layer adds IP/UDP, payload, pad and ICRC.
///
/// Invariant kept by constructors and by the wire parser: an extension
/// header is `Some` exactly when `bth.opcode` carries it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RoceHeaders {
    /// Base transport header.
    pub bth: BthRepr,
    /// DETH (UD).
    pub deth: Option<DethRepr>,
    /// RETH.
    pub reth: Option<RethRepr>,
    /// AtomicETH.
    pub atomic_eth: Option<AtomicEthRepr>,
    /// AETH.
    pub aeth: Option<AethRepr>,
    /// AtomicAckETH.
    pub atomic_ack_eth: Option<AtomicAckEthRepr>,
    /// Immediate data, as the 32 bits appear on the wire (big-endian value).
    pub immdt: Option<u32>,
    /// IETH: the R_Key to invalidate.
    pub ieth: Option<Rkey>,
}

impl RoceHeaders {
    /// Total length of BTH plus extension headers.
    pub const fn header_len(&self) -> usize {
        12 + self.bth.opcode.ext_header_len()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn psn_wraps_and_compares_in_half_space() {
        let a = Psn::new(0xFF_FFFF);
        assert_eq!(a.next(), Psn::new(0));
        assert!(Psn::new(0).is_after(a));
        assert!(a.is_before(Psn::new(5)));
        assert_eq!(Psn::new(3).distance_from(a), 4);
        assert_eq!(Psn::new(3).diff(a), 4);
        assert_eq!(a.diff(Psn::new(3)), -4);
        assert!(Psn::new(0x80_0000).is_before(Psn::new(0)));
    }

    #[test]
    fn opcode_header_sets_match_the_table() {
        assert_eq!(Opcode::RcSendOnly.ext_header_len(), 0);
        assert_eq!(Opcode::RcWriteOnlyImm.ext_header_len(), 20);
        assert_eq!(Opcode::UcWriteFirst.ext_header_len(), 16);
        assert_eq!(Opcode::RcAtomicAcknowledge.ext_header_len(), 12);
        assert_eq!(Opcode::RcCompareSwap.ext_header_len(), 28);
        assert_eq!(Opcode::UdSendOnlyImm.ext_header_len(), 12);
        assert_eq!(Opcode::RcSendOnlyInv.ext_header_len(), 4);
        assert_eq!(Opcode::Cnp.ext_header_len(), 16);
        assert_eq!(Opcode::RcReadResponseMiddle.ext_header_len(), 0);
        assert_eq!(Opcode::RcReadRequest.ext_header_len(), 16);
        assert!(Opcode::RcReadResponseFirst.is_first());
        assert!(Opcode::UcWriteLastImm.is_last());
        assert!(Opcode::RcFetchAdd.is_only());
        assert_eq!(
            Opcode::try_from(0x15),
            Err(crate::wire::Error::UnknownOpcode(0x15))
        );
        for op in Opcode::ALL {
            assert_eq!(Opcode::try_from(op.value()), Ok(*op));
        }
    }
}
