//! Atomic Acknowledge Extended Transport Header (ROCEV2.md §1.6): 8 bytes,
//! the remote value before the atomic, carried after the AETH of an
//! ATOMIC_ACKNOWLEDGE.

use core::fmt;

use super::{read_u64, AtomicAckEthRepr, Error, Result};

mod field {
    use core::ops::Range;

    pub const ORIG: Range<usize> = 0..8;
}

/// Length of the AtomicAckETH in bytes.
pub const HEADER_LEN: usize = field::ORIG.end;

/// A read/write view of an AtomicAckETH.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Packet<T: AsRef<[u8]>> {
    buffer: T,
}

impl<T: AsRef<[u8]>> Packet<T> {
    /// Wrap a buffer without checking its length.
    pub const fn new_unchecked(buffer: T) -> Packet<T> {
        Packet { buffer }
    }

    /// Wrap a buffer and check that it holds a whole AtomicAckETH.
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

    /// The original remote data.
    pub fn orig(&self) -> u64 {
        read_u64(&self.buffer.as_ref()[field::ORIG])
    }
}

impl<T: AsRef<[u8]> + AsMut<[u8]>> Packet<T> {
    /// Set the original remote data.
    pub fn set_orig(&mut self, v: u64) {
        self.buffer.as_mut()[field::ORIG].copy_from_slice(&v.to_be_bytes());
    }
}

impl AtomicAckEthRepr {
    /// Parse an AtomicAckETH.
    pub fn parse<T: AsRef<[u8]> + ?Sized>(packet: &Packet<&T>) -> Result<AtomicAckEthRepr> {
        packet.check_len()?;
        Ok(AtomicAckEthRepr {
            orig: packet.orig(),
        })
    }

    /// Bytes [`emit`](Self::emit) writes: 8.
    pub const fn buffer_len(&self) -> usize {
        HEADER_LEN
    }

    /// Write the AtomicAckETH; the packet must have passed `check_len`.
    pub fn emit<T: AsRef<[u8]> + AsMut<[u8]>>(&self, packet: &mut Packet<T>) {
        packet.set_orig(self.orig);
    }
}

impl fmt::Display for AtomicAckEthRepr {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "AtomicAckETH orig={:#x}", self.orig)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    static BYTES: [u8; 8] = [0x01, 0x23, 0x45, 0x67, 0x89, 0xab, 0xcd, 0xef];

    fn repr() -> AtomicAckEthRepr {
        AtomicAckEthRepr {
            orig: 0x0123_4567_89ab_cdef,
        }
    }

    #[test]
    fn deconstruct() {
        let p = Packet::new_checked(&BYTES[..]).unwrap();
        assert_eq!(p.orig(), 0x0123_4567_89ab_cdef);
    }

    #[test]
    fn construct() {
        let mut buf = [0u8; 8];
        Packet::new_unchecked(&mut buf[..]).set_orig(0x0123_4567_89ab_cdef);
        assert_eq!(buf, BYTES);
    }

    #[test]
    fn parse() {
        let p = Packet::new_checked(&BYTES[..]).unwrap();
        assert_eq!(AtomicAckEthRepr::parse(&p), Ok(repr()));
    }

    #[test]
    fn emit() {
        let mut buf = [0u8; 8];
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
        assert_eq!(repr().to_string(), "AtomicAckETH orig=0x123456789abcdef");
    }
}
