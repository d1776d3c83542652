//! Hardware profiles: YAML descriptions of reference machines (profiles/*.yaml, schema in
//! docs/profiles.md), built into the same [`Topology`] as live discovery and NCCL XML.
//!
//! Loading is parse (serde, typos rejected) → flatten the PCI trees into a list of items with
//! defaults merged → validate the whole machine → build with the model's builder methods. The
//! built-in profiles are compiled into the binary so `--profile` works on any machine.

pub mod schema;

use crate::error::{self, ErrorKind};
use anyhow::Result;
use petgraph::graph::NodeIndex;
use schema::{GpuRef, GpuSpec, LinkSpec, NicSpec, PortSpec, Profile, Short, SwitchSpec};
use serde::Deserialize;
use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::path::Path;
use topo_model::{
    BusId, C2cInfo, Cpu, Gpu, HostId, Link, LinkKind, Net, Nic, NodeKind, NvSwitch, PciDevice,
    PciSwitch, PcieLink, SourceInfo, Topology, class,
};

/// Built-in profiles: (name, YAML text), sorted by name.
const BUILTIN: &[(&str, &str)] = &[
    (
        "2x-rtx2080ti-nvbridge",
        include_str!("../../../profiles/2x-rtx2080ti-nvbridge.yaml"),
    ),
    (
        "2x-rtx4090",
        include_str!("../../../profiles/2x-rtx4090.yaml"),
    ),
    (
        "4x-rtx5090",
        include_str!("../../../profiles/4x-rtx5090.yaml"),
    ),
    (
        "8x-rtx-pro-6000",
        include_str!("../../../profiles/8x-rtx-pro-6000.yaml"),
    ),
    (
        "alcf-polaris",
        include_str!("../../../profiles/alcf-polaris.yaml"),
    ),
    (
        "alps-gh200",
        include_str!("../../../profiles/alps-gh200.yaml"),
    ),
    ("aws-p4d", include_str!("../../../profiles/aws-p4d.yaml")),
    ("aws-p4de", include_str!("../../../profiles/aws-p4de.yaml")),
    ("aws-p5", include_str!("../../../profiles/aws-p5.yaml")),
    ("aws-p5en", include_str!("../../../profiles/aws-p5en.yaml")),
    (
        "aws-p6-b200",
        include_str!("../../../profiles/aws-p6-b200.yaml"),
    ),
    (
        "azure-nd-gb200-v6",
        include_str!("../../../profiles/azure-nd-gb200-v6.yaml"),
    ),
    (
        "azure-nd-h100-v5",
        include_str!("../../../profiles/azure-nd-h100-v5.yaml"),
    ),
    (
        "azure-nd-h200-v5",
        include_str!("../../../profiles/azure-nd-h200-v5.yaml"),
    ),
    ("dgx-a100", include_str!("../../../profiles/dgx-a100.yaml")),
    ("dgx-b200", include_str!("../../../profiles/dgx-b200.yaml")),
    ("dgx-h100", include_str!("../../../profiles/dgx-h100.yaml")),
    ("dgx-v100", include_str!("../../../profiles/dgx-v100.yaml")),
    (
        "gb200-nvl72",
        include_str!("../../../profiles/gb200-nvl72.yaml"),
    ),
    (
        "gb300-nvl72",
        include_str!("../../../profiles/gb300-nvl72.yaml"),
    ),
    (
        "gcp-a3-high",
        include_str!("../../../profiles/gcp-a3-high.yaml"),
    ),
    (
        "gcp-a3-mega",
        include_str!("../../../profiles/gcp-a3-mega.yaml"),
    ),
    ("gcp-a4", include_str!("../../../profiles/gcp-a4.yaml")),
    ("gh200", include_str!("../../../profiles/gh200.yaml")),
    ("hgx-b300", include_str!("../../../profiles/hgx-b300.yaml")),
    ("hgx-h200", include_str!("../../../profiles/hgx-h200.yaml")),
    ("hgx-h800", include_str!("../../../profiles/hgx-h800.yaml")),
    (
        "kalavai-rtx4090",
        include_str!("../../../profiles/kalavai-rtx4090.yaml"),
    ),
    (
        "nrel-kestrel-h100",
        include_str!("../../../profiles/nrel-kestrel-h100.yaml"),
    ),
    (
        "pcie-2x-l40s",
        include_str!("../../../profiles/pcie-2x-l40s.yaml"),
    ),
    (
        "pcie-8x-a100-nvbridge",
        include_str!("../../../profiles/pcie-8x-a100-nvbridge.yaml"),
    ),
    (
        "pcie-8x-a40-nvbridge",
        include_str!("../../../profiles/pcie-8x-a40-nvbridge.yaml"),
    ),
    (
        "pcie-8x-h100-nvbridge",
        include_str!("../../../profiles/pcie-8x-h100-nvbridge.yaml"),
    ),
    (
        "pcie-8x-l40s",
        include_str!("../../../profiles/pcie-8x-l40s.yaml"),
    ),
];

/// Names accepted by `--profile`, sorted.
pub fn builtin_names() -> Vec<&'static str> {
    BUILTIN.iter().map(|(n, _)| *n).collect()
}

/// Every built-in profile with its one-line description, sorted by name (`topo show
/// --profile list`). A built-in that fails to parse is a build defect the unit tests catch;
/// here it lists with an empty description rather than hiding the name.
pub fn builtin_list() -> Vec<(&'static str, String)> {
    BUILTIN
        .iter()
        .map(|(n, t)| {
            let d = parse(t)
                .ok()
                .and_then(|p| p.description)
                .unwrap_or_default();
            (*n, d.split_whitespace().collect::<Vec<_>>().join(" "))
        })
        .collect()
}

/// The YAML text of a built-in profile (what `--profile NAME` loads).
pub fn builtin_text(name: &str) -> Option<&'static str> {
    BUILTIN.iter().find(|(n, _)| *n == name).map(|(_, t)| *t)
}

/// The built-in profile of the machine a GPU model usually comes in, from the name CUDA and
/// nvidia-smi print (`NVIDIA H100 80GB HBM3`, `Tesla V100-SXM2-32GB`, `NVIDIA A100-SXM4-80GB`):
/// what `diagnose --nccl-tests` judges a pasted result against when no machine is given. SXM
/// parts map to their HGX/DGX baseboard; PCIe parts to the PCIe box of that GPU. `None` for a
/// GPU no profile describes.
pub fn for_gpu_name(name: &str) -> Option<&'static str> {
    let n = name.to_ascii_uppercase();
    let has = |s: &str| n.contains(s);
    let pcie = has("PCIE") || has(" NVL") || has("-PCI");
    Some(match () {
        _ if has("GB300") => "gb300-nvl72",
        _ if has("GB200") => "gb200-nvl72",
        _ if has("GH200") => "gh200",
        _ if has("B300") => "hgx-b300",
        _ if has("B200") => "dgx-b200",
        _ if has("H200") => "hgx-h200",
        _ if has("H800") => "hgx-h800",
        _ if has("H100") && pcie => "pcie-8x-h100-nvbridge",
        _ if has("H100") => "dgx-h100",
        _ if has("A100") && pcie => "pcie-8x-a100-nvbridge",
        _ if has("A100") => "dgx-a100",
        _ if has("V100") && !pcie => "dgx-v100",
        _ if has("L40S") => "pcie-8x-l40s",
        _ if has("A40") => "pcie-8x-a40-nvbridge",
        _ if has("RTX PRO 6000") => "8x-rtx-pro-6000",
        _ if has("RTX 5090") => "4x-rtx5090",
        _ if has("RTX 4090") => "2x-rtx4090",
        _ => return None,
    })
}

pub fn load_builtin(name: &str) -> Result<Topology> {
    // `DGX-H100` is how the machine is written everywhere else; accept it.
    let typed = name;
    let lower = name.trim().to_ascii_lowercase();
    let name = lower.as_str();
    let Some(text) = builtin_text(name) else {
        return Err(error::fail(
            ErrorKind::UnknownProfile,
            format!("unknown profile '{typed}'"),
        ));
    };
    load_str(text, &format!("profiles/{name}.yaml"), name)
}

pub fn load_file(path: &Path) -> Result<Topology> {
    let unreadable = |why: String| {
        error::fail(
            ErrorKind::ProfileFile,
            format!("cannot read {}: {why}", path.display()),
        )
    };
    let bytes = match super::read::file(
        path,
        super::read::Cap {
            bytes: MAX_FILE_BYTES,
            what: "a profile",
        },
    ) {
        Ok(b) => b,
        Err(super::read::ReadError::TooLarge(_)) => {
            let len = std::fs::metadata(path).map(|m| m.len()).unwrap_or(0);
            return Err(unreadable(format!(
                "{len} bytes is too large for a profile (at most {} KiB)",
                MAX_FILE_BYTES >> 10
            )));
        }
        Err(e) => return Err(unreadable(e.to_string())),
    };
    let text = String::from_utf8(bytes)
        .map_err(|_| unreadable("stream did not contain valid utf-8".into()))?;
    let origin = path.display().to_string();
    load_str(&text, &origin, &origin)
}

/// Parses and builds a profile; `file` names it in errors, `origin` goes to `SourceInfo`.
pub fn load_str(text: &str, file: &str, origin: &str) -> Result<Topology> {
    let profile = parse(text).map_err(|msg| {
        error::fail(
            ErrorKind::ProfileSchema,
            format!("cannot parse {file}: {msg}"),
        )
    })?;
    let mut topo = build(&profile).map_err(|msg| {
        error::fail(
            ErrorKind::ProfileSchema,
            format!("invalid profile {file}: {msg}"),
        )
    })?;
    // The origin is known here; what `build` stated (a profile's fabric) stays.
    topo.source = SourceInfo {
        kind: topo_model::SourceKind::Profile,
        origin: Some(origin.to_string()),
        stated: std::mem::take(&mut topo.source.stated),
        fabric: topo.source.fabric,
        ..Default::default()
    };
    Ok(topo)
}

/// Typed parse straight from the text (errors keep their line and column). The typed
/// deserializer does not expand `<<` merge keys, so a file that uses them is read as a YAML
/// value, merged, then deserialized (errors then name the field path but no line).
fn parse(text: &str) -> Result<Profile, String> {
    if text
        .lines()
        .map(str::trim)
        .all(|l| l.is_empty() || l.starts_with('#') || l == "---")
    {
        return Err("line 1 column 1: empty file".into());
    }
    check_nesting(text)?;
    let direct = match yaml_serde::from_str::<Profile>(text) {
        Ok(p) => return Ok(p),
        Err(e) => e,
    };
    let mut value: yaml_serde::Value = match yaml_serde::from_str(text) {
        Ok(v) => v,
        Err(_) => return Err(yaml_message(&direct)),
    };
    if !has_merge_key(&value) {
        return Err(yaml_message(&direct));
    }
    value.apply_merge().map_err(|e| yaml_message(&e))?;
    Profile::deserialize(value)
        .map_err(|e| format!("{} (after expanding << merge keys)", yaml_message(&e)))
}

/// Real profiles are a few KiB (the largest built-in one 4 KiB). A loaded YAML document costs
/// about 150 times its size in memory (a 16 MiB flow list of small scalars peaked at 1.6 GB,
/// 256 KiB at 39 MB: debug build, 2026-12-03), so the cap is what bounds the memory.
const MAX_FILE_BYTES: u64 = 256 << 10;

/// Deeper nesting of lists and maps (flow `[`/`{` or indented blocks) than any profile needs
/// (the built-in ones nest at most 10 deep, with two levels of PCI switches). The YAML scanner's cost grows with the square of
/// the flow nesting depth (200 000 levels took a minute), so deeper text is refused before it
/// is loaded.
pub const MAX_NESTING: usize = 64;

/// Fails at the first list or map nested deeper than [`MAX_NESTING`], as the parser sees it
/// (see [`super::yaml_depth`]: quotes, comments and block scalars cannot hide a bracket).
pub fn check_nesting(text: &str) -> Result<(), String> {
    super::yaml_depth::check(text, MAX_NESTING).map_err(|at| {
        format!(
            "line {} column {}: lists or maps nested deeper than {MAX_NESTING} levels",
            at.line, at.column
        )
    })
}

fn has_merge_key(v: &yaml_serde::Value) -> bool {
    match v {
        yaml_serde::Value::Mapping(m) => m
            .iter()
            .any(|(k, v)| k.as_str() == Some("<<") || has_merge_key(v)),
        yaml_serde::Value::Sequence(s) => s.iter().any(has_merge_key),
        yaml_serde::Value::Tagged(t) => has_merge_key(&t.value),
        _ => false,
    }
}

/// `line L column C: message` from a YAML error (its own text puts the position last),
/// with any quoted excerpt of the file cut short.
fn yaml_message(e: &yaml_serde::Error) -> String {
    let text = crate::error::short_quotes(&e.to_string());
    match e.location() {
        Some(loc) => {
            let at = format!(" at line {} column {}", loc.line(), loc.column());
            let msg = text.replacen(&at, "", 1);
            format!("line {} column {}: {msg}", loc.line(), loc.column())
        }
        None => text,
    }
}

/// NVLink lanes a GPU of compute capability `sm` can have (NCCL's maxLinks in
/// `ncclTopoGetXmlFromGpu`, src/graph/xml.cc, all versions).
pub fn max_nvlink_lanes(sm: u32) -> u32 {
    match sm {
        s if s < 60 => 0,
        s if s < 70 => 4,
        s if s < 80 => 6,
        s if s < 90 => 12,
        _ => 18,
    }
}

/// A device with defaults merged and checked, waiting to become a node.
enum ItemKind {
    Switch(PciSwitch),
    Gpu(Box<Gpu>, Option<C2cInfo>),
    Nic(Nic, Vec<Net>),
    Device(PciDevice),
}

enum Parent {
    Numa(usize),
    Item(usize),
}

struct Item {
    parent: Parent,
    kind: ItemKind,
}

struct Flattener<'a> {
    p: &'a Profile,
    items: Vec<Item>,
    /// Every bus id seen, with what it was, for duplicate detection.
    seen: HashMap<BusId, String>,
}

fn pcie(link: Option<&LinkSpec>) -> PcieLink {
    match link {
        Some(l) => PcieLink::new(Some(&l.speed), Some(l.width)),
        None => PcieLink::default(),
    }
}

fn id16(h: Option<schema::Hex>, what: &str, ctx: &str) -> Result<Option<u16>, String> {
    h.map(|x| x.u16(what).map_err(|e| format!("{ctx}: {e}")))
        .transpose()
}

impl<'a> Flattener<'a> {
    fn claim(&mut self, bus: BusId, what: String) -> Result<(), String> {
        if let Some(prev) = self.seen.get(&bus) {
            return Err(format!("duplicate pci bus id {bus} ({prev} and {what})"));
        }
        self.seen.insert(bus, what);
        Ok(())
    }

    fn push(&mut self, parent: Parent, kind: ItemKind) -> usize {
        self.items.push(Item { parent, kind });
        self.items.len() - 1
    }

    #[allow(clippy::too_many_arguments)]
    fn children(
        &mut self,
        at: impl Fn() -> Parent,
        ctx: &str,
        switches: &[SwitchSpec],
        gpus: &[schema::Short<GpuSpec>],
        nics: &[schema::Short<NicSpec>],
        devices: &[schema::DeviceSpec],
    ) -> Result<(), String> {
        for g in gpus {
            self.gpu(at(), &g.0, ctx)?;
        }
        for n in nics {
            self.nic(at(), &n.0, ctx)?;
        }
        for d in devices {
            let what = format!("device {} under {ctx}", d.bus);
            self.claim(d.bus, what.clone())?;
            let dev = PciDevice {
                busid: d.bus,
                class: d.class.u24("class").map_err(|e| format!("{what}: {e}"))?,
                vendor: id16(d.vendor, "vendor", &what)?,
                device: id16(d.device, "device", &what)?,
                driver: d.driver.clone(),
                pcie: pcie(d.link.as_ref()),
            };
            self.push(at(), ItemKind::Device(dev));
        }
        for s in switches {
            self.switch(at(), s, ctx)?;
        }
        Ok(())
    }

    fn switch(&mut self, parent: Parent, s: &SwitchSpec, ctx: &str) -> Result<(), String> {
        let d = self.p.defaults.switch.clone().unwrap_or_default();
        let bus = s
            .bus
            .ok_or_else(|| format!("a pci switch under {ctx} has no bus id"))?;
        let what = format!("switch {bus}");
        self.claim(bus, what.clone())?;
        let sw = PciSwitch {
            busid: bus,
            class: class::BRIDGE,
            vendor: id16(s.vendor.or(d.vendor), "vendor", &what)?,
            device: id16(s.device.or(d.device), "device", &what)?,
            subsystem_vendor: id16(
                s.subsystem_vendor.or(d.subsystem_vendor),
                "subsystem_vendor",
                &what,
            )?,
            subsystem_device: id16(
                s.subsystem_device.or(d.subsystem_device),
                "subsystem_device",
                &what,
            )?,
            pcie: pcie(s.link.as_ref().or(d.link.as_ref())),
        };
        let me = self.push(parent, ItemKind::Switch(sw));
        self.children(
            || Parent::Item(me),
            &what,
            &s.switches,
            &s.gpus,
            &s.nics,
            &s.devices,
        )
    }

    fn gpu(&mut self, parent: Parent, g: &GpuSpec, ctx: &str) -> Result<(), String> {
        let d = self.p.defaults.gpu.clone().unwrap_or_default();
        let bus = g
            .bus
            .ok_or_else(|| format!("a gpu under {ctx} has no bus id"))?;
        let what = format!("gpu {bus}");
        self.claim(bus, what.clone())?;
        let sm = g
            .sm
            .or(d.sm)
            .ok_or_else(|| format!("{what}: missing sm (set it on the gpu or in defaults.gpu)"))?;
        if g.index.is_some_and(|i| i < 0) {
            return Err(format!("{what}: index must not be negative"));
        }
        let mut gpu = Gpu::new(bus, g.index.unwrap_or(-1));
        gpu.sm = Some(sm);
        gpu.name = g.name.clone().or(d.name);
        gpu.memory_bytes = g
            .memory_mib
            .or(d.memory_mib)
            .map(|m| m.saturating_mul(1 << 20));
        gpu.uuid = g.uuid.clone();
        gpu.gdr = g.gdr.or(d.gdr);
        gpu.p2p = g.p2p.or(d.p2p);
        if let Some(c) = g.class.or(d.class) {
            gpu.class = c.u24("class").map_err(|e| format!("{what}: {e}"))?;
            if !class::is_gpu(gpu.class) {
                return Err(format!(
                    "{what}: class {:#08x} is not a display/3d controller",
                    gpu.class
                ));
            }
        }
        gpu.vendor = id16(g.vendor.or(d.vendor), "vendor", &what)?.or(gpu.vendor);
        gpu.device = id16(g.device.or(d.device), "device", &what)?;
        gpu.subsystem_vendor = id16(
            g.subsystem_vendor.or(d.subsystem_vendor),
            "subsystem_vendor",
            &what,
        )?;
        gpu.subsystem_device = id16(
            g.subsystem_device.or(d.subsystem_device),
            "subsystem_device",
            &what,
        )?;
        gpu.pcie = pcie(g.link.as_ref().or(d.link.as_ref()));
        let c2c = g.c2c.clone().or(d.c2c).map(|c| C2cInfo {
            bw_mbps: c.bw_mbps,
            count: c.count,
        });
        if let Some(c) = &c2c {
            // NCCL only reads C2C for SM90+ GPUs (ncclTopoGetXmlFromGpu, src/graph/xml.cc, 2.21+).
            if sm < 90 {
                return Err(format!("{what}: c2c needs sm 90 or newer (sm is {sm})"));
            }
            if c.count == 0 || c.bw_mbps == 0 {
                return Err(format!("{what}: c2c needs a non-zero bw_mbps and count"));
            }
        }
        self.push(parent, ItemKind::Gpu(Box::new(gpu), c2c));
        Ok(())
    }

    fn nic(&mut self, parent: Parent, n: &NicSpec, ctx: &str) -> Result<(), String> {
        let d = self.p.defaults.nic.clone().unwrap_or_default();
        let bus = n
            .bus
            .ok_or_else(|| format!("a nic under {ctx} has no bus id"))?;
        let what = format!("nic {bus}");
        self.claim(bus, what.clone())?;
        let ports = n.ports.clone().or(d.ports).unwrap_or_default();
        if ports.is_empty() {
            return Err(format!(
                "{what}: no ports (list at least one, e.g. ports: [mlx5_0])"
            ));
        }
        let pd = self.p.defaults.port.clone().unwrap_or_default();
        let mut nets = Vec::new();
        for p in ports {
            let p: PortSpec = p.0;
            let name = p
                .name
                .clone()
                .ok_or_else(|| format!("{what}: a port has no name"))?;
            let link_layer = match p.link_layer.clone().or(pd.link_layer.clone()) {
                None => None,
                Some(l) => Some(match l.to_ascii_lowercase().as_str() {
                    "infiniband" | "ib" => "InfiniBand".to_string(),
                    "ethernet" | "eth" | "roce" => "Ethernet".to_string(),
                    _ => {
                        return Err(format!(
                            "{what}: port {name}: link_layer '{l}' is not InfiniBand or Ethernet"
                        ));
                    }
                }),
            };
            // -1: numbered later, in natural name order.
            let dev = p.dev.or(pd.dev).unwrap_or(-1);
            if p.dev.or(pd.dev).is_some_and(|d| d < 0) {
                return Err(format!("{what}: port {name}: dev must not be negative"));
            }
            let latency = p.latency.or(pd.latency).unwrap_or(0.0);
            if !latency.is_finite() || latency < 0.0 {
                return Err(format!(
                    "{what}: port {name}: latency must be a non-negative number of us"
                ));
            }
            nets.push(Net {
                name,
                dev,
                speed_mbps: p.speed.or(pd.speed),
                port: p.port.or(pd.port).unwrap_or(1),
                guid: p.guid.or(pd.guid).map(|h| h.0),
                gdr: p.gdr.or(pd.gdr).unwrap_or(false),
                gdr_unstated: p.gdr.or(pd.gdr).is_none(),
                coll: p.coll.or(pd.coll).unwrap_or(false),
                latency,
                maxconn: p.maxconn.or(pd.maxconn),
                link_layer,
                state: None,
                netdev: p.netdev.clone(),
                role: p.role.or(n.role).or(pd.role).or(d.role),
                socket: false,
                assumed: false,
            });
        }
        let class = match n.class.or(d.class) {
            Some(c) => {
                let c = c.u24("class").map_err(|e| format!("{what}: {e}"))?;
                if !class::is_network(c) {
                    return Err(format!(
                        "{what}: class {c:#08x} is not a network controller"
                    ));
                }
                c
            }
            None if nets
                .iter()
                .any(|x| x.link_layer.as_deref() == Some("InfiniBand")) =>
            {
                class::IB
            }
            None => class::ETHERNET,
        };
        let nic = Nic {
            busid: Some(bus),
            class,
            vendor: id16(n.vendor.or(d.vendor), "vendor", &what)?,
            device: id16(n.device.or(d.device), "device", &what)?,
            subsystem_vendor: id16(
                n.subsystem_vendor.or(d.subsystem_vendor),
                "subsystem_vendor",
                &what,
            )?,
            subsystem_device: id16(
                n.subsystem_device.or(d.subsystem_device),
                "subsystem_device",
                &what,
            )?,
            pcie: pcie(n.link.as_ref().or(d.link.as_ref())),
        };
        self.push(parent, ItemKind::Nic(nic, nets));
        Ok(())
    }
}

/// The most CPU numbers a cpu list may name (and so the most ranges in it): above any
/// machine NCCL's 64-bit cpu masks can describe several times over.
const MAX_CPUS: u32 = 65536;

/// `0-3,8` → [0, 1, 2, 3, 8], sorted and without repeats. Ranges are merged before they are
/// expanded, so the cost is the list's length (n log n) plus at most [`MAX_CPUS`]: expanding
/// each range as written made 200 000 overlapping `0-65535` ranges take 101 s.
fn parse_cpulist(s: &str) -> Result<Vec<u32>, String> {
    let bad = || format!("bad cpu list '{}' (expected e.g. 0-55,112-167)", shown(s));
    let mut ranges = Vec::new();
    for part in s.split(',').map(str::trim).filter(|p| !p.is_empty()) {
        if ranges.len() == MAX_CPUS as usize {
            return Err(format!(
                "cpu list with more than {MAX_CPUS} ranges (a machine has fewer CPUs); list each CPU once"
            ));
        }
        let (a, b) = match part.split_once('-') {
            Some((a, b)) => (a.trim(), b.trim()),
            None => (part, part),
        };
        let a: u32 = a.parse().map_err(|_| bad())?;
        let b: u32 = b.parse().map_err(|_| bad())?;
        if a > b || b >= MAX_CPUS {
            return Err(bad());
        }
        ranges.push((a, b));
    }
    if ranges.is_empty() {
        return Err(bad());
    }
    ranges.sort_unstable();
    let mut out: Vec<u32> = Vec::new();
    for (a, b) in ranges {
        let from = out.last().map_or(a, |&l| a.max(l + 1));
        out.extend(from..=b);
    }
    Ok(out)
}

/// The first 64 bytes of a long value, for an error line.
fn shown(s: &str) -> String {
    let mut end = s.len().min(64);
    while !s.is_char_boundary(end) {
        end -= 1;
    }
    if end < s.len() {
        format!("{}...", &s[..end])
    } else {
        s.to_string()
    }
}

/// The sysfs `cpumap` form NCCL writes as `affinity`: the kernel prints one hex digit per 4
/// CPUs of the machine, most significant first, with a comma every 8 digits from the right
/// (80 CPUs: `0000,0fffff00,000fffff`).
fn cpumap(cpus: &[u32], ncpus: u32) -> String {
    let digits = ncpus.div_ceil(4).max(1) as usize;
    let mut nibbles = vec![0u8; digits];
    for &c in cpus {
        if let Some(x) = nibbles.get_mut((c / 4) as usize) {
            *x |= 1 << (c % 4);
        }
    }
    let mut out = String::new();
    for (i, n) in nibbles.iter().enumerate().rev() {
        out.push(char::from_digit(u32::from(*n), 16).unwrap_or('0'));
        if i % 8 == 0 && i != 0 {
            out.push(',');
        }
    }
    out
}

/// Validates the whole profile and builds its topology (host 0).
/// Counts devices before building: validation and the model are not linear in the device
/// count, and NCCL holds at most 640 of a kind per node (`source::MAX_PER_HOST`), so a larger
/// profile is refused in microseconds instead of after minutes.
fn check_size(p: &Profile) -> Result<(), String> {
    #[derive(Default)]
    struct Count {
        gpus: usize,
        nics: usize,
        ports: usize,
        switches: usize,
        devices: usize,
    }
    fn add(
        c: &mut Count,
        gpus: usize,
        nics: &[Short<NicSpec>],
        devices: usize,
        switches: &[SwitchSpec],
    ) {
        c.gpus += gpus;
        c.nics += nics.len();
        c.ports += nics
            .iter()
            .map(|n| n.0.ports.as_ref().map_or(1, Vec::len))
            .sum::<usize>();
        c.devices += devices;
        c.switches += switches.len();
        for s in switches {
            add(c, s.gpus.len(), &s.nics, s.devices.len(), &s.switches);
        }
    }
    let mut c = Count::default();
    for n in &p.numa {
        add(&mut c, n.gpus.len(), &n.nics, n.devices.len(), &n.switches);
    }
    let max = super::MAX_PER_HOST;
    for (what, n) in [
        ("gpus", c.gpus),
        ("nics", c.nics),
        ("ports", c.ports),
        ("switches", c.switches),
        ("devices", c.devices),
    ] {
        if n > max {
            return Err(format!(
                "{n} {what}, more than the {max} NCCL can hold per node"
            ));
        }
    }
    Ok(())
}

fn build(p: &Profile) -> Result<Topology, String> {
    if p.name.trim().is_empty() {
        return Err("name is empty".into());
    }
    if p.numa.is_empty() {
        return Err("no numa nodes (list at least one under numa:)".into());
    }
    check_size(p)?;
    let (cpulists, ncpus) = numa_cpus(p)?;
    let mut f = Flattener {
        p,
        items: vec![],
        seen: HashMap::new(),
    };
    for (i, n) in p.numa.iter().enumerate() {
        let ctx = format!("numa {}", n.id);
        f.children(
            || Parent::Numa(i),
            &ctx,
            &n.switches,
            &n.gpus,
            &n.nics,
            &n.devices,
        )?;
    }
    let Flattener {
        mut items,
        mut seen,
        ..
    } = f;
    let gpus = number_gpus(&mut items)?;
    number_nets(&mut items)?;
    let links = nvlinks(p, &items, &gpus, &mut seen)?;
    check_domain(p, &items)?;
    let mut topo = Topology::new(SourceInfo {
        kind: topo_model::SourceKind::Profile,
        origin: None,
        ..Default::default()
    });
    topo.hosts[0] = host_of(p);
    let cpu_nodes = add_cpus(&mut topo, p, &cpulists, ncpus);
    let gpu_node = add_items(&mut topo, p, items, &cpu_nodes);
    add_nvlinks(&mut topo, p, &links, &gpu_node)?;
    topo.connect_cpus();
    if let Some(f) = &p.host.fabric {
        let facts = topo_vocab::FabricFacts {
            fabric: Some(
                f.name
                    .parse()
                    .map_err(|e| format!("host.fabric.name: {e}"))?,
            ),
            latency_us: f.latency,
            sharp: f.sharp,
            ..Default::default()
        };
        let via = format!("profile {}", p.name);
        let notes = topo_model::netfacts::apply(&mut topo, &facts, Some(&via));
        topo.source.stated.extend(notes);
    }
    Ok(topo)
}

/// Each NUMA node's CPUs, `None` where the profile lists none.
type CpuLists = Vec<Option<Vec<u32>>>;

/// Each NUMA node's CPU list, checked, and the CPU count they imply.
fn numa_cpus(p: &Profile) -> Result<(CpuLists, u32), String> {
    let mut numa_ids = BTreeSet::new();
    let mut cpulists = Vec::new();
    for n in &p.numa {
        if !numa_ids.insert(n.id) {
            return Err(format!("duplicate numa id {}", n.id));
        }
        // sysfs says numa_node -1 for a device without NUMA affinity; NCCL hangs such devices
        // under a `<cpu numaid="-1">` whose affinity it cannot read, so it stays empty
        // (ncclTopoGetPciNode / ncclTopoGetXmlFromCpu, NCCL 2.28.9 src/graph/xml.cc).
        if n.id < -1 {
            return Err(format!(
                "numa id {} is negative (use -1 for devices without NUMA affinity)",
                n.id
            ));
        }
        if n.id == -1 && (n.cpus.is_some() || n.affinity.is_some()) {
            return Err(
                "numa -1 holds devices without NUMA affinity and has no CPUs (drop its cpus/affinity)"
                    .into(),
            );
        }
        let list = n
            .cpus
            .as_deref()
            .map(parse_cpulist)
            .transpose()
            .map_err(|e| format!("numa {}: {e}", n.id))?;
        cpulists.push(list);
    }
    let ncpus = cpulists
        .iter()
        .flatten()
        .flat_map(|l| l.iter().copied())
        .max()
        .map(|m| m + 1)
        .unwrap_or(0);

    Ok((cpulists, ncpus))
}

/// The GPUs once numbered: item positions in bus-id order, index to bus id, bus id to sm.
struct Gpus {
    items: Vec<usize>,
    by_index: BTreeMap<i32, BusId>,
    sm_of: HashMap<BusId, u32>,
}

/// GPU indices: explicit ones kept, the rest numbered in bus-id order (NVML's order).
fn number_gpus(items: &mut [Item]) -> Result<Gpus, String> {
    let mut gpu_items: Vec<usize> = items
        .iter()
        .enumerate()
        .filter(|(_, it)| matches!(it.kind, ItemKind::Gpu(..)))
        .map(|(i, _)| i)
        .collect();
    if gpu_items.is_empty() {
        return Err("no gpus".into());
    }
    gpu_items.sort_by_key(|&i| bus_of(&items[i]));
    let explicit: BTreeSet<i32> = gpu_items
        .iter()
        .filter_map(|&i| match &items[i].kind {
            ItemKind::Gpu(g, _) if g.dev >= 0 => Some(g.dev),
            _ => None,
        })
        .collect();
    let mut free = (0..).filter(|x| !explicit.contains(x));
    let mut by_index: BTreeMap<i32, BusId> = BTreeMap::new();
    for &i in &gpu_items {
        if let ItemKind::Gpu(g, _) = &mut items[i].kind {
            if g.dev < 0 {
                g.dev = free.next().unwrap_or(0);
            }
            if let Some(prev) = by_index.insert(g.dev, g.busid) {
                return Err(format!(
                    "gpus {prev} and {} both have index {}",
                    g.busid, g.dev
                ));
            }
        }
    }
    let sm_of: HashMap<BusId, u32> = gpu_items
        .iter()
        .filter_map(|&i| match &items[i].kind {
            ItemKind::Gpu(g, _) => Some((g.busid, g.sm.unwrap_or(0))),
            _ => None,
        })
        .collect();

    Ok(Gpus {
        items: gpu_items,
        by_index,
        sm_of,
    })
}

fn bus_of(it: &Item) -> BusId {
    match &it.kind {
        ItemKind::Gpu(g, _) => g.busid,
        _ => BusId::default(),
    }
}

/// Net devices: explicit ones kept, the rest numbered in natural name order (mlx5_2 before
/// mlx5_10), which is how the IB plugin usually enumerates them; devices and port names
/// unique, since NCCL matches both.
fn number_nets(items: &mut [Item]) -> Result<(), String> {
    let explicit_devs: BTreeSet<i32> = items
        .iter()
        .filter_map(|it| match &it.kind {
            ItemKind::Nic(_, nets) => Some(nets.iter().map(|n| n.dev).filter(|&d| d >= 0)),
            _ => None,
        })
        .flatten()
        .collect();
    let mut unnumbered: Vec<(Vec<NameChunk>, usize, usize)> = Vec::new();
    for (i, it) in items.iter().enumerate() {
        if let ItemKind::Nic(_, nets) = &it.kind {
            for (k, n) in nets.iter().enumerate() {
                if n.dev < 0 {
                    unnumbered.push((natural_key(&n.name), i, k));
                }
            }
        }
    }
    unnumbered.sort();
    let mut free_dev = (0..).filter(|x| !explicit_devs.contains(x));
    for (_, i, k) in unnumbered {
        if let ItemKind::Nic(_, nets) = &mut items[i].kind
            && let Some(n) = nets.get_mut(k)
        {
            n.dev = free_dev.next().unwrap_or(0);
        }
    }

    let mut devs = BTreeMap::new();
    let mut names = BTreeSet::new();
    for it in items.iter() {
        if let ItemKind::Nic(nic, nets) = &it.kind {
            for n in nets {
                if let Some(prev) = devs.insert(n.dev, n.name.clone()) {
                    return Err(format!(
                        "ports {prev} and {} both have dev {}",
                        n.name, n.dev
                    ));
                }
                if !names.insert(n.name.clone()) {
                    return Err(format!(
                        "duplicate port name {} (nic {})",
                        n.name,
                        nic.busid.unwrap_or_default()
                    ));
                }
            }
        }
    }

    Ok(())
}

/// The NVLinks a profile states: the NVSwitch fabric's GPUs and each GPU pair's lanes.
struct Links {
    fabric: Vec<BusId>,
    pairs: Vec<(BusId, BusId, u32)>,
}

/// NVLink: GPU references resolved, lanes per GPU counted against the generation maximum.
fn nvlinks(
    p: &Profile,
    items: &[Item],
    gpus: &Gpus,
    seen: &mut HashMap<BusId, String>,
) -> Result<Links, String> {
    let (gpu_items, by_index, sm_of) = (&gpus.items, &gpus.by_index, &gpus.sm_of);
    let resolve = |r: &GpuRef, what: &str| -> Result<BusId, String> {
        match r {
            GpuRef::Index(i) => by_index.get(i).copied().ok_or_else(|| {
                format!(
                    "{what} names gpu index {i}, but the gpus are {}",
                    index_range(by_index)
                )
            }),
            GpuRef::Bus(b) if sm_of.contains_key(b) => Ok(*b),
            GpuRef::Bus(b) => Err(format!(
                "{what} names {b}, which is not a gpu of this profile"
            )),
        }
    };
    let mut lanes: BTreeMap<BusId, u32> = BTreeMap::new();
    let mut fabric: Vec<BusId> = Vec::new();
    if let Some(s) = &p.nvlink.nvswitch {
        if s.chips.is_empty() {
            return Err("nvlink.nvswitch: no chips".into());
        }
        if s.lanes.len() != s.chips.len() {
            return Err(format!(
                "nvlink.nvswitch: {} chips but {} lane counts (give one per chip)",
                s.chips.len(),
                s.lanes.len()
            ));
        }
        if s.lanes.contains(&0) {
            return Err("nvlink.nvswitch: a lane count is 0 (leave the chip out instead)".into());
        }
        for &c in &s.chips {
            if let Some(prev) = seen.get(&c) {
                return Err(format!(
                    "duplicate pci bus id {c} ({prev} and nvswitch {c})"
                ));
            }
            seen.insert(c, format!("nvswitch {c}"));
        }
        fabric = match &s.gpus {
            Some(list) => {
                let mut v = Vec::new();
                for r in list {
                    let b = resolve(r, "nvlink.nvswitch.gpus")?;
                    if v.contains(&b) {
                        return Err(format!("nvlink.nvswitch.gpus lists {r} twice"));
                    }
                    v.push(b);
                }
                v
            }
            // Bus-id order keeps edge insertion (and so every later output) deterministic.
            None => gpu_items.iter().map(|&i| bus_of(&items[i])).collect(),
        };
        let per_gpu: u32 = s.lanes.iter().sum();
        for b in &fabric {
            *lanes.entry(*b).or_default() += per_gpu;
        }
    }
    let mut pairs: Vec<(BusId, BusId, u32)> = Vec::new();
    for (k, pair) in p.nvlink.pairs.iter().enumerate() {
        let what = format!("nvlink.pairs[{k}]");
        let a = resolve(&pair.a, &what)?;
        let b = resolve(&pair.b, &what)?;
        if a == b {
            return Err(format!("{what} links {} to itself", pair.a));
        }
        if pair.lanes == 0 {
            return Err(format!("{what}: lanes is 0"));
        }
        if pairs
            .iter()
            .any(|&(x, y, _)| (x, y) == (a, b) || (x, y) == (b, a))
        {
            return Err(format!(
                "{what}: {} ↔ {} is listed twice (give the total lanes once)",
                pair.a, pair.b
            ));
        }
        pairs.push((a, b, pair.lanes));
        *lanes.entry(a).or_default() += pair.lanes;
        *lanes.entry(b).or_default() += pair.lanes;
    }
    for (b, n) in &lanes {
        let sm = sm_of.get(b).copied().unwrap_or(0);
        let max = max_nvlink_lanes(sm);
        if *n > max {
            return Err(format!(
                "gpu {b} has {n} nvlink lanes, more than the {max} an sm {sm} gpu can have"
            ));
        }
    }

    Ok(Links { fabric, pairs })
}

/// `host.nvlink_domain` holds the host's GPUs and comes with the NVSwitches that make it.
fn check_domain(p: &Profile, items: &[Item]) -> Result<(), String> {
    if let Some(d) = &p.host.nvlink_domain {
        let gpus = gpu_node_count(items);
        // NVLink 5 domains reach 576 GPUs (NVIDIA Mission Control, "NVLink Technology").
        if d.gpus == 0 || d.gpus > 576 || (d.gpus as usize) < gpus {
            return Err(format!(
                "host.nvlink_domain.gpus {} must hold the host's {gpus} GPUs and be at most 576",
                d.gpus
            ));
        }
        if p.nvlink.nvswitch.is_none() {
            return Err(
                "host.nvlink_domain needs nvlink.nvswitch: the domain's GPUs reach each other through NVSwitches"
                    .into(),
            );
        }
    }

    Ok(())
}

fn host_of(p: &Profile) -> topo_model::Host {
    let h = &p.host;
    topo_model::Host {
        name: Some(h.name.clone().unwrap_or_else(|| p.name.clone())),
        kernel: h.kernel.clone(),
        driver_version: h.driver_version.clone(),
        cuda_driver_version: h.cuda_driver_version.clone(),
        nvml_version: h.nvml_version.clone(),
        env: h.env.clone(),
        nvls: h.nvls.map(|value| topo_model::FactNote {
            value,
            why: format!("host.nvls: {value} in the profile"),
        }),
        nvlink_domain: h
            .nvlink_domain
            .as_ref()
            .map(|d| topo_model::NvlinkDomain { gpus: d.gpus }),
        ..Default::default()
    }
}

/// One CPU node per NUMA node, affinity computed from the cpu lists when not given.
fn add_cpus(
    topo: &mut Topology,
    p: &Profile,
    cpulists: &[Option<Vec<u32>>],
    ncpus: u32,
) -> Vec<NodeIndex> {
    let host: HostId = 0;
    let mut cpu_nodes = Vec::new();
    for (n, list) in p.numa.iter().zip(cpulists) {
        let cpu = Cpu {
            numa: n.id,
            cpus: n.cpus.clone(),
            affinity: n
                .affinity
                .clone()
                .or_else(|| list.as_ref().map(|l| cpumap(l, ncpus))),
            arch: Some(topo_model::nccl_arch(&p.cpu.arch)),
            vendor: p.cpu.vendor.clone(),
            family: p.cpu.family,
            model: p.cpu.model,
            model_name: p.cpu.model_name.clone(),
            host_hash: None,
        };
        cpu_nodes.push(topo.add_node(host, None, NodeKind::Cpu(cpu)));
    }
    cpu_nodes
}

/// The PCI items under their parents, C2C links to their root CPU; GPU nodes by bus id.
fn add_items(
    topo: &mut Topology,
    p: &Profile,
    items: Vec<Item>,
    cpu_nodes: &[NodeIndex],
) -> HashMap<BusId, NodeIndex> {
    let fabric_info = fabric_info(p);
    let mut nodes: Vec<NodeIndex> = Vec::with_capacity(items.len());
    let mut gpu_node: HashMap<BusId, NodeIndex> = HashMap::new();
    let mut c2c_links = Vec::new();
    for it in items {
        let parent = match it.parent {
            Parent::Numa(i) => cpu_nodes[i],
            Parent::Item(j) => nodes[j],
        };
        let idx = match it.kind {
            ItemKind::Switch(s) => topo.add_child(parent, NodeKind::PciSwitch(s)),
            ItemKind::Device(d) => topo.add_child(parent, NodeKind::PciDevice(d)),
            ItemKind::Gpu(mut g, c2c) => {
                g.c2c = c2c.clone();
                if g.fabric.is_none() {
                    g.fabric = fabric_info.clone();
                }
                let bus = g.busid;
                let idx = topo.add_child(parent, NodeKind::gpu(*g));
                gpu_node.insert(bus, idx);
                if let Some(c) = c2c {
                    c2c_links.push((idx, c));
                }
                idx
            }
            ItemKind::Nic(nic, nets) => {
                let idx = topo.add_child(parent, NodeKind::Nic(nic));
                for n in nets {
                    topo.add_child(idx, NodeKind::Net(n));
                }
                idx
            }
        };
        nodes.push(idx);
    }
    // C2C joins a GPU to the CPU at the root of its PCI chain (ncclTopoAddC2c, src/graph/topo.cc).
    for (g, c) in c2c_links {
        if let Some(cpu) = topo.root_cpu(g) {
            let bw = c.bw_mbps as f64 * c.count as f64 / 1000.0;
            topo.connect_both(
                g,
                cpu,
                Link {
                    kind: LinkKind::C2c,
                    bw,
                    lanes: c.count,
                },
            );
        }
    }
    gpu_node
}

fn fabric_info(p: &Profile) -> Option<topo_model::FabricInfo> {
    p.host
        .nvlink_domain
        .as_ref()
        .map(|d| topo_model::FabricInfo {
            cluster_uuid: d
                .cluster_uuid
                .clone()
                .unwrap_or_else(|| format!("{}-fabric", p.name)),
            clique_id: d.clique_id.unwrap_or(0x7ffe),
            state: "completed".into(),
            status: Some("success".into()),
        })
}

fn add_nvlinks(
    topo: &mut Topology,
    p: &Profile,
    links: &Links,
    gpu_node: &HashMap<BusId, NodeIndex>,
) -> Result<(), String> {
    let host: HostId = 0;
    if let Some(s) = &p.nvlink.nvswitch {
        let ctx = "nvlink.nvswitch";
        let vendor = id16(s.vendor, "vendor", ctx)?.or(Some(0x10de));
        let device = id16(s.device, "device", ctx)?;
        let chips: Vec<NodeIndex> = s
            .chips
            .iter()
            .map(|&b| {
                topo.add_node(
                    host,
                    None,
                    NodeKind::NvSwitch(NvSwitch {
                        busid: Some(b),
                        vendor,
                        device,
                    }),
                )
            })
            .collect();
        for b in &links.fabric {
            if let Some(&g) = gpu_node.get(b) {
                for (&chip, &l) in chips.iter().zip(&s.lanes) {
                    topo.add_nvlink(g, chip, l);
                }
            }
        }
    }
    for &(a, b, l) in &links.pairs {
        if let (Some(&ga), Some(&gb)) = (gpu_node.get(&a), gpu_node.get(&b)) {
            topo.add_nvlink(ga, gb, l);
            topo.add_nvlink(gb, ga, l);
        }
    }
    Ok(())
}

fn gpu_node_count(items: &[Item]) -> usize {
    items
        .iter()
        .filter(|i| matches!(i.kind, ItemKind::Gpu(..)))
        .count()
}

#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord)]
enum NameChunk {
    Text(String),
    Num(u64),
}

/// Sort key that orders embedded numbers by value: `mlx5_2` < `mlx5_10`.
fn natural_key(s: &str) -> Vec<NameChunk> {
    let mut out = Vec::new();
    let mut chars = s.chars().peekable();
    while let Some(&c) = chars.peek() {
        let digit = c.is_ascii_digit();
        let mut run = String::new();
        while let Some(&d) = chars.peek() {
            if d.is_ascii_digit() != digit {
                break;
            }
            run.push(d);
            chars.next();
        }
        out.push(match run.parse::<u64>() {
            Ok(n) if digit => NameChunk::Num(n),
            _ => NameChunk::Text(run),
        });
    }
    out
}

fn index_range(by_index: &BTreeMap<i32, BusId>) -> String {
    match (by_index.keys().next(), by_index.keys().next_back()) {
        (Some(a), Some(b)) if by_index.len() as i32 == b - a + 1 => format!("{a}..{b}"),
        _ => by_index
            .keys()
            .map(|k| k.to_string())
            .collect::<Vec<_>>()
            .join(", "),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn gpu_names_as_cuda_prints_them_map_to_existing_profiles() {
        for (name, want) in [
            ("NVIDIA H100 80GB HBM3", Some("dgx-h100")),
            ("NVIDIA H100 PCIe", Some("pcie-8x-h100-nvbridge")),
            ("NVIDIA H100 NVL", Some("pcie-8x-h100-nvbridge")),
            ("NVIDIA H200", Some("hgx-h200")),
            ("NVIDIA A100-SXM4-80GB", Some("dgx-a100")),
            ("NVIDIA A100 80GB PCIe", Some("pcie-8x-a100-nvbridge")),
            ("Tesla V100-SXM2-32GB", Some("dgx-v100")),
            ("Tesla V100-PCIE-16GB", None),
            ("NVIDIA B200", Some("dgx-b200")),
            ("NVIDIA GB200", Some("gb200-nvl72")),
            ("NVIDIA GeForce RTX 4090", Some("2x-rtx4090")),
            ("NVIDIA L40S", Some("pcie-8x-l40s")),
            ("NVIDIA Graphics Device", None),
        ] {
            assert_eq!(for_gpu_name(name), want, "{name}");
            if let Some(p) = want {
                assert!(builtin_text(p).is_some(), "{p}");
            }
        }
    }

    const MINI: &str = r#"
name: mini
cpu: {arch: x86_64, vendor: GenuineIntel, family: 6, model: 143}
defaults:
  gpu: {sm: 90, link: gen5x16, gdr: true}
  port: {speed: 400000, link_layer: InfiniBand, gdr: true}
numa:
  - id: 0
    cpus: "0-3"
    switches:
      - bus: "0000:10:00.0"
        link: gen5x16
        gpus: ["0000:11:00.0"]
        nics: [{bus: "0000:12:00.0", ports: [mlx5_0]}]
  - id: 1
    cpus: "4-7"
    gpus: ["0000:91:00.0"]
nvlink:
  nvswitch: {chips: ["0000:05:00.0", "0000:06:00.0"], lanes: [9, 9]}
"#;

    /// The file cap is what bounds a profile's memory (a loaded YAML costs about 150 times
    /// its size): a file past it is refused before it is parsed.
    #[test]
    fn a_profile_past_its_cap_is_refused_unparsed() {
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("big.yaml");
        let body = format!("name: big\nnotes: [{}1]\n", "1,".repeat(150_000));
        std::fs::write(&p, body).unwrap();
        let e = crate::error::one_line(&load_file(&p).unwrap_err());
        assert!(
            e.contains("too large for a profile (at most 256 KiB)"),
            "{e}"
        );
    }

    fn err(yaml: &str) -> String {
        match load_str(yaml, "t.yaml", "t.yaml") {
            Ok(_) => panic!("expected an error for:\n{yaml}"),
            Err(e) => crate::error::one_line(&e),
        }
    }

    /// A NIC without NUMA affinity (sysfs numa_node -1) sits under NCCL's `numaid -1` CPU with
    /// no affinity, not under a made-up CPU; CPU lists on it and ids below -1 are refused.
    #[test]
    fn devices_without_numa_affinity_hang_off_numa_minus_1() {
        let yaml = "name: n\ncpu: {arch: x86_64, vendor: GenuineIntel}\n\
            defaults: {port: {speed: 100000, link_layer: Ethernet}}\n\
            numa:\n  - id: 0\n    cpus: \"0-3\"\n    gpus: [{bus: \"0000:10:00.0\", sm: 90}]\n\
            \x20 - id: -1\n    nics: [{bus: \"0000:20:00.0\", ports: [eth0]}]\n";
        let t = load_str(yaml, "t.yaml", "t.yaml").unwrap();
        let nic = t.nics().next().unwrap();
        let cpu = t.root_cpu(nic).unwrap();
        let c = t.cpu(cpu).unwrap();
        assert_eq!(c.numa, -1);
        assert_eq!(c.affinity, None);
        assert_eq!(t.numa_of(t.gpus()[0]), 0);
        let with_cpus = yaml.replace("id: -1\n", "id: -1\n    cpus: \"4-7\"\n");
        assert!(err(&with_cpus).contains("numa -1 holds devices without NUMA affinity"));
        assert!(err(&yaml.replace("id: -1", "id: -2")).contains("use -1 for devices without NUMA"));
    }

    #[test]
    fn mini_profile_builds() {
        let t = load_str(MINI, "t.yaml", "t.yaml").unwrap();
        assert_eq!(t.gpus().len(), 2);
        assert_eq!(t.nvswitches().count(), 2);
        assert_eq!(t.cpus().count(), 2);
        let g0 = t.gpus()[0];
        assert_eq!(t.gpu(g0).unwrap().dev, 0);
        let nv: u32 = t.nvlinks(g0).iter().map(|l| l.1).sum();
        assert_eq!(nv, 18);
        assert_eq!(t.numa_of(t.gpus()[1]), 1);
        let net = t.net(t.nets()[0]).unwrap();
        assert_eq!(
            (net.name.as_str(), net.dev, net.speed_mbps, net.gdr),
            ("mlx5_0", 0, Some(400000), true)
        );
        let nic = t.nics().next().unwrap();
        match &t.node(nic).kind {
            NodeKind::Nic(n) => assert_eq!(n.class, class::IB),
            _ => unreachable!(),
        }
        assert_eq!(
            t.cpu(t.cpus().next().unwrap()).unwrap().affinity.as_deref(),
            Some("0f")
        );
        assert_eq!(t.source.kind, topo_model::SourceKind::Profile);
        assert_eq!(t.hosts[0].name.as_deref(), Some("mini"));
    }

    #[test]
    fn cpumap_matches_a_real_dump() {
        // nccl-tests #256 H200 dump: NUMA 0 = CPUs 0-23,96-119 of 192.
        let l = parse_cpulist("0-23,96-119").unwrap();
        assert_eq!(
            cpumap(&l, 192),
            "00000000,00000000,00ffffff,00000000,00000000,00ffffff"
        );
        // nccl #671 DGX-1V dump: NUMA 0 = CPUs 0-19,40-59 of 80.
        let l = parse_cpulist("0-19,40-59").unwrap();
        assert_eq!(cpumap(&l, 80), "0000,0fffff00,000fffff");
        // realdata rwkvinllama dump: NUMA 3 = CPUs 6,7,14,15 of 16.
        assert_eq!(cpumap(&parse_cpulist("6-7,14-15").unwrap(), 16), "c0c0");
        assert!(parse_cpulist("3-1").is_err());
        assert!(parse_cpulist("a").is_err());
        assert!(parse_cpulist("").is_err());
    }

    #[test]
    fn cpulist_overlapping_ranges_merge_and_bound() {
        assert_eq!(
            parse_cpulist("4-6,0-5,5").unwrap(),
            vec![0, 1, 2, 3, 4, 5, 6]
        );
        // 65 536 full-range entries: at the limit, merged into one range, fast.
        let at = vec!["0-65535"; 65536].join(",");
        assert_eq!(parse_cpulist(&at).unwrap().len(), 65536);
        let over = vec!["1"; 65537].join(",");
        let e = parse_cpulist(&over).unwrap_err();
        assert!(e.contains("more than 65536 ranges"), "{e}");
        let e = parse_cpulist(&format!("{}x", "9".repeat(100_000))).unwrap_err();
        assert!(e.len() < 200, "{e}");
    }

    #[test]
    fn generation_lane_maxima() {
        assert_eq!(
            [50, 60, 70, 80, 86, 89, 90, 100].map(max_nvlink_lanes),
            [0, 4, 6, 12, 12, 12, 18, 18]
        );
    }

    #[test]
    fn yaml_errors_name_file_line_and_column() {
        let e =
            err("name: x\ncpu: {arch: x86_64}\nnuma:\n  - id: 0\n    gpus: [\"0000:11:00.0\"\n");
        assert!(e.starts_with("cannot parse t.yaml: line "), "{e}");
        let e = err(&MINI.replace("gdr: true}", "gdrr: true}"));
        assert!(
            e.contains("line 5 column") && e.contains("unknown field `gdrr`"),
            "{e}"
        );
        let e = err(&MINI.replace("bus: \"0000:10:00.0\"", "bus: \"0000:10:00\""));
        assert!(e.contains("bad pci bus id '0000:10:00'"), "{e}");
    }

    #[test]
    fn validation_errors() {
        let cases: &[(&str, &str, &str)] = &[
            (
                "\"0000:91:00.0\"",
                "\"0000:11:00.0\"",
                "duplicate pci bus id 0000:11:00.0 (gpu 0000:11:00.0 and gpu 0000:11:00.0)",
            ),
            (
                "lanes: [9, 9]",
                "lanes: [10, 9]",
                "has 19 nvlink lanes, more than the 18 an sm 90 gpu can have",
            ),
            ("lanes: [9, 9]", "lanes: [9]", "2 chips but 1 lane counts"),
            (
                "\"0000:06:00.0\"]",
                "\"0000:11:00.0\"]",
                "duplicate pci bus id 0000:11:00.0 (gpu 0000:11:00.0 and nvswitch",
            ),
            ("{sm: 90, ", "{", "missing sm"),
            ("ports: [mlx5_0]", "ports: []", "no ports"),
            (
                "link_layer: InfiniBand",
                "link_layer: FibreChannel",
                "is not InfiniBand or Ethernet",
            ),
            ("id: 1", "id: 0", "duplicate numa id 0"),
            ("cpus: \"4-7\"", "cpus: \"7-4\"", "numa 1: bad cpu list"),
        ];
        for (from, to, want) in cases {
            let y = MINI.replacen(from, to, 1);
            assert_ne!(y, MINI, "{from}");
            let e = err(&y);
            assert!(e.contains(want), "{from} -> {to}: {e}");
            assert!(e.starts_with("invalid profile t.yaml: "), "{e}");
        }
    }

    #[test]
    fn nvlink_pairs() {
        let base = MINI.replace(
            "  nvswitch: {chips: [\"0000:05:00.0\", \"0000:06:00.0\"], lanes: [9, 9]}",
            "  pairs: [{a: 0, b: 1, lanes: 4}]",
        );
        let t = load_str(&base, "t.yaml", "t.yaml").unwrap();
        let (g0, g1) = (t.gpus()[0], t.gpus()[1]);
        assert_eq!(t.nvlinks(g0), vec![(g1, 4, 4.0 * 20.6)]);
        assert_eq!(t.nvlinks(g1), vec![(g0, 4, 4.0 * 20.6)]);
        assert_eq!(t.nvswitches().count(), 0);
        let e = err(&base.replace("b: 1", "b: 7"));
        assert!(
            e.contains("nvlink.pairs[0] names gpu index 7, but the gpus are 0..1"),
            "{e}"
        );
        let e = err(&base.replace("b: 1", "b: \"0000:12:00.0\""));
        assert!(e.contains("names 0000:12:00.0, which is not a gpu"), "{e}");
        let e = err(&base.replace("b: 1", "b: 0"));
        assert!(e.contains("links gpu 0 to itself"), "{e}");
        let e = err(&base.replace("lanes: 4}]", "lanes: 4}, {a: 1, b: 0, lanes: 2}]"));
        assert!(e.contains("listed twice"), "{e}");
        let e = err(&base.replace("lanes: 4}", "lanes: 19}"));
        assert!(e.contains("19 nvlink lanes"), "{e}");
        let e = err(&base
            .replace("sm: 90", "sm: 75")
            .replace("lanes: 4}", "lanes: 7}"));
        assert!(
            e.contains("has 7 nvlink lanes, more than the 6 an sm 75 gpu can have"),
            "{e}"
        );
        let e = err(&base.replace("sm: 90", "sm: 52"));
        assert!(e.contains("more than the 0 an sm 52 gpu can have"), "{e}");
    }

    #[test]
    fn explicit_indices_and_c2c() {
        let y = MINI
            .replace(
                "gpus: [\"0000:11:00.0\"]",
                "gpus: [{bus: \"0000:11:00.0\", index: 1}]",
            )
            .replace(
                "gpus: [\"0000:91:00.0\"]",
                "gpus: [{bus: \"0000:91:00.0\", c2c: {bw_mbps: 44712, count: 10}}]",
            );
        let t = load_str(&y, "t.yaml", "t.yaml").unwrap();
        let g = t.gpus();
        assert_eq!(t.gpu(g[0]).unwrap().busid.to_string(), "0000:91:00.0");
        assert_eq!(t.gpu(g[1]).unwrap().busid.to_string(), "0000:11:00.0");
        let cpu1 = t.root_cpu(g[0]).unwrap();
        let c2c: Vec<f64> = t
            .graph
            .edges_connecting(g[0], cpu1)
            .filter(|e| e.weight().kind == LinkKind::C2c)
            .map(|e| e.weight().bw)
            .collect();
        assert_eq!(c2c.len(), 1);
        assert!((c2c[0] - 447.12).abs() < 1e-9);
        let y2 = y.replace("index: 1}", "index: 0}");
        assert!(load_str(&y2, "t.yaml", "t.yaml").is_ok());
        let y3 = MINI.replace(
            "gpus: [\"0000:91:00.0\"]",
            "gpus: [{bus: \"0000:91:00.0\", index: 0}]",
        );
        let y3 = y3.replace(
            "gpus: [\"0000:11:00.0\"]",
            "gpus: [{bus: \"0000:11:00.0\", index: 0}]",
        );
        assert!(err(&y3).contains("both have index 0"));
    }

    #[test]
    fn yaml_anchors_and_merge_keys_work_as_templates() {
        let y = r#"
name: anchors
cpu: {arch: x86_64}
defaults:
  gpu: {sm: 90}
templates:
  pex: &pex {link: gen5x16, vendor: 0x1000, device: 0xc030}
numa:
  - id: 0
    switches:
      - {<<: *pex, bus: "0000:10:00.0", gpus: ["0000:11:00.0"]}
      - {<<: *pex, bus: "0000:20:00.0", link: gen4x8, gpus: ["0000:21:00.0"]}
"#;
        let t = load_str(y, "t.yaml", "t.yaml").unwrap();
        let sw: Vec<(Option<u16>, f64)> = t
            .pci_switches()
            .map(|s| match &t.node(s).kind {
                NodeKind::PciSwitch(p) => (p.device, p.pcie.bw()),
                _ => unreachable!(),
            })
            .collect();
        // The merged template fills the gaps; a key set next to the merge wins.
        assert_eq!(sw, vec![(Some(0xc030), 48.0), (Some(0xc030), 12.0)]);
        // A typo inside a template is still caught where it is merged.
        let bad = y.replace("device: 0xc030}", "devise: 0xc030}");
        let e = err(&bad);
        assert!(
            e.contains("unknown field `devise`") && e.contains("after expanding << merge keys"),
            "{e}"
        );
        // Without merge keys the error keeps its position.
        let e = err(&MINI.replace("sm: 90", "sm: ninety"));
        assert!(
            e.contains("line 5 column 13: defaults.gpu.sm: invalid type"),
            "{e}"
        );
    }

    proptest::proptest! {
        #![proptest_config(proptest::prelude::ProptestConfig::with_cases(200))]
        /// Any edit of a real profile either loads or fails with a usage error: never a panic.
        #[test]
        fn edited_profiles_never_panic(
            which in 0usize..7,
            at in 0usize..4000,
            cut in 0usize..40,
            insert in "[ -~\n]{0,12}",
        ) {
            let names = builtin_names();
            let text = builtin_text(names[which % names.len()]).unwrap_or_default();
            let mut start = at.min(text.len());
            while !text.is_char_boundary(start) {
                start -= 1;
            }
            let mut end = (start + cut).min(text.len());
            while !text.is_char_boundary(end) {
                end -= 1;
            }
            let edited = format!("{}{}{}", &text[..start], insert, &text[end..]);
            if let Err(e) = load_str(&edited, "t.yaml", "t.yaml") {
                proptest::prop_assert!(crate::error::kind(&e).is_some(), "{e:#}");
            }
        }
    }

    #[test]
    fn builtins_nest_well_within_the_limit() {
        for name in builtin_names() {
            let text = builtin_text(name).unwrap();
            assert!(crate::yaml_depth::check(text, 10).is_ok(), "{name}");
        }
        let e = err(&format!(
            "name: a 'b\nx: {}{}\n",
            "[".repeat(99),
            "]".repeat(99)
        ));
        assert_eq!(
            e,
            "cannot parse t.yaml: line 2 column 67: lists or maps nested deeper than 64 levels"
        );
    }

    #[test]
    fn unknown_builtin_lists_the_names() {
        let e = load_builtin("nope").unwrap_err();
        assert_eq!(crate::error::kind(&e), Some(ErrorKind::UnknownProfile));
        assert_eq!(crate::error::one_line(&e), "unknown profile 'nope'");
    }

    #[test]
    fn every_builtin_loads_and_names_itself() {
        for name in builtin_names() {
            let t = load_builtin(name).unwrap_or_else(|e| panic!("{name}: {e:#}"));
            assert_eq!(t.source.origin.as_deref(), Some(name));
            let text = builtin_text(name).unwrap();
            let p: Profile = yaml_serde::from_str(text).unwrap();
            assert_eq!(p.name, name);
            assert!(
                p.provenance.is_some_and(|s| s.len() > 40),
                "{name} needs a provenance note"
            );
        }
    }
}
