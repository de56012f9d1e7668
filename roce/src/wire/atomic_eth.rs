//! Atomic Extended Transport Header (ROCEV2.md §1.6): 28 bytes.
//!
//! ```text
//! 0-7: VA | 8-11: R_Key | 12-19: swap or add data | 20-27: compare data
//! ```
//!
//! Carried by COMPARE_SWAP and FETCH_ADD. Alignment of the VA is the
//! responder's check (NAK invalid request), not the parser's.

use core::fmt;

use super::{read_u32, read_u64, AtomicEthRepr, Error, Result, Rkey};

mod field {
    use core::ops::Range;

    pub const VA: Range<usize> = 0..8;
    pub const RKEY: Range<usize> = 8..12;
    pub const SWAP_ADD: Range<usize> = 12..20;
    pub const COMPARE: Range<usize> = 20..28;
}

/// Length of the AtomicETH in bytes.
pub const HEADER_LEN: usize = field::COMPARE.end;

/// A read/write view of an AtomicETH.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Packet<T: AsRef<[u8]>> {
    buffer: T,
}

impl<T: AsRef<[u8]>> Packet<T> {
    /// Wrap a buffer without checking its length.
    pub const fn new_unchecked(buffer: T) -> Packet<T> {
        Packet { buffer }
    }

    /// Wrap a buffer and check that it holds a whole AtomicETH.
    pub fn new_checked(buffer: T) -> Result<Packet<T>> {
        let packet = Self::new_unchecked(buffer);
        packet.check_len()?;
        Ok(packet)
    }

    /// [`Error::Truncated`] when the buffer is shorter than 28 bytes.
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

    /// Remote virtual address.
    pub fn va(&self) -> u64 {
        read_u64(&self.buffer.as_ref()[field::VA])
    }

    /// Remote key.
    pub fn rkey(&self) -> Rkey {
        Rkey::new(read_u32(&self.buffer.as_ref()[field::RKEY]))
    }

    /// Swap (CMP_SWAP) or add (FETCH_ADD) operand.
    pub fn swap_add(&self) -> u64 {
        read_u64(&self.buffer.as_ref()[field::SWAP_ADD])
    }

    /// Compare operand.
    pub fn compare(&self) -> u64 {
        read_u64(&self.buffer.as_ref()[field::COMPARE])
    }
}

impl<T: AsRef<[u8]> + AsMut<[u8]>> Packet<T> {
    /// Set the remote virtual address.
    pub fn set_va(&mut self, va: u64) {
        self.buffer.as_mut()[field::VA].copy_from_slice(&va.to_be_bytes());
    }

    /// Set the remote key.
    pub fn set_rkey(&mut self, rkey: Rkey) {
        self.buffer.as_mut()[field::RKEY].copy_from_slice(&rkey.value().to_be_bytes());
    }

    /// Set the swap or add operand.
    pub fn set_swap_add(&mut self, v: u64) {
        self.buffer.as_mut()[field::SWAP_ADD].copy_from_slice(&v.to_be_bytes());
    }

    /// Set the compare operand.
    pub fn set_compare(&mut self, v: u64) {
        self.buffer.as_mut()[field::COMPARE].copy_from_slice(&v.to_be_bytes());
    }
}

impl AtomicEthRepr {
    /// Parse an AtomicETH.
    pub fn parse<T: AsRef<[u8]> + ?Sized>(packet: &Packet<&T>) -> Result<AtomicEthRepr> {
        packet.check_len()?;
        Ok(AtomicEthRepr {
            va: packet.va(),
            rkey: packet.rkey(),
            swap_add: packet.swap_add(),
            compare: packet.compare(),
        })
    }

    /// Bytes [`emit`](Self::emit) writes: 28.
    pub const fn buffer_len(&self) -> usize {
        HEADER_LEN
    }

    /// Write the AtomicETH; the packet must have passed `check_len`.
    pub fn emit<T: AsRef<[u8]> + AsMut<[u8]>>(&self, packet: &mut Packet<T>) {
        packet.set_va(self.va);
        packet.set_rkey(self.rkey);
        packet.set_swap_add(self.swap_add);
        packet.set_compare(self.compare);
    }
}

impl fmt::Display for AtomicEthRepr {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "AtomicETH va={:#x} rkey={} swap_add={:#x} compare={:#x}",
            self.va, self.rkey, self.swap_add, self.compare
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    // Vector 8's AtomicETH.
    static BYTES: [u8; 28] = [
        0, 0, 0, 0, 0, 0, 0x20, 0, 0, 0, 0x55, 0x55, 0x11, 0x11, 0x11, 0x11, 0x11, 0x11, 0x11,
        0x11, 0, 0, 0, 0, 0, 0, 0, 0,
    ];

    fn repr() -> AtomicEthRepr {
        AtomicEthRepr {
            va: 0x2000,
            rkey: Rkey::new(0x5555),
            swap_add: 0x1111_1111_1111_1111,
            compare: 0,
        }
    }

    #[test]
    fn deconstruct() {
        let p = Packet::new_checked(&BYTES[..]).unwrap();
        assert_eq!(p.va(), 0x2000);
        assert_eq!(p.rkey(), Rkey::new(0x5555));
        assert_eq!(p.swap_add(), 0x1111_1111_1111_1111);
        assert_eq!(p.compare(), 0);
    }

    #[test]
    fn construct() {
        let mut buf = [0xA5u8; 28];
        let mut p = Packet::new_unchecked(&mut buf[..]);
        p.set_va(0x2000);
        p.set_rkey(Rkey::new(0x5555));
        p.set_swap_add(0x1111_1111_1111_1111);
        p.set_compare(0);
        assert_eq!(buf, BYTES);
    }

    #[test]
    fn parse() {
        let p = Packet::new_checked(&BYTES[..]).unwrap();
        assert_eq!(AtomicEthRepr::parse(&p), Ok(repr()));
    }

    #[test]
    fn emit() {
        let mut buf = [0u8; 28];
        repr().emit(&mut Packet::new_unchecked(&mut buf[..]));
        assert_eq!(buf, BYTES);
        assert_eq!(repr().buffer_len(), 28);
    }

    #[test]
    fn truncated() {
        for n in 0..28 {
            assert_eq!(Packet::new_checked(&BYTES[..n]), Err(Error::Truncated));
        }
    }

    #[test]
    fn display() {
        assert_eq!(
            repr().to_string(),
            "AtomicETH va=0x2000 rkey=0x5555 swap_add=0x1111111111111111 compare=0x0"
        );
    }
}
