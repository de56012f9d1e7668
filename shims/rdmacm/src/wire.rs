//! The connection-manager messages two processes exchange over TCP.
//!
//! Each message is an 8-byte header and a body:
//!
//! | bytes | field                                          |
//! |-------|------------------------------------------------|
//! | 0..4  | magic `RLCM`                                   |
//! | 4     | version (1)                                    |
//! | 5     | type: 1 REQ, 2 REP, 3 RTU, 4 REJ, 5 DREQ, 6 DREP |
//! | 6..8  | body length, big-endian                        |
//!
//! REQ and REP bodies carry what the RoCE CM's REQ/REP carry for the QP
//! (all integers big-endian): the sender's GID (16 bytes), QPN (24 bits in
//! a u32), starting PSN (24 bits in a u32), QP type, path MTU (`enum
//! ibv_mtu`), responder resources, initiator depth, retry count, RNR retry
//! count, SRQ flag, flow control, then the private-data length and the
//! private data. REJ carries private data only; RTU, DREQ and DREP are
//! empty. The private data limits are the InfiniBand CM's less the
//! rdma_cm header, as rdma-core enforces them: 56 bytes in a REQ, 196 in a
//! REP, 148 in a REJ.
//!
//! The peer is untrusted: [`read_msg`] bounds every length before reading,
//! [`Msg::decode`] checks every field, and neither panics.

use std::io::{self, Read, Write};

/// The first four bytes of every message.
pub const MAGIC: [u8; 4] = *b"RLCM";
/// The protocol version.
pub const VERSION: u8 = 1;
/// The header length.
pub const HEADER: usize = 8;
/// The longest body of any message type (a REP with 196 bytes of private data).
pub const MAX_BODY: usize = FIXED + 1 + MAX_REP_PRIVATE;
/// Private data limits (rdma-core over InfiniBand/RoCE, TCP port space).
pub const MAX_REQ_PRIVATE: usize = 56;
/// See [`MAX_REQ_PRIVATE`].
pub const MAX_REP_PRIVATE: usize = 196;
/// See [`MAX_REQ_PRIVATE`].
pub const MAX_REJ_PRIVATE: usize = 148;
/// Bytes of a REQ/REP body before the private-data length.
const FIXED: usize = 16 + 4 + 4 + 8;

/// `enum ibv_mtu`'s valid range (256 .. 4096).
const MTU_RANGE: std::ops::RangeInclusive<u8> = 1..=5;
/// RC, UC, UD (`enum ibv_qp_type`).
const QP_TYPES: [u8; 3] = [2, 3, 4];

/// The QP half of a REQ or REP.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Conn {
    /// The sender's GID (RoCEv2: `::ffff:a.b.c.d`).
    pub gid: [u8; 16],
    /// The sender's QP number (24 bits).
    pub qpn: u32,
    /// The PSN the sender's send queue starts at (24 bits).
    pub psn: u32,
    /// `enum ibv_qp_type`: 2 RC, 3 UC, 4 UD.
    pub qp_type: u8,
    /// `enum ibv_mtu` of the sender's port.
    pub mtu: u8,
    /// RDMA READ/atomic requests the sender accepts at once.
    pub responder_resources: u8,
    /// RDMA READ/atomic requests the sender issues at once.
    pub initiator_depth: u8,
    /// Transport retries (3 bits).
    pub retry_count: u8,
    /// RNR retries (3 bits, 7 = forever).
    pub rnr_retry_count: u8,
    /// Whether the sender's QP uses an SRQ.
    pub srq: u8,
    /// Whether the sender does end-to-end flow control.
    pub flow_control: u8,
    /// The application's private data.
    pub private: Vec<u8>,
}

/// A connection-manager message.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Msg {
    /// Connection request (active side, after `rdma_connect`).
    Req(Conn),
    /// Connection reply (passive side, `rdma_accept`).
    Rep(Conn),
    /// Ready to use: the active side's QP is ready (after a REP).
    Rtu,
    /// Rejection (`rdma_reject`), with private data.
    Rej(Vec<u8>),
    /// Disconnection request (`rdma_disconnect`).
    Dreq,
    /// Disconnection reply.
    Drep,
}

impl Msg {
    fn kind(&self) -> u8 {
        match self {
            Msg::Req(_) => 1,
            Msg::Rep(_) => 2,
            Msg::Rtu => 3,
            Msg::Rej(_) => 4,
            Msg::Dreq => 5,
            Msg::Drep => 6,
        }
    }

    /// The message's bytes, header included. Errors (`EINVAL`) on private
    /// data over the type's limit or out-of-range QPN/PSN.
    pub fn encode(&self) -> Result<Vec<u8>, String> {
        let mut body = Vec::new();
        match self {
            Msg::Req(c) | Msg::Rep(c) => {
                let max = if matches!(self, Msg::Req(_)) {
                    MAX_REQ_PRIVATE
                } else {
                    MAX_REP_PRIVATE
                };
                if c.private.len() > max {
                    return Err(format!(
                        "private data of {} bytes, at most {max} fit",
                        c.private.len()
                    ));
                }
                if c.qpn > 0xFF_FFFF || c.psn > 0xFF_FFFF {
                    return Err("QPN and PSN are 24-bit".into());
                }
                body.extend_from_slice(&c.gid);
                body.extend_from_slice(&c.qpn.to_be_bytes());
                body.extend_from_slice(&c.psn.to_be_bytes());
                body.extend_from_slice(&[
                    c.qp_type,
                    c.mtu,
                    c.responder_resources,
                    c.initiator_depth,
                    c.retry_count,
                    c.rnr_retry_count,
                    c.srq,
                    c.flow_control,
                ]);
                body.push(c.private.len() as u8);
                body.extend_from_slice(&c.private);
            }
            Msg::Rej(p) => {
                if p.len() > MAX_REJ_PRIVATE {
                    return Err(format!(
                        "private data of {} bytes, at most {MAX_REJ_PRIVATE} fit",
                        p.len()
                    ));
                }
                body.push(p.len() as u8);
                body.extend_from_slice(p);
            }
            Msg::Rtu | Msg::Dreq | Msg::Drep => {}
        }
        let mut out = Vec::with_capacity(HEADER + body.len());
        out.extend_from_slice(&MAGIC);
        out.push(VERSION);
        out.push(self.kind());
        out.extend_from_slice(&(body.len() as u16).to_be_bytes());
        out.extend_from_slice(&body);
        Ok(out)
    }

    /// Check a header: the message type and body length, or why not.
    pub fn check_header(h: &[u8; HEADER]) -> Result<(u8, usize), String> {
        if h[..4] != MAGIC {
            return Err(format!("bad magic {:02x?}", &h[..4]));
        }
        if h[4] != VERSION {
            return Err(format!("version {} (expected {VERSION})", h[4]));
        }
        let len = usize::from(u16::from_be_bytes([h[6], h[7]]));
        let max = match h[5] {
            1 => FIXED + 1 + MAX_REQ_PRIVATE,
            2 => FIXED + 1 + MAX_REP_PRIVATE,
            4 => 1 + MAX_REJ_PRIVATE,
            3 | 5 | 6 => 0,
            t => return Err(format!("unknown message type {t}")),
        };
        if len > max {
            return Err(format!(
                "message type {} with a {len}-byte body (at most {max})",
                h[5]
            ));
        }
        Ok((h[5], len))
    }

    /// Decode a body of type `kind` (from [`Msg::check_header`]). Every
    /// field is checked; errors say which and why.
    pub fn decode(kind: u8, body: &[u8]) -> Result<Msg, String> {
        let private = |p: &[u8], max: usize| -> Result<Vec<u8>, String> {
            let (&n, rest) = p.split_first().ok_or("no private-data length")?;
            let n = usize::from(n);
            if n > max {
                return Err(format!("private data length {n} over {max}"));
            }
            if rest.len() != n {
                return Err(format!(
                    "private data length {n} but {} bytes follow",
                    rest.len()
                ));
            }
            Ok(rest.to_vec())
        };
        match kind {
            1 | 2 => {
                if body.len() < FIXED + 1 {
                    return Err(format!("a {}-byte REQ/REP body is short", body.len()));
                }
                let be32 =
                    |o: usize| u32::from_be_bytes([body[o], body[o + 1], body[o + 2], body[o + 3]]);
                let mut gid = [0u8; 16];
                gid.copy_from_slice(&body[..16]);
                let qpn = be32(16);
                let psn = be32(20);
                let f = &body[24..32];
                let max = if kind == 1 {
                    MAX_REQ_PRIVATE
                } else {
                    MAX_REP_PRIVATE
                };
                let c = Conn {
                    gid,
                    qpn,
                    psn,
                    qp_type: f[0],
                    mtu: f[1],
                    responder_resources: f[2],
                    initiator_depth: f[3],
                    retry_count: f[4],
                    rnr_retry_count: f[5],
                    srq: f[6],
                    flow_control: f[7],
                    private: private(&body[FIXED..], max)?,
                };
                if gid[..12] != [0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff] {
                    return Err(format!("GID {gid:02x?} is not an IPv4-mapped RoCEv2 GID"));
                }
                if qpn == 0 || qpn > 0xFF_FFFF {
                    return Err(format!("QPN {qpn:#x} outside 1..=0xffffff"));
                }
                if psn > 0xFF_FFFF {
                    return Err(format!("PSN {psn:#x} is over 24 bits"));
                }
                if !QP_TYPES.contains(&c.qp_type) {
                    return Err(format!(
                        "QP type {} (expected 2 RC, 3 UC or 4 UD)",
                        c.qp_type
                    ));
                }
                if !MTU_RANGE.contains(&c.mtu) {
                    return Err(format!("path MTU code {} (expected 1..=5)", c.mtu));
                }
                if c.retry_count > 7 || c.rnr_retry_count > 7 {
                    return Err(format!(
                        "retry counts {}/{} (3-bit fields)",
                        c.retry_count, c.rnr_retry_count
                    ));
                }
                if c.srq > 1 || c.flow_control > 1 {
                    return Err("SRQ and flow-control flags are 0 or 1".into());
                }
                Ok(if kind == 1 { Msg::Req(c) } else { Msg::Rep(c) })
            }
            4 => Ok(Msg::Rej(private(body, MAX_REJ_PRIVATE)?)),
            3 | 5 | 6 if !body.is_empty() => Err(format!(
                "message type {kind} has no body, got {} bytes",
                body.len()
            )),
            3 => Ok(Msg::Rtu),
            5 => Ok(Msg::Dreq),
            6 => Ok(Msg::Drep),
            t => Err(format!("unknown message type {t}")),
        }
    }
}

/// Read one message. `Ok(None)` on a clean end of stream before a header;
/// an `InvalidData` error for a malformed message.
pub fn read_msg(r: &mut impl Read) -> io::Result<Option<Msg>> {
    let mut h = [0u8; HEADER];
    let mut got = 0;
    while got < HEADER {
        match r.read(&mut h[got..]) {
            Ok(0) if got == 0 => return Ok(None),
            Ok(0) => return Err(io::ErrorKind::UnexpectedEof.into()),
            Ok(n) => got += n,
            Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
            Err(e) => return Err(e),
        }
    }
    let bad = |e: String| io::Error::new(io::ErrorKind::InvalidData, e);
    let (kind, len) = Msg::check_header(&h).map_err(bad)?;
    let mut body = [0u8; MAX_BODY];
    r.read_exact(&mut body[..len])?;
    Msg::decode(kind, &body[..len]).map(Some).map_err(bad)
}

/// Write one message.
pub fn write_msg(w: &mut impl Write, m: &Msg) -> io::Result<()> {
    let bytes = m
        .encode()
        .map_err(|e| io::Error::new(io::ErrorKind::InvalidInput, e))?;
    w.write_all(&bytes)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn conn(private: &[u8]) -> Conn {
        Conn {
            gid: [0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff, 127, 0, 1, 2],
            qpn: 0x11,
            psn: 0xab_cdef,
            qp_type: 2,
            mtu: 3,
            responder_resources: 1,
            initiator_depth: 1,
            retry_count: 7,
            rnr_retry_count: 7,
            srq: 0,
            flow_control: 1,
            private: private.to_vec(),
        }
    }

    fn round_trip(m: &Msg) -> Msg {
        let bytes = m.encode().unwrap();
        read_msg(&mut &bytes[..]).unwrap().unwrap()
    }

    #[test]
    fn every_message_round_trips() {
        for m in [
            Msg::Req(conn(b"hello")),
            Msg::Req(conn(&[7; MAX_REQ_PRIVATE])),
            Msg::Rep(conn(&[9; MAX_REP_PRIVATE])),
            Msg::Rtu,
            Msg::Rej(b"busy".to_vec()),
            Msg::Dreq,
            Msg::Drep,
        ] {
            assert_eq!(round_trip(&m), m);
        }
    }

    #[test]
    fn the_req_bytes_are_as_documented() {
        let b = Msg::Req(conn(b"pd")).encode().unwrap();
        assert_eq!(&b[..8], b"RLCM\x01\x01\x00\x23");
        assert_eq!(&b[8 + 16..8 + 24], &[0, 0, 0, 0x11, 0, 0xab, 0xcd, 0xef]);
        assert_eq!(&b[8 + 24..], &[2, 3, 1, 1, 7, 7, 0, 1, 2, b'p', b'd']);
    }

    #[test]
    fn oversized_private_data_is_refused_on_both_ends() {
        assert!(Msg::Req(conn(&[0; MAX_REQ_PRIVATE + 1])).encode().is_err());
        assert!(Msg::Rej(vec![0; MAX_REJ_PRIVATE + 1]).encode().is_err());
        // A peer claiming a longer body than a REQ can have.
        let mut b = Msg::Req(conn(b"")).encode().unwrap();
        b[6..8].copy_from_slice(&((FIXED + 2 + MAX_REQ_PRIVATE) as u16).to_be_bytes());
        let e = read_msg(&mut &b[..]).unwrap_err();
        assert!(e.to_string().contains("at most"), "{e}");
    }

    #[test]
    fn malformed_fields_are_named() {
        type Breaker = fn(&mut Vec<u8>);
        let cases: [(&str, Breaker); 9] = [
            ("magic", |b| b[0] = b'X'),
            ("version", |b| b[4] = 9),
            ("unknown message type", |b| b[5] = 42),
            ("IPv4-mapped", |b| b[8] = 1),
            ("QPN", |b| b[8 + 16..8 + 20].copy_from_slice(&[1, 0, 0, 0])),
            ("PSN", |b| b[8 + 20] = 1),
            ("QP type", |b| b[8 + 24] = 9),
            ("path MTU", |b| b[8 + 25] = 0),
            ("private data length", |b| b[8 + 32] = 3),
        ];
        for (want, break_it) in cases {
            let mut b = Msg::Req(conn(b"ab")).encode().unwrap();
            break_it(&mut b);
            let e = read_msg(&mut &b[..]).unwrap_err();
            assert_eq!(e.kind(), io::ErrorKind::InvalidData, "{want}: {e}");
            assert!(e.to_string().contains(want), "{want}: {e}");
        }
        let e = Msg::decode(3, &[0]).unwrap_err();
        assert!(e.contains("no body"), "{e}");
    }

    #[test]
    fn truncated_input_is_an_error_and_no_input_is_the_end() {
        let b = Msg::Rep(conn(b"xyz")).encode().unwrap();
        for cut in 1..b.len() {
            assert!(read_msg(&mut &b[..cut]).is_err(), "cut at {cut}");
        }
        assert!(read_msg(&mut &b[..0]).unwrap().is_none());
    }

    #[test]
    fn arbitrary_bytes_never_panic() {
        // A deterministic sweep of mutated messages: every single-byte
        // value at every position of a REQ.
        let base = Msg::Req(conn(b"0123")).encode().unwrap();
        for pos in 0..base.len() {
            for v in 0..=255u8 {
                let mut b = base.clone();
                b[pos] = v;
                let _ = read_msg(&mut &b[..]);
            }
        }
    }
}
