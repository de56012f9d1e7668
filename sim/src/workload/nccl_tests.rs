//! nccl-tests' collectives as its programs (nccl-tests 2.19) size and
//! score them: the bytes each rank sends, receives and passes to NCCL for
//! a requested size ([`Collective::byte_counts`], per-rank shares in whole
//! 16-byte units where the buffer is split among ranks), and the
//! algorithm and bus bandwidth of a measured time
//! ([`Collective::bandwidths`]: busbw = algbw x [`Collective::bus_factor`],
//! 2(n-1)/n for all-reduce, (n-1)/n for reduce-scatter, all-gather,
//! all-to-all, gather and scatter, 1 for the rest).
//!
//! Units: bytes; seconds in, GB/s (10^9 bytes per second) out.

use serde::Deserialize;

/// Bytes per element of the sweeps the simulator runs: nccl-tests'
/// default type, `float`.
pub const ELEMENT_BYTES: u64 = 4;

/// An `nccl-tests` workload: one collective at each size, in order.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Sweep {
    /// The collective.
    pub collective: Collective,
    /// Requested sizes (`-b` ... `-e` by `-f`), bytes.
    pub sizes: Vec<u64>,
}

/// What one size of a sweep moves, for its group and the table line.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct NcclRow {
    /// The collective.
    pub collective: Collective,
    /// Ranks.
    pub ranks: u32,
    /// The table's `size` column.
    pub size: u64,
    /// The table's `count` column (elements).
    pub count: u64,
    /// Bytes per rank passed to NCCL (what algbw counts).
    pub param: u64,
    /// The algorithm that ran (NCCL's name: `Ring`, `Tree`); `None`
    /// for the point-to-point collectives.
    pub algorithm: Option<&'static str>,
    /// The protocol (`LL`, `LL128`, `Simple`); `None` as `algorithm`.
    pub protocol: Option<&'static str>,
    /// NCCL's tuning model's time for it, picoseconds.
    pub model_ps: Option<u64>,
    /// The latency term of that time, picoseconds.
    pub model_latency_ps: Option<u64>,
}

/// The smallest requested size at which every rank of `c` on `nranks`
/// moves at least one byte per step (elements of `elt` bytes).
pub fn smallest_size(c: Collective, elt: u64, nranks: u32) -> u64 {
    let n = u64::from(nranks.max(1));
    let unit = 16u64.max(elt);
    match c {
        // A ring all-reduce splits the buffer into n chunks.
        Collective::AllReduce => (n * elt).div_ceil(elt) * elt,
        Collective::Broadcast | Collective::Reduce | Collective::SendRecv => elt,
        // One 16-byte unit per rank.
        _ => n * unit,
    }
}

/// A collective of nccl-tests, by the program that measures it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Collective {
    /// `all_reduce_perf`.
    AllReduce,
    /// `all_gather_perf`.
    AllGather,
    /// `reduce_scatter_perf`.
    ReduceScatter,
    /// `alltoall_perf`.
    #[serde(rename = "alltoall")]
    AllToAll,
    /// `broadcast_perf`.
    Broadcast,
    /// `reduce_perf`.
    Reduce,
    /// `sendrecv_perf`.
    #[serde(rename = "sendrecv")]
    SendRecv,
    /// `gather_perf`.
    Gather,
    /// `scatter_perf`.
    Scatter,
}

/// What one rank moves for a requested size ([`Collective::byte_counts`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ByteCounts {
    /// Bytes in the send buffer.
    pub send: u64,
    /// Bytes in the receive buffer.
    pub recv: u64,
    /// Bytes of the count passed to NCCL (per rank for the collectives
    /// that split the buffer among ranks).
    pub param: u64,
}

impl ByteCounts {
    /// The table's `size` column: the larger buffer.
    pub fn size(&self) -> u64 {
        self.send.max(self.recv)
    }
}

impl Collective {
    /// Every collective, in the order of nccl-tests' programs.
    pub const ALL: [Collective; 9] = [
        Collective::AllReduce,
        Collective::AllGather,
        Collective::ReduceScatter,
        Collective::AllToAll,
        Collective::Broadcast,
        Collective::Reduce,
        Collective::SendRecv,
        Collective::Gather,
        Collective::Scatter,
    ];

    /// The name a scenario file gives it (`all_reduce`): the program's
    /// without `_perf`.
    pub fn name(self) -> &'static str {
        let p = self.program();
        &p[..p.len() - "_perf".len()]
    }

    /// The collective a scenario file's name (`all_reduce`) names.
    pub fn from_name(name: &str) -> Option<Collective> {
        Collective::ALL.into_iter().find(|c| c.name() == name)
    }

    /// The program's name (`all_reduce_perf`).
    pub fn program(self) -> &'static str {
        match self {
            Collective::AllReduce => "all_reduce_perf",
            Collective::AllGather => "all_gather_perf",
            Collective::ReduceScatter => "reduce_scatter_perf",
            Collective::AllToAll => "alltoall_perf",
            Collective::Broadcast => "broadcast_perf",
            Collective::Reduce => "reduce_perf",
            Collective::SendRecv => "sendrecv_perf",
            Collective::Gather => "gather_perf",
            Collective::Scatter => "scatter_perf",
        }
    }

    /// Whether the collective reduces (its table names a reduction
    /// operation; the others print `none`).
    pub fn reduces(self) -> bool {
        matches!(
            self,
            Collective::AllReduce | Collective::ReduceScatter | Collective::Reduce
        )
    }

    /// Whether the collective has a root rank (the others print root -1).
    pub fn rooted(self) -> bool {
        matches!(
            self,
            Collective::Broadcast | Collective::Reduce | Collective::Gather | Collective::Scatter
        )
    }

    /// Whether the buffer is split among the ranks (the per-rank count is
    /// `size / nranks`, rounded down to 16 bytes).
    fn splits(self) -> bool {
        matches!(
            self,
            Collective::AllGather
                | Collective::ReduceScatter
                | Collective::AllToAll
                | Collective::Gather
                | Collective::Scatter
        )
    }

    /// nccl-tests' bus bandwidth factor at `nranks` ranks: busbw / algbw.
    pub fn bus_factor(self, nranks: u32) -> f64 {
        let n = f64::from(nranks.max(1));
        match self {
            Collective::AllReduce => 2.0 * (n - 1.0) / n,
            Collective::AllGather
            | Collective::ReduceScatter
            | Collective::AllToAll
            | Collective::Gather
            | Collective::Scatter => (n - 1.0) / n,
            Collective::Broadcast | Collective::Reduce | Collective::SendRecv => 1.0,
        }
    }

    /// What each rank sends, receives and passes to NCCL when the program
    /// runs the requested `size` (bytes) with elements of `elt` bytes on
    /// `nranks` ranks. Per-rank shares are whole 16-byte multiples, as
    /// the programs make them (so a size below 16 x nranks bytes moves
    /// nothing).
    pub fn byte_counts(self, size: u64, elt: u64, nranks: u32) -> ByteCounts {
        let elt = elt.max(1);
        let n = u64::from(nranks.max(1));
        let count = size / elt;
        if !self.splits() {
            let b = count * elt;
            return ByteCounts {
                send: b,
                recv: b,
                param: b,
            };
        }
        // `(count / nranks) & ~(16 / elt - 1)`: whole 16-byte units.
        let per = 16u64.div_ceil(elt).max(1);
        let base = (count / n) / per * per;
        let (send, recv) = match self {
            Collective::AllGather | Collective::Gather => (base, base * n),
            Collective::ReduceScatter | Collective::Scatter => (base * n, base),
            _ => (base * n, base * n),
        };
        ByteCounts {
            send: send * elt,
            recv: recv * elt,
            param: base * elt,
        }
    }

    /// Algorithm and bus bandwidth (GB/s) of a collective that took
    /// `seconds` with `param_bytes` per rank ([`ByteCounts::param`]) on
    /// `nranks` ranks, as the programs' `GetBw` computes them.
    pub fn bandwidths(self, param_bytes: u64, seconds: f64, nranks: u32) -> (f64, f64) {
        let moved = if self.splits() {
            param_bytes as f64 * f64::from(nranks.max(1))
        } else {
            param_bytes as f64
        };
        let algbw = moved / 1.0e9 / seconds;
        (algbw, algbw * self.bus_factor(nranks))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// busbw / algbw is nccl-tests' factor for every collective and rank
    /// count, and algbw is the bytes the collective's user sees moved.
    #[test]
    fn bus_bandwidth_is_algbw_times_the_programs_factor() {
        for n in [2u32, 3, 8, 16, 1024] {
            let nf = f64::from(n);
            for c in Collective::ALL {
                let want = match c {
                    Collective::AllReduce => 2.0 * (nf - 1.0) / nf,
                    Collective::Broadcast | Collective::Reduce | Collective::SendRecv => 1.0,
                    _ => (nf - 1.0) / nf,
                };
                let counts = c.byte_counts(1 << 30, 4, n);
                let (alg, bus) = c.bandwidths(counts.param, 0.01, n);
                assert!((bus / alg - want).abs() < 1e-12, "{c:?} at {n} ranks");
                // The user's view: the whole buffer in 10 ms.
                let seen = counts.size() as f64 / 1e9 / 0.01;
                assert!((alg - seen).abs() / seen < 1e-12, "{c:?} at {n}");
            }
        }
    }

    /// The programs' rounding: all-gather's per-rank share is whole
    /// 16-byte units, so 1 MB on 3 ranks of floats prints 1048560 bytes
    /// (3 x 349520) and a count of 87380 per rank; sizes below 16 bytes
    /// per rank move nothing.
    #[test]
    fn byte_counts_round_per_rank_shares_to_16_bytes() {
        let ag = Collective::AllGather.byte_counts(1 << 20, 4, 3);
        assert_eq!((ag.send, ag.recv, ag.param), (349_520, 1_048_560, 349_520));
        assert_eq!(ag.size(), 1_048_560);
        let rs = Collective::ReduceScatter.byte_counts(1 << 20, 4, 3);
        assert_eq!((rs.send, rs.recv), (1_048_560, 349_520));
        let a2a = Collective::AllToAll.byte_counts(1 << 20, 4, 8);
        assert_eq!((a2a.send, a2a.recv, a2a.param), (1 << 20, 1 << 20, 1 << 17));
        assert_eq!(Collective::AllGather.byte_counts(64, 4, 8).size(), 0);
        let ar = Collective::AllReduce.byte_counts(1 << 20, 2, 8);
        assert_eq!((ar.send, ar.param), (1 << 20, 1 << 20));
        assert_eq!(Collective::AllReduce.name(), "all_reduce");
    }
}
