//! perftest's own output for the simulator's perftest workloads: for each
//! side (client, server), the header block and the result table as
//! perftest prints them, from the run's [`PerftestRecord`]s.
//!
//! Bandwidth rows: `BW average` = payload bytes over first post to last
//! completion (MiB/s, perftest's unit), `MsgRate` = messages over the same
//! time (Mpps). The simulated run has no measurement jitter, so `BW peak`
//! is printed equal to the average. Latency rows: perftest's statistics of
//! the round trips, halved for WRITE and SEND. The server of a bandwidth
//! test prints the client's rows (perftest exchanges them); the server of
//! a latency test prints no rows, as perftest's does not.

use sim::results::PerftestRecord;
use sim::workload::perftest::PerftestTest;
use verbs_emu::perftest::report::{self, HeaderInfo, LatencyStats};

/// What one side prints.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SideText {
    /// `client` or `server`.
    pub side: &'static str,
    /// The whole output.
    pub text: String,
}

/// The records of one workload (consecutive records whose group names
/// share the prefix before the size), in run order.
pub fn by_workload(recs: &[PerftestRecord]) -> Vec<(String, Vec<&PerftestRecord>)> {
    let mut out: Vec<(String, Vec<&PerftestRecord>)> = Vec::new();
    for r in recs {
        let suffix = format!("-{}", r.size);
        let name = r
            .group
            .strip_suffix(&suffix)
            .unwrap_or(&r.group)
            .to_string();
        match out.last_mut() {
            Some((n, v)) if *n == name => v.push(r),
            _ => out.push((name, vec![r])),
        }
    }
    out
}

/// The rows of the table, one line each.
pub fn rows(recs: &[&PerftestRecord]) -> Vec<String> {
    let mut out = Vec::new();
    for r in recs {
        let iters = r.iterations();
        if r.test.is_bw() {
            let secs = r.seconds().unwrap_or(0.0);
            let bw = report::bandwidth(r.bytes, secs, false);
            let mpps = r.msg_rate().unwrap_or(0.0) / 1e6;
            out.push(report::bw_row(r.size, iters, bw, bw, mpps, false));
        } else if r.timed {
            let n = r.latency_samples_ps.len().max(1) as f64;
            let total: u64 = r.latency_samples_ps.iter().sum();
            let avg_us = total as f64 / n / 1e6 / f64::from(r.test.rtt_factor());
            let tps = if total > 0 {
                n / (total as f64 / 1e12)
            } else {
                0.0
            };
            out.push(report::lat_dur_row(r.size, iters, avg_us, tps));
        } else {
            let mut ns: Vec<u64> = r.latency_samples_ps.iter().map(|p| p / 1000).collect();
            if let Some(s) = LatencyStats::from_samples(&mut ns, r.test.rtt_factor()) {
                out.push(report::lat_row(r.size, iters, &s));
            }
        }
    }
    out
}

/// Both sides' output of one workload's records (`device`: the device
/// name printed, `mtu`: the path MTU in bytes).
pub fn sides(recs: &[&PerftestRecord], device: &str, mtu: u32) -> Vec<SideText> {
    let Some(first) = recs.first() else {
        return Vec::new();
    };
    let t = first.test;
    let send = matches!(t, PerftestTest::SendBw | PerftestTest::SendLat);
    let read = matches!(t, PerftestTest::ReadBw | PerftestTest::ReadLat);
    let header = |server: bool| HeaderInfo {
        verb: t.verb(),
        bandwidth: t.is_bw(),
        duplex: first.bidirectional,
        post_list: None,
        device: device.to_string(),
        num_qps: first.qps,
        connection: "RC",
        tx_depth: (!server || first.bidirectional).then_some(first.tx_depth),
        rx_depth: (send && server).then_some(512),
        cq_mod: t.is_bw().then_some(first.cq_mod),
        mtu,
        link_ethernet: true,
        gid_index: Some(3),
        max_inline: (!read).then_some(first.inline),
        outstanding_reads: read.then_some(16),
    };
    let table_header = if t.is_bw() {
        report::BW_HEADER_MIB
    } else if first.timed {
        report::LAT_DUR_HEADER
    } else {
        report::LAT_HEADER
    };
    let rows = rows(recs);
    let mut out = Vec::new();
    for server in [false, true] {
        let mut s = String::new();
        if server {
            s.push_str(report::WAITING_BANNER);
            s.push('\n');
        }
        s.push_str(&report::header_block(&header(server)));
        s.push('\n');
        s.push_str(report::RESULT_LINE);
        s.push('\n');
        s.push_str(table_header);
        s.push('\n');
        if t.is_bw() || !server {
            for r in &rows {
                s.push_str(r);
                s.push('\n');
            }
        }
        s.push_str(report::RESULT_LINE);
        s.push('\n');
        out.push(SideText {
            side: if server { "server" } else { "client" },
            text: s,
        });
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn rec(test: PerftestTest, size: u64) -> PerftestRecord {
        PerftestRecord {
            group: format!("pt-{size}"),
            test,
            size,
            qps: 1,
            bidirectional: false,
            tx_depth: 128,
            cq_mod: 100,
            inline: 0,
            timed: false,
            messages: 1000,
            bytes: 1000 * size,
            start_ps: Some(0),
            finish_ps: Some(1_000_000_000),
            completed: true,
            limit: sim::hostmodel::Limit::Wire,
            bound_bps: 0,
            unloaded_latency_ps: 0,
            latency_samples_ps: if test.is_bw() {
                Vec::new()
            } else {
                vec![2_000_000; 9]
            },
        }
    }

    #[test]
    fn a_bandwidth_table_reads_back_through_the_parser() {
        let recs = [
            rec(PerftestTest::WriteBw, 65536),
            rec(PerftestTest::WriteBw, 131072),
        ];
        let groups = by_workload(&recs);
        assert_eq!(groups.len(), 1);
        assert_eq!(groups[0].0, "pt");
        let sides = sides(&groups[0].1, "sim0", 4096);
        let parsed = crate::realnic::perftest::parse(&sides[0].text).unwrap();
        let run = &parsed.runs[0];
        // 65536000 bytes in 1 ms: 62500 MiB/s.
        assert_eq!(run.bw.len(), 2, "{}", sides[0].text);
        let row = &run.bw[0];
        assert_eq!(row.bytes, 65536);
        assert_eq!(row.iterations, 1000);
        assert_eq!(row.avg_bps / 1_000_000, 524_288);
        // The server prints the same rows after its banner.
        assert!(sides[1].text.starts_with(report::WAITING_BANNER));
        assert_eq!(
            crate::realnic::perftest::parse(&sides[1].text)
                .unwrap()
                .runs[0]
                .bw
                .len(),
            2
        );
    }

    #[test]
    fn a_latency_table_halves_the_round_trip() {
        let recs = [rec(PerftestTest::WriteLat, 2)];
        let sides = sides(&[&recs[0]], "sim0", 4096);
        assert!(sides[0].text.contains(" 2       10 "), "{}", sides[0].text);
        assert!(sides[0].text.contains("1.00"), "{}", sides[0].text);
        // The server of a latency test prints no rows.
        assert!(!sides[1].text.contains("1.00"));
    }
}
