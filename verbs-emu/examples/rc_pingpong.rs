//! `rc_pingpong`: ibv_rc_pingpong over the verbs API.
//!
//! ```text
//! cargo run -p verbs-emu --example rc_pingpong                 # server
//! cargo run -p verbs-emu --example rc_pingpong -- 127.0.0.1    # client
//! ```
//!
//! Flags as ibv_rc_pingpong's: `-p PORT` (TCP, 18515), `-s SIZE` (4096),
//! `-n ITERS` (1000), `-r RX_DEPTH` (500), plus `--bind ADDR` for the
//! emulated device. The peers swap their [`Endpoint`]s over TCP as one JSON
//! line each, bring an RC QP to RTS, then ping-pong SENDs: the client sends
//! first, each side reposts its receive and answers. Prints the two lines
//! ibv_rc_pingpong prints.

use std::io::{BufRead, BufReader, Write};
use std::net::{Ipv4Addr, SocketAddrV4, TcpListener, TcpStream};
use std::sync::Arc;
use std::time::{Duration, Instant};

use verbs_emu::backend::udp::{UdpBackend, UdpConfig};
use verbs_emu::verbs::{
    AccessFlags, Context, Endpoint, Mtu, RecvWr, SendFlags, SendOp, SendWr, WcOpcode,
};

struct Opts {
    server: Option<String>,
    port: u16,
    size: u32,
    iters: u64,
    rx_depth: u32,
    bind: Option<Ipv4Addr>,
}

fn parse() -> Result<Opts, String> {
    let mut o = Opts {
        server: None,
        port: 18515,
        size: 4096,
        iters: 1000,
        rx_depth: 500,
        bind: None,
    };
    let mut args = std::env::args().skip(1);
    while let Some(a) = args.next() {
        let mut val = |name: &str| args.next().ok_or(format!("{name} needs a value"));
        match a.as_str() {
            "-p" | "--port" => o.port = val("-p")?.parse().map_err(|e| format!("-p: {e}"))?,
            "-s" | "--size" => o.size = val("-s")?.parse().map_err(|e| format!("-s: {e}"))?,
            "-n" | "--iters" => o.iters = val("-n")?.parse().map_err(|e| format!("-n: {e}"))?,
            "-r" | "--rx-depth" => {
                o.rx_depth = val("-r")?.parse().map_err(|e| format!("-r: {e}"))?
            }
            "--bind" => o.bind = Some(val("--bind")?.parse().map_err(|e| format!("--bind: {e}"))?),
            s if !s.starts_with('-') => o.server = Some(s.to_string()),
            s => return Err(format!("unknown flag {s}")),
        }
    }
    Ok(o)
}

fn main() {
    let o = match parse() {
        Ok(o) => o,
        Err(e) => {
            eprintln!("rc_pingpong: {e}");
            std::process::exit(2);
        }
    };
    if let Err(e) = run(&o) {
        eprintln!("rc_pingpong: {e}");
        std::process::exit(1);
    }
}

fn run(o: &Opts) -> Result<(), Box<dyn std::error::Error>> {
    // Out-of-band TCP first: it tells which local address reaches the peer.
    let stream = match &o.server {
        Some(s) => TcpStream::connect((s.as_str(), o.port))?,
        None => {
            TcpListener::bind((Ipv4Addr::UNSPECIFIED, o.port))?
                .accept()?
                .0
        }
    };
    let local = match stream.local_addr()?.ip() {
        std::net::IpAddr::V4(v4) => v4,
        other => return Err(format!("{other}: IPv4 only").into()),
    };
    // On loopback the client takes 127.0.0.2 so both can bind 4791.
    let bind = o
        .bind
        .unwrap_or(if o.server.is_some() && local.is_loopback() {
            Ipv4Addr::new(127, 0, 0, 2)
        } else {
            local
        });
    let backend = Arc::new(UdpBackend::open(UdpConfig::new(SocketAddrV4::new(
        bind, 4791,
    )))?);
    let ctx = Context::from_backend(backend);
    let pd = ctx.alloc_pd()?;
    let cq = ctx.create_cq(o.rx_depth + 1)?;
    let mut mr = pd.alloc_mr(o.size as usize, AccessFlags::LOCAL_WRITE)?;
    let qp = pd
        .qp_builder(verbs_emu::verbs::QpType::Rc)
        .cq(&cq)
        .max_send_wr(1)
        .max_recv_wr(o.rx_depth)
        .build()?;
    let psn = (std::process::id() * 7919) & 0xFF_FFFF;
    let me = qp.endpoint(psn, 0, None)?;
    println!(
        "  local address:  LID 0x{:04x}, QPN 0x{:06x}, PSN 0x{:06x}, GID {}",
        me.lid, me.qpn, me.psn, me.gid
    );
    let mut w = stream.try_clone()?;
    writeln!(w, "{}", serde_json::to_string(&me)?)?;
    let mut reader = BufReader::new(stream);
    let mut line = String::new();
    reader.read_line(&mut line)?;
    let peer: Endpoint = serde_json::from_str(line.trim())?;
    println!(
        "  remote address: LID 0x{:04x}, QPN 0x{:06x}, PSN 0x{:06x}, GID {}",
        peer.lid, peer.qpn, peer.psn, peer.gid
    );
    let sge = [mr.sge(0, o.size)];
    let post_recv = |id: u64| {
        // SAFETY: the SGE is our registered buffer; it is read only after
        // the receive completes.
        unsafe {
            qp.post_recv(&[RecvWr {
                wr_id: id,
                sg_list: &sge,
            }])
        }
    };
    qp.connect(psn, &peer, Mtu::Mtu1024, AccessFlags::LOCAL_WRITE)?;
    for i in 0..o.rx_depth.min(o.iters as u32 + 1) {
        post_recv(u64::from(i)).map_err(|e| e.error)?;
    }
    // Both sides are in RTS, receives posted, before the first SEND.
    writeln!(w, "ready")?;
    line.clear();
    reader.read_line(&mut line)?;
    mr.as_mut_slice().fill(0x5a);
    let send = || {
        let wr = SendWr {
            wr_id: u64::MAX,
            sg_list: &sge,
            op: SendOp::Send,
            flags: SendFlags::SIGNALED,
            ud: None,
        };
        // SAFETY: as above; the buffer is not written while sends are out.
        unsafe { qp.post_send(&[wr]) }.map_err(|e| e.error)
    };
    let start = Instant::now();
    let (mut sent, mut received) = (0u64, 0u64);
    if o.server.is_some() {
        send()?;
        sent += 1;
    }
    while sent < o.iters || received < o.iters {
        for wc in cq.poll_n(1, Duration::from_secs(10))? {
            if !wc.is_ok() {
                return Err(format!(
                    "Failed status {} ({}) for wr_id {}",
                    wc.status,
                    wc.status.value(),
                    wc.wr_id
                )
                .into());
            }
            if wc.opcode == WcOpcode::Recv {
                received += 1;
                post_recv(wc.wr_id).map_err(|e| e.error)?;
                if sent < o.iters {
                    send()?;
                    sent += 1;
                }
            }
        }
    }
    let secs = start.elapsed().as_secs_f64();
    let bytes = o.size as f64 * o.iters as f64 * 2.0;
    println!(
        "{} bytes in {:.2} seconds = {:.2} Mbit/sec",
        bytes as u64,
        secs,
        bytes * 8.0 / secs / 1e6
    );
    println!(
        "{} iters in {:.2} seconds = {:.2} usec/iter",
        o.iters,
        secs,
        secs * 1e6 / o.iters as f64
    );
    Ok(())
}
