//! RoCEv2 Congestion Notification Packet (ROCEV2.md §2.5, §6.2): a BTH with
//! opcode 0x81 and BECN set, then 16 reserved zero bytes, then the ICRC.
//!
//! ```text
//! 0-11: BTH (SE=M=PadCnt=TVer=0, P_Key, BECN=1, DestQP, A=0, PSN=0)
//! 12-27: reserved, zero
//! ```
//!
//! The view covers the 28 bytes from the BTH. Parsing accepts any reserved
//! bytes and flag values (a receiver only needs DestQP); emitting writes the
//! layout above.

use core::fmt;

use super::{
    bth, headers::CNP_RESERVED_LEN, BthRepr, Error, Opcode, Psn, Qpn, Result, RoceHeaders,
};

mod field {
    use core::ops::Range;

    pub const RESERVED: Range<usize> = 12..28;
}

/// Length of a CNP from the BTH to the ICRC (exclusive).
pub const LEN: usize = field::RESERVED.end;

/// DSCP NVIDIA NICs send CNPs with (seen in captures).
pub const NVIDIA_CNP_DSCP: u8 = 48;

/// A read/write view of a CNP (BTH and reserved bytes).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Packet<T: AsRef<[u8]>> {
    buffer: T,
}

impl<T: AsRef<[u8]>> Packet<T> {
    /// Wrap a buffer without checking its length.
    pub const fn new_unchecked(buffer: T) -> Packet<T> {
        Packet { buffer }
    }

    /// Wrap a buffer and check that it holds a whole CNP body.
    pub fn new_checked(buffer: T) -> Result<Packet<T>> {
        let packet = Self::new_unchecked(buffer);
        packet.check_len()?;
        Ok(packet)
    }

    /// [`Error::Truncated`] when the buffer is shorter than 28 bytes.
    pub fn check_len(&self) -> Result<()> {
        if self.buffer.as_ref().len() < LEN {
            Err(Error::Truncated)
        } else {
            Ok(())
        }
    }

    /// The wrapped buffer.
    pub fn into_inner(self) -> T {
        self.buffer
    }

    /// The BTH view.
    pub fn bth(&self) -> bth::Packet<&[u8]> {
        bth::Packet::new_unchecked(self.buffer.as_ref())
    }

    /// True when the opcode byte is 0x81.
    pub fn is_cnp(&self) -> bool {
        self.bth().opcode_raw() == Opcode::Cnp.value()
    }

    /// The QP to throttle (at the receiver of the CNP).
    pub fn dest_qp(&self) -> Qpn {
        self.bth().dest_qp()
    }

    /// The BECN bit.
    pub fn becn(&self) -> bool {
        self.bth().becn()
    }

    /// The 16 reserved bytes.
    pub fn reserved(&self) -> &[u8] {
        &self.buffer.as_ref()[field::RESERVED]
    }
}

impl<T: AsRef<[u8]> + AsMut<[u8]>> Packet<T> {
    /// The BTH view, writable.
    pub fn bth_mut(&mut self) -> bth::Packet<&mut [u8]> {
        bth::Packet::new_unchecked(self.buffer.as_mut())
    }

    /// Zero the reserved bytes.
    pub fn clear_reserved(&mut self) {
        self.buffer.as_mut()[field::RESERVED].fill(0);
    }
}

/// A CNP, decoded.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct Repr {
    /// The QP the CNP is for: the sender of the marked packet.
    pub dest_qp: Qpn,
    /// Partition key (0xFFFF).
    pub pkey: u16,
}

impl Repr {
    /// A CNP for `dest_qp` with the default P_Key.
    pub const fn new(dest_qp: Qpn) -> Repr {
        Repr {
            dest_qp,
            pkey: bth::DEFAULT_PKEY,
        }
    }

    /// Parse a CNP; [`Error::Malformed`] if the opcode is not 0x81.
    pub fn parse<T: AsRef<[u8]> + ?Sized>(packet: &Packet<&T>) -> Result<Repr> {
        packet.check_len()?;
        if !packet.is_cnp() {
            return Err(Error::Malformed);
        }
        Ok(Repr {
            dest_qp: packet.dest_qp(),
            pkey: packet.bth().pkey(),
        })
    }

    /// Bytes [`emit`](Self::emit) writes: 28.
    pub const fn buffer_len(&self) -> usize {
        LEN
    }

    /// Write the CNP body; the packet must have passed `check_len`.
    pub fn emit<T: AsRef<[u8]> + AsMut<[u8]>>(&self, packet: &mut Packet<T>) {
        self.bth().emit(&mut packet.bth_mut());
        packet.clear_reserved();
    }

    /// The BTH of this CNP: BECN set, PSN 0, everything else clear.
    pub const fn bth(&self) -> BthRepr {
        let mut bth = BthRepr::new(Opcode::Cnp, self.dest_qp, Psn::new(0));
        bth.becn = true;
        bth.pkey = self.pkey;
        bth
    }

    /// The transport headers of this CNP.
    pub const fn headers(&self) -> RoceHeaders {
        RoceHeaders::new(self.bth())
    }

    /// The CNP in `headers`, if its opcode is 0x81.
    pub fn from_headers(headers: &RoceHeaders) -> Option<Repr> {
        (headers.bth.opcode == Opcode::Cnp).then_some(Repr {
            dest_qp: headers.bth.dest_qp,
            pkey: headers.bth.pkey,
        })
    }
}

impl fmt::Display for Repr {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "CNP qp={}", self.dest_qp)
    }
}

const _: () = assert!(LEN == bth::HEADER_LEN + CNP_RESERVED_LEN);

#[cfg(test)]
mod tests {
    use super::*;

    // Vector 18 (ConnectX-4 Lx capture), BTH and reserved bytes.
    static BYTES: [u8; 28] = [
        0x81, 0x00, 0xff, 0xff, 0x40, 0x00, 0x01, 0x18, 0x00, 0x00, 0x00, 0x00, 0, 0, 0, 0, 0, 0,
        0, 0, 0, 0, 0, 0, 0, 0, 0, 0,
    ];

    #[test]
    fn deconstruct() {
        let p = Packet::new_checked(&BYTES[..]).unwrap();
        assert!(p.is_cnp());
        assert!(p.becn());
        assert_eq!(p.dest_qp(), Qpn::new(0x118));
        assert_eq!(p.reserved(), &[0u8; 16]);
    }

    #[test]
    fn construct() {
        let mut buf = [0xFFu8; 28];
        let mut p = Packet::new_unchecked(&mut buf[..]);
        Repr::new(Qpn::new(0x118)).bth().emit(&mut p.bth_mut());
        p.clear_reserved();
        assert_eq!(buf, BYTES);
    }

    #[test]
    fn parse() {
        let p = Packet::new_checked(&BYTES[..]).unwrap();
        assert_eq!(Repr::parse(&p), Ok(Repr::new(Qpn::new(0x118))));
        let mut other = BYTES;
        other[0] = 0x04;
        let p = Packet::new_checked(&other[..]).unwrap();
        assert_eq!(Repr::parse(&p), Err(Error::Malformed));
    }

    #[test]
    fn emit() {
        let mut buf = [0xEEu8; 28];
        let r = Repr::new(Qpn::new(0x118));
        r.emit(&mut Packet::new_unchecked(&mut buf[..]));
        assert_eq!(buf, BYTES);
        assert_eq!(r.buffer_len(), 28);
        assert_eq!(Repr::from_headers(&r.headers()), Some(r));
        let mut h = r.headers();
        assert_eq!(h.emit(&mut buf), Ok(28));
        assert_eq!(buf, BYTES);
        h.bth.opcode = Opcode::RcSendMiddle;
        assert_eq!(Repr::from_headers(&h), None);
    }

    #[test]
    fn truncated() {
        for n in 0..28 {
            assert_eq!(Packet::new_checked(&BYTES[..n]), Err(Error::Truncated));
        }
    }

    #[test]
    fn display() {
        assert_eq!(Repr::new(Qpn::new(0x118)).to_string(), "CNP qp=0x118");
    }
}
