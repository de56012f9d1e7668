//! Invalidate Extended Transport Header (ROCEV2.md §1.6): 4 bytes, the
//! R_Key a SEND_WITH_INVALIDATE invalidates at the responder.

use core::fmt;

use super::{read_u32, Error, Result, Rkey};

mod field {
    use core::ops::Range;

    pub const RKEY: Range<usize> = 0..4;
}

/// Length of the IETH in bytes.
pub const HEADER_LEN: usize = field::RKEY.end;

/// A read/write view of an IETH.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Packet<T: AsRef<[u8]>> {
    buffer: T,
}

impl<T: AsRef<[u8]>> Packet<T> {
    /// Wrap a buffer without checking its length.
    pub const fn new_unchecked(buffer: T) -> Packet<T> {
        Packet { buffer }
    }

    /// Wrap a buffer and check that it holds a whole IETH.
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

    /// The R_Key to invalidate.
    pub fn rkey(&self) -> Rkey {
        Rkey::new(read_u32(&self.buffer.as_ref()[field::RKEY]))
    }
}

impl<T: AsRef<[u8]> + AsMut<[u8]>> Packet<T> {
    /// Set the R_Key to invalidate.
    pub fn set_rkey(&mut self, rkey: Rkey) {
        self.buffer.as_mut()[field::RKEY].copy_from_slice(&rkey.value().to_be_bytes());
    }
}

/// The IETH of a packet (`RoceHeaders::ieth`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct Repr {
    /// The R_Key to invalidate.
    pub rkey: Rkey,
}

impl Repr {
    /// Parse an IETH.
    pub fn parse<T: AsRef<[u8]> + ?Sized>(packet: &Packet<&T>) -> Result<Repr> {
        packet.check_len()?;
        Ok(Repr {
            rkey: packet.rkey(),
        })
    }

    /// Bytes [`emit`](Self::emit) writes: 4.
    pub const fn buffer_len(&self) -> usize {
        HEADER_LEN
    }

    /// Write the IETH; the packet must have passed `check_len`.
    pub fn emit<T: AsRef<[u8]> + AsMut<[u8]>>(&self, packet: &mut Packet<T>) {
        packet.set_rkey(self.rkey);
    }
}

impl fmt::Display for Repr {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "IETH rkey={}", self.rkey)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    // Vector 12's IETH.
    static BYTES: [u8; 4] = [0x00, 0x00, 0x0a, 0x0b];

    fn repr() -> Repr {
        Repr {
            rkey: Rkey::new(0x0a0b),
        }
    }

    #[test]
    fn deconstruct() {
        let p = Packet::new_checked(&BYTES[..]).unwrap();
        assert_eq!(p.rkey(), Rkey::new(0x0a0b));
    }

    #[test]
    fn construct() {
        let mut buf = [0xFFu8; 4];
        Packet::new_unchecked(&mut buf[..]).set_rkey(Rkey::new(0x0a0b));
        assert_eq!(buf, BYTES);
    }

    #[test]
    fn parse() {
        let p = Packet::new_checked(&BYTES[..]).unwrap();
        assert_eq!(Repr::parse(&p), Ok(repr()));
    }

    #[test]
    fn emit() {
        let mut buf = [0u8; 4];
        repr().emit(&mut Packet::new_unchecked(&mut buf[..]));
        assert_eq!(buf, BYTES);
        assert_eq!(repr().buffer_len(), 4);
    }

    #[test]
    fn truncated() {
        for n in 0..4 {
            assert_eq!(Packet::new_checked(&BYTES[..n]), Err(Error::Truncated));
        }
    }

    #[test]
    fn display() {
        assert_eq!(repr().to_string(), "IETH rkey=0xa0b");
    }
}
