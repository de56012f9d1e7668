//! Exports rdma-core's librdmacm symbols under rdma-core's symbol
//! versions: `symbols.txt` is the one list (see the `shim-symver` crate).

fn main() {
    shim_symver::export("librdmacm", "librdmacm.so.1");
}
