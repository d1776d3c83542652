//! topo: how the GPUs in a box are connected, what NCCL will do on it, and how fast a
//! collective should be.
//!
//! The binary: flags in `cli`, one module per subcommand in `cmd`, renderers in `report`,
//! exit codes and hints in `error`. The work is in the library crates (see
//! docs/ARCHITECTURE.md): `topo-source` → `topo-model` → `topo-nccl`.

mod cli;
mod cmd;
mod error;
mod output;
mod progress;
mod report;
mod util;

fn main() {
    std::process::exit(cmd::main_entry());
}
