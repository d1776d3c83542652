//! Everything that produces a [`Topology`]: the live machine, snapshots, NCCL topology XML
//! and hardware profiles. This is the only module that reads the machine.

pub mod archive;
pub mod atomic;
pub mod cudadrv;
pub mod error;
pub mod escape;
pub mod hostfacts;
pub mod hosts;
mod limits;
pub mod live;
pub mod nccl_lib;
pub use topo_evidence::hang;
pub use topo_evidence::nccllog;
/// The nccl-tests reader lives with the other evidence readers; the old path stays.
pub use topo_evidence::nccltests;
pub mod ncclxml;
pub mod nvml;
pub mod pciids;
pub mod profile;
pub mod read;
pub mod smimatrix;
pub mod snapshot;
pub mod sysfs;
pub mod textfile;
pub mod tree;
pub mod yaml_depth;

pub use error::{Error, ErrorKind, Result};
pub(crate) use limits::META;
pub use limits::{MAX_DEVICE_PAIRS, MAX_GPUS, MAX_NODES, MAX_PER_HOST, stream_name};

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use topo_model::Topology;

/// Refuses topologies no NCCL could load and that would not fit in memory.
fn check_capacity(topo: &Topology) -> Result<()> {
    use topo_model::NodeKind;
    let origin = topo
        .source
        .origin
        .clone()
        .unwrap_or_else(|| format!("the {} topology", topo.source.kind));
    let mut counts: HashMap<(topo_model::HostId, &'static str), usize> = HashMap::new();
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
            return Err(Error::new(
                ErrorKind::HostTooLarge,
                format!(
                    "{origin}: host {} has more than {MAX_PER_HOST} {kind}, more than NCCL can hold per node",
                    node.host
                ),
            ));
        }
    }
    if gpus > MAX_GPUS {
        return Err(Error::new(
            ErrorKind::TooManyGpus,
            format!("{origin}: {gpus} GPUs, more than the {MAX_GPUS} topo models"),
        ));
    }
    Ok(())
}

/// Refuses a topology, or its `--nodes` replication, whose path tables would not fit
/// [`MAX_DEVICE_PAIRS`] (a single host of 640 devices of every kind would need 10 million).
fn check_work(topo: &Topology, n: usize) -> Result<()> {
    let mut per_host: HashMap<topo_model::HostId, u64> = HashMap::new();
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
        let origin = topo
            .source
            .origin
            .as_deref()
            .unwrap_or(topo.source.kind.name());
        return Err(Error::new(
            ErrorKind::TooMuchWork,
            format!(
                "{origin}: {} devices in {} hosts make {} device pairs for NCCL's path tables; the limit is {}",
                thousands(devices),
                per_host.len(),
                thousands(pairs),
                thousands(MAX_DEVICE_PAIRS)
            ),
        ));
    }
    Err(Error::new(
        ErrorKind::Replication {
            nodes: n,
            max_nodes: (MAX_DEVICE_PAIRS / pairs_once.max(1)).max(1) as usize,
        },
        format!(
            "{n} nodes of {} devices would build {} devices in {} hosts, {} device pairs for NCCL's path tables; the limit is {}",
            thousands(devices),
            thousands(devices.saturating_mul(n as u64)),
            thousands((per_host.len() as u64).saturating_mul(n as u64)),
            thousands(pairs),
            thousands(MAX_DEVICE_PAIRS)
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
    /// `from` was found, not named by the user (an entry of a `--fleet` folder, a line of a
    /// host list): only a regular file or a folder is read, never a FIFO, which another user
    /// may have planted in a shared folder and hold open.
    pub regular_only: bool,
    /// What the user stated about each node (`--gpus-per-node`, `--fabric`, `--nics`,
    /// `--nic-speed` over a stated speed): laid onto the source before `--nodes` copies it.
    pub node: topo_model::netfacts::NodeFacts,
}

/// Hardware facts stated on the command line (`--p2p`, `--nvls`), applied over what the
/// source said: every GPU's peer access, every host's NVLS multicast.
pub fn apply_facts(topo: &mut Topology, p2p: Option<bool>, nvls: Option<bool>) {
    if let Some(v) = p2p {
        for n in topo.gpus() {
            if let topo_model::NodeKind::Gpu(g) = &mut topo.node_mut(n).kind {
                g.p2p = Some(v);
            }
        }
    }
    if let Some(value) = nvls {
        for h in &mut topo.hosts {
            h.nvls = Some(topo_model::FactNote {
                value,
                why: format!("--nvls {}", if value { "on" } else { "off" }),
            });
        }
    }
}

/// The kinds of file `--from` accepts, told apart by name and then by content.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum FromKind {
    Xml,
    Snapshot,
    Profile,
    NcclLog,
    SmiMatrix,
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
    if is_plain_tar(&head) {
        return Err(Error::new(
            ErrorKind::Input,
            format!(
                "cannot read {}: a plain tar archive: snapshots are .tar.gz (gzip); compress it or unpack it and pass the folder",
                path.display()
            ),
        ));
    }
    let text = String::from_utf8_lossy(&head);
    let text = text.trim_start_matches('\u{feff}').trim_start();
    if text.starts_with('<') {
        return Ok(FromKind::Xml);
    }
    if name.ends_with(".tar.gz") || name.ends_with(".tgz") {
        return Ok(FromKind::Snapshot);
    }
    // A profile may quote an nvidia-smi matrix or NCCL lines in its comments.
    if name.ends_with(".yaml") || name.ends_with(".yml") {
        return Ok(FromKind::Profile);
    }
    if textfile::looks_like_log(text) {
        return Ok(FromKind::NcclLog);
    }
    if textfile::looks_like_matrix(text) {
        return Ok(FromKind::SmiMatrix);
    }
    if name.ends_with(".xml") && !looks_like_yaml(text) {
        return Ok(FromKind::Xml);
    }
    // Blank lines and comments alone: the profile reader says "empty file".
    let blank = text
        .lines()
        .all(|l| l.trim().is_empty() || l.trim_start().starts_with('#'));
    if looks_like_yaml(text) || blank {
        return Ok(FromKind::Profile);
    }
    // Not quoted: a file that is none of these (`--expect /etc/shadow`) must not have its
    // content echoed in the error.
    Err(Error::new(
        ErrorKind::Input,
        format!(
            "cannot read {}: not a format topo reads; pass an NCCL topology XML, a snapshot (folder or .tar.gz), a profile (.yaml), an NCCL INFO log or `nvidia-smi topo -m` output",
            path.display()
        ),
    ))
}

/// A POSIX (`ustar\0`) or GNU (`ustar  `) tar header: the magic at byte 257 of the first
/// 512-byte block.
fn is_plain_tar(head: &[u8]) -> bool {
    head.get(257..262) == Some(b"ustar")
}

/// Whether the first line that is not blank or a comment is a YAML `key:` entry (a colon
/// followed by a space or the line's end: `root:x:0:0` is one plain scalar, not a key).
fn looks_like_yaml(text: &str) -> bool {
    text.lines()
        .map(str::trim)
        .find(|l| !l.is_empty() && !l.starts_with('#') && l != &"---")
        .and_then(|l| l.split_once(':'))
        .is_some_and(|(k, rest)| {
            !k.is_empty()
                && (rest.is_empty() || rest.starts_with([' ', '\t']))
                && k.chars()
                    .all(|c| c.is_ascii_alphanumeric() || c == '_' || c == '-')
        })
}

fn read_head(path: &Path) -> Result<Vec<u8>> {
    use std::io::Read;
    let (mut f, _) = read::open_regular(path, false).map_err(|e| {
        Error::new(
            ErrorKind::Input,
            format!("cannot read {}: {e}", path.display()),
        )
    })?;
    // Enough for a log's first INFO line or a matrix header after a shell prompt.
    let mut buf = vec![0u8; 4096];
    let n = f.read(&mut buf).unwrap_or(0);
    buf.truncate(n);
    Ok(buf)
}

pub use error::io_reason;

/// Loads the topology the spec names (live discovery by default), replicated for `--nodes`.
pub fn load(spec: &SourceSpec) -> Result<Topology> {
    let topo = if let Some(name) = &spec.profile {
        profile::load_builtin(name)?
    } else if let Some(path) = spec
        .from
        .as_ref()
        .filter(|p| read::is_stream(p) && spec.regular_only)
    {
        let kind = if read::is_stdin(path) {
            "standard input"
        } else {
            "fifo"
        };
        return Err(Error::new(
            ErrorKind::NotAFile,
            format!(
                "cannot read {}: is a {kind}, not a regular file or folder",
                path.display()
            ),
        ));
    } else if let Some(path) = spec.from.as_ref().filter(|p| read::is_stream(p)) {
        // `-` or `<(cmd)`: read once, told apart by content (there is no file to sniff twice).
        let text = textfile::read_text(path, "topology source")?;
        textfile::load_text(&text, &stream_name(path))?
    } else if let Some(path) = &spec.from {
        // `metadata`, not `exists`: a symlink loop is its own error, not "no such file".
        if let Err(e) = std::fs::metadata(path) {
            return Err(Error::new(
                ErrorKind::Input,
                format!("cannot read {}: {}", path.display(), io_reason(&e)),
            ));
        }
        // A device or pipe (/dev/zero, a FIFO, /dev/stdin) would never end, block, or lose the
        // bytes sniffing reads; files and folders are all a source can be.
        if !path.is_file() && !path.is_dir() {
            return Err(Error::new(
                ErrorKind::NotAFile,
                format!(
                    "cannot read {}: not a regular file or folder",
                    path.display()
                ),
            ));
        }
        match sniff(path)? {
            FromKind::Xml => ncclxml::load_file(path)?,
            FromKind::Snapshot => snapshot::load(path)?,
            FromKind::Profile => profile::load_file(path)?,
            FromKind::NcclLog => textfile::load_log(path)?,
            FromKind::SmiMatrix => textfile::load_matrix(path)?,
        }
    } else {
        let root = spec
            .sysfs_root
            .clone()
            .unwrap_or_else(|| PathBuf::from("/"));
        discover(&root)?
    };
    check_capacity(&topo)?;
    let mut topo = topo;
    if spec.escape_text {
        // Before replicating: once per machine, not once per node.
        escape::topology(&mut topo);
    }
    if !spec.node.is_empty() {
        let notes = topo_model::netfacts::apply_node(&mut topo, &spec.node, None)
            .map_err(|e| Error::new(ErrorKind::Input, e))?;
        topo.source.stated.extend(notes);
    }
    Ok(match spec.nodes {
        Some(n) if n > 1 => {
            let total = topo.gpus().len().saturating_mul(n);
            if total > MAX_GPUS {
                return Err(Error::new(
                    ErrorKind::Replication {
                        nodes: n,
                        max_nodes: (MAX_GPUS / topo.gpus().len().max(1)).max(1),
                    },
                    format!(
                        "{n} nodes of {} GPUs is {total} GPUs, more than the {MAX_GPUS} topo models",
                        topo.gpus().len()
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

/// Captures the machine under `root` into `out` (see [`snapshot::capture`]); returns the
/// one-line summary.
pub fn capture_snapshot(root: &Path, out: &Path) -> Result<String> {
    Ok(snapshot::capture(root, out)?)
}

/// The topology as NCCL topology XML (see [`ncclxml::write`]).
pub fn write_nccl_xml(topo: &Topology) -> Result<String> {
    Ok(ncclxml::write(topo)?)
}

/// Live discovery under `root`: this machine (with live NVML) when `root` is `/`, else a
/// captured tree replayed with the NVML answers and environment it recorded.
pub fn discover(root: &Path) -> Result<Topology> {
    if !root.is_dir() {
        return Err(Error::new(
            ErrorKind::SysfsRoot,
            format!(
                "cannot read sysfs root {}: no such directory",
                root.display()
            ),
        ));
    }
    let inputs = if live::is_system_root(root) {
        live::Inputs {
            nvml: nvml::query(),
            arch: live::host_arch(),
            env: live::process_env(),
        }
    } else {
        snapshot::recorded_inputs(root)?
    };
    let fs = sysfs::Sysfs::new(root);
    Ok(live::discover_with(&fs, inputs))
}
