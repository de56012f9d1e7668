//! ACK Extended Transport Header (ROCEV2.md §1.6, §5.6, §5.7): 4 bytes.
//!
//! ```text
//! 0: syndrome (bit 7 reserved, bits 6..5 type, bits 4..0 value) | 1-3: MSN
//! ```
//!
//! Syndrome types: `00` ACK with a credit code, `01` RNR NAK with a 5-bit
//! timer code, `11` NAK with an error code, `10` reserved. The reserved bit
//! 7 is ignored on parse (as rxe does) and written as zero. Also here: the
//! ACK credit table and the RNR timer table, in [`Duration`].

use core::fmt;

use super::{read_u24, write_u24, AethRepr, AethSyndrome, Error, Msn, NakCode, Result};
use crate::time::Duration;

mod field {
    use core::ops::Range;

    pub const SYNDROME: usize = 0;
    pub const MSN: Range<usize> = 1..4;
}

/// Length of the AETH in bytes.
pub const HEADER_LEN: usize = field::MSN.end;

/// The credit code that means "no end-to-end credit information" (rxe
/// always sends it).
pub const CREDITS_INVALID: u8 = 31;

/// Credits for ACK credit codes 0..=30 (code 31 is "invalid").
const CREDIT_TABLE: [u32; 31] = [
    0, 1, 2, 3, 4, 6, 8, 12, 16, 24, 32, 48, 64, 96, 128, 192, 256, 384, 512, 768, 1024, 1536,
    2048, 3072, 4096, 6144, 8192, 12288, 16384, 24576, 32768,
];

/// RNR timer codes 0..=31 in microseconds (code 0 is the longest, 655.36 ms).
const RNR_TIMER_US: [u64; 32] = [
    655_360, 10, 20, 30, 40, 60, 80, 120, 160, 240, 320, 480, 640, 960, 1_280, 1_920, 2_560, 3_840,
    5_120, 7_680, 10_240, 15_360, 20_480, 30_720, 40_960, 61_440, 81_920, 122_880, 163_840,
    245_760, 327_680, 491_520,
];

/// The number of credits an ACK credit code grants; `None` for code 31
/// (no credit information) and for codes above 31.
pub const fn credit_count(code: u8) -> Option<u32> {
    if (code as usize) < CREDIT_TABLE.len() {
        Some(CREDIT_TABLE[code as usize])
    } else {
        None
    }
}

/// The largest credit code whose count does not exceed `credits` (so the
/// advertised credits never exceed what is available). Saturates at code 30.
pub const fn credit_code_for(credits: u32) -> u8 {
    let mut code = CREDIT_TABLE.len() - 1;
    while code > 0 && CREDIT_TABLE[code] > credits {
        code -= 1;
    }
    code as u8
}

/// How long an RNR timer code asks the requester to wait (the low 5 bits of
/// `code` are used).
pub const fn rnr_timer_duration(code: u8) -> Duration {
    Duration::from_us(RNR_TIMER_US[(code & 0x1F) as usize])
}

/// The code of the shortest RNR timer that is at least `d`; durations
/// longer than 655.36 ms give code 0 (the longest).
pub const fn rnr_timer_code_for(d: Duration) -> u8 {
    let mut best: u8 = 0;
    let mut best_us = RNR_TIMER_US[0];
    let mut code = 1;
    while code < 32 {
        let us = RNR_TIMER_US[code];
        if Duration::from_us(us).as_ps() >= d.as_ps() && us < best_us {
            best = code as u8;
            best_us = us;
        }
        code += 1;
    }
    best
}

impl NakCode {
    /// From the 5-bit error code of a NAK syndrome.
    pub const fn from_code(code: u8) -> NakCode {
        match code & 0x1F {
            0 => NakCode::PsnSequenceError,
            1 => NakCode::InvalidRequest,
            2 => NakCode::RemoteAccessError,
            3 => NakCode::RemoteOperationalError,
            4 => NakCode::InvalidRdRequest,
            c => NakCode::Reserved(c),
        }
    }

    /// The 5-bit error code.
    pub const fn code(self) -> u8 {
        match self {
            NakCode::PsnSequenceError => 0,
            NakCode::InvalidRequest => 1,
            NakCode::RemoteAccessError => 2,
            NakCode::RemoteOperationalError => 3,
            NakCode::InvalidRdRequest => 4,
            NakCode::Reserved(c) => c & 0x1F,
        }
    }
}

impl fmt::Display for NakCode {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            NakCode::PsnSequenceError => f.write_str("PSN sequence error"),
            NakCode::InvalidRequest => f.write_str("invalid request"),
            NakCode::RemoteAccessError => f.write_str("remote access error"),
            NakCode::RemoteOperationalError => f.write_str("remote operational error"),
            NakCode::InvalidRdRequest => f.write_str("invalid RD request"),
            NakCode::Reserved(c) => write!(f, "reserved code {c}"),
        }
    }
}

impl AethSyndrome {
    /// An ACK with no credit information (syndrome 0x1F, what rxe sends).
    pub const ACK: AethSyndrome = AethSyndrome::Ack {
        credits: CREDITS_INVALID,
    };

    /// Decode a syndrome byte; bit 7 (reserved) is ignored.
    pub const fn from_byte(b: u8) -> AethSyndrome {
        let value = b & 0x1F;
        match (b >> 5) & 3 {
            0 => AethSyndrome::Ack { credits: value },
            1 => AethSyndrome::RnrNak { timer: value },
            3 => AethSyndrome::Nak(NakCode::from_code(value)),
            _ => AethSyndrome::Reserved(value),
        }
    }

    /// Encode the syndrome byte (values masked to 5 bits, bit 7 zero).
    pub const fn to_byte(self) -> u8 {
        match self {
            AethSyndrome::Ack { credits } => credits & 0x1F,
            AethSyndrome::RnrNak { timer } => 0x20 | (timer & 0x1F),
            AethSyndrome::Reserved(v) => 0x40 | (v & 0x1F),
            AethSyndrome::Nak(code) => 0x60 | code.code(),
        }
    }

    /// True for an ACK (type 00).
    pub const fn is_ack(self) -> bool {
        matches!(self, AethSyndrome::Ack { .. })
    }
}

impl fmt::Display for AethSyndrome {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match *self {
            AethSyndrome::Ack { credits } => match credit_count(credits) {
                Some(n) => write!(f, "ACK credits={n}"),
                None => f.write_str("ACK"),
            },
            AethSyndrome::RnrNak { timer } => {
                write!(f, "RNR NAK timer={timer} ({})", rnr_timer_duration(timer))
            }
            AethSyndrome::Nak(code) => write!(f, "NAK {code}"),
            AethSyndrome::Reserved(v) => write!(f, "reserved syndrome {:#04x}", 0x40 | v),
        }
    }
}

/// A read/write view of an AETH.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Packet<T: AsRef<[u8]>> {
    buffer: T,
}

impl<T: AsRef<[u8]>> Packet<T> {
    /// Wrap a buffer without checking its length.
    pub const fn new_unchecked(buffer: T) -> Packet<T> {
        Packet { buffer }
    }

    /// Wrap a buffer and check that it holds a whole AETH.
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

    /// The raw syndrome byte.
    pub fn syndrome_raw(&self) -> u8 {
        self.buffer.as_ref()[field::SYNDROME]
    }

    /// The decoded syndrome.
    pub fn syndrome(&self) -> AethSyndrome {
        AethSyndrome::from_byte(self.syndrome_raw())
    }

    /// Message sequence number.
    pub fn msn(&self) -> Msn {
        Msn::new(read_u24(&self.buffer.as_ref()[field::MSN]))
    }
}

impl<T: AsRef<[u8]> + AsMut<[u8]>> Packet<T> {
    /// Set the syndrome byte.
    pub fn set_syndrome(&mut self, syndrome: AethSyndrome) {
        self.buffer.as_mut()[field::SYNDROME] = syndrome.to_byte();
    }

    /// Set the MSN.
    pub fn set_msn(&mut self, msn: Msn) {
        write_u24(&mut self.buffer.as_mut()[field::MSN], msn.value());
    }
}

impl AethRepr {
    /// Parse an AETH.
    pub fn parse<T: AsRef<[u8]> + ?Sized>(packet: &Packet<&T>) -> Result<AethRepr> {
        packet.check_len()?;
        Ok(AethRepr {
            syndrome: packet.syndrome(),
            msn: packet.msn(),
        })
    }

    /// Bytes [`emit`](Self::emit) writes: 4.
    pub const fn buffer_len(&self) -> usize {
        HEADER_LEN
    }

    /// Write the AETH; the packet must have passed `check_len`.
    pub fn emit<T: AsRef<[u8]> + AsMut<[u8]>>(&self, packet: &mut Packet<T>) {
        packet.set_syndrome(self.syndrome);
        packet.set_msn(self.msn);
    }
}

impl fmt::Display for AethRepr {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "AETH {} (syndrome {:#04x}) msn={}",
            self.syndrome,
            self.syndrome.to_byte(),
            self.msn.value()
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    // Vector 7: RNR NAK timer 14, MSN 3.
    static BYTES: [u8; 4] = [0x2e, 0x00, 0x00, 0x03];

    fn repr() -> AethRepr {
        AethRepr {
            syndrome: AethSyndrome::RnrNak { timer: 14 },
            msn: Msn::new(3),
        }
    }

    #[test]
    fn deconstruct() {
        let p = Packet::new_checked(&BYTES[..]).unwrap();
        assert_eq!(p.syndrome_raw(), 0x2e);
        assert_eq!(p.syndrome(), AethSyndrome::RnrNak { timer: 14 });
        assert_eq!(p.msn(), Msn::new(3));
    }

    #[test]
    fn construct() {
        let mut buf = [0xFFu8; 4];
        let mut p = Packet::new_unchecked(&mut buf[..]);
        p.set_syndrome(AethSyndrome::RnrNak { timer: 14 });
        p.set_msn(Msn::new(3));
        assert_eq!(buf, BYTES);
    }

    #[test]
    fn parse() {
        let p = Packet::new_checked(&BYTES[..]).unwrap();
        assert_eq!(AethRepr::parse(&p), Ok(repr()));
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
    fn syndromes_from_the_vectors_decode() {
        assert_eq!(AethSyndrome::from_byte(0x1f), AethSyndrome::ACK);
        assert_eq!(
            AethSyndrome::from_byte(0x60),
            AethSyndrome::Nak(NakCode::PsnSequenceError)
        );
        assert_eq!(
            AethSyndrome::from_byte(0x62),
            AethSyndrome::Nak(NakCode::RemoteAccessError)
        );
        assert_eq!(AethSyndrome::from_byte(0x45), AethSyndrome::Reserved(5));
        // Reserved bit 7 is ignored.
        assert_eq!(AethSyndrome::from_byte(0x9f), AethSyndrome::ACK);
    }

    #[test]
    fn every_syndrome_byte_round_trips() {
        for b in 0u8..0x80 {
            assert_eq!(AethSyndrome::from_byte(b).to_byte(), b);
        }
    }

    #[test]
    fn credit_table_matches_the_spec() {
        assert_eq!(credit_count(0), Some(0));
        assert_eq!(credit_count(5), Some(6));
        assert_eq!(credit_count(13), Some(96));
        assert_eq!(credit_count(30), Some(32768));
        assert_eq!(credit_count(31), None);
        assert_eq!(credit_code_for(0), 0);
        assert_eq!(credit_code_for(5), 4);
        assert_eq!(credit_code_for(6), 5);
        assert_eq!(credit_code_for(100), 13);
        assert_eq!(credit_code_for(u32::MAX), 30);
        for code in 0..31 {
            assert_eq!(credit_code_for(credit_count(code).unwrap()), code);
        }
    }

    #[test]
    fn rnr_timer_table_matches_the_spec() {
        assert_eq!(rnr_timer_duration(0), Duration::from_us(655_360));
        assert_eq!(rnr_timer_duration(1), Duration::from_us(10));
        assert_eq!(rnr_timer_duration(14), Duration::from_us(1_280));
        assert_eq!(rnr_timer_duration(25), Duration::from_us(61_440));
        assert_eq!(rnr_timer_duration(31), Duration::from_us(491_520));
        for code in 0..32 {
            assert_eq!(rnr_timer_code_for(rnr_timer_duration(code)), code);
        }
        assert_eq!(rnr_timer_code_for(Duration::from_us(11)), 2);
        assert_eq!(rnr_timer_code_for(Duration::ZERO), 1);
        assert_eq!(rnr_timer_code_for(Duration::from_secs(1)), 0);
    }

    #[test]
    fn display() {
        assert_eq!(
            repr().to_string(),
            format!(
                "AETH RNR NAK timer=14 ({}) (syndrome 0x2e) msn=3",
                Duration::from_us(1280)
            )
        );
    }
}
