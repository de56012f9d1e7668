//! Frames as the fabric moves them: small `Copy` values with transport
//! headers and lengths, never payload bytes.

use roce::cc::IntRecord;
use roce::wire::{BthRepr, Ecn, RoceHeaders};

/// Ethernet header (14) and FCS (4).
pub const ETH_OVERHEAD: u32 = 18;
/// IPv4 (20) + UDP (8) + ICRC (4).
pub const IP_UDP_ICRC: u32 = 32;
/// A PFC frame on the wire (minimum Ethernet frame).
pub const PFC_FRAME: u32 = 64;

/// One RoCEv2 frame as a NIC sends and receives it (the fabric keeps it
/// as a [`Frame`] while it moves it).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Packet {
    /// Frame bytes on the wire (Ethernet to FCS).
    pub wire: u32,
    /// Source host index.
    pub src: u32,
    /// Destination host index.
    pub dst: u32,
    /// Its INT record's slot in [`Packets`] (HPCC), or [`NO_INT`].
    pub int: u32,
    /// Payload bytes (no pad).
    pub payload: u32,
    /// UDP source port (QP entropy, hashed by ECMP with the addresses).
    pub sport: u16,
    /// Port number the frame entered the current switch on.
    pub ingress: u16,
    /// 802.1p priority.
    pub prio: u8,
    /// ECN codepoint of the IP header.
    pub ecn: Ecn,
    /// A switch cut its payload off (packet trimming): headers only.
    pub trimmed: bool,
    /// Transport headers (BTH and extensions).
    pub headers: RoceHeaders,
}

/// [`Packet::int`] of a frame without an INT record.
pub const NO_INT: u32 = u32::MAX;

/// Bytes of the Ethernet frame carrying `headers` and `payload` bytes over
/// IPv4: Ethernet, IP, UDP, BTH and extension headers, payload, pad, ICRC,
/// FCS.
pub fn frame_len(headers: &RoceHeaders, payload: u32) -> u32 {
    let pad = payload.wrapping_neg() & 3;
    ETH_OVERHEAD + IP_UDP_ICRC + headers.header_len() as u32 + payload + pad
}

/// Where the frames on links and in egress queues live while the fabric
/// moves them: a slab, so that queues and wires hold 4-byte handles and a
/// frame is written once when it leaves a NIC, not copied at every queue
/// and wire it passes.
///
/// Each frame is one 64-byte [`Frame`]: what switches read (lengths,
/// addresses, priority, ECN, the BTH) and the link of its queue, in one
/// cache line. Extension headers (RETH, AETH, ...; the first packet of a
/// message, ACKs) are kept aside, in `exts`, for the frames that carry
/// them: a WRITE's middle packets carry none. A large fabric buffers
/// millions of frames (a k=32 permutation about 4.8 million), so the
/// frame's size is most of the run's memory and of its cache misses.
///
/// Contract: a handle is valid from [`Packets::put`] until
/// [`Packets::take`] or [`Packets::free`]; each handle is held by
/// exactly one queue or wire at a time.
#[derive(Debug, Default)]
pub(crate) struct Packets {
    slots: Vec<Frame>,
    free: Vec<u32>,
    /// Full headers of the frames with extension headers, by
    /// `Frame::ext` (the BTH in the frame is the one in force).
    exts: Vec<RoceHeaders>,
    free_exts: Vec<u32>,
    /// INT records (HPCC), by [`Packet::int`]: a frame's record outlives
    /// its handle (the receiving NIC reads it after taking the frame) and
    /// is freed by [`Packets::free_int`], or with the frame by
    /// [`Packets::free`].
    ints: Vec<IntRecord>,
    free_ints: Vec<u32>,
}

/// A frame as the slab stores it: a [`Packet`] less its extension
/// headers, with the link to the next frame of its [`PktQueue`].
/// Fields mean what [`Packet`]'s of the same name mean.
#[derive(Debug, Clone, Copy)]
#[repr(C, align(64))]
pub(crate) struct Frame {
    next: u32,
    /// Index of the full headers in `Packets::exts`, or [`END`].
    ext: u32,
    pub wire: u32,
    pub src: u32,
    pub dst: u32,
    pub int: u32,
    pub payload: u32,
    pub sport: u16,
    pub ingress: u16,
    pub prio: u8,
    pub ecn: Ecn,
    pub trimmed: bool,
    pub bth: BthRepr,
}

/// End of a [`PktQueue`]'s chain; no extension headers.
const END: u32 = u32::MAX;

/// A FIFO of frame handles (an egress queue, the frames on a wire),
/// chained through the [`Packets`] slab: 12 bytes however long, and
/// taking the head reads the frame the caller reads next anyway.
///
/// Contract: a handle is in at most one queue; only [`Packets`] methods
/// change a queue, with the slab holding its frames.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct PktQueue {
    head: u32,
    tail: u32,
    len: u32,
}

impl Default for PktQueue {
    fn default() -> PktQueue {
        PktQueue {
            head: END,
            tail: END,
            len: 0,
        }
    }
}

impl PktQueue {
    /// No frame queued.
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// Frames queued.
    pub fn len(&self) -> usize {
        self.len as usize
    }

    /// The oldest frame's handle.
    pub fn front(&self) -> Option<u32> {
        (self.len > 0).then_some(self.head)
    }
}

impl Packets {
    /// Store `pkt`; its handle.
    pub fn put(&mut self, pkt: Packet) -> u32 {
        let ext = if pkt.headers == RoceHeaders::new(pkt.headers.bth) {
            END
        } else {
            match self.free_exts.pop() {
                Some(i) => {
                    self.exts[i as usize] = pkt.headers;
                    i
                }
                None => {
                    self.exts.push(pkt.headers);
                    (self.exts.len() - 1) as u32
                }
            }
        };
        let frame = Frame {
            next: END,
            ext,
            wire: pkt.wire,
            src: pkt.src,
            dst: pkt.dst,
            int: pkt.int,
            payload: pkt.payload,
            sport: pkt.sport,
            ingress: pkt.ingress,
            prio: pkt.prio,
            ecn: pkt.ecn,
            trimmed: pkt.trimmed,
            bth: pkt.headers.bth,
        };
        match self.free.pop() {
            Some(h) => {
                self.slots[h as usize] = frame;
                h
            }
            None => {
                self.slots.push(frame);
                (self.slots.len() - 1) as u32
            }
        }
    }

    /// The frame of handle `h`.
    pub fn get(&self, h: u32) -> &Frame {
        &self.slots[h as usize]
    }

    /// The frame of handle `h`, to change.
    pub fn get_mut(&mut self, h: u32) -> &mut Frame {
        &mut self.slots[h as usize]
    }

    /// The whole frame of handle `h`, headers included.
    pub fn packet(&self, h: u32) -> Packet {
        let f = &self.slots[h as usize];
        let mut headers = if f.ext == END {
            RoceHeaders::new(f.bth)
        } else {
            self.exts[f.ext as usize]
        };
        headers.bth = f.bth;
        Packet {
            wire: f.wire,
            src: f.src,
            dst: f.dst,
            int: f.int,
            payload: f.payload,
            sport: f.sport,
            ingress: f.ingress,
            prio: f.prio,
            ecn: f.ecn,
            trimmed: f.trimmed,
            headers,
        }
    }

    /// Take the frame of handle `h` out; the handle is free.
    pub fn take(&mut self, h: u32) -> Packet {
        let pkt = self.packet(h);
        self.release(h);
        pkt
    }

    /// Drop the frame of handle `h` (and its INT record).
    pub fn free(&mut self, h: u32) {
        let int = self.slots[h as usize].int;
        self.free_int(int);
        self.release(h);
    }

    /// Handle `h` and its extension headers are free.
    fn release(&mut self, h: u32) {
        let ext = self.slots[h as usize].ext;
        if ext != END {
            self.free_exts.push(ext);
        }
        self.free.push(h);
    }

    /// Append handle `h` (in no queue) to `q`.
    pub fn push_back(&mut self, q: &mut PktQueue, h: u32) {
        self.slots[h as usize].next = END;
        if q.len == 0 {
            q.head = h;
        } else {
            self.slots[q.tail as usize].next = h;
        }
        q.tail = h;
        q.len += 1;
    }

    /// Take the oldest handle off `q`.
    pub fn pop_front(&mut self, q: &mut PktQueue) -> Option<u32> {
        if q.len == 0 {
            return None;
        }
        let h = q.head;
        q.head = self.slots[h as usize].next;
        q.len -= 1;
        if q.len == 0 {
            q.tail = END;
            q.head = END;
        }
        Some(h)
    }

    /// The handles of `q`, oldest first.
    pub fn iter<'a>(&'a self, q: &PktQueue) -> impl Iterator<Item = u32> + 'a {
        let mut at = q.head;
        let mut left = q.len;
        std::iter::from_fn(move || {
            if left == 0 {
                return None;
            }
            let h = at;
            at = self.slots[h as usize].next;
            left -= 1;
            Some(h)
        })
    }

    /// A new INT record holding `rec`: its slot, for [`Packet::int`].
    pub fn new_int(&mut self, rec: IntRecord) -> u32 {
        match self.free_ints.pop() {
            Some(i) => {
                self.ints[i as usize] = rec;
                i
            }
            None => {
                self.ints.push(rec);
                (self.ints.len() - 1) as u32
            }
        }
    }

    /// The INT record in slot `i`, to append a hop to.
    pub fn int_mut(&mut self, i: u32) -> &mut IntRecord {
        &mut self.ints[i as usize]
    }

    /// Take the INT record of slot `i` out (`None` for [`NO_INT`]); the
    /// slot is free.
    pub fn take_int(&mut self, i: u32) -> Option<IntRecord> {
        if i == NO_INT {
            return None;
        }
        self.free_ints.push(i);
        Some(self.ints[i as usize])
    }

    /// Free INT slot `i` (nothing for [`NO_INT`]).
    pub fn free_int(&mut self, i: u32) {
        if i != NO_INT {
            self.free_ints.push(i);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use roce::wire::{BthRepr, Opcode, Psn, Qpn};

    fn frame(n: u32) -> Packet {
        Packet {
            wire: 100 + n,
            src: n,
            dst: 0,
            int: NO_INT,
            payload: 0,
            sport: 0,
            ingress: 0,
            prio: 3,
            ecn: Ecn::NotEct,
            trimmed: false,
            headers: RoceHeaders::new(BthRepr::new(Opcode::RcSendOnly, Qpn::new(1), Psn::new(n))),
        }
    }

    #[test]
    fn queues_chained_through_the_slab_stay_fifo_and_apart() {
        let mut pkts = Packets::default();
        let (mut a, mut b) = (PktQueue::default(), PktQueue::default());
        assert!(pkts.pop_front(&mut a).is_none());
        // Interleave two queues, reusing freed handles as a run does.
        let mut next = 0;
        let mut want_a = std::collections::VecDeque::new();
        let mut want_b = std::collections::VecDeque::new();
        for round in 0..50u32 {
            for _ in 0..(round % 4) {
                let h = pkts.put(frame(next));
                if next % 3 == 0 {
                    pkts.push_back(&mut b, h);
                    want_b.push_back(next);
                } else {
                    pkts.push_back(&mut a, h);
                    want_a.push_back(next);
                }
                next += 1;
            }
            if round % 2 == 1 {
                if let Some(h) = pkts.pop_front(&mut a) {
                    assert_eq!(pkts.take(h).src, want_a.pop_front().unwrap());
                }
            }
            assert_eq!(a.len(), want_a.len());
            assert_eq!(b.len(), want_b.len());
            let seen: Vec<u32> = pkts.iter(&b).map(|h| pkts.get(h).src).collect();
            assert_eq!(seen, want_b.iter().copied().collect::<Vec<_>>());
            assert_eq!(a.front().map(|h| pkts.get(h).src), want_a.front().copied());
        }
        while let Some(h) = pkts.pop_front(&mut a) {
            assert_eq!(pkts.take(h).src, want_a.pop_front().unwrap());
        }
        assert!(a.is_empty() && want_a.is_empty());
        assert_eq!(a.front(), None);
    }
}
