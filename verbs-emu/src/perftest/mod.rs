//! perftest: work in progress, see the architecture map.
