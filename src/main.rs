//! topo: how the GPUs in a box are connected, what NCCL will do on it, and how fast a
//! collective should be.
//!
//! The binary: flags in `cli`, one module per subcommand in `cmd`, exit codes and hints in
//! `error`; the renderers are `topo-report`'s. The work is in the library crates (see
//! docs/ARCHITECTURE.md): `topo-source` → `topo-model` → `topo-nccl`.

mod cli;
mod cmd;
mod error;
mod output;
mod progress;
mod request;
mod util;

/// The graph search recurses once per GPU of a channel and once per channel, as NCCL's does:
/// a 72-GPU NVLink clique (GB200 NVL72) runs more than a thousand frames deep, past the main
/// thread's 8 MiB in unoptimised builds. The stack is reserved, not committed, so the size
/// costs nothing until it is used.
const STACK_BYTES: usize = 256 << 20;

fn main() {
    // The renderers read no file or environment: the PCI ID database is named here.
    topo_report::show::use_pci_names(topo_source::pciids::names);
    let code = std::thread::Builder::new()
        .name("topo".into())
        .stack_size(STACK_BYTES)
        .spawn(cmd::main_entry)
        // A panic that escaped `main_entry`'s own catch (its hook has printed the line).
        .map(|h| h.join().unwrap_or(error::Exit::Internal as i32))
        .unwrap_or_else(|_| cmd::main_entry());
    std::process::exit(code);
}
