//! The discrete-event core: a queue of events ordered by (time, insertion
//! sequence), and seeded random streams.
//!
//! Two events at the same picosecond run in the order they were scheduled,
//! so a run is a pure function of its inputs and seed. The queue is a
//! binary min-heap on a packed 128-bit key (time in the high 64 bits,
//! sequence in the low 64); payloads are small `Copy` values.
//!
//! Randomness: one root seed per run; each component (switch, link fault,
//! NIC) draws from its own `ChaCha8Rng` derived from the root seed and a
//! (kind, index) label, so adding a component does not shift the streams of
//! the others.

use std::cmp::Ordering;
use std::collections::BinaryHeap;

use rand_chacha::rand_core::SeedableRng;
use rand_chacha::ChaCha8Rng;
use verbs_emu::time::Instant;

/// One scheduled event.
#[derive(Debug, Clone, Copy)]
struct Entry<E> {
    key: u128,
    event: E,
}

impl<E> PartialEq for Entry<E> {
    fn eq(&self, other: &Self) -> bool {
        self.key == other.key
    }
}
impl<E> Eq for Entry<E> {}
impl<E> PartialOrd for Entry<E> {
    fn partial_cmp(&self, other: &Self) -> Option<Ordering> {
        Some(self.cmp(other))
    }
}
impl<E> Ord for Entry<E> {
    fn cmp(&self, other: &Self) -> Ordering {
        // Reversed: BinaryHeap is a max-heap, we want the earliest first.
        other.key.cmp(&self.key)
    }
}

/// Events ordered by (time, insertion sequence).
#[derive(Debug)]
pub struct EventQueue<E> {
    heap: BinaryHeap<Entry<E>>,
    seq: u64,
    now: Instant,
    processed: u64,
}

impl<E: Copy> EventQueue<E> {
    /// An empty queue at time zero.
    pub fn new() -> EventQueue<E> {
        EventQueue {
            heap: BinaryHeap::with_capacity(1024),
            seq: 0,
            now: Instant::ZERO,
            processed: 0,
        }
    }

    /// The time of the event being processed (or last processed).
    pub fn now(&self) -> Instant {
        self.now
    }

    /// Events popped so far.
    pub fn processed(&self) -> u64 {
        self.processed
    }

    /// Events waiting.
    pub fn len(&self) -> usize {
        self.heap.len()
    }

    /// True when nothing is scheduled.
    pub fn is_empty(&self) -> bool {
        self.heap.is_empty()
    }

    /// Schedule `event` at `at`. A time in the past is clamped to now
    /// (models never schedule backwards; clamping keeps the clock
    /// monotonic if one does).
    pub fn schedule(&mut self, at: Instant, event: E) {
        let t = at.max(self.now);
        let key = (u128::from(t.as_ps()) << 64) | u128::from(self.seq);
        self.seq += 1;
        self.heap.push(Entry { key, event });
    }

    /// Time of the next event, if any.
    pub fn peek_time(&self) -> Option<Instant> {
        self.heap
            .peek()
            .map(|e| Instant::from_ps((e.key >> 64) as u64))
    }

    /// Take the next event and advance the clock to it.
    pub fn pop(&mut self) -> Option<(Instant, E)> {
        let e = self.heap.pop()?;
        self.now = Instant::from_ps((e.key >> 64) as u64);
        self.processed += 1;
        Some((self.now, e.event))
    }
}

impl<E: Copy> Default for EventQueue<E> {
    fn default() -> Self {
        EventQueue::new()
    }
}

/// Kinds of component that own a random stream.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[repr(u64)]
pub enum StreamKind {
    /// A switch (ECN marking).
    Switch = 1,
    /// A link direction (loss faults).
    Link = 2,
    /// A NIC (UDP source ports, initial PSNs).
    Nic = 3,
}

/// The random stream of component `(kind, index)` under `root`.
pub fn derive_rng(root: u64, kind: StreamKind, index: u64) -> ChaCha8Rng {
    let mut x = root ^ splitmix(kind as u64) ^ splitmix(index.wrapping_add(0x9E37));
    x = splitmix(x);
    let mut seed = [0u8; 32];
    for chunk in seed.chunks_mut(8) {
        x = splitmix(x);
        chunk.copy_from_slice(&x.to_le_bytes());
    }
    ChaCha8Rng::from_seed(seed)
}

/// SplitMix64 finaliser: a cheap, well-mixed bijection on u64.
pub fn splitmix(mut z: u64) -> u64 {
    z = z.wrapping_add(0x9E37_79B9_7F4A_7C15);
    z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
    z ^ (z >> 31)
}

#[cfg(test)]
mod tests {
    use super::*;
    use rand::RngCore;

    #[test]
    fn events_run_in_time_then_insertion_order() {
        let mut q = EventQueue::new();
        q.schedule(Instant::from_ps(30), 'c');
        q.schedule(Instant::from_ps(10), 'a');
        q.schedule(Instant::from_ps(30), 'd');
        q.schedule(Instant::from_ps(10), 'b');
        let order: Vec<char> = std::iter::from_fn(|| q.pop().map(|(_, e)| e)).collect();
        assert_eq!(order, vec!['a', 'b', 'c', 'd']);
        assert_eq!(q.now(), Instant::from_ps(30));
        assert_eq!(q.processed(), 4);
    }

    #[test]
    fn scheduling_in_the_past_clamps_to_now() {
        let mut q = EventQueue::new();
        q.schedule(Instant::from_ps(100), 1);
        q.pop();
        q.schedule(Instant::from_ps(5), 2);
        assert_eq!(q.pop(), Some((Instant::from_ps(100), 2)));
    }

    #[test]
    fn matches_a_sorted_reference_under_random_scheduling() {
        use rand::Rng;
        use rand_chacha::rand_core::SeedableRng;
        let mut rng = ChaCha8Rng::seed_from_u64(3);
        let mut q = EventQueue::new();
        let mut reference: Vec<(u64, u64)> = Vec::new();
        let mut popped = Vec::new();
        let mut id = 0u64;
        for _ in 0..20_000 {
            if rng.gen_bool(0.55) || q.is_empty() {
                let now = q.now().as_ps();
                let t = now + rng.gen_range(0..5_000_000u64) * rng.gen_range(0..3u64);
                q.schedule(Instant::from_ps(t), id);
                reference.push((t, id));
                id += 1;
            } else {
                popped.push(q.pop().map(|(t, e)| (t.as_ps(), e)).unwrap());
            }
        }
        while let Some((t, e)) = q.pop() {
            popped.push((t.as_ps(), e));
        }
        // Ids grow with insertion, so (time, id) is (time, sequence).
        reference.sort_unstable();
        assert_eq!(popped, reference);
    }

    #[test]
    fn derived_streams_are_stable_and_distinct() {
        let a1 = derive_rng(7, StreamKind::Switch, 0).next_u64();
        let a2 = derive_rng(7, StreamKind::Switch, 0).next_u64();
        let b = derive_rng(7, StreamKind::Switch, 1).next_u64();
        let c = derive_rng(7, StreamKind::Link, 0).next_u64();
        let d = derive_rng(8, StreamKind::Switch, 0).next_u64();
        assert_eq!(a1, a2);
        assert!(a1 != b && a1 != c && a1 != d && b != c);
    }
}
