//! The receive path of a UDP device: split each received datagram (a GRO
//! run) into its packets, check each ICRC against the IPv4 header its
//! sender's kernel wrote (or solve for it), parse, date, and hand each
//! packet to its QP's engine; UD receives get the GRH area.
//!
//! Contract: a packet reaches an engine only with a good (or solved, or
//! with `accept_bad_icrc` accepted) ICRC and a known QP; everything else
//! is counted in [`super::UdpStats`] and dropped, as a NIC does. Packets
//! are dated in arrival order, never before what the engines were last
//! given ([`arrival_times`]).

use std::net::SocketAddrV4;
use std::time::Duration;

use super::state::{decode_addr, encode_addr, Shared, State};
use crate::verbs::QpType;
use roce::time::{Duration as PsDuration, Instant};
use roce::transport::{self as tp, Payload};
use roce::wire::icrc::{IcrcMatch, IpEncap, UdpEncap};
use roce::wire::roce::parse_udp_payload_unverified;
use roce::wire::Ecn;

impl Shared {
    /// Hand slot `k`'s packets to their engines, its segments at times
    /// spread evenly after `after` (the previous slot's arrival) up to
    /// `arrived` (its last segment's).
    pub(super) fn receive_slot(&self, st: &mut State, k: usize, after: Instant, arrived: Instant) {
        let State {
            rx,
            qps,
            mem,
            stats,
            icrc,
            ..
        } = st;
        let (m, bytes) = rx.get(k);
        let seg = m.segment_size.max(1);
        let segments = bytes.len().div_ceil(seg).max(1) as u64;
        let span = arrived.saturating_duration_since(after).as_ps();
        for (i, pkt) in bytes.chunks(seg).enumerate() {
            let now = after
                + PsDuration::from_ps((span as u128 * (i as u128 + 1) / segments as u128) as u64);
            // The ICRC first, over the bytes as they arrived, as a NIC
            // checks it: a corrupted packet is an ICRC error
            // (`rx_icrc_encapsulated`) whichever byte the corruption hit,
            // even one that leaves the headers unparsable. Only a datagram
            // too short to carry a BTH and an ICRC is malformed outright.
            if pkt.len() < roce::wire::bth::HEADER_LEN + roce::wire::icrc::ICRC_LEN {
                stats.rx_malformed += 1;
                continue;
            }
            let local = self.local;
            // The header the sender's kernel wrote if nothing on the path
            // re-segmented: identification = the position in the GRO run
            // (a GRO run holds at most 64 segments), DF. When that fails,
            // the check solves for the identification and DF that fit and
            // believes them only if plausible (wire::icrc module docs).
            let expected = UdpEncap {
                ip: IpEncap::V4 {
                    src: *m.src.ip(),
                    dst: *local.ip(),
                    identification: i as u16,
                    dont_fragment: true,
                },
                src_port: m.src.port(),
                dst_port: local.port(),
            };
            let (id, df) = match icrc.verify(&expected, pkt) {
                Ok(IcrcMatch::Expected) => (i as u16, true),
                Ok(IcrcMatch::Solved {
                    identification,
                    dont_fragment,
                }) => {
                    stats.rx_icrc_id_solved += 1;
                    (identification, dont_fragment)
                }
                Err(_) => {
                    stats.rx_icrc_encapsulated += 1;
                    if !self.cfg.accept_bad_icrc {
                        continue;
                    }
                    stats.rx_icrc_accepted += 1;
                    (i as u16, true)
                }
            };
            let parsed = match parse_udp_payload_unverified(pkt) {
                Ok(p) => p,
                Err(_) => {
                    stats.rx_malformed += 1;
                    continue;
                }
            };
            let ecn = Ecn::from_bits(m.tos);
            if ecn == Ecn::Ce {
                stats.rx_ecn_ce += 1;
            }
            let qpn = parsed.headers.bth.dest_qp.value();
            let Some(entry) = qps.get_mut(&qpn) else {
                stats.rx_unknown_qp += 1;
                continue;
            };
            // UD receives get a GRH area: 20 zero bytes and the IPv4
            // header as it arrived (Soft-RoCE): TOS and TTL as received,
            // the identification and DF the ICRC check matched, and its
            // checksum.
            let mut grh = [0u8; 40];
            if entry.qp_type == QpType::Ud {
                let total = (20 + 8 + pkt.len()) as u16;
                let h = &mut grh[20..];
                h[0] = 0x45;
                h[1] = m.tos;
                h[2..4].copy_from_slice(&total.to_be_bytes());
                h[4..6].copy_from_slice(&id.to_be_bytes());
                h[6] = if df { 0x40 } else { 0 };
                h[8] = m.ttl;
                h[9] = 17;
                h[12..16].copy_from_slice(&m.src.ip().octets());
                h[16..20].copy_from_slice(&local.ip().octets());
                let sum = ipv4_checksum(h);
                h[10..12].copy_from_slice(&sum.to_be_bytes());
            }
            let received = tp::Received {
                headers: parsed.headers,
                ecn,
                payload: Payload::Bytes(parsed.payload),
                grh: (entry.qp_type == QpType::Ud).then_some(&grh),
                src: if entry.qp_type == QpType::Ud {
                    encode_addr(m.src)
                } else {
                    connected_source(m.src, decode_addr(entry.engine.attr().ah))
                },
            };
            stats.rx_packets += 1;
            stats.rx_bytes += pkt.len() as u64;
            entry
                .engine
                .handle_packet(now, &received, &mut mem.view(Some(entry.pd)));
        }
    }
}

/// The sender of a packet for a connected QP as its engine matches it
/// against the QP's address vector `av` (which must equal it exactly).
///
/// A peer on RoCEv2's port (4791) is a RoCEv2 device as a NIC sees it: it
/// is its address (GID), and the UDP source port of its packets is
/// entropy that receivers must not check (ROCEV2.md §1.4), so the port is
/// taken as the AV's. A peer on any other port is an emulated device
/// sharing its address with others (several on one loopback address):
/// its packets leave from the port it is bound to, which is the only
/// thing that tells it apart, so the port is kept and a packet from its
/// address but another port is a stranger's.
fn connected_source(src: SocketAddrV4, av: SocketAddrV4) -> tp::AddressHandle {
    let port = if av.port() == ROCE_PORT {
        av.port()
    } else {
        src.port()
    };
    encode_addr(SocketAddrV4::new(*src.ip(), port))
}

/// RoCEv2's UDP destination port (IANA).
const ROCE_PORT: u16 = 4791;

/// The device-clock times at which the slots of one receive batch arrived:
/// `out[0] = floor` (the latest time the engines were given) and `out[k +
/// 1]` for slot `k` (`out` holds one more than there are slots), none
/// before `floor` nor after `now`, never decreasing. The kernel stamps a
/// datagram as it delivers it, a GRO run when its last segment is in, so a
/// slot's time is its last packet's; its others arrived since the slot
/// before.
///
/// A slot the kernel stamped (`arrived`: `CLOCK_REALTIME`, with `wall` that
/// clock read beside `now`) is dated by its age, `now - (wall - arrived)`,
/// so a clock step between rounds cannot move it out of order. An unstamped
/// slot is placed as if the batch's packets had arrived evenly after
/// `floor` up to `now`. `slots` gives each slot's stamp and packet count.
pub(super) fn arrival_times<I>(
    floor: Instant,
    now: Instant,
    wall: Option<Duration>,
    slots: I,
    out: &mut [Instant],
) where
    I: Iterator<Item = (Option<Duration>, usize)> + Clone,
{
    let floor = floor.min(now);
    let span = now.saturating_duration_since(floor).as_ps();
    let total = slots.clone().map(|(_, p)| p as u64).sum::<u64>().max(1);
    let mut before = 0u64;
    let mut prev = floor;
    let mut k = 0;
    out[0] = floor;
    for (arrived, packets) in slots {
        let at = match (arrived, wall) {
            (Some(a), Some(w)) => {
                let age = w
                    .saturating_sub(a)
                    .as_nanos()
                    .min(u128::from(u64::MAX / 1000)) as u64;
                now.checked_sub(PsDuration::from_ps(age * 1000))
                    .unwrap_or(Instant::ZERO)
            }
            _ => {
                floor
                    + PsDuration::from_ps(
                        (span as u128 * u128::from((before + packets as u64).min(total))
                            / u128::from(total)) as u64,
                    )
            }
        };
        before += packets as u64;
        prev = at.clamp(prev, now);
        k += 1;
        out[k] = prev;
    }
}

/// The IPv4 header checksum (RFC 791) of a 20-byte header whose checksum
/// field is zero.
fn ipv4_checksum(h: &[u8]) -> u16 {
    let mut sum: u32 = h
        .chunks(2)
        .map(|w| u32::from(u16::from_be_bytes([w[0], w.get(1).copied().unwrap_or(0)])))
        .sum();
    while sum > 0xFFFF {
        sum = (sum & 0xFFFF) + (sum >> 16);
    }
    !(sum as u16)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn us(n: u64) -> Instant {
        Instant::from_ps(n * 1_000_000)
    }

    #[test]
    fn kernel_stamps_date_each_slot_by_its_age_clamped_and_in_order() {
        // The realtime clock reads 1000 s beside device time 500 us.
        let wall = Some(Duration::from_secs(1000));
        let ago = |n: u64| Some(Duration::from_secs(1000) - Duration::from_micros(n));
        let mut out = [Instant::ZERO; 5];
        // Ages 300, 200 and 100 us; one stamped before the floor (100 us
        // on the device clock) and one "after now" (a clock step).
        let slots = [
            (ago(450), 1),
            (ago(300), 1),
            (ago(350), 1),
            (ago(0).map(|d| d + Duration::from_micros(5)), 1),
        ];
        arrival_times(us(100), us(500), wall, slots.into_iter(), &mut out);
        assert_eq!(out, [us(100), us(100), us(200), us(200), us(500)]);
    }

    #[test]
    fn unstamped_packets_spread_evenly_from_the_floor_to_now() {
        let mut out = [Instant::ZERO; 4];
        // Eight packets, 100 us apart: slot 0 holds the first five (a GRO
        // run), dated by its last.
        let slots = [(None, 5), (None, 1), (None, 2)];
        arrival_times(us(100), us(900), None, slots.into_iter(), &mut out);
        assert_eq!(out, [us(100), us(600), us(700), us(900)]);
        // Stamps without the wall clock to age them: the same spread.
        let stamped = [(Some(Duration::from_secs(1)), 5), (None, 1), (None, 2)];
        arrival_times(us(100), us(900), None, stamped.into_iter(), &mut out);
        assert_eq!(out, [us(100), us(600), us(700), us(900)]);
    }
}
