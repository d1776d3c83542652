//! sysfs/procfs reading under a configurable root (`root/sys/...`, `root/proc/...`), so the
//! live machine (`/`), a snapshot folder, a snapshot archive held in memory and a hand-made
//! test tree go through the same code.
//!
//! Every path is relative to the root and read through a [`Tree`]: symlinks (sysfs is made of
//! relative ones, `sys/bus/pci/devices/X -> ../../../devices/pci0000:00/X`) are resolved
//! inside the root by topo, never by the kernel, and every file goes through the bounded
//! reader ([`super::read`]) with a cap for its kind.
//!
//! The reader records every path it touches: `snapshot::capture` copies exactly those, so a
//! snapshot holds what discovery reads and nothing else. Unreadable or odd files become
//! warnings; nothing here aborts. In a snapshot replay, files that are refused (not regular,
//! over their cap, behind a link that leaves the tree) are kept as the replay's refusal.

use super::read::{self, Cap, ReadError};
use super::tree::{self, Disk, Tree};
use std::cell::RefCell;
use std::collections::{BTreeMap, BTreeSet};
use std::path::{Component, Path, PathBuf};
use topo_model::BusId;

/// A sysfs/procfs tree: the disk under a root folder, or a snapshot archive in memory.
pub struct Sysfs {
    tree: Box<dyn Tree>,
    /// A snapshot replay: a file that is refused (not a regular file, over its cap, behind a
    /// link that leaves the tree) stops the replay instead of becoming a warning, since
    /// `topo snapshot` never writes one.
    strict: bool,
    /// Keep the paths touched and the bytes read, for a capture.
    record: bool,
    touched: RefCell<BTreeSet<PathBuf>>,
    /// Raw bytes of every file read, so a capture stores what discovery saw.
    contents: RefCell<BTreeMap<PathBuf, Vec<u8>>>,
    /// The first refusal in a strict tree: (member, why).
    refusal: RefCell<Option<(PathBuf, String)>>,
}

impl std::fmt::Debug for Sysfs {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "Sysfs({})", self.tree.origin())
    }
}

/// What one file may hold: /proc/cpuinfo grows with the CPU count, the rest are attributes.
fn cap_for(rel: &Path) -> Cap {
    if rel == Path::new("proc/cpuinfo") {
        read::CPUINFO
    } else {
        read::SYSFS
    }
}

impl Sysfs {
    /// The disk under `root` (the live machine or a test tree): refused files are warnings.
    pub fn new(root: &Path) -> Sysfs {
        Sysfs::with(Box::new(Disk::new(root)), false, true)
    }

    /// A snapshot replay over any tree: refused files stop it ([`Sysfs::refusal`]).
    pub fn replay(tree: Box<dyn Tree>) -> Sysfs {
        Sysfs::with(tree, true, false)
    }

    fn with(tree: Box<dyn Tree>, strict: bool, record: bool) -> Sysfs {
        Sysfs {
            tree,
            strict,
            record,
            touched: RefCell::new(BTreeSet::new()),
            contents: RefCell::new(BTreeMap::new()),
            refusal: RefCell::new(None),
        }
    }

    pub fn tree(&self) -> &dyn Tree {
        &*self.tree
    }

    /// The first file a strict tree refused, as (member path, reason).
    pub fn refusal(&self) -> Option<(PathBuf, String)> {
        self.refusal.borrow().clone()
    }

    /// `rel` as a path a person can find: under the root folder, or inside the archive.
    fn shown(&self, rel: &Path) -> String {
        format!(
            "{}/{}",
            self.tree.origin().trim_end_matches('/'),
            self.tree.member(rel).display()
        )
    }

    /// Relative paths (from the root) of everything read, listed or resolved so far.
    pub fn touched(&self) -> Vec<PathBuf> {
        self.touched.borrow().iter().cloned().collect()
    }

    /// The bytes discovery read from `rel`, if it read that file.
    pub fn content(&self, rel: &Path) -> Option<Vec<u8>> {
        self.contents.borrow().get(rel).cloned()
    }

    fn touch(&self, rel: &Path) {
        if self.record {
            self.touched.borrow_mut().insert(rel.to_path_buf());
        }
    }

    /// Notes a refusal in a strict tree; passes the error on.
    fn check<T>(&self, rel: &Path, r: Result<T, ReadError>) -> Result<T, ReadError> {
        if let Err(e) = &r
            && self.strict
            && e.is_refusal()
        {
            self.refusal
                .borrow_mut()
                .get_or_insert_with(|| (self.tree.member(rel), e.to_string()));
        }
        r
    }

    /// A file's content with the trailing newline removed.
    pub fn read(&self, rel: &Path) -> Result<String, ReadError> {
        self.touch(rel);
        let bytes = self.check(rel, tree::read(&*self.tree, rel, cap_for(rel)))?;
        // Trimmed as bytes: a large file of NULs costs one pass, not one per character.
        let end = bytes
            .iter()
            .rposition(|b| !matches!(b, b'\n' | b'\r' | 0))
            .map_or(0, |i| i + 1);
        let s = String::from_utf8_lossy(&bytes[..end]).into_owned();
        if self.record {
            self.contents.borrow_mut().insert(rel.to_path_buf(), bytes);
        }
        Ok(s)
    }

    /// A file that may legitimately be absent: absent is `None` silently; any other failure
    /// (permission, EIO, a directory where a file should be, a FIFO) is a warning.
    pub fn read_opt(&self, rel: &Path, warnings: &mut Vec<String>) -> Option<String> {
        match self.read(rel) {
            Ok(s) => Some(s),
            Err(e) if e.is_not_found() => None,
            Err(e) => {
                warnings.push(format!("cannot read {}: {e}", rel.display()));
                None
            }
        }
    }

    /// Entry names of a folder, sorted; empty when absent or unreadable. Each entry is recorded
    /// so a capture keeps entries discovery skipped as well (they are skipped again on replay).
    pub fn list(&self, rel: &Path) -> Vec<String> {
        self.touch(rel);
        let Ok(names) = self.check(rel, tree::list(&*self.tree, rel)) else {
            return vec![];
        };
        for n in &names {
            self.touch(&rel.join(n));
        }
        names
    }

    pub fn exists(&self, rel: &Path) -> bool {
        self.touch(rel);
        self.check(rel, tree::canonical(&*self.tree, rel)).is_ok()
    }

    /// The path `rel` resolves to, relative to the root; `None` when it does not exist or
    /// resolves outside the root.
    pub fn canonical(&self, rel: &Path) -> Option<PathBuf> {
        self.touch(rel);
        self.check(rel, tree::canonical(&*self.tree, rel)).ok()
    }

    /// The last component of a symlink's target (`driver -> ../../bus/pci/drivers/nvidia`).
    pub fn link_name(&self, rel: &Path) -> Option<String> {
        self.touch(rel);
        let t = tree::read_link(&*self.tree, rel).ok()?;
        t.file_name().map(|n| n.to_string_lossy().into_owned())
    }
}

/// Parses a path component in the `dddd:bb:dd.f` form (NCCL's BDF check): `pci0000:00` or
/// `virtio2` are not PCI functions. Domains of up to 8 digits are accepted (VMD domains
/// such as `10000:e0:06.0`).
pub fn parse_bdf(s: &str) -> Option<BusId> {
    let b = s.as_bytes();
    let n = b.len();
    if !(12..=16).contains(&n) || b[n - 8] != b':' || b[n - 5] != b':' || b[n - 2] != b'.' {
        return None;
    }
    BusId::parse(s).ok()
}

/// The PCI functions named along a path, outermost first.
pub fn bdf_components(path: &Path) -> Vec<BusId> {
    path.components()
        .filter_map(|c| match c {
            Component::Normal(n) => parse_bdf(&n.to_string_lossy()),
            _ => None,
        })
        .collect()
}

/// One PCI function as sysfs describes it.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct PciFunction {
    pub busid: BusId,
    /// PCI functions above this one in its canonical sysfs path, outermost (root port) first.
    pub ancestors: Vec<BusId>,
    /// The function NCCL takes as this one's parent: two path levels up (a switch's upstream
    /// port, skipping the downstream port the device sits on), or `None` when either of the
    /// two components above is not a PCI function (a root complex: the device hangs off a CPU).
    /// Mirrors the sysfs walk in `ncclTopoGetXmlFromSys` (src/graph/xml.cc, 2.18–2.30).
    pub nccl_parent: Option<BusId>,
    pub class: Option<u32>,
    pub vendor: Option<u16>,
    pub device: Option<u16>,
    pub subsystem_vendor: Option<u16>,
    pub subsystem_device: Option<u16>,
    pub max_link_speed: Option<String>,
    pub max_link_width: Option<u32>,
    pub cur_link_speed: Option<String>,
    pub cur_link_width: Option<u32>,
    /// `None` when sysfs says -1 (unknown) or has no value.
    pub numa_node: Option<i32>,
    pub driver: Option<String>,
}

impl PciFunction {
    /// The function directly above in sysfs (a switch downstream port or root port).
    pub fn upstream_port(&self) -> Option<BusId> {
        self.ancestors.last().copied()
    }
}

#[derive(Clone, Debug, Default, PartialEq)]
pub struct NumaNode {
    pub id: i32,
    pub cpulist: Option<String>,
    pub cpumap: Option<String>,
}

#[derive(Clone, Debug, Default, PartialEq)]
pub struct CpuInfo {
    pub vendor: Option<String>,
    pub family: Option<u32>,
    pub model: Option<u32>,
    pub model_name: Option<String>,
}

#[derive(Clone, Debug, Default, PartialEq)]
pub struct IbPort {
    pub num: u32,
    /// `4: ACTIVE`.
    pub state: Option<String>,
    pub rate_mbps: Option<u64>,
    pub link_layer: Option<String>,
}

impl IbPort {
    pub fn is_active(&self) -> bool {
        self.state
            .as_deref()
            .is_some_and(|s| s.trim_start().starts_with('4') || s.contains("ACTIVE"))
    }
}

#[derive(Clone, Debug, Default, PartialEq)]
pub struct IbDevice {
    pub name: String,
    pub pci: Option<BusId>,
    pub node_guid: Option<u64>,
    pub ports: Vec<IbPort>,
    /// Network interfaces on the same PCI function (`device/net/*`), e.g. RoCE or IPoIB.
    pub netdevs: Vec<String>,
}

#[derive(Clone, Debug, Default, PartialEq)]
pub struct NetInterface {
    pub name: String,
    /// `None` for virtual interfaces (lo, bonds, bridges, veth): no PCI location.
    pub pci: Option<BusId>,
    pub speed_mbps: Option<u64>,
    pub operstate: Option<String>,
    /// 0-based port of the PCI function this interface drives (`dev_port`).
    pub dev_port: Option<u32>,
    /// The interface's device is a bus device below its PCI function (`.../0000:00:03.0/
    /// virtio2`), not the function itself: NCCL's net plugins report that path, and NCCL
    /// attaches such a NIC to the first CPU instead of a PCI node (src/graph/xml.cc
    /// `ncclTopoFillNet`, 2.28.9).
    pub behind_bus: bool,
}

#[derive(Clone, Debug, Default, PartialEq)]
pub struct HostFacts {
    pub hostname: Option<String>,
    pub kernel: Option<String>,
    pub nvidia_driver: Option<String>,
    /// The loaded NVIDIA kernel module is the open one (needed for DMA-BUF).
    pub nvidia_open_module: bool,
    /// nvidia-peermem (or the older nv_peer_mem) is loaded.
    pub peermem: bool,
}

impl HostFacts {
    /// GPUDirect RDMA as far as sysfs can tell. Rule: the peer-memory module is loaded
    /// (`sys/kernel/mm/memory_peers/nv_mem`, `sys/module/nvidia_peermem` or
    /// `sys/module/nv_peer_mem`), or DMA-BUF is possible: kernel 5.12 or newer with the open
    /// NVIDIA kernel module. NCCL decides at run time (`ncclIbGdrSupport`, and a CUDA
    /// DMA-BUF attribute probe), so this is a prediction, not NCCL's answer.
    pub fn gdr(&self) -> bool {
        self.peermem || (self.nvidia_open_module && kernel_at_least(self.kernel.as_deref(), 5, 12))
    }
}

fn kernel_at_least(release: Option<&str>, major: u32, minor: u32) -> bool {
    let Some(r) = release else { return false };
    let mut it = r
        .split(|c: char| !c.is_ascii_digit())
        .filter(|s| !s.is_empty());
    let ma: u32 = it.next().and_then(|s| s.parse().ok()).unwrap_or(0);
    let mi: u32 = it.next().and_then(|s| s.parse().ok()).unwrap_or(0);
    (ma, mi) >= (major, minor)
}

/// Everything discovery reads from sysfs/procfs.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Scan {
    pub pci: BTreeMap<BusId, PciFunction>,
    pub numa: Vec<NumaNode>,
    pub cpu: CpuInfo,
    pub ib: Vec<IbDevice>,
    pub net: Vec<NetInterface>,
    pub host: HostFacts,
    pub warnings: Vec<String>,
}

/// Reads the machine under `fs`'s root.
pub fn scan(fs: &Sysfs) -> Scan {
    let mut s = Scan::default();
    let mut w = Vec::new();
    s.pci = scan_pci(fs, &mut w);
    s.numa = scan_numa(fs, &mut w);
    s.cpu = scan_cpuinfo(fs, &mut w);
    s.ib = scan_ib(fs, &mut w);
    s.net = scan_net(fs, &mut w);
    s.host = scan_host(fs, &mut w);
    s.warnings = w;
    s
}

fn hex_u32(v: &str) -> Option<u32> {
    let t = v.trim();
    let t = t
        .strip_prefix("0x")
        .or_else(|| t.strip_prefix("0X"))
        .unwrap_or(t);
    if t.is_empty() {
        return None;
    }
    u32::from_str_radix(t, 16).ok()
}

fn hex_u16(v: &str) -> Option<u16> {
    hex_u32(v).and_then(|x| u16::try_from(x).ok())
}

/// Reads a value that should parse; an unparsable one is a warning naming the file.
fn parsed<T>(
    fs: &Sysfs,
    rel: &Path,
    w: &mut Vec<String>,
    parse: impl Fn(&str) -> Option<T>,
) -> Option<T> {
    let v = fs.read_opt(rel, w)?;
    match parse(&v) {
        Some(x) => Some(x),
        None => {
            w.push(format!("bad value '{}' in {}", v.trim(), rel.display()));
            None
        }
    }
}

/// A link speed string as sysfs writes it; `Unknown` (link down, virtual device) is no value.
fn speed_string(v: &str) -> Option<String> {
    let t = v.trim();
    if t.is_empty() || t.eq_ignore_ascii_case("unknown") {
        None
    } else {
        Some(t.to_string())
    }
}

fn scan_pci(fs: &Sysfs, w: &mut Vec<String>) -> BTreeMap<BusId, PciFunction> {
    let dir = Path::new("sys/bus/pci/devices");
    let mut out = BTreeMap::new();
    let names = fs.list(dir);
    if names.is_empty() {
        w.push(format!("no PCI devices under {}", fs.shown(dir)));
    }
    for name in names {
        let Some(busid) = parse_bdf(&name) else {
            continue;
        };
        let d = dir.join(&name);
        let (ancestors, nccl_parent) = match fs.canonical(&d) {
            Some(c) => {
                let comps: Vec<Option<BusId>> = c
                    .components()
                    .map(|x| match x {
                        Component::Normal(n) => parse_bdf(&n.to_string_lossy()),
                        _ => None,
                    })
                    .collect();
                let k = comps.len();
                let at = |back: usize| {
                    k.checked_sub(back)
                        .and_then(|i| comps.get(i).copied().flatten())
                };
                let parent = match (at(2), at(3)) {
                    (Some(_), Some(p)) => Some(p),
                    _ => None,
                };
                let mut chain = bdf_components(&c);
                // The function itself is the last component.
                if chain.last() == Some(&busid) {
                    chain.pop();
                }
                (chain, parent)
            }
            None => {
                w.push(format!(
                    "cannot resolve {} inside {}",
                    d.display(),
                    fs.tree.origin()
                ));
                (vec![], None)
            }
        };
        let num = |v: &str| v.trim().parse::<u32>().ok();
        let f = PciFunction {
            busid,
            ancestors,
            nccl_parent,
            class: parsed(fs, &d.join("class"), w, hex_u32),
            vendor: parsed(fs, &d.join("vendor"), w, hex_u16),
            device: parsed(fs, &d.join("device"), w, hex_u16),
            subsystem_vendor: parsed(fs, &d.join("subsystem_vendor"), w, hex_u16),
            subsystem_device: parsed(fs, &d.join("subsystem_device"), w, hex_u16),
            max_link_speed: fs
                .read_opt(&d.join("max_link_speed"), w)
                .and_then(|v| speed_string(&v)),
            max_link_width: parsed(fs, &d.join("max_link_width"), w, num),
            cur_link_speed: fs
                .read_opt(&d.join("current_link_speed"), w)
                .and_then(|v| speed_string(&v)),
            cur_link_width: parsed(fs, &d.join("current_link_width"), w, num),
            numa_node: parsed(fs, &d.join("numa_node"), w, |v| {
                v.trim().parse::<i32>().ok()
            })
            .filter(|&n| n >= 0),
            driver: fs.link_name(&d.join("driver")),
        };
        out.insert(busid, f);
    }
    out
}

fn scan_numa(fs: &Sysfs, w: &mut Vec<String>) -> Vec<NumaNode> {
    let dir = Path::new("sys/devices/system/node");
    let mut out: Vec<NumaNode> = fs
        .list(dir)
        .into_iter()
        .filter_map(|n| {
            let id: i32 = n.strip_prefix("node")?.parse().ok()?;
            let d = dir.join(&n);
            Some(NumaNode {
                id,
                cpulist: fs
                    .read_opt(&d.join("cpulist"), w)
                    .filter(|s| !s.trim().is_empty()),
                cpumap: fs
                    .read_opt(&d.join("cpumap"), w)
                    .filter(|s| !s.trim().is_empty()),
            })
        })
        .collect();
    out.sort_by_key(|n| n.id);
    out
}

fn scan_cpuinfo(fs: &Sysfs, w: &mut Vec<String>) -> CpuInfo {
    let mut c = CpuInfo::default();
    let Some(text) = fs.read_opt(Path::new("proc/cpuinfo"), w) else {
        return c;
    };
    // The first processor block describes them all on the machines NCCL supports.
    for line in text.lines() {
        if line.trim().is_empty() && c.vendor.is_some() {
            break;
        }
        let Some((k, v)) = line.split_once(':') else {
            continue;
        };
        let (k, v) = (k.trim(), v.trim());
        match k {
            "vendor_id" => c.vendor = Some(v.to_string()),
            "cpu family" => c.family = v.parse().ok(),
            "model" => c.model = v.parse().ok(),
            "model name" => c.model_name = Some(v.to_string()),
            _ => {}
        }
    }
    c
}

/// `400 Gb/sec (4X NDR)` → 400000 Mbit/s.
fn parse_rate(v: &str) -> Option<u64> {
    let t = v.trim();
    let num: String = t
        .chars()
        .take_while(|c| c.is_ascii_digit() || *c == '.')
        .collect();
    let gbps: f64 = num.parse().ok()?;
    if !t[num.len()..].trim_start().starts_with("Gb/s") {
        return None;
    }
    Some((gbps * 1000.0).round() as u64)
}

/// `a87c:b100:03e1:a258` → 0xa87cb10003e1a258.
fn parse_guid(v: &str) -> Option<u64> {
    let hex: String = v.trim().chars().filter(|c| *c != ':').collect();
    if hex.is_empty() || hex.len() > 16 {
        return None;
    }
    u64::from_str_radix(&hex, 16).ok()
}

/// The PCI function a class device (`sys/class/*/X/device`) belongs to: the last BDF in its
/// canonical path (a net interface's `device` may be a virtio device under the function).
fn pci_of(fs: &Sysfs, rel: &Path) -> Option<BusId> {
    fs.canonical(rel)
        .and_then(|c| bdf_components(&c).last().copied())
}

fn scan_ib(fs: &Sysfs, w: &mut Vec<String>) -> Vec<IbDevice> {
    let dir = Path::new("sys/class/infiniband");
    let mut out = Vec::new();
    for name in fs.list(dir) {
        let d = dir.join(&name);
        let mut ports = Vec::new();
        let mut port_names = fs.list(&d.join("ports"));
        port_names.sort_by_key(|p| p.parse::<u32>().unwrap_or(u32::MAX));
        for p in port_names {
            let Ok(num) = p.parse::<u32>() else { continue };
            let pd = d.join("ports").join(&p);
            ports.push(IbPort {
                num,
                state: fs.read_opt(&pd.join("state"), w),
                rate_mbps: parsed(fs, &pd.join("rate"), w, parse_rate),
                link_layer: fs.read_opt(&pd.join("link_layer"), w),
            });
        }
        out.push(IbDevice {
            pci: pci_of(fs, &d.join("device")),
            node_guid: parsed(fs, &d.join("node_guid"), w, parse_guid),
            ports,
            netdevs: fs.list(&d.join("device").join("net")),
            name,
        });
    }
    out
}

fn scan_net(fs: &Sysfs, w: &mut Vec<String>) -> Vec<NetInterface> {
    let dir = Path::new("sys/class/net");
    let mut out = Vec::new();
    for name in fs.list(dir) {
        let d = dir.join(&name);
        let device = fs.canonical(&d.join("device"));
        let pci = device
            .as_deref()
            .and_then(|c| bdf_components(c).last().copied());
        let behind_bus = device
            .as_deref()
            .and_then(|c| c.file_name())
            .is_some_and(|f| parse_bdf(&f.to_string_lossy()).is_none());
        if pci.is_none() {
            // Virtual interface: no PCI location, nothing more to read.
            out.push(NetInterface {
                name,
                ..Default::default()
            });
            continue;
        }
        // `speed` fails with EINVAL on a down link; that is "unknown", not an odd file.
        let speed_mbps = fs
            .read(&d.join("speed"))
            .ok()
            .and_then(|v| v.trim().parse::<i64>().ok())
            .and_then(|s| u64::try_from(s).ok())
            .filter(|&s| s > 0);
        out.push(NetInterface {
            pci,
            speed_mbps,
            operstate: fs.read_opt(&d.join("operstate"), w),
            dev_port: fs
                .read(&d.join("dev_port"))
                .ok()
                .and_then(|v| v.trim().parse().ok()),
            behind_bus,
            name,
        });
    }
    out
}

fn scan_host(fs: &Sysfs, w: &mut Vec<String>) -> HostFacts {
    let nonempty = |s: Option<String>| s.map(|x| x.trim().to_string()).filter(|x| !x.is_empty());
    let hostname = nonempty(fs.read_opt(Path::new("proc/sys/kernel/hostname"), w));
    let kernel = nonempty(fs.read_opt(Path::new("proc/sys/kernel/osrelease"), w));
    let proc_version = fs.read_opt(Path::new("proc/driver/nvidia/version"), w);
    let nvidia_driver = proc_version
        .as_deref()
        .and_then(driver_from_proc)
        .or_else(|| nonempty(fs.read_opt(Path::new("sys/module/nvidia/version"), w)));
    let nvidia_open_module = proc_version
        .as_deref()
        .is_some_and(|v| v.contains("Open Kernel Module"));
    let peermem = [
        "sys/kernel/mm/memory_peers/nv_mem/version",
        "sys/module/nvidia_peermem",
        "sys/module/nv_peer_mem",
    ]
    .iter()
    .any(|p| fs.exists(Path::new(p)));
    HostFacts {
        hostname,
        kernel,
        nvidia_driver,
        nvidia_open_module,
        peermem,
    }
}

/// `NVRM version: NVIDIA UNIX x86_64 Kernel Module  535.161.07  Thu Feb ...` → `535.161.07`.
fn driver_from_proc(text: &str) -> Option<String> {
    let line = text.lines().find(|l| l.starts_with("NVRM version"))?;
    line.split_whitespace()
        .find(|t| {
            t.contains('.')
                && t.chars().all(|c| c.is_ascii_digit() || c == '.')
                && t.starts_with(|c: char| c.is_ascii_digit())
        })
        .map(str::to_string)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn bdf_components_skip_non_functions() {
        let p =
            Path::new("sys/devices/pci0000:15/0000:15:01.0/0000:16:00.0/0000:17:00.0/0000:18:00.0");
        let v = bdf_components(p);
        assert_eq!(v.len(), 4);
        assert_eq!(v[0].to_string(), "0000:15:01.0");
        assert_eq!(v[3].to_string(), "0000:18:00.0");
        assert!(parse_bdf("pci0000:15").is_none());
        assert!(parse_bdf("15:01.0").is_none());
        assert_eq!(
            parse_bdf("10000:e0:06.0").unwrap().to_string(),
            "10000:e0:06.0"
        );
        let net = Path::new("sys/devices/pci0000:00/0000:00:03.0/virtio2");
        assert_eq!(
            bdf_components(net).last().unwrap().to_string(),
            "0000:00:03.0"
        );
    }

    #[test]
    fn value_parsers() {
        assert_eq!(parse_rate("400 Gb/sec (4X NDR)"), Some(400_000));
        assert_eq!(parse_rate("2.5 Gb/sec (1X SDR)"), Some(2_500));
        assert_eq!(parse_rate("fast"), None);
        assert_eq!(
            parse_guid("a87c:b100:03e1:a258"),
            Some(0xa87c_b100_03e1_a258)
        );
        assert_eq!(parse_guid(""), None);
        assert_eq!(hex_u32("0x030200"), Some(0x030200));
        assert_eq!(hex_u16("0x10de"), Some(0x10de));
        assert_eq!(hex_u16("0x10de0"), None);
        assert_eq!(
            driver_from_proc(
                "NVRM version: NVIDIA UNIX x86_64 Kernel Module  535.161.07  Thu Feb 29 2024\nGCC version: gcc 12"
            ),
            Some("535.161.07".to_string())
        );
        assert!(kernel_at_least(Some("6.8.0-45-generic"), 5, 12));
        assert!(!kernel_at_least(Some("5.4.0"), 5, 12));
        assert!(!kernel_at_least(None, 5, 12));
    }

    #[test]
    fn ib_port_state() {
        let p = IbPort {
            state: Some("4: ACTIVE".into()),
            ..Default::default()
        };
        assert!(p.is_active());
        let p = IbPort {
            state: Some("1: DOWN".into()),
            ..Default::default()
        };
        assert!(!p.is_active());
    }
}
