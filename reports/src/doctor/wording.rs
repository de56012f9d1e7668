//! How findings state numbers and costs, and the phrases the cause pass
//! reads back from the checks' evidence.

/// Parts per million as a percentage with three decimals.
pub(super) fn pct(ppm: u64) -> String {
    format!("{}.{:03}%", ppm / 10_000, (ppm % 10_000) / 10)
}

/// What a RoCE MTU of `mtu` bytes costs against 4096, in numbers.
pub(super) fn mtu_cost(mtu: u32) -> String {
    let (have, best) = (payload_share_ppm(mtu), payload_share_ppm(4096));
    format!(
        "at a {mtu}-byte RoCE MTU {} of the link time is payload against {} at 4096 (RoCEv2 over IPv4: 20 B IP, 8 B UDP, 12 B BTH, 4 B ICRC, 18 B Ethernet and FCS, 20 B preamble and gap per packet): {} of the bandwidth, and {}.{:02}x the packets for the NIC and the switches to process",
        pct(have),
        pct(best),
        pct(have * 1_000_000 / best.max(1)),
        4096 / mtu.max(1),
        (4096 % mtu.max(1)) * 100 / mtu.max(1)
    )
}

/// Share (ppm) of link time that is payload for RoCEv2 packets carrying
/// `mtu` payload bytes: IPv4, UDP, BTH and ICRC around the payload, and
/// Ethernet header, FCS, preamble and inter-frame gap on the wire (the
/// framing the wire module emits).
fn payload_share_ppm(mtu: u32) -> u64 {
    use roce::wire::icrc::BTH_LEN;
    use roce::wire::roce::{packet_len, Framing, IpVersion};
    let m = mtu.clamp(1, 1 << 20) as usize;
    let wire = packet_len(IpVersion::V4, Framing::Wire, BTH_LEN, m) as u64;
    (m as u64) * 1_000_000 / wire.max(1)
}

/// Marker of the evidence line the loss check writes for a port that
/// drops without sending PAUSE; the cause pass names the port in the
/// title when it sees it.
pub(super) const SENDS_NO_PAUSE: &str = " sends no PAUSE on ";
