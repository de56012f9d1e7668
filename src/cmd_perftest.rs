//! `rocelab perftest TEST [flags] [SERVER]`: perftest-compatible benchmarks
//! (ib_write_bw and friends) over the UDP emulation or real hardware.

use std::net::Ipv4Addr;
use std::path::PathBuf;
use std::process::ExitCode;

use clap::Args;
use verbs_emu::backend::BackendKind;
use verbs_emu::perftest::{self, Config, Faults, Test};
use verbs_emu::verbs::QpType;

/// perftest's flags (same letters and meanings) plus rocelab's own.
#[derive(Debug, Args)]
pub struct PerftestArgs {
    /// write_bw, write_lat, read_bw, read_lat, send_bw, send_lat, atomic_bw or atomic_lat.
    test: Test,
    /// The server to connect to; without it, this is the server.
    server: Option<String>,
    /// TCP port of the out-of-band exchange.
    #[arg(short = 'p', long = "port", default_value_t = 18515)]
    port: u16,
    /// RDMA device name.
    #[arg(short = 'd', long = "ib-dev")]
    ib_dev: Option<String>,
    /// Port of the device (only 1 exists).
    #[arg(short = 'i', long = "ib-port", default_value_t = 1)]
    ib_port: u8,
    /// GID index.
    #[arg(short = 'x', long = "gid-index", default_value_t = 0)]
    gid_index: u32,
    /// Message size in bytes, with an optional K or M suffix (64K, 1M);
    /// default 65536 for BW, 2 for latency.
    #[arg(short = 's', long = "size", value_parser = perftest::parse_size)]
    size: Option<u64>,
    /// Iterations (default 5000 for write_bw, 1000 otherwise).
    #[arg(short = 'n', long = "iters")]
    iters: Option<u64>,
    /// Run sizes 2 to 2^23.
    #[arg(short = 'a', long = "all")]
    all: bool,
    /// Run for this many seconds.
    #[arg(short = 'D', long = "duration")]
    duration: Option<u64>,
    /// Number of QPs (BW tests).
    #[arg(short = 'q', long = "qp", default_value_t = 1)]
    qps: u32,
    /// MTU: 256, 512, 1024, 2048 or 4096.
    #[arg(short = 'm', long = "mtu")]
    mtu: Option<u32>,
    /// TX depth (default 128 for BW, 1 for latency).
    #[arg(short = 't', long = "tx-depth")]
    tx_depth: Option<u32>,
    /// RX depth.
    #[arg(short = 'r', long = "rx-depth", default_value_t = 512)]
    rx_depth: u32,
    /// A completion every this many WRs (default 100; with -l, the post
    /// list size).
    #[arg(short = 'Q', long = "cq-mod")]
    cq_mod: Option<u32>,
    /// Both sides send at once; the result is the sum (BW tests).
    #[arg(short = 'b', long = "bidirectional")]
    bidirectional: bool,
    /// Post this many work requests per ibv_post_send call (BW tests).
    #[arg(short = 'l', long = "post_list", default_value_t = 1)]
    post_list: u32,
    /// QP timeout: 4.096 us x 2^TIMEOUT before an RC retransmission.
    #[arg(short = 'u', long = "qp-timeout", default_value_t = 14)]
    qp_timeout: u8,
    /// Service level, 0..15.
    #[arg(short = 'S', long = "sl", default_value_t = 0)]
    sl: u8,
    /// Traffic class of the GRH (DSCP << 2): the DSCP of every RoCEv2
    /// packet's IP header; the ECN bits stay the device's.
    #[arg(
        short = 'T',
        long = "tclass",
        visible_alias = "tos",
        default_value_t = 0
    )]
    tclass: u8,
    /// Print a result row every -D seconds (default 5) until stopped (BW
    /// tests).
    #[arg(long = "run_infinitely")]
    run_infinitely: bool,
    /// Write perftest's JSON report (to perftest_out.json unless
    /// --out_json_file names another file).
    #[arg(long = "out_json")]
    out_json: bool,
    /// The file of --out_json (perftest_out.json).
    #[arg(long = "out_json_file")]
    out_json_file: Option<PathBuf>,
    /// Connection type: RC, UC or UD.
    #[arg(short = 'c', long = "connection", default_value = "RC")]
    connection: String,
    /// Do not warn about CPU frequency (accepted; nothing to warn about).
    #[arg(short = 'F', long = "CPU-freq")]
    cpu_freq: bool,
    /// Report Gb/s instead of MiB/s.
    #[arg(long = "report_gbits")]
    report_gbits: bool,
    /// Max inline size.
    #[arg(short = 'I', long = "inline_size")]
    inline_size: Option<u32>,
    /// Backend: udp (emulation) or ibverbs (real hardware).
    #[arg(long = "backend", default_value = "udp")]
    backend: BackendKind,
    /// Local address for the emulated device (default: the address the
    /// peer is reached from; on loopback the client moves to 127.0.0.2...).
    #[arg(long = "bind")]
    bind: Option<Ipv4Addr>,
    /// UDP port of RoCEv2.
    #[arg(long = "udp-port", default_value_t = 4791)]
    udp_port: u16,
    /// Drop this share of transmitted packets.
    #[arg(long = "loss", default_value_t = 0.0)]
    loss: f64,
    /// Reorder this share of transmitted packets.
    #[arg(long = "reorder", default_value_t = 0.0)]
    reorder: f64,
    /// Duplicate this share of transmitted packets.
    #[arg(long = "duplicate", default_value_t = 0.0)]
    duplicate: f64,
    /// Corrupt this share of transmitted packets (bad ICRC).
    #[arg(long = "corrupt", default_value_t = 0.0)]
    corrupt: f64,
    /// Mark this share of transmitted ECN-capable packets CE, as a
    /// congested switch with ECN does (the receiver counts them in
    /// np_ecn_marked_roce_packets and answers with CNPs).
    #[arg(long = "ce-mark", default_value_t = 0.0)]
    ce_mark: f64,
    /// Seed of the fault injection.
    #[arg(long = "seed", default_value_t = 1)]
    seed: u64,
    /// Write every packet sent and received to this pcap file.
    #[arg(long = "pcap")]
    pcap: Option<PathBuf>,
    /// Check every byte of every message; a mismatch is an error.
    #[arg(long = "verify")]
    verify: bool,
    /// Spin on the socket while waiting (default for latency tests).
    #[arg(long = "busy-poll")]
    busy_poll: Option<bool>,
    /// Congestion control of this side's QPs: none, dcqcn (the firmware
    /// preset), dcqcn:paper or dcqcn:firmware. DCQCN starts at the link's
    /// speed (100 Gbit/s on loopback) and paces only below it, as a NIC's
    /// rate limiter; --cc-param line_rate=RATE sets a link of that speed,
    /// which the sender is then held to.
    #[arg(long = "cc", default_value = "none")]
    cc: String,
    /// A DCQCN parameter over the preset, KEY=VALUE with the keys of a
    /// scenario's [nic.cc.dcqcn] table (rate_ai=40Mbps, g=0.00390625,
    /// rate_increase_timer=55us, ...) or line_rate; repeatable.
    #[arg(long = "cc-param", value_name = "KEY=VALUE")]
    cc_param: Vec<String>,
    /// The notification point's minimum time between two CNPs of one QP
    /// (default: ConnectX's 4us; 50us with --cc dcqcn:paper).
    #[arg(long = "cnp-interval", value_name = "DURATION")]
    cnp_interval: Option<String>,
}

/// The congestion control the flags name; the error names the flag, the
/// value and what was expected.
pub fn cc_spec(
    cc: &str,
    params: &[String],
    cnp_interval: Option<&str>,
) -> Result<verbs_emu::cc::CcSpec, String> {
    let mut spec = verbs_emu::cc::CcSpec::parse(cc).map_err(|e| format!("--cc {e}"))?;
    for p in params {
        spec.set_param(p)
            .map_err(|e| format!("--cc-param {p:?}: {e}"))?;
    }
    if let Some(d) = cnp_interval {
        spec.overrides.min_time_between_cnps = Some(d.parse().map_err(|_| {
            format!("--cnp-interval {d:?}: expected a duration with a unit, e.g. 4us")
        })?);
    }
    spec.validate().map_err(|e| format!("--cc {cc}: {e}"))?;
    Ok(spec)
}

/// Run it.
pub fn run(a: PerftestArgs) -> ExitCode {
    let connection = match a.connection.to_ascii_uppercase().as_str() {
        "RC" => QpType::Rc,
        "UC" => QpType::Uc,
        "UD" => QpType::Ud,
        other => {
            eprintln!(" Invalid connection type {other}: expected RC, UC or UD");
            return ExitCode::FAILURE;
        }
    };
    if a.ib_port != 1 {
        eprintln!(" Port {} does not exist (the device has port 1)", a.ib_port);
        return ExitCode::FAILURE;
    }
    let cc = match cc_spec(&a.cc, &a.cc_param, a.cnp_interval.as_deref()) {
        Ok(c) => c,
        Err(e) => {
            eprintln!(" {e}");
            return ExitCode::FAILURE;
        }
    };
    let mut cfg = Config::new(a.test);
    cfg.cc = cc;
    cfg.server = a.server;
    cfg.port = a.port;
    cfg.ib_dev = a.ib_dev;
    cfg.gid_index = a.gid_index;
    cfg.size = a.size;
    cfg.iters = a.iters;
    cfg.all = a.all;
    cfg.duration = a.duration;
    cfg.qps = a.qps;
    cfg.mtu = a.mtu;
    cfg.tx_depth = a.tx_depth;
    cfg.rx_depth = a.rx_depth;
    cfg.cq_mod = a.cq_mod.unwrap_or(cfg.cq_mod);
    cfg.cq_mod_set = a.cq_mod.is_some();
    cfg.duplex = a.bidirectional;
    cfg.post_list = a.post_list;
    cfg.qp_timeout = a.qp_timeout;
    cfg.sl = a.sl;
    cfg.traffic_class = a.tclass;
    cfg.run_infinitely = a.run_infinitely;
    // As in perftest, --out_json_file only names the file of --out_json.
    cfg.out_json = a.out_json.then(|| {
        a.out_json_file
            .unwrap_or_else(|| PathBuf::from(perftest::DEFAULT_JSON_FILE))
    });
    cfg.connection = connection;
    cfg.cpu_freq_ignore = a.cpu_freq;
    cfg.report_gbits = a.report_gbits;
    cfg.inline_size = a.inline_size;
    cfg.backend = a.backend;
    cfg.bind = a.bind;
    cfg.udp_port = a.udp_port;
    cfg.faults = Faults {
        loss: a.loss,
        reorder: a.reorder,
        duplicate: a.duplicate,
        corrupt: a.corrupt,
        ce_mark: a.ce_mark,
        seed: a.seed,
        ..Faults::default()
    };
    cfg.pcap = a.pcap;
    cfg.verify = a.verify;
    cfg.busy_poll = a.busy_poll;
    match perftest::run(&cfg) {
        Ok(_) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("{e}");
            ExitCode::FAILURE
        }
    }
}
