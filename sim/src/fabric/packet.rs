//! Frames as the fabric moves them: small `Copy` values with transport
//! headers and lengths, never payload bytes.

use roce::cc::IntRecord;
use roce::wire::{Ecn, RoceHeaders};

/// Ethernet header (14) and FCS (4).
pub const ETH_OVERHEAD: u32 = 18;
/// IPv4 (20) + UDP (8) + ICRC (4).
pub const IP_UDP_ICRC: u32 = 32;
/// A PFC frame on the wire (minimum Ethernet frame).
pub const PFC_FRAME: u32 = 64;

/// One RoCEv2 frame in flight or in a queue.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Packet {
    /// Transport headers (BTH and extensions).
    pub headers: RoceHeaders,
    /// Payload bytes (no pad).
    pub payload: u32,
    /// Frame bytes on the wire (Ethernet to FCS).
    pub wire: u32,
    /// Source host index.
    pub src: u32,
    /// Destination host index.
    pub dst: u32,
    /// UDP source port (QP entropy, hashed by ECMP with the addresses).
    pub sport: u16,
    /// 802.1p priority.
    pub prio: u8,
    /// ECN codepoint of the IP header.
    pub ecn: Ecn,
    /// Port number the frame entered the current switch on.
    pub ingress: u16,
    /// Its INT record's slot in [`Packets`] (HPCC), or [`NO_INT`].
    pub int: u32,
    /// A switch cut its payload off (packet trimming): headers only.
    pub trimmed: bool,
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
/// moves them: a slab, so that queues and wires hold 4-byte handles and
/// a frame's 160 bytes are written once when it leaves a NIC, not copied
/// at every queue and wire it passes.
///
/// Contract: a handle is valid from [`Packets::put`] until
/// [`Packets::take`] or [`Packets::free`]; each handle is held by
/// exactly one queue or wire at a time.
#[derive(Debug, Default)]
pub(crate) struct Packets {
    slots: Vec<Packet>,
    free: Vec<u32>,
    /// INT records (HPCC), by [`Packet::int`]: a frame's record outlives
    /// its handle (the receiving NIC reads it after taking the frame) and
    /// is freed by [`Packets::free_int`], or with the frame by
    /// [`Packets::free`].
    ints: Vec<IntRecord>,
    free_ints: Vec<u32>,
}

impl Packets {
    /// Store `pkt`; its handle.
    pub fn put(&mut self, pkt: Packet) -> u32 {
        match self.free.pop() {
            Some(h) => {
                self.slots[h as usize] = pkt;
                h
            }
            None => {
                self.slots.push(pkt);
                (self.slots.len() - 1) as u32
            }
        }
    }

    /// The frame of handle `h`.
    pub fn get(&self, h: u32) -> &Packet {
        &self.slots[h as usize]
    }

    /// The frame of handle `h`, to change.
    pub fn get_mut(&mut self, h: u32) -> &mut Packet {
        &mut self.slots[h as usize]
    }

    /// Take the frame of handle `h` out; the handle is free.
    pub fn take(&mut self, h: u32) -> Packet {
        self.free.push(h);
        self.slots[h as usize]
    }

    /// Drop the frame of handle `h` (and its INT record).
    pub fn free(&mut self, h: u32) {
        let int = self.slots[h as usize].int;
        self.free_int(int);
        self.free.push(h);
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
