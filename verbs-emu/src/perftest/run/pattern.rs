//! The `--verify` data pattern: the byte every offset of every message
//! must hold, and how a region is filled with it and checked against it.
//!
//! Contract: the pattern depends on the message number and the offset
//! only, so both sides compute it alone; a mismatch names the message and
//! the byte. Region bytes are copied in and out ([`MemoryRegion::write`],
//! [`MemoryRegion::read`]), never borrowed while the device writes them.

use super::error::Result;
use crate::verbs::MemoryRegion;

/// The byte at `offset` of message `msg` in `--verify` mode: a mix of both,
/// so that a misplaced, stale or shifted byte is caught.
pub fn pattern_byte(msg: u64, offset: usize) -> u8 {
    let word = pattern_word(msg, (offset / 8) as u64);
    (word >> ((offset % 8) * 8)) as u8
}

pub(super) fn pattern_word(msg: u64, word: u64) -> u64 {
    let mut x = msg
        .wrapping_mul(0x9E37_79B9_7F4A_7C15)
        .wrapping_add(word.wrapping_mul(0xC2B2_AE3D_27D4_EB4F))
        .wrapping_add(0x1656_67B1_9E37_79F9);
    x ^= x >> 29;
    x = x.wrapping_mul(0xBF58_476D_1CE4_E5B9);
    x ^= x >> 32;
    x
}

pub(super) fn fill_pattern(buf: &mut [u8], msg: u64) {
    let mut chunks = buf.chunks_exact_mut(8);
    let mut w = 0u64;
    for c in &mut chunks {
        c.copy_from_slice(&pattern_word(msg, w).to_le_bytes());
        w += 1;
    }
    let rem = chunks.into_remainder();
    let last = pattern_word(msg, w).to_le_bytes();
    let n = rem.len();
    rem.copy_from_slice(&last[..n]);
}

/// Compare `buf` with message `msg`'s pattern; on mismatch say where.
/// Write message `msg`'s pattern into `len` bytes of `mr` at `off`.
pub(super) fn write_pattern(mr: &MemoryRegion, off: usize, len: usize, msg: u64) -> Result<()> {
    let mut buf = vec![0u8; len];
    fill_pattern(&mut buf, msg);
    Ok(mr.write(off, &buf)?)
}

/// A copy of `len` bytes of `mr` at `off` (verification reads a snapshot,
/// never the live buffer the backend writes).
pub(super) fn read_bytes(mr: &MemoryRegion, off: usize, len: usize) -> Result<Vec<u8>> {
    let mut buf = vec![0u8; len];
    mr.read(off, &mut buf)?;
    Ok(buf)
}

pub(super) fn check_pattern(buf: &[u8], msg: u64) -> std::result::Result<(), String> {
    let mut chunks = buf.chunks_exact(8);
    let mut w = 0u64;
    for c in &mut chunks {
        let want = pattern_word(msg, w).to_le_bytes();
        if c != want {
            let i = (0..8).find(|&i| c[i] != want[i]).unwrap_or(0);
            return Err(format!(
                "message {msg} byte {}: expected {:#04x}, got {:#04x}",
                w as usize * 8 + i,
                want[i],
                c[i]
            ));
        }
        w += 1;
    }
    let rem = chunks.remainder();
    let want = pattern_word(msg, w).to_le_bytes();
    for (i, &b) in rem.iter().enumerate() {
        if b != want[i] {
            return Err(format!(
                "message {msg} byte {}: expected {:#04x}, got {b:#04x}",
                w as usize * 8 + i,
                want[i]
            ));
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn pattern_detects_position_and_message() {
        let mut b = vec![0u8; 37];
        fill_pattern(&mut b, 5);
        assert!(check_pattern(&b, 5).is_ok());
        assert!(check_pattern(&b, 6).is_err());
        for (i, &v) in b.iter().enumerate() {
            assert_eq!(v, pattern_byte(5, i));
        }
        b[33] ^= 1;
        let e = check_pattern(&b, 5).unwrap_err();
        assert!(e.contains("byte 33"), "{e}");
    }
}
