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

pub mod types;

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
