//! MAC control frames: 802.1Qbb priority flow control (PFC) and 802.3x
//! PAUSE.
//!
//! Both travel in an Ethernet frame to 01:80:C2:00:00:01 with EtherType
//! 0x8808. The view covers the MAC control body after the Ethernet header:
//!
//! ```text
//! PAUSE: 0-1 opcode 0x0001 | 2-3 pause time            | zero to 46 bytes
//! PFC:   0-1 opcode 0x0101 | 2-3 class-enable vector   | 4-19 eight times
//!                                                      | zero to 46 bytes
//! ```
//!
//! Times are in quanta of 512 bit times at the link rate
//! ([`quanta_to_duration`], [`duration_to_quanta`]). In the class-enable
//! vector, bit `p` enables the time of priority `p`; a time of 0 for an
//! enabled class means "resume now" (XON).

use core::fmt;

use pnet_base::MacAddr;
use pnet_packet::ethernet::{EtherTypes, EthernetPacket, MutableEthernetPacket};

use super::{Error, Result};
use crate::time::{Duration, Rate};

mod field {
    use core::ops::Range;

    pub const OPCODE: Range<usize> = 0..2;
    pub const PAUSE_TIME: Range<usize> = 2..4;
    pub const CLASS_ENABLE: Range<usize> = 2..4;
    pub const TIMES: Range<usize> = 4..20;
}

/// MAC control EtherType.
pub const ETHERTYPE: u16 = 0x8808;
/// The 802.3x PAUSE opcode.
pub const OPCODE_PAUSE: u16 = 0x0001;
/// The 802.1Qbb PFC opcode.
pub const OPCODE_PFC: u16 = 0x0101;
/// The multicast address MAC control frames are sent to.
pub const DEST_MAC: MacAddr = MacAddr(0x01, 0x80, 0xC2, 0x00, 0x00, 0x01);
/// Length of the MAC control body (padded to the minimum frame).
pub const BODY_LEN: usize = 46;
/// Length of a whole MAC control frame without FCS.
pub const FRAME_LEN: usize = 14 + BODY_LEN;
/// Link bytes one MAC control frame occupies: the frame, FCS (4),
/// preamble, SFD and inter-frame gap (20).
pub const WIRE_LEN: usize = FRAME_LEN + 4 + 20;
/// Bit times in one pause quantum.
pub const BITS_PER_QUANTUM: u64 = 512;

/// How long `quanta` pause quanta last at `rate` (rounded up to a whole
/// picosecond).
pub const fn quanta_to_duration(quanta: u16, rate: Rate) -> Duration {
    rate.serialization_time(quanta as u64 * BITS_PER_QUANTUM / 8)
}

/// The smallest number of quanta that lasts at least `d` at `rate`,
/// saturating at 0xFFFF.
pub const fn duration_to_quanta(d: Duration, rate: Rate) -> u16 {
    let bits = d.as_ps() as u128 * rate.bps() as u128;
    let per_quantum = BITS_PER_QUANTUM as u128 * 1_000_000_000_000;
    let q = bits.div_ceil(per_quantum);
    if q > u16::MAX as u128 {
        u16::MAX
    } else {
        q as u16
    }
}

/// A read/write view of a MAC control body.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Packet<T: AsRef<[u8]>> {
    buffer: T,
}

impl<T: AsRef<[u8]>> Packet<T> {
    /// Wrap a buffer without checking its length.
    pub const fn new_unchecked(buffer: T) -> Packet<T> {
        Packet { buffer }
    }

    /// Wrap a buffer and check that it holds the fields of its opcode.
    pub fn new_checked(buffer: T) -> Result<Packet<T>> {
        let packet = Self::new_unchecked(buffer);
        packet.check_len()?;
        Ok(packet)
    }

    /// [`Error::Truncated`] when the buffer is shorter than the opcode's
    /// fields (4 bytes for PAUSE and unknown opcodes, 20 for PFC).
    pub fn check_len(&self) -> Result<()> {
        let len = self.buffer.as_ref().len();
        if len < field::OPCODE.end {
            return Err(Error::Truncated);
        }
        let need = if self.opcode() == OPCODE_PFC {
            field::TIMES.end
        } else {
            field::PAUSE_TIME.end
        };
        if len < need {
            Err(Error::Truncated)
        } else {
            Ok(())
        }
    }

    /// The wrapped buffer.
    pub fn into_inner(self) -> T {
        self.buffer
    }

    /// The MAC control opcode.
    pub fn opcode(&self) -> u16 {
        let b = &self.buffer.as_ref()[field::OPCODE];
        u16::from_be_bytes([b[0], b[1]])
    }

    /// PAUSE: the pause time in quanta.
    pub fn pause_time(&self) -> u16 {
        let b = &self.buffer.as_ref()[field::PAUSE_TIME];
        u16::from_be_bytes([b[0], b[1]])
    }

    /// PFC: the raw class-enable vector (the high byte is reserved).
    pub fn class_enable_vector(&self) -> u16 {
        let b = &self.buffer.as_ref()[field::CLASS_ENABLE];
        u16::from_be_bytes([b[0], b[1]])
    }

    /// PFC: the pause time of `priority` (0..=7; higher values are masked).
    pub fn time(&self, priority: u8) -> u16 {
        let at = field::TIMES.start + 2 * usize::from(priority & 7);
        let b = &self.buffer.as_ref()[at..at + 2];
        u16::from_be_bytes([b[0], b[1]])
    }
}

impl<T: AsRef<[u8]> + AsMut<[u8]>> Packet<T> {
    /// Set the opcode.
    pub fn set_opcode(&mut self, opcode: u16) {
        self.buffer.as_mut()[field::OPCODE].copy_from_slice(&opcode.to_be_bytes());
    }

    /// PAUSE: set the pause time.
    pub fn set_pause_time(&mut self, quanta: u16) {
        self.buffer.as_mut()[field::PAUSE_TIME].copy_from_slice(&quanta.to_be_bytes());
    }

    /// PFC: set the class-enable vector.
    pub fn set_class_enable_vector(&mut self, v: u16) {
        self.buffer.as_mut()[field::CLASS_ENABLE].copy_from_slice(&v.to_be_bytes());
    }

    /// PFC: set the time of `priority` (0..=7; higher values are masked).
    pub fn set_time(&mut self, priority: u8, quanta: u16) {
        let at = field::TIMES.start + 2 * usize::from(priority & 7);
        self.buffer.as_mut()[at..at + 2].copy_from_slice(&quanta.to_be_bytes());
    }
}

/// A MAC control frame, decoded.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Repr {
    /// 802.3x PAUSE of the whole link.
    Pause {
        /// Pause time in quanta (0 resumes).
        quanta: u16,
    },
    /// 802.1Qbb priority flow control.
    Pfc {
        /// Bit `p` set: `quanta[p]` applies to priority `p`.
        class_enable: u8,
        /// Pause time per priority, in quanta.
        quanta: [u16; 8],
    },
}

impl Repr {
    /// A PFC frame that pauses `priority` for `quanta` (0 = XON).
    pub const fn pfc_one(priority: u8, quanta: u16) -> Repr {
        let mut times = [0u16; 8];
        times[(priority & 7) as usize] = quanta;
        Repr::Pfc {
            class_enable: 1 << (priority & 7),
            quanta: times,
        }
    }

    /// Parse a MAC control body; [`Error::Malformed`] for an opcode other
    /// than PAUSE or PFC.
    pub fn parse<T: AsRef<[u8]> + ?Sized>(packet: &Packet<&T>) -> Result<Repr> {
        packet.check_len()?;
        match packet.opcode() {
            OPCODE_PAUSE => Ok(Repr::Pause {
                quanta: packet.pause_time(),
            }),
            OPCODE_PFC => {
                let mut quanta = [0u16; 8];
                for (p, q) in (0u8..).zip(quanta.iter_mut()) {
                    *q = packet.time(p);
                }
                Ok(Repr::Pfc {
                    class_enable: (packet.class_enable_vector() & 0xFF) as u8,
                    quanta,
                })
            }
            _ => Err(Error::Malformed),
        }
    }

    /// Bytes [`emit`](Self::emit) writes: the 46-byte padded body.
    pub const fn buffer_len(&self) -> usize {
        BODY_LEN
    }

    /// Write the padded body; the buffer must hold [`BODY_LEN`] bytes.
    pub fn emit<T: AsRef<[u8]> + AsMut<[u8]>>(&self, packet: &mut Packet<T>) {
        packet.buffer.as_mut()[..BODY_LEN].fill(0);
        match *self {
            Repr::Pause { quanta } => {
                packet.set_opcode(OPCODE_PAUSE);
                packet.set_pause_time(quanta);
            }
            Repr::Pfc {
                class_enable,
                quanta,
            } => {
                packet.set_opcode(OPCODE_PFC);
                packet.set_class_enable_vector(u16::from(class_enable));
                for (p, q) in (0u8..).zip(quanta) {
                    packet.set_time(p, q);
                }
            }
        }
    }

    /// Write a whole Ethernet frame (60 bytes, no FCS) from `src`; returns
    /// its length.
    pub fn emit_frame(&self, src: MacAddr, buf: &mut [u8]) -> Result<usize> {
        if buf.len() < FRAME_LEN {
            return Err(Error::Truncated);
        }
        let mut eth = MutableEthernetPacket::new(&mut buf[..FRAME_LEN]).ok_or(Error::Truncated)?;
        eth.set_destination(DEST_MAC);
        eth.set_source(src);
        eth.set_ethertype(EtherTypes::FlowControl);
        self.emit(&mut Packet::new_unchecked(&mut buf[14..FRAME_LEN]));
        Ok(FRAME_LEN)
    }

    /// Parse a whole Ethernet frame; returns the source MAC and the frame.
    /// [`Error::Malformed`] when the EtherType is not 0x8808.
    pub fn parse_frame(frame: &[u8]) -> Result<(MacAddr, Repr)> {
        let eth = EthernetPacket::new(frame).ok_or(Error::Truncated)?;
        if eth.get_ethertype() != EtherTypes::FlowControl {
            return Err(Error::Malformed);
        }
        let repr = Repr::parse(&Packet::new_checked(&frame[14..])?)?;
        Ok((eth.get_source(), repr))
    }

    /// The pause time this frame sets for `priority` (PAUSE applies to all
    /// priorities), or `None` if it leaves the priority alone.
    pub const fn quanta_for(&self, priority: u8) -> Option<u16> {
        match *self {
            Repr::Pause { quanta } => Some(quanta),
            Repr::Pfc {
                class_enable,
                quanta,
            } => {
                let p = (priority & 7) as usize;
                if class_enable & (1 << p) != 0 {
                    Some(quanta[p])
                } else {
                    None
                }
            }
        }
    }
}

impl fmt::Display for Repr {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Repr::Pause { quanta } => write!(f, "PAUSE quanta={quanta}"),
            Repr::Pfc {
                class_enable,
                quanta,
            } => {
                write!(f, "PFC enable={class_enable:#04x}")?;
                for (p, q) in quanta.iter().enumerate() {
                    if class_enable & (1 << p) != 0 {
                        write!(f, " p{p}={q}")?;
                    }
                }
                Ok(())
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    // PFC: pause priority 3 for 0xFFFF quanta and release priority 5.
    static PFC: [u8; 20] = [
        0x01, 0x01, 0x00, 0x28, 0, 0, 0, 0, 0, 0, 0xff, 0xff, 0, 0, 0, 0, 0, 0, 0, 0,
    ];

    fn pfc_repr() -> Repr {
        let mut quanta = [0u16; 8];
        quanta[3] = 0xFFFF;
        Repr::Pfc {
            class_enable: 0x28,
            quanta,
        }
    }

    #[test]
    fn deconstruct() {
        let p = Packet::new_checked(&PFC[..]).unwrap();
        assert_eq!(p.opcode(), OPCODE_PFC);
        assert_eq!(p.class_enable_vector(), 0x28);
        assert_eq!(p.time(3), 0xFFFF);
        assert_eq!(p.time(5), 0);
        let pause = [0x00, 0x01, 0x12, 0x34];
        let p = Packet::new_checked(&pause[..]).unwrap();
        assert_eq!(p.opcode(), OPCODE_PAUSE);
        assert_eq!(p.pause_time(), 0x1234);
    }

    #[test]
    fn construct() {
        let mut buf = [0u8; 20];
        let mut p = Packet::new_unchecked(&mut buf[..]);
        p.set_opcode(OPCODE_PFC);
        p.set_class_enable_vector(0x28);
        p.set_time(3, 0xFFFF);
        assert_eq!(buf, PFC);
    }

    #[test]
    fn parse() {
        let p = Packet::new_checked(&PFC[..]).unwrap();
        assert_eq!(Repr::parse(&p), Ok(pfc_repr()));
        assert_eq!(pfc_repr().quanta_for(3), Some(0xFFFF));
        assert_eq!(pfc_repr().quanta_for(5), Some(0));
        assert_eq!(pfc_repr().quanta_for(0), None);
        let other = [0x00, 0x02, 0, 0];
        let p = Packet::new_checked(&other[..]).unwrap();
        assert_eq!(Repr::parse(&p), Err(Error::Malformed));
    }

    #[test]
    fn emit() {
        let mut buf = [0xAAu8; BODY_LEN];
        pfc_repr().emit(&mut Packet::new_unchecked(&mut buf[..]));
        assert_eq!(&buf[..20], &PFC);
        assert!(buf[20..].iter().all(|&b| b == 0));
        let mut frame = [0u8; FRAME_LEN];
        let src = MacAddr(2, 0, 0, 0, 0, 1);
        assert_eq!(
            Repr::Pause { quanta: 7 }.emit_frame(src, &mut frame),
            Ok(60)
        );
        assert_eq!(&frame[..6], &[0x01, 0x80, 0xC2, 0, 0, 1]);
        assert_eq!(&frame[12..18], &[0x88, 0x08, 0x00, 0x01, 0x00, 0x07]);
        assert_eq!(
            Repr::parse_frame(&frame),
            Ok((src, Repr::Pause { quanta: 7 }))
        );
        assert_eq!(Repr::pfc_one(3, 0xFFFF).quanta_for(3), Some(0xFFFF));
    }

    #[test]
    fn truncated() {
        for n in 0..20 {
            assert_eq!(Packet::new_checked(&PFC[..n]), Err(Error::Truncated));
        }
        assert!(Packet::new_checked(&[0u8, 1, 0][..]).is_err());
        assert_eq!(
            Repr::Pause { quanta: 1 }.emit_frame(MacAddr::zero(), &mut [0u8; 59]),
            Err(Error::Truncated)
        );
        assert_eq!(Repr::parse_frame(&[0u8; 13]), Err(Error::Truncated));
    }

    #[test]
    fn quanta_convert_at_the_link_rate() {
        // One quantum at 100 Gb/s is 512 bits = 5.12 ns.
        let r100 = Rate::from_gbps(100);
        assert_eq!(quanta_to_duration(1, r100), Duration::from_ps(5_120));
        assert_eq!(
            quanta_to_duration(0xFFFF, r100),
            Duration::from_ps(5_120 * 65_535)
        );
        assert_eq!(duration_to_quanta(Duration::from_ps(5_120), r100), 1);
        assert_eq!(duration_to_quanta(Duration::from_ps(5_121), r100), 2);
        assert_eq!(duration_to_quanta(Duration::from_secs(1), r100), 0xFFFF);
        // 25 Gb/s: 20.48 ns per quantum.
        assert_eq!(
            quanta_to_duration(100, Rate::from_gbps(25)),
            Duration::from_ns(2_048)
        );
        for q in [0u16, 1, 77, 0xFFFF] {
            assert_eq!(duration_to_quanta(quanta_to_duration(q, r100), r100), q);
        }
    }

    #[test]
    fn display() {
        assert_eq!(pfc_repr().to_string(), "PFC enable=0x28 p3=65535 p5=0");
        assert_eq!(Repr::Pause { quanta: 3 }.to_string(), "PAUSE quanta=3");
    }
}
