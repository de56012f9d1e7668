//! What a side prints and writes: perftest's header block and address
//! lines, the `--out_json` report, the end-of-run counter block, and the
//! summary of `--verify`, injected faults and the transport's recoveries.
//!
//! Contract: stdout carries perftest's output (a clean run prints what
//! perftest prints); the JSON file is rewritten with each row, as
//! perftest's is.

use super::error::{PerftestError, Result};
use super::resources::Side;
use super::rows::ResultRow;
use crate::backend;
use crate::perftest::report::{self, AddressInfo, HeaderInfo};
use crate::perftest::Verb;

impl Side {
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
                .then_some(u32::from(cfg.outstanding_reads())),
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
    pub(super) fn print_counters(&self) -> Result<()> {
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
        std::fs::write(path, report::json_with_counters(&text, seconds, &delta))
            .map_err(|e| PerftestError::Config(format!("--out_json_file {}: {e}", path.display())))
    }

    /// `--out_json` of a result row.
    pub(super) fn write_json_row(&self, row: &ResultRow) -> Result<()> {
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

    pub(super) fn print_header(&self) {
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
    pub(super) fn print_summary(&self) {
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
}
