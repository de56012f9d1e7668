//! perftest's own out-of-band exchange (its TCP connection on port 18515),
//! so that `rocelab perftest` and perftest's `ib_*` programs run against
//! each other.
//!
//! perftest (protocol version 6.06, rdma-core's perftest 4.5-0.x) speaks in
//! fixed-size records; in every exchange the client writes first and then
//! reads, the server reads first and then writes:
//!
//! 1. the version: 16 bytes, a NUL-terminated decimal text (`"6.06"`);
//!    perftest refuses peers below 5.70. rocelab puts the word `rocelab`
//!    after the NUL, which perftest ignores; two rocelab sides that see it
//!    on both ends continue in rocelab's own exchange (its endpoints, slot
//!    rings and `--verify` credits need more than perftest's record holds);
//! 2. the system data: the cycle buffer (the span of the remote buffer the
//!    writer cycles through, bytes) and the cache line size (bytes), each a
//!    32-bit big-endian integer; both sides take the larger of the two;
//! 3. the MTU: 2 bytes, the `ibv_mtu` number as one ASCII digit and a NUL;
//!    both sides use the smaller MTU;
//! 4. one key record per QP ([`KeyRecord`], 108 bytes of text: LID,
//!    outstanding reads, QPN, PSN, rkey, buffer address, GID, SRQ number);
//!    the same record is sent again as the handshake at every later
//!    synchronisation point;
//! 5. bandwidth tests: the client's result ([`BwReport`]: size, iterations,
//!    peak, average, message rate; 64-bit big-endian integers and IEEE
//!    doubles), which the server prints;
//! 6. the close: one more handshake, then `"done"` and its NUL.
//!
//! The peer is untrusted: every record is parsed strictly (exact length,
//! separators at their places, hex digits only) and checked (24-bit QPN
//! and PSN, an IPv4-mapped GID, a buffer address range that does not wrap,
//! bounded cycle buffer and cache line, finite non-negative results); a bad
//! record is an error that names the field, never a panic.

use std::io::{Read, Write};
use std::net::TcpStream;
use std::time::Duration;

use crate::verbs::{Gid, Mtu};

/// The perftest protocol version rocelab speaks.
pub const PERFTEST_VERSION: &str = "6.06";
/// The oldest peer version perftest (and rocelab) accept.
pub const MIN_PEER_VERSION: f64 = 5.70;
/// Length of the version record.
pub const VERSION_LEN: usize = 16;
/// The word after the version's NUL that marks a rocelab peer.
pub const ROCELAB_MARK: &[u8] = b"rocelab";
/// Length of a key record (with a GID).
pub const KEY_LEN: usize = 108;
/// The page size perftest cycles through by default (bytes).
pub const DEFAULT_CYCLE_BUFFER: u32 = 4096;
/// The cache line size rocelab announces (bytes).
pub const DEFAULT_CACHE_LINE: u32 = 64;
/// The largest cycle buffer accepted from a peer (bytes): the buffer each
/// QP registers is at least this large.
pub const MAX_CYCLE_BUFFER: u32 = 64 << 20;
/// The largest cache line size accepted from a peer (bytes).
pub const MAX_CACHE_LINE: u32 = 4096;

/// The version record: `"6.06"`, a NUL, `rocelab`, NULs.
pub fn version_record() -> [u8; VERSION_LEN] {
    let mut r = [0u8; VERSION_LEN];
    let v = PERFTEST_VERSION.as_bytes();
    r[..v.len()].copy_from_slice(v);
    r[v.len() + 1..v.len() + 1 + ROCELAB_MARK.len()].copy_from_slice(ROCELAB_MARK);
    r
}

/// What a peer's version record says.
#[derive(Debug, Clone, PartialEq)]
pub struct PeerVersion {
    /// The version text, e.g. `"6.06"`.
    pub text: String,
    /// Its value.
    pub value: f64,
    /// The peer is rocelab.
    pub rocelab: bool,
}

/// Parse a peer's version record: a decimal version of at least 5.70,
/// NUL-terminated.
pub fn parse_version(rec: &[u8; VERSION_LEN]) -> Result<PeerVersion, String> {
    let end = rec.iter().position(|&b| b == 0).ok_or_else(|| {
        format!(
            "version record {:?} has no terminating NUL",
            String::from_utf8_lossy(rec)
        )
    })?;
    let text = &rec[..end];
    let valid = !text.is_empty()
        && text.iter().all(|b| b.is_ascii_digit() || *b == b'.')
        && text.iter().filter(|&&b| b == b'.').count() <= 1
        && text[0].is_ascii_digit();
    let text = String::from_utf8_lossy(text).into_owned();
    if !valid {
        return Err(format!(
            "version {text:?} is not a decimal version number (expected e.g. {PERFTEST_VERSION:?})"
        ));
    }
    let value: f64 = text
        .parse()
        .map_err(|_| format!("version {text:?} is not a number"))?;
    if value < MIN_PEER_VERSION {
        return Err(format!(
            "peer speaks perftest version {text}; versions older than 5.70 are not supported"
        ));
    }
    let rest = &rec[end + 1..];
    let rocelab =
        rest.starts_with(ROCELAB_MARK) && rest[ROCELAB_MARK.len()..].iter().all(|&b| b == 0);
    Ok(PeerVersion {
        text,
        value,
        rocelab,
    })
}

/// The system data record: cycle buffer and cache line size.
pub fn sys_record(cycle_buffer: u32, cache_line: u32) -> ([u8; 4], [u8; 4]) {
    (cycle_buffer.to_be_bytes(), cache_line.to_be_bytes())
}

/// Check a peer's cycle buffer and cache line size (bytes).
pub fn check_sys(cycle_buffer: u32, cache_line: u32) -> Result<(), String> {
    if cycle_buffer == 0 || cycle_buffer > MAX_CYCLE_BUFFER {
        return Err(format!(
            "peer's cycle buffer of {cycle_buffer} bytes is outside 1..={MAX_CYCLE_BUFFER}"
        ));
    }
    if cache_line == 0 || cache_line > MAX_CACHE_LINE {
        return Err(format!(
            "peer's cache line size of {cache_line} bytes is outside 1..={MAX_CACHE_LINE}"
        ));
    }
    Ok(())
}

/// The MTU record: the `ibv_mtu` number as a digit and a NUL.
pub fn mtu_record(mtu: Mtu) -> [u8; 2] {
    [b'0' + mtu as u8, 0]
}

/// Parse a peer's MTU record.
pub fn parse_mtu(rec: &[u8; 2]) -> Result<Mtu, String> {
    let bad = || format!("peer's MTU record {rec:02x?} is not an ibv_mtu digit 1..5 and a NUL");
    if rec[1] != 0 || !(b'1'..=b'5').contains(&rec[0]) {
        return Err(bad());
    }
    Mtu::from_bytes(128 << (rec[0] - b'0')).ok_or_else(bad)
}

/// One QP's key record: what perftest tells its peer about a QP.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct KeyRecord {
    /// The port's LID.
    pub lid: u16,
    /// Outstanding RDMA READs and atomics the QP accepts.
    pub out_reads: u16,
    /// QP number (24 bits).
    pub qpn: u32,
    /// First PSN (24 bits).
    pub psn: u32,
    /// rkey of the buffer.
    pub rkey: u32,
    /// The buffer's address: where the peer writes to and reads from.
    pub vaddr: u64,
    /// The port's GID.
    pub gid: Gid,
    /// SRQ number (XRC and DC only; 0 otherwise).
    pub srqn: u32,
}

/// Parse `len` lowercase-or-uppercase hex digits (no sign, no prefix).
fn hex_field(s: &[u8], name: &str) -> Result<u64, String> {
    if s.is_empty() || !s.iter().all(u8::is_ascii_hexdigit) {
        return Err(format!(
            "key record field {name} {:?} is not {} hex digits",
            String::from_utf8_lossy(s),
            s.len()
        ));
    }
    // At most 16 digits: fits u64.
    u64::from_str_radix(std::str::from_utf8(s).unwrap_or("x"), 16)
        .map_err(|_| format!("key record field {name} is not hex"))
}

/// Field widths of the record, in order, each followed by `:`.
const KEY_FIELDS: [(&str, usize); 6] = [
    ("LID", 4),
    ("OUT_READS", 4),
    ("QPN", 6),
    ("PSN", 6),
    ("RKEY", 8),
    ("VADDR", 16),
];

impl KeyRecord {
    /// The 108-byte record: `LID:OUT:QPN:PSN:RKEY:VADDR:` in 4, 4, 6, 6,
    /// 8 and 16 hex digits, the 16 GID bytes as `xx:`, the SRQ number in 8
    /// digits and `:`, and a NUL.
    pub fn encode(&self) -> [u8; KEY_LEN] {
        let mut s = format!(
            "{:04x}:{:04x}:{:06x}:{:06x}:{:08x}:{:016x}:",
            self.lid,
            self.out_reads,
            self.qpn & 0xFF_FFFF,
            self.psn & 0xFF_FFFF,
            self.rkey,
            self.vaddr
        );
        for b in self.gid.raw() {
            s.push_str(&format!("{b:02x}:"));
        }
        s.push_str(&format!("{:08x}:", self.srqn));
        let mut r = [0u8; KEY_LEN];
        r[..s.len()].copy_from_slice(s.as_bytes());
        r
    }

    /// Parse a peer's record strictly: every field at its place with its
    /// width, then the NUL.
    pub fn parse(rec: &[u8; KEY_LEN]) -> Result<KeyRecord, String> {
        let mut at = 0usize;
        let mut vals = [0u64; 6];
        let field = |name: &str, width: usize, at: &mut usize| -> Result<u64, String> {
            let s = &rec[*at..*at + width];
            let v = hex_field(s, name)?;
            if rec[*at + width] != b':' {
                return Err(format!(
                    "key record: no ':' after field {name} (at byte {})",
                    *at + width
                ));
            }
            *at += width + 1;
            Ok(v)
        };
        for (i, (name, width)) in KEY_FIELDS.iter().enumerate() {
            vals[i] = field(name, *width, &mut at)?;
        }
        let mut gid = [0u8; 16];
        for (i, g) in gid.iter_mut().enumerate() {
            *g = field(&format!("GID[{i}]"), 2, &mut at)? as u8;
        }
        let srqn = field("SRQN", 8, &mut at)? as u32;
        if rec[at..].iter().any(|&b| b != 0) {
            return Err(format!(
                "key record: {:?} after the SRQ number, expected the terminating NUL",
                String::from_utf8_lossy(&rec[at..])
            ));
        }
        let k = KeyRecord {
            lid: vals[0] as u16,
            out_reads: vals[1] as u16,
            qpn: vals[2] as u32,
            psn: vals[3] as u32,
            rkey: vals[4] as u32,
            vaddr: vals[5],
            gid: Gid(gid),
            srqn,
        };
        if k.qpn == 0 {
            return Err("key record: QPN 0 is the subnet management QP, not a peer's QP".into());
        }
        if k.gid.to_ipv4().is_none() {
            return Err(format!(
                "key record: GID {:02x?} is not an IPv4-mapped address (RoCEv2 over IPv4)",
                k.gid.raw()
            ));
        }
        Ok(k)
    }

    /// The record in words, as perftest's address lines print it: `QPN
    /// 0x0011 PSN 0xabcdef RKey 0x12345678 VAddr 0x7f00deadbeef`.
    pub fn describe(&self) -> String {
        format!(
            "QPN {:#06x} PSN {:#08x} RKey {:#010x} VAddr {:#x}",
            self.qpn, self.psn, self.rkey, self.vaddr
        )
    }

    /// Check that `len` bytes from the record's address do not wrap the
    /// address space.
    pub fn check_span(&self, len: u64) -> Result<(), String> {
        self.vaddr.checked_add(len).map(|_| ()).ok_or_else(|| {
            format!(
                "key record: buffer address {:#x} + {len} bytes wraps the address space",
                self.vaddr
            )
        })
    }
}

/// A bandwidth result as perftest's client sends it to its server.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct BwReport {
    /// Message size (bytes).
    pub size: u64,
    /// Iterations.
    pub iters: u64,
    /// Peak bandwidth, in the sender's unit (MiB/s or Gb/s).
    pub peak: f64,
    /// Average bandwidth, same unit.
    pub avg: f64,
    /// Message rate (Mpps).
    pub msg_rate: f64,
}

impl BwReport {
    /// Check a peer's numbers: finite and not negative; a size of at most
    /// 8 MiB.
    pub fn check(&self) -> Result<(), String> {
        for (name, v) in [
            ("BW peak", self.peak),
            ("BW average", self.avg),
            ("message rate", self.msg_rate),
        ] {
            if !v.is_finite() || v < 0.0 {
                return Err(format!("peer's result: {name} {v} is not a rate"));
            }
        }
        if self.size == 0 || self.size > 8 << 20 {
            return Err(format!(
                "peer's result: message size {} is outside 1..=8388608",
                self.size
            ));
        }
        Ok(())
    }
}

/// perftest's out-of-band connection: the records above over one TCP
/// stream.
pub struct PerftestLink {
    stream: TcpStream,
    /// This side is the client (writes first).
    client: bool,
}

impl PerftestLink {
    /// Wrap a connected stream.
    pub fn new(stream: TcpStream, client: bool) -> PerftestLink {
        let _ = stream.set_nodelay(true);
        PerftestLink { stream, client }
    }

    /// Give the stream back (a rocelab peer continues in rocelab's
    /// exchange).
    pub fn into_stream(self) -> TcpStream {
        self.stream
    }

    /// Exchange equal-sized records: the client writes first, the server
    /// reads first, as perftest does. `what` names the record in errors.
    pub fn xchg<const N: usize>(&mut self, mine: &[u8; N], what: &str) -> Result<[u8; N], String> {
        let mut theirs = [0u8; N];
        if self.client {
            self.write(mine, what)?;
            self.read(&mut theirs, what)?;
        } else {
            self.read(&mut theirs, what)?;
            self.write(mine, what)?;
        }
        Ok(theirs)
    }

    fn write(&mut self, b: &[u8], what: &str) -> Result<(), String> {
        self.stream
            .write_all(b)
            .map_err(|e| format!("send {what} to peer: {e}"))
    }

    fn read(&mut self, b: &mut [u8], what: &str) -> Result<(), String> {
        self.stream.read_exact(b).map_err(|e| {
            if e.kind() == std::io::ErrorKind::UnexpectedEof {
                format!(
                    "peer closed the connection before its {what} ({} bytes)",
                    b.len()
                )
            } else {
                format!("receive {what} from peer: {e}")
            }
        })
    }

    /// Exchange key records (the handshake); returns the peer's.
    pub fn keys(&mut self, mine: &KeyRecord) -> Result<KeyRecord, String> {
        let theirs = self.xchg(&mine.encode(), "key record")?;
        KeyRecord::parse(&theirs)
    }

    /// A synchronisation point: a handshake whose record must be the one
    /// the peer sent before.
    pub fn hand_shake(&mut self, mine: &KeyRecord, theirs: &KeyRecord) -> Result<(), String> {
        let again = self.keys(mine)?;
        if again.qpn != theirs.qpn {
            return Err(format!(
                "the peer sent the key record of another QP ({}) where the handshake of its first QP ({}) was due",
                again.describe(),
                theirs.describe()
            ));
        }
        if again != *theirs {
            return Err(format!(
                "the peer's handshake does not repeat its key record: {} first, {} now",
                theirs.describe(),
                again.describe()
            ));
        }
        Ok(())
    }

    /// Exchange bandwidth results (5 exchanges of 8 bytes, big-endian);
    /// returns the peer's, unchecked: perftest's server sends a report it
    /// never filled, so only the server checks what it receives
    /// ([`BwReport::check`]).
    pub fn bw_reports(&mut self, mine: &BwReport) -> Result<BwReport, String> {
        let size = u64::from_be_bytes(self.xchg(&mine.size.to_be_bytes(), "result size")?);
        let iters = u64::from_be_bytes(self.xchg(&mine.iters.to_be_bytes(), "result iterations")?);
        let mut f = |v: f64, what: &str| -> Result<f64, String> {
            Ok(f64::from_bits(u64::from_be_bytes(
                self.xchg(&v.to_bits().to_be_bytes(), what)?,
            )))
        };
        let peak = f(mine.peak, "result BW peak")?;
        let avg = f(mine.avg, "result BW average")?;
        let msg_rate = f(mine.msg_rate, "result message rate")?;
        Ok(BwReport {
            size,
            iters,
            peak,
            avg,
            msg_rate,
        })
    }

    /// The close: a handshake, then `"done"` with its NUL; the peer's
    /// `"done"` is read (briefly) so that the connection ends cleanly.
    pub fn close(mut self, mine: &KeyRecord, theirs: &KeyRecord) -> Result<(), String> {
        self.hand_shake(mine, theirs)?;
        self.write(b"done\0", "close")?;
        let _ = self.stream.set_read_timeout(Some(Duration::from_secs(2)));
        let mut done = [0u8; 5];
        let _ = self.stream.read_exact(&mut done);
        let _ = self.stream.shutdown(std::net::Shutdown::Both);
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::net::Ipv4Addr;

    fn key() -> KeyRecord {
        KeyRecord {
            lid: 0x0102,
            out_reads: 16,
            qpn: 0x11,
            psn: 0xabcdef,
            rkey: 0x1234_5678,
            vaddr: 0x7f00_dead_beef,
            gid: Gid::from_ip(Ipv4Addr::new(127, 0, 1, 2).into()),
            srqn: 0,
        }
    }

    #[test]
    fn key_records_have_perftests_layout_and_round_trip() {
        let r = key().encode();
        let text = std::str::from_utf8(&r[..107]).unwrap();
        assert_eq!(
            text,
            "0102:0010:000011:abcdef:12345678:00007f00deadbeef:\
             00:00:00:00:00:00:00:00:00:00:ff:ff:7f:00:01:02:00000000:"
        );
        assert_eq!(r[107], 0);
        assert_eq!(KeyRecord::parse(&r), Ok(key()));
    }

    #[test]
    fn bad_key_records_name_the_field() {
        let good = key().encode();
        let with = |at: usize, b: u8| {
            let mut r = good;
            r[at] = b;
            KeyRecord::parse(&r).unwrap_err()
        };
        assert!(with(0, b'g').contains("LID"), "{}", with(0, b'g'));
        assert!(with(4, b'-').contains("no ':' after field LID"));
        assert!(with(10, b'+').contains("QPN"));
        assert!(with(107, b'x').contains("terminating NUL"));
        // A GID that is not IPv4-mapped.
        let mut g = key();
        g.gid = Gid([0xfe, 0x80, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 1]);
        assert!(KeyRecord::parse(&g.encode()).unwrap_err().contains("IPv4"));
        let mut q = key();
        q.qpn = 0;
        assert!(KeyRecord::parse(&q.encode()).unwrap_err().contains("QPN 0"));
        // All zeros (a peer that sent nothing sensible).
        assert!(KeyRecord::parse(&[0u8; KEY_LEN]).is_err());
        let mut v = key();
        v.vaddr = u64::MAX - 10;
        assert!(v.check_span(64).unwrap_err().contains("wraps"));
        assert_eq!(v.check_span(10), Ok(()));
    }

    #[test]
    fn version_records_carry_the_mark_and_refuse_old_peers() {
        let r = version_record();
        assert_eq!(&r[..5], b"6.06\0");
        let v = parse_version(&r).unwrap();
        assert!(v.rocelab && v.text == "6.06");
        let mut plain = [0u8; VERSION_LEN];
        plain[..4].copy_from_slice(b"6.06");
        assert!(!parse_version(&plain).unwrap().rocelab);
        let mut old = [0u8; VERSION_LEN];
        old[..4].copy_from_slice(b"5.60");
        assert!(parse_version(&old).unwrap_err().contains("older than 5.70"));
        assert!(parse_version(&[b'6'; VERSION_LEN])
            .unwrap_err()
            .contains("NUL"));
        let mut junk = [0u8; VERSION_LEN];
        junk[..3].copy_from_slice(b"a.b");
        assert!(parse_version(&junk).unwrap_err().contains("decimal"));
    }

    #[test]
    fn mtu_and_sys_records_are_checked() {
        assert_eq!(mtu_record(Mtu::Mtu1024), *b"3\0");
        assert_eq!(parse_mtu(b"5\0"), Ok(Mtu::Mtu4096));
        assert!(parse_mtu(b"6\0").is_err());
        assert!(parse_mtu(b"33").is_err());
        assert_eq!(check_sys(4096, 64), Ok(()));
        assert!(check_sys(0, 64).unwrap_err().contains("cycle buffer"));
        assert!(check_sys(u32::MAX, 64)
            .unwrap_err()
            .contains("cycle buffer"));
        assert!(check_sys(4096, 1 << 20).unwrap_err().contains("cache line"));
    }

    #[test]
    fn reports_cross_a_socket_big_endian_and_are_checked() {
        let l = std::net::TcpListener::bind((Ipv4Addr::LOCALHOST, 0)).unwrap();
        let addr = l.local_addr().unwrap();
        let mine = BwReport {
            size: 65536,
            iters: 5000,
            peak: 1234.5,
            avg: 1000.25,
            msg_rate: 0.016,
        };
        let t = std::thread::spawn(move || {
            let (s, _) = l.accept().unwrap();
            let mut server = PerftestLink::new(s, false);
            let bad = BwReport {
                avg: f64::NAN,
                ..mine
            };
            server.bw_reports(&bad)
        });
        let mut client = PerftestLink::new(TcpStream::connect(addr).unwrap(), true);
        let got = client.bw_reports(&mine).unwrap();
        let e = got.check().unwrap_err();
        assert!(e.contains("BW average"), "{e}");
        assert_eq!(t.join().unwrap(), Ok(mine));
        assert_eq!(mine.check(), Ok(()));
    }

    #[test]
    fn a_peer_that_hangs_up_mid_record_is_an_error() {
        let l = std::net::TcpListener::bind((Ipv4Addr::LOCALHOST, 0)).unwrap();
        let addr = l.local_addr().unwrap();
        let t = std::thread::spawn(move || {
            let (mut s, _) = l.accept().unwrap();
            s.write_all(&key().encode()[..50]).unwrap();
        });
        let s = TcpStream::connect(addr).unwrap();
        let mut server = PerftestLink::new(s, false);
        t.join().unwrap();
        let e = server.keys(&key()).unwrap_err();
        assert!(e.contains("closed the connection"), "{e}");
    }
}
