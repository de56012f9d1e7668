//! The discrete-event core: a queue of events ordered by (time, insertion
//! sequence), and seeded random streams.
//!
//! Two events at the same picosecond run in the order they were scheduled,
//! so a run is a pure function of its inputs and seed. The queue is a radix
//! heap on the time in picoseconds, in base 256: events are never
//! scheduled before the last one taken (the clock is monotonic), so each
//! event sits in the bucket named by the highest byte in which its time
//! differs from the clock and by its own value of that byte, and is moved
//! at most 8 times over its life. Pushes are O(1), pops amortised O(1),
//! with no comparisons on a large heap: this is what keeps big fabrics
//! fast, where a binary heap of tens of thousands of in-flight packets
//! spent half the run sifting. (In base 2 a packet's event moved about
//! five times before it ran, in base 16 about three; the k=8 permutation
//! ran 10 % (base 16) and 12 % (base 256) fewer instructions than in
//! base 2.)
//!
//! Buckets in index order cover ascending, disjoint time ranges: bucket
//! `1 + 256 L + d` holds the times that share every byte above `L` with
//! the clock and have byte `d` at `L`. Insertion order within one time:
//! every bucket holds its events in the order they were scheduled (an
//! event is appended to a bucket, and a bucket is only ever split, around
//! its smallest time, into buckets of lower levels, which are all empty
//! at that moment, keeping order), and bucket 0 (time equal to the clock)
//! is consumed from the front. Payloads are small `Copy` values.
//!
//! Randomness: one root seed per run; each component (switch, link fault,
//! NIC) draws from its own `ChaCha8Rng` derived from the root seed and a
//! (kind, index) label, so adding a component does not shift the streams of
//! the others.

use rand_chacha::rand_core::SeedableRng;
use rand_chacha::ChaCha8Rng;
use roce::time::Instant;

/// Bits of a digit (a byte).
const DIGIT_BITS: u32 = 8;
/// Values of a digit.
const RADIX: usize = 1 << DIGIT_BITS;
/// Number of buckets: 0 for "equal to the clock", then one per digit
/// position and value of a u64 time.
const BUCKETS: usize = 1 + (64 / DIGIT_BITS as usize) * RADIX;
/// Words of the non-empty mask.
const MASK_WORDS: usize = BUCKETS.div_ceil(64);

/// Events ordered by (time, insertion sequence).
#[derive(Debug)]
pub struct EventQueue<E> {
    /// Bucket `1 + 256 L + d` holds events whose time differs from `last`
    /// first in byte `L`, where it is `d`; bucket 0 holds
    /// events at `last`, consumed from `head0`.
    buckets: Vec<Vec<(u64, E)>>,
    /// Smallest time in each bucket (meaningful when the bucket is not
    /// empty).
    mins: [u64; BUCKETS],
    /// Bit `i` set when bucket `i` (1..) is not empty.
    nonempty: [u64; MASK_WORDS],
    /// Next unread entry of bucket 0.
    head0: usize,
    /// The radix reference: the time of the last event taken.
    last: u64,
    len: usize,
    now: Instant,
    processed: u64,
}

impl<E: Copy> EventQueue<E> {
    /// An empty queue at time zero.
    pub fn new() -> EventQueue<E> {
        EventQueue {
            buckets: (0..BUCKETS).map(|_| Vec::new()).collect(),
            mins: [u64::MAX; BUCKETS],
            nonempty: [0; MASK_WORDS],
            head0: 0,
            last: 0,
            len: 0,
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
        self.len
    }

    /// True when nothing is scheduled.
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    #[inline]
    fn bucket_of(&self, t: u64) -> usize {
        let x = t ^ self.last;
        if x == 0 {
            return 0;
        }
        let level = (63 - x.leading_zeros()) / DIGIT_BITS;
        let digit = (t >> (level * DIGIT_BITS)) as usize & (RADIX - 1);
        1 + level as usize * RADIX + digit
    }

    #[inline]
    fn put(&mut self, t: u64, event: E) {
        let b = self.bucket_of(t);
        if b != 0 {
            let (w, bit) = (b / 64, 1u64 << (b % 64));
            if self.nonempty[w] & bit == 0 {
                self.nonempty[w] |= bit;
                self.mins[b] = t;
            } else if t < self.mins[b] {
                self.mins[b] = t;
            }
        }
        self.buckets[b].push((t, event));
    }

    /// The first non-empty bucket past 0 (the earliest times).
    #[inline]
    fn first_nonempty(&self) -> Option<usize> {
        self.nonempty
            .iter()
            .position(|&w| w != 0)
            .map(|w| w * 64 + self.nonempty[w].trailing_zeros() as usize)
    }

    /// Schedule `event` at `at`. A time in the past is clamped to now
    /// (models never schedule backwards; clamping keeps the clock
    /// monotonic if one does).
    pub fn schedule(&mut self, at: Instant, event: E) {
        let t = at.max(self.now).as_ps().max(self.last);
        self.put(t, event);
        self.len += 1;
    }

    /// Time of the next event, if any.
    pub fn peek_time(&self) -> Option<Instant> {
        if self.head0 < self.buckets[0].len() {
            return Some(Instant::from_ps(self.last));
        }
        let b = self.first_nonempty()?;
        Some(Instant::from_ps(self.mins[b]))
    }

    /// Take the next event and advance the clock to it.
    pub fn pop(&mut self) -> Option<(Instant, E)> {
        if self.head0 >= self.buckets[0].len() {
            self.buckets[0].clear();
            self.head0 = 0;
            // Split the first non-empty bucket around its smallest time;
            // every event in it lands in a lower (now empty) bucket, in
            // the order it had.
            let b = self.first_nonempty()?;
            self.nonempty[b / 64] &= !(1u64 << (b % 64));
            self.last = self.mins[b];
            let moving = std::mem::take(&mut self.buckets[b]);
            for &(t, e) in &moving {
                self.put(t, e);
            }
            // Keep the allocation for the next time this bucket fills.
            let mut moving = moving;
            moving.clear();
            self.buckets[b] = moving;
        }
        let (t, e) = self.buckets[0][self.head0];
        self.head0 += 1;
        self.len -= 1;
        self.now = Instant::from_ps(t);
        self.processed += 1;
        Some((self.now, e))
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
    fn peek_agrees_with_pop_over_wide_time_ranges() {
        use rand::Rng;
        use rand_chacha::rand_core::SeedableRng;
        let mut rng = ChaCha8Rng::seed_from_u64(11);
        let mut q = EventQueue::new();
        let mut reference: Vec<(u64, u64)> = Vec::new();
        let mut popped = Vec::new();
        let mut id = 0u64;
        for round in 0..5_000u64 {
            // Bursts at the current time, and far-future events spanning
            // every bucket.
            for _ in 0..rng.gen_range(0..4) {
                let now = q.now().as_ps();
                let t = match rng.gen_range(0..4) {
                    0 => now,
                    1 => now + rng.gen_range(0..1_000),
                    _ => now + (1u64 << rng.gen_range(0..50)) + round,
                };
                q.schedule(Instant::from_ps(t), id);
                reference.push((t, id));
                id += 1;
            }
            let peek = q.peek_time();
            match q.pop() {
                Some((t, e)) => {
                    assert_eq!(peek, Some(t));
                    popped.push((t.as_ps(), e));
                }
                None => assert_eq!(peek, None),
            }
        }
        while let Some((t, e)) = q.pop() {
            popped.push((t.as_ps(), e));
        }
        assert!(q.is_empty() && q.peek_time().is_none());
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
