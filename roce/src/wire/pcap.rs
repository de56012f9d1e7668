//! pcap files (the classic libpcap format), read and write.
//!
//! The writer emits nanosecond-resolution little-endian files with link
//! type Ethernet (1), which Wireshark and tshark open directly; timestamps
//! are [`Instant`]s (picoseconds, truncated to nanoseconds). The reader
//! accepts microsecond and nanosecond files in either byte order, any link
//! type (reported, not interpreted), and works on a byte slice without
//! copying. Bad files give a [`PcapError`] that says what and where; the
//! reader never panics.
//!
//! Layout: a 24-byte global header (magic, version 2.4, zone, sigfigs,
//! snaplen, link type), then records of a 16-byte header (seconds,
//! fraction, captured length, original length) and the captured bytes.

use std::io::{self, Write};

use crate::time::Instant;

/// Link type of Ethernet captures.
pub const LINKTYPE_ETHERNET: u32 = 1;
/// Magic of microsecond-resolution files (in the writer's byte order).
pub const MAGIC_MICROS: u32 = 0xA1B2_C3D4;
/// Magic of nanosecond-resolution files.
pub const MAGIC_NANOS: u32 = 0xA1B2_3C4D;
/// Snap length the writer declares.
pub const SNAPLEN: u32 = 262_144;
/// Global header length.
pub const GLOBAL_HEADER_LEN: usize = 24;
/// Record header length.
pub const RECORD_HEADER_LEN: usize = 16;
/// The first four bytes of a pcapng file.
const PCAPNG_MAGIC: u32 = 0x0A0D_0D0A;

const PS_PER_NS: u64 = 1_000;
const PS_PER_S: u64 = 1_000_000_000_000;

/// Why a pcap file could not be read.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum PcapError {
    /// Shorter than the 24-byte global header.
    #[error("not a pcap file: {0} bytes, shorter than the 24-byte header")]
    TooShort(usize),
    /// A pcapng file.
    #[error("pcapng files are not supported; convert with `editcap -F pcap IN OUT`")]
    Pcapng,
    /// An unknown magic number.
    #[error("not a pcap file: magic {0:#010x} (expected a1b2c3d4 or a1b23c4d)")]
    BadMagic(u32),
    /// A version other than 2.x.
    #[error("unsupported pcap version {major}.{minor} (expected 2.4)")]
    BadVersion {
        /// Major version.
        major: u16,
        /// Minor version.
        minor: u16,
    },
    /// A record header or its data runs past the end of the file.
    #[error("record {index} at byte {offset} is truncated: needs {needed} bytes, {left} left")]
    TruncatedRecord {
        /// Index of the record, from 0.
        index: usize,
        /// Offset of its header in the file.
        offset: usize,
        /// Bytes the record needs.
        needed: usize,
        /// Bytes left in the file.
        left: usize,
    },
    /// A record whose fraction of a second is out of range.
    #[error("record {index} at byte {offset}: sub-second field {fraction} out of range")]
    BadTimestamp {
        /// Index of the record, from 0.
        index: usize,
        /// Offset of its header in the file.
        offset: usize,
        /// The fraction field.
        fraction: u32,
    },
}

/// Timestamp resolution of a file.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Resolution {
    /// Microseconds.
    Micros,
    /// Nanoseconds.
    Nanos,
}

/// One captured frame.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Record<'a> {
    /// When it was captured.
    pub timestamp: Instant,
    /// The captured bytes.
    pub data: &'a [u8],
    /// The length of the frame on the wire (>= `data.len()` when the
    /// capture was cut at the snap length).
    pub orig_len: u32,
}

/// A pcap file in memory, iterated record by record.
#[derive(Debug, Clone)]
pub struct PcapReader<'a> {
    data: &'a [u8],
    big_endian: bool,
    resolution: Resolution,
    link_type: u32,
    snaplen: u32,
    offset: usize,
    index: usize,
    failed: bool,
}

impl<'a> PcapReader<'a> {
    /// Check the global header of `data`.
    pub fn new(data: &'a [u8]) -> Result<PcapReader<'a>, PcapError> {
        if data.len() < GLOBAL_HEADER_LEN {
            return Err(PcapError::TooShort(data.len()));
        }
        let magic_le = u32::from_le_bytes([data[0], data[1], data[2], data[3]]);
        let (big_endian, resolution) = match magic_le {
            MAGIC_MICROS => (false, Resolution::Micros),
            MAGIC_NANOS => (false, Resolution::Nanos),
            m if m.swap_bytes() == MAGIC_MICROS => (true, Resolution::Micros),
            m if m.swap_bytes() == MAGIC_NANOS => (true, Resolution::Nanos),
            PCAPNG_MAGIC => return Err(PcapError::Pcapng),
            m => return Err(PcapError::BadMagic(m)),
        };
        let mut r = PcapReader {
            data,
            big_endian,
            resolution,
            link_type: 0,
            snaplen: 0,
            offset: GLOBAL_HEADER_LEN,
            index: 0,
            failed: false,
        };
        let major = r.u16_at(4);
        let minor = r.u16_at(6);
        if major != 2 {
            return Err(PcapError::BadVersion { major, minor });
        }
        r.snaplen = r.u32_at(16);
        r.link_type = r.u32_at(20);
        Ok(r)
    }

    /// The link type (1 = Ethernet).
    pub fn link_type(&self) -> u32 {
        self.link_type
    }

    /// The declared snap length.
    pub fn snaplen(&self) -> u32 {
        self.snaplen
    }

    /// The timestamp resolution.
    pub fn resolution(&self) -> Resolution {
        self.resolution
    }

    fn u16_at(&self, at: usize) -> u16 {
        let b = [self.data[at], self.data[at + 1]];
        if self.big_endian {
            u16::from_be_bytes(b)
        } else {
            u16::from_le_bytes(b)
        }
    }

    fn u32_at(&self, at: usize) -> u32 {
        let b = [
            self.data[at],
            self.data[at + 1],
            self.data[at + 2],
            self.data[at + 3],
        ];
        if self.big_endian {
            u32::from_be_bytes(b)
        } else {
            u32::from_le_bytes(b)
        }
    }

    fn next_record(&mut self) -> Result<Option<Record<'a>>, PcapError> {
        let left = self.data.len() - self.offset;
        if left == 0 {
            return Ok(None);
        }
        let truncated = |needed| PcapError::TruncatedRecord {
            index: self.index,
            offset: self.offset,
            needed,
            left,
        };
        if left < RECORD_HEADER_LEN {
            return Err(truncated(RECORD_HEADER_LEN));
        }
        let at = self.offset;
        let secs = u64::from(self.u32_at(at));
        let fraction = self.u32_at(at + 4);
        let incl = self.u32_at(at + 8) as usize;
        let orig_len = self.u32_at(at + 12);
        let needed = RECORD_HEADER_LEN.saturating_add(incl);
        if left < needed {
            return Err(truncated(needed));
        }
        let frac_ps = match self.resolution {
            Resolution::Micros if fraction < 1_000_000 => u64::from(fraction) * 1_000_000,
            Resolution::Nanos if fraction < 1_000_000_000 => u64::from(fraction) * PS_PER_NS,
            _ => {
                return Err(PcapError::BadTimestamp {
                    index: self.index,
                    offset: at,
                    fraction,
                })
            }
        };
        // u32 seconds * 1e12 fits in u64 up to about 213 days; saturate
        // beyond (such timestamps are outside anything we simulate).
        let ps = secs.saturating_mul(PS_PER_S).saturating_add(frac_ps);
        let data = &self.data[at + RECORD_HEADER_LEN..at + needed];
        self.offset += needed;
        self.index += 1;
        Ok(Some(Record {
            timestamp: Instant::from_ps(ps),
            data,
            orig_len,
        }))
    }
}

impl<'a> Iterator for PcapReader<'a> {
    type Item = Result<Record<'a>, PcapError>;

    /// The next record; after an error the iteration ends.
    fn next(&mut self) -> Option<Self::Item> {
        if self.failed {
            return None;
        }
        match self.next_record() {
            Ok(r) => r.map(Ok),
            Err(e) => {
                self.failed = true;
                Some(Err(e))
            }
        }
    }
}

/// Writes a nanosecond pcap of Ethernet frames.
#[derive(Debug)]
pub struct PcapWriter<W: Write> {
    out: W,
}

impl<W: Write> PcapWriter<W> {
    /// Write the global header to `out`.
    pub fn new(mut out: W) -> io::Result<PcapWriter<W>> {
        let mut h = [0u8; GLOBAL_HEADER_LEN];
        h[0..4].copy_from_slice(&MAGIC_NANOS.to_le_bytes());
        h[4..6].copy_from_slice(&2u16.to_le_bytes());
        h[6..8].copy_from_slice(&4u16.to_le_bytes());
        h[16..20].copy_from_slice(&SNAPLEN.to_le_bytes());
        h[20..24].copy_from_slice(&LINKTYPE_ETHERNET.to_le_bytes());
        out.write_all(&h)?;
        Ok(PcapWriter { out })
    }

    /// Append one frame captured at `timestamp`. Frames longer than the
    /// snap length are refused ([`io::ErrorKind::InvalidInput`]).
    pub fn write_frame(&mut self, timestamp: Instant, frame: &[u8]) -> io::Result<()> {
        let len = u32::try_from(frame.len())
            .ok()
            .filter(|&l| l <= SNAPLEN)
            .ok_or_else(|| {
                io::Error::new(
                    io::ErrorKind::InvalidInput,
                    format!(
                        "frame of {} bytes exceeds the snap length {SNAPLEN}",
                        frame.len()
                    ),
                )
            })?;
        let ps = timestamp.as_ps();
        let secs = u32::try_from(ps / PS_PER_S).map_err(|_| {
            io::Error::new(
                io::ErrorKind::InvalidInput,
                format!("timestamp {timestamp} is beyond what pcap can store"),
            )
        })?;
        let nanos = ((ps % PS_PER_S) / PS_PER_NS) as u32;
        let mut h = [0u8; RECORD_HEADER_LEN];
        h[0..4].copy_from_slice(&secs.to_le_bytes());
        h[4..8].copy_from_slice(&nanos.to_le_bytes());
        h[8..12].copy_from_slice(&len.to_le_bytes());
        h[12..16].copy_from_slice(&len.to_le_bytes());
        self.out.write_all(&h)?;
        self.out.write_all(frame)
    }

    /// Flush the underlying writer.
    pub fn flush(&mut self) -> io::Result<()> {
        self.out.flush()
    }

    /// The underlying writer.
    pub fn into_inner(self) -> W {
        self.out
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    // A nanosecond file with one 4-byte record at 1.000000002 s.
    static FILE: [u8; 44] = [
        0x4d, 0x3c, 0xb2, 0xa1, 2, 0, 4, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0x00, 0x00, 0x04, 0x00, 1, 0,
        0, 0, // global header
        1, 0, 0, 0, 2, 0, 0, 0, 4, 0, 0, 0, 4, 0, 0, 0, // record header
        0xde, 0xad, 0xbe, 0xef,
    ];

    #[test]
    fn deconstruct() {
        let r = PcapReader::new(&FILE).unwrap();
        assert_eq!(r.link_type(), LINKTYPE_ETHERNET);
        assert_eq!(r.snaplen(), SNAPLEN);
        assert_eq!(r.resolution(), Resolution::Nanos);
        let recs: Vec<_> = r.collect::<Result<_, _>>().unwrap();
        assert_eq!(recs.len(), 1);
        assert_eq!(recs[0].timestamp, Instant::from_ps(1_000_000_002_000));
        assert_eq!(recs[0].data, &[0xde, 0xad, 0xbe, 0xef]);
        assert_eq!(recs[0].orig_len, 4);
    }

    #[test]
    fn construct() {
        let mut w = PcapWriter::new(Vec::new()).unwrap();
        w.write_frame(
            Instant::from_ps(1_000_000_002_999),
            &[0xde, 0xad, 0xbe, 0xef],
        )
        .unwrap();
        assert_eq!(w.into_inner(), FILE);
    }

    #[test]
    fn big_endian_microsecond_files_are_read() {
        let mut f = vec![0xa1, 0xb2, 0xc3, 0xd4, 0, 2, 0, 4];
        f.extend_from_slice(&[0; 8]);
        f.extend_from_slice(&[0, 0, 0xff, 0xff, 0, 0, 0, 1]);
        f.extend_from_slice(&[0, 0, 0, 3, 0, 0, 0, 7, 0, 0, 0, 1, 0, 0, 0, 60, 0xAB]);
        let r = PcapReader::new(&f).unwrap();
        assert_eq!(r.resolution(), Resolution::Micros);
        let rec = r.clone().next().unwrap().unwrap();
        assert_eq!(rec.timestamp, Instant::from_ps(3_000_007_000_000));
        assert_eq!(rec.data, &[0xAB]);
        assert_eq!(rec.orig_len, 60);
    }

    #[test]
    fn truncated() {
        for n in 0..GLOBAL_HEADER_LEN {
            assert_eq!(
                PcapReader::new(&FILE[..n]).err(),
                Some(PcapError::TooShort(n))
            );
        }
        for n in GLOBAL_HEADER_LEN + 1..FILE.len() {
            let mut r = PcapReader::new(&FILE[..n]).unwrap();
            assert!(
                matches!(
                    r.next(),
                    Some(Err(PcapError::TruncatedRecord {
                        index: 0,
                        offset: 24,
                        ..
                    }))
                ),
                "{n}"
            );
            assert!(r.next().is_none());
        }
        assert!(PcapReader::new(&FILE[..GLOBAL_HEADER_LEN])
            .unwrap()
            .next()
            .is_none());
    }

    #[test]
    fn bad_headers_say_why() {
        let mut f = FILE;
        f[0..4].copy_from_slice(&[0x0a, 0x0d, 0x0d, 0x0a]);
        assert_eq!(PcapReader::new(&f).err(), Some(PcapError::Pcapng));
        f[0..4].copy_from_slice(b"GIF8");
        assert!(PcapReader::new(&f)
            .unwrap_err()
            .to_string()
            .contains("not a pcap file"));
        let mut f = FILE;
        f[4] = 3;
        assert_eq!(
            PcapReader::new(&f).err(),
            Some(PcapError::BadVersion { major: 3, minor: 4 })
        );
        let mut f = FILE;
        f[28..32].copy_from_slice(&2_000_000_000u32.to_le_bytes());
        let mut r = PcapReader::new(&f).unwrap();
        assert!(matches!(
            r.next(),
            Some(Err(PcapError::BadTimestamp { .. }))
        ));
    }

    #[test]
    fn writer_refuses_what_pcap_cannot_hold() {
        let mut w = PcapWriter::new(Vec::new()).unwrap();
        // u64 picoseconds always fit in u32 seconds (about 213 days).
        w.write_frame(Instant::MAX, &[1]).unwrap();
        let big = vec![0u8; SNAPLEN as usize + 1];
        let e = w.write_frame(Instant::ZERO, &big).unwrap_err();
        assert_eq!(e.kind(), io::ErrorKind::InvalidInput);
    }
}
