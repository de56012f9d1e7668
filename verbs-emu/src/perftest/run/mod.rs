//! The perftest runner: out-of-band exchange, resources, test loops.

use std::io::{BufRead, BufReader, Read, Write};
use std::net::{IpAddr, Ipv4Addr, SocketAddr, TcpListener, TcpStream, ToSocketAddrs};
use std::time::{Duration, Instant};

use serde::de::DeserializeOwned;
use serde::{Deserialize, Serialize};

use super::exchange::{self, KeyRecord, PerftestLink};
use super::report::{self, AddressInfo, HeaderInfo, LatencyStats};
use super::{Config, Test, Verb};
use crate::backend::{self, BackendKind, OpenRequest};
use crate::verbs::{
    AccessFlags, AddressHandle, AhAttr, CompletionQueue, Context, Endpoint, MemoryRegion, Mtu,
    ProtectionDomain, QpAttr, QpState, QpType, QueuePair, RecvWr, SendFlags, SendOp, SendWr, Sge,
    UdDest, VerbsError, WcOpcode, WorkCompletion,
};
use roce::wire::{Qpn, Rkey};

/// Why a perftest run failed.
#[derive(Debug, thiserror::Error)]
pub enum PerftestError {
    /// The flags do not make sense together.
    #[error("{0}")]
    Config(String),
    /// The out-of-band TCP exchange failed.
    #[error("out-of-band exchange: {0}")]
    Oob(String),
    /// A verb failed.
    #[error(transparent)]
    Verbs(#[from] VerbsError),
    /// A work completion had an error status (perftest's message).
    #[error("{0}")]
    Completion(String),
    /// `--verify` found a wrong byte.
    #[error("verify: {0}")]
    Verify(String),
}

type Result<T> = std::result::Result<T, PerftestError>;

const QKEY: u32 = 0x1111_1111;
/// Outstanding RDMA READs and atomics a QP accepts and issues (the
/// emulated device's `max_qp_rd_atom`).
const MAX_RD_ATOMIC: u16 = 16;
const GRH: usize = 40;
/// Most memory a side registers for verify slot rings.
const MAX_RING_BYTES: u64 = 64 << 20;

/// The byte at `offset` of message `msg` in `--verify` mode: a mix of both,
/// so that a misplaced, stale or shifted byte is caught.
pub fn pattern_byte(msg: u64, offset: usize) -> u8 {
    let word = pattern_word(msg, (offset / 8) as u64);
    (word >> ((offset % 8) * 8)) as u8
}

fn pattern_word(msg: u64, word: u64) -> u64 {
    let mut x = msg
        .wrapping_mul(0x9E37_79B9_7F4A_7C15)
        .wrapping_add(word.wrapping_mul(0xC2B2_AE3D_27D4_EB4F))
        .wrapping_add(0x1656_67B1_9E37_79F9);
    x ^= x >> 29;
    x = x.wrapping_mul(0xBF58_476D_1CE4_E5B9);
    x ^= x >> 32;
    x
}

fn fill_pattern(buf: &mut [u8], msg: u64) {
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
fn write_pattern(mr: &MemoryRegion, off: usize, len: usize, msg: u64) -> Result<()> {
    let mut buf = vec![0u8; len];
    fill_pattern(&mut buf, msg);
    Ok(mr.write(off, &buf)?)
}

/// A copy of `len` bytes of `mr` at `off` (verification reads a snapshot,
/// never the live buffer the backend writes).
fn read_bytes(mr: &MemoryRegion, off: usize, len: usize) -> Result<Vec<u8>> {
    let mut buf = vec![0u8; len];
    mr.read(off, &mut buf)?;
    Ok(buf)
}

fn check_pattern(buf: &[u8], msg: u64) -> std::result::Result<(), String> {
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

/// The out-of-band channel: one JSON document per line over TCP.
struct Oob {
    writer: TcpStream,
    reader: BufReader<TcpStream>,
}

impl Oob {
    fn new(s: TcpStream) -> Result<Oob> {
        let _ = s.set_nodelay(true);
        let r = s
            .try_clone()
            .map_err(|e| PerftestError::Oob(e.to_string()))?;
        Ok(Oob {
            writer: s,
            reader: BufReader::new(r),
        })
    }

    fn send<T: Serialize>(&mut self, v: &T) -> Result<()> {
        let mut line = serde_json::to_string(v).map_err(|e| PerftestError::Oob(e.to_string()))?;
        line.push('\n');
        self.writer
            .write_all(line.as_bytes())
            .map_err(|e| PerftestError::Oob(format!("send to peer: {e}")))
    }

    fn recv<T: DeserializeOwned>(&mut self) -> Result<T> {
        let mut line = String::new();
        let n = (&mut self.reader)
            .take(MAX_OOB_LINE)
            .read_line(&mut line)
            .map_err(|e| PerftestError::Oob(format!("receive from peer: {e}")))?;
        if n == 0 {
            return Err(PerftestError::Oob("peer closed the connection".into()));
        }
        if !line.ends_with('\n') {
            return Err(PerftestError::Oob(if n as u64 >= MAX_OOB_LINE {
                format!("peer message longer than {MAX_OOB_LINE} bytes")
            } else {
                "peer closed the connection in the middle of a message".into()
            }));
        }
        if line.trim().is_empty() {
            return Err(PerftestError::Oob("empty message from peer".into()));
        }
        serde_json::from_str(&line)
            .map_err(|e| PerftestError::Oob(format!("bad message from peer: {e}: {line:?}")))
    }

    /// A message if one is ready, without blocking.
    fn try_recv<T: DeserializeOwned>(&mut self) -> Result<Option<T>> {
        if !self.reader.buffer().is_empty() {
            return self.recv().map(Some);
        }
        self.writer
            .set_nonblocking(true)
            .map_err(|e| PerftestError::Oob(e.to_string()))?;
        let mut probe = [0u8; 1];
        let r = self.writer.peek(&mut probe);
        let _ = self.writer.set_nonblocking(false);
        match r {
            Ok(0) => Err(PerftestError::Oob("peer closed the connection".into())),
            Ok(_) => self.recv().map(Some),
            Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => Ok(None),
            Err(e) => Err(PerftestError::Oob(e.to_string())),
        }
    }

    fn barrier(&mut self, tag: &str) -> Result<()> {
        self.send(&Msg::Sync(tag.to_string()))?;
        match self.recv::<Msg>()? {
            Msg::Sync(t) if t == tag => Ok(()),
            Msg::Error(e) => Err(PerftestError::Oob(format!("peer failed: {e}"))),
            other => Err(PerftestError::Oob(format!(
                "expected sync {tag:?}, got {other:?}"
            ))),
        }
    }
}

#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
struct Hello {
    test: String,
    sizes: Vec<u64>,
    iters: u64,
    qps: u32,
    connection: String,
    duration: Option<u64>,
    verify: bool,
}

/// Longest out-of-band message accepted (a peer's endpoints for 64K QPs
/// stay far below).
const MAX_OOB_LINE: u64 = 1 << 20;

#[derive(Debug, Clone, Serialize, Deserialize)]
struct PeerInfo {
    endpoints: Vec<Endpoint>,
    slots: u64,
    slot_size: u64,
    credit_offset: u64,
    mtu: u32,
    device: String,
    /// Each endpoint's region address is its QP's own buffer (a perftest
    /// peer), not the start of one region shared by all QPs.
    #[serde(skip)]
    per_qp_buffers: bool,
}

impl PeerInfo {
    /// Check what a peer sent before anything is computed from it: one
    /// endpoint per QP, at least one slot, slots that hold the largest
    /// message, a ring and credit area whose arithmetic does not overflow,
    /// and (RC, UC) a region per endpoint that covers them. `max_size` is
    /// the largest message of the run.
    fn validate(&self, qps: usize, max_size: u64, ud: bool) -> std::result::Result<(), String> {
        if self.endpoints.len() != qps {
            return Err(format!(
                "peer has {} QPs, we have {qps}",
                self.endpoints.len()
            ));
        }
        if self.slots == 0 {
            return Err("peer offers 0 buffer slots".into());
        }
        if self.slot_size < max_size.max(1) {
            return Err(format!(
                "peer's slots of {} bytes cannot hold a {max_size}-byte message",
                self.slot_size
            ));
        }
        if self.mtu < 256 {
            return Err(format!("peer MTU {} is below 256", self.mtu));
        }
        let ring = self
            .slots
            .checked_mul(self.slot_size)
            .and_then(|r| r.checked_mul(qps as u64))
            .ok_or("peer's ring size overflows 64 bits")?;
        if self.credit_offset < ring {
            return Err(format!(
                "peer's credit area at {} overlaps its ring of {ring} bytes",
                self.credit_offset
            ));
        }
        let need = self
            .credit_offset
            .checked_add(64 * qps as u64)
            .ok_or("peer's credit area overflows 64 bits")?;
        if !ud {
            for (i, ep) in self.endpoints.iter().enumerate() {
                let Some(mr) = ep.mr else {
                    return Err(format!("peer QP {i} offers no memory region"));
                };
                if mr.len < need {
                    return Err(format!(
                        "peer QP {i}'s region of {} bytes is smaller than its ring and credits ({need})",
                        mr.len
                    ));
                }
            }
        }
        Ok(())
    }
}

#[derive(Debug, Clone, Serialize, Deserialize)]
enum Msg {
    Hello(Hello),
    Peer(PeerInfo),
    Sync(String),
    /// Client's bandwidth result for the server to print.
    Bw {
        size: u64,
        iters: u64,
        peak: f64,
        avg: f64,
        rate: f64,
    },
    /// Messages posted per QP (duration mode end).
    Posted(Vec<u64>),
    /// The peer failed.
    Error(String),
}

/// One result row of a run, as numbers (what the table prints).
#[derive(Debug, Clone, PartialEq)]
pub enum ResultRow {
    /// A bandwidth row; `peak` and `avg` in the table's unit.
    Bw {
        /// Message size.
        size: u64,
        /// Iterations.
        iters: u64,
        /// Peak bandwidth.
        peak: f64,
        /// Average bandwidth.
        avg: f64,
        /// Message rate in Mpps.
        msg_rate: f64,
    },
    /// A latency row.
    Lat {
        /// Message size.
        size: u64,
        /// Iterations.
        iters: u64,
        /// The statistics, microseconds.
        stats: LatencyStats,
    },
    /// A latency row in duration mode.
    LatDuration {
        /// Message size.
        size: u64,
        /// Iterations done.
        iters: u64,
        /// Mean latency, microseconds.
        avg_us: f64,
        /// Transactions per second.
        tps: f64,
    },
}

/// Run the perftest `cfg` describes; prints perftest's output on stdout and
/// returns the result rows.
pub fn run(cfg: &Config) -> Result<Vec<ResultRow>> {
    cfg.validate().map_err(PerftestError::Config)?;
    check_device_exists(cfg)?;
    let server = cfg.server.is_none();
    // A hardware device does not depend on the connection's addresses:
    // open it first, so that a host without one (no RDMA devices, no
    // libibverbs) fails at once instead of after a peer connects. The UDP
    // backend binds the address the connection reveals, so it waits.
    let early = match cfg.backend {
        BackendKind::Ibverbs => Some(open_device(
            cfg,
            server,
            Ipv4Addr::UNSPECIFIED,
            Ipv4Addr::UNSPECIFIED,
        )?),
        BackendKind::Udp => None,
    };
    let (stream, local_ip, peer_ip) = if let Some(host) = &cfg.server {
        connect(host, cfg.port)?
    } else {
        println!("{}", report::WAITING_BANNER);
        accept(cfg.port)?
    };
    // perftest's version record opens every connection; a rocelab peer
    // marks its own, and the two continue in rocelab's exchange.
    let mut pl = PerftestLink::new(stream, !server);
    let theirs = pl
        .xchg(&exchange::version_record(), "version")
        .and_then(|v| exchange::parse_version(&v))
        .map_err(PerftestError::Oob)?;
    if !theirs.rocelab {
        return run_with_perftest(cfg, pl, early, local_ip, peer_ip);
    }
    let mut oob = Link::Rocelab(Oob::new(pl.into_stream())?);
    let hello = Hello {
        test: cfg.test.name().into(),
        sizes: cfg.sizes(),
        iters: cfg.iterations(),
        qps: cfg.qps,
        connection: cfg.connection.as_str().into(),
        duration: cfg.duration,
        verify: cfg.verify,
    };
    oob.send(&Msg::Hello(hello.clone()))?;
    match oob.recv::<Msg>()? {
        Msg::Hello(peer) if peer == hello => {}
        Msg::Hello(peer) => {
            return Err(PerftestError::Config(format!(
                "the peer runs a different test: ours {hello:?}, theirs {peer:?}; give both sides the same flags"
            )))
        }
        other => return Err(PerftestError::Oob(format!("expected hello, got {other:?}"))),
    }
    let ctx = match early {
        Some(ctx) => Ok(ctx),
        None => open_device(cfg, server, local_ip, peer_ip),
    };
    let result = ctx
        .and_then(|ctx| Side::setup(ctx, cfg, server, &mut oob))
        .and_then(|mut side| {
            side.print_header();
            let rows = side.run_all(&mut oob)?;
            side.print_summary();
            side.print_counters()?;
            Ok(rows)
        });
    if let Err(e) = &result {
        let _ = oob.send(&Msg::Error(e.to_string()));
    }
    result
}

/// Why `cfg` cannot run against perftest's own programs, if it cannot:
/// perftest's exchange carries no rocelab extras, and rocelab follows
/// perftest's synchronisation for write_bw, read_bw and send_lat.
fn perftest_peer_support(cfg: &Config) -> std::result::Result<(), String> {
    if !matches!(cfg.test, Test::WriteBw | Test::ReadBw | Test::SendLat) {
        return Err(format!(
            "the peer is one of perftest's programs; rocelab speaks perftest's exchange for write_bw, read_bw and send_lat: for {} run rocelab perftest on both sides",
            cfg.test.name()
        ));
    }
    if cfg.verify {
        return Err("--verify needs rocelab perftest on both sides (the peer is perftest)".into());
    }
    if cfg.duration.is_some() && !cfg.test.is_bw() {
        return Err("-D with a perftest peer is supported for bandwidth tests only".into());
    }
    if cfg.connection != QpType::Rc {
        return Err("with a perftest peer, rocelab runs RC connections only (-c RC)".into());
    }
    if cfg.duplex {
        return Err("-b needs rocelab perftest on both sides (the peer is perftest)".into());
    }
    Ok(())
}

/// The run against perftest's own program: its exchange from the version
/// record on.
fn run_with_perftest(
    cfg: &Config,
    mut pl: PerftestLink,
    early: Option<Context>,
    local_ip: Ipv4Addr,
    peer_ip: Ipv4Addr,
) -> Result<Vec<ResultRow>> {
    perftest_peer_support(cfg).map_err(PerftestError::Config)?;
    let server = cfg.server.is_none();
    let (c, l) = exchange::sys_record(exchange::DEFAULT_CYCLE_BUFFER, exchange::DEFAULT_CACHE_LINE);
    let rc = u32::from_be_bytes(pl.xchg(&c, "cycle buffer").map_err(PerftestError::Oob)?);
    let rl = u32::from_be_bytes(pl.xchg(&l, "cache line size").map_err(PerftestError::Oob)?);
    exchange::check_sys(rc, rl).map_err(PerftestError::Oob)?;
    let ctx = match early {
        Some(ctx) => ctx,
        None => open_device(cfg, server, local_ip, peer_ip)?,
    };
    let port = ctx.query_port(1)?;
    let mtu_local = match cfg.mtu {
        Some(m) => Mtu::from_bytes(m).unwrap_or(port.active_mtu),
        None => port.active_mtu,
    };
    let theirs = pl
        .xchg(&exchange::mtu_record(mtu_local), "MTU")
        .and_then(|m| exchange::parse_mtu(&m))
        .map_err(PerftestError::Oob)?;
    let mtu = if theirs.bytes() < mtu_local.bytes() {
        theirs
    } else {
        mtu_local
    };
    let mut link = Link::Perftest(Box::new(PerftestPeer {
        link: pl,
        mine: Vec::new(),
        theirs: Vec::new(),
        cycle_buffer: exchange::DEFAULT_CYCLE_BUFFER.max(rc),
        cache_line: exchange::DEFAULT_CACHE_LINE.max(rl),
        mtu,
    }));
    let mut side = Side::setup(ctx, cfg, server, &mut link)?;
    side.print_header();
    let rows = side.run_all(&mut link)?;
    let Link::Perftest(p) = link else {
        unreachable!("the link stays perftest's")
    };
    let (mine, theirs) = (p.mine[0], p.theirs[0]);
    p.link.close(&mine, &theirs).map_err(PerftestError::Oob)?;
    side.print_counters()?;
    Ok(rows)
}

/// The peer's exchange: rocelab's (JSON lines) or perftest's records.
enum Link {
    /// rocelab perftest on the other side.
    Rocelab(Oob),
    /// perftest's own program on the other side.
    Perftest(Box<PerftestPeer>),
}

/// A perftest peer: the connection and what was agreed on it.
struct PerftestPeer {
    link: PerftestLink,
    /// Our key records, one per QP (resent at every handshake).
    mine: Vec<KeyRecord>,
    /// The peer's key records.
    theirs: Vec<KeyRecord>,
    /// The larger cycle buffer of the two sides (bytes): the span of our
    /// buffer a perftest writer or reader cycles through.
    cycle_buffer: u32,
    /// The larger cache line size (bytes).
    cache_line: u32,
    /// The smaller MTU of the two sides.
    mtu: Mtu,
}

impl PerftestPeer {
    /// Exchange key records, one per QP, and turn the peer's into its
    /// endpoints: each QP's buffer is the peer's address for that QP, one
    /// slot of the largest message.
    fn exchange_keys(
        &mut self,
        local: &PeerInfo,
        mr: &MemoryRegion,
        max_size: u64,
    ) -> Result<PeerInfo> {
        let mut endpoints = Vec::new();
        for (q, ep) in local.endpoints.iter().enumerate() {
            if ep.udp_port != exchange::ROCE_PORT {
                return Err(PerftestError::Config(format!(
                    "this side's device listens on UDP port {}; a perftest peer sends RoCEv2 to port {} only (use --bind to give this side its own address)",
                    ep.udp_port,
                    exchange::ROCE_PORT
                )));
            }
            let mine = KeyRecord {
                lid: ep.lid,
                out_reads: MAX_RD_ATOMIC,
                qpn: ep.qpn,
                psn: ep.psn,
                rkey: mr.rkey().value(),
                vaddr: Side::slot_addr(local, mr.addr(), q, 0),
                gid: ep.gid,
                srqn: 0,
            };
            let theirs = self.link.keys(&mine).map_err(PerftestError::Oob)?;
            theirs.check_span(max_size).map_err(PerftestError::Oob)?;
            self.mine.push(mine);
            self.theirs.push(theirs);
            endpoints.push(Endpoint {
                lid: theirs.lid,
                qpn: theirs.qpn,
                psn: theirs.psn,
                gid: theirs.gid,
                udp_port: exchange::ROCE_PORT,
                mtu: self.mtu,
                mr: Some(crate::verbs::RemoteMr {
                    addr: theirs.vaddr,
                    rkey: theirs.rkey,
                    len: max_size,
                }),
            });
        }
        Ok(PeerInfo {
            endpoints,
            slots: 1,
            slot_size: max_size,
            credit_offset: max_size,
            mtu: self.mtu.bytes(),
            device: String::new(),
            per_qp_buffers: true,
        })
    }

    fn hand_shake(&mut self) -> Result<()> {
        let (m, t) = (self.mine[0], self.theirs[0]);
        self.link.hand_shake(&m, &t).map_err(PerftestError::Oob)
    }
}

impl Link {
    fn rocelab(&mut self, what: &str) -> Result<&mut Oob> {
        match self {
            Link::Rocelab(o) => Ok(o),
            Link::Perftest(_) => Err(PerftestError::Oob(format!(
                "{what} needs rocelab perftest on both sides (the peer is perftest)"
            ))),
        }
    }

    fn send(&mut self, m: &Msg) -> Result<()> {
        self.rocelab("this step")?.send(m)
    }

    fn recv<T: DeserializeOwned>(&mut self) -> Result<T> {
        self.rocelab("this step")?.recv()
    }

    fn try_recv<T: DeserializeOwned>(&mut self) -> Result<Option<T>> {
        self.rocelab("this step")?.try_recv()
    }

    /// A synchronisation point: rocelab's tagged barrier, or perftest's
    /// handshake.
    fn barrier(&mut self, tag: &str) -> Result<()> {
        match self {
            Link::Rocelab(o) => o.barrier(tag),
            Link::Perftest(p) => p.hand_shake(),
        }
    }
}

/// As perftest's device lookup: `-d NAME` must name a device that exists,
/// before any peer is waited for. The emulation has one device per IPv4
/// interface (`udp_lo`, `udp_eth0`, ...); the hardware backend's open
/// checks its own names.
fn check_device_exists(cfg: &Config) -> Result<()> {
    let Some(name) = &cfg.ib_dev else {
        return Ok(());
    };
    if cfg.backend != BackendKind::Udp {
        return Ok(());
    }
    use crate::backend::Provider as _;
    let names: Vec<String> = crate::backend::udp::UdpProvider::default()
        .devices()?
        .into_iter()
        .map(|d| d.name)
        .collect();
    if names.contains(name) {
        return Ok(());
    }
    Err(PerftestError::Config(format!(
        " IB device {name} not found\n Unable to find the Infiniband/RoCE device (devices here: {})",
        names.join(", ")
    )))
}

fn to_v4(ip: IpAddr) -> Result<Ipv4Addr> {
    match ip {
        IpAddr::V4(v4) => Ok(v4),
        IpAddr::V6(v6) => v6.to_ipv4_mapped().ok_or_else(|| {
            PerftestError::Config(format!("{v6}: the UDP backend speaks RoCEv2 over IPv4"))
        }),
    }
}

fn connect(host: &str, port: u16) -> Result<(TcpStream, Ipv4Addr, Ipv4Addr)> {
    let addrs: Vec<SocketAddr> = (host, port)
        .to_socket_addrs()
        .map_err(|e| PerftestError::Oob(format!("cannot resolve {host}: {e}")))?
        .filter(SocketAddr::is_ipv4)
        .collect();
    let addr = *addrs
        .first()
        .ok_or_else(|| PerftestError::Oob(format!("{host} has no IPv4 address")))?;
    let deadline = Instant::now() + Duration::from_secs(5);
    let stream = loop {
        match TcpStream::connect(addr) {
            Ok(s) => break s,
            Err(e) if Instant::now() < deadline => {
                let _ = e;
                std::thread::sleep(Duration::from_millis(50));
            }
            Err(e) => {
                return Err(PerftestError::Oob(format!(
                    "Couldn't connect to {addr}: {e}"
                )))
            }
        }
    };
    let local = to_v4(
        stream
            .local_addr()
            .map_err(|e| PerftestError::Oob(e.to_string()))?
            .ip(),
    )?;
    Ok((stream, local, to_v4(addr.ip())?))
}

fn accept(port: u16) -> Result<(TcpStream, Ipv4Addr, Ipv4Addr)> {
    let l = TcpListener::bind((Ipv4Addr::UNSPECIFIED, port))
        .map_err(|e| PerftestError::Oob(format!("cannot listen on TCP port {port}: {e}")))?;
    let (s, peer) = l
        .accept()
        .map_err(|e| PerftestError::Oob(format!("accept: {e}")))?;
    let local = to_v4(
        s.local_addr()
            .map_err(|e| PerftestError::Oob(e.to_string()))?
            .ip(),
    )?;
    Ok((s, local, to_v4(peer.ip())?))
}

/// The addresses (and UDP ports) to try binding the emulated device to. On
/// loopback the client and the server share the host, so the client moves
/// to another 127/8 address (the server keeps the one the client connected
/// to); reaching its own host through another address, the client moves to
/// the next UDP ports instead (its endpoint tells the server which).
fn bind_candidates(
    cfg: &Config,
    server: bool,
    local: Ipv4Addr,
    peer: Ipv4Addr,
) -> Vec<(Ipv4Addr, u16)> {
    let port = cfg.udp_port;
    if let Some(b) = cfg.bind {
        return vec![(b, port)];
    }
    if server {
        return vec![(local, port)];
    }
    if !local.is_loopback() {
        if local != peer {
            return vec![(local, port)];
        }
        return (1..16u16).map(|k| (local, port.wrapping_add(k))).collect();
    }
    let o = peer.octets();
    let base = u32::from(Ipv4Addr::new(127, o[1], o[2], o[3]));
    (1..64u32)
        .map(|k| {
            let mut v = base.wrapping_add(k);
            if (v & 0xFF) == 0 || (v & 0xFF) == 0xFF {
                v = v.wrapping_add(2);
            }
            Ipv4Addr::from(0x7F00_0000 | (v & 0x00FF_FFFF))
        })
        .filter(|a| *a != peer)
        .map(|a| (a, port))
        .collect()
}

fn open_device(cfg: &Config, server: bool, local: Ipv4Addr, peer: Ipv4Addr) -> Result<Context> {
    let mut last = None;
    for (ip, udp_port) in bind_candidates(cfg, server, local, peer) {
        let req = OpenRequest {
            kind: cfg.backend,
            device: cfg.ib_dev.clone(),
            bind: ip,
            udp_port,
            faults: cfg.faults,
            pcap: cfg.pcap.clone(),
            busy_poll: cfg.busy_poll.unwrap_or(!cfg.test.is_bw()),
            cc: cfg.cc,
        };
        match backend::open(&req) {
            Ok(b) => return Ok(Context::from_backend(b)),
            Err(VerbsError::Os { source, .. })
                if source.kind() == std::io::ErrorKind::AddrInUse
                    && cfg.bind.is_none()
                    && !server =>
            {
                last = Some(VerbsError::Os {
                    verb: "bind",
                    source,
                });
            }
            Err(VerbsError::Os { verb, source }) if source.kind() == std::io::ErrorKind::AddrInUse => {
                return Err(PerftestError::Config(format!(
                    "{verb} {ip}:{udp_port}: {source}; another device is there: pick another address with --bind or port with --udp-port"
                )))
            }
            Err(e) => return Err(e.into()),
        }
    }
    Err(last
        .unwrap_or_else(|| VerbsError::NoDevice(" to bind".into()))
        .into())
}

/// The address vector to a peer's endpoint with `-S` (service level) and
/// `-T` (traffic class: the IP TOS byte on RoCEv2).
fn address_vector(cfg: &Config, rep: &Endpoint) -> AhAttr {
    let mut av = AhAttr::to_gid(rep.gid);
    av.dport = Some(rep.udp_port);
    av.sl = cfg.sl;
    av.traffic_class = cfg.traffic_class;
    av
}

/// The INIT, RTR and RTS attributes of a connected QP, as perftest's
/// `ctx_connect` sets them: `-u` the retransmission timeout, retry and RNR
/// retry 7, RNR timer 12, 16 outstanding reads each way (RC).
fn connect_attrs(
    cfg: &Config,
    local_psn: u32,
    rep: &Endpoint,
    mtu: Mtu,
    access: AccessFlags,
) -> (QpAttr, QpAttr, QpAttr) {
    let rc = cfg.connection == QpType::Rc;
    let init = QpAttr::new()
        .with_state(QpState::Init)
        .with_pkey_index(0)
        .with_port(1)
        .with_access_flags(access);
    let mut rtr = QpAttr::new()
        .with_state(QpState::Rtr)
        .with_av(address_vector(cfg, rep))
        .with_path_mtu(mtu)
        .with_dest_qpn(Qpn::new(rep.qpn))
        .with_rq_psn(rep.psn);
    let mut rts = QpAttr::new()
        .with_state(QpState::Rts)
        .with_sq_psn(local_psn);
    if rc {
        rtr = rtr
            .with_max_dest_rd_atomic(MAX_RD_ATOMIC as u8)
            .with_min_rnr_timer(12);
        rts = rts
            .with_timeout(cfg.qp_timeout)
            .with_retry_cnt(7)
            .with_rnr_retry(7)
            .with_max_rd_atomic(MAX_RD_ATOMIC as u8);
    }
    (init, rtr, rts)
}

/// One side of the test: its resources and the peer's.
struct Side {
    cfg: Config,
    server: bool,
    _ctx: Context,
    _pd: ProtectionDomain,
    cq: CompletionQueue,
    mr: MemoryRegion,
    qps: Vec<QueuePair>,
    ahs: Vec<AddressHandle>,
    local: PeerInfo,
    remote: PeerInfo,
    mtu: u32,
    device: String,
    /// `--verify`: messages and bytes checked so far (one tally however
    /// many places check).
    verified: std::cell::Cell<(u64, u64)>,
    /// The device's counters when the run started (before its QPs), and
    /// when: the end-of-run block is the difference.
    counters_at_start: crate::verbs::Result<Vec<(String, u64)>>,
    started: Instant,
    /// The last `--out_json` report written, to which the end of the run
    /// adds its counters.
    json_written: std::cell::RefCell<Option<String>>,
}

fn psn_for(seed: u64, qpn: u32, server: bool) -> u32 {
    (pattern_word(seed ^ u64::from(server), u64::from(qpn)) & 0xFF_FFFF) as u32
}

impl Side {
    fn setup(ctx: Context, cfg: &Config, server: bool, oob: &mut Link) -> Result<Side> {
        let counters_at_start = ctx.counters();
        let started = Instant::now();
        let device = ctx.query_device()?.name;
        let port = ctx.query_port(1)?;
        let pd = ctx.alloc_pd()?;
        let max_size = *cfg.sizes().iter().max().unwrap_or(&65536);
        let qps_n = u64::from(cfg.qps);
        let tx = u64::from(cfg.tx_depth());
        let rx = u64::from(cfg.rx_depth);
        let ud = cfg.connection == QpType::Ud;
        let slot_size = match oob {
            // A perftest peer cycles through max(size, cycle buffer) bytes
            // from each QP's address, in cache-line steps.
            Link::Perftest(p) => {
                let span = max_size.max(u64::from(p.cycle_buffer));
                span.div_ceil(u64::from(p.cache_line)) * u64::from(p.cache_line)
            }
            Link::Rocelab(_) if ud => max_size + GRH as u64,
            Link::Rocelab(_) => max_size.max(8),
        };
        // Slots per QP: enough for the queue depths in verify mode (a ring),
        // one (or two for ping-pong) otherwise, as perftest uses.
        let want_slots = if cfg.verify {
            match (cfg.test.verb(), server) {
                (Verb::Send, true) => rx,
                (Verb::Send, false) => tx,
                (Verb::Write, true) if cfg.test.is_bw() => (2 * tx).max(rx),
                (Verb::Write, false) if cfg.test.is_bw() => tx,
                (Verb::Read, true) => 2 * tx,
                (Verb::Read, false) => tx,
                (Verb::Atomic, _) => tx.max(1),
                _ => 2,
            }
        } else {
            match (cfg.test.verb(), server, cfg.test.is_bw()) {
                (Verb::Send, true, true) => rx.min(64),
                (Verb::Atomic, _, _) => tx.max(1),
                (_, _, false) => 2,
                _ => 1,
            }
        };
        let max_slots = (MAX_RING_BYTES / (slot_size * qps_n)).max(2);
        let slots = want_slots.clamp(1, max_slots);
        let credit_offset = slots * slot_size * qps_n;
        let mr_len = credit_offset + 64 * qps_n;
        let access = AccessFlags::LOCAL_WRITE
            | AccessFlags::REMOTE_WRITE
            | AccessFlags::REMOTE_READ
            | AccessFlags::REMOTE_ATOMIC;
        let mr = pd.alloc_mr(mr_len as usize, access)?;
        if let Some(why) = mr.pin_error() {
            eprintln!(" Note: memory not pinned: {why}");
        }
        // The read responder's slots carry their pattern from the start.
        if server && cfg.test.verb() == Verb::Read {
            for q in 0..qps_n {
                for s in 0..slots {
                    let off = ((q * slots + s) * slot_size) as usize;
                    write_pattern(&mr, off, max_size as usize, s)?;
                }
            }
        }
        let cqe = (tx + rx + 16) as u32 * cfg.qps;
        let cq = ctx.create_cq(cqe)?;
        let inline = cfg.inline_size();
        let mut qps = Vec::new();
        for _ in 0..cfg.qps {
            qps.push(
                pd.qp_builder(cfg.connection)
                    .cq(&cq)
                    .max_send_wr(cfg.tx_depth().max(16))
                    .max_recv_wr(cfg.rx_depth.max(16))
                    .max_inline_data(inline.max(64))
                    .build()?,
            );
        }
        let mtu_local = match oob {
            Link::Perftest(p) => p.mtu.bytes(),
            Link::Rocelab(_) => cfg.mtu.unwrap_or(port.active_mtu.bytes()),
        };
        let mut endpoints = Vec::new();
        for qp in &qps {
            let psn = psn_for(cfg.faults.seed, qp.qpn().value(), server);
            endpoints.push(qp.endpoint(psn, cfg.gid_index, Some(&mr))?);
        }
        let local = PeerInfo {
            endpoints,
            slots,
            slot_size,
            credit_offset,
            mtu: mtu_local,
            device: device.clone(),
            per_qp_buffers: false,
        };
        let remote = match oob {
            Link::Rocelab(o) => {
                o.send(&Msg::Peer(local.clone()))?;
                let remote = match o.recv::<Msg>()? {
                    Msg::Peer(p) => p,
                    Msg::Error(e) => return Err(PerftestError::Oob(format!("peer failed: {e}"))),
                    other => {
                        return Err(PerftestError::Oob(format!(
                            "expected endpoints, got {other:?}"
                        )))
                    }
                };
                remote
                    .validate(qps.len(), max_size, ud)
                    .map_err(PerftestError::Oob)?;
                remote
            }
            Link::Perftest(p) => p.exchange_keys(&local, &mr, max_size)?,
        };
        // perftest >= 5.1: both sides use the smaller MTU.
        let mtu = mtu_local.min(remote.mtu).min(4096);
        let ib_mtu = Mtu::from_bytes(mtu).unwrap_or(Mtu::Mtu1024);
        let mut ahs = Vec::new();
        for (i, qp) in qps.iter().enumerate() {
            let lep = &local.endpoints[i];
            let rep = &remote.endpoints[i];
            if ud {
                ahs.push(pd.create_ah(&address_vector(cfg, rep))?);
                qp.modify(
                    &QpAttr::new()
                        .with_state(QpState::Init)
                        .with_pkey_index(0)
                        .with_port(1)
                        .with_qkey(QKEY),
                )?;
                qp.modify(&QpAttr::new().with_state(QpState::Rtr))?;
                qp.modify(&QpAttr::new().with_state(QpState::Rts).with_sq_psn(lep.psn))?;
            } else {
                let (init, rtr, rts) = connect_attrs(cfg, lep.psn, rep, ib_mtu, access);
                for a in [init, rtr, rts] {
                    qp.modify(&a).map_err(|e| {
                        PerftestError::Config(format!("Failed to modify QP to RTR/RTS: {e}"))
                    })?;
                }
            }
        }
        match oob {
            Link::Rocelab(o) => o.barrier("connected")?,
            // perftest: a handshake per QP after its move to RTR/RTS, and
            // one more.
            Link::Perftest(p) => {
                for _ in 0..=qps.len() {
                    p.hand_shake()?;
                }
            }
        }
        Ok(Side {
            cfg: cfg.clone(),
            server,
            _ctx: ctx,
            _pd: pd,
            cq,
            mr,
            qps,
            ahs,
            local,
            remote,
            mtu,
            device,
            verified: std::cell::Cell::new((0, 0)),
            counters_at_start,
            started,
            json_written: std::cell::RefCell::new(None),
        })
    }

    /// The settings the header block and the JSON report show.
    fn header_info(&self) -> HeaderInfo {
        let cfg = &self.cfg;
        let t = cfg.test;
        let send_server = t.verb() == Verb::Send && self.server;
        HeaderInfo {
            verb: t.title_verb(),
            bandwidth: t.is_bw(),
            duplex: cfg.duplex,
            post_list: (cfg.post_list > 1).then_some(cfg.post_list),
            device: self.device.clone(),
            num_qps: cfg.qps,
            connection: cfg.connection.as_str(),
            tx_depth: (!self.server || cfg.duplex).then(|| cfg.tx_depth()),
            rx_depth: send_server.then_some(cfg.rx_depth),
            cq_mod: t
                .is_bw()
                .then(|| self.cq_mod(*cfg.sizes().first().unwrap_or(&0))),
            mtu: self.mtu,
            link_ethernet: true,
            gid_index: Some(cfg.gid_index),
            max_inline: matches!(t.verb(), Verb::Send | Verb::Write).then(|| cfg.inline_size()),
            outstanding_reads: matches!(t.verb(), Verb::Read | Verb::Atomic)
                .then_some(u32::from(MAX_RD_ATOMIC)),
        }
    }

    /// `--out_json`: write perftest's report of `r` (each row replaces
    /// the last, as perftest rewrites its file).
    fn write_json(&self, r: &report::JsonResult<'_>) -> Result<()> {
        let Some(path) = &self.cfg.out_json else {
            return Ok(());
        };
        let text = report::json_report(&self.header_info(), r);
        std::fs::write(path, &text).map_err(|e| {
            PerftestError::Config(format!("--out_json_file {}: {e}", path.display()))
        })?;
        *self.json_written.borrow_mut() = Some(text);
        Ok(())
    }

    /// The end-of-run counter block ([`report::counter_block`]): what the
    /// device counted from the start of the run to now, printed and added
    /// to the `--out_json` report. A device whose counters cannot be read
    /// says so instead.
    fn print_counters(&self) -> Result<()> {
        let seconds = self.started.elapsed().as_secs_f64();
        let delta = match (&self.counters_at_start, &self._ctx.counters()) {
            (Ok(before), Ok(now)) => backend::counters::delta(before, now),
            (Err(e), _) | (_, Err(e)) => {
                println!(
                    " {} device {}: counters unavailable: {e}",
                    report::COUNTERS_TITLE,
                    self.device
                );
                return Ok(());
            }
        };
        if delta.is_empty() {
            return Ok(());
        }
        print!("{}", report::counter_block(&self.device, seconds, &delta));
        let (Some(path), Some(text)) = (&self.cfg.out_json, self.json_written.borrow().clone())
        else {
            return Ok(());
        };
        std::fs::write(path, report::json_with_counters(&text, &delta))
            .map_err(|e| PerftestError::Config(format!("--out_json_file {}: {e}", path.display())))
    }

    /// `--out_json` of a result row.
    fn write_json_row(&self, row: &ResultRow) -> Result<()> {
        let r = match row {
            ResultRow::Bw {
                size,
                iters,
                peak,
                avg,
                msg_rate,
            } => report::JsonResult::Bw {
                size: *size,
                iters: *iters,
                peak: *peak,
                avg: *avg,
                msg_rate: *msg_rate,
                gbits: self.cfg.report_gbits,
            },
            ResultRow::Lat { size, iters, stats } => report::JsonResult::Lat {
                size: *size,
                iters: *iters,
                stats,
            },
            ResultRow::LatDuration {
                size,
                iters,
                avg_us,
                tps,
            } => report::JsonResult::LatDuration {
                size: *size,
                iters: *iters,
                avg_us: *avg_us,
                tps: *tps,
            },
        };
        self.write_json(&r)
    }

    fn print_header(&self) {
        let cfg = &self.cfg;
        let t = cfg.test;
        let h = self.header_info();
        println!("{}", report::header_block(&h));
        let rdma = matches!(t.verb(), Verb::Read | Verb::Write);
        let out = (t.verb() == Verb::Read).then_some(16);
        for (l, r) in self.local.endpoints.iter().zip(&self.remote.endpoints) {
            for (is_local, ep) in [(true, l), (false, r)] {
                let a = AddressInfo {
                    lid: ep.lid,
                    qpn: ep.qpn,
                    psn: ep.psn,
                    out_reads: out,
                    rkey_vaddr: if rdma {
                        ep.mr.map(|m| (m.rkey, m.addr))
                    } else {
                        None
                    },
                    gid: Some(ep.gid),
                };
                println!("{}", report::address_lines(is_local, &a));
            }
        }
        println!("{}", report::RESULT_LINE);
        if t.is_bw() {
            println!(
                "{}",
                if cfg.report_gbits {
                    report::BW_HEADER_GBITS
                } else {
                    report::BW_HEADER_MIB
                }
            );
        } else if cfg.duration.is_some() {
            println!("{}", report::LAT_DUR_HEADER);
        } else {
            println!("{}", report::LAT_HEADER);
        }
    }

    /// After the results: what `--verify` checked, what fault injection
    /// did on this side's transmit path, and what the transport did about
    /// it (from the device's counters, under their counter names). The
    /// transport line is printed when faults are injected or something
    /// happened, so a clean run keeps perftest's output.
    fn print_summary(&self) {
        if self.cfg.verify {
            match self.verified.get() {
                (0, _) => println!(
                    " Verified: this side sends the expected pattern; the peer checks every byte it gets"
                ),
                (msgs, bytes) => println!(
                    " Verified: {msgs} messages, {bytes} bytes checked byte for byte against the expected pattern"
                ),
            }
        }
        let Ok(counters) = self._ctx.counters() else {
            return;
        };
        let get = |name: &str| {
            counters
                .iter()
                .find_map(|(n, v)| (n == name).then_some(*v))
                .unwrap_or(0)
        };
        if self.cfg.faults.any() {
            let injected: Vec<String> = counters
                .iter()
                .filter_map(|(n, v)| Some(format!("{} {v}", n.strip_prefix("fault_")?)))
                .collect();
            println!(" Faults injected (packets sent): {}", injected.join(", "));
        }
        const TRANSPORT: [(&str, &str); 8] = [
            ("roce_adp_retrans", "packets retransmitted"),
            ("local_ack_timeout_err", "ACK timeouts"),
            ("packet_seq_err", "sequence NAKs received"),
            ("rnr_nak_retry_err", "RNR NAKs received"),
            ("implied_nak_seq_err", "implied NAKs"),
            ("out_of_sequence", "requests out of sequence"),
            ("duplicate_request", "duplicate requests"),
            ("rx_icrc_encapsulated", "ICRC errors"),
        ];
        if self.cfg.faults.any() || TRANSPORT.iter().any(|(n, _)| get(n) > 0) {
            let did: Vec<String> = TRANSPORT
                .iter()
                .map(|(n, what)| format!("{} {what} ({n})", get(n)))
                .collect();
            println!(" Transport: {}", did.join(", "));
        }
    }

    /// Count one message of `bytes` bytes as checked by `--verify`.
    fn tally(&self, bytes: u64) {
        let (m, b) = self.verified.get();
        self.verified.set((m + 1, b + bytes));
    }

    /// perftest forces CQ moderation 1 above 8 KiB messages (single size)
    /// unless `-Q` or `-l` was given.
    fn cq_mod(&self, size: u64) -> u32 {
        let m = if size > 8192
            && !self.cfg.all
            && self.cfg.connection != QpType::Ud
            && !self.cfg.cq_mod_set
            && self.cfg.post_list == 1
        {
            1
        } else {
            self.cfg.base_cq_mod()
        };
        m.min(self.cfg.tx_depth()).max(1)
    }

    fn run_all(&mut self, oob: &mut Link) -> Result<Vec<ResultRow>> {
        let mut rows = Vec::new();
        let mut warned = false;
        let perftest = matches!(oob, Link::Perftest(_));
        if perftest && self.server && self.cfg.test.is_bw() {
            // perftest's server of a one-way bandwidth test waits for the
            // client's result and prints it.
            let row = self.perftest_bw_result(oob, None)?;
            println!("{}", report::RESULT_LINE);
            return Ok(vec![row]);
        }
        for size in self.cfg.sizes() {
            if !perftest {
                oob.barrier(&format!("size {size}"))?;
            }
            if self.cfg.test.is_bw() {
                let row = match (self.cfg.test.verb(), self.server) {
                    _ if self.cfg.duplex => self.duplex_bw(size, oob)?,
                    (Verb::Send, true) => self.send_bw_server(size, oob)?,
                    (Verb::Write, true) if self.cfg.verify => {
                        self.write_verify_server(size, oob)?
                    }
                    (_, true) => match oob.recv::<Msg>()? {
                        Msg::Bw {
                            size,
                            iters,
                            peak,
                            avg,
                            rate,
                        } => BwRow {
                            size,
                            iters,
                            peak,
                            avg,
                            rate,
                        },
                        Msg::Error(e) => {
                            return Err(PerftestError::Oob(format!("peer failed: {e}")))
                        }
                        other => {
                            return Err(PerftestError::Oob(format!(
                                "expected results, got {other:?}"
                            )))
                        }
                    },
                    (_, false) => {
                        let row = self.bw_client(size, oob)?;
                        let server_measures = self.cfg.test.verb() == Verb::Send
                            || (self.cfg.test.verb() == Verb::Write && self.cfg.verify);
                        if perftest {
                            // Sent after the last size (below).
                        } else if !server_measures {
                            oob.send(&Msg::Bw {
                                size: row.size,
                                iters: row.iters,
                                peak: row.peak,
                                avg: row.avg,
                                rate: row.rate,
                            })?;
                        }
                        row
                    }
                };
                if (self.cfg.duration.is_some() || row.peak == 0.0) && !warned {
                    println!("{}", report::NO_PEAK_WARNING);
                    warned = true;
                }
                println!(
                    "{}",
                    report::bw_row(
                        row.size,
                        row.iters,
                        row.peak,
                        row.avg,
                        row.rate,
                        self.cfg.report_gbits
                    )
                );
                rows.push(ResultRow::Bw {
                    size: row.size,
                    iters: row.iters,
                    peak: row.peak,
                    avg: row.avg,
                    msg_rate: row.rate,
                });
                self.write_json_row(&rows[rows.len() - 1])?;
            } else {
                if let Some(r) = self.lat(size, oob)? {
                    let line = match &r {
                        ResultRow::Lat { size, iters, stats } => {
                            report::lat_row(*size, *iters, stats)
                        }
                        ResultRow::LatDuration {
                            size,
                            iters,
                            avg_us,
                            tps,
                        } => report::lat_dur_row(*size, *iters, *avg_us, *tps),
                        ResultRow::Bw { .. } => String::new(),
                    };
                    println!("{line}");
                    self.write_json_row(&r)?;
                    rows.push(r);
                }
            }
            if !perftest {
                oob.barrier(&format!("done {size}"))?;
            }
        }
        println!("{}", report::RESULT_LINE);
        if perftest && self.cfg.test.is_bw() {
            // The client's last result goes to perftest's server.
            if let Some(ResultRow::Bw {
                size,
                iters,
                peak,
                avg,
                msg_rate,
            }) = rows.last()
            {
                let mine = exchange::BwReport {
                    size: *size,
                    iters: *iters,
                    peak: *peak,
                    avg: *avg,
                    msg_rate: *msg_rate,
                };
                self.perftest_bw_result(oob, Some(mine))?;
            }
        }
        Ok(rows)
    }

    /// The end of a one-way bandwidth test with a perftest peer: a
    /// handshake, then the client's result crosses to the server, which
    /// prints it. `mine` is the client's result (`None` on the server);
    /// returns the server's row.
    fn perftest_bw_result(
        &mut self,
        oob: &mut Link,
        mine: Option<exchange::BwReport>,
    ) -> Result<ResultRow> {
        let Link::Perftest(p) = oob else {
            return Err(PerftestError::Oob("not a perftest peer".into()));
        };
        p.hand_shake()?;
        let client = mine.is_some();
        // perftest's server sends a report it never filled: zeros from us.
        let mine = mine.unwrap_or(exchange::BwReport {
            size: 0,
            iters: 0,
            peak: 0.0,
            avg: 0.0,
            msg_rate: 0.0,
        });
        let theirs = p.link.bw_reports(&mine).map_err(PerftestError::Oob)?;
        if client {
            return Ok(ResultRow::Bw {
                size: mine.size,
                iters: mine.iters,
                peak: mine.peak,
                avg: mine.avg,
                msg_rate: mine.msg_rate,
            });
        }
        theirs.check().map_err(PerftestError::Oob)?;
        if theirs.peak == 0.0 {
            println!("{}", report::NO_PEAK_WARNING);
        }
        println!(
            "{}",
            report::bw_row(
                theirs.size,
                theirs.iters,
                theirs.peak,
                theirs.avg,
                theirs.msg_rate,
                self.cfg.report_gbits
            )
        );
        let row = ResultRow::Bw {
            size: theirs.size,
            iters: theirs.iters,
            peak: theirs.peak,
            avg: theirs.avg,
            msg_rate: theirs.msg_rate,
        };
        self.write_json_row(&row)?;
        Ok(row)
    }

    fn slot_addr(info: &PeerInfo, base: u64, qp: usize, slot: u64) -> u64 {
        let qp_base = if info.per_qp_buffers {
            0
        } else {
            qp as u64 * info.slots
        };
        base + (qp_base + slot % info.slots) * info.slot_size
    }

    fn local_slot(&self, qp: usize, slot: u64) -> (u64, usize) {
        let a = Self::slot_addr(&self.local, self.mr.addr(), qp, slot);
        (a, (a - self.mr.addr()) as usize)
    }

    fn remote_slot(&self, qp: usize, slot: u64) -> u64 {
        let m = self.remote.endpoints[qp].mr.expect("peer offers a region");
        Self::slot_addr(&self.remote, m.addr, qp, slot)
    }

    fn remote_rkey(&self, qp: usize) -> Rkey {
        Rkey::new(self.remote.endpoints[qp].mr.map_or(0, |m| m.rkey))
    }

    fn completion_error(&self, wc: &WorkCompletion, scnt: u64, ccnt: u64) -> PerftestError {
        let mut s = report::completion_error(
            self.server,
            wc.status.as_str(),
            wc.status.value(),
            wc.wr_id,
            wc.vendor_err,
        );
        s.push_str(&format!("\n scnt={scnt}, ccnt={ccnt}"));
        PerftestError::Completion(s)
    }

    fn ud_dest(&self, qp: usize) -> Option<UdDest> {
        self.ahs.get(qp).map(|ah| UdDest {
            ah: ah.handle(),
            remote_qpn: Qpn::new(self.remote.endpoints[qp].qpn),
            remote_qkey: QKEY,
        })
    }

    fn post_recv_slot(&self, qp: usize, slot: u64, len: u64) -> Result<()> {
        let (addr, _) = self.local_slot(qp, slot);
        let len = if self.cfg.connection == QpType::Ud {
            len + GRH as u64
        } else {
            len
        };
        let sge = [Sge {
            addr,
            length: len as u32,
            lkey: self.mr.lkey(),
        }];
        let wr = RecvWr {
            wr_id: ((qp as u64) << 32) | (slot & 0xFFFF_FFFF),
            sg_list: if len == 0 { &[] } else { &sge },
        };
        // SAFETY: the SGE lies in our registered region, which outlives the
        // QP; the slot is not touched until its completion is polled.
        unsafe { self.qps[qp].post_recv(&[wr]) }.map_err(|e| PerftestError::Verbs(e.error))
    }

    // ------------------------------------------------------------------
    // Bandwidth
    // ------------------------------------------------------------------

    fn bw_client(&mut self, size: u64, oob: &mut Link) -> Result<BwRow> {
        let cfg = self.cfg.clone();
        let nq = self.qps.len();
        let verb = cfg.test.verb();
        let verify = cfg.verify;
        let write_verify = verify && verb == Verb::Write;
        let tx = u64::from(cfg.tx_depth());
        let cq_mod = u64::from(self.cq_mod(size));
        let post_list = u64::from(cfg.post_list);
        let mut target = vec![cfg.iterations(); nq];
        let deadline = cfg
            .duration
            .filter(|_| !cfg.run_infinitely)
            .map(|d| Instant::now() + Duration::from_secs(d));
        if deadline.is_some() || cfg.run_infinitely {
            target.iter_mut().for_each(|t| *t = u64::MAX);
        }
        // Post and completion times feed the peak; an endless run keeps
        // none.
        let keep_times = !cfg.run_infinitely;
        let interval = Duration::from_secs(cfg.infinite_interval());
        let mut next_row = Instant::now() + interval;
        let mut row_start = (Instant::now(), 0u64);
        let mut posted = vec![0u64; nq];
        let mut completed = vec![0u64; nq];
        let mut tposted: Vec<Vec<Instant>> = vec![Vec::new(); nq];
        let mut tcompleted: Vec<Vec<Instant>> = vec![Vec::new(); nq];
        let mut wcs = [WorkCompletion::empty(); 16];
        let inline =
            size <= u64::from(cfg.inline_size()) && matches!(verb, Verb::Send | Verb::Write);
        // Counters start at 0 on the responder for atomics; credits at 0.
        if write_verify {
            let off = self.local.credit_offset as usize;
            self.mr.fill(off, 64 * nq, 0)?;
        }
        let start = Instant::now();
        let mut scratch = vec![0u8; 0];
        if verb == Verb::Send || write_verify {
            oob.barrier("recvs posted")?;
        }
        loop {
            let mut all_done = true;
            for q in 0..nq {
                if let Some(d) = deadline {
                    if target[q] == u64::MAX && Instant::now() >= d {
                        // Finish at a signaled boundary.
                        target[q] = posted[q].div_ceil(cq_mod).max(1) * cq_mod;
                    }
                }
                // Post lists of `-l` WRs (one ibv_post_send each) while
                // the send queue has room for a whole list.
                loop {
                    let room = tx - (posted[q] - completed[q]);
                    let want = post_list.min(target[q] - posted[q]);
                    if want == 0 || room < want {
                        break;
                    }
                    let mut sges = Vec::with_capacity(want as usize);
                    let mut metas = Vec::with_capacity(want as usize);
                    for k in 0..want {
                        let i = posted[q] + k;
                        if write_verify {
                            let off = self.local.credit_offset as usize + 64 * q;
                            // A u64 the peer's RDMA WRITE updates under us.
                            let verified = self.mr.read_u64(off)?;
                            if i >= verified + self.remote.slots {
                                break;
                            }
                        }
                        let (laddr, loff) = self.local_slot(q, i);
                        if verify && matches!(verb, Verb::Send | Verb::Write) {
                            write_pattern(&self.mr, loff, size as usize, i)?;
                        }
                        let raddr = self.remote_slot(q, i);
                        let rkey = self.remote_rkey(q);
                        let op = match verb {
                            Verb::Send => SendOp::Send,
                            Verb::Write if write_verify => SendOp::WriteWithImm {
                                remote_addr: raddr,
                                rkey,
                                imm: i as u32,
                            },
                            Verb::Write => SendOp::Write {
                                remote_addr: raddr,
                                rkey,
                            },
                            Verb::Read => SendOp::Read {
                                remote_addr: raddr,
                                rkey,
                            },
                            Verb::Atomic => SendOp::FetchAdd {
                                remote_addr: self.remote_slot(q, 0),
                                rkey,
                                add: 1,
                            },
                        };
                        let signaled = (i + 1) % cq_mod == 0 || i + 1 == target[q];
                        let mut flags = if signaled {
                            SendFlags::SIGNALED
                        } else {
                            SendFlags::EMPTY
                        };
                        if inline {
                            flags |= SendFlags::INLINE;
                        }
                        sges.push([Sge {
                            addr: laddr,
                            length: if verb == Verb::Atomic { 8 } else { size as u32 },
                            lkey: self.mr.lkey(),
                        }]);
                        metas.push((((q as u64) << 32) | (i & 0xFFFF_FFFF), op, flags));
                    }
                    if metas.is_empty() {
                        break;
                    }
                    let wrs: Vec<SendWr<'_>> = metas
                        .iter()
                        .zip(&sges)
                        .map(|(&(wr_id, op, flags), sge)| SendWr {
                            wr_id,
                            sg_list: sge,
                            op,
                            flags,
                            ud: self.ud_dest(q),
                        })
                        .collect();
                    // SAFETY: the SGEs are inside our region; a slot is not
                    // rewritten until its WR's completion is seen (at most
                    // tx_depth outstanding over tx_depth slots).
                    unsafe { self.qps[q].post_send(&wrs) }
                        .map_err(|e| PerftestError::Verbs(e.error))?;
                    let now = Instant::now();
                    let n = wrs.len() as u64;
                    if keep_times {
                        tposted[q].extend(std::iter::repeat(now).take(n as usize));
                    }
                    posted[q] += n;
                    if n < want {
                        break;
                    }
                }
                if completed[q] < target[q] {
                    all_done = false;
                }
            }
            if all_done {
                break;
            }
            let got = self.cq.poll(&mut wcs)?.to_vec();
            if got.is_empty() {
                if write_verify || self.cfg.busy_poll == Some(true) {
                    std::hint::spin_loop();
                } else {
                    self.cq.wait(Duration::from_millis(1))?;
                }
            }
            let now = Instant::now();
            for wc in got {
                let q = (wc.wr_id >> 32) as usize;
                if !wc.is_ok() {
                    return Err(self.completion_error(
                        &wc,
                        posted.iter().sum(),
                        completed.iter().sum(),
                    ));
                }
                if q >= nq {
                    continue;
                }
                let i = (wc.wr_id & 0xFFFF_FFFF) | (completed[q] & !0xFFFF_FFFF);
                let upto = i + 1;
                for k in completed[q]..upto {
                    if keep_times {
                        tcompleted[q].push(now);
                    }
                    if verify {
                        self.verify_client_completion(q, k, size, &mut scratch)?;
                    }
                }
                completed[q] = completed[q].max(upto);
            }
            if cfg.run_infinitely && now >= next_row {
                // perftest's endless mode: one row per interval, for the
                // messages completed in it.
                let done: u64 = completed.iter().sum();
                let msgs = done - row_start.1;
                let secs = (now - row_start.0).as_secs_f64();
                println!(
                    "{}",
                    report::bw_row(
                        size,
                        msgs,
                        0.0,
                        report::bandwidth(msgs * size, secs, cfg.report_gbits),
                        msgs as f64 / secs / 1e6,
                        cfg.report_gbits
                    )
                );
                use std::io::Write as _;
                let _ = std::io::stdout().flush();
                row_start = (now, done);
                next_row = now + interval;
            }
        }
        let elapsed = start.elapsed();
        if deadline.is_some() && verb == Verb::Send {
            oob.send(&Msg::Posted(completed.clone()))?;
        }
        let iters = if deadline.is_some() {
            *completed.iter().min().unwrap_or(&0)
        } else {
            cfg.iterations()
        };
        let total_msgs: u64 = completed.iter().sum();
        let bytes = total_msgs * size;
        let secs = elapsed.as_secs_f64();
        let avg = report::bandwidth(bytes, secs, cfg.report_gbits);
        let rate = total_msgs as f64 / secs / 1e6;
        let peak = if deadline.is_some() || cfg.iterations() > 20000 {
            0.0
        } else {
            peak_bw(&tposted, &tcompleted, size, cfg.report_gbits).max(avg)
        };
        Ok(BwRow {
            size,
            iters,
            peak,
            avg,
            rate,
        })
    }

    /// `-b`: both sides send at once; each prints the sum of the two
    /// directions, as perftest does.
    fn duplex_bw(&mut self, size: u64, oob: &mut Link) -> Result<BwRow> {
        let mine = self.bw_client(size, oob)?;
        oob.send(&Msg::Bw {
            size: mine.size,
            iters: mine.iters,
            peak: mine.peak,
            avg: mine.avg,
            rate: mine.rate,
        })?;
        let theirs = match oob.recv::<Msg>()? {
            Msg::Bw {
                size,
                iters,
                peak,
                avg,
                rate,
            } => exchange::BwReport {
                size,
                iters,
                peak,
                avg,
                msg_rate: rate,
            },
            Msg::Error(e) => return Err(PerftestError::Oob(format!("peer failed: {e}"))),
            other => {
                return Err(PerftestError::Oob(format!(
                    "expected results, got {other:?}"
                )))
            }
        };
        theirs.check().map_err(PerftestError::Oob)?;
        if theirs.size != size {
            return Err(PerftestError::Oob(format!(
                "peer reports {}-byte messages, this side ran {size}",
                theirs.size
            )));
        }
        Ok(BwRow {
            size,
            iters: mine.iters,
            peak: mine.peak + theirs.peak,
            avg: mine.avg + theirs.avg,
            rate: mine.rate + theirs.msg_rate,
        })
    }

    fn verify_client_completion(
        &self,
        q: usize,
        k: u64,
        size: u64,
        _scratch: &mut Vec<u8>,
    ) -> Result<()> {
        match self.cfg.test.verb() {
            Verb::Read => {
                let (_, off) = self.local_slot(q, k);
                let remote_slot = k % self.remote.slots;
                check_pattern(&read_bytes(&self.mr, off, size as usize)?, remote_slot)
                    .map_err(|e| PerftestError::Verify(format!("READ into QP {q} slot: {e}")))?;
                self.tally(size);
                Ok(())
            }
            Verb::Atomic => {
                let (_, off) = self.local_slot(q, k);
                let v = self.mr.read_u64(off)?;
                if v != k {
                    return Err(PerftestError::Verify(format!(
                        "FETCH_ADD {k} on QP {q} returned {v}, expected {k}"
                    )));
                }
                self.tally(8);
                Ok(())
            }
            _ => Ok(()),
        }
    }

    /// Receiving side of send_bw: count, check and repost receives.
    fn send_bw_server(&mut self, size: u64, oob: &mut Link) -> Result<BwRow> {
        let nq = self.qps.len();
        let slots = self.local.slots;
        let rx = u64::from(self.cfg.rx_depth);
        let mut expect = vec![self.cfg.iterations(); nq];
        let duration = self.cfg.duration.is_some();
        if duration {
            expect.iter_mut().for_each(|e| *e = u64::MAX);
        }
        let mut received = vec![0u64; nq];
        let mut posted = vec![0u64; nq];
        for q in 0..nq {
            while posted[q] < rx.min(expect[q]) {
                self.post_recv_slot(q, posted[q] % slots, size)?;
                posted[q] += 1;
            }
        }
        oob.barrier("recvs posted")?;
        let mut first: Option<Instant> = None;
        let mut last = Instant::now();
        let mut wcs = [WorkCompletion::empty(); 16];
        while received.iter().zip(&expect).any(|(r, e)| r < e) {
            if duration && expect[0] == u64::MAX {
                if let Some(Msg::Posted(p)) = oob.try_recv::<Msg>()? {
                    expect = p;
                    continue;
                }
            }
            let got = self.cq.poll(&mut wcs)?.to_vec();
            if got.is_empty() {
                self.cq.wait(Duration::from_millis(1))?;
                continue;
            }
            let now = Instant::now();
            for wc in got {
                if !wc.is_ok() {
                    return Err(self.completion_error(&wc, 0, received.iter().sum()));
                }
                let q = (wc.wr_id >> 32) as usize;
                let slot = wc.wr_id & 0xFFFF_FFFF;
                if q >= nq || wc.opcode != WcOpcode::Recv {
                    continue;
                }
                first.get_or_insert(now);
                last = now;
                let k = received[q];
                if self.cfg.verify {
                    // UD receives count the 40-byte GRH area in byte_len.
                    let grh = if self.cfg.connection == QpType::Ud {
                        GRH as u64
                    } else {
                        0
                    };
                    if u64::from(wc.byte_len) != size + grh {
                        return Err(PerftestError::Verify(format!(
                            "message {k} on QP {q} has {} bytes, expected {}",
                            wc.byte_len,
                            size + grh
                        )));
                    }
                    let (_, off) = self.local_slot(q, slot);
                    let off = if self.cfg.connection == QpType::Ud {
                        off + GRH
                    } else {
                        off
                    };
                    check_pattern(&read_bytes(&self.mr, off, size as usize)?, k)
                        .map_err(|e| PerftestError::Verify(format!("SEND on QP {q}: {e}")))?;
                    self.tally(size);
                }
                received[q] += 1;
                if posted[q] < expect[q] {
                    self.post_recv_slot(q, slot, size)?;
                    posted[q] += 1;
                }
            }
        }
        let total: u64 = received.iter().sum();
        let secs = first.map_or(0.0, |f| (last - f).as_secs_f64()).max(1e-9);
        Ok(BwRow {
            size,
            iters: if duration {
                *received.iter().min().unwrap_or(&0)
            } else {
                self.cfg.iterations()
            },
            peak: 0.0,
            avg: report::bandwidth(total * size, secs, self.cfg.report_gbits),
            rate: total as f64 / secs / 1e6,
        })
    }

    /// Receiving side of write_bw with --verify: check each slot on its
    /// WRITE-with-immediate completion and return credits.
    fn write_verify_server(&mut self, size: u64, oob: &mut Link) -> Result<BwRow> {
        let nq = self.qps.len();
        let rx = u64::from(self.cfg.rx_depth);
        let n = self.cfg.iterations();
        let mut verified = vec![0u64; nq];
        let mut posted = vec![0u64; nq];
        for (q, p) in posted.iter_mut().enumerate() {
            while *p < rx.min(n) {
                self.post_recv_slot(q, 0, 0)?;
                *p += 1;
            }
        }
        oob.barrier("recvs posted")?;
        let credit_every = (self.local.slots / 4).max(1);
        let mut wcs = [WorkCompletion::empty(); 16];
        let start = Instant::now();
        while verified.iter().any(|&v| v < n) {
            let got = self.cq.poll(&mut wcs)?.to_vec();
            if got.is_empty() {
                std::hint::spin_loop();
                continue;
            }
            for wc in got {
                if !wc.is_ok() {
                    return Err(self.completion_error(&wc, 0, verified.iter().sum()));
                }
                let q = (wc.wr_id >> 32) as usize;
                if q >= nq || wc.opcode != WcOpcode::RecvRdmaWithImm {
                    continue;
                }
                let k = verified[q];
                let imm = u64::from(wc.imm().unwrap_or(u32::MAX));
                if imm != k & 0xFFFF_FFFF {
                    return Err(PerftestError::Verify(format!(
                        "QP {q}: WRITE with immediate {imm} arrived when {k} was expected"
                    )));
                }
                let (_, off) = self.local_slot(q, k);
                check_pattern(&read_bytes(&self.mr, off, size as usize)?, k)
                    .map_err(|e| PerftestError::Verify(format!("WRITE on QP {q}: {e}")))?;
                self.tally(size);
                verified[q] += 1;
                if posted[q] < n {
                    self.post_recv_slot(q, 0, 0)?;
                    posted[q] += 1;
                }
                if verified[q] % credit_every == 0 || verified[q] == n {
                    self.send_credit(q, verified[q])?;
                }
            }
        }
        let secs = start.elapsed().as_secs_f64();
        let total: u64 = verified.iter().sum();
        Ok(BwRow {
            size,
            iters: n,
            peak: 0.0,
            avg: report::bandwidth(total * size, secs, self.cfg.report_gbits),
            rate: total as f64 / secs / 1e6,
        })
    }

    fn send_credit(&self, q: usize, value: u64) -> Result<()> {
        let m = self.remote.endpoints[q].mr.expect("peer offers a region");
        let addr = m.addr + self.remote.credit_offset + 64 * q as u64;
        let bytes = value.to_ne_bytes();
        let sge = [Sge {
            addr: bytes.as_ptr() as u64,
            length: 8,
            lkey: self.mr.lkey(),
        }];
        let wr = SendWr {
            wr_id: u64::MAX,
            sg_list: &sge,
            op: SendOp::Write {
                remote_addr: addr,
                rkey: Rkey::new(m.rkey),
            },
            flags: SendFlags::INLINE,
            ud: None,
        };
        // SAFETY: inline data is copied at post time; no memory is read
        // afterwards.
        unsafe { self.qps[q].post_send(&[wr]) }.map_err(|e| PerftestError::Verbs(e.error))
    }

    // ------------------------------------------------------------------
    // Latency
    // ------------------------------------------------------------------

    fn lat(&mut self, size: u64, oob: &mut Link) -> Result<Option<ResultRow>> {
        let t = self.cfg.test;
        let n = self.cfg.iterations();
        let deadline = self.cfg.duration.map(Duration::from_secs);
        let mut samples: Vec<u64> = Vec::with_capacity(n as usize);
        let start = Instant::now();
        let done;
        match t.verb() {
            Verb::Write | Verb::Send => {
                done = self.ping_pong(size, n, deadline, &mut samples, oob)?;
            }
            Verb::Read | Verb::Atomic => {
                if self.server {
                    // The responder is the device: nothing to do but wait.
                    match oob.recv::<Msg>()? {
                        Msg::Sync(s) if s == "lat done" => return Ok(None),
                        Msg::Error(e) => {
                            return Err(PerftestError::Oob(format!("peer failed: {e}")))
                        }
                        other => {
                            return Err(PerftestError::Oob(format!(
                                "expected end of test, got {other:?}"
                            )))
                        }
                    }
                }
                done = self.read_lat_client(size, n, deadline, &mut samples)?;
                oob.send(&Msg::Sync("lat done".into()))?;
            }
        }
        let rtt_factor = if matches!(t.verb(), Verb::Write | Verb::Send) {
            2
        } else {
            1
        };
        if deadline.is_some() {
            let secs = start.elapsed().as_secs_f64();
            let avg_us = if done == 0 {
                0.0
            } else {
                secs * 1e6 / done as f64 / f64::from(rtt_factor)
            };
            return Ok(Some(ResultRow::LatDuration {
                size,
                iters: done,
                avg_us,
                tps: done as f64 / secs,
            }));
        }
        match LatencyStats::from_samples(&mut samples, rtt_factor) {
            Some(stats) => Ok(Some(ResultRow::Lat {
                size,
                iters: n,
                stats,
            })),
            None => Ok(None),
        }
    }

    /// write_lat / send_lat: the client sends first; each side answers the
    /// other's message. Returns the iterations done.
    fn ping_pong(
        &mut self,
        size: u64,
        n: u64,
        deadline: Option<Duration>,
        samples: &mut Vec<u64>,
        oob: &mut Link,
    ) -> Result<u64> {
        let send = self.cfg.test.verb() == Verb::Send;
        let verify = self.cfg.verify;
        let inline = size <= u64::from(self.cfg.inline_size());
        let (rx_addr, rx_off) = self.local_slot(0, 0);
        let (tx_addr, tx_off) = self.local_slot(0, 1);
        let size_us = size as usize;
        let rx_data_off = if send && self.cfg.connection == QpType::Ud {
            rx_off + GRH
        } else {
            rx_off
        };
        let _ = rx_addr;
        if send {
            self.post_recv_slot(0, 0, size)?;
        }
        oob.barrier("pingpong ready")?;
        let start = Instant::now();
        let mut wcs = [WorkCompletion::empty(); 4];
        let mut last = Instant::now();
        let mut i = 0u64;
        let mut stop_at: Option<u64> = None;
        // The client sends message i and waits for the server's message i.
        while stop_at.map_or(true, |s| i < s) && (deadline.is_some() || i < n) {
            let marker = (i % 255 + 1) as u8;
            if self.server || i > 0 {
                // Wait for the peer's message i.
                let mut spins = 0u64;
                loop {
                    if send {
                        let got = self.cq.poll(&mut wcs)?.to_vec();
                        let mut arrived = false;
                        for wc in got {
                            if !wc.is_ok() {
                                return Err(self.completion_error(&wc, i, i));
                            }
                            if wc.opcode == WcOpcode::Recv {
                                arrived = true;
                            }
                        }
                        if arrived {
                            break;
                        }
                    } else {
                        // The last byte, which the peer's RDMA WRITE changes
                        // under us.
                        if self.mr.read_u8(rx_off + size_us - 1)? == self.expected_marker(i) {
                            break;
                        }
                        for wc in self.cq.poll(&mut wcs)?.iter() {
                            if !wc.is_ok() {
                                return Err(self.completion_error(wc, i, i));
                            }
                        }
                    }
                    spins += 1;
                    if spins % 1024 == 0 && deadline.is_some() && self.server {
                        if let Some(Msg::Posted(p)) = oob.try_recv::<Msg>()? {
                            stop_at = Some(p[0]);
                            if i >= p[0] {
                                return Ok(i);
                            }
                        }
                    }
                }
                let msg_idx = if self.server { 2 * i } else { 2 * i - 1 };
                if verify {
                    let buf = read_bytes(&self.mr, rx_data_off, size_us)?;
                    let body = if send { &buf[..] } else { &buf[..size_us - 1] };
                    let mut want = vec![0u8; size_us];
                    fill_pattern(&mut want, msg_idx);
                    if body != &want[..body.len()] {
                        let at = body
                            .iter()
                            .zip(&want)
                            .position(|(a, b)| a != b)
                            .unwrap_or(0);
                        return Err(PerftestError::Verify(format!(
                            "message {msg_idx} byte {at}: expected {:#04x}, got {:#04x}",
                            want[at], body[at]
                        )));
                    }
                    self.tally(body.len() as u64);
                }
                if send {
                    self.post_recv_slot(0, 0, size)?;
                }
                if self.server && i + 1 >= n && deadline.is_none() {
                    // Answer the last one below, then stop.
                }
            }
            let now = Instant::now();
            if i > 0 {
                samples.push((now - last).as_nanos() as u64);
            }
            last = now;
            if !self.server {
                if let Some(d) = deadline {
                    if start.elapsed() >= d {
                        oob.send(&Msg::Posted(vec![i]))?;
                        return Ok(i);
                    }
                }
                if i >= n && deadline.is_none() {
                    break;
                }
            }
            // Send our message i.
            let msg_idx = if self.server { 2 * i + 1 } else { 2 * i };
            if verify {
                let mut buf = vec![0u8; size_us];
                fill_pattern(&mut buf, msg_idx);
                if !send {
                    buf[size_us - 1] = marker;
                }
                self.mr.write(tx_off, &buf)?;
            } else if !send {
                self.mr.write(tx_off + size_us - 1, &[marker])?;
            }
            let sge = [Sge {
                addr: tx_addr,
                length: size as u32,
                lkey: self.mr.lkey(),
            }];
            let op = if send {
                SendOp::Send
            } else {
                SendOp::Write {
                    remote_addr: self.remote_slot(0, 0),
                    rkey: self.remote_rkey(0),
                }
            };
            let mut flags = SendFlags::SIGNALED;
            if inline {
                flags |= SendFlags::INLINE;
            }
            let wr = SendWr {
                wr_id: i,
                sg_list: &sge,
                op,
                flags,
                ud: self.ud_dest(0),
            };
            // SAFETY: the SGE is inside our region; the source slot is
            // rewritten only after the peer answered this message.
            unsafe { self.qps[0].post_send(&[wr]) }.map_err(|e| PerftestError::Verbs(e.error))?;
            i += 1;
            if self.server && i >= n && deadline.is_none() {
                break;
            }
        }
        // Let the last send complete before the resources go.
        let _ = self.cq.poll_n(0, Duration::from_millis(1));
        Ok(i.min(n))
    }

    fn expected_marker(&self, i: u64) -> u8 {
        // The server waits for the client's message i (marker i), the client
        // for the server's answer to its message i - 1.
        let k = if self.server { i } else { i - 1 };
        (k % 255 + 1) as u8
    }

    fn read_lat_client(
        &mut self,
        size: u64,
        n: u64,
        deadline: Option<Duration>,
        samples: &mut Vec<u64>,
    ) -> Result<u64> {
        let atomic = self.cfg.test.verb() == Verb::Atomic;
        let (laddr, loff) = self.local_slot(0, 0);
        let start = Instant::now();
        let mut wcs = [WorkCompletion::empty(); 4];
        let mut i = 0u64;
        while deadline.map_or(i < n, |d| start.elapsed() < d) {
            let t0 = Instant::now();
            let op = if atomic {
                SendOp::FetchAdd {
                    remote_addr: self.remote_slot(0, 0),
                    rkey: self.remote_rkey(0),
                    add: 1,
                }
            } else {
                SendOp::Read {
                    remote_addr: self.remote_slot(0, 0),
                    rkey: self.remote_rkey(0),
                }
            };
            let sge = [Sge {
                addr: laddr,
                length: if atomic { 8 } else { size as u32 },
                lkey: self.mr.lkey(),
            }];
            let wr = SendWr {
                wr_id: i,
                sg_list: &sge,
                op,
                flags: SendFlags::SIGNALED,
                ud: None,
            };
            // SAFETY: the SGE is in our region and only read after the
            // completion below.
            unsafe { self.qps[0].post_send(&[wr]) }.map_err(|e| PerftestError::Verbs(e.error))?;
            loop {
                let got = self.cq.poll(&mut wcs)?;
                if let Some(wc) = got.first() {
                    if !wc.is_ok() {
                        let wc = *wc;
                        return Err(self.completion_error(&wc, i + 1, i));
                    }
                    break;
                }
            }
            samples.push(t0.elapsed().as_nanos() as u64);
            if self.cfg.verify {
                if atomic {
                    let v = self.mr.read_u64(loff)?;
                    if v != i {
                        return Err(PerftestError::Verify(format!(
                            "FETCH_ADD {i} returned {v}, expected {i}"
                        )));
                    }
                    self.tally(8);
                } else {
                    check_pattern(&read_bytes(&self.mr, loff, size as usize)?, 0)
                        .map_err(|e| PerftestError::Verify(format!("READ: {e}")))?;
                    self.tally(size);
                }
            }
            i += 1;
        }
        Ok(i)
    }
}

struct BwRow {
    size: u64,
    iters: u64,
    peak: f64,
    avg: f64,
    rate: f64,
}

/// perftest's peak: the best rate over windows of consecutive messages
/// (from the post of the first to the completion of the last).
fn peak_bw(tposted: &[Vec<Instant>], tcompleted: &[Vec<Instant>], size: u64, gbits: bool) -> f64 {
    let mut best = 0.0f64;
    for (tp, tc) in tposted.iter().zip(tcompleted) {
        let n = tp.len().min(tc.len());
        let mut w = 1usize;
        while w <= n {
            let step = (w / 4).max(1);
            let mut i = 0;
            while i + w <= n {
                let dt = tc[i + w - 1].saturating_duration_since(tp[i]).as_secs_f64();
                if dt > 0.0 {
                    best = best.max(report::bandwidth(w as u64 * size, dt, gbits));
                }
                i += step;
            }
            w *= 2;
        }
    }
    best * tposted.len().max(1) as f64
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

    fn peer_info(slots: u64, slot_size: u64, mr_len: Option<u64>) -> PeerInfo {
        let ep = Endpoint {
            lid: 0,
            qpn: 0x11,
            psn: 1,
            gid: crate::verbs::Gid::from_ip(Ipv4Addr::LOCALHOST.into()),
            udp_port: 4791,
            mtu: Mtu::Mtu1024,
            mr: mr_len.map(|len| crate::verbs::RemoteMr {
                addr: 0x1000,
                rkey: 0x100,
                len,
            }),
        };
        PeerInfo {
            endpoints: vec![ep, ep],
            slots,
            slot_size,
            credit_offset: slots.wrapping_mul(slot_size).wrapping_mul(2),
            mtu: 1024,
            device: "x".into(),
            per_qp_buffers: false,
        }
    }

    #[test]
    fn a_peers_endpoint_info_is_validated_before_use() {
        let ok = peer_info(4, 4096, Some(4 * 4096 * 2 + 128));
        assert_eq!(ok.validate(2, 4096, false), Ok(()));
        let e = |p: PeerInfo, ud| p.validate(2, 4096, ud).unwrap_err();
        assert!(e(peer_info(0, 4096, Some(1 << 20)), false).contains("0 buffer slots"));
        assert!(e(peer_info(4, 4096, None), false).contains("no memory region"));
        // UD needs no region.
        assert_eq!(peer_info(4, 4096, None).validate(2, 4096, true), Ok(()));
        assert!(e(peer_info(4, 4096, Some(100)), false).contains("smaller"));
        assert!(e(peer_info(4, 100, Some(1 << 20)), false).contains("cannot hold"));
        assert!(e(peer_info(u64::MAX, 4096, Some(1 << 20)), false).contains("overflows"));
        assert!(ok.validate(3, 4096, false).unwrap_err().contains("2 QPs"));
        let mut bad_mtu = ok.clone();
        bad_mtu.mtu = 0;
        assert!(e(bad_mtu, false).contains("MTU"));
        let mut overlap = ok;
        overlap.credit_offset = 8;
        assert!(e(overlap, false).contains("overlaps"));
    }

    /// A connected pair: our Oob and the raw peer socket.
    fn oob_pair() -> (Oob, TcpStream) {
        let l = TcpListener::bind((Ipv4Addr::LOCALHOST, 0)).unwrap();
        let peer = TcpStream::connect(l.local_addr().unwrap()).unwrap();
        let (ours, _) = l.accept().unwrap();
        (Oob::new(ours).unwrap(), peer)
    }

    #[test]
    fn empty_oversized_and_garbage_peer_messages_are_errors() {
        let (mut oob, mut peer) = oob_pair();
        peer.write_all(b"\n").unwrap();
        let e = oob.recv::<Msg>().unwrap_err().to_string();
        assert!(e.contains("empty message"), "{e}");
        peer.write_all(b"{\"Peer\": 5}\n").unwrap();
        let e = oob.recv::<Msg>().unwrap_err().to_string();
        assert!(e.contains("bad message"), "{e}");
        let big = vec![b'x'; MAX_OOB_LINE as usize + 10];
        let writer = std::thread::spawn(move || {
            let _ = peer.write_all(&big);
            peer
        });
        let e = oob.recv::<Msg>().unwrap_err().to_string();
        assert!(e.contains("longer than"), "{e}");
        let peer = writer.join().unwrap();
        drop(peer);
    }

    #[test]
    fn connect_attributes_carry_timeout_service_level_and_traffic_class() {
        let mut cfg = Config::new(Test::WriteBw);
        cfg.qp_timeout = 9;
        cfg.sl = 3;
        cfg.traffic_class = 0x68;
        let ep = peer_info(1, 64, Some(1 << 20)).endpoints[0];
        let (init, rtr, rts) = connect_attrs(&cfg, 7, &ep, Mtu::Mtu1024, AccessFlags::LOCAL_WRITE);
        assert_eq!(init.qp_state, QpState::Init);
        assert_eq!(rtr.ah_attr.sl, 3);
        assert_eq!(rtr.ah_attr.traffic_class, 0x68);
        assert_eq!(rtr.ah_attr.dgid, ep.gid);
        assert_eq!(rtr.dest_qp_num, Qpn::new(ep.qpn));
        assert_eq!((rtr.rq_psn, rtr.path_mtu), (ep.psn, Mtu::Mtu1024));
        assert_eq!((rts.timeout, rts.retry_cnt, rts.sq_psn), (9, 7, 7));
        assert_eq!(rts.max_rd_atomic, 16);
    }

    #[test]
    fn loopback_client_moves_to_another_address() {
        let cfg = Config::new(Test::WriteBw);
        let lo = Ipv4Addr::LOCALHOST;
        let c = bind_candidates(&cfg, false, lo, lo);
        assert_eq!(c[0], (Ipv4Addr::new(127, 0, 0, 2), 4791));
        assert!(!c.iter().any(|(a, _)| *a == lo));
        assert_eq!(bind_candidates(&cfg, true, lo, lo), vec![(lo, 4791)]);
        let remote = Ipv4Addr::new(10, 0, 0, 1);
        let local = Ipv4Addr::new(10, 0, 0, 2);
        assert_eq!(
            bind_candidates(&cfg, false, local, remote),
            vec![(local, 4791)]
        );
        // Its own host through a real address: same address, next ports.
        assert_eq!(
            bind_candidates(&cfg, false, remote, remote)[0],
            (remote, 4792)
        );
    }
}
