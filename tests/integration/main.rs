//! rocelab CLI integration tests: one binary, one module per subcommand.

mod perftest;
