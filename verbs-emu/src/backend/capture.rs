//! A pcap capture wrapper for the datagram path: every packet sent and
//! received is written as an Ethernet/IPv4/UDP frame, so Wireshark and
//! tshark decode the RoCEv2 inside (UDP 4791).
//!
//! The IPv4 header written is the one the kernel writes for our sockets
//! (ROCEV2.md §1.2): DF set, identification 0 for a single datagram and
//! 0, 1, 2, ... for the segments of a GSO run, TTL 64, the datagram's TOS,
//! a correct header checksum; the UDP checksum is written as 0 (legal on
//! IPv4; the ICRC masks it anyway). Received packets are written with the
//! header their sender's kernel writes by the same rule. MAC addresses are
//! locally administered ones derived from the IPs.

use std::fs::File;
use std::io::{self, BufWriter, Write};
use std::net::{Ipv4Addr, SocketAddrV4};
use std::path::Path;
use std::time::{Instant, SystemTime, UNIX_EPOCH};

use super::io::{segments, DatagramIo, IoStats};
use super::sys::{RxBatch, TxBatch};

/// Writes pcap files (microsecond timestamps, Ethernet link type).
#[derive(Debug)]
pub struct PcapWriter<W: Write> {
    out: W,
    frame: Vec<u8>,
}

impl<W: Write> PcapWriter<W> {
    /// Write the file header to `out`.
    pub fn new(mut out: W) -> io::Result<PcapWriter<W>> {
        let mut h = Vec::with_capacity(24);
        h.extend_from_slice(&0xa1b2_c3d4u32.to_le_bytes());
        h.extend_from_slice(&2u16.to_le_bytes());
        h.extend_from_slice(&4u16.to_le_bytes());
        h.extend_from_slice(&0i32.to_le_bytes());
        h.extend_from_slice(&0u32.to_le_bytes());
        h.extend_from_slice(&65535u32.to_le_bytes());
        h.extend_from_slice(&1u32.to_le_bytes());
        out.write_all(&h)?;
        Ok(PcapWriter {
            out,
            frame: Vec::with_capacity(9000),
        })
    }

    /// Write one UDP datagram as an Ethernet frame with the IPv4 header
    /// described in the module docs.
    pub fn write_udp(
        &mut self,
        src: SocketAddrV4,
        dst: SocketAddrV4,
        tos: u8,
        identification: u16,
        udp_payload: &[u8],
    ) -> io::Result<()> {
        let f = &mut self.frame;
        f.clear();
        f.extend_from_slice(&mac_of(*dst.ip()));
        f.extend_from_slice(&mac_of(*src.ip()));
        f.extend_from_slice(&0x0800u16.to_be_bytes());
        let total = (20 + 8 + udp_payload.len()) as u16;
        let mut ip = [0u8; 20];
        ip[0] = 0x45;
        ip[1] = tos;
        ip[2..4].copy_from_slice(&total.to_be_bytes());
        ip[4..6].copy_from_slice(&identification.to_be_bytes());
        ip[6] = 0x40;
        ip[8] = 64;
        ip[9] = 17;
        ip[12..16].copy_from_slice(&src.ip().octets());
        ip[16..20].copy_from_slice(&dst.ip().octets());
        let csum = ipv4_checksum(&ip);
        ip[10..12].copy_from_slice(&csum.to_be_bytes());
        f.extend_from_slice(&ip);
        f.extend_from_slice(&src.port().to_be_bytes());
        f.extend_from_slice(&dst.port().to_be_bytes());
        f.extend_from_slice(&((8 + udp_payload.len()) as u16).to_be_bytes());
        f.extend_from_slice(&[0, 0]);
        f.extend_from_slice(udp_payload);
        let ts = SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .unwrap_or_default();
        let mut rec = [0u8; 16];
        rec[0..4].copy_from_slice(&(ts.as_secs() as u32).to_le_bytes());
        rec[4..8].copy_from_slice(&ts.subsec_micros().to_le_bytes());
        rec[8..12].copy_from_slice(&(f.len() as u32).to_le_bytes());
        rec[12..16].copy_from_slice(&(f.len() as u32).to_le_bytes());
        self.out.write_all(&rec)?;
        self.out.write_all(f)
    }

    /// Flush buffered output.
    pub fn flush(&mut self) -> io::Result<()> {
        self.out.flush()
    }
}

fn mac_of(ip: Ipv4Addr) -> [u8; 6] {
    let o = ip.octets();
    [0x02, 0x00, o[0], o[1], o[2], o[3]]
}

/// The IPv4 header checksum.
pub fn ipv4_checksum(h: &[u8; 20]) -> u16 {
    let mut sum = 0u32;
    for (i, c) in h.chunks(2).enumerate() {
        if i == 5 {
            continue;
        }
        sum += u32::from(u16::from_be_bytes([c[0], c[1]]));
    }
    while sum > 0xFFFF {
        sum = (sum & 0xFFFF) + (sum >> 16);
    }
    !(sum as u16)
}

/// The capturing wrapper.
#[derive(Debug)]
pub struct PcapCapture<T> {
    inner: T,
    writer: PcapWriter<BufWriter<File>>,
    error: Option<io::Error>,
}

impl<T: DatagramIo> PcapCapture<T> {
    /// Wrap `inner`, writing to a new file at `path`.
    pub fn create(inner: T, path: &Path) -> io::Result<PcapCapture<T>> {
        let f = File::create(path).map_err(|e| {
            io::Error::new(e.kind(), format!("cannot create {}: {e}", path.display()))
        })?;
        Ok(PcapCapture {
            inner,
            writer: PcapWriter::new(BufWriter::new(f))?,
            error: None,
        })
    }

    fn note(&mut self, r: io::Result<()>) {
        if let Err(e) = r {
            self.error.get_or_insert(e);
        }
    }
}

impl<T: DatagramIo> DatagramIo for PcapCapture<T> {
    fn local_addr(&self) -> SocketAddrV4 {
        self.inner.local_addr()
    }

    fn gso(&self) -> bool {
        self.inner.gso()
    }

    fn send(&mut self, batch: &TxBatch) -> io::Result<()> {
        let me = self.inner.local_addr();
        for (dst, tos, seg, bytes) in batch.iter() {
            for (i, p) in segments(bytes, seg).enumerate() {
                let id = if seg > 0 { i as u16 } else { 0 };
                let r = self.writer.write_udp(me, dst, tos, id, p);
                self.note(r);
            }
        }
        self.inner.send(batch)
    }

    fn recv(&mut self, batch: &mut RxBatch) -> io::Result<usize> {
        let n = self.inner.recv(batch)?;
        let me = self.inner.local_addr();
        for k in 0..n {
            let (m, _) = batch.get(k);
            let gro = m.segment_size < m.len;
            let pkts: Vec<(usize, usize)> = {
                let mut v = Vec::new();
                let mut off = 0;
                while off < m.len {
                    let l = m.segment_size.min(m.len - off).max(1);
                    v.push((off, l));
                    off += l;
                }
                v
            };
            for (i, (off, l)) in pkts.into_iter().enumerate() {
                let id = if gro { i as u16 } else { 0 };
                let (_, bytes) = batch.get(k);
                let p = bytes[off..off + l].to_vec();
                let r = self.writer.write_udp(m.src, me, m.tos, id, &p);
                self.note(r);
            }
        }
        Ok(n)
    }

    fn poll_timeout(&self) -> Option<Instant> {
        self.inner.poll_timeout()
    }

    fn flush(&mut self, now: Instant) -> io::Result<()> {
        let r = self.writer.flush();
        self.note(r);
        self.inner.flush(now)
    }

    fn stats(&self) -> IoStats {
        self.inner.stats()
    }
}

impl<T> Drop for PcapCapture<T> {
    fn drop(&mut self) {
        let _ = self.writer.flush();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ipv4_checksum_of_the_worked_example() {
        // ROCEV2.md §3.5: 45 02 00 34 12 34 40 00 40 11 [a5 14] c0 a8 01 0a c0 a8 01 14
        let h = [
            0x45, 0x02, 0x00, 0x34, 0x12, 0x34, 0x40, 0x00, 0x40, 0x11, 0, 0, 0xc0, 0xa8, 0x01,
            0x0a, 0xc0, 0xa8, 0x01, 0x14,
        ];
        assert_eq!(ipv4_checksum(&h), 0xa514);
    }

    #[test]
    fn writer_emits_header_and_frame() {
        let mut w = PcapWriter::new(Vec::new()).unwrap();
        let a = SocketAddrV4::new(Ipv4Addr::new(127, 0, 0, 1), 4791);
        let b = SocketAddrV4::new(Ipv4Addr::new(127, 0, 0, 2), 4791);
        w.write_udp(a, b, 2, 0, &[1, 2, 3, 4]).unwrap();
        let out = w.out;
        assert_eq!(&out[0..4], &[0xd4, 0xc3, 0xb2, 0xa1]);
        let frame = &out[24 + 16..];
        assert_eq!(frame.len(), 14 + 20 + 8 + 4);
        assert_eq!(&frame[12..14], &[0x08, 0x00]);
        assert_eq!(frame[14 + 6], 0x40, "DF set");
        assert_eq!(&frame[14 + 4..14 + 6], &[0, 0], "identification 0");
    }
}
