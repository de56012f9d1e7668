//! The bandwidth tests' loops: the sending side (`bw_client`: post lists
//! under the send queue's room, CQ moderation, `-D` and endless mode,
//! `--verify` of READ and atomic results), both directions at once (`-b`),
//! the receiving side of send_bw, the `--verify` receiver of write_bw
//! (slot checks and credits), and the result exchange with a perftest
//! server; with perftest's peak ([`peak_bw`]).
//!
//! Contract: a slot is never rewritten before its completion (or, in
//! write_bw `--verify`, the peer's credit) says it may be; an error
//! completion ends the run with perftest's message.

use std::time::{Duration, Instant};

use super::error::{PerftestError, Result};
use super::link::Link;
use super::oob::{posted_counts, Msg};
use super::pattern::{check_pattern, read_bytes, write_pattern};
use super::resources::{Side, GRH};
use super::rows::{BwRow, ResultRow};
use crate::perftest::exchange;
use crate::perftest::report;
use crate::perftest::Verb;
use crate::verbs::{QpType, SendFlags, SendOp, SendWr, Sge, WcOpcode, WorkCompletion};
use roce::wire::Rkey;

impl Side {
    /// The end of a one-way bandwidth test with a perftest peer: a
    /// handshake, then the client's result crosses to the server, which
    /// prints it. `mine` is the client's result (`None` on the server);
    /// returns the server's row.
    /// perftest's exchange carries no test parameters: the client's
    /// result is where its message size and iteration count show. A
    /// difference from this side's `-s` (the last size with `-a`) or `-n`
    /// (not in duration mode, where the count is what was achieved) is an
    /// error that names both values.
    fn check_peer_report(&self, theirs: &exchange::BwReport) -> Result<()> {
        let ours = self.cfg.sizes().last().copied().unwrap_or(0);
        if theirs.size != ours {
            return Err(PerftestError::Config(format!(
                " Message size mismatch: this side runs -s {ours}, the peer (perftest) ran -s {}; give both sides the same -s",
                theirs.size
            )));
        }
        let iters = self.cfg.iterations();
        if self.cfg.duration.is_none() && !self.cfg.run_infinitely && theirs.iters != iters {
            return Err(PerftestError::Config(format!(
                " Number of iterations mismatch: this side runs -n {iters}, the peer (perftest) ran -n {}; give both sides the same -n",
                theirs.iters
            )));
        }
        Ok(())
    }

    pub(super) fn perftest_bw_result(
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
        self.check_peer_report(&theirs)?;
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

    pub(super) fn bw_client(&mut self, size: u64, oob: &mut Link) -> Result<BwRow> {
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
                if !self.cfg.events && (write_verify || self.cfg.bw_busy_poll(size)) {
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
        if deadline.is_some() && (verb == Verb::Send || write_verify) {
            // The receiving side counts what it must see: the number of
            // messages a -D run sent is known only now.
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
        let peak = if deadline.is_some() || cfg.no_peak || cfg.iterations() > 20000 {
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
    pub(super) fn duplex_bw(&mut self, size: u64, oob: &mut Link) -> Result<BwRow> {
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
                    "expected results, the peer sent {}",
                    other.what()
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
        if self.cfg.report_both {
            // perftest's --report-both: each direction in a block of its
            // own instead of the sum; the row kept is this side's.
            let g = self.cfg.report_gbits;
            let header = if g {
                report::BW_HEADER_GBITS
            } else {
                report::BW_HEADER_MIB
            };
            let remote = (
                theirs.size,
                theirs.iters,
                theirs.peak,
                theirs.avg,
                theirs.msg_rate,
            );
            let local = (mine.size, mine.iters, mine.peak, mine.avg, mine.rate);
            for (what, (size, iters, peak, avg, rate)) in [("Local", local), ("Remote", remote)] {
                println!(
                    "{}\n {what} results: \n{}\n{header}",
                    report::RESULT_LINE,
                    report::RESULT_LINE
                );
                println!("{}", report::bw_row(size, iters, peak, avg, rate, g));
            }
            return Ok(mine);
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
    pub(super) fn send_bw_server(&mut self, size: u64, oob: &mut Link) -> Result<BwRow> {
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
                    expect = posted_counts(p, nq)?;
                    continue;
                }
            }
            let got = self.cq.poll(&mut wcs)?.to_vec();
            if got.is_empty() {
                if self.cfg.bw_busy_poll(size) {
                    std::hint::spin_loop();
                } else {
                    self.cq.wait(Duration::from_millis(1))?;
                }
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
    pub(super) fn write_verify_server(&mut self, size: u64, oob: &mut Link) -> Result<BwRow> {
        let nq = self.qps.len();
        let rx = u64::from(self.cfg.rx_depth);
        // With -D the sender says at its end how many it sent; until then
        // every message is expected (and a receive is kept posted for it).
        let duration = self.cfg.duration.is_some();
        let n = if duration {
            u64::MAX
        } else {
            self.cfg.iterations()
        };
        let mut expect = vec![n; nq];
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
        let mut idle = 0u32;
        while verified.iter().zip(&expect).any(|(v, e)| v < e) {
            let got = self.cq.poll(&mut wcs)?.to_vec();
            if got.is_empty() {
                idle = idle.wrapping_add(1);
                if duration && expect[0] == u64::MAX && idle % 1024 == 0 {
                    if let Some(Msg::Posted(p)) = oob.try_recv::<Msg>()? {
                        expect = posted_counts(p, nq)?;
                    }
                }
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
                if posted[q] < expect[q] {
                    self.post_recv_slot(q, 0, 0)?;
                    posted[q] += 1;
                }
                if verified[q] % credit_every == 0 || verified[q] == expect[q] {
                    self.send_credit(q, verified[q])?;
                }
            }
        }
        let secs = start.elapsed().as_secs_f64();
        let total: u64 = verified.iter().sum();
        Ok(BwRow {
            size,
            iters: if duration {
                *verified.iter().min().unwrap_or(&0)
            } else {
                n
            },
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
