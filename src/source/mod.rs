//! Everything that produces a [`Topology`]: the live machine, snapshots, NCCL topology XML
//! and hardware profiles. This is the only module that reads the machine.

pub mod escape;
pub mod live;
pub mod nccl_lib;
pub mod ncclxml;
pub mod nvml;
pub mod profile;
pub mod snapshot;
pub mod sysfs;
pub mod yaml_depth;

use crate::error;
use crate::model::Topology;
use anyhow::Result;
use std::collections::HashMap;
use std::path::{Path, PathBuf};

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

/// Refuses topologies no NCCL could load and that would not fit in memory.
fn check_capacity(topo: &Topology) -> Result<()> {
    use crate::model::NodeKind;
    let origin = topo
        .source
        .origin
        .clone()
        .unwrap_or_else(|| format!("the {} topology", topo.source.kind));
    let mut counts: HashMap<(crate::model::HostId, &'static str), usize> = HashMap::new();
    let mut gpus = 0usize;
    for node in topo.graph.node_weights() {
        let kind = match node.kind {
            NodeKind::Gpu(_) => {
                gpus += 1;
                "GPUs"
            }
            NodeKind::Net(_) => "network ports",
            NodeKind::Nic(_) => "NICs",
            NodeKind::PciSwitch(_) => "PCI switches",
            NodeKind::Cpu(_) => "CPUs",
            NodeKind::NvSwitch(_) | NodeKind::PciDevice(_) => continue,
        };
        let n = counts.entry((node.host, kind)).or_default();
        *n += 1;
        if *n > MAX_PER_HOST {
            return Err(error::usage(
                format!(
                    "{origin}: host {} has more than {MAX_PER_HOST} {kind}, more than NCCL can hold per node",
                    node.host
                ),
                "pass a topology of one real machine (NCCL_TOPO_MAX_NODES is 640 in NCCL 2.29+)",
            ));
        }
    }
    if gpus > MAX_GPUS {
        return Err(error::usage(
            format!("{origin}: {gpus} GPUs, more than the {MAX_GPUS} topo models"),
            "pass a topology of fewer hosts",
        ));
    }
    Ok(())
}

/// The most device pairs (the sum over hosts of devices per host, squared) `--nodes` may
/// build. NCCL's path tables hold one entry per pair of a host's devices, and they, not the
/// device count, are what costs: about 120 bytes a pair, so this keeps the largest admitted
/// model near 500 MB (a DGX H100 has 46 devices: about 1 980 nodes of them fit). Counts alone
/// were not enough: 16 copies of a host with 600 NICs took 54 s and 2 GB.
pub const MAX_DEVICE_PAIRS: u64 = 1 << 22;

/// Refuses a topology, or its `--nodes` replication, whose path tables would not fit
/// [`MAX_DEVICE_PAIRS`] (a single host of 640 devices of every kind would need 10 million).
fn check_work(topo: &Topology, n: usize) -> Result<()> {
    let mut per_host: HashMap<crate::model::HostId, u64> = HashMap::new();
    for node in topo.graph.node_weights() {
        *per_host.entry(node.host).or_default() += 1;
    }
    let pairs_once: u64 = per_host.values().map(|c| c * c).sum();
    let pairs = pairs_once.saturating_mul(n as u64);
    if pairs <= MAX_DEVICE_PAIRS {
        return Ok(());
    }
    let devices = topo.graph.node_count() as u64;
    if n == 1 {
        let origin = topo.source.origin.as_deref().unwrap_or(&topo.source.kind);
        return Err(error::usage(
            format!(
                "{origin}: {} devices in {} hosts make {} device pairs for NCCL's path tables; the limit is {}",
                thousands(devices),
                per_host.len(),
                thousands(pairs),
                thousands(MAX_DEVICE_PAIRS)
            ),
            "pass a topology of one real machine",
        ));
    }
    Err(error::usage(
        format!(
            "--nodes {n} would build {} devices in {} hosts, {} device pairs for NCCL's path tables; the limit is {}",
            thousands(devices.saturating_mul(n as u64)),
            thousands((per_host.len() as u64).saturating_mul(n as u64)),
            thousands(pairs),
            thousands(MAX_DEVICE_PAIRS)
        ),
        format!(
            "pass --nodes {} or fewer for this machine ({} devices per node)",
            (MAX_DEVICE_PAIRS / pairs_once.max(1)).max(1),
            thousands(devices)
        ),
    ))
}

/// `41000` as `41,000`.
fn thousands(v: u64) -> String {
    let digits = v.to_string();
    let mut out = String::new();
    for (i, c) in digits.chars().enumerate() {
        if i > 0 && (digits.len() - i).is_multiple_of(3) {
            out.push(',');
        }
        out.push(c);
    }
    out
}

/// What the user asked for on the command line.
#[derive(Clone, Debug, Default)]
pub struct SourceSpec {
    pub from: Option<PathBuf>,
    pub profile: Option<String>,
    pub nodes: Option<usize>,
    pub sysfs_root: Option<PathBuf>,
    /// The topology is for text output: make control characters in its strings visible.
    pub escape_text: bool,
}

/// The kinds of file `--from` accepts, told apart by name and then by content.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum FromKind {
    Xml,
    Snapshot,
    Profile,
}

/// Content decides where it is unambiguous (gzip magic, a leading `<`, a `key:` line), so a
/// file with the wrong suffix is still read as what it is; the suffix decides otherwise.
pub fn sniff(path: &Path) -> Result<FromKind> {
    if path.is_dir() {
        return Ok(FromKind::Snapshot);
    }
    let name = path
        .file_name()
        .map(|n| n.to_string_lossy().to_ascii_lowercase())
        .unwrap_or_default();
    let head = read_head(path)?;
    if head.starts_with(&[0x1f, 0x8b]) {
        return Ok(FromKind::Snapshot);
    }
    let text = String::from_utf8_lossy(&head);
    let text = text.trim_start_matches('\u{feff}').trim_start();
    if text.starts_with('<') {
        return Ok(FromKind::Xml);
    }
    if name.ends_with(".tar.gz") || name.ends_with(".tgz") {
        return Ok(FromKind::Snapshot);
    }
    if name.ends_with(".xml") && !looks_like_yaml(text) {
        return Ok(FromKind::Xml);
    }
    Ok(FromKind::Profile)
}

/// Whether the first line that is not blank or a comment is a YAML `key:` entry.
fn looks_like_yaml(text: &str) -> bool {
    text.lines()
        .map(str::trim)
        .find(|l| !l.is_empty() && !l.starts_with('#') && l != &"---")
        .and_then(|l| l.split_once(':'))
        .is_some_and(|(k, _)| {
            !k.is_empty()
                && k.chars()
                    .all(|c| c.is_ascii_alphanumeric() || c == '_' || c == '-')
        })
}

fn read_head(path: &Path) -> Result<Vec<u8>> {
    use std::io::Read;
    let mut f = std::fs::File::open(path).map_err(|e| {
        error::usage(
            format!("cannot read {}: {}", path.display(), io_reason(&e)),
            "pass --from an NCCL topology XML, a snapshot folder or .tar.gz, or a profile YAML",
        )
    })?;
    let mut buf = vec![0u8; 512];
    let n = f.read(&mut buf).unwrap_or(0);
    buf.truncate(n);
    Ok(buf)
}

/// `std::io::Error` text without the "(os error N)" tail.
pub fn io_reason(e: &std::io::Error) -> String {
    error::io_reason(e)
}

/// Loads the topology the spec names (live discovery by default), replicated for `--nodes`.
pub fn load(spec: &SourceSpec) -> Result<Topology> {
    let topo = if let Some(name) = &spec.profile {
        profile::load_builtin(name)?
    } else if let Some(path) = &spec.from {
        if !path.exists() {
            return Err(error::usage(
                format!("cannot read {}: no such file or directory", path.display()),
                "pass --from an NCCL topology XML, a snapshot folder or .tar.gz, or a profile YAML",
            ));
        }
        // A device or pipe (/dev/zero, a FIFO, /dev/stdin) would never end, block, or lose the
        // bytes sniffing reads; files and folders are all a source can be.
        if !path.is_file() && !path.is_dir() {
            return Err(error::usage(
                format!(
                    "cannot read {}: not a regular file or folder",
                    path.display()
                ),
                "save the input to a file first and pass --from that file",
            ));
        }
        match sniff(path)? {
            FromKind::Xml => ncclxml::load_file(path)?,
            FromKind::Snapshot => snapshot::load(path)?,
            FromKind::Profile => profile::load_file(path)?,
        }
    } else {
        let root = spec
            .sysfs_root
            .clone()
            .unwrap_or_else(|| PathBuf::from("/"));
        live::discover(&root)?
    };
    check_capacity(&topo)?;
    let mut topo = topo;
    if spec.escape_text {
        // Before replicating: once per machine, not once per node.
        escape::topology(&mut topo);
    }
    Ok(match spec.nodes {
        Some(n) if n > 1 => {
            let total = topo.gpus().len().saturating_mul(n);
            if total > MAX_GPUS {
                return Err(error::usage(
                    format!(
                        "--nodes {n}: {n} nodes of {} GPUs is {total} GPUs, more than the {MAX_GPUS} topo models",
                        topo.gpus().len()
                    ),
                    format!(
                        "pass --nodes {} or fewer",
                        (MAX_GPUS / topo.gpus().len().max(1)).max(1)
                    ),
                ));
            }
            check_work(&topo, n)?;
            topo.replicate(n)
        }
        _ => {
            check_work(&topo, 1)?;
            topo
        }
    })
}
