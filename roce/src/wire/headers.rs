//! The transport headers of one packet, BTH through the last extension
//! header, as a [`RoceHeaders`] (ROCEV2.md §1.5-§1.6, §2).
//!
//! This is the layer the transport engine and the UDP backend speak: the
//! bytes from the BTH to just before the payload. The extension headers come
//! in the order `[DETH] [RETH] [AtomicETH] [AETH] [AtomicAckETH] [ImmDt]
//! [IETH]`; which ones are present follows from the opcode alone. A CNP
//! carries 16 reserved bytes instead (ignored on parse, zero on emit).
//!
//! Parsing never panics; emitting checks that the `Option`s of the
//! [`RoceHeaders`] match what the opcode carries ([`Error::Malformed`]
//! otherwise) and that the buffer is long enough ([`Error::Truncated`]).

use core::fmt;

use super::{
    aeth, atomic_ack_eth, atomic_eth, bth, deth, ieth, immdt, reth, AethRepr, AtomicAckEthRepr,
    AtomicEthRepr, BthRepr, DethRepr, Error, Opcode, Result, RethRepr, Rkey, RoceHeaders,
};

/// Length of the reserved area of a CNP after the BTH.
pub const CNP_RESERVED_LEN: usize = 16;

impl RoceHeaders {
    /// Headers with this BTH and no extension header. Only consistent for
    /// opcodes that carry none (e.g. SEND_MIDDLE, READ_RESPONSE_MIDDLE, CNP);
    /// fill the `Option`s for the others.
    pub const fn new(bth: BthRepr) -> RoceHeaders {
        RoceHeaders {
            bth,
            deth: None,
            reth: None,
            atomic_eth: None,
            aeth: None,
            atomic_ack_eth: None,
            immdt: None,
            ieth: None,
        }
    }

    /// True when every extension header is present exactly when the opcode
    /// carries it (the invariant [`emit`](Self::emit) checks).
    pub const fn is_consistent(&self) -> bool {
        let op = self.bth.opcode;
        op.has_deth() == self.deth.is_some()
            && op.has_reth() == self.reth.is_some()
            && op.has_atomic_eth() == self.atomic_eth.is_some()
            && op.has_aeth() == self.aeth.is_some()
            && op.has_atomic_ack_eth() == self.atomic_ack_eth.is_some()
            && op.has_immdt() == self.immdt.is_some()
            && op.has_ieth() == self.ieth.is_some()
    }

    /// Parse the BTH and the extension headers its opcode carries from the
    /// start of `buf` (a UDP payload). The payload starts at
    /// [`header_len`](Self::header_len).
    pub fn parse(buf: &[u8]) -> Result<RoceHeaders> {
        let bth = BthRepr::parse(&bth::Packet::new_checked(buf)?)?;
        let op = bth.opcode;
        if buf.len() < bth::HEADER_LEN + op.ext_header_len() {
            return Err(Error::Truncated);
        }
        let mut h = RoceHeaders::new(bth);
        let mut at = bth::HEADER_LEN;
        if op == Opcode::Cnp {
            return Ok(h);
        }
        if op.has_deth() {
            h.deth = Some(DethRepr::parse(&deth::Packet::new_checked(&buf[at..])?)?);
            at += deth::HEADER_LEN;
        }
        if op.has_reth() {
            h.reth = Some(RethRepr::parse(&reth::Packet::new_checked(&buf[at..])?)?);
            at += reth::HEADER_LEN;
        }
        if op.has_atomic_eth() {
            let p = atomic_eth::Packet::new_checked(&buf[at..])?;
            h.atomic_eth = Some(AtomicEthRepr::parse(&p)?);
            at += atomic_eth::HEADER_LEN;
        }
        if op.has_aeth() {
            h.aeth = Some(AethRepr::parse(&aeth::Packet::new_checked(&buf[at..])?)?);
            at += aeth::HEADER_LEN;
        }
        if op.has_atomic_ack_eth() {
            let p = atomic_ack_eth::Packet::new_checked(&buf[at..])?;
            h.atomic_ack_eth = Some(AtomicAckEthRepr::parse(&p)?);
            at += atomic_ack_eth::HEADER_LEN;
        }
        if op.has_immdt() {
            let p = immdt::Packet::new_checked(&buf[at..])?;
            h.immdt = Some(immdt::Repr::parse(&p)?.imm);
            at += immdt::HEADER_LEN;
        }
        if op.has_ieth() {
            let p = ieth::Packet::new_checked(&buf[at..])?;
            h.ieth = Some(ieth::Repr::parse(&p)?.rkey);
        }
        Ok(h)
    }

    /// Bytes [`emit`](Self::emit) writes (same as `header_len`).
    pub const fn buffer_len(&self) -> usize {
        self.header_len()
    }

    /// Write the BTH and extension headers at the start of `buf`; returns
    /// the number of bytes written. The BTH is written as given, pad count
    /// included.
    pub fn emit(&self, buf: &mut [u8]) -> Result<usize> {
        if !self.is_consistent() {
            return Err(Error::Malformed);
        }
        let len = self.header_len();
        if buf.len() < len {
            return Err(Error::Truncated);
        }
        self.bth.emit(&mut bth::Packet::new_unchecked(&mut buf[..]));
        let mut at = bth::HEADER_LEN;
        if self.bth.opcode == Opcode::Cnp {
            buf[at..at + CNP_RESERVED_LEN].fill(0);
            return Ok(len);
        }
        if let Some(d) = &self.deth {
            d.emit(&mut deth::Packet::new_unchecked(&mut buf[at..]));
            at += deth::HEADER_LEN;
        }
        if let Some(r) = &self.reth {
            r.emit(&mut reth::Packet::new_unchecked(&mut buf[at..]));
            at += reth::HEADER_LEN;
        }
        if let Some(a) = &self.atomic_eth {
            a.emit(&mut atomic_eth::Packet::new_unchecked(&mut buf[at..]));
            at += atomic_eth::HEADER_LEN;
        }
        if let Some(a) = &self.aeth {
            a.emit(&mut aeth::Packet::new_unchecked(&mut buf[at..]));
            at += aeth::HEADER_LEN;
        }
        if let Some(a) = &self.atomic_ack_eth {
            a.emit(&mut atomic_ack_eth::Packet::new_unchecked(&mut buf[at..]));
            at += atomic_ack_eth::HEADER_LEN;
        }
        if let Some(imm) = self.immdt {
            immdt::Repr { imm }.emit(&mut immdt::Packet::new_unchecked(&mut buf[at..]));
            at += immdt::HEADER_LEN;
        }
        if let Some(rkey) = self.ieth {
            ieth::Repr { rkey }.emit(&mut ieth::Packet::new_unchecked(&mut buf[at..]));
            at += ieth::HEADER_LEN;
        }
        debug_assert_eq!(at, len);
        Ok(len)
    }

    /// The R_Key of the IETH, if any (convenience for the responder).
    pub const fn invalidate_rkey(&self) -> Option<Rkey> {
        self.ieth
    }
}

impl fmt::Display for RoceHeaders {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}", self.bth)?;
        if let Some(d) = &self.deth {
            write!(f, ", {d}")?;
        }
        if let Some(r) = &self.reth {
            write!(f, ", {r}")?;
        }
        if let Some(a) = &self.atomic_eth {
            write!(f, ", {a}")?;
        }
        if let Some(a) = &self.aeth {
            write!(f, ", {a}")?;
        }
        if let Some(a) = &self.atomic_ack_eth {
            write!(f, ", {a}")?;
        }
        if let Some(imm) = self.immdt {
            write!(f, ", {}", immdt::Repr { imm })?;
        }
        if let Some(rkey) = self.ieth {
            write!(f, ", {}", ieth::Repr { rkey })?;
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::wire::{AethSyndrome, Msn, Psn, Qpn};

    // Vector 9: ATOMIC_ACKNOWLEDGE, AETH(0x1f, msn 8) + AtomicAckETH(0).
    static ATOMIC_ACK: [u8; 24] = [
        0x12, 0x00, 0xff, 0xff, 0x00, 0x00, 0x00, 0x11, 0x00, 0x00, 0x00, 0x10, 0x1f, 0x00, 0x00,
        0x08, 0, 0, 0, 0, 0, 0, 0, 0,
    ];

    fn atomic_ack() -> RoceHeaders {
        RoceHeaders {
            aeth: Some(AethRepr {
                syndrome: AethSyndrome::ACK,
                msn: Msn::new(8),
            }),
            atomic_ack_eth: Some(AtomicAckEthRepr { orig: 0 }),
            ..RoceHeaders::new(BthRepr::new(
                Opcode::RcAtomicAcknowledge,
                Qpn::new(0x11),
                Psn::new(0x10),
            ))
        }
    }

    #[test]
    fn parse_orders_aeth_before_atomic_ack_eth() {
        let h = RoceHeaders::parse(&ATOMIC_ACK).unwrap();
        assert_eq!(h, atomic_ack());
        assert_eq!(h.header_len(), 24);
    }

    #[test]
    fn emit_writes_the_same_bytes() {
        let mut buf = [0xAAu8; 24];
        assert_eq!(atomic_ack().emit(&mut buf), Ok(24));
        assert_eq!(buf, ATOMIC_ACK);
    }

    #[test]
    fn truncated_anywhere_is_an_error() {
        for n in 0..ATOMIC_ACK.len() {
            assert_eq!(RoceHeaders::parse(&ATOMIC_ACK[..n]), Err(Error::Truncated));
            let mut buf = vec![0u8; n];
            assert_eq!(atomic_ack().emit(&mut buf), Err(Error::Truncated));
        }
    }

    #[test]
    fn emit_refuses_headers_the_opcode_does_not_carry() {
        let mut h = atomic_ack();
        h.reth = Some(RethRepr {
            va: 0,
            rkey: Rkey::new(1),
            dma_len: 0,
        });
        assert!(!h.is_consistent());
        assert_eq!(h.emit(&mut [0u8; 64]), Err(Error::Malformed));
        let mut h = atomic_ack();
        h.aeth = None;
        assert_eq!(h.emit(&mut [0u8; 64]), Err(Error::Malformed));
    }

    #[test]
    fn cnp_reserved_bytes_are_skipped_and_zeroed() {
        let mut bth = BthRepr::new(Opcode::Cnp, Qpn::new(0x118), Psn::new(0));
        bth.becn = true;
        let h = RoceHeaders::new(bth);
        let mut buf = [0xEEu8; 28];
        assert_eq!(h.emit(&mut buf), Ok(28));
        assert!(buf[12..].iter().all(|&b| b == 0));
        assert_eq!(RoceHeaders::parse(&buf), Ok(h));
        assert_eq!(RoceHeaders::parse(&buf[..27]), Err(Error::Truncated));
    }
}
