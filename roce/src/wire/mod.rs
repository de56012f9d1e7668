//! The RoCEv2 wire format, in the smoltcp shape.
//!
//! Every header file has the same layout: a private `mod field` of byte
//! ranges, a zero-copy `Packet<T: AsRef<[u8]>>` view with accessors (and
//! setters when `T: AsMut<[u8]>`), a `Repr` with `parse`/`emit`/`buffer_len`,
//! `Display`, then tests. After `Packet::new_checked` (or `check_len`)
//! succeeds no accessor panics. Parsing network input never panics: errors
//! come back as [`Error`].
//!
//! The protocol numbers shared by the wire, the transport and the simulator
//! ([`Psn`], [`Qpn`], [`Msn`], [`Rkey`], [`Lkey`], [`Opcode`]) and the
//! transport-level header set ([`RoceHeaders`]) live in [`types`] and are the
//! contract between the packet code and the engine: the engine produces and
//! consumes `RoceHeaders` plus a payload length, and never touches bytes.
//!
//! The files, bottom up:
//!
//! * one per transport header: [`bth`], [`reth`], [`aeth`] (syndromes, the
//!   credit and RNR timer tables), [`atomic_eth`], [`atomic_ack_eth`],
//!   [`immdt`], [`ieth`], [`deth`], [`cnp`];
//! * [`headers`]: `RoceHeaders::parse`/`emit` for BTH through the last
//!   extension header;
//! * [`icrc`]: the invariant CRC, incremental, for whole IP packets or for a
//!   bare UDP payload plus the [`UdpEncap`] values a kernel writes around it;
//! * [`roce`]: a whole packet over IPv4/IPv6 + UDP (pnet's header types),
//!   the UDP-payload emit/parse a socket backend uses, per-packet size and
//!   overhead helpers for the simulator, UDP source port conventions;
//! * [`pfc`]: 802.1Qbb PFC and 802.3x PAUSE frames, quanta <-> time;
//! * [`pcap`]: capture files; [`dissect`]: one-line frame decoding;
//!   [`samples`]: a deterministic capture of every opcode.
//!
//! Byte order: every header field is big-endian; the ICRC is carried least
//! significant byte first ([`Icrc::finish`] returns the CRC value, write
//! `to_le_bytes()`). Lengths are bytes; PFC times are 512-bit-time quanta.

pub mod aeth;
pub mod atomic_ack_eth;
pub mod atomic_eth;
pub mod bth;
pub mod cnp;
pub mod deth;
pub mod dissect;
pub mod headers;
pub mod icrc;
pub mod ieth;
pub mod immdt;
pub mod pcap;
pub mod pfc;
pub mod reth;
pub mod roce;
pub mod samples;
pub mod types;

pub use aeth::{
    credit_code_for, credit_count, rnr_timer_code_for, rnr_timer_duration, Packet as AethPacket,
};
pub use atomic_ack_eth::Packet as AtomicAckEthPacket;
pub use atomic_eth::Packet as AtomicEthPacket;
pub use bth::Packet as BthPacket;
pub use cnp::{Packet as CnpPacket, Repr as CnpRepr};
pub use deth::Packet as DethPacket;
pub use icrc::{Icrc, IpEncap, UdpEncap, ROCE_UDP_PORT};
pub use ieth::{Packet as IethPacket, Repr as IethRepr};
pub use immdt::{Packet as ImmDtPacket, Repr as ImmDtRepr};
pub use pcap::{PcapError, PcapReader, PcapWriter};
pub use pfc::{Packet as PfcPacket, Repr as PfcRepr};
pub use pnet_base::MacAddr;
pub use reth::Packet as RethPacket;
pub use roce::{
    EthernetRepr, Framing, IpRepr, IpVersion, Packet as RocePacket, PayloadSource,
    Repr as RoceRepr, UdpChecksum, VlanTag,
};
pub use types::{
    AethRepr, AethSyndrome, AtomicAckEthRepr, AtomicEthRepr, BthRepr, DethRepr, Ecn, Lkey, Msn,
    NakCode, Opcode, Psn, Qpn, RethRepr, Rkey, RoceHeaders, Transport,
};

/// Why a packet could not be parsed.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
pub enum Error {
    /// The buffer is shorter than the header or the lengths it declares.
    #[error("truncated packet")]
    Truncated,
    /// A field holds a value this implementation does not accept.
    #[error("malformed packet")]
    Malformed,
    /// The opcode is not one we know.
    #[error("unknown opcode {0:#04x}")]
    UnknownOpcode(u8),
    /// The packet parsed, but its ICRC does not match its contents.
    #[error("ICRC mismatch: carried {carried:#010x}, computed {computed:#010x}")]
    BadIcrc {
        /// The ICRC in the packet, as the u32 read little-endian.
        carried: u32,
        /// The ICRC computed over the masked packet.
        computed: u32,
    },
}

/// Result of parsing.
pub type Result<T> = core::result::Result<T, Error>;

/// Read a big-endian 24-bit value from the first three bytes of `b`.
pub(crate) fn read_u24(b: &[u8]) -> u32 {
    u32::from_be_bytes([0, b[0], b[1], b[2]])
}

/// Write the low 24 bits of `v` big-endian into the first three bytes of `b`.
pub(crate) fn write_u24(b: &mut [u8], v: u32) {
    b[..3].copy_from_slice(&v.to_be_bytes()[1..]);
}

/// Read a big-endian u32 from the first four bytes of `b`.
pub(crate) fn read_u32(b: &[u8]) -> u32 {
    u32::from_be_bytes([b[0], b[1], b[2], b[3]])
}

/// Read a big-endian u64 from the first eight bytes of `b`.
pub(crate) fn read_u64(b: &[u8]) -> u64 {
    let mut a = [0u8; 8];
    a.copy_from_slice(&b[..8]);
    u64::from_be_bytes(a)
}
