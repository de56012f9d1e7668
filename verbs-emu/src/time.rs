//! Integer time: picoseconds in a `u64` (see the architecture contracts).
