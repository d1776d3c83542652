//! Reader for NCCL topology XML (NCCL_TOPO_FILE inputs and NCCL_TOPO_DUMP_FILE outputs).
//!
//! Two steps: [`tree`] turns the text into a generic element tree with positions, then
//! [`Builder`] converts the tree into the hardware model the way NCCL's
//! `ncclTopoGetSystemFromXml` (`src/graph/topo.cc`, 2.18–2.30) reads it: CPUs first with
//! their PCI trees, then NVLink, C2C and `pcilink` entries once every device exists, then
//! inter-CPU links.
//!
//! Files written by hand or by cloud vendors are often incomplete (skeletons without `<gpu>`,
//! empty link speeds, NVSwitch hidden behind `fffffff:ff:ff.0`): anything NCCL itself would
//! tolerate or fill in at run time becomes a warning on the topology, never an abort. Only
//! text that is not XML, or a format version NCCL rejects, is an error.

pub mod tree;
mod writer;

pub use writer::write;

use crate::error::{self, ErrorKind};
use anyhow::Result;
use petgraph::graph::NodeIndex;
use std::collections::{BTreeMap, BTreeSet, HashMap, HashSet};
use std::path::Path;
use topo_model::net_kind;
use topo_model::{
    BusId, BwConstants, C2cInfo, Cpu, Gpu, HostId, Link, LinkKind, Net, Nic, NodeKind, NvSwitch,
    NvlinkInfo, PciDevice, PciSwitch, PcieLink, SourceInfo, Topology, bw, class,
};
use tree::{Element, Pos};

/// Real topology files are a few KiB; anything this large is not one.
const MAX_FILE_BYTES: u64 = 64 << 20;
const XML_CAP: super::read::Cap = super::read::Cap {
    bytes: MAX_FILE_BYTES,
    what: "a topology XML",
};

/// More NVLink lanes than this to one target is not hardware (the most any GPU has is 18).
/// NVML's answers (`nvml.json`) are held to the same bound.
pub(crate) const MAX_NVLINK_COUNT: u32 = 1024;

/// More than this per C2C link (MB/s) is not hardware (Grace Hopper: about 45 000).
const MAX_C2C_LINK_MBPS: u64 = 1_000_000;

/// Why a GPU listed only by its PCI class has no NVLink information.
pub const SKELETON_NVLINK_REASON: &str =
    "the file lists this GPU by PCI class only; NCCL fills NVLink at run time";

/// Why a GPU with a `<gpu>` entry but no `<nvlink>` in a hand-written file is not "no NVLink".
pub const HANDWRITTEN_NVLINK_REASON: &str = "the file lists no NVLink for this GPU and was not written by NCCL \
     (no PCI vendor/device ids); NCCL detects NVLink at run time for a GPU without <nvlink> entries";

/// Why a GPU with PCI ids but neither `sm` nor `<nvlink>` is not "no NVLink".
pub const TRIMMED_NVLINK_REASON: &str = "the file lists neither sm nor NVLink for this GPU, which NCCL writes for every GPU it dumps, so it was trimmed or written by hand; NCCL detects NVLink at run time for a GPU without <nvlink> entries";

/// Reads and converts an NCCL topology XML file.
pub fn load_file(path: &Path) -> Result<Topology> {
    let unreadable = |reason: String| {
        error::fail(
            ErrorKind::NcclXml,
            format!("cannot read {}: {reason}", path.display()),
        )
    };
    let bytes = match super::read::file(path, XML_CAP) {
        Ok(b) => b,
        Err(super::read::ReadError::TooLarge(_)) => {
            let len = std::fs::metadata(path).map(|m| m.len()).unwrap_or(0);
            return Err(unreadable(format!(
                "{len} bytes is too large for a topology XML"
            )));
        }
        Err(e) => return Err(unreadable(e.to_string())),
    };
    let origin = path.display().to_string();
    let text = tree::decode_utf8(&bytes).map_err(|e| syntax_error(&origin, e.pos, &e.msg))?;
    parse_str(text, &origin)
}

/// Converts NCCL topology XML text; `origin` names the text in errors and in `topo.source`.
pub fn parse_str(text: &str, origin: &str) -> Result<Topology> {
    let doc = tree::parse(text).map_err(|e| syntax_error(origin, e.pos, &e.msg))?;
    let mut b = Builder::new(origin);
    for w in doc.warnings {
        b.topo.warn(w);
    }
    b.topo.source.cut = doc.cut.map(|p| p.to_string());
    let mut system: Option<&Element> = None;
    for root in &doc.roots {
        if root.name == "system" && system.is_none() {
            system = Some(root);
        } else {
            b.warn_at(
                root.pos,
                format!(
                    "ignoring top-level <{}> (only the first <system> is read)",
                    root.name
                ),
            );
        }
    }
    let Some(system) = system else {
        if text.trim().is_empty() {
            return Err(syntax_error(origin, Pos { line: 1, col: 1 }, "empty file"));
        }
        let end = tree::pos_at(text, text.len());
        let what = if doc.roots.is_empty() {
            "no elements, only comments or declarations"
        } else {
            "no <system> element"
        };
        return Err(syntax_error(origin, end, what));
    };
    match system.attr("version") {
        Some(v) if strtol(v).map(|(n, _)| n) == Some(1) => {}
        Some(v) => {
            return Err(syntax_error(
                origin,
                system.pos,
                &format!("<system version=\"{v}\"> is not supported (NCCL reads version 1 only)"),
            ));
        }
        None => {
            return Err(syntax_error(
                origin,
                system.pos,
                "<system> has no version attribute (NCCL requires version=\"1\")",
            ));
        }
    }
    b.system(system);
    let topo = b.finish();
    if let Some(at) = doc.cut.filter(|_| topo.gpus().is_empty()) {
        return Err(error::fail(
            ErrorKind::CutFile,
            format!(
                "cannot parse {origin}: {at}: the file is cut here, before its first complete GPU"
            ),
        ));
    }
    Ok(topo)
}

fn syntax_error(origin: &str, pos: Pos, msg: &str) -> anyhow::Error {
    error::fail(
        ErrorKind::NcclXml,
        format!("cannot parse {origin}: {pos}: {msg}"),
    )
}

/// C `strtol(s, &end, 0)`: optional sign, `0x` hex, leading-`0` octal, else decimal. Returns
/// the value (saturated like strtol) and the unparsed rest, or `None` when no digit was read.
pub fn strtol(s: &str) -> Option<(i64, &str)> {
    let t = s.trim_start();
    let (neg, t) = match t.as_bytes().first() {
        Some(b'-') => (true, &t[1..]),
        Some(b'+') => (false, &t[1..]),
        _ => (false, t),
    };
    let (radix, digits) = if (t.starts_with("0x") || t.starts_with("0X"))
        && t.as_bytes().get(2).is_some_and(|b| b.is_ascii_hexdigit())
    {
        (16, &t[2..])
    } else if t.starts_with('0') {
        (8, t)
    } else {
        (10, t)
    };
    let (v, rest) = accumulate(digits, radix)?;
    let v = if neg {
        v.checked_neg().unwrap_or(i64::MIN)
    } else {
        v
    };
    Some((v, rest))
}

/// Hex as NCCL reads `guid` and `host_hash` (`strtoull(s, NULL, 16)`): an optional `0x` prefix,
/// then hex digits; values beyond 64 bits saturate, as strtoull does.
pub fn strtoull_hex(s: &str) -> Option<(u64, &str)> {
    let t = s.trim_start();
    let t = t.strip_prefix('+').unwrap_or(t);
    let t = if (t.starts_with("0x") || t.starts_with("0X"))
        && t.as_bytes().get(2).is_some_and(|b| b.is_ascii_hexdigit())
    {
        &t[2..]
    } else {
        t
    };
    let n = t.bytes().take_while(|b| b.is_ascii_hexdigit()).count();
    if n == 0 {
        return None;
    }
    let mut v: u64 = 0;
    for b in t[..n].bytes() {
        let d = (b as char).to_digit(16).unwrap_or(0) as u64;
        v = v
            .checked_mul(16)
            .and_then(|x| x.checked_add(d))
            .unwrap_or(u64::MAX);
    }
    Some((v, &t[n..]))
}

fn accumulate(digits: &str, radix: u32) -> Option<(i64, &str)> {
    let n = digits.chars().take_while(|c| c.is_digit(radix)).count();
    if n == 0 {
        return None;
    }
    let mut v: i64 = 0;
    for c in digits[..n].chars() {
        let d = c.to_digit(radix).unwrap_or(0) as i64;
        v = v
            .checked_mul(radix as i64)
            .and_then(|x| x.checked_add(d))
            .unwrap_or(i64::MAX);
    }
    Some((v, &digits[n..]))
}

/// C `strtod`: the longest leading decimal number; `None` when there is none.
pub fn strtod(s: &str) -> Option<(f64, &str)> {
    let t = s.trim_start();
    let b = t.as_bytes();
    let mut i = 0;
    if matches!(b.first(), Some(b'+' | b'-')) {
        i += 1;
    }
    let int_start = i;
    while b.get(i).is_some_and(u8::is_ascii_digit) {
        i += 1;
    }
    let mut digits = i - int_start;
    if b.get(i) == Some(&b'.') {
        let frac_start = i + 1;
        let mut j = frac_start;
        while b.get(j).is_some_and(u8::is_ascii_digit) {
            j += 1;
        }
        digits += j - frac_start;
        if digits > 0 {
            i = j;
        }
    }
    if digits == 0 {
        return None;
    }
    if matches!(b.get(i), Some(b'e' | b'E')) {
        let mut j = i + 1;
        if matches!(b.get(j), Some(b'+' | b'-')) {
            j += 1;
        }
        let exp_start = j;
        while b.get(j).is_some_and(u8::is_ascii_digit) {
            j += 1;
        }
        if j > exp_start {
            i = j;
        }
    }
    let v: f64 = t[..i].parse().ok()?;
    v.is_finite().then_some((v, &t[i..]))
}

/// The CPU list (`0-23,48-71`) of an NCCL `affinity` mask (sysfs `cpumap`: comma-separated
/// 32-bit hex words, most significant first); `None` when the mask is malformed or empty.
pub fn affinity_to_cpulist(mask: &str) -> Option<String> {
    let words: Vec<&str> = mask.trim().split(',').collect();
    let mut cpus: Vec<usize> = Vec::new();
    for (k, w) in words.iter().rev().enumerate() {
        let w = w.trim();
        if w.is_empty() || w.len() > 8 {
            return None;
        }
        let bits = u32::from_str_radix(w, 16).ok()?;
        cpus.extend((0..32).filter(|b| bits >> b & 1 == 1).map(|b| k * 32 + b));
    }
    let mut ranges: Vec<String> = Vec::new();
    let mut i = 0;
    while let Some(&start) = cpus.get(i) {
        let mut end = start;
        while cpus.get(i + 1) == Some(&(end + 1)) {
            end += 1;
            i += 1;
        }
        ranges.push(if start == end {
            start.to_string()
        } else {
            format!("{start}-{end}")
        });
        i += 1;
    }
    (!ranges.is_empty()).then(|| ranges.join(","))
}

/// An `<nvlink>`, `<c2c>` or `<pcilink>` entry waiting for every device to exist.
struct Pending<'a> {
    from: NodeIndex,
    el: &'a Element,
}

/// Converts one document into a [`Topology`], collecting warnings.
struct Builder<'a> {
    topo: Topology,
    /// `host_hash` per host id, in order of first appearance (`None`: a `<cpu>` without one).
    host_keys: Vec<Option<u64>>,
    cpus: HashMap<(HostId, i32), NodeIndex>,
    nvlinks: Vec<Pending<'a>>,
    c2cs: Vec<Pending<'a>>,
    pcilinks: Vec<Pending<'a>>,
    nvswitches: HashMap<(HostId, Option<BusId>), NodeIndex>,
    nets_seen: HashSet<(HostId, String)>,
    skeleton_gpus: usize,
    skeleton_nics: usize,
    /// Skeleton NICs (class 0x02xx, no `<nic>`), in file order: the candidates for assumed
    /// ports (`skeleton_ports`).
    skeleton_net: Vec<NodeIndex>,
    /// GPUs with a `<gpu>` entry but no `<nvlink>` in a file NCCL did not write.
    handwritten_no_nvlink: usize,
    /// GPUs with PCI ids but neither `sm` nor `<nvlink>`: a dump trimmed by hand.
    trimmed_no_nvlink: usize,
    /// Devices whose link speed is empty or width 0 / empty (virtual machines).
    unknown_pcie: usize,
    /// Speed strings NCCL's table does not know (it then uses Gen3).
    odd_speeds: BTreeSet<String>,
    /// The GPU that first claimed each (host, `dev`).
    gpu_devs: HashMap<(HostId, i32), BusId>,
}

/// Children of a `<pci>` sorted by what they are.
#[derive(Default)]
struct PciParts<'a> {
    gpus: Vec<&'a Element>,
    nics: Vec<&'a Element>,
    pcis: Vec<&'a Element>,
    pcilinks: Vec<&'a Element>,
}

impl<'a> Builder<'a> {
    fn new(origin: &str) -> Builder<'a> {
        Builder {
            topo: Topology::new(SourceInfo {
                kind: topo_model::SourceKind::Xml,
                origin: Some(origin.to_string()),
                ..Default::default()
            }),
            host_keys: Vec::new(),
            cpus: HashMap::new(),
            nvlinks: Vec::new(),
            c2cs: Vec::new(),
            pcilinks: Vec::new(),
            nvswitches: HashMap::new(),
            nets_seen: HashSet::new(),
            skeleton_gpus: 0,
            skeleton_nics: 0,
            skeleton_net: Vec::new(),
            handwritten_no_nvlink: 0,
            trimmed_no_nvlink: 0,
            unknown_pcie: 0,
            odd_speeds: BTreeSet::new(),
            gpu_devs: HashMap::new(),
        }
    }

    fn warn_at(&mut self, pos: Pos, msg: impl AsRef<str>) {
        self.topo
            .warn(format!("line {}: {}", pos.line, msg.as_ref()));
    }

    fn ignore(&mut self, el: &Element, inside: &str) {
        self.warn_at(
            el.pos,
            format!("ignoring <{}> inside <{inside}> and its contents", el.name),
        );
    }

    // ---- attribute readers: absent or empty → None; garbage → None with a warning ----

    fn int(&mut self, el: &Element, key: &str) -> Option<i64> {
        let raw = el.attr(key)?;
        if raw.trim().is_empty() {
            return None;
        }
        match strtol(raw) {
            Some((v, rest)) => {
                if !rest.trim().is_empty() {
                    self.warn_at(
                        el.pos,
                        format!(
                            "<{}> {key}=\"{raw}\" has trailing text; read as {v} like NCCL",
                            el.name
                        ),
                    );
                }
                Some(v)
            }
            None => {
                self.warn_at(
                    el.pos,
                    format!("<{}> {key}=\"{raw}\" is not a number; ignored", el.name),
                );
                None
            }
        }
    }

    fn int_as<T: TryFrom<i64>>(&mut self, el: &Element, key: &str) -> Option<T> {
        let v = self.int(el, key)?;
        match T::try_from(v) {
            Ok(x) => Some(x),
            Err(_) => {
                // Quote the file: `v` is already saturated like strtol's result.
                let raw = el.attr(key).unwrap_or_default();
                self.warn_at(
                    el.pos,
                    format!("<{}> {key}=\"{raw}\" is out of range; ignored", el.name),
                );
                None
            }
        }
    }

    fn hex64(&mut self, el: &Element, key: &str) -> Option<u64> {
        let raw = el.attr(key)?;
        if raw.trim().is_empty() {
            return None;
        }
        match strtoull_hex(raw) {
            Some((v, rest)) => {
                if !rest.trim().is_empty() {
                    self.warn_at(
                        el.pos,
                        format!(
                            "<{}> {key}=\"{raw}\" has trailing text; read as {v:#x}",
                            el.name
                        ),
                    );
                }
                Some(v)
            }
            None => {
                self.warn_at(
                    el.pos,
                    format!("<{}> {key}=\"{raw}\" is not a hex number; ignored", el.name),
                );
                None
            }
        }
    }

    fn float(&mut self, el: &Element, key: &str) -> Option<f64> {
        let raw = el.attr(key)?;
        if raw.trim().is_empty() {
            return None;
        }
        let v = strtod(raw).map(|(v, _)| v);
        if v.is_none() {
            self.warn_at(
                el.pos,
                format!("<{}> {key}=\"{raw}\" is not a number; ignored", el.name),
            );
        }
        v
    }

    fn text(el: &Element, key: &str) -> Option<String> {
        el.attr(key).map(str::to_string)
    }

    // ---- first pass: CPUs and their PCI trees ----

    fn system(&mut self, system: &'a Element) {
        let mut ncpu = 0;
        for el in &system.children {
            match el.name.as_str() {
                "cpu" => {
                    ncpu += 1;
                    self.cpu(el);
                }
                _ => self.ignore(el, "system"),
            }
        }
        if ncpu == 0 {
            self.warn_at(
                system.pos,
                "<system> has no <cpu> elements: the topology is empty",
            );
        }
        self.resolve();
    }

    fn host_of(&mut self, el: &Element) -> HostId {
        let hash = self.hex64(el, "host_hash");
        let id = match self.host_keys.iter().position(|k| *k == hash) {
            Some(i) => i,
            None => {
                self.host_keys.push(hash);
                self.host_keys.len() - 1
            }
        };
        HostId::try_from(id).unwrap_or(HostId::MAX)
    }

    fn cpu(&mut self, el: &'a Element) {
        let host = self.host_of(el);
        let numa = match self.int_as::<i32>(el, "numaid") {
            Some(n) => n,
            None => {
                if el.attr("numaid").is_none() {
                    self.warn_at(el.pos, "<cpu> has no numaid (NCCL requires one); using -1");
                }
                -1
            }
        };
        let node = match self.cpus.get(&(host, numa)) {
            Some(&n) => {
                self.warn_at(
                    el.pos,
                    format!("<cpu numaid=\"{numa}\"> appears again for the same host; merged"),
                );
                n
            }
            None => {
                let cpu = Cpu {
                    numa,
                    affinity: Self::text(el, "affinity"),
                    cpus: el.attr("affinity").and_then(affinity_to_cpulist),
                    arch: Self::text(el, "arch"),
                    vendor: Self::text(el, "vendor"),
                    family: self.int_as(el, "familyid"),
                    model: self.int_as(el, "modelid"),
                    host_hash: self.host_keys.get(host as usize).copied().flatten(),
                    ..Default::default()
                };
                if cpu.arch.is_some() && cpu.arch() == topo_model::CpuArch::Other {
                    let arch = cpu.arch.as_deref().unwrap_or_default();
                    self.warn_at(
                        el.pos,
                        format!(
                            "<cpu arch=\"{arch}\"> is not one NCCL knows (x86_64, arm64, ppc64): \
                             NCCL treats the CPU as unknown (inter-CPU bandwidth 5000 GB/s); \
                             write arch=\"{}\" if that is what it is",
                            topo_model::nccl_arch(arch)
                        ),
                    );
                }
                let n = self.topo.add_node(host, None, NodeKind::Cpu(cpu));
                if let Some(h) = self.topo.hosts.get_mut(host as usize) {
                    h.host_hash = self.host_keys.get(host as usize).copied().flatten();
                }
                self.cpus.insert((host, numa), n);
                n
            }
        };
        for child in &el.children {
            match child.name.as_str() {
                "pci" => self.pci(child, node),
                "nic" => self.nic_without_pci(child, node),
                _ => self.ignore(child, "cpu"),
            }
        }
    }

    fn pcie(&mut self, el: &Element) -> PcieLink {
        let speed = Self::text(el, "link_speed");
        let width_raw = el.attr("link_width");
        let width = self.int_as::<u32>(el, "link_width");
        let speed_unknown = speed.as_deref().is_some_and(|s| s.trim().is_empty());
        let width_unknown = width == Some(0) || width_raw.is_some_and(|w| w.trim().is_empty());
        if speed_unknown || width_unknown {
            self.unknown_pcie += 1;
        }
        if let Some(s) = speed.as_deref().filter(|s| !s.trim().is_empty())
            && bw::pcie_lane_value(s).is_none()
        {
            self.odd_speeds.insert(s.to_string());
        }
        PcieLink::new(speed.as_deref(), width)
    }

    fn pci(&mut self, el: &'a Element, parent: NodeIndex) {
        let host = self.topo.node(parent).host;
        let busid = match el.attr("busid").map(BusId::parse) {
            Some(Ok(b)) => b,
            Some(Err(e)) => {
                self.warn_at(
                    el.pos,
                    format!("<pci> has a {e}; ignored with its contents"),
                );
                return;
            }
            None => {
                self.warn_at(el.pos, "<pci> has no busid; ignored with its contents");
                return;
            }
        };
        if self.topo.find(host, busid).is_some() {
            self.warn_at(
                el.pos,
                format!("<pci busid=\"{busid}\"> appears twice; the second one is ignored"),
            );
            return;
        }
        let class = self.int(el, "class").and_then(|c| u32::try_from(c).ok());
        let ids = [
            self.int_as::<u16>(el, "vendor"),
            self.int_as::<u16>(el, "device"),
            self.int_as::<u16>(el, "subsystem_vendor"),
            self.int_as::<u16>(el, "subsystem_device"),
        ];
        let pcie = self.pcie(el);

        let mut parts = PciParts::default();
        for child in &el.children {
            match child.name.as_str() {
                "gpu" => parts.gpus.push(child),
                "nic" => parts.nics.push(child),
                "pci" => parts.pcis.push(child),
                "pcilink" => parts.pcilinks.push(child),
                _ => self.ignore(child, "pci"),
            }
        }

        let node = if let Some(&first) = parts.gpus.first() {
            if parts.gpus.len() > 1 {
                self.warn_at(
                    el.pos,
                    format!("<pci busid=\"{busid}\"> has {} <gpu> entries (several ranks on one GPU); the first is used", parts.gpus.len()),
                );
            }
            for nic in &parts.nics {
                self.ignore(nic, "pci of a GPU");
            }
            self.gpu(first, parent, busid, class, ids, pcie)
        } else if !parts.nics.is_empty() {
            let nic = Nic {
                busid: Some(busid),
                class: self.class_or(el, class, class::ETHERNET, "network"),
                vendor: ids[0],
                device: ids[1],
                subsystem_vendor: ids[2],
                subsystem_device: ids[3],
                pcie,
            };
            let n = self.topo.add_child(parent, NodeKind::Nic(nic));
            for nic_el in &parts.nics {
                self.nets(nic_el, n);
            }
            n
        } else if class.is_some_and(class::is_nvswitch) {
            // An NVSwitch listed as a PCI function: it joins the NVLink fabric, not the PCI tree.
            for child in &el.children {
                self.ignore(child, "pci of an NVSwitch");
            }
            let sw = NvSwitch {
                busid: Some(busid),
                vendor: ids[0],
                device: ids[1],
            };
            let n = self.topo.add_node(host, None, NodeKind::NvSwitch(sw));
            self.nvswitches.insert((host, Some(busid)), n);
            return;
        } else if !parts.pcis.is_empty()
            || !parts.pcilinks.is_empty()
            || class.is_some_and(class::is_bridge)
        {
            let sw = PciSwitch {
                busid,
                class: self.class_or(el, class, class::BRIDGE, "PCI bridge"),
                vendor: ids[0],
                device: ids[1],
                subsystem_vendor: ids[2],
                subsystem_device: ids[3],
                pcie,
            };
            self.topo.add_child(parent, NodeKind::PciSwitch(sw))
        } else if class.is_some_and(class::is_gpu) {
            self.skeleton_gpus += 1;
            let mut g = Gpu::new(busid, -1);
            g.class = class.unwrap_or(g.class);
            g.vendor = ids[0];
            g.device = ids[1];
            g.subsystem_vendor = ids[2];
            g.subsystem_device = ids[3];
            g.pcie = pcie;
            g.nvlink = NvlinkInfo::Unknown(SKELETON_NVLINK_REASON.into());
            self.topo.add_child(parent, NodeKind::gpu(g))
        } else if class.is_some_and(class::is_network) {
            self.skeleton_nics += 1;
            let nic = Nic {
                busid: Some(busid),
                class: class.unwrap_or(class::ETHERNET),
                vendor: ids[0],
                device: ids[1],
                subsystem_vendor: ids[2],
                subsystem_device: ids[3],
                pcie,
            };
            let n = self.topo.add_child(parent, NodeKind::Nic(nic));
            self.skeleton_net.push(n);
            n
        } else {
            // NCCL drops these; the model keeps the hardware (the writer trims them again).
            if class.is_none() {
                self.warn_at(el.pos, format!("<pci busid=\"{busid}\"> has no class and no contents; kept as an unknown PCI device"));
            }
            let dev = PciDevice {
                busid,
                class: class.unwrap_or(0),
                vendor: ids[0],
                device: ids[1],
                driver: None,
                pcie,
            };
            self.topo.add_child(parent, NodeKind::PciDevice(dev))
        };
        for p in parts.pcilinks {
            if matches!(self.topo.node(node).kind, NodeKind::PciSwitch(_)) {
                self.pcilinks.push(Pending { from: node, el: p });
            } else {
                self.ignore(p, "pci that is not a switch");
            }
        }
        for p in parts.pcis {
            self.pci(p, node);
        }
    }

    fn class_or(&mut self, el: &Element, class: Option<u32>, default: u32, what: &str) -> u32 {
        class.unwrap_or_else(|| {
            self.warn_at(
                el.pos,
                format!("<pci> has no class; taken as a {what} ({default:#08x}) from its contents"),
            );
            default
        })
    }

    fn gpu(
        &mut self,
        gpu_el: &'a Element,
        parent: NodeIndex,
        busid: BusId,
        class: Option<u32>,
        ids: [Option<u16>; 4],
        pcie: PcieLink,
    ) -> NodeIndex {
        let mut g = Gpu::new(busid, self.int_as(gpu_el, "dev").unwrap_or(-1));
        if let Some(c) = class {
            g.class = c;
        }
        g.vendor = ids[0];
        g.device = ids[1];
        g.subsystem_vendor = ids[2];
        g.subsystem_device = ids[3];
        g.pcie = pcie;
        g.sm = self.int_as(gpu_el, "sm");
        if g.sm == Some(0) {
            // No GPU has compute capability 0; showing "0.0" would pass it off as data.
            self.warn_at(
                gpu_el.pos,
                format!("GPU {busid}: <gpu> sm=\"0\" is not a compute capability; ignored"),
            );
            g.sm = None;
        }
        let host = self.topo.node(parent).host;
        if g.dev >= 0 {
            match self.gpu_devs.get(&(host, g.dev)) {
                Some(first) => {
                    let msg = format!(
                        "GPU {busid}: <gpu> dev=\"{}\" is also GPU {first}'s; NCCL numbers GPUs uniquely, so the file was edited",
                        g.dev
                    );
                    self.warn_at(gpu_el.pos, msg);
                }
                None => {
                    self.gpu_devs.insert((host, g.dev), busid);
                }
            }
        }
        g.rank = self.int_as(gpu_el, "rank");
        g.gdr = self.int(gpu_el, "gdr").map(|v| v != 0);
        let mut has_nvlink = false;
        let mut c2c: Option<&'a Element> = None;
        let mut entries: Vec<&'a Element> = Vec::new();
        for child in &gpu_el.children {
            match child.name.as_str() {
                "nvlink" => {
                    has_nvlink = true;
                    entries.push(child);
                }
                "c2c" if c2c.is_none() => c2c = Some(child),
                "c2c" => self.warn_at(child.pos, "a second <c2c> for the same GPU is ignored"),
                _ => self.ignore(child, "gpu"),
            }
        }
        // NCCL probes NVML for NVLink only when a GPU has no <nvlink> at all
        // (ncclTopoGetXmlFromGpu, src/graph/xml.cc, all versions). In a dump (which always
        // carries vendor/device ids) no entry means no NVLink; in a hand-written file it means
        // "found at run time".
        if !has_nvlink && ids[0].is_none() && ids[1].is_none() {
            g.nvlink = NvlinkInfo::Unknown(HANDWRITTEN_NVLINK_REASON.into());
            self.handwritten_no_nvlink += 1;
        } else if !has_nvlink && g.sm.is_none() {
            // NCCL writes `sm` on every GPU it dumps (ncclTopoGetXmlFromGpu, src/graph/xml.cc,
            // 2.7 to 2.28), so a GPU without it was trimmed or written by hand, and its missing
            // <nvlink> entries are NCCL's to find at run time, not a statement of none. The
            // model its PCI id suggests is named as a guess, never as the reason for "none".
            let guess = topo_model::stated::model_by_pci_id(ids[0], ids[1])
                .map(|m| {
                    format!(
                        "; its PCI id suggests {} (a guess: one id can be several boards)",
                        m.name
                    )
                })
                .unwrap_or_default();
            g.nvlink = NvlinkInfo::Unknown(format!("{TRIMMED_NVLINK_REASON}{guess}"));
            self.trimmed_no_nvlink += 1;
        }
        let n = self.topo.add_child(parent, NodeKind::gpu(g));
        self.nvlinks
            .extend(entries.into_iter().map(|el| Pending { from: n, el }));
        if let Some(el) = c2c {
            self.c2cs.push(Pending { from: n, el });
        }
        n
    }

    fn nic_without_pci(&mut self, el: &'a Element, cpu: NodeIndex) {
        let host = self.topo.node(cpu).host;
        // A port already seen elsewhere is the same device repeated by a fused multi-rank dump.
        let fresh = el
            .children
            .iter()
            .filter(|c| c.name == "net")
            .filter(|c| {
                c.attr("name")
                    .is_none_or(|name| !self.nets_seen.contains(&(host, name.to_string())))
            })
            .count();
        let nets = el.children.iter().filter(|c| c.name == "net").count();
        if nets > 0 && fresh == 0 {
            for c in el.children.iter().filter(|c| c.name == "net") {
                self.warn_at(
                    c.pos,
                    format!("<net name=\"{}\"> is listed again under another <cpu>; the first one is kept", c.attr("name").unwrap_or("")),
                );
            }
            return;
        }
        let n = self.topo.add_child(cpu, NodeKind::Nic(Nic::default()));
        self.nets(el, n);
    }

    fn nets(&mut self, nic_el: &Element, nic: NodeIndex) {
        let host = self.topo.node(nic).host;
        for el in &nic_el.children {
            if el.name != "net" {
                self.ignore(el, "nic");
                continue;
            }
            let Some(name) = Self::text(el, "name") else {
                self.warn_at(el.pos, "<net> has no name; ignored");
                continue;
            };
            let Some(dev) = self.int_as::<i32>(el, "dev") else {
                self.warn_at(
                    el.pos,
                    format!("<net name=\"{name}\"> has no dev; ignored, as NCCL ignores it"),
                );
                continue;
            };
            if !self.nets_seen.insert((host, name.clone())) {
                self.warn_at(
                    el.pos,
                    format!("<net name=\"{name}\"> is listed again; the first one is kept"),
                );
                continue;
            }
            let mut net = Net {
                name,
                dev,
                speed_mbps: self.int_as(el, "speed"),
                port: self.int_as(el, "port").unwrap_or(0),
                guid: self.hex64(el, "guid"),
                gdr: self.int(el, "gdr").is_some_and(|v| v != 0),
                gdr_unstated: self.int(el, "gdr").is_none(),
                coll: self.int(el, "coll").is_some_and(|v| v != 0),
                latency: self.float(el, "latency").unwrap_or(0.0),
                maxconn: self.int_as(el, "maxconn"),
                ..Default::default()
            };
            // A file NCCL wrote lists the devices of the transport it opened; one whose
            // properties are the socket transport's is a socket device (`net_kind`), whatever
            // its name, and GPUDirect RDMA is no question for it.
            let pci = match &self.topo.node(nic).kind {
                NodeKind::Nic(x) => Some(x),
                _ => None,
            };
            net.socket = net_kind::classify(&net, pci).kind == net_kind::NetKind::Socket;
            self.topo.add_child(nic, NodeKind::Net(net));
        }
    }

    // ---- second pass: links between devices that now all exist ----

    fn resolve(&mut self) {
        self.number_gpus();
        for p in std::mem::take(&mut self.nvlinks) {
            self.nvlink(p);
        }
        for p in std::mem::take(&mut self.c2cs) {
            self.c2c(p);
        }
        for p in std::mem::take(&mut self.pcilinks) {
            self.pcilink(p);
        }
        self.topo.connect_cpus();
        self.skeleton_ports();
        self.summarize();
    }

    /// GPUs without `dev` get NVML-like indices in bus-id order, after the ones the file names.
    fn number_gpus(&mut self) {
        let mut by_host: BTreeMap<HostId, Vec<NodeIndex>> = BTreeMap::new();
        for n in self.topo.graph.node_indices() {
            by_host.entry(self.topo.node(n).host).or_default().push(n);
        }
        for nodes in by_host.values() {
            let mut used: BTreeSet<i32> = BTreeSet::new();
            let mut missing: Vec<(BusId, NodeIndex)> = Vec::new();
            for &n in nodes {
                if let Some(g) = self.topo.gpu(n) {
                    if g.dev >= 0 {
                        used.insert(g.dev);
                    } else {
                        missing.push((g.busid, n));
                    }
                }
            }
            missing.sort();
            let mut next = 0;
            for (_, n) in missing {
                while used.contains(&next) {
                    next += 1;
                }
                used.insert(next);
                if let NodeKind::Gpu(g) = &mut self.topo.node_mut(n).kind {
                    g.dev = next;
                }
            }
        }
    }

    fn nvlink(&mut self, p: Pending<'a>) {
        let el = p.el;
        let gpu = p.from;
        let host = self.topo.node(gpu).host;
        let gpu_bus = self
            .topo
            .node(gpu)
            .busid()
            .map(|b| b.to_string())
            .unwrap_or_default();
        let count = match self.int_as::<u32>(el, "count") {
            // No GPU has more than 18 links; the cap keeps lane sums far from overflowing.
            Some(c) if c > 0 && c <= MAX_NVLINK_COUNT => c,
            Some(c) if c > 0 => {
                self.warn_at(
                    el.pos,
                    format!("GPU {gpu_bus}: <nvlink count=\"{c}\"> is implausible; ignored"),
                );
                return;
            }
            // A count that is not a number or out of range was already reported.
            None if el.attr("count").is_some_and(|r| !r.trim().is_empty()) => return,
            _ => {
                self.warn_at(
                    el.pos,
                    format!("GPU {gpu_bus}: <nvlink> without a positive count is ignored"),
                );
                return;
            }
        };
        let target_raw = el.attr("target").unwrap_or("");
        let target = BusId::parse(target_raw).ok();
        let tclass = el.attr("tclass").map(|t| t.trim().to_ascii_lowercase());
        // NCCL classifies tclass by string prefix (kvDictPciClass, src/graph/topo.cc): GPU and
        // CPU are special, everything else is the (single) NVSwitch node.
        let kind = match tclass.as_deref() {
            Some(t) if t.starts_with("0x068001") => Tclass::Cpu,
            Some(t) if t.starts_with("0x03") => Tclass::Gpu,
            Some(t) => {
                if !t.starts_with("0x068000") {
                    self.warn_at(el.pos, format!("GPU {gpu_bus}: <nvlink tclass=\"{t}\"> is not an NVSwitch, GPU or CPU class; NCCL counts it as NVSwitch"));
                }
                Tclass::Nvs
            }
            None => {
                let is_gpu = target
                    .and_then(|b| self.topo.find(host, b))
                    .is_some_and(|n| self.topo.gpu(n).is_some());
                self.warn_at(
                    el.pos,
                    format!(
                        "GPU {gpu_bus}: <nvlink> has no tclass (NCCL requires one); taken as {}",
                        if is_gpu { "GPU" } else { "NVSwitch" }
                    ),
                );
                if is_gpu { Tclass::Gpu } else { Tclass::Nvs }
            }
        };
        match kind {
            Tclass::Gpu => {
                let Some(b) = target else {
                    self.warn_at(el.pos, format!("GPU {gpu_bus}: <nvlink> to a GPU has no valid target ('{target_raw}'); ignored"));
                    return;
                };
                match self.topo.find(host, b) {
                    Some(peer) if peer == gpu => {
                        self.warn_at(
                            el.pos,
                            format!("GPU {gpu_bus}: <nvlink> points at the GPU itself; ignored"),
                        );
                    }
                    Some(peer) if self.topo.gpu(peer).is_some() => {
                        self.topo.add_nvlink(gpu, peer, count)
                    }
                    Some(_) => {
                        self.warn_at(
                            el.pos,
                            format!("GPU {gpu_bus}: <nvlink> target {b} is not a GPU; ignored"),
                        );
                    }
                    None => {
                        // NCCL leaves such a link out of its graph (no node to join), but
                        // the lanes are a fact about the GPU: kept beside the graph.
                        if let NodeKind::Gpu(g) = &mut self.topo.node_mut(gpu).kind {
                            let link = topo_model::OutsideNvlink {
                                target: b,
                                lanes: count,
                            };
                            g.nvlink_outside.push(link);
                        }
                        self.warn_at(el.pos, format!("GPU {gpu_bus}: <nvlink> target GPU {b} is not in the file: {count} NVLink lane(s) to a GPU outside the file, kept as a fact and left out of NCCL's graph as NCCL does"));
                    }
                }
            }
            Tclass::Cpu => match self.topo.root_cpu(gpu) {
                Some(cpu) => self.topo.add_nvlink(gpu, cpu, count),
                None => self.warn_at(
                    el.pos,
                    format!("GPU {gpu_bus}: <nvlink> to the CPU but the GPU has no CPU; ignored"),
                ),
            },
            Tclass::Nvs => {
                // Each chip is its own node in the model; a hidden one (all-f id) is one node.
                let key = (host, target.filter(|b| !b.is_placeholder()));
                let sw = match self.nvswitches.get(&key) {
                    Some(&n) => n,
                    None => {
                        let n = self.topo.add_node(
                            host,
                            None,
                            NodeKind::NvSwitch(NvSwitch {
                                busid: key.1,
                                ..Default::default()
                            }),
                        );
                        self.nvswitches.insert(key, n);
                        n
                    }
                };
                self.topo.add_nvlink(gpu, sw, count);
            }
        }
    }

    fn c2c(&mut self, p: Pending<'a>) {
        let el = p.el;
        let gpu = p.from;
        let (Some(bw_mbps), Some(count)) = (
            self.int_as::<u64>(el, "bw"),
            self.int_as::<u32>(el, "count"),
        ) else {
            // A value that is not a number or out of range was already reported.
            let given = |k: &str| el.attr(k).is_some_and(|v| !v.trim().is_empty());
            if !(given("bw") && given("count")) {
                self.warn_at(el.pos, "<c2c> needs both bw and count; ignored");
            }
            return;
        };
        // Grace Hopper has 10 links of about 45 GB/s; these caps only stop nonsense (a
        // 4294967295-link C2C showed as 4e20 GB/s).
        if count == 0 || count > MAX_NVLINK_COUNT || bw_mbps == 0 || bw_mbps > MAX_C2C_LINK_MBPS {
            self.warn_at(
                el.pos,
                format!("<c2c bw=\"{bw_mbps}\" count=\"{count}\"> is implausible; ignored"),
            );
            return;
        }
        if let NodeKind::Gpu(g) = &mut self.topo.node_mut(gpu).kind {
            g.c2c = Some(C2cInfo { bw_mbps, count });
        }
        // ncclTopoAddC2c (src/graph/topo.cc, 2.21+): bw (MB/s) × count / 1000 GB/s, both ways.
        if let Some(cpu) = self.topo.root_cpu(gpu) {
            let bw = bw_mbps as f64 * count as f64 / 1000.0;
            self.topo.connect_both(
                gpu,
                cpu,
                Link {
                    kind: LinkKind::C2c,
                    bw,
                    lanes: count,
                },
            );
        }
    }

    fn pcilink(&mut self, p: Pending<'a>) {
        let el = p.el;
        let host = self.topo.node(p.from).host;
        let Some(target) = el.attr("target").and_then(|t| BusId::parse(t).ok()) else {
            self.warn_at(el.pos, "<pcilink> has no valid target; ignored");
            return;
        };
        match self.topo.find(host, target) {
            Some(t) if t == p.from => {
                self.warn_at(el.pos, "<pcilink> points at its own switch; ignored")
            }
            Some(t) if matches!(self.topo.node(t).kind, NodeKind::PciSwitch(_)) => {
                // ncclTopoAddPciLinks: one direction per entry; the peer switch lists the reverse.
                let loc = BwConstants::default().loc;
                self.topo.connect(
                    p.from,
                    t,
                    Link {
                        kind: LinkKind::Loc,
                        bw: loc,
                        lanes: 0,
                    },
                );
            }
            _ => self.warn_at(
                el.pos,
                format!("<pcilink> target {target} is not a PCI switch in the file; ignored"),
            ),
        }
    }

    /// A cloud image's skeleton file lists its HCAs by PCI class only. NCCL's IB plugin opens
    /// every verbs device with an active port, whatever the topology file says
    /// (ncclIbInitDevices, NVIDIA/nccl v2.28.9-1 src/transport/net_ib.cc), and attaches each
    /// to its PCI device by bus id (ncclTopoFillNet, src/graph/topo.cc): an InfiniBand
    /// controller there is an IB HCA with, as assumed here, one active port of unknown speed.
    /// An Amazon EFA function (`net_kind::is_efa_pci`) is likewise one EFA port that the
    /// aws-ofi-nccl plugin opens. An Ethernet controller with no ids at all beside a GPU under
    /// one PCIe switch is a port of unknown kind: it could be EFA, RoCE or plain Ethernet, and
    /// only the plugin that opens it at run time says which. Only hosts with no `<net>` at
    /// all: a file that lists ports is NCCL's own account of what it opened, and a device
    /// without ports there is one it did not open.
    fn skeleton_ports(&mut self) {
        let mut nics = std::mem::take(&mut self.skeleton_net);
        let host_has_ports: HashSet<HostId> = self
            .topo
            .nets()
            .into_iter()
            .map(|n| self.topo.node(n).host)
            .collect();
        nics.retain(|&n| !host_has_ports.contains(&self.topo.node(n).host));
        let mut picked: Vec<(NodeIndex, Assumed)> = nics
            .into_iter()
            .filter_map(|n| self.assumed_kind(n).map(|k| (n, k)))
            .collect();
        let key = |t: &Topology, n: NodeIndex| {
            let busid = match &t.node(n).kind {
                NodeKind::Nic(x) => x.busid,
                _ => None,
            };
            (t.node(n).host, busid)
        };
        picked.sort_by_key(|&(n, _)| key(&self.topo, n));
        let mut next: HashMap<HostId, i32> = HashMap::new();
        let mut counts = [0usize; 3];
        for &(n, kind) in &picked {
            let (host, busid) = key(&self.topo, n);
            let dev = next.entry(host).or_insert(0);
            let net = kind.port(busid, *dev);
            counts[kind as usize] += 1;
            *dev += 1;
            self.topo.add_child(n, NodeKind::Net(net));
        }
        self.warn_assumed_ports(counts);
    }

    /// What kind of port a skeleton NIC is assumed to have, if any.
    fn assumed_kind(&self, n: NodeIndex) -> Option<Assumed> {
        let NodeKind::Nic(nic) = &self.topo.node(n).kind else {
            return None;
        };
        if nic.class >> 8 == class::IB >> 8 {
            return Some(Assumed::Ib);
        }
        if net_kind::is_efa_pci(nic.vendor, nic.device) {
            return Some(Assumed::Efa);
        }
        let anonymous = nic.vendor.is_none() && nic.device.is_none();
        let beside_gpu = self
            .topo
            .node(n)
            .parent
            .filter(|&p| matches!(self.topo.node(p).kind, NodeKind::PciSwitch(_)))
            .is_some_and(|sw| (self.topo.children(sw).iter()).any(|&c| self.topo.gpu(c).is_some()));
        (nic.class >> 8 == class::ETHERNET >> 8 && anonymous && beside_gpu)
            .then_some(Assumed::Unknown)
    }

    fn warn_assumed_ports(&mut self, [ib, efa, unknown]: [usize; 3]) {
        if ib > 0 {
            self.topo.warn(format!(
                "{ib} InfiniBand controller(s) (PCI class 0x0207) have no <nic> entry: each is assumed to be an IB HCA with one active port, as NCCL's IB plugin opens every verbs device whose port is up; the port names (hca@<bus id>), device numbers in bus-id order, speed (unknown; --nic-speed states it) and GPUDirect RDMA support (unknown; planned as NCCL's IB plugin reports it where nvidia-peermem or DMA-BUF works; --gdr states it) are assumptions"
            ));
        }
        if efa > 0 {
            self.topo.warn(format!(
                "{efa} Amazon EFA function(s) (PCI 1d0f:efa*) have no <nic> entry: each is assumed to be one EFA port, which NCCL reaches through the aws-ofi-nccl plugin; the port names (efa@<bus id>), device numbers in bus-id order, speed (unknown: the device id does not give it; --nic-speed states it), the plugin's latency (75 us, its p4d/p5 entry) and GPUDirect RDMA support (unknown; planned as the plugin reports it on GPU instances; --gdr states it) are assumptions"
            ));
        }
        if unknown > 0 {
            self.topo.warn(format!(
                "{unknown} network controller(s) (PCI class 0x0200, no vendor or device id) beside GPUs have no <nic> entry: each is assumed to be one network port of unknown kind (an EFA adapter runs NCCL's NET through aws-ofi-nccl, a RoCE NIC through NCCL's IB transport, plain Ethernet through sockets; --fabric states which); the port names (nic@<bus id>), speed (unknown; --nic-speed states it) and GPUDirect RDMA support (unknown; planned as an RDMA plugin, EFA's or IB's, reports it on a GPU image; --gdr states it) are assumptions"
            ));
        }
    }

    fn summarize(&mut self) {
        if self.skeleton_gpus + self.skeleton_nics > 0 {
            self.topo.warn(format!(
                "the file lists {} GPU(s) and {} NIC(s) by PCI class only (no <gpu>/<nic> entries): NCCL fills GPU, NVLink and network details at run time; GPU indices are assumed in bus-id order",
                self.skeleton_gpus, self.skeleton_nics
            ));
        }
        if self.handwritten_no_nvlink > 0 {
            self.topo.warn(format!(
                "{} GPU(s) have no <nvlink> entries in a file NCCL did not write (no PCI vendor/device ids): NVLink is unknown, NCCL detects it at run time",
                self.handwritten_no_nvlink
            ));
        }
        if self.trimmed_no_nvlink > 0 {
            self.topo.warn(format!(
                "{} GPU(s) have neither sm nor <nvlink> entries, which NCCL writes for every GPU it dumps: the file was trimmed or written by hand, so NVLink is unknown rather than absent (NCCL detects it at run time); state it (--nvlink, --gpu)",
                self.trimmed_no_nvlink
            ));
        }
        if self.unknown_pcie > 0 {
            self.topo.warn(format!(
                "{} device(s) have an empty link_speed or a link_width of 0/empty (unknown or virtual PCIe link): NCCL counts an empty speed as Gen3 and width 0 as x16",
                self.unknown_pcie
            ));
        }
        if !self.odd_speeds.is_empty() {
            let list: Vec<String> = self.odd_speeds.iter().map(|s| format!("\"{s}\"")).collect();
            self.topo.warn(format!(
                "link_speed {} not in NCCL's speed table: NCCL counts it as Gen3 (8 GT/s)",
                list.join(", ")
            ));
        }
    }

    fn finish(self) -> Topology {
        self.topo
    }
}

/// The kind of port topo assumes on a skeleton NIC (`Builder::skeleton_ports`).
#[derive(Clone, Copy)]
enum Assumed {
    Ib = 0,
    Efa = 1,
    Unknown = 2,
}

impl Assumed {
    fn port(self, busid: Option<BusId>, dev: i32) -> Net {
        let (prefix, link_layer, gdr, latency) = match self {
            // Unknown, and priced as the IB plugin answers on a GPU image (`Net::gdr`).
            Assumed::Ib => ("hca", Some("InfiniBand".to_string()), true, 0.0),
            // NCCL keeps a file's latency and takes the plugin's where the file has none
            // (xmlInitAttr in ncclTopoPopulateNics, NVIDIA/nccl v2.28.9-1 src/graph/topo.cc):
            // aws-ofi-nccl reports its platform entry's (`Fabric::plugin_latency_us`).
            Assumed::Efa => (
                "efa",
                None,
                true,
                topo_vocab::Fabric::Efa.plugin_latency_us().unwrap_or(0.0),
            ),
            // Where GPUDirect RDMA matters the port is an RDMA plugin's (EFA's or IB's), which
            // reports it on a GPU image as the IB plugin does; on sockets it is no question.
            Assumed::Unknown => ("nic", None, true, 0.0),
        };
        let name = busid.map_or_else(|| format!("{prefix}{dev}"), |b| format!("{prefix}@{b}"));
        Net {
            name,
            dev,
            port: 1,
            gdr,
            gdr_unstated: true,
            link_layer,
            latency,
            assumed: true,
            ..Default::default()
        }
    }
}

#[derive(Clone, Copy)]
enum Tclass {
    Gpu,
    Cpu,
    Nvs,
}

#[cfg(test)]
mod tests {
    use super::*;
    use topo_model::LinkKind;

    fn parse(text: &str) -> Topology {
        parse_str(text, "test.xml").unwrap()
    }

    fn wrap(body: &str) -> String {
        format!(
            "<system version=\"1\">\n  <cpu numaid=\"0\" arch=\"x86_64\" vendor=\"GenuineIntel\" familyid=\"6\" modelid=\"143\">\n{body}\n  </cpu>\n</system>\n"
        )
    }

    /// A dump's GPU without NVLink has none (NCCL wrote what NVML found); a GPU with PCI ids
    /// but neither `sm` nor `<nvlink>` was trimmed (NCCL writes `sm` on every GPU), so its
    /// NVLink is unknown and the model its PCI id suggests is named as a guess only.
    #[test]
    fn a_gpu_without_sm_or_nvlink_was_trimmed_and_its_nvlink_is_unknown() {
        let gpu = |bus: &str, dev: &str, sm: &str| {
            format!(
                r#"    <pci busid="0000:{bus}:00.0" class="0x030200" vendor="0x10de" device="0x2335" link_speed="32.0 GT/s PCIe" link_width="16">
      <gpu dev="{dev}"{sm} rank="{dev}" gdr="1"/>
    </pci>"#
            )
        };
        let t = parse(&wrap(&[gpu("18", "0", ""), gpu("2a", "1", "")].join("\n")));
        for n in t.gpus() {
            let g = t.gpu(n).unwrap();
            assert!(
                matches!(&g.nvlink, NvlinkInfo::Unknown(why) if why.contains("trimmed") && why.contains("H200 (a guess")),
                "{:?}",
                g.nvlink
            );
        }
        assert!(
            t.warnings
                .iter()
                .any(|w| w.contains("neither sm nor <nvlink>"))
        );
        let t = parse(&wrap(
            &[gpu("18", "0", r#" sm="90""#), gpu("2a", "1", r#" sm="90""#)].join("\n"),
        ));
        for n in t.gpus() {
            assert_eq!(t.gpu(n).unwrap().nvlink, NvlinkInfo::Known);
        }
        assert!(!t.warnings.iter().any(|w| w.contains("neither sm")));
    }

    /// NCCL reads `arch` by prefix against x86_64, arm64 and ppc64 (topo.cc kvDictCpuArch):
    /// Linux's `aarch64` makes the CPU unknown to it, which the reader says.
    #[test]
    fn an_arch_nccl_does_not_know_is_said() {
        let t =
            parse("<system version=\"1\">\n  <cpu numaid=\"0\" arch=\"aarch64\"/>\n</system>\n");
        assert!(
            t.warnings
                .iter()
                .any(|w| w.contains("arch=\"aarch64\"> is not one NCCL knows")
                    && w.contains("write arch=\"arm64\"")),
            "{:?}",
            t.warnings
        );
        let t = parse("<system version=\"1\">\n  <cpu numaid=\"0\" arch=\"arm64\"/>\n</system>\n");
        assert!(!t.warnings.iter().any(|w| w.contains("NCCL knows")));
    }

    #[test]
    fn c_number_rules() {
        assert_eq!(strtol("0x10").map(|x| x.0), Some(16));
        assert_eq!(strtol("010").map(|x| x.0), Some(8));
        assert_eq!(strtol("10").map(|x| x.0), Some(10));
        assert_eq!(strtol("-1").map(|x| x.0), Some(-1));
        assert_eq!(strtol(" 7abc"), Some((7, "abc")));
        assert_eq!(strtol("0x"), Some((0, "x")));
        assert_eq!(strtol("08"), Some((0, "8")));
        assert_eq!(strtol(""), None);
        assert_eq!(strtol("x1"), None);
        assert_eq!(
            strtol("99999999999999999999999").map(|x| x.0),
            Some(i64::MAX)
        );
        assert_eq!(strtoull_hex("10").map(|x| x.0), Some(16));
        assert_eq!(
            strtoull_hex("0x22a1301797fc4eaa").map(|x| x.0),
            Some(0x22a1301797fc4eaa)
        );
        assert_eq!(strtoull_hex("zz"), None);
        assert_eq!(strtod("0.000000").map(|x| x.0), Some(0.0));
        assert_eq!(strtod("1.5e3us"), Some((1500.0, "us")));
        assert_eq!(strtod("."), None);
        assert_eq!(strtod("2."), Some((2.0, "")));
        assert_eq!(affinity_to_cpulist("c0c0").as_deref(), Some("6-7,14-15"));
        assert_eq!(
            affinity_to_cpulist("00000000,00ffffff,00000000,00ffffff").as_deref(),
            Some("0-23,64-87")
        );
        assert_eq!(
            affinity_to_cpulist("ffffffff,00000001").as_deref(),
            Some("0,32-63")
        );
        assert_eq!(affinity_to_cpulist("00000000"), None);
        assert_eq!(affinity_to_cpulist("xyz"), None);
    }

    #[test]
    fn gpu_peer_nvlink_is_one_directional_and_self_links_are_dropped() {
        let t = parse(&wrap(
            r#"    <pci busid="0000:07:00.0" class="0x030000" vendor="0x10de" link_speed="16.0 GT/s PCIe" link_width="16">
      <gpu dev="0" sm="86" rank="0" gdr="1">
        <nvlink target="0000:08:00.0" count="4" tclass="0x030000"/>
        <nvlink target="0000:07:00.0" count="2" tclass="0x030200"/>
        <nvlink target="0000:99:00.0" count="2" tclass="0x030200"/>
      </gpu>
    </pci>
    <pci busid="0000:08:00.0" class="0x030000" vendor="0x10de" link_speed="16.0 GT/s PCIe" link_width="16">
      <gpu dev="1" sm="86" rank="1" gdr="1"/>
    </pci>"#,
        ));
        let g = t.gpus();
        assert_eq!(g.len(), 2);
        let l0 = t.nvlinks(g[0]);
        assert_eq!(l0.len(), 1);
        assert_eq!((l0[0].0, l0[0].1), (g[1], 4));
        assert!((l0[0].2 - 48.0).abs() < 1e-9);
        assert!(t.nvlinks(g[1]).is_empty());
        assert_eq!(t.gpu(g[1]).unwrap().nvlink, NvlinkInfo::Known);
        assert!(
            t.warnings
                .iter()
                .any(|w| w.contains("points at the GPU itself")),
            "{:?}",
            t.warnings
        );
        assert!(
            t.warnings
                .iter()
                .any(|w| w.contains("0000:99:00.0 is not in the file")),
            "{:?}",
            t.warnings
        );
    }

    #[test]
    fn nvswitch_targets_become_chips_or_one_hidden_switch() {
        let t = parse(&wrap(
            r#"    <pci busid="0000:18:00.0" class="0x030200" vendor="0x10de" link_speed="32.0 GT/s PCIe" link_width="16">
      <gpu dev="0" sm="90" rank="0" gdr="1">
        <nvlink target="0000:07:00.0" count="5" tclass="0x068000"/>
        <nvlink target="0000:06:00.0" count="5" tclass="0x068000"/>
        <nvlink target="0000:05:00.0" count="4" tclass="0x068000"/>
        <nvlink target="0000:08:00.0" count="4" tclass="0x068000"/>
      </gpu>
    </pci>
    <pci busid="0000:19:00.0" class="0x030200" vendor="0x10de" link_speed="32.0 GT/s PCIe" link_width="16">
      <gpu dev="1" sm="90" rank="1" gdr="1">
        <nvlink target="fffffff:ff:ff.0" count="18" tclass="0x068000"/>
      </gpu>
    </pci>"#,
        ));
        assert_eq!(t.nvswitches().count(), 5);
        let g = t.gpus();
        let lanes: Vec<u32> = t.nvlinks(g[0]).iter().map(|l| l.1).collect();
        assert_eq!(lanes.iter().sum::<u32>(), 18);
        let hidden: Vec<_> = t.nvlinks(g[1]);
        assert_eq!(hidden.len(), 1);
        assert_eq!(t.node(hidden[0].0).busid(), None);
        // both directions towards a switch
        assert!(
            t.graph
                .edges_connecting(hidden[0].0, g[1])
                .any(|e| e.weight().kind == LinkKind::NvLink)
        );
    }

    #[test]
    fn c2c_and_cpu_nvlink_attach_to_the_root_cpu() {
        let t = parse(&wrap(
            r#"    <pci busid="0009:01:00.0" class="0x030200" vendor="0x10de" link_speed="" link_width="0">
      <gpu dev="0" sm="90" rank="0" gdr="1">
        <c2c bw="44712" count="10"/>
        <nvlink target="0000:00:00.0" count="2" tclass="0x068001"/>
      </gpu>
    </pci>"#,
        ));
        let g = t.gpus()[0];
        let cpu = t.cpus().next().unwrap();
        assert_eq!(
            t.gpu(g).unwrap().c2c,
            Some(C2cInfo {
                bw_mbps: 44712,
                count: 10
            })
        );
        let c2c = t
            .graph
            .edges_connecting(g, cpu)
            .find(|e| e.weight().kind == LinkKind::C2c)
            .unwrap();
        assert!((c2c.weight().bw - 447.12).abs() < 1e-9);
        assert!(
            t.graph
                .edges_connecting(cpu, g)
                .any(|e| e.weight().kind == LinkKind::C2c)
        );
        assert_eq!(t.nvlinks(g)[0].0, cpu);
        let p = &t.gpu(g).unwrap().pcie;
        assert_eq!((p.speed.as_deref(), p.width), (Some(""), Some(0)));
        assert!(
            t.warnings.iter().any(|w| w.contains("link_width of 0")),
            "{:?}",
            t.warnings
        );
    }

    /// Skeleton network controllers: an Amazon EFA function is an assumed EFA port; an
    /// anonymous Ethernet controller beside a GPU a port of unknown kind; one elsewhere, or
    /// with another vendor's ids, gets none. A listed net with the socket transport's answers
    /// is marked socket, an IB HCA's is not.
    #[test]
    fn skeleton_efa_and_unknown_ports_and_socket_devices() {
        let t = parse(&wrap(
            r#"<pci busid="ffff:ff:01.0" class="0x060400" link_speed="8 GT/s" link_width="16">
      <pci busid="0000:10:1c.0" class="0x030200" link_speed="8 GT/s" link_width="16"/>
      <pci busid="0000:10:1b.0" class="0x020000" vendor="0x1d0f" device="0xefa1" link_speed="8 GT/s" link_width="16"/>
    </pci>
    <pci busid="ffff:ff:02.0" class="0x060400" link_speed="8 GT/s" link_width="16">
      <pci busid="0000:20:1c.0" class="0x030200" link_speed="8 GT/s" link_width="16"/>
      <pci busid="0000:20:1b.0" class="0x020000" link_speed="8 GT/s" link_width="16"/>
      <pci busid="0000:20:1a.0" class="0x020000" vendor="0x15b3" device="0x101b" link_speed="8 GT/s" link_width="16"/>
    </pci>
    <pci busid="0000:30:00.0" class="0x020000" link_speed="8 GT/s" link_width="16"/>"#,
        ));
        let nets: Vec<_> = t
            .nets()
            .into_iter()
            .map(|n| t.net(n).unwrap().clone())
            .collect();
        let names: Vec<&str> = nets.iter().map(|x| x.name.as_str()).collect();
        assert_eq!(names, ["efa@0000:10:1b.0", "nic@0000:20:1b.0"]);
        assert!(
            nets.iter()
                .all(|x| x.assumed && x.gdr_unstated && x.link_layer.is_none())
        );
        assert_eq!(nets[0].latency, 75.0);
        assert_eq!(nets[1].latency, 0.0);
        let kinds: Vec<_> = t
            .nets()
            .into_iter()
            .map(|n| net_kind::of_port(&t, n).unwrap().kind)
            .collect();
        assert_eq!(kinds, [net_kind::NetKind::Efa, net_kind::NetKind::Unknown]);
        for needle in [
            "1 Amazon EFA function(s)",
            "1 network controller(s) (PCI class 0x0200",
        ] {
            assert!(
                t.warnings.iter().any(|w| w.contains(needle)),
                "{needle}: {:?}",
                t.warnings
            );
        }

        let listed = parse(&wrap(
            r#"<nic><net name="ib0" dev="0" speed="10000" port="0" latency="0" guid="0x0" maxconn="65536" gdr="0"/></nic>
    <pci busid="0000:02:00.0" class="0x020700" vendor="0x15b3" device="0x1013">
      <nic><net name="mlx5_0" dev="1" speed="100000" port="1" guid="0x84c36d000390fe7c" maxconn="262144" gdr="0"/></nic>
    </pci>"#,
        ));
        let socket: Vec<(String, bool)> = listed
            .nets()
            .into_iter()
            .map(|n| listed.net(n).map(|x| (x.name.clone(), x.socket)).unwrap())
            .collect();
        assert!(socket.contains(&("ib0".into(), true)), "{socket:?}");
        assert!(socket.contains(&("mlx5_0".into(), false)), "{socket:?}");
    }

    #[test]
    fn skeletons_hosts_and_duplicates() {
        let t = parse(
            r#"<system version="1">
  <cpu host_hash="0xbb" numaid="0" arch="x86_64">
    <pci busid="ffff:ff:01.0" class="0x060400" link_speed="16 GT/s" link_width="16">
      <pci busid="0004:00:00.0" class="0x030200" link_speed="16 GT/s" link_width="16"/>
      <pci busid="0003:00:00.0" class="0x030200" link_speed="16 GT/s" link_width="16"/>
      <pci busid="0103:00:00.0" class="0x020700" link_speed="16 GT/s" link_width="16"/>
      <pci busid="0000:05:00.0" class="0x010802" link_speed="16 GT/s" link_width="4"/>
      <pcilink target="ffff:ff:02.0"/>
    </pci>
    <nic><net name="eth0" dev="0" speed="10000"/></nic>
    <foo><bar/></foo>
  </cpu>
  <cpu host_hash="bb" numaid="1" arch="x86_64">
    <pci busid="ffff:ff:02.0" class="0x060400" link_speed="16 GT/s" link_width="16"/>
    <nic><net name="eth0" dev="0" speed="10000"/></nic>
  </cpu>
  <cpu host_hash="0xcc" numaid="0" arch="x86_64">
    <nic><net name="eth0" dev="0" speed="10000"/></nic>
  </cpu>
</system>"#,
        );
        assert_eq!(t.host_count(), 2);
        assert_eq!(t.hosts[0].host_hash, Some(0xbb));
        assert_eq!(t.hosts[1].host_hash, Some(0xcc));
        let g = t.gpus();
        assert_eq!(g.len(), 2);
        // dev in bus-id order, not file order
        assert_eq!(t.gpu(g[0]).unwrap().busid.to_string(), "0003:00:00.0");
        assert!(
            matches!(t.gpu(g[0]).unwrap().nvlink, NvlinkInfo::Unknown(ref r) if r == SKELETON_NVLINK_REASON)
        );
        assert_eq!(
            t.nics().count(),
            3,
            "one skeleton NIC, eth0 on host 0, eth0 on host 1"
        );
        assert_eq!(t.nets().len(), 2);
        assert_eq!(
            t.graph
                .node_weights()
                .filter(|n| matches!(n.kind, NodeKind::PciDevice(_)))
                .count(),
            1
        );
        let sws: Vec<_> = t.pci_switches().collect();
        assert!(
            t.graph
                .edges_connecting(sws[0], sws[1])
                .any(|e| e.weight().kind == LinkKind::Loc)
        );
        assert!(
            !t.graph
                .edges_connecting(sws[1], sws[0])
                .any(|e| e.weight().kind == LinkKind::Loc)
        );
        for needle in ["by PCI class only", "listed again", "ignoring <foo>"] {
            assert!(
                t.warnings.iter().any(|w| w.contains(needle)),
                "{needle}: {:?}",
                t.warnings
            );
        }
    }

    #[test]
    fn odd_speeds_bare_gpus_and_dev_numbering() {
        let t = parse(&wrap(
            r#"    <pci busid="0000:20:00.0" class="0x030200" link_speed="32 GT/s PCIe/s" link_width="16">
      <gpu dev="1"/>
    </pci>
    <pci busid="0000:10:00.0" class="0x030200" link_speed="Unknown" link_width="16">
      <gpu/>
    </pci>
    <pci busid="0000:30:00.0" class="0x030200" link_speed="8.0 GT/s PCIe" link_width="x16">
      <gpu sm="0x5a" rank="010"/>
    </pci>"#,
        ));
        let g: Vec<&Gpu> = t.gpus().iter().map(|&n| t.gpu(n).unwrap()).collect();
        let devs: Vec<(String, i32)> = g.iter().map(|g| (g.busid.to_string(), g.dev)).collect();
        assert_eq!(
            devs,
            [
                ("0000:10:00.0".to_string(), 0),
                ("0000:20:00.0".into(), 1),
                ("0000:30:00.0".into(), 2)
            ]
        );
        // "32 GT/s PCIe/s" matches NCCL's old-kernel "32 GT/s" entry; "Unknown" falls to Gen3
        assert_eq!(g[1].pcie.bw(), 48.0);
        assert_eq!(g[0].pcie.bw(), 12.0);
        assert_eq!(
            (g[2].sm, g[2].rank),
            (Some(90), Some(8)),
            "strtol: hex and octal"
        );
        assert_eq!(g[2].pcie.width, None);
        assert!(g.iter().all(|g| matches!(g.nvlink, NvlinkInfo::Unknown(_))));
        for needle in [
            "\"Unknown\" not in NCCL's speed table",
            "link_width=\"x16\" is not a number",
        ] {
            assert!(
                t.warnings.iter().any(|w| w.contains(needle)),
                "{needle}: {:?}",
                t.warnings
            );
        }
    }

    #[test]
    fn errors_are_usage_errors_with_positions() {
        let e = parse_str("<system version=\"2\"/>", "x.xml").unwrap_err();
        assert_eq!(crate::error::kind(&e), Some(ErrorKind::NcclXml));
        assert!(
            e.to_string()
                .contains("cannot parse x.xml: line 1 column 1"),
            "{e}"
        );
        let e = parse_str("", "x.xml").unwrap_err();
        assert!(e.to_string().contains("line 1 column 1: empty file"), "{e}");
        let e = parse_str("<!-- nothing -->\n", "x.xml").unwrap_err();
        assert!(
            e.to_string()
                .contains("line 2 column 1: no elements, only comments"),
            "{e}"
        );
        let e = parse_str("<system version=\"1\">\n<cpu>", "x.xml").unwrap_err();
        assert!(
            e.to_string()
                .contains("line 2 column 6: the file is cut here, before its first complete GPU"),
            "{e}"
        );
        assert_eq!(crate::error::kind(&e), Some(ErrorKind::CutFile));
        let e = parse_str("<topology/>", "x.xml").unwrap_err();
        assert!(e.to_string().contains("no <system> element"), "{e}");
    }
}
