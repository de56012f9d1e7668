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
    #[arg(required_unless_present = "version")]
    test: Option<Test>,
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
    /// Do not measure the peak bandwidth (the peak column reads 0).
    #[arg(short = 'N', long = "noPeak")]
    no_peak: bool,
    /// Print every latency sample, sorted, before the result row.
    #[arg(short = 'H', long = "report-histogram")]
    report_histogram: bool,
    /// Print every latency sample in the order taken (implies -H).
    #[arg(short = 'U', long = "report-unsorted")]
    report_unsorted: bool,
    /// Sleep on completion events instead of polling the CQ.
    #[arg(short = 'e', long = "events")]
    events: bool,
    /// Outstanding RDMA READs and atomics per QP (default 16, the device's
    /// maximum).
    #[arg(short = 'o', long = "outs")]
    outs: Option<u8>,
    /// Fail unless the average bandwidth reaches this (the table's unit).
    #[arg(short = 'w', long = "limit_bw")]
    limit_bw: Option<f64>,
    /// Fail unless the message rate reaches this (Mpps).
    #[arg(short = 'y', long = "limit_msgrate")]
    limit_msgrate: Option<f64>,
    /// With -b, print each direction's result instead of their sum.
    #[arg(long = "report-both")]
    report_both: bool,
    /// Print perftest's version and exit.
    #[arg(short = 'V', long = "version")]
    version: bool,
    /// Source IP of the connection (the emulated device binds it, as
    /// --bind).
    #[arg(long = "source_ip")]
    source_ip: Option<Ipv4Addr>,
    /// Wait this many seconds before exiting (the run has released its
    /// resources by then).
    #[arg(long = "wait_destroy")]
    wait_destroy: Option<u64>,
    /// Atomic operation: FETCH_AND_ADD (CMP_AND_SWAP is not implemented).
    #[arg(short = 'A', long = "atomic_type")]
    atomic_type: Option<String>,
    #[command(flatten)]
    compat: CompatFlags,
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
    /// Check each received ICRC against the IPv4 header the sender's kernel
    /// is expected to write only: CRC-32's guarantees (every two-bit error,
    /// every burst of up to 32 bits rejected); a packet a path re-segmented
    /// is then an ICRC error instead of being solved for.
    #[arg(long = "strict-icrc")]
    strict_icrc: bool,
    /// Spin on the CQ and the socket while waiting (default for latency
    /// tests and for bandwidth tests of messages under 64 KiB).
    #[arg(long = "busy-poll")]
    busy_poll: Option<bool>,
    /// Congestion control of this side's QPs: none, dcqcn (the firmware
    /// preset), dcqcn:paper, dcqcn:firmware, swift or timely (delay-based,
    /// from the round trips the sender times). The algorithm starts at the
    /// link's speed (100 Gbit/s on loopback) and paces only below it, as a
    /// NIC's rate limiter; --cc-param line_rate=RATE sets a link of that
    /// speed, which the sender is then held to.
    #[arg(long = "cc", default_value = "none")]
    cc: String,
    /// A parameter of the algorithm, KEY=VALUE with the keys of a
    /// scenario's [nic.cc.dcqcn] table (rate_ai=40Mbps, g=0.00390625,
    /// rate_increase_timer=55us, ...), [nic.cc.swift] (queueing=300us, ...)
    /// or [nic.cc.timely] (t_low=1ms, t_high=3ms, ...), or line_rate;
    /// repeatable.
    #[arg(long = "cc-param", value_name = "KEY=VALUE")]
    cc_param: Vec<String>,
    /// The notification point's minimum time between two CNPs of one QP
    /// (default: ConnectX's 4us; 50us with --cc dcqcn:paper).
    #[arg(long = "cnp-interval", value_name = "DURATION")]
    cnp_interval: Option<String>,
}

/// perftest's flags that do not change what the emulation measures, or
/// that need hardware or features it does not have. Each is accepted; the
/// run says in a one-line note what became of it ([`CompatFlags::notes`]),
/// or refuses those whose effect it cannot give where running without it
/// would give a wrong result ([`CompatFlags::refusal`]).
#[derive(Debug, Args)]
pub struct CompatFlags {
    /// Connect the QPs with rdma_cm (note: the QPs are connected through
    /// the TCP exchange, with the same attributes).
    #[arg(short = 'R', long = "rdma_cm")]
    rdma_cm: bool,
    /// Exchange the connection data through rdma_cm (note: TCP is used).
    #[arg(short = 'z', long = "com_rdma_cm")]
    com_rdma_cm: bool,
    /// Report times in CPU cycles (note: times are in usec).
    #[arg(short = 'C', long = "report-cycles")]
    report_cycles: bool,
    /// Measure within margins of -D (note: the whole -D is measured).
    #[arg(short = 'f', long = "margin")]
    margin: Option<String>,
    /// Dual-port mode (refused: the device has one port).
    #[arg(short = 'O', long = "dualport")]
    dualport: bool,
    /// Hop limit of raw Ethernet QPs (note: no raw Ethernet QPs).
    #[arg(short = 'L', long = "hop_limit")]
    hop_limit: Option<String>,
    /// Report changes of these performance counters (note: the end-of-run
    /// counter block reports them all).
    #[arg(short = 'W', long = "report-counters")]
    report_counters: Option<String>,
    /// Completion vector of the events (note: one vector).
    #[arg(short = 'X', long = "vector")]
    vector: Option<String>,
    /// Multicast group (refused: no multicast).
    #[arg(short = 'g', long = "mcg")]
    mcg: bool,
    /// Multicast GID (refused: no multicast).
    #[arg(short = 'M', long = "MGID")]
    mgid: Option<String>,
    /// Use an SRQ (note: receives go to each QP's own queue).
    #[arg(long = "use-srq")]
    use_srq: bool,
    /// Inline receive size (note: not applied).
    #[arg(long = "inline_recv")]
    inline_recv: Option<String>,
    /// Delay between latency posts (refused: not implemented).
    #[arg(long = "latency_gap")]
    latency_gap: Option<String>,
    /// CPU utilisation in -D runs (note: not measured).
    #[arg(long = "cpu_util")]
    cpu_util: bool,
    /// Destination LID (note: RoCE has no LIDs).
    #[arg(long = "dlid")]
    dlid: Option<String>,
    /// Do not exchange versions and MTU (note: they are exchanged).
    #[arg(long = "dont_xchg_versions")]
    dont_xchg_versions: bool,
    /// Force the link type: Ethernet (IB is refused).
    #[arg(long = "force-link")]
    force_link: Option<String>,
    /// IPv6 GIDs (refused: the emulated device is IPv4).
    #[arg(long = "ipv6")]
    ipv6: bool,
    /// An mmap'd file as the buffer (note: anonymous memory is used).
    #[arg(long = "mmap")]
    mmap: Option<String>,
    /// Offset into --mmap (note: not applied).
    #[arg(long = "mmap-offset")]
    mmap_offset: Option<String>,
    /// A memory region per QP (note: one region holds every QP's ring).
    #[arg(long = "mr_per_qp")]
    mr_per_qp: bool,
    /// On-demand paging (note: memory is registered up front).
    #[arg(long = "odp")]
    odp: bool,
    /// Print only one number (refused: the full table is printed).
    #[arg(long = "output")]
    output: Option<String>,
    /// ibv_post_send instead of the extended post API (what is done).
    #[arg(long = "use_old_post_send")]
    use_old_post_send: bool,
    /// Warm-up iterations (note: none are run).
    #[arg(long = "perform_warm_up")]
    perform_warm_up: bool,
    /// P_Key index (note: the one P_Key, index 0).
    #[arg(long = "pkey_index")]
    pkey_index: Option<String>,
    /// Per-port report of dual-port runs (note: one port).
    #[arg(long = "report-per-port")]
    report_per_port: bool,
    /// The server sends to the client (refused: not implemented).
    #[arg(long = "reversed")]
    reversed: bool,
    /// rdma_cm retry count (note: no rdma_cm connection).
    #[arg(long = "retry_count")]
    retry_count: Option<String>,
    /// Huge pages for the buffers (note: not applied).
    #[arg(long = "use_hugepages")]
    use_hugepages: bool,
    /// PCIe relaxed ordering off (note: no PCIe).
    #[arg(long = "disable_pcie_relaxed")]
    disable_pcie_relaxed: bool,
    /// Post lists of receives (note: receives are posted one by one).
    #[arg(long = "recv_post_list")]
    recv_post_list: Option<String>,
    /// Rate limit (refused: use --cc-param line_rate=RATE).
    #[arg(long = "rate_limit")]
    rate_limit: Option<String>,
    /// Unit of --rate_limit.
    #[arg(long = "rate_units")]
    rate_units: Option<String>,
    /// Kind of --rate_limit (HW, SW, PP).
    #[arg(long = "rate_limit_type")]
    rate_limit_type: Option<String>,
    /// Burst of the rate limiter.
    #[arg(long = "burst_size")]
    burst_size: Option<String>,
    /// Packet size of the PP rate limiter.
    #[arg(long = "typical_pkt_size")]
    typical_pkt_size: Option<String>,
    /// DC streams (refused: no DC transport).
    #[arg(long = "log_dci_streams")]
    log_dci_streams: Option<String>,
    /// Active DC streams (refused: no DC transport).
    #[arg(long = "log_active_dci_streams")]
    log_active_dci_streams: Option<String>,
    /// AES-XTS encryption (refused: mlx5 only).
    #[arg(long = "aes_xts")]
    aes_xts: bool,
    /// Encrypt on transmit (refused: mlx5 only).
    #[arg(long = "encrypt_on_tx")]
    encrypt_on_tx: bool,
    /// Signature before encryption (refused: mlx5 only).
    #[arg(long = "sig_before")]
    sig_before: bool,
    /// AES-XTS block size (refused: mlx5 only).
    #[arg(long = "aes_block_size")]
    aes_block_size: Option<String>,
    /// Data encryption keys (refused: mlx5 only).
    #[arg(long = "data_enc_keys_number")]
    data_enc_keys_number: Option<String>,
    /// Key encryption key file (refused: mlx5 only).
    #[arg(long = "kek_path")]
    kek_path: Option<String>,
    /// Credentials file (refused: mlx5 only).
    #[arg(long = "credentials_path")]
    credentials_path: Option<String>,
    /// Data encryption key application (refused: mlx5 only).
    #[arg(long = "data_enc_key_app_path")]
    data_enc_key_app_path: Option<String>,
}

impl CompatFlags {
    /// The flags given that do not apply here, each with what became of
    /// it (one line each).
    pub fn notes(&self) -> Vec<&'static str> {
        let mut n = Vec::new();
        let mut note = |given: bool, text: &'static str| {
            if given {
                n.push(text);
            }
        };
        note(self.rdma_cm, "-R: the QPs are connected through the TCP exchange (perftest's default) with the same attributes; rdma_cm is not used");
        note(
            self.com_rdma_cm,
            "-z: the connection data goes over TCP; rdma_cm is not used",
        );
        note(
            self.report_cycles,
            "-C: times are reported in usec (no cycle counter)",
        );
        note(
            self.margin.is_some(),
            "-f: the whole -D period is measured (no margins)",
        );
        note(
            self.hop_limit.is_some(),
            "-L: applies to raw Ethernet QPs only; none here",
        );
        note(
            self.report_counters.is_some(),
            "-W: the counter block after the results reports every counter's change",
        );
        note(
            self.vector.is_some(),
            "-X: the device has one completion vector",
        );
        note(
            self.use_srq,
            "--use-srq: receives are posted to each QP's own receive queue",
        );
        note(
            self.inline_recv.is_some(),
            "--inline_recv: not applied (receives are copied)",
        );
        note(self.cpu_util, "--cpu_util: CPU utilisation is not measured");
        note(
            self.dlid.is_some(),
            "--dlid: RoCE addresses by GID; no LID is used",
        );
        note(
            self.dont_xchg_versions,
            "--dont_xchg_versions: versions and MTU are exchanged (rocelab needs them)",
        );
        note(
            self.mmap.is_some() || self.mmap_offset.is_some(),
            "--mmap: the buffers are anonymous memory",
        );
        note(
            self.mr_per_qp,
            "--mr_per_qp: one memory region holds every QP's buffers",
        );
        note(self.odp, "--odp: memory is registered up front");
        note(
            self.perform_warm_up,
            "--perform_warm_up: no warm-up iterations are run",
        );
        note(
            self.pkey_index.is_some(),
            "--pkey_index: the device has one P_Key (index 0)",
        );
        note(
            self.report_per_port,
            "--report-per-port: the device has one port",
        );
        note(
            self.retry_count.is_some(),
            "--retry_count: applies to rdma_cm connections; none here",
        );
        note(
            self.use_hugepages,
            "--use_hugepages: not applied (regular pages)",
        );
        note(
            self.disable_pcie_relaxed,
            "--disable_pcie_relaxed: there is no PCIe",
        );
        note(
            self.recv_post_list.is_some(),
            "--recv_post_list: receives are posted one by one",
        );
        n
    }

    /// Why the run cannot go on with these flags, if it cannot: a flag
    /// whose effect is missing here would make the result wrong.
    pub fn refusal(&self) -> Option<String> {
        let refuse = [
            (self.dualport, "-O: the device has one port; dual-port mode needs two"),
            (self.mcg || self.mgid.is_some(), "-g/-M: multicast is not supported"),
            (self.latency_gap.is_some(), "--latency_gap is not implemented"),
            (self.ipv6, "--ipv6: the emulated device speaks RoCEv2 over IPv4"),
            (self.output.is_some(), "--output is not implemented: the full table is printed"),
            (self.reversed, "--reversed is not implemented: the client sends"),
            (
                self.rate_limit.is_some()
                    || self.rate_units.is_some()
                    || self.rate_limit_type.is_some()
                    || self.burst_size.is_some()
                    || self.typical_pkt_size.is_some(),
                "the rate limiter flags are not implemented: hold the sender to a rate with --cc dcqcn --cc-param line_rate=RATE",
            ),
            (
                self.log_dci_streams.is_some() || self.log_active_dci_streams.is_some(),
                "DC streams need the DC transport (mlx5); -c RC, UC or UD",
            ),
            (
                self.aes_xts
                    || self.encrypt_on_tx
                    || self.sig_before
                    || self.aes_block_size.is_some()
                    || self.data_enc_keys_number.is_some()
                    || self.kek_path.is_some()
                    || self.credentials_path.is_some()
                    || self.data_enc_key_app_path.is_some(),
                "AES-XTS encryption needs an mlx5 device",
            ),
        ];
        if let Some((_, why)) = refuse.iter().find(|(given, _)| *given) {
            return Some((*why).to_string());
        }
        match self.force_link.as_deref() {
            Some(l) if !l.eq_ignore_ascii_case("ethernet") => Some(format!(
                "--force-link={l}: the device's link is Ethernet (RoCE)"
            )),
            _ => None,
        }
    }
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
    if a.version {
        println!("Version: {}", perftest::exchange::PERFTEST_VERSION);
        return ExitCode::SUCCESS;
    }
    let Some(test) = a.test else {
        eprintln!(" A test is needed: write_bw, write_lat, read_bw, read_lat, send_bw, send_lat, atomic_bw or atomic_lat");
        return ExitCode::FAILURE;
    };
    if let Some(why) = a.compat.refusal() {
        eprintln!(" {why}");
        return ExitCode::FAILURE;
    }
    if let Some(t) = &a.atomic_type {
        if !t.eq_ignore_ascii_case("FETCH_AND_ADD") {
            eprintln!(" --atomic_type {t}: FETCH_AND_ADD is implemented (CMP_AND_SWAP is not)");
            return ExitCode::FAILURE;
        }
    }
    for n in a.compat.notes() {
        println!(" Note: {n}");
    }
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
    let mut cfg = Config::new(test);
    cfg.no_peak = a.no_peak;
    cfg.report_histogram = a.report_histogram;
    cfg.report_unsorted = a.report_unsorted;
    cfg.events = a.events;
    cfg.outs = a.outs;
    cfg.limit_bw = a.limit_bw;
    cfg.limit_msgrate = a.limit_msgrate;
    cfg.report_both = a.report_both;
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
    cfg.bind = a.bind.or(a.source_ip);
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
    cfg.strict_icrc = a.strict_icrc;
    cfg.busy_poll = a.busy_poll;
    let result = perftest::run(&cfg);
    if let Some(secs) = a.wait_destroy {
        std::thread::sleep(std::time::Duration::from_secs(secs));
    }
    match result {
        Ok(_) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("{e}");
            ExitCode::FAILURE
        }
    }
}
