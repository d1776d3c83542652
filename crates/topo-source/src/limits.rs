//! What a source may hold and how a streamed input is named: the bounds every reader checks
//! against, apart from the loader that dispatches to the readers so that they do not use each
//! other.

use std::path::Path;

/// A snapshot's metadata file, written last with its completion mark (read by the snapshot
/// replay and looked for by the archive reader).
pub(crate) const META: &str = "meta.json";

/// The most nodes `--nodes` replicates: more than the largest NCCL jobs run on (a few
/// thousand nodes), and few enough that every command stays within seconds and memory.
pub const MAX_NODES: usize = 4096;

/// The most GPUs a replicated topology may hold (4096 nodes of 8 GPUs).
pub const MAX_GPUS: usize = 32768;

/// The most devices of one kind (GPUs, NICs, ports, PCI switches, CPUs) one host may hold:
/// NCCL's own capacity per node type (`NCCL_TOPO_MAX_NODES`, 640 since 2.29). Larger hosts
/// cannot be real, and path tables grow with the square of a host's size (a 10 MB XML with
/// 60 000 GPUs would need tens of GB).
pub const MAX_PER_HOST: usize = 640;

/// The most device pairs (the sum over hosts of devices per host, squared) a topology and its
/// replication may hold. NCCL's path tables hold one entry per pair of a host's devices, and
/// they, not the device count, are what costs a host with hundreds of NICs: 16 copies of one
/// with 600 NICs took 54 s and 2 GB. The limit is set so that the documented maximum of
/// 4096 nodes of a DGX H100 (46 devices each, 8.7 million pairs) still fits, and nothing
/// admitted costs more than that largest documented case (bench/plan measures it).
pub const MAX_DEVICE_PAIRS: u64 = 1 << 24;

/// How a streamed input is named in messages: `standard input`, or the pipe's path.
pub fn stream_name(path: &Path) -> String {
    if crate::read::is_stdin(path) {
        "standard input".into()
    } else {
        path.display().to_string()
    }
}
