//! rocelab's out-of-band exchange: JSON documents, one per line, over the
//! TCP connection ([`Oob`]); the messages ([`Msg`]: hello, endpoints,
//! barriers, results), and what a side tells its peer about its QPs and
//! its ring of slots ([`PeerInfo`]).
//!
//! Contract: a peer's message is bounded ([`MAX_OOB_LINE`]), and an empty,
//! truncated, oversized or malformed one is an error, never a panic; a
//! peer's [`PeerInfo`] is validated before anything is computed from it.

use std::io::{BufRead, BufReader, Read, Write};
use std::net::TcpStream;

use serde::de::DeserializeOwned;
use serde::{Deserialize, Serialize};

use super::error::{PerftestError, Result};
use crate::verbs::Endpoint;

/// The out-of-band channel: one JSON document per line over TCP.
pub(super) struct Oob {
    writer: TcpStream,
    reader: BufReader<TcpStream>,
}

impl Oob {
    pub(super) fn new(s: TcpStream) -> Result<Oob> {
        let _ = s.set_nodelay(true);
        let r = s
            .try_clone()
            .map_err(|e| PerftestError::Oob(e.to_string()))?;
        Ok(Oob {
            writer: s,
            reader: BufReader::new(r),
        })
    }

    pub(super) fn send<T: Serialize>(&mut self, v: &T) -> Result<()> {
        let mut line = serde_json::to_string(v).map_err(|e| PerftestError::Oob(e.to_string()))?;
        line.push('\n');
        self.writer
            .write_all(line.as_bytes())
            .map_err(|e| PerftestError::Oob(format!("send to peer: {e}")))
    }

    pub(super) fn recv<T: DeserializeOwned>(&mut self) -> Result<T> {
        let mut line = String::new();
        let n = (&mut self.reader)
            .take(MAX_OOB_LINE)
            .read_line(&mut line)
            .map_err(|e| PerftestError::Oob(format!("receive from peer: {e}")))?;
        if n == 0 {
            return Err(PerftestError::Oob("peer closed the connection".into()));
        }
        if !line.ends_with('\n') {
            return Err(PerftestError::Oob(if n as u64 >= MAX_OOB_LINE {
                format!("peer message longer than {MAX_OOB_LINE} bytes")
            } else {
                "peer closed the connection in the middle of a message".into()
            }));
        }
        if line.trim().is_empty() {
            return Err(PerftestError::Oob("empty message from peer".into()));
        }
        serde_json::from_str(&line)
            .map_err(|e| PerftestError::Oob(format!("bad message from peer: {e}: {line:?}")))
    }

    /// A message if one is ready, without blocking.
    pub(super) fn try_recv<T: DeserializeOwned>(&mut self) -> Result<Option<T>> {
        if !self.reader.buffer().is_empty() {
            return self.recv().map(Some);
        }
        self.writer
            .set_nonblocking(true)
            .map_err(|e| PerftestError::Oob(e.to_string()))?;
        let mut probe = [0u8; 1];
        let r = self.writer.peek(&mut probe);
        let _ = self.writer.set_nonblocking(false);
        match r {
            Ok(0) => Err(PerftestError::Oob("peer closed the connection".into())),
            Ok(_) => self.recv().map(Some),
            Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => Ok(None),
            Err(e) => Err(PerftestError::Oob(e.to_string())),
        }
    }

    pub(super) fn barrier(&mut self, tag: &str) -> Result<()> {
        self.send(&Msg::Sync(tag.to_string()))?;
        match self.recv::<Msg>()? {
            Msg::Sync(t) if t == tag => Ok(()),
            Msg::Error(e) => Err(PerftestError::Oob(format!("peer failed: {e}"))),
            other => Err(PerftestError::Oob(format!(
                "expected synchronisation {tag:?}, the peer sent {}",
                other.what()
            ))),
        }
    }
}

#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub(super) struct Hello {
    pub(super) test: String,
    pub(super) sizes: Vec<u64>,
    pub(super) iters: u64,
    pub(super) qps: u32,
    pub(super) connection: String,
    pub(super) duration: Option<u64>,
    pub(super) verify: bool,
    /// Both directions at once (`-b`).
    #[serde(default)]
    pub(super) duplex: bool,
    /// Bandwidth in Gb/s (`--report_gbits`): the server prints the
    /// client's numbers, so both must use one unit.
    #[serde(default)]
    pub(super) gbits: bool,
    /// `--run_infinitely`.
    #[serde(default)]
    pub(super) run_infinitely: bool,
}

impl Hello {
    /// What differs between this side's test and the peer's, one item per
    /// flag, e.g. `message size (-s): 1024 here, 2048 on the peer`.
    pub(super) fn differences(&self, peer: &Hello) -> Vec<String> {
        fn list(v: &[u64]) -> String {
            match v {
                [one] => one.to_string(),
                [first, .., last] => format!("{first}..{last} (-a)"),
                [] => "none".into(),
            }
        }
        fn opt(v: Option<u64>) -> String {
            v.map_or_else(|| "off".into(), |d| d.to_string())
        }
        let mut out = Vec::new();
        let mut diff = |what: &str, ours: String, theirs: String| {
            if ours != theirs {
                out.push(format!("{what}: {ours} here, {theirs} on the peer"));
            }
        };
        diff("test", self.test.clone(), peer.test.clone());
        diff("message size (-s)", list(&self.sizes), list(&peer.sizes));
        diff(
            "iterations (-n)",
            self.iters.to_string(),
            peer.iters.to_string(),
        );
        diff(
            "number of QPs (-q)",
            self.qps.to_string(),
            peer.qps.to_string(),
        );
        diff(
            "connection type (-c)",
            self.connection.clone(),
            peer.connection.clone(),
        );
        diff("duration (-D)", opt(self.duration), opt(peer.duration));
        let on = |b: bool| if b { "on" } else { "off" }.to_string();
        diff("--verify", on(self.verify), on(peer.verify));
        diff("bidirectional (-b)", on(self.duplex), on(peer.duplex));
        let unit = |g: bool| if g { "Gb/sec" } else { "MB/sec" }.to_string();
        diff(
            "bandwidth unit (--report_gbits)",
            unit(self.gbits),
            unit(peer.gbits),
        );
        diff(
            "--run_infinitely",
            on(self.run_infinitely),
            on(peer.run_infinitely),
        );
        out
    }
}

/// Longest out-of-band message accepted (a peer's endpoints for 64K QPs
/// stay far below).
const MAX_OOB_LINE: u64 = 1 << 20;

#[derive(Debug, Clone, Serialize, Deserialize)]
pub(super) struct PeerInfo {
    pub(super) endpoints: Vec<Endpoint>,
    pub(super) slots: u64,
    pub(super) slot_size: u64,
    pub(super) credit_offset: u64,
    pub(super) mtu: u32,
    pub(super) device: String,
    /// Each endpoint's region address is its QP's own buffer (a perftest
    /// peer), not the start of one region shared by all QPs.
    #[serde(skip)]
    pub(super) per_qp_buffers: bool,
}

impl PeerInfo {
    /// Check what a peer sent before anything is computed from it: one
    /// endpoint per QP, at least one slot, slots that hold the largest
    /// message, a ring and credit area whose arithmetic does not overflow,
    /// and (RC, UC) a region per endpoint that covers them. `max_size` is
    /// the largest message of the run.
    pub(super) fn validate(
        &self,
        qps: usize,
        max_size: u64,
        ud: bool,
    ) -> std::result::Result<(), String> {
        if self.endpoints.len() != qps {
            return Err(format!(
                "peer has {} QPs, we have {qps}",
                self.endpoints.len()
            ));
        }
        if self.slots == 0 {
            return Err("peer offers 0 buffer slots".into());
        }
        if self.slot_size < max_size.max(1) {
            return Err(format!(
                "peer's slots of {} bytes cannot hold a {max_size}-byte message",
                self.slot_size
            ));
        }
        if self.mtu < 256 {
            return Err(format!("peer MTU {} is below 256", self.mtu));
        }
        let ring = self
            .slots
            .checked_mul(self.slot_size)
            .and_then(|r| r.checked_mul(qps as u64))
            .ok_or("peer's ring size overflows 64 bits")?;
        if self.credit_offset < ring {
            return Err(format!(
                "peer's credit area at {} overlaps its ring of {ring} bytes",
                self.credit_offset
            ));
        }
        let need = self
            .credit_offset
            .checked_add(64 * qps as u64)
            .ok_or("peer's credit area overflows 64 bits")?;
        if !ud {
            for (i, ep) in self.endpoints.iter().enumerate() {
                let Some(mr) = ep.mr else {
                    return Err(format!("peer QP {i} offers no memory region"));
                };
                if mr.len < need {
                    return Err(format!(
                        "peer QP {i}'s region of {} bytes is smaller than its ring and credits ({need})",
                        mr.len
                    ));
                }
            }
        }
        Ok(())
    }

    /// The address of slot `slot` of QP `qp` in the ring this side
    /// describes, its region starting at `base` (each QP's own buffer
    /// with [`PeerInfo::per_qp_buffers`]).
    pub(super) fn slot_addr(&self, base: u64, qp: usize, slot: u64) -> u64 {
        let qp_base = if self.per_qp_buffers {
            0
        } else {
            qp as u64 * self.slots
        };
        base + (qp_base + slot % self.slots) * self.slot_size
    }
}

#[derive(Debug, Clone, Serialize, Deserialize)]
pub(super) enum Msg {
    Hello(Hello),
    Peer(PeerInfo),
    Sync(String),
    /// Client's bandwidth result for the server to print.
    Bw {
        size: u64,
        iters: u64,
        peak: f64,
        avg: f64,
        rate: f64,
    },
    /// Messages posted per QP (duration mode end).
    Posted(Vec<u64>),
    /// The peer failed.
    Error(String),
}

impl Msg {
    /// What the message is, in words (for an error that names an
    /// unexpected message without dumping it).
    pub(super) fn what(&self) -> String {
        match self {
            Msg::Hello(_) => "its test parameters".into(),
            Msg::Peer(_) => "its endpoints".into(),
            Msg::Sync(tag) => format!("synchronisation {tag:?}"),
            Msg::Bw { .. } => "its results".into(),
            Msg::Posted(_) => "its end-of-run counts".into(),
            Msg::Error(e) => format!("an error: {e}"),
        }
    }
}

/// The per-QP counts of a peer's [`Msg::Posted`]: one per QP, or an
/// error (a short, long or empty list from an untrusted peer is never
/// indexed).
pub(super) fn posted_counts(counts: Vec<u64>, qps: usize) -> Result<Vec<u64>> {
    if counts.len() != qps {
        return Err(PerftestError::Oob(format!(
            "peer's end-of-run message counts {} QPs, this side has {qps}",
            counts.len()
        )));
    }
    Ok(counts)
}

#[cfg(test)]
pub(super) mod tests {
    use super::*;
    use crate::verbs::Mtu;
    use std::net::{Ipv4Addr, TcpListener};

    pub(in crate::perftest::run) fn peer_info(
        slots: u64,
        slot_size: u64,
        mr_len: Option<u64>,
    ) -> PeerInfo {
        let ep = Endpoint {
            lid: 0,
            qpn: 0x11,
            psn: 1,
            gid: crate::verbs::Gid::from_ip(Ipv4Addr::LOCALHOST.into()),
            udp_port: 4791,
            mtu: Mtu::Mtu1024,
            mr: mr_len.map(|len| crate::verbs::RemoteMr {
                addr: 0x1000,
                rkey: 0x100,
                len,
            }),
        };
        PeerInfo {
            endpoints: vec![ep, ep],
            slots,
            slot_size,
            credit_offset: slots.wrapping_mul(slot_size).wrapping_mul(2),
            mtu: 1024,
            device: "x".into(),
            per_qp_buffers: false,
        }
    }

    #[test]
    fn a_peers_endpoint_info_is_validated_before_use() {
        let ok = peer_info(4, 4096, Some(4 * 4096 * 2 + 128));
        assert_eq!(ok.validate(2, 4096, false), Ok(()));
        let e = |p: PeerInfo, ud| p.validate(2, 4096, ud).unwrap_err();
        assert!(e(peer_info(0, 4096, Some(1 << 20)), false).contains("0 buffer slots"));
        assert!(e(peer_info(4, 4096, None), false).contains("no memory region"));
        // UD needs no region.
        assert_eq!(peer_info(4, 4096, None).validate(2, 4096, true), Ok(()));
        assert!(e(peer_info(4, 4096, Some(100)), false).contains("smaller"));
        assert!(e(peer_info(4, 100, Some(1 << 20)), false).contains("cannot hold"));
        assert!(e(peer_info(u64::MAX, 4096, Some(1 << 20)), false).contains("overflows"));
        assert!(ok.validate(3, 4096, false).unwrap_err().contains("2 QPs"));
        let mut bad_mtu = ok.clone();
        bad_mtu.mtu = 0;
        assert!(e(bad_mtu, false).contains("MTU"));
        let mut overlap = ok;
        overlap.credit_offset = 8;
        assert!(e(overlap, false).contains("overlaps"));
    }

    /// A connected pair: our Oob and the raw peer socket.
    fn oob_pair() -> (Oob, TcpStream) {
        let l = TcpListener::bind((Ipv4Addr::LOCALHOST, 0)).unwrap();
        let peer = TcpStream::connect(l.local_addr().unwrap()).unwrap();
        let (ours, _) = l.accept().unwrap();
        (Oob::new(ours).unwrap(), peer)
    }

    #[test]
    fn empty_oversized_and_garbage_peer_messages_are_errors() {
        let (mut oob, mut peer) = oob_pair();
        peer.write_all(b"\n").unwrap();
        let e = oob.recv::<Msg>().unwrap_err().to_string();
        assert!(e.contains("empty message"), "{e}");
        peer.write_all(b"{\"Peer\": 5}\n").unwrap();
        let e = oob.recv::<Msg>().unwrap_err().to_string();
        assert!(e.contains("bad message"), "{e}");
        let big = vec![b'x'; MAX_OOB_LINE as usize + 10];
        let writer = std::thread::spawn(move || {
            let _ = peer.write_all(&big);
            peer
        });
        let e = oob.recv::<Msg>().unwrap_err().to_string();
        assert!(e.contains("longer than"), "{e}");
        let peer = writer.join().unwrap();
        drop(peer);
    }

    #[test]
    fn a_short_or_long_posted_message_is_an_error() {
        assert_eq!(posted_counts(vec![3, 4], 2).unwrap(), vec![3, 4]);
        for bad in [vec![], vec![1], vec![1, 2, 3]] {
            let e = posted_counts(bad, 2).unwrap_err().to_string();
            assert!(e.contains("counts") && e.contains("2"), "{e}");
        }
    }
}
