//! `rc_pingpong`: rdma-core's `ibv_rc_pingpong`, written against rocelab's
//! verbs API.
//!
//! Two processes connect one RC queue pair each and bounce a message back
//! and forth with SEND/RECV, then print the bandwidth and the time per
//! round. The server is the invocation without a host name:
//!
//! ```text
//! cargo run --example rc_pingpong -- -g 0            # server
//! cargo run --example rc_pingpong -- -g 0 HOSTNAME   # client
//! ```
//!
//! The out-of-band exchange is `ibv_rc_pingpong`'s own: over TCP (port
//! 18515 by default) each side sends `LID:QPN:PSN:GID` as
//! `%04x:%06x:%06x:` plus the GID's 16 bytes in hex, NUL-terminated, and the
//! client answers the server's address with `done`. So with `--backend
//! ibverbs` on a host with an RDMA NIC this program talks to the real
//! `ibv_rc_pingpong` on the other end.
//!
//! The device is the first one found (emulated UDP devices first), or the
//! one named by `-d`, or, for the UDP emulation, the one bound to `--bind
//! ADDR`. Both ends on one host need two addresses, as two NICs would:
//!
//! ```text
//! cargo run --example rc_pingpong -- --bind 127.0.0.1
//! cargo run --example rc_pingpong -- --bind 127.0.0.2 127.0.0.1
//! ```

use std::collections::hash_map::RandomState;
use std::hash::{BuildHasher, Hasher};
use std::io::{Read, Write};
use std::net::{TcpListener, TcpStream};
use std::process::ExitCode;
use std::time::{Duration, Instant};

use clap::Parser;
use std::net::Ipv4Addr;

use roce::wire::{Qpn, ROCE_UDP_PORT};
use verbs_emu::backend::ibverbs::IbverbsProvider;
use verbs_emu::backend::udp::UdpProvider;
use verbs_emu::backend::{self, BackendKind, OpenRequest, Provider};
use verbs_emu::verbs::{
    device_list, AccessFlags, AhAttr, Context, Endpoint, Gid, Mtu, QpAttr, QpState, QpType, RecvWr,
    SendFlags, SendOp, SendWr, VerbsError, WorkCompletion,
};

/// The local port (ibv_rc_pingpong's `-i` default).
const PORT: u8 = 1;
const RECV_WRID: u64 = 1;
const SEND_WRID: u64 = 2;
/// `sizeof "0000:000000:000000:00000000000000000000000000000000"`.
const MSG_LEN: usize = 52;
/// How long one wait for a completion may take before the run is called
/// stuck (the peer went away).
const STALL: Duration = Duration::from_secs(10);

/// ibv_rc_pingpong's flags, same letters and defaults.
#[derive(Debug, Parser)]
#[command(
    name = "rc_pingpong",
    about = "ping-pong over an RC QP, like ibv_rc_pingpong"
)]
struct Args {
    /// Listen on / connect to this TCP port.
    #[arg(short = 'p', long = "port", default_value_t = 18515)]
    port: u16,
    /// Use this device (default: the first found).
    #[arg(short = 'd', long = "ib-dev")]
    device: Option<String>,
    /// Size of the message to exchange.
    #[arg(short = 's', long = "size", default_value_t = 4096)]
    size: u32,
    /// Path MTU in bytes.
    #[arg(short = 'm', long = "mtu", default_value_t = 1024)]
    mtu: u32,
    /// Number of receives to post at a time.
    #[arg(short = 'r', long = "rx-depth", default_value_t = 500)]
    rx_depth: u32,
    /// Number of exchanges.
    #[arg(short = 'n', long = "iters", default_value_t = 1000)]
    iters: u32,
    /// Local GID index (RoCE needs one).
    #[arg(short = 'g', long = "gid-idx", default_value_t = 0)]
    gid_index: u32,
    /// Sleep on CQ events instead of busy polling.
    #[arg(short = 'e', long = "events")]
    events: bool,
    /// Which backend's devices to use: udp or ibverbs (default: any).
    #[arg(long)]
    backend: Option<BackendKind>,
    /// Emulation only: open a UDP device bound to this IPv4 address (any of
    /// 127.0.0.0/8 works for two ends on one host).
    #[arg(long)]
    bind: Option<Ipv4Addr>,
    /// The server to connect to; without it, act as the server.
    servername: Option<String>,
}

fn main() -> ExitCode {
    let args = Args::parse();
    match run(&args) {
        Ok(()) => ExitCode::SUCCESS,
        Err(error) => {
            eprintln!("rc_pingpong: {error}");
            ExitCode::FAILURE
        }
    }
}

/// Errors for this program: a verb, the exchange, or the run itself.
type Error = Box<dyn std::error::Error>;

fn run(args: &Args) -> Result<(), Error> {
    let mtu = Mtu::from_bytes(args.mtu).ok_or_else(|| {
        format!(
            "-m {}: the MTU is one of 256, 512, 1024, 2048, 4096",
            args.mtu
        )
    })?;
    if args.rx_depth < 2 {
        return Err("-r: the receive depth must be at least 2".into());
    }
    let context = open_context(args)?;

    let pd = context.alloc_pd()?;
    let mr = pd.alloc_mr(args.size.max(1) as usize, AccessFlags::LOCAL_WRITE)?;
    let cq = context.create_cq(args.rx_depth + 1)?;
    let qp = pd
        .qp_builder(QpType::Rc)
        .cq(&cq)
        .max_send_wr(1)
        .max_recv_wr(args.rx_depth)
        .build()?;
    // ibv_rc_pingpong fills the buffer with 0x7b and sends it inline when it
    // fits.
    mr.fill(0, mr.len(), 0x7b)?;
    let inline = args.size <= qp.cap().max_inline_data;

    // RESET -> INIT, then receives can be posted before the exchange, as
    // ibv_rc_pingpong does.
    qp.modify(
        &QpAttr::new()
            .with_state(QpState::Init)
            .with_pkey_index(0)
            .with_port(PORT)
            .with_access_flags(AccessFlags::LOCAL_WRITE),
    )?;
    let recv_sge = [mr.sge(0, args.size)?];
    let send_sge = recv_sge;
    let recv = RecvWr {
        wr_id: RECV_WRID,
        sg_list: &recv_sge,
    };
    let post_recvs = |count: u32| -> Result<u32, Error> {
        let wrs = vec![recv; count as usize];
        // SAFETY: the buffer belongs to `mr`, which outlives the QP's work.
        unsafe { qp.post_recv(&wrs) }?;
        Ok(count)
    };
    let send = SendWr {
        wr_id: SEND_WRID,
        sg_list: &send_sge,
        op: SendOp::Send,
        flags: if inline {
            SendFlags::SIGNALED | SendFlags::INLINE
        } else {
            SendFlags::SIGNALED
        },
        ud: None,
    };
    let post_send = || -> Result<(), Error> {
        // SAFETY: as above; the buffer is not written while the send runs.
        unsafe { qp.post_send(&[send]) }?;
        Ok(())
    };

    let mut outstanding_recvs = post_recvs(args.rx_depth)?;

    let psn = random_psn();
    let local = qp.endpoint(psn, args.gid_index, None)?;
    print_address("local address: ", &local);
    let remote = exchange(args, &local, |remote| {
        // INIT -> RTR -> RTS towards the peer, with ibv_rc_pingpong's
        // attributes.
        qp.modify(
            &QpAttr::new()
                .with_state(QpState::Rtr)
                .with_av(AhAttr {
                    sgid_index: args.gid_index as u8,
                    hop_limit: 1,
                    port_num: PORT,
                    ..AhAttr::to_gid(remote.gid)
                })
                .with_path_mtu(mtu)
                .with_dest_qpn(Qpn::new(remote.qpn))
                .with_rq_psn(remote.psn)
                .with_max_dest_rd_atomic(1)
                .with_min_rnr_timer(12),
        )?;
        qp.modify(
            &QpAttr::new()
                .with_state(QpState::Rts)
                .with_timeout(14)
                .with_retry_cnt(7)
                .with_rnr_retry(7)
                .with_sq_psn(psn)
                .with_max_rd_atomic(1),
        )?;
        Ok(())
    })?;
    print_address("remote address:", &remote);

    let mut pending = RECV_WRID;
    if args.servername.is_some() {
        post_send()?;
        pending |= SEND_WRID;
    }
    let start = Instant::now();
    let (mut sent, mut received) = (0u32, 0u32);
    let mut wcs = [WorkCompletion::empty(); 2];
    while sent < args.iters || received < args.iters {
        let polled = if args.events {
            if !cq.wait(STALL)? {
                return Err(VerbsError::Timeout {
                    verb: "ibv_get_cq_event",
                }
                .into());
            }
            cq.poll(&mut wcs)?
        } else {
            poll_busy(&cq, &mut wcs)?
        };
        for wc in polled {
            if !wc.is_ok() {
                return Err(format!(
                    "failed status {} ({}) for wr_id {}",
                    wc.status,
                    wc.status.value(),
                    wc.wr_id
                )
                .into());
            }
            match wc.wr_id {
                SEND_WRID => sent += 1,
                RECV_WRID => {
                    outstanding_recvs -= 1;
                    if outstanding_recvs <= 1 {
                        outstanding_recvs += post_recvs(args.rx_depth - outstanding_recvs)?;
                    }
                    received += 1;
                }
                other => return Err(format!("completion for unknown wr_id {other}").into()),
            }
            pending &= !wc.wr_id;
            if sent < args.iters && pending == 0 {
                post_send()?;
                pending = RECV_WRID | SEND_WRID;
            }
        }
    }
    let seconds = start.elapsed().as_secs_f64();
    let bytes = u64::from(args.size) * u64::from(args.iters) * 2;
    println!(
        "{bytes} bytes in {seconds:.2} seconds = {:.2} Mbit/sec",
        bytes as f64 * 8.0 / seconds / 1_000_000.0
    );
    println!(
        "{} iters in {seconds:.2} seconds = {:.2} usec/iter",
        args.iters,
        seconds * 1_000_000.0 / f64::from(args.iters)
    );
    Ok(())
}

/// The device the flags name: a UDP device at `--bind`, else the first
/// device (of `--backend`, named `-d` when given) that a provider lists.
fn open_context(args: &Args) -> Result<Context, Error> {
    if let Some(bind) = args.bind {
        if args.backend == Some(BackendKind::Ibverbs) {
            return Err("--bind applies to the UDP emulation, not to --backend ibverbs".into());
        }
        let request = OpenRequest {
            kind: BackendKind::Udp,
            device: args.device.clone(),
            bind,
            udp_port: ROCE_UDP_PORT,
            faults: Default::default(),
            pcap: None,
            busy_poll: !args.events,
            cc: Default::default(),
            strict_icrc: false,
        };
        return Ok(Context::from_backend(backend::open(&request)?));
    }
    let udp = UdpProvider::default();
    let ibverbs = IbverbsProvider::new();
    let providers: Vec<&dyn Provider> = [&udp as &dyn Provider, &ibverbs]
        .into_iter()
        .filter(|provider| args.backend.map_or(true, |kind| kind == provider.kind()))
        .collect();
    let (devices, unavailable) = device_list(&providers);
    let chosen = devices.iter().find(|device| {
        args.device
            .as_ref()
            .map_or(true, |name| *name == device.name)
    });
    let Some(device) = chosen else {
        let mut why = match &args.device {
            Some(name) => format!("no RDMA device named {name}"),
            None => "no RDMA devices".to_owned(),
        };
        for (kind, error) in unavailable {
            why.push_str(&format!("; {kind}: {error}"));
        }
        return Err(why.into());
    };
    let provider = providers
        .iter()
        .find(|provider| provider.kind() == device.kind)
        .ok_or("the device's provider vanished")?;
    Ok(Context::open(*provider, device)?)
}

/// Polls until at least one completion arrives (or the run stalls).
fn poll_busy<'a>(
    cq: &verbs_emu::verbs::CompletionQueue,
    wcs: &'a mut [WorkCompletion],
) -> Result<&'a [WorkCompletion], Error> {
    let deadline = Instant::now() + STALL;
    loop {
        let got = cq.poll(wcs)?.len();
        if got > 0 {
            return Ok(&wcs[..got]);
        }
        if Instant::now() >= deadline {
            return Err(VerbsError::Timeout {
                verb: "ibv_poll_cq",
            }
            .into());
        }
        std::hint::spin_loop();
    }
}

/// `lrand48() & 0xffffff`, from the OS-seeded hasher.
fn random_psn() -> u32 {
    let mut hasher = RandomState::new().build_hasher();
    hasher.write_u128(Instant::now().elapsed().as_nanos());
    (hasher.finish() & 0x00ff_ffff) as u32
}

fn print_address(label: &str, endpoint: &Endpoint) {
    println!(
        "  {label} LID 0x{:04x}, QPN 0x{:06x}, PSN 0x{:06x}, GID {}",
        endpoint.lid, endpoint.qpn, endpoint.psn, endpoint.gid
    );
}

/// `LID:QPN:PSN:GID` as ibv_rc_pingpong writes it, NUL-terminated.
fn format_wire(endpoint: &Endpoint) -> [u8; MSG_LEN] {
    let mut text = format!(
        "{:04x}:{:06x}:{:06x}:",
        endpoint.lid, endpoint.qpn, endpoint.psn
    );
    for byte in endpoint.gid.0 {
        text.push_str(&format!("{byte:02x}"));
    }
    let mut msg = [0u8; MSG_LEN];
    msg[..text.len()].copy_from_slice(text.as_bytes());
    msg
}

/// The peer's address from its message; the transport fields we do not
/// exchange (UDP port, MTU) take the RoCE defaults.
fn parse_wire(msg: &[u8; MSG_LEN], mtu: Mtu) -> Result<Endpoint, Error> {
    let text =
        std::str::from_utf8(&msg[..MSG_LEN - 1]).map_err(|_| "the peer's address is not text")?;
    let bad = || format!("the peer's address {text:?} is not LID:QPN:PSN:GID");
    let mut fields = text.split(':');
    let mut field = |digits: usize| {
        fields
            .next()
            .filter(|field| field.len() == digits)
            .and_then(|field| u128::from_str_radix(field, 16).ok())
            .ok_or_else(bad)
    };
    let lid = field(4)? as u16;
    let qpn = field(6)? as u32;
    let psn = field(6)? as u32;
    let gid = field(32)?;
    Ok(Endpoint {
        lid,
        qpn,
        psn,
        gid: Gid(gid.to_be_bytes()),
        udp_port: ROCE_UDP_PORT,
        mtu,
        mr: None,
    })
}

/// ibv_rc_pingpong's exchange, step for step. The client writes its address,
/// reads the server's, says `done`, then connects. The server reads the
/// client's address, connects, then answers and waits for `done`, so its QP
/// is ready to receive before the client can send.
fn exchange(
    args: &Args,
    local: &Endpoint,
    connect: impl FnOnce(&Endpoint) -> Result<(), Error>,
) -> Result<Endpoint, Error> {
    let mtu = Mtu::from_bytes(args.mtu).unwrap_or(Mtu::Mtu1024);
    let mut msg = [0u8; MSG_LEN];
    match &args.servername {
        Some(server) => {
            let mut stream = TcpStream::connect((server.as_str(), args.port))
                .map_err(|error| format!("couldn't connect to {server}:{}: {error}", args.port))?;
            stream.write_all(&format_wire(local))?;
            stream.read_exact(&mut msg)?;
            let remote = parse_wire(&msg, mtu)?;
            stream.write_all(b"done\0")?;
            connect(&remote)?;
            Ok(remote)
        }
        None => {
            let listener = TcpListener::bind(("0.0.0.0", args.port))
                .map_err(|error| format!("couldn't listen to port {}: {error}", args.port))?;
            let (mut stream, _) = listener.accept()?;
            stream.read_exact(&mut msg)?;
            let remote = parse_wire(&msg, mtu)?;
            connect(&remote)?;
            stream.write_all(&format_wire(local))?;
            let mut done = [0u8; 5];
            stream.read_exact(&mut done)?;
            Ok(remote)
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn endpoint() -> Endpoint {
        Endpoint {
            lid: 0,
            qpn: 0x11,
            psn: 0x00ab_cdef,
            gid: Gid::from_ip("10.0.0.1".parse().unwrap()),
            udp_port: ROCE_UDP_PORT,
            mtu: Mtu::Mtu1024,
            mr: None,
        }
    }

    #[test]
    fn address_message_is_ibv_rc_pingpongs() {
        let msg = format_wire(&endpoint());
        assert_eq!(
            &msg[..],
            b"0000:000011:abcdef:00000000000000000000ffff0a000001\0"
        );
        assert_eq!(parse_wire(&msg, Mtu::Mtu1024).unwrap(), endpoint());
    }

    /// The role `ping_pong_runs_between_two_processes` gives this process
    /// when it re-runs the test binary as one end.
    const ROLE: &str = "RC_PINGPONG_TEST_ROLE";
    const PORT: &str = "18699";

    fn end_args(role: &str) -> Args {
        let mut argv = vec!["rc_pingpong", "-p", PORT, "-n", "50", "-s", "512", "-e"];
        match role {
            "server" => argv.extend(["--bind", "127.0.77.1"]),
            _ => argv.extend(["--bind", "127.0.77.2", "127.0.0.1"]),
        }
        Args::parse_from(argv)
    }

    /// One end, when run as a child of the test below; nothing otherwise.
    #[test]
    fn ping_pong_end() {
        let Ok(role) = std::env::var(ROLE) else {
            return;
        };
        let args = end_args(&role);
        // The client retries until the server listens.
        for _ in 0..100 {
            match run(&args) {
                Err(error) if error.to_string().contains("couldn't connect") => {
                    std::thread::sleep(Duration::from_millis(100));
                }
                result => {
                    result.unwrap();
                    return;
                }
            }
        }
        panic!("the server never listened");
    }

    #[test]
    fn ping_pong_runs_between_two_processes() {
        // Two processes, each with its own emulated device on its own
        // loopback address, as two hosts would be; the TCP port is this
        // test's own.
        let exe = std::env::current_exe().unwrap();
        let spawn = |role: &str| {
            std::process::Command::new(&exe)
                .args(["--exact", "tests::ping_pong_end", "--nocapture"])
                .env(ROLE, role)
                .output()
        };
        let server = std::thread::scope(|scope| {
            let server = scope.spawn(|| spawn("server"));
            let client = spawn("client").unwrap();
            (server.join().unwrap().unwrap(), client)
        });
        let (server, client) = server;
        for (name, out) in [("client", &client), ("server", &server)] {
            let stdout = String::from_utf8_lossy(&out.stdout);
            assert!(out.status.success(), "{name}: {out:?}");
            assert!(
                stdout.contains("51200 bytes in ") && stdout.contains("50 iters in "),
                "{name}: {stdout}"
            );
        }
    }

    #[test]
    fn bind_is_refused_for_hardware() {
        let args = Args::parse_from(["rc_pingpong", "--backend", "ibverbs", "--bind", "127.0.0.1"]);
        let error = open_context(&args).err().unwrap().to_string();
        assert!(
            error.contains("--bind applies to the UDP emulation"),
            "{error}"
        );
    }

    #[test]
    fn malformed_address_is_refused_with_the_text() {
        let mut msg = format_wire(&endpoint());
        msg[4] = b'-';
        let error = parse_wire(&msg, Mtu::Mtu1024).unwrap_err().to_string();
        assert!(error.contains("is not LID:QPN:PSN:GID"), "{error}");
    }
}
