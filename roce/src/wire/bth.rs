//! Base Transport Header (ROCEV2.md §1.5): 12 bytes after the UDP header.
//!
//! ```text
//! 0: opcode | 1: SE M PadCnt(2) TVer(4) | 2-3: P_Key
//! 4: FECN BECN Resv6a | 5-7: DestQP | 8: A Resv7 | 9-11: PSN
//! ```
//!
//! Parsing accepts any TVer, P_Key and reserved bits (the transport decides
//! what to drop); it rejects only an opcode outside the table of §2 with
//! [`Error::UnknownOpcode`]. Emitting writes the reserved bits as zero.

use core::fmt;

use super::{read_u24, write_u24, BthRepr, Error, Opcode, Psn, Qpn, Result};

mod field {
    use core::ops::Range;

    pub const OPCODE: usize = 0;
    pub const FLAGS: usize = 1;
    pub const PKEY: Range<usize> = 2..4;
    pub const RESV8A: usize = 4;
    pub const DEST_QP: Range<usize> = 5..8;
    pub const ACK: usize = 8;
    pub const PSN: Range<usize> = 9..12;
}

/// Length of the BTH in bytes.
pub const HEADER_LEN: usize = field::PSN.end;

/// The default full-member partition key.
pub const DEFAULT_PKEY: u16 = 0xFFFF;

/// A read/write view of a BTH (and whatever follows it in the buffer).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Packet<T: AsRef<[u8]>> {
    buffer: T,
}

impl<T: AsRef<[u8]>> Packet<T> {
    /// Wrap a buffer without checking its length; accessors may panic on a
    /// short buffer until [`check_len`](Self::check_len) succeeds.
    pub const fn new_unchecked(buffer: T) -> Packet<T> {
        Packet { buffer }
    }

    /// Wrap a buffer and check that it holds a whole BTH.
    pub fn new_checked(buffer: T) -> Result<Packet<T>> {
        let packet = Self::new_unchecked(buffer);
        packet.check_len()?;
        Ok(packet)
    }

    /// [`Error::Truncated`] when the buffer is shorter than 12 bytes.
    pub fn check_len(&self) -> Result<()> {
        if self.buffer.as_ref().len() < HEADER_LEN {
            Err(Error::Truncated)
        } else {
            Ok(())
        }
    }

    /// The wrapped buffer.
    pub fn into_inner(self) -> T {
        self.buffer
    }

    /// The raw opcode byte.
    pub fn opcode_raw(&self) -> u8 {
        self.buffer.as_ref()[field::OPCODE]
    }

    /// The opcode, if it is one we know.
    pub fn opcode(&self) -> Result<Opcode> {
        Opcode::try_from(self.opcode_raw())
    }

    /// Solicited event bit.
    pub fn solicited(&self) -> bool {
        self.buffer.as_ref()[field::FLAGS] & 0x80 != 0
    }

    /// MigReq bit.
    pub fn migreq(&self) -> bool {
        self.buffer.as_ref()[field::FLAGS] & 0x40 != 0
    }

    /// Pad count (0..=3).
    pub fn pad_count(&self) -> u8 {
        (self.buffer.as_ref()[field::FLAGS] >> 4) & 0x3
    }

    /// Transport header version (4 bits).
    pub fn tver(&self) -> u8 {
        self.buffer.as_ref()[field::FLAGS] & 0x0F
    }

    /// Partition key.
    pub fn pkey(&self) -> u16 {
        let b = &self.buffer.as_ref()[field::PKEY];
        u16::from_be_bytes([b[0], b[1]])
    }

    /// The whole byte 4 (FECN, BECN, Resv6a), masked in the ICRC.
    pub fn resv8a(&self) -> u8 {
        self.buffer.as_ref()[field::RESV8A]
    }

    /// Forward ECN bit.
    pub fn fecn(&self) -> bool {
        self.resv8a() & 0x80 != 0
    }

    /// Backward ECN bit.
    pub fn becn(&self) -> bool {
        self.resv8a() & 0x40 != 0
    }

    /// Destination QP.
    pub fn dest_qp(&self) -> Qpn {
        Qpn::new(read_u24(&self.buffer.as_ref()[field::DEST_QP]))
    }

    /// Acknowledge request bit.
    pub fn ack_req(&self) -> bool {
        self.buffer.as_ref()[field::ACK] & 0x80 != 0
    }

    /// The seven reserved bits after AckReq (covered by the ICRC).
    pub fn resv7(&self) -> u8 {
        self.buffer.as_ref()[field::ACK] & 0x7F
    }

    /// Packet sequence number.
    pub fn psn(&self) -> Psn {
        Psn::new(read_u24(&self.buffer.as_ref()[field::PSN]))
    }

    /// The bytes after the BTH.
    pub fn payload(&self) -> &[u8] {
        &self.buffer.as_ref()[HEADER_LEN..]
    }
}

impl<T: AsRef<[u8]> + AsMut<[u8]>> Packet<T> {
    /// Set the opcode byte.
    pub fn set_opcode(&mut self, opcode: Opcode) {
        self.buffer.as_mut()[field::OPCODE] = opcode.value();
    }

    /// Set the flags byte from its parts (`pad_count` 2 bits, `tver` 4 bits).
    pub fn set_flags(&mut self, solicited: bool, migreq: bool, pad_count: u8, tver: u8) {
        self.buffer.as_mut()[field::FLAGS] = (u8::from(solicited) << 7)
            | (u8::from(migreq) << 6)
            | ((pad_count & 3) << 4)
            | (tver & 0x0F);
    }

    /// Set the partition key.
    pub fn set_pkey(&mut self, pkey: u16) {
        self.buffer.as_mut()[field::PKEY].copy_from_slice(&pkey.to_be_bytes());
    }

    /// Set byte 4 from FECN and BECN (Resv6a zero).
    pub fn set_ecn_bits(&mut self, fecn: bool, becn: bool) {
        self.buffer.as_mut()[field::RESV8A] = (u8::from(fecn) << 7) | (u8::from(becn) << 6);
    }

    /// Set the destination QP.
    pub fn set_dest_qp(&mut self, qpn: Qpn) {
        write_u24(&mut self.buffer.as_mut()[field::DEST_QP], qpn.value());
    }

    /// Set the AckReq bit (Resv7 zero).
    pub fn set_ack_req(&mut self, ack_req: bool) {
        self.buffer.as_mut()[field::ACK] = u8::from(ack_req) << 7;
    }

    /// Set the PSN.
    pub fn set_psn(&mut self, psn: Psn) {
        write_u24(&mut self.buffer.as_mut()[field::PSN], psn.value());
    }

    /// The bytes after the BTH, writable.
    pub fn payload_mut(&mut self) -> &mut [u8] {
        &mut self.buffer.as_mut()[HEADER_LEN..]
    }
}

impl BthRepr {
    /// A BTH with the defaults rxe sends: no SE/M/FECN/BECN, pad 0, TVer 0,
    /// P_Key 0xFFFF, no AckReq.
    pub const fn new(opcode: Opcode, dest_qp: Qpn, psn: Psn) -> BthRepr {
        BthRepr {
            opcode,
            solicited: false,
            migreq: false,
            pad_count: 0,
            tver: 0,
            pkey: DEFAULT_PKEY,
            fecn: false,
            becn: false,
            dest_qp,
            ack_req: false,
            psn,
        }
    }

    /// The pad count a payload of `payload_len` bytes needs: `(-len) & 3`.
    pub const fn pad_count_for(payload_len: usize) -> u8 {
        (payload_len.wrapping_neg() & 3) as u8
    }

    /// Parse a BTH. Fails only on a short buffer or an unknown opcode.
    pub fn parse<T: AsRef<[u8]> + ?Sized>(packet: &Packet<&T>) -> Result<BthRepr> {
        packet.check_len()?;
        Ok(BthRepr {
            opcode: packet.opcode()?,
            solicited: packet.solicited(),
            migreq: packet.migreq(),
            pad_count: packet.pad_count(),
            tver: packet.tver(),
            pkey: packet.pkey(),
            fecn: packet.fecn(),
            becn: packet.becn(),
            dest_qp: packet.dest_qp(),
            ack_req: packet.ack_req(),
            psn: packet.psn(),
        })
    }

    /// Bytes [`emit`](Self::emit) writes: 12.
    pub const fn buffer_len(&self) -> usize {
        HEADER_LEN
    }

    /// Write the BTH into the first 12 bytes of `packet`. `pad_count` is
    /// masked to 2 bits and `tver` to 4. The packet must have passed
    /// `check_len`.
    pub fn emit<T: AsRef<[u8]> + AsMut<[u8]>>(&self, packet: &mut Packet<T>) {
        packet.set_opcode(self.opcode);
        packet.set_flags(self.solicited, self.migreq, self.pad_count, self.tver);
        packet.set_pkey(self.pkey);
        packet.set_ecn_bits(self.fecn, self.becn);
        packet.set_dest_qp(self.dest_qp);
        packet.set_ack_req(self.ack_req);
        packet.set_psn(self.psn);
    }
}

impl fmt::Display for BthRepr {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "BTH {} qp={} psn={}",
            self.opcode, self.dest_qp, self.psn
        )?;
        if self.ack_req {
            f.write_str(" A")?;
        }
        if self.solicited {
            f.write_str(" SE")?;
        }
        if self.migreq {
            f.write_str(" M")?;
        }
        if self.fecn {
            f.write_str(" FECN")?;
        }
        if self.becn {
            f.write_str(" BECN")?;
        }
        if self.pad_count != 0 {
            write!(f, " pad={}", self.pad_count)?;
        }
        if self.pkey != DEFAULT_PKEY {
            write!(f, " pkey={:#06x}", self.pkey)?;
        }
        if self.tver != 0 {
            write!(f, " tver={}", self.tver)?;
        }
        Ok(())
    }
}

impl<T: AsRef<[u8]>> fmt::Display for Packet<T> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match BthRepr::parse(&Packet::new_unchecked(self.buffer.as_ref())) {
            Ok(repr) => write!(f, "{repr}"),
            Err(e) => write!(f, "BTH ({e})"),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    // Vector 11: RC SEND_ONLY_WITH_IMMEDIATE, SE=1, DestQP 0x11, A=1, PSN 0x21.
    static BYTES: [u8; 12] = [
        0x05, 0x80, 0xff, 0xff, 0x00, 0x00, 0x00, 0x11, 0x80, 0x00, 0x00, 0x21,
    ];

    fn repr() -> BthRepr {
        BthRepr {
            solicited: true,
            ack_req: true,
            ..BthRepr::new(Opcode::RcSendOnlyImm, Qpn::new(0x11), Psn::new(0x21))
        }
    }

    #[test]
    fn deconstruct() {
        let p = Packet::new_checked(&BYTES[..]).unwrap();
        assert_eq!(p.opcode(), Ok(Opcode::RcSendOnlyImm));
        assert!(p.solicited());
        assert!(!p.migreq());
        assert_eq!(p.pad_count(), 0);
        assert_eq!(p.tver(), 0);
        assert_eq!(p.pkey(), 0xFFFF);
        assert!(!p.fecn() && !p.becn());
        assert_eq!(p.dest_qp(), Qpn::new(0x11));
        assert!(p.ack_req());
        assert_eq!(p.resv7(), 0);
        assert_eq!(p.psn(), Psn::new(0x21));
        assert!(p.payload().is_empty());
    }

    #[test]
    fn deconstruct_flags_and_variant_bits() {
        // Vector 2's BTH (FECN+BECN) and vector 19's (MigReq, PadCnt 2).
        let v2 = [0x04, 0x30, 0xff, 0xff, 0xc0, 0, 0, 0x11, 0x80, 0, 0, 0];
        let p = Packet::new_checked(&v2[..]).unwrap();
        assert!(p.fecn() && p.becn());
        assert_eq!(p.pad_count(), 3);
        let v19 = [0x24, 0x60, 0xff, 0xff, 0, 0, 0, 0xd3, 0, 0xcf, 0x17, 0x10];
        let p = Packet::new_checked(&v19[..]).unwrap();
        assert!(p.migreq() && !p.solicited());
        assert_eq!(p.pad_count(), 2);
        assert_eq!(p.psn(), Psn::new(13_571_856));
    }

    #[test]
    fn construct() {
        let mut buf = [0xAAu8; 12];
        let mut p = Packet::new_unchecked(&mut buf[..]);
        p.set_opcode(Opcode::RcSendOnlyImm);
        p.set_flags(true, false, 0, 0);
        p.set_pkey(0xFFFF);
        p.set_ecn_bits(false, false);
        p.set_dest_qp(Qpn::new(0x11));
        p.set_ack_req(true);
        p.set_psn(Psn::new(0x21));
        assert_eq!(buf, BYTES);
    }

    #[test]
    fn parse() {
        let p = Packet::new_checked(&BYTES[..]).unwrap();
        assert_eq!(BthRepr::parse(&p), Ok(repr()));
    }

    #[test]
    fn emit() {
        let r = repr();
        let mut buf = [0u8; 12];
        assert_eq!(r.buffer_len(), 12);
        r.emit(&mut Packet::new_unchecked(&mut buf[..]));
        assert_eq!(buf, BYTES);
    }

    #[test]
    fn truncated() {
        for n in 0..12 {
            assert_eq!(Packet::new_checked(&BYTES[..n]), Err(Error::Truncated));
        }
    }

    #[test]
    fn unknown_opcode_is_rejected() {
        let mut b = BYTES;
        b[0] = 0x15;
        let p = Packet::new_checked(&b[..]).unwrap();
        assert_eq!(BthRepr::parse(&p), Err(Error::UnknownOpcode(0x15)));
    }

    #[test]
    fn pad_count_for_lengths() {
        assert_eq!(BthRepr::pad_count_for(0), 0);
        assert_eq!(BthRepr::pad_count_for(5), 3);
        assert_eq!(BthRepr::pad_count_for(6), 2);
        assert_eq!(BthRepr::pad_count_for(7), 1);
        assert_eq!(BthRepr::pad_count_for(256), 0);
    }

    #[test]
    fn display() {
        assert_eq!(
            repr().to_string(),
            "BTH RC SEND_ONLY_WITH_IMMEDIATE qp=0x11 psn=33 A SE"
        );
    }
}
