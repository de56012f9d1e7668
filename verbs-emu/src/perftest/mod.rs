//! perftest-compatible benchmarks (`ib_write_bw`, `ib_read_lat`, ...) over
//! any backend.
//!
//! [`Config`] holds perftest's flags with perftest's defaults
//! (REAL-NIC-FORMATS.md §1.5) plus rocelab's own (backend, bind address,
//! faults, capture, `--verify`). [`run`] plays the server (no peer address)
//! or the client, exchanges endpoints over TCP (port 18515 by default),
//! runs the test and prints perftest's header block and result table
//! ([`report`]; with `--out_json` also perftest's JSON file).
//!
//! The TCP exchange opens with perftest's own version record
//! ([`exchange`]). When the peer is one of perftest's programs, the rest
//! follows perftest's records and synchronisation points (`write_bw`,
//! `read_bw` and `send_lat`, RC, in either role); when both sides are
//! rocelab, it continues in rocelab's JSON lines, which carry what
//! perftest's records cannot (slot rings and credits for `--verify`, the
//! end of a `-D` run, `-b` results).
//!
//! Flags beyond the basics, as perftest defines them: `-b` (both sides
//! send; each prints the sum), `-l` (post lists; the CQ moderation becomes
//! the list size unless `-Q` is given), `-u` (RC timeout exponent), `-S`
//! (service level), `-T` (traffic class: the DSCP of the IP header),
//! `--run_infinitely` (a row per `-D` interval, 5 s by default, until
//! stopped), `--out_json`, size suffixes (`64K`, `1M`: [`parse_size`]),
//! and `-d NAME` that must name an existing device.
//!
//! With `verify`, the receiving side checks every byte of every message
//! against a pattern that depends on the message number and the offset, and
//! a mismatch is an error:
//!
//! * `send_bw`/`send_lat`: the receiver checks each receive buffer (RC
//!   delivers in order, so message k is known);
//! * `write_bw`: messages go to a ring of slots as RDMA WRITE with
//!   immediate (imm = message number); the server checks the slot on the
//!   receive completion and returns credits by RDMA WRITE into the
//!   client's memory, so that no slot is overwritten before it is checked;
//! * `write_lat`: each side checks the whole message when its last byte
//!   arrives;
//! * `read_bw`/`read_lat`: the client checks each READ's destination on
//!   completion against the server's fixed slot pattern;
//! * atomics: the client checks each fetched value against the sequence
//!   the server's counter must have taken.

use std::net::Ipv4Addr;
use std::path::PathBuf;

use crate::backend::BackendKind;
use crate::verbs::QpType;

pub mod exchange;
pub mod report;
mod run;

pub use run::{pattern_byte, run, PerftestError, ResultRow};

/// The benchmark.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Test {
    /// `ib_write_bw`.
    WriteBw,
    /// `ib_write_lat`.
    WriteLat,
    /// `ib_read_bw`.
    ReadBw,
    /// `ib_read_lat`.
    ReadLat,
    /// `ib_send_bw`.
    SendBw,
    /// `ib_send_lat`.
    SendLat,
    /// `ib_atomic_bw`.
    AtomicBw,
    /// `ib_atomic_lat`.
    AtomicLat,
}

/// The verb a test exercises.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Verb {
    /// SEND/RECV.
    Send,
    /// RDMA WRITE.
    Write,
    /// RDMA READ.
    Read,
    /// Atomic.
    Atomic,
}

impl Test {
    /// All tests, in perftest's order.
    pub const ALL: [Test; 8] = [
        Test::WriteBw,
        Test::WriteLat,
        Test::ReadBw,
        Test::ReadLat,
        Test::SendBw,
        Test::SendLat,
        Test::AtomicBw,
        Test::AtomicLat,
    ];

    /// The command-line name, e.g. `write_bw`.
    pub const fn name(self) -> &'static str {
        match self {
            Test::WriteBw => "write_bw",
            Test::WriteLat => "write_lat",
            Test::ReadBw => "read_bw",
            Test::ReadLat => "read_lat",
            Test::SendBw => "send_bw",
            Test::SendLat => "send_lat",
            Test::AtomicBw => "atomic_bw",
            Test::AtomicLat => "atomic_lat",
        }
    }

    /// The verb.
    pub const fn verb(self) -> Verb {
        match self {
            Test::WriteBw | Test::WriteLat => Verb::Write,
            Test::ReadBw | Test::ReadLat => Verb::Read,
            Test::SendBw | Test::SendLat => Verb::Send,
            Test::AtomicBw | Test::AtomicLat => Verb::Atomic,
        }
    }

    /// A bandwidth test (else latency).
    pub const fn is_bw(self) -> bool {
        matches!(
            self,
            Test::WriteBw | Test::ReadBw | Test::SendBw | Test::AtomicBw
        )
    }

    /// The title verb perftest prints.
    pub const fn title_verb(self) -> &'static str {
        match self.verb() {
            Verb::Send => "Send",
            Verb::Write => "RDMA_Write",
            Verb::Read => "RDMA_Read",
            Verb::Atomic => "Atomic FETCH_AND_ADD",
        }
    }
}

impl core::str::FromStr for Test {
    type Err = String;
    fn from_str(s: &str) -> Result<Test, String> {
        let s = s.strip_prefix("ib_").unwrap_or(s);
        Test::ALL
            .into_iter()
            .find(|t| t.name() == s)
            .ok_or_else(|| {
                format!(
                    "unknown test {s:?}: expected one of write_bw, write_lat, read_bw, read_lat, send_bw, send_lat, atomic_bw, atomic_lat"
                )
            })
    }
}

pub use crate::backend::fault::FaultConfig as Faults;

/// perftest's flags plus rocelab's. Defaults are perftest's.
#[derive(Debug, Clone, PartialEq)]
pub struct Config {
    /// The test.
    pub test: Test,
    /// The server's address; `None` makes this the server.
    pub server: Option<String>,
    /// TCP port of the out-of-band exchange (`-p`).
    pub port: u16,
    /// Device name (`-d`); `None` picks one.
    pub ib_dev: Option<String>,
    /// GID index (`-x`).
    pub gid_index: u32,
    /// Message size (`-s`); `None`: 65536 for BW, 2 for latency, 8 for
    /// atomics.
    pub size: Option<u64>,
    /// Iterations (`-n`); `None`: 5000 for write_bw, 1000 otherwise.
    pub iters: Option<u64>,
    /// All sizes 2..2^23 (`-a`).
    pub all: bool,
    /// Run for this many seconds instead of a count (`-D`).
    pub duration: Option<u64>,
    /// QPs (`-q`).
    pub qps: u32,
    /// Forced MTU in bytes (`-m`).
    pub mtu: Option<u32>,
    /// TX depth (`-t`); `None`: 128 for BW, 1 for latency.
    pub tx_depth: Option<u32>,
    /// RX depth (`-r`).
    pub rx_depth: u32,
    /// CQ moderation (`-Q`).
    pub cq_mod: u32,
    /// Connection type (`-c`).
    pub connection: QpType,
    /// Do not warn about CPU frequency (`-F`); accepted for compatibility.
    pub cpu_freq_ignore: bool,
    /// Report Gb/s (`--report_gbits`).
    pub report_gbits: bool,
    /// Max inline size (`-I`); `None`: 220 for write, 236 for send, 188 UD.
    pub inline_size: Option<u32>,
    /// Backend.
    pub backend: BackendKind,
    /// Local address to bind the emulated device to.
    pub bind: Option<Ipv4Addr>,
    /// UDP port of RoCEv2 (4791).
    pub udp_port: u16,
    /// Transmit-path faults.
    pub faults: Faults,
    /// Write every packet sent and received to this pcap file.
    pub pcap: Option<PathBuf>,
    /// Check every byte of every message.
    pub verify: bool,
    /// Check received ICRCs against the expected IPv4 header only
    /// (`--strict-icrc`; [`crate::backend::udp::UdpConfig::strict_icrc`]).
    pub strict_icrc: bool,
    /// Busy-poll the socket from the polling thread (default for latency
    /// tests, and for bandwidth tests of messages under
    /// [`BUSY_POLL_BELOW`]).
    pub busy_poll: Option<bool>,
    /// Both sides send at once and the result is their sum (`-b`,
    /// bandwidth tests).
    pub duplex: bool,
    /// Work requests per `ibv_post_send` call (`-l`); the CQ moderation
    /// becomes this size unless `-Q` is given.
    pub post_list: u32,
    /// Whether `-Q` was given (perftest then keeps it with `-l`).
    pub cq_mod_set: bool,
    /// The RC retransmission timeout exponent (`-u`): 4.096 µs × 2^u.
    pub qp_timeout: u8,
    /// Service level of the address vector (`-S`), 0..=15.
    pub sl: u8,
    /// Traffic class of the GRH, the IP TOS byte on RoCEv2 (`-T`,
    /// `--tclass`).
    pub traffic_class: u8,
    /// Print one result row per interval (`-D` seconds, default 5) until
    /// stopped (`--run_infinitely`, bandwidth tests).
    pub run_infinitely: bool,
    /// Write perftest's JSON report (its own, not strict JSON) to this
    /// file (`--out_json`, `--out_json_file`).
    pub out_json: Option<PathBuf>,
    /// Congestion control of this side's QPs (`--cc`, `--cc-param`,
    /// `--cnp-interval`; UDP backend). Local to each side: nothing of it
    /// is exchanged, and the notification point is always on.
    pub cc: roce::cc::CcSpec,
    /// Do not measure the peak bandwidth (`-N`, `--noPeak`): the peak
    /// column is 0.
    pub no_peak: bool,
    /// Print every latency sample, sorted, before the row (`-H`,
    /// `--report-histogram`).
    pub report_histogram: bool,
    /// Print every latency sample in the order taken, then sorted (`-U`,
    /// `--report-unsorted`, which implies `-H`).
    pub report_unsorted: bool,
    /// Sleep on completion events instead of polling (`-e`, `--events`).
    pub events: bool,
    /// Outstanding RDMA READs and atomics per QP (`-o`, `--outs`);
    /// `None`: the device's maximum (16).
    pub outs: Option<u8>,
    /// Fail unless the average bandwidth is at least this, in the table's
    /// unit (`-w`, `--limit_bw`).
    pub limit_bw: Option<f64>,
    /// Fail unless the message rate is at least this, Mpps (`-y`,
    /// `--limit_msgrate`).
    pub limit_msgrate: Option<f64>,
    /// With `-b`, print this side's and the peer's direction as rows of
    /// their own after the sum (`--report-both`).
    pub report_both: bool,
}

/// perftest's default `--out_json_file`.
pub const DEFAULT_JSON_FILE: &str = "perftest_out.json";

/// The interval of `--run_infinitely` without `-D` (seconds).
pub const DEFAULT_INFINITE_INTERVAL: u64 = 5;

/// Parse a message size as perftest does: a number (decimal, `0x` hex)
/// with an optional `K` (KiB) or `M` (MiB) suffix, e.g. `64K`, `1M`.
pub fn parse_size(s: &str) -> Result<u64, String> {
    let t = s.trim();
    let (num, factor) = match t.as_bytes().last() {
        Some(b'K') => (&t[..t.len() - 1], 1u64 << 10),
        Some(b'M') => (&t[..t.len() - 1], 1u64 << 20),
        _ => (t, 1),
    };
    let n = if let Some(h) = num.strip_prefix("0x").or_else(|| num.strip_prefix("0X")) {
        u64::from_str_radix(h, 16)
    } else {
        num.parse::<u64>()
    }
    .map_err(|_| {
        format!("message size {s:?}: expected a number with an optional K or M suffix (e.g. 64K)")
    })?;
    n.checked_mul(factor)
        .filter(|&v| v >= 1)
        .ok_or_else(|| format!("message size {s:?} must be at least 1 byte and fit 64 bits"))
}

/// Bandwidth tests busy-poll their CQ by default (as perftest's programs
/// always do) for messages smaller than this many bytes: their rate is
/// bound by the wake-ups a sleeping poller pays per batch of completions
/// (8-byte `write_bw` measured 0.58-0.85 M messages/s sleeping against
/// 1.55-1.67 M spinning on a 2-core host). Larger messages are bound by
/// the copies, and a spinning poller takes a core from them (64 KiB
/// `write_bw`: 4.90-4.96 GB/s spinning against 5.01-5.55 sleeping).
pub const BUSY_POLL_BELOW: u64 = 64 * 1024;

impl Config {
    /// Whether a bandwidth test of `size`-byte messages spins on its CQ
    /// rather than sleeping in it between completions (`busy_poll`, or by
    /// [`BUSY_POLL_BELOW`]; never with `-e`).
    pub fn bw_busy_poll(&self, size: u64) -> bool {
        !self.events && self.busy_poll.unwrap_or(size < BUSY_POLL_BELOW)
    }

    /// perftest's defaults for `test`, as the server.
    pub fn new(test: Test) -> Config {
        Config {
            test,
            server: None,
            port: 18515,
            ib_dev: None,
            gid_index: 0,
            size: None,
            iters: None,
            all: false,
            duration: None,
            qps: 1,
            mtu: None,
            tx_depth: None,
            rx_depth: 512,
            cq_mod: 100,
            connection: QpType::Rc,
            cpu_freq_ignore: false,
            report_gbits: false,
            inline_size: None,
            backend: BackendKind::Udp,
            bind: None,
            udp_port: 4791,
            faults: Faults::default(),
            pcap: None,
            verify: false,
            strict_icrc: false,
            busy_poll: None,
            duplex: false,
            post_list: 1,
            cq_mod_set: false,
            qp_timeout: 14,
            sl: 0,
            traffic_class: 0,
            run_infinitely: false,
            out_json: None,
            cc: roce::cc::CcSpec::default(),
            no_peak: false,
            report_histogram: false,
            report_unsorted: false,
            events: false,
            outs: None,
            limit_bw: None,
            limit_msgrate: None,
            report_both: false,
        }
    }

    /// The outstanding RDMA READs and atomics per QP (`-o`, else 16).
    pub fn outstanding_reads(&self) -> u8 {
        self.outs.unwrap_or(16)
    }

    /// The verifier limits of `-w` and `-y`: an error naming the limit a
    /// result `avg` (table unit) and `msg_rate` (Mpps) falls below.
    pub fn check_limits(&self, avg: f64, msg_rate: f64) -> Result<(), String> {
        if let Some(l) = self.limit_bw {
            if avg < l {
                return Err(format!(
                    " Test failed: BW average {avg:.2} is below the limit --limit_bw {l}"
                ));
            }
        }
        if let Some(l) = self.limit_msgrate {
            if msg_rate < l {
                return Err(format!(
                    " Test failed: MsgRate {msg_rate:.6} Mpps is below the limit --limit_msgrate {l}"
                ));
            }
        }
        Ok(())
    }

    /// CQ moderation before perftest's per-size rules: `-l` makes it the
    /// post list size unless `-Q` was given.
    pub fn base_cq_mod(&self) -> u32 {
        if self.post_list > 1 && !self.cq_mod_set {
            self.post_list
        } else {
            self.cq_mod
        }
    }

    /// The seconds between `--run_infinitely` rows.
    pub fn infinite_interval(&self) -> u64 {
        self.duration.unwrap_or(DEFAULT_INFINITE_INTERVAL)
    }

    /// The sizes to run: the one size, or 2..2^23 with `-a` (atomics: 8).
    pub fn sizes(&self) -> Vec<u64> {
        if self.test.verb() == Verb::Atomic {
            return vec![8];
        }
        if self.all {
            (1..=23).map(|p| 1u64 << p).collect()
        } else {
            vec![self
                .size
                .unwrap_or(if self.test.is_bw() { 65536 } else { 2 })]
        }
    }

    /// Iterations per size.
    pub fn iterations(&self) -> u64 {
        self.iters.unwrap_or(if self.test == Test::WriteBw {
            5000
        } else {
            1000
        })
    }

    /// TX depth.
    pub fn tx_depth(&self) -> u32 {
        self.tx_depth
            .unwrap_or(if self.test.is_bw() { 128 } else { 1 })
    }

    /// Max inline data for this test.
    pub fn inline_size(&self) -> u32 {
        match self.test.verb() {
            Verb::Read | Verb::Atomic => 0,
            Verb::Write => self
                .inline_size
                .unwrap_or(if self.test.is_bw() { 0 } else { 220 }),
            Verb::Send => self.inline_size.unwrap_or(if self.test.is_bw() {
                0
            } else if self.connection == QpType::Ud {
                188
            } else {
                236
            }),
        }
    }

    /// Check the combination of flags; the error says what is wrong.
    pub fn validate(&self) -> Result<(), String> {
        let sizes = self.sizes();
        if let Some(&max) = sizes.iter().max() {
            if max > 8 << 20 {
                return Err(format!(
                    "message size {max} is above perftest's limit of 8388608"
                ));
            }
            if max == 0 {
                return Err("message size 0 is not allowed".into());
            }
        }
        if self.iterations() < 5 {
            return Err(format!(
                "iterations {} must be at least 5",
                self.iterations()
            ));
        }
        if self.qps == 0 || self.qps > 64 {
            return Err(format!("number of QPs {} must be in 1..=64", self.qps));
        }
        if !self.test.is_bw() && self.qps != 1 {
            return Err("latency tests use exactly one QP".into());
        }
        if let Some(m) = self.mtu {
            if crate::verbs::Mtu::from_bytes(m).is_none() {
                return Err(format!("MTU {m} must be one of 256, 512, 1024, 2048, 4096"));
            }
        }
        let t = self.tx_depth();
        if t == 0 || t > 15000 {
            return Err(format!("TX depth {t} must be in 1..=15000"));
        }
        if self.cq_mod == 0 || self.cq_mod > 1024 {
            return Err(format!("CQ moderation {} must be in 1..=1024", self.cq_mod));
        }
        match (self.test.verb(), self.connection) {
            (Verb::Read | Verb::Atomic, QpType::Uc | QpType::Ud) => {
                return Err(format!(
                    "{} needs an RC connection (-c RC)",
                    self.test.name()
                ))
            }
            (Verb::Write, QpType::Ud) => {
                return Err("RDMA WRITE is not available on UD (-c RC or UC)".into())
            }
            _ => {}
        }
        if self.connection == QpType::Ud && sizes.iter().any(|&s| s > 4096) {
            return Err("UD messages must fit one MTU (at most 4096 bytes)".into());
        }
        for (name, p) in [
            ("--loss", self.faults.loss),
            ("--reorder", self.faults.reorder),
            ("--duplicate", self.faults.duplicate),
            ("--corrupt", self.faults.corrupt),
            ("--ce-mark", self.faults.ce_mark),
        ] {
            if !(0.0..=1.0).contains(&p) {
                return Err(format!("{name} {p} must be a probability in 0..=1"));
            }
        }
        if self.verify && self.connection != QpType::Rc && self.test.verb() != Verb::Send {
            return Err("--verify needs RC for WRITE tests".into());
        }
        if self.sl > 15 {
            return Err(format!("service level -S {} must be in 0..=15", self.sl));
        }
        if self.qp_timeout > 31 {
            return Err(format!(
                "QP timeout -u {} must be in 0..=31 (4.096 us x 2^u)",
                self.qp_timeout
            ));
        }
        if self.post_list == 0 || self.post_list > t {
            return Err(format!(
                "post list -l {} must be in 1..=TX depth ({t})",
                self.post_list
            ));
        }
        if self.post_list > 1 {
            if !self.test.is_bw() {
                return Err("post list (-l) is available in bandwidth tests only".into());
            }
            if self.duration.is_none()
                && !self.run_infinitely
                && self.iterations() % u64::from(self.post_list) != 0
            {
                return Err(format!(
                    "Number of iterations must be a multiple of post list size (-n {} -l {})",
                    self.iterations(),
                    self.post_list
                ));
            }
            if self.cq_mod_set && self.post_list % self.cq_mod != 0 {
                return Err(format!(
                    "Post list size must be a multiple of CQ moderation (-l {} -Q {})",
                    self.post_list, self.cq_mod
                ));
            }
        }
        if self.duplex {
            if !self.test.is_bw() {
                return Err(" Bidirectional is only available in BW test (-b)".into());
            }
            if self.verify {
                return Err("--verify checks one direction: leave out -b".into());
            }
            if self.test.verb() == Verb::Send {
                return Err("-b is available for write_bw, read_bw and atomic_bw".into());
            }
        }
        if let Some(o) = self.outs {
            if o == 0 || o > 16 {
                return Err(format!(
                    "outstanding reads -o {o} must be in 1..=16 (the device's maximum)"
                ));
            }
        }
        if self.report_both && !self.duplex {
            return Err("--report-both reports the two directions of -b: add -b".into());
        }
        if self.run_infinitely {
            if !self.test.is_bw() || self.test.verb() == Verb::Send {
                return Err(
                    "--run_infinitely is available for write_bw, read_bw and atomic_bw".into(),
                );
            }
            if self.verify || self.duplex || self.all {
                return Err("--run_infinitely runs one size in one direction without --verify (leave out -a, -b, --verify)".into());
            }
            if self.infinite_interval() == 0 {
                return Err("--run_infinitely needs an interval -D of at least 1 second".into());
            }
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn defaults_follow_perftest() {
        let c = Config::new(Test::WriteBw);
        assert_eq!(c.sizes(), vec![65536]);
        assert_eq!(c.iterations(), 5000);
        assert_eq!(c.tx_depth(), 128);
        assert_eq!(c.port, 18515);
        let l = Config::new(Test::SendLat);
        assert_eq!(l.sizes(), vec![2]);
        assert_eq!(l.iterations(), 1000);
        assert_eq!(l.tx_depth(), 1);
        assert_eq!(l.inline_size(), 236);
        let mut a = Config::new(Test::ReadBw);
        a.all = true;
        assert_eq!(a.sizes().first(), Some(&2));
        assert_eq!(a.sizes().last(), Some(&(8 << 20)));
        assert_eq!("ib_read_lat".parse::<Test>(), Ok(Test::ReadLat));
        assert!("write".parse::<Test>().is_err());
    }

    #[test]
    fn sizes_take_perftests_suffixes() {
        assert_eq!(parse_size("64K"), Ok(65536));
        assert_eq!(parse_size("1M"), Ok(1 << 20));
        assert_eq!(parse_size("4096"), Ok(4096));
        assert_eq!(parse_size("0x100"), Ok(256));
        assert!(parse_size("0").is_err());
        assert!(parse_size("64k").unwrap_err().contains("K or M"));
        assert!(parse_size("K").is_err());
        assert!(parse_size("99999999999999999999M").is_err());
    }

    #[test]
    fn new_flags_are_checked() {
        let mut c = Config::new(Test::WriteBw);
        c.post_list = 4;
        assert_eq!(c.validate(), Ok(()));
        assert_eq!(c.base_cq_mod(), 4);
        c.cq_mod_set = true;
        c.cq_mod = 3;
        assert!(c
            .validate()
            .unwrap_err()
            .contains("multiple of CQ moderation"));
        let mut c = Config::new(Test::WriteBw);
        c.post_list = 3;
        assert!(c.validate().unwrap_err().contains("multiple of post list"));
        c.post_list = 200;
        assert!(c.validate().unwrap_err().contains("TX depth"));
        let mut c = Config::new(Test::SendLat);
        c.duplex = true;
        assert!(c.validate().unwrap_err().contains("Bidirectional"));
        let mut c = Config::new(Test::WriteBw);
        c.sl = 16;
        assert!(c.validate().unwrap_err().contains("-S"));
        let mut c = Config::new(Test::ReadBw);
        c.run_infinitely = true;
        assert_eq!(c.validate(), Ok(()));
        assert_eq!(c.infinite_interval(), 5);
        c.all = true;
        assert!(c.validate().unwrap_err().contains("--run_infinitely"));
    }

    #[test]
    fn validate_names_the_bad_flag() {
        let mut c = Config::new(Test::ReadBw);
        c.connection = QpType::Uc;
        assert!(c.validate().unwrap_err().contains("RC"));
        let mut c = Config::new(Test::WriteBw);
        c.faults.loss = 1.5;
        assert!(c.validate().unwrap_err().contains("--loss"));
        let mut c = Config::new(Test::WriteBw);
        c.iters = Some(2);
        assert!(c.validate().unwrap_err().contains("at least 5"));
    }
}
