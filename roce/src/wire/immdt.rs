//! Immediate Data extended transport header (ROCEV2.md §1.6): 4 opaque
//! bytes, passed through unchanged into the receive completion.
//!
//! The value is the four wire bytes read big-endian; `wc.imm_data` keeps
//! them in network order.

use core::fmt;

use super::{read_u32, Error, Result};

mod field {
    use core::ops::Range;

    pub const IMM: Range<usize> = 0..4;
}

/// Length of the ImmDt header in bytes.
pub const HEADER_LEN: usize = field::IMM.end;

/// A read/write view of an ImmDt header.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Packet<T: AsRef<[u8]>> {
    buffer: T,
}

impl<T: AsRef<[u8]>> Packet<T> {
    /// Wrap a buffer without checking its length.
    pub const fn new_unchecked(buffer: T) -> Packet<T> {
        Packet { buffer }
    }

    /// Wrap a buffer and check that it holds a whole ImmDt.
    pub fn new_checked(buffer: T) -> Result<Packet<T>> {
        let packet = Self::new_unchecked(buffer);
        packet.check_len()?;
        Ok(packet)
    }

    /// [`Error::Truncated`] when the buffer is shorter than 4 bytes.
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

    /// The immediate value (wire bytes read big-endian).
    pub fn imm(&self) -> u32 {
        read_u32(&self.buffer.as_ref()[field::IMM])
    }
}

impl<T: AsRef<[u8]> + AsMut<[u8]>> Packet<T> {
    /// Set the immediate value (written big-endian).
    pub fn set_imm(&mut self, imm: u32) {
        self.buffer.as_mut()[field::IMM].copy_from_slice(&imm.to_be_bytes());
    }
}

/// The immediate data of a packet (`RoceHeaders::immdt`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct Repr {
    /// The value, as the four wire bytes read big-endian.
    pub imm: u32,
}

impl Repr {
    /// Parse an ImmDt header.
    pub fn parse<T: AsRef<[u8]> + ?Sized>(packet: &Packet<&T>) -> Result<Repr> {
        packet.check_len()?;
        Ok(Repr { imm: packet.imm() })
    }

    /// Bytes [`emit`](Self::emit) writes: 4.
    pub const fn buffer_len(&self) -> usize {
        HEADER_LEN
    }

    /// Write the header; the packet must have passed `check_len`.
    pub fn emit<T: AsRef<[u8]> + AsMut<[u8]>>(&self, packet: &mut Packet<T>) {
        packet.set_imm(self.imm);
    }
}

impl fmt::Display for Repr {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "ImmDt {:#010x}", self.imm)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    // Vector 11's ImmDt.
    static BYTES: [u8; 4] = [0xde, 0xad, 0xbe, 0xef];

    #[test]
    fn deconstruct() {
        assert_eq!(Packet::new_checked(&BYTES[..]).unwrap().imm(), 0xdead_beef);
    }

    #[test]
    fn construct() {
        let mut buf = [0u8; 4];
        Packet::new_unchecked(&mut buf[..]).set_imm(0xdead_beef);
        assert_eq!(buf, BYTES);
    }

    #[test]
    fn parse() {
        let p = Packet::new_checked(&BYTES[..]).unwrap();
        assert_eq!(Repr::parse(&p), Ok(Repr { imm: 0xdead_beef }));
    }

    #[test]
    fn emit() {
        let mut buf = [0u8; 4];
        let r = Repr { imm: 0xdead_beef };
        r.emit(&mut Packet::new_unchecked(&mut buf[..]));
        assert_eq!(buf, BYTES);
        assert_eq!(r.buffer_len(), 4);
    }

    #[test]
    fn truncated() {
        for n in 0..4 {
            assert_eq!(Packet::new_checked(&BYTES[..n]), Err(Error::Truncated));
        }
    }

    #[test]
    fn display() {
        assert_eq!(Repr { imm: 0xbeef }.to_string(), "ImmDt 0x0000beef");
    }
}
