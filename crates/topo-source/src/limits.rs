//! What a source may hold and how a streamed input is named: the bounds every reader checks
//! against, apart from the loader that dispatches to the readers so that they do not use each
//! other.

use std::path::Path;

/// A snapshot's metadata file, written last with its completion mark (read by the snapshot
/// replay and looked for by the archive reader).
pub(crate) const META: &str = "meta.json";

/// The most nodes `--nodes` replicates: 16,384 nodes of 8 GPUs are 131,072 GPUs, the size
/// of today's largest training clusters (issue 28).
pub const MAX_NODES: usize = 16384;

/// The most GPUs a topology, replicated or not, may hold (16,384 nodes of 8 GPUs).
pub const MAX_GPUS: usize = 131_072;

pub use topo_model::MAX_PER_HOST;

/// The most device pairs (the sum over hosts of devices per host, squared) a topology and its
/// `--nodes` copies may hold. NCCL's path tables hold one entry per pair of a host's devices,
/// and they, not the device count, are what costs a host with hundreds of NICs: copies share
/// the first one's tables now (topo-nccl's `paths::replica`), yet 800 copies of a host with
/// 600 NICs still took 9 s and 2.8 GB, against 64 copies' 4 s and 280 MB. The limit is set
/// so that the documented maximum of 16,384 nodes of a DGX H100 (46 devices each, 34.7
/// million pairs) fits, and a host of 600 NICs fits 46 times.
pub const MAX_DEVICE_PAIRS: u64 = 1 << 26;

/// How a streamed input is named in messages: `standard input`, or the pipe's path.
pub fn stream_name(path: &Path) -> String {
    if crate::read::is_stdin(path) {
        "standard input".into()
    } else {
        path.display().to_string()
    }
}
