//! RDMA Extended Transport Header (ROCEV2.md §1.6): 16 bytes.
//!
//! ```text
//! 0-7: virtual address | 8-11: R_Key | 12-15: DMA length
//! ```
//!
//! Carried by RDMA WRITE FIRST/ONLY (with or without immediate) and RDMA
//! READ REQUEST. Every value is accepted on parse; the responder checks the
//! length limit (2^31) and the key.

use core::fmt;

use super::{Error, Result, RethRepr, Rkey};

mod field {
    use core::ops::Range;

    pub const VA: Range<usize> = 0..8;
    pub const RKEY: Range<usize> = 8..12;
    pub const DMA_LEN: Range<usize> = 12..16;
}

/// Length of the RETH in bytes.
pub const HEADER_LEN: usize = field::DMA_LEN.end;

/// A read/write view of a RETH.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Packet<T: AsRef<[u8]>> {
    buffer: T,
}

impl<T: AsRef<[u8]>> Packet<T> {
    /// Wrap a buffer without checking its length.
    pub const fn new_unchecked(buffer: T) -> Packet<T> {
        Packet { buffer }
    }

    /// Wrap a buffer and check that it holds a whole RETH.
    pub fn new_checked(buffer: T) -> Result<Packet<T>> {
        let packet = Self::new_unchecked(buffer);
        packet.check_len()?;
        Ok(packet)
    }

    /// [`Error::Truncated`] when the buffer is shorter than 16 bytes.
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
        super::read_u64(&self.buffer.as_ref()[field::VA])
    }

    /// Remote key.
    pub fn rkey(&self) -> Rkey {
        Rkey::new(super::read_u32(&self.buffer.as_ref()[field::RKEY]))
    }

    /// DMA length in bytes.
    pub fn dma_len(&self) -> u32 {
        super::read_u32(&self.buffer.as_ref()[field::DMA_LEN])
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

    /// Set the DMA length.
    pub fn set_dma_len(&mut self, len: u32) {
        self.buffer.as_mut()[field::DMA_LEN].copy_from_slice(&len.to_be_bytes());
    }
}

impl RethRepr {
    /// Parse a RETH.
    pub fn parse<T: AsRef<[u8]> + ?Sized>(packet: &Packet<&T>) -> Result<RethRepr> {
        packet.check_len()?;
        Ok(RethRepr {
            va: packet.va(),
            rkey: packet.rkey(),
            dma_len: packet.dma_len(),
        })
    }

    /// Bytes [`emit`](Self::emit) writes: 16.
    pub const fn buffer_len(&self) -> usize {
        HEADER_LEN
    }

    /// Write the RETH; the packet must have passed `check_len`.
    pub fn emit<T: AsRef<[u8]> + AsMut<[u8]>>(&self, packet: &mut Packet<T>) {
        packet.set_va(self.va);
        packet.set_rkey(self.rkey);
        packet.set_dma_len(self.dma_len);
    }
}

impl fmt::Display for RethRepr {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "RETH va={:#x} rkey={} len={}",
            self.va, self.rkey, self.dma_len
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    // Vector 3's RETH.
    static BYTES: [u8; 16] = [
        0x00, 0x00, 0x7f, 0x00, 0x00, 0x00, 0x10, 0x00, 0x00, 0x00, 0x12, 0x34, 0x00, 0x00, 0x00,
        0x10,
    ];

    fn repr() -> RethRepr {
        RethRepr {
            va: 0x0000_7f00_0000_1000,
            rkey: Rkey::new(0x1234),
            dma_len: 16,
        }
    }

    #[test]
    fn deconstruct() {
        let p = Packet::new_checked(&BYTES[..]).unwrap();
        assert_eq!(p.va(), 0x0000_7f00_0000_1000);
        assert_eq!(p.rkey(), Rkey::new(0x1234));
        assert_eq!(p.dma_len(), 16);
    }

    #[test]
    fn construct() {
        let mut buf = [0xEEu8; 16];
        let mut p = Packet::new_unchecked(&mut buf[..]);
        p.set_va(0x0000_7f00_0000_1000);
        p.set_rkey(Rkey::new(0x1234));
        p.set_dma_len(16);
        assert_eq!(buf, BYTES);
    }

    #[test]
    fn parse() {
        let p = Packet::new_checked(&BYTES[..]).unwrap();
        assert_eq!(RethRepr::parse(&p), Ok(repr()));
    }

    #[test]
    fn emit() {
        let mut buf = [0u8; 16];
        repr().emit(&mut Packet::new_unchecked(&mut buf[..]));
        assert_eq!(buf, BYTES);
        assert_eq!(repr().buffer_len(), 16);
    }

    #[test]
    fn truncated() {
        for n in 0..16 {
            assert_eq!(Packet::new_checked(&BYTES[..n]), Err(Error::Truncated));
        }
    }

    #[test]
    fn display() {
        assert_eq!(
            repr().to_string(),
            "RETH va=0x7f0000001000 rkey=0x1234 len=16"
        );
    }
}
