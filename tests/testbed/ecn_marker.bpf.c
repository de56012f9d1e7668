// SPDX-License-Identifier: MIT OR Apache-2.0
//
// The test bed's ECN marker: a tc clsact egress program (direct action) in
// front of a tbf bottleneck on the same device. It keeps a virtual queue
// drained at the bottleneck's rate and sets CE on ECT packets by the RED/WRED
// rule a switch applies to its egress queue (ECN marking as in DCQCN's
// switch model):
//
//   queue <= KMIN_BYTES              never marked
//   KMIN_BYTES < queue < KMAX_BYTES  marked with probability
//                                    PMAX_PPM * (queue - KMIN) / (KMAX - KMIN)
//   queue >= KMAX_BYTES              always marked
//
// Every packet is counted and queued (so that the marker's packets minus
// the tbf's are the tbf's drops, in packets on the wire); only IPv4 ones are
// marked. "queue" is the virtual queue found by the packet on arrival, in bytes on
// the wire (Ethernet, IP and UDP headers counted once per segment, so a GSO
// super-packet counts as the segments it becomes). The queue drains at
// RATE_BYTES_PER_SEC and holds at most LIMIT_BYTES (what the tbf would keep;
// a packet that does not fit is not counted, as tbf drops it). Parameters are
// fixed when the object is compiled (clang -D...), so each bed compiles its
// own; the state map's name is STATE_MAP, unique per bed, and is pinned by
// name (tc's loader: /sys/fs/bpf/tc/globals/STATE_MAP) for the test to read.
//
// Units: bytes, nanoseconds (bpf_ktime_get_ns), parts per million.

#include <linux/bpf.h>
#include <linux/if_ether.h>
#include <linux/ip.h>
#include <linux/pkt_cls.h>
#include <bpf/bpf_endian.h>
#include <bpf/bpf_helpers.h>

#ifndef RATE_BYTES_PER_SEC
#error "RATE_BYTES_PER_SEC: the bottleneck's rate in bytes per second"
#endif
#ifndef KMIN_BYTES
#error "KMIN_BYTES: the queue above which marking starts"
#endif
#ifndef KMAX_BYTES
#error "KMAX_BYTES: the queue from which every ECT packet is marked"
#endif
#ifndef PMAX_PPM
#error "PMAX_PPM: the marking probability at KMAX_BYTES, in parts per million"
#endif
#ifndef LIMIT_BYTES
#error "LIMIT_BYTES: the bottleneck queue's capacity"
#endif
#ifndef STATE_MAP
#error "STATE_MAP: the name of the state map (pinned by name)"
#endif

#if KMAX_BYTES <= KMIN_BYTES
#error "KMAX_BYTES must be above KMIN_BYTES"
#endif

// Wire bytes of one segment's headers beyond the first: Ethernet, IPv4, UDP.
#define SEGMENT_HEADERS (14 + 20 + 8)
#define ECN_MASK 0x03
#define ECN_CE 0x03

// The marker's state and counters, in one array entry (the layout the test
// reads: a 4-byte lock, 4 bytes of padding, then u64s in this order). A
// marked GSO run counts each of its segments, as each reaches the wire CE.
struct marker_state {
	struct bpf_spin_lock lock;
	__u64 backlog;     // virtual queue, bytes
	__u64 last_ns;     // when backlog was last drained
	__u64 skbs;        // packets handed to the device (a GSO run is one)
	__u64 packets;     // of them, packets on the wire (a GSO run's segments)
	__u64 ect;         // IPv4 wire packets ECT(0), ECT(1) or already CE
	__u64 marked;      // wire packets CE was set on here
	__u64 gso_skbs;    // GSO runs (skbs of more than one segment)
	__u64 max_skb;     // largest skb, bytes (what tbf must fit in its burst)
	__u64 max_backlog; // largest virtual queue an arriving packet found
	__u64 bytes;       // wire bytes of all packets (the offered load)
};

struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, struct marker_state);
	__uint(pinning, LIBBPF_PIN_BY_NAME);
} STATE_MAP SEC(".maps");

SEC("tc")
int ecn_marker(struct __sk_buff *skb)
{
	void *data = (void *)(long)skb->data;
	void *data_end = (void *)(long)skb->data_end;
	struct ethhdr *eth = data;
	struct iphdr *ip = data + sizeof(*eth);
	__u32 key = 0;
	struct marker_state *s;
	__u64 now, elapsed, drained, queue, bytes, segs;
	__u8 tos, ecn;
	int mark = 0, ipv4;

	s = bpf_map_lookup_elem(&STATE_MAP, &key);
	if (!s)
		return TC_ACT_OK;
	segs = skb->gso_segs > 1 ? skb->gso_segs : 1;
	bytes = skb->len + (segs - 1) * SEGMENT_HEADERS;
	ipv4 = (void *)(ip + 1) <= data_end && eth->h_proto == bpf_htons(ETH_P_IP);
	tos = ipv4 ? ip->tos : 0;
	ecn = tos & ECN_MASK;
	now = bpf_ktime_get_ns();

	bpf_spin_lock(&s->lock);
	elapsed = now > s->last_ns ? now - s->last_ns : 0;
	// Past a second idle the queue is empty whatever it held (and the
	// product below cannot overflow).
	if (elapsed >= 1000000000ULL)
		drained = s->backlog;
	else
		drained = elapsed * RATE_BYTES_PER_SEC / 1000000000ULL;
	s->backlog = s->backlog > drained ? s->backlog - drained : 0;
	// Keep the drain's remainder: advance the clock only by the time the
	// drained bytes took, unless the queue ran empty.
	if (s->backlog == 0)
		s->last_ns = now;
	else
		s->last_ns += drained * 1000000000ULL / RATE_BYTES_PER_SEC;
	queue = s->backlog;
	if (queue > s->max_backlog)
		s->max_backlog = queue;
	if (queue + bytes <= LIMIT_BYTES)
		s->backlog = queue + bytes;

	if (skb->len > s->max_skb)
		s->max_skb = skb->len;
	bpf_spin_unlock(&s->lock);

	__sync_fetch_and_add(&s->skbs, 1);
	__sync_fetch_and_add(&s->packets, segs);
	__sync_fetch_and_add(&s->bytes, bytes);
	if (segs > 1)
		__sync_fetch_and_add(&s->gso_skbs, 1);
	if (ecn == 0)
		return TC_ACT_OK;
	__sync_fetch_and_add(&s->ect, segs);
	if (ecn == ECN_CE || queue <= KMIN_BYTES)
		return TC_ACT_OK;
	if (queue >= KMAX_BYTES) {
		mark = 1;
	} else {
		__u64 p = (__u64)PMAX_PPM * (queue - KMIN_BYTES) /
			  (KMAX_BYTES - KMIN_BYTES);
		mark = bpf_get_prandom_u32() % 1000000 < p;
	}
	if (!mark)
		return TC_ACT_OK;
	{
		__u8 ce = tos | ECN_CE;
		// The header checksum covers the TOS byte: the high byte of
		// the first 16-bit word is the version/IHL byte, equal in both.
		if (bpf_l3_csum_replace(skb, sizeof(struct ethhdr) + offsetof(struct iphdr, check),
					bpf_htons(tos), bpf_htons(ce), 2))
			return TC_ACT_OK;
		if (bpf_skb_store_bytes(skb, sizeof(struct ethhdr) + offsetof(struct iphdr, tos),
					&ce, 1, 0))
			return TC_ACT_OK;
	}
	__sync_fetch_and_add(&s->marked, segs);
	return TC_ACT_OK;
}

char LICENSE[] SEC("license") = "GPL";
