//! The one integration test binary of the `rocelab` CLI; one module per
//! subcommand.

mod devices;
