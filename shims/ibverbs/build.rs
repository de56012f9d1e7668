//! Exports rdma-core's libibverbs symbols under rdma-core's symbol
//! versions: `symbols.txt` is the one list (see the `shim-symver` crate).

fn main() {
    shim_symver::export("libibverbs", "libibverbs.so.1");
}
