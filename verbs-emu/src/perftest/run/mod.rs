//! The perftest runner: connect to the peer, agree on the test, set up
//! each side's resources, run every message size and print perftest's
//! table.
//!
//! [`run`] is the entry point: it reaches the peer ([`connection`]), tells
//! a rocelab peer ([`oob`]) from one of perftest's programs ([`link`]),
//! sets up the [`resources`], then runs each size's loop ([`bw`], [`lat`])
//! and prints and records its row ([`output`], [`rows`]). The QP
//! attributes are perftest's ([`attrs`]); `--verify` uses [`pattern`].
//!
//! Files, bottom up (none imports one above it): `error`, `rows`,
//! `pattern`, `attrs`, `oob`, `connection` < `link` < `resources` <
//! `output`, `bw`, `lat` < this file.

use std::net::Ipv4Addr;

use self::connection::{accept, check_device_exists, connect, open_device};
use self::error::Result;
use self::link::{Link, PerftestPeer};
use self::oob::{Hello, Msg, Oob};
use self::resources::Side;
use self::rows::BwRow;
use super::exchange::{self, PerftestLink};
use super::report;
use super::{Config, Test, Verb};
use crate::backend::BackendKind;
use crate::verbs::{Context, Mtu, QpType};

mod attrs;
mod bw;
mod connection;
mod error;
mod lat;
mod link;
mod oob;
mod output;
mod pattern;
mod resources;
mod rows;

pub use self::error::PerftestError;
pub use self::pattern::pattern_byte;
pub use self::rows::ResultRow;

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
        duplex: cfg.duplex,
        gbits: cfg.report_gbits,
        run_infinitely: cfg.run_infinitely,
    };
    oob.send(&Msg::Hello(hello.clone()))?;
    match oob.recv::<Msg>()? {
        Msg::Hello(peer) if peer == hello => {}
        Msg::Hello(peer) => {
            return Err(PerftestError::Config(format!(
            " The client and the server run different tests ({}); give both sides the same flags",
            hello.differences(&peer).join("; ")
        )))
        }
        Msg::Error(e) => return Err(PerftestError::Oob(format!("peer failed: {e}"))),
        _ => {
            return Err(PerftestError::Oob(
                "the peer's first message is not its test parameters".into(),
            ))
        }
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
        outs: cfg.outstanding_reads(),
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

impl Side {
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
                                "expected results, the peer sent {}",
                                other.what()
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
                if !(self.cfg.duplex && self.cfg.report_both) {
                    // (--report-both printed both directions' blocks.)
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
                }
                self.cfg
                    .check_limits(row.avg, row.rate)
                    .map_err(PerftestError::Config)?;
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
}
