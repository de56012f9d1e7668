//! The latency tests' loops: ping-pong (write_lat, send_lat: each side
//! answers the other's message, the WRITE's last byte as the marker) and
//! the requester's loop of read_lat and atomic_lat (the responder is the
//! device); `-D` and `--verify` included.
//!
//! Contract: one message in flight each way; samples are round trips (or
//! one request's time), halved for ping-pong as perftest reports them.

use std::time::{Duration, Instant};

use super::error::{PerftestError, Result};
use super::link::Link;
use super::oob::{posted_counts, Msg};
use super::pattern::{check_pattern, fill_pattern, read_bytes};
use super::resources::{Side, GRH};
use super::rows::ResultRow;
use crate::perftest::report::{self, LatencyStats};
use crate::perftest::Verb;
use crate::verbs::{QpType, SendFlags, SendOp, SendWr, Sge, WcOpcode, WorkCompletion};

impl Side {
    pub(super) fn lat(&mut self, size: u64, oob: &mut Link) -> Result<Option<ResultRow>> {
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
                                "expected end of test, the peer sent {}",
                                other.what()
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
        if self.cfg.report_unsorted {
            println!("{}", report::latency_list(&samples, rtt_factor));
        }
        if self.cfg.report_histogram || self.cfg.report_unsorted {
            let mut sorted = samples.clone();
            sorted.sort_unstable();
            println!("{}", report::latency_list(&sorted, rtt_factor));
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
                        if self.cfg.events {
                            // -e: sleep until the CQ has a completion.
                            self.cq.wait(Duration::from_millis(1))?;
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
                            let last = posted_counts(p, 1)?[0];
                            stop_at = Some(last);
                            if i >= last {
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
                if self.cfg.events {
                    // -e: sleep until the CQ has a completion.
                    self.cq.wait(Duration::from_millis(1))?;
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
