//! Datagram Extended Transport Header (ROCEV2.md §1.6): 8 bytes, carried
//! by UD sends.
//!
//! ```text
//! 0-3: Q_Key | 4: reserved | 5-7: source QP
//! ```
//!
//! The reserved byte is ignored on parse and written as zero.

use core::fmt;

use super::{read_u24, read_u32, write_u24, DethRepr, Error, Qpn, Result};

mod field {
    use core::ops::Range;

    pub const QKEY: Range<usize> = 0..4;
    pub const RESERVED: usize = 4;
    pub const SRC_QP: Range<usize> = 5..8;
}

/// Length of the DETH in bytes.
pub const HEADER_LEN: usize = field::SRC_QP.end;

/// The Q_Key of the GSI QP (QP1).
pub const GSI_QKEY: u32 = 0x8001_0000;

/// A read/write view of a DETH.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Packet<T: AsRef<[u8]>> {
    buffer: T,
}

impl<T: AsRef<[u8]>> Packet<T> {
    /// Wrap a buffer without checking its length.
    pub const fn new_unchecked(buffer: T) -> Packet<T> {
        Packet { buffer }
    }

    /// Wrap a buffer and check that it holds a whole DETH.
    pub fn new_checked(buffer: T) -> Result<Packet<T>> {
        let packet = Self::new_unchecked(buffer);
        packet.check_len()?;
        Ok(packet)
    }

    /// [`Error::Truncated`] when the buffer is shorter than 8 bytes.
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

    /// Queue key.
    pub fn qkey(&self) -> u32 {
        read_u32(&self.buffer.as_ref()[field::QKEY])
    }

    /// The reserved byte.
    pub fn reserved(&self) -> u8 {
        self.buffer.as_ref()[field::RESERVED]
    }

    /// Source QP.
    pub fn src_qp(&self) -> Qpn {
        Qpn::new(read_u24(&self.buffer.as_ref()[field::SRC_QP]))
    }
}

impl<T: AsRef<[u8]> + AsMut<[u8]>> Packet<T> {
    /// Set the queue key.
    pub fn set_qkey(&mut self, qkey: u32) {
        self.buffer.as_mut()[field::QKEY].copy_from_slice(&qkey.to_be_bytes());
    }

    /// Set the reserved byte.
    pub fn set_reserved(&mut self, v: u8) {
        self.buffer.as_mut()[field::RESERVED] = v;
    }

    /// Set the source QP.
    pub fn set_src_qp(&mut self, qpn: Qpn) {
        write_u24(&mut self.buffer.as_mut()[field::SRC_QP], qpn.value());
    }
}

impl DethRepr {
    /// Parse a DETH.
    pub fn parse<T: AsRef<[u8]> + ?Sized>(packet: &Packet<&T>) -> Result<DethRepr> {
        packet.check_len()?;
        Ok(DethRepr {
            qkey: packet.qkey(),
            src_qp: packet.src_qp(),
        })
    }

    /// Bytes [`emit`](Self::emit) writes: 8.
    pub const fn buffer_len(&self) -> usize {
        HEADER_LEN
    }

    /// Write the DETH; the packet must have passed `check_len`.
    pub fn emit<T: AsRef<[u8]> + AsMut<[u8]>>(&self, packet: &mut Packet<T>) {
        packet.set_qkey(self.qkey);
        packet.set_reserved(0);
        packet.set_src_qp(self.src_qp);
    }
}

impl fmt::Display for DethRepr {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "DETH qkey={:#010x} src_qp={}", self.qkey, self.src_qp)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    // Vector 13's DETH.
    static BYTES: [u8; 8] = [0x11, 0x11, 0x11, 0x11, 0x00, 0x00, 0x00, 0x33];

    fn repr() -> DethRepr {
        DethRepr {
            qkey: 0x1111_1111,
            src_qp: Qpn::new(0x33),
        }
    }

    #[test]
    fn deconstruct() {
        let p = Packet::new_checked(&BYTES[..]).unwrap();
        assert_eq!(p.qkey(), 0x1111_1111);
        assert_eq!(p.reserved(), 0);
        assert_eq!(p.src_qp(), Qpn::new(0x33));
    }

    #[test]
    fn construct() {
        let mut buf = [0xFFu8; 8];
        let mut p = Packet::new_unchecked(&mut buf[..]);
        p.set_qkey(0x1111_1111);
        p.set_reserved(0);
        p.set_src_qp(Qpn::new(0x33));
        assert_eq!(buf, BYTES);
    }

    #[test]
    fn parse() {
        let p = Packet::new_checked(&BYTES[..]).unwrap();
        assert_eq!(DethRepr::parse(&p), Ok(repr()));
    }

    #[test]
    fn emit() {
        let mut buf = [0xFFu8; 8];
        repr().emit(&mut Packet::new_unchecked(&mut buf[..]));
        assert_eq!(buf, BYTES);
        assert_eq!(repr().buffer_len(), 8);
    }

    #[test]
    fn truncated() {
        for n in 0..8 {
            assert_eq!(Packet::new_checked(&BYTES[..n]), Err(Error::Truncated));
        }
    }

    #[test]
    fn display() {
        assert_eq!(repr().to_string(), "DETH qkey=0x11111111 src_qp=0x33");
    }
}
