//! perftest's printed output, character for character (REAL-NIC-FORMATS.md
//! §1): the header block, the address lines, the bandwidth and latency
//! tables. Pure functions from numbers to strings, so that the layout is
//! tested without running anything, and parsers of real perftest output
//! read ours.

use std::fmt::Write as _;

use crate::verbs::Gid;

/// perftest's `RESULT_LINE`: 87 dashes.
pub const RESULT_LINE: &str =
    "---------------------------------------------------------------------------------------";

/// The server's banner before the header.
pub const WAITING_BANNER: &str = "************************************\n* Waiting for client to connect... *\n************************************";

/// Bandwidth table header as Debian's perftest 4.5 prints it: the values
/// are MiB/s (2^20 bytes per second) but the unit reads `MB/sec` (perftest
/// before 24.07 labels them so).
pub const BW_HEADER_MIB: &str =
    " #bytes     #iterations    BW peak[MB/sec]    BW average[MB/sec]   MsgRate[Mpps]";
/// Bandwidth table header with `--report_gbits`.
pub const BW_HEADER_GBITS: &str =
    " #bytes     #iterations    BW peak[Gb/sec]    BW average[Gb/sec]   MsgRate[Mpps]";
/// Latency table header (with its trailing space).
pub const LAT_HEADER: &str = " #bytes #iterations    t_min[usec]    t_max[usec]  t_typical[usec]    t_avg[usec]    t_stdev[usec]   99% percentile[usec]   99.9% percentile[usec] ";
/// Latency table header in duration mode.
pub const LAT_DUR_HEADER: &str = " #bytes        #iterations       t_avg[usec]    tps average";
/// Printed when the peak cannot be measured.
pub const NO_PEAK_WARNING: &str = " WARNING: BW peak won't be measured in this run.";

/// C's `%#0Nx`: zero-padded to `width` characters including the `0x`
/// prefix; zero prints without a prefix (`%#04x` of 0 is `0000`).
pub fn c_alt_hex(v: u64, width: usize) -> String {
    if v == 0 {
        format!("{:0width$}", 0, width = width)
    } else {
        format!("{:#0width$x}", v, width = width)
    }
}

/// The header block's settings.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct HeaderInfo {
    /// The title line's verb: `Send`, `RDMA_Write`, `RDMA_Read`, `Atomic`.
    pub verb: &'static str,
    /// Bandwidth (`BW Test`) or latency (`Latency Test`).
    pub bandwidth: bool,
    /// Both directions at once (`Bidirectional` in the title).
    pub duplex: bool,
    /// The post list size, printed (and `Post List` in the title) above 1.
    pub post_list: Option<u32>,
    /// Device name.
    pub device: String,
    /// QPs.
    pub num_qps: u32,
    /// `RC`, `UC` or `UD`.
    pub connection: &'static str,
    /// TX depth, printed on the client (or with `-b`).
    pub tx_depth: Option<u32>,
    /// RX depth, printed for send tests on the server.
    pub rx_depth: Option<u32>,
    /// CQ moderation, printed for bandwidth tests.
    pub cq_mod: Option<u32>,
    /// The negotiated MTU in bytes.
    pub mtu: u32,
    /// Link type: `Ethernet` for RoCE.
    pub link_ethernet: bool,
    /// GID index, when one is used.
    pub gid_index: Option<u32>,
    /// Max inline data (not READ/atomic).
    pub max_inline: Option<u32>,
    /// Outstanding reads (READ/atomic).
    pub outstanding_reads: Option<u32>,
}

/// The header block, from the opening `RESULT_LINE` to the closing one.
pub fn header_block(h: &HeaderInfo) -> String {
    let mut s = String::new();
    let kind = match (h.bandwidth, h.duplex, h.post_list.is_some()) {
        (false, _, _) => "Latency Test",
        (true, false, false) => "BW Test",
        (true, true, false) => "Bidirectional BW Test",
        (true, false, true) => "Post List BW Test",
        (true, true, true) => "Bidirectional Post List BW Test",
    };
    let _ = writeln!(s, "{RESULT_LINE}");
    let _ = writeln!(s, "                    {} {}", h.verb, kind);
    let _ = writeln!(s, " Dual-port       : OFF\t\tDevice         : {}", h.device);
    let _ = writeln!(s, " Number of qps   : {}\t\tTransport type : IB", h.num_qps);
    let _ = writeln!(
        s,
        " Connection type : {}\t\tUsing SRQ      : OFF",
        h.connection
    );
    let _ = writeln!(s, " PCIe relax order: OFF\t\tLock-free      : OFF");
    let _ = writeln!(s, " ibv_wr* API     : OFF\t\tUsing DDP      : OFF");
    if let Some(rx) = h.rx_depth {
        let _ = writeln!(s, " RX depth        : {rx}");
    }
    if let Some(tx) = h.tx_depth {
        let _ = writeln!(s, " TX depth        : {tx}");
    }
    if let Some(l) = h.post_list {
        let _ = writeln!(s, " Post List       : {l}");
    }
    if let Some(m) = h.cq_mod {
        let _ = writeln!(s, " CQ Moderation   : {m}");
    }
    let _ = writeln!(s, " Mtu             : {}[B]", h.mtu);
    let _ = writeln!(
        s,
        " Link type       : {}",
        if h.link_ethernet { "Ethernet" } else { "IB" }
    );
    if let Some(g) = h.gid_index {
        let _ = writeln!(s, " GID index       : {g}");
    }
    if let Some(i) = h.max_inline {
        let _ = writeln!(s, " Max inline data : {i}[B]");
    }
    if let Some(o) = h.outstanding_reads {
        let _ = writeln!(s, " Outstand reads  : {o}");
    }
    let _ = writeln!(s, " rdma_cm QPs\t : OFF");
    let _ = writeln!(s, " Data ex. method : Ethernet");
    let _ = write!(s, "{RESULT_LINE}");
    s
}

/// The result part of perftest's `--out_json` report.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum JsonResult<'a> {
    /// A bandwidth row: size, iterations, peak, average (the table's
    /// unit), message rate (Mpps), and whether the unit is Gb/s.
    Bw {
        /// Message size.
        size: u64,
        /// Iterations.
        iters: u64,
        /// Peak bandwidth.
        peak: f64,
        /// Average bandwidth.
        avg: f64,
        /// Message rate, Mpps.
        msg_rate: f64,
        /// Gb/s (else MiB/s).
        gbits: bool,
    },
    /// A latency row (microseconds).
    Lat {
        /// Message size.
        size: u64,
        /// Iterations.
        iters: u64,
        /// The statistics.
        stats: &'a LatencyStats,
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

/// perftest's `--out_json` file: its own shape (unquoted keys, trailing
/// commas, as perftest writes it), the header's settings as `test_info`
/// and the result row as `results`.
pub fn json_report(h: &HeaderInfo, r: &JsonResult<'_>) -> String {
    let mut s = String::from("{\ntest_info: {\n");
    let mut test = h.verb.replace(' ', "_") + "_";
    if h.bandwidth {
        if h.duplex {
            test.push_str("Bidirectional_");
        }
        if h.post_list.is_some() {
            test.push_str("Post_List_");
        }
        test.push_str("BW_");
    } else {
        test.push_str("Latency_");
    }
    let _ = writeln!(s, "test: {test}Test,");
    let _ = writeln!(s, "Dual_port: OFF,\nDevice: \"{}\",", h.device);
    let _ = writeln!(s, "Number_of_qps: {},\nTransport_type: IB,", h.num_qps);
    let _ = writeln!(s, "Connection_type: {},\nUsing_SRQ: OFF,", h.connection);
    let _ = writeln!(s, "PCIe_relax_order: OFF,\nibv_wr_API: OFF,");
    if let Some(tx) = h.tx_depth {
        let _ = writeln!(s, "TX_depth : {tx},");
    }
    if let Some(l) = h.post_list {
        let _ = writeln!(s, "Post_List: {l},");
    }
    if let Some(rx) = h.rx_depth {
        let _ = writeln!(s, "RX_depth: {rx},");
    }
    if let Some(m) = h.cq_mod {
        let _ = writeln!(s, "CQ_Moderation: {m},");
    }
    let _ = writeln!(s, "Mtu: {},", h.mtu);
    let _ = writeln!(
        s,
        "Link_type: {},",
        if h.link_ethernet { "Ethernet" } else { "IB" }
    );
    if let Some(g) = h.gid_index {
        let _ = writeln!(s, "GID_index: {g},");
    }
    match (h.max_inline, h.outstanding_reads) {
        (Some(i), _) => {
            let _ = writeln!(s, "Max_inline_data: {i},");
        }
        (None, Some(o)) => {
            let _ = writeln!(s, "Outstand_reads: {o},");
        }
        (None, None) => {}
    }
    s.push_str("rdma_cm_QPs: OFF,\nData_ex_method: Ethernet,\n},\nresults: {\n");
    match *r {
        JsonResult::Bw {
            size,
            iters,
            peak,
            avg,
            msg_rate,
            gbits,
        } => {
            let p = if gbits && avg < 0.1 { 6 } else { 2 };
            let _ = writeln!(
                s,
                "MsgSize: {size},\nn_iterations: {iters},\nBW_peak: {peak:.p$},\nBW_average: {avg:.p$},\nMsgRate: {msg_rate:.6},"
            );
        }
        JsonResult::Lat { size, iters, stats } => {
            let _ = writeln!(
                s,
                "MsgSize: {size},\nn_iterations: {iters},\nt_min: {:.2},\nt_max: {:.2},\nt_typical: {:.2},\nt_avg: {:.2},\nt_stdev: {:.2},\npercentile_99: {:.2},\npercentile_99.9: {:.2},",
                stats.min, stats.max, stats.typical, stats.avg, stats.stdev, stats.p99, stats.p999
            );
        }
        JsonResult::LatDuration {
            size,
            iters,
            avg_us,
            tps,
        } => {
            let _ = writeln!(
                s,
                "MsgSize: {size},\nn_iterations: {iters},\nt_avg: {avg_us:.2},\ntps_average: {tps:.2},"
            );
        }
    }
    s.push_str("},\n}\n");
    s
}

/// The title of the end-of-run counter block, before its device and
/// length: `Counter delta of this run: device DEV, S s` (S in seconds,
/// six decimals), then the counters in `ethtool -S`'s layout.
pub const COUNTERS_TITLE: &str = "Counter delta of this run:";

/// The end-of-run counter block: what the device counted between the
/// start of the run and its end (`counters`, a
/// [`delta`](crate::backend::counters::delta)), over `seconds`, as a title
/// line and an `ethtool -S` dump (`NIC statistics:` then `     name:
/// value`), so that readers of real `ethtool -S` output read it.
pub fn counter_block(device: &str, seconds: f64, counters: &[(String, u64)]) -> String {
    format!(
        " {COUNTERS_TITLE} device {device}, {seconds:.6} s\n{}",
        crate::backend::counters::ethtool_text(counters)
    )
}

/// A `--out_json` report ([`json_report`]'s text) with the run's counter
/// delta added as the last top-level sections, in the report's own shape:
/// `counters_seconds: S,` (the time the delta covers, six decimals, as
/// the text block's title gives it) and `counters: { name: value, ... },`.
/// A text that does not end as [`json_report`] ends it is returned
/// unchanged.
pub fn json_with_counters(report: &str, seconds: f64, counters: &[(String, u64)]) -> String {
    let Some(body) = report.strip_suffix("}\n") else {
        return report.to_string();
    };
    let mut s = format!("{body}counters_seconds: {seconds:.6},\ncounters: {{\n");
    for (n, v) in counters {
        let _ = writeln!(s, "{n}: {v},");
    }
    s.push_str("},\n}\n");
    s
}

/// One side's address line data.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct AddressInfo {
    /// LID (0 on RoCE).
    pub lid: u16,
    /// QP number.
    pub qpn: u32,
    /// First PSN.
    pub psn: u32,
    /// Outstanding reads (READ tests print `OUT`).
    pub out_reads: Option<u32>,
    /// Remote key and address (READ and WRITE tests).
    pub rkey_vaddr: Option<(u32, u64)>,
    /// GID, printed when a GID index is in use.
    pub gid: Option<Gid>,
}

/// `" local address: ..."` or `" remote address: ..."`, plus the GID line.
pub fn address_lines(local: bool, a: &AddressInfo) -> String {
    let mut s = format!(
        " {} address: LID {} QPN {} PSN {}",
        if local { "local" } else { "remote" },
        c_alt_hex(a.lid.into(), 4),
        c_alt_hex(a.qpn.into(), 6),
        c_alt_hex(a.psn.into(), 6),
    );
    if let Some(o) = a.out_reads {
        let _ = write!(s, " OUT {}", c_alt_hex(o.into(), 4));
    }
    if let Some((rkey, va)) = a.rkey_vaddr {
        let _ = write!(
            s,
            " RKey {} VAddr {}",
            c_alt_hex(rkey.into(), 8),
            c_alt_hex(va, 16)
        );
    }
    if let Some(g) = a.gid {
        let bytes: Vec<String> = g.0.iter().map(|b| format!("{b:02}")).collect();
        let _ = write!(s, "\n GID: {}", bytes.join(":"));
    }
    s
}

/// Every latency sample as perftest's `-H` and `-U` print them: a
/// `#, usec` line, then `N, VALUE` per sample (1-based, `%g` of the
/// one-way microseconds: the nanosecond round trip over `rtt_factor`).
pub fn latency_list(samples_ns: &[u64], rtt_factor: u32) -> String {
    let mut s = String::from("#, usec");
    for (i, &v) in samples_ns.iter().enumerate() {
        let us = v as f64 / 1000.0 / f64::from(rtt_factor.max(1));
        s.push_str(&format!("\n{}, {}", i + 1, format_g(us)));
    }
    s
}

/// C's `%g`: 6 significant digits, trailing zeros dropped, exponent form
/// below 1e-4 or from 1e6.
fn format_g(v: f64) -> String {
    if v == 0.0 {
        return "0".into();
    }
    let exp = v.abs().log10().floor() as i32;
    if !(-4..6).contains(&exp) {
        let m = format!("{:.5e}", v);
        let (mant, e) = m.split_once('e').unwrap_or((&m, "0"));
        let mant = mant.trim_end_matches('0').trim_end_matches('.');
        let e: i32 = e.parse().unwrap_or(0);
        return format!("{mant}e{}{:02}", if e < 0 { '-' } else { '+' }, e.abs());
    }
    let decimals = (5 - exp).max(0) as usize;
    let t = format!("{v:.decimals$}");
    if t.contains('.') {
        t.trim_end_matches('0').trim_end_matches('.').to_string()
    } else {
        t
    }
}

/// A bandwidth result row (perftest `REPORT_FMT`). `peak` and `average`
/// are in MiB/s, or Gb/s with `gbits`.
pub fn bw_row(
    size: u64,
    iters: u64,
    peak: f64,
    average: f64,
    msg_rate_mpps: f64,
    gbits: bool,
) -> String {
    if gbits && average < 0.1 {
        format!(
            " {:<7}    {}           {:<7.6}            {:<7.6}            {:<7.6}",
            size, iters, peak, average, msg_rate_mpps
        )
    } else {
        format!(
            " {:<7}    {:<10}       {:<7.2}            {:<7.2}\t\t     {:<7.6}",
            size, iters, peak, average, msg_rate_mpps
        )
    }
}

/// Latency statistics in microseconds, as perftest computes them.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct LatencyStats {
    /// Minimum.
    pub min: f64,
    /// Maximum.
    pub max: f64,
    /// Median (`t_typical`).
    pub typical: f64,
    /// Mean.
    pub avg: f64,
    /// Standard deviation.
    pub stdev: f64,
    /// 99th percentile.
    pub p99: f64,
    /// 99.9th percentile.
    pub p999: f64,
}

impl LatencyStats {
    /// Statistics of `samples_ns` (each one measured interval in
    /// nanoseconds) divided by `rtt_factor` (2 for write and send, which
    /// report half the round trip; 1 for read and atomic). Sorts the samples.
    pub fn from_samples(samples_ns: &mut [u64], rtt_factor: u32) -> Option<LatencyStats> {
        if samples_ns.is_empty() {
            return None;
        }
        samples_ns.sort_unstable();
        let n = samples_ns.len();
        let us = |v: u64| v as f64 / 1000.0 / f64::from(rtt_factor);
        let avg = samples_ns.iter().map(|&v| us(v)).sum::<f64>() / n as f64;
        let var = samples_ns
            .iter()
            .map(|&v| (us(v) - avg).powi(2))
            .sum::<f64>()
            / n as f64;
        let median = if n % 2 == 0 {
            (us(samples_ns[n / 2 - 1]) + us(samples_ns[n / 2])) / 2.0
        } else {
            us(samples_ns[n / 2])
        };
        let idx = |q: f64| (((n as f64) * q).ceil() as usize).min(n - 1);
        Some(LatencyStats {
            min: us(samples_ns[0]),
            max: us(samples_ns[n - 1]),
            typical: median,
            avg,
            stdev: var.sqrt(),
            p99: us(samples_ns[idx(0.99)]),
            p999: us(samples_ns[idx(0.999)]),
        })
    }
}

/// A latency result row (perftest `REPORT_FMT_LAT`).
pub fn lat_row(size: u64, iters: u64, s: &LatencyStats) -> String {
    format!(
        " {:<7} {}          {:<7.2}        {:<7.2}      {:<7.2}  \t       {:<7.2}     \t{:<7.2}\t\t{:<7.2} \t\t{:<7.2}",
        size, iters, s.min, s.max, s.typical, s.avg, s.stdev, s.p99, s.p999
    )
}

/// A latency row in duration mode (`REPORT_FMT_LAT_DUR`).
pub fn lat_dur_row(size: u64, iters: u64, avg_us: f64, tps: f64) -> String {
    format!(
        " {:<7}       {}            {:<7.2}        {:<7.2}",
        size, iters, avg_us, tps
    )
}

/// Bandwidth in the unit the table uses: MiB/s, or Gb/s (10^9 bit) with
/// `gbits`.
pub fn bandwidth(bytes: u64, seconds: f64, gbits: bool) -> f64 {
    if seconds <= 0.0 {
        return 0.0;
    }
    if gbits {
        bytes as f64 * 8.0 / 1e9 / seconds
    } else {
        bytes as f64 / (1u64 << 20) as f64 / seconds
    }
}

/// The completion-error lines perftest prints.
pub fn completion_error(
    server: bool,
    status: &str,
    status_num: u32,
    wr_id: u64,
    vendor_err: u32,
) -> String {
    format!(
        " Completion with error at {}\n Failed status-{} ({}): wr_id {} syndrom 0x{:x}",
        if server { "server" } else { "client" },
        status,
        status_num,
        wr_id,
        vendor_err
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn counter_block_is_a_title_and_an_ethtool_dump() {
        let c = vec![
            ("out_of_sequence".to_string(), 7),
            ("np_cnp_sent".to_string(), 0),
        ];
        assert_eq!(
            counter_block("udp_lo", 1.5, &c),
            " Counter delta of this run: device udp_lo, 1.500000 s\nNIC statistics:\n     out_of_sequence: 7\n     np_cnp_sent: 0\n"
        );
        let j = json_with_counters("{\ntest_info: {\n},\nresults: {\n},\n}\n", 1.5, &c);
        assert_eq!(
            j,
            "{\ntest_info: {\n},\nresults: {\n},\ncounters_seconds: 1.500000,\ncounters: {\nout_of_sequence: 7,\nnp_cnp_sent: 0,\n},\n}\n"
        );
        assert_eq!(json_with_counters("not ours", 1.5, &c), "not ours");
    }

    #[test]
    fn c_alt_hex_matches_printf() {
        assert_eq!(c_alt_hex(0, 4), "0000");
        assert_eq!(c_alt_hex(0x108, 6), "0x0108");
        assert_eq!(c_alt_hex(0x6d5b3, 6), "0x6d5b3");
        assert_eq!(c_alt_hex(0x1fd4bc, 8), "0x1fd4bc");
        assert_eq!(c_alt_hex(0x7f0ed6e1e000, 16), "0x007f0ed6e1e000");
        assert_eq!(c_alt_hex(0x10011b4d, 8), "0x10011b4d");
    }

    #[test]
    fn address_line_matches_a_real_capture() {
        let a = AddressInfo {
            lid: 0,
            qpn: 0x9b,
            psn: 0x57bb8f,
            out_reads: None,
            rkey_vaddr: Some((0x1fd4bc, 0x7f0e0c8aa000)),
            gid: Some(Gid::from_ip("192.168.119.2".parse().unwrap())),
        };
        assert_eq!(
            address_lines(true, &a),
            " local address: LID 0000 QPN 0x009b PSN 0x57bb8f RKey 0x1fd4bc VAddr 0x007f0e0c8aa000\n GID: 00:00:00:00:00:00:00:00:00:00:255:255:192:168:119:02"
        );
    }

    #[test]
    fn bw_row_matches_a_real_capture() {
        assert_eq!(
            bw_row(65536, 5000, 11030.78, 11030.45, 0.176487, false),
            " 65536      5000             11030.78            11030.45\t\t     0.176487"
        );
        assert_eq!(
            bw_row(2, 1000, 0.56, 0.56, 0.294363, false),
            " 2          1000             0.56               0.56   \t\t     0.294363"
        );
    }

    #[test]
    fn lat_row_matches_a_real_capture() {
        let s = LatencyStats {
            min: 1.57,
            max: 9.65,
            typical: 1.84,
            avg: 2.04,
            stdev: 0.69,
            p99: 5.02,
            p999: 9.65,
        };
        assert_eq!(
            lat_row(2, 1000, &s),
            " 2       1000          1.57           9.65         1.84     \t       2.04        \t0.69   \t\t5.02    \t\t9.65   "
        );
    }

    #[test]
    fn latency_stats_halve_round_trips() {
        let mut v: Vec<u64> = (1..=1000).map(|i| i * 1000).collect();
        let s = LatencyStats::from_samples(&mut v, 2).unwrap();
        assert_eq!(s.min, 0.5);
        assert_eq!(s.max, 500.0);
        assert_eq!(s.typical, 250.25);
        assert!((s.avg - 250.25).abs() < 1e-9);
        assert_eq!(s.p99, 495.5);
    }

    #[test]
    fn header_block_has_perftest_lines() {
        let h = HeaderInfo {
            verb: "RDMA_Write",
            bandwidth: true,
            device: "udp_lo".into(),
            num_qps: 1,
            connection: "RC",
            tx_depth: Some(128),
            rx_depth: None,
            cq_mod: Some(100),
            mtu: 4096,
            link_ethernet: true,
            gid_index: Some(0),
            max_inline: Some(0),
            outstanding_reads: None,
            duplex: false,
            post_list: None,
        };
        let j = json_report(
            &HeaderInfo {
                duplex: true,
                post_list: Some(4),
                ..h.clone()
            },
            &JsonResult::Bw {
                size: 65536,
                iters: 5000,
                peak: 531.875,
                avg: 280.031,
                msg_rate: 0.0044812,
                gbits: false,
            },
        );
        assert_eq!(
            j,
            "{\ntest_info: {\ntest: RDMA_Write_Bidirectional_Post_List_BW_Test,\nDual_port: OFF,\n\
             Device: \"udp_lo\",\nNumber_of_qps: 1,\nTransport_type: IB,\nConnection_type: RC,\n\
             Using_SRQ: OFF,\nPCIe_relax_order: OFF,\nibv_wr_API: OFF,\nTX_depth : 128,\n\
             Post_List: 4,\nCQ_Moderation: 100,\nMtu: 4096,\nLink_type: Ethernet,\nGID_index: 0,\n\
             Max_inline_data: 0,\nrdma_cm_QPs: OFF,\nData_ex_method: Ethernet,\n},\nresults: {\n\
             MsgSize: 65536,\nn_iterations: 5000,\nBW_peak: 531.88,\nBW_average: 280.03,\n\
             MsgRate: 0.004481,\n},\n}\n"
        );
        let b = header_block(&h);
        let lines: Vec<&str> = b.lines().collect();
        assert_eq!(lines[0], RESULT_LINE);
        assert_eq!(lines[1], "                    RDMA_Write BW Test");
        assert_eq!(
            lines[2],
            " Dual-port       : OFF\t\tDevice         : udp_lo"
        );
        assert!(lines.contains(&" Mtu             : 4096[B]"));
        assert!(lines.contains(&" rdma_cm QPs\t : OFF"));
        assert_eq!(*lines.last().unwrap(), RESULT_LINE);
        assert_eq!(RESULT_LINE.len(), 87);
    }
}
