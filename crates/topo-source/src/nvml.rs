//! NVML (loaded at run time) for GPUs, NVLink and P2P status.
//!
//! [`query`] asks the live driver through nvml-wrapper, which dlopens `libnvidia-ml.so.1`,
//! so the binary runs on machines without a driver. Its answer is a serialisable
//! [`NvmlReport`]: a snapshot stores it as `nvml.json` and replays it through [`apply`],
//! exactly as live discovery applies a fresh one.

use petgraph::graph::NodeIndex;
use std::collections::BTreeMap;
use topo_model::{
    BusId, FabricInfo, Gpu, HostId, NodeKind, NvSwitch, NvlinkInfo, P2pCaps, PcieLink, Topology, bw,
};

pub const SCHEMA: &str = topo_documents::schema::NVML;

/// `nvml.json`: NVML's answer as a snapshot records it (`topo_documents::snapshot`).
pub use topo_documents::snapshot::{NvmlFabric, NvmlGpu, NvmlLink, NvmlP2p, NvmlReport};

/// What the reader takes from a recorded GPU: its bus id and compute capability as numbers.
pub trait NvmlGpuExt {
    fn busid(&self) -> Option<BusId>;
    /// Compute capability × 10 + minor (`9.0` → 90).
    fn sm(&self) -> Option<u32>;
}

impl NvmlGpuExt for NvmlGpu {
    fn busid(&self) -> Option<BusId> {
        BusId::parse(&self.bus_id).ok()
    }
    fn sm(&self) -> Option<u32> {
        let (ma, mi) = self.compute_capability.as_deref()?.split_once('.')?;
        Some(ma.trim().parse::<u32>().ok()? * 10 + mi.trim().parse::<u32>().ok()?)
    }
}

/// Why NVML gave no answer, in words a user can act on.
pub fn describe_error(e: &nvml_wrapper::error::NvmlError) -> String {
    use nvml_wrapper::error::NvmlError as E;
    match e {
        E::LibloadingError(_) | E::LibraryNotFound => {
            "NVML not found (libnvidia-ml.so.1 could not be loaded)".to_string()
        }
        E::DriverNotLoaded => "NVML found but the NVIDIA kernel driver is not loaded".to_string(),
        E::NoPermission => "NVML found but access to the GPUs was denied".to_string(),
        E::FailedToLoadSymbol(s) => format!("NVML too old: symbol {s} missing"),
        other => format!("NVML failed: {}", other.to_string().to_lowercase()),
    }
}

/// Asks the live driver. `Err` carries a one-phrase reason (`NVML not found (…)`).
pub fn query() -> Result<NvmlReport, String> {
    // nvml-wrapper returns errors, but guard against a panic inside the FFI layer all the
    // same: discovery must degrade, never abort.
    let mut report = match std::panic::catch_unwind(query_inner) {
        Ok(r) => r,
        Err(_) => Err("NVML failed: internal error while querying the driver".to_string()),
    }?;
    attach_cuda(&mut report, crate::cudadrv::query());
    Ok(report)
}

/// The CUDA driver's answer joined to NVML's GPUs by PCI bus id (CUDA's ordinals follow its
/// own order, `CUDA_DEVICE_ORDER`, not NVML's index).
pub fn attach_cuda(report: &mut NvmlReport, cuda: Result<Vec<crate::cudadrv::CudaGpu>, String>) {
    match cuda {
        Ok(list) => {
            for g in &mut report.gpus {
                let b = g.busid();
                g.cuda = list
                    .iter()
                    .find(|c| Some(c.busid) == b)
                    .map(|c| c.attrs.clone());
            }
        }
        Err(e) => report.cuda_error = Some(e),
    }
}

fn cuda_version_string(v: i32) -> String {
    format!("{}.{}", v / 1000, (v % 1000) / 10)
}

fn p2p_status_name(s: nvml_wrapper::enum_wrappers::device::P2pStatus) -> String {
    use nvml_wrapper::enum_wrappers::device::P2pStatus as S;
    match s {
        S::Ok => "ok",
        S::ChipsetNotSupported => "chipset_not_supported",
        S::GpuNotSupported => "gpu_not_supported",
        S::IohTopologyNotSupported => "ioh_topology_not_supported",
        S::DisabledByRegkey => "disabled_by_regkey",
        S::NotSupported => "not_supported",
        S::Unknown => "unknown",
    }
    .to_string()
}

fn query_inner() -> Result<NvmlReport, String> {
    use nvml_wrapper::Nvml;
    use nvml_wrapper::enum_wrappers::device::P2pCapabilitiesIndex as P;
    use nvml_wrapper::enum_wrappers::nv_link::{Capability, IntDeviceType};
    use nvml_wrapper::error::NvmlError;

    let nvml = Nvml::init().map_err(|e| describe_error(&e))?;
    let mut r = NvmlReport {
        schema: SCHEMA.to_string(),
        driver_version: nvml.sys_driver_version().ok(),
        cuda_driver_version: nvml.sys_cuda_driver_version().ok().map(cuda_version_string),
        nvml_version: nvml.sys_nvml_version().ok(),
        ..Default::default()
    };
    let count = nvml.device_count().map_err(|e| describe_error(&e))?;
    let mut devices = Vec::new();
    for i in 0..count {
        let d = match nvml.device_by_index(i) {
            Ok(d) => d,
            Err(e) => {
                r.errors
                    .push(format!("GPU {i}: cannot open: {}", describe_error(&e)));
                continue;
            }
        };
        let Ok(pci) = d.pci_info() else {
            r.errors.push(format!("GPU {i}: no PCI information"));
            continue;
        };
        let mut g = NvmlGpu {
            index: i,
            name: d.name().ok(),
            bus_id: pci.bus_id.to_lowercase(),
            compute_capability: d
                .cuda_compute_capability()
                .ok()
                .map(|c| format!("{}.{}", c.major, c.minor)),
            memory_bytes: d.memory_info().ok().map(|m| m.total),
            uuid: d.uuid().ok(),
            pci_device_id: Some(pci.pci_device_id),
            numa_node: d.numa_node_id().ok().and_then(|n| i32::try_from(n).ok()),
            max_pcie_gen: d.max_pcie_link_gen().ok(),
            max_pcie_width: d.max_pcie_link_width().ok(),
            ..Default::default()
        };
        // NVML has at most 18 links per GPU (NVML_NVLINK_MAX_LINKS); a link index past the
        // GPU's own count answers InvalidArg or NotSupported.
        for l in 0..18u32 {
            let link = d.link_wrapper_for(l);
            let active = match link.is_active() {
                Ok(a) => a,
                Err(NvmlError::InvalidArg) | Err(NvmlError::NotSupported) => break,
                Err(_) => false,
            };
            let mut nl = NvmlLink {
                link: l,
                active,
                ..Default::default()
            };
            if active {
                nl.p2p_supported = link.has_capability(Capability::P2p).ok();
                nl.remote_bus_id = link.remote_pci_info().ok().map(|p| p.bus_id.to_lowercase());
                nl.remote_type = link.remote_device_type(l).ok().map(|t| {
                    match t {
                        IntDeviceType::Gpu => "gpu",
                        IntDeviceType::Ibmnpu => "ibmnpu",
                        IntDeviceType::Switch => "switch",
                        _ => "unknown",
                    }
                    .to_string()
                });
            }
            g.nvlinks.push(nl);
        }
        g.fabric = fabric_info(&nvml, &d);
        r.gpus.push(g);
        devices.push(d);
    }
    for (a, da) in r.gpus.iter().zip(&devices) {
        for (b, db) in r.gpus.iter().zip(&devices) {
            if a.index == b.index {
                continue;
            }
            let st = |p| da.p2p_status(db, p).ok().map(p2p_status_name);
            r.p2p.push(NvmlP2p {
                from: a.bus_id.clone(),
                to: b.bus_id.clone(),
                read: st(P::Read),
                write: st(P::Write),
                nvlink: st(P::NvLink),
                atomics: st(P::Atomics),
            });
        }
    }
    Ok(r)
}

/// GPU fabric (MNNVL) registration through the raw `nvmlDeviceGetGpuFabricInfoV`, which
/// nvml-wrapper does not wrap. The v2 struct is used: the `…V_t` alias in the bindings is v3,
/// which drivers older than NVML 13 reject. `None` when the symbol is missing, the call fails
/// or the GPU is not on a fabric.
fn fabric_info(nvml: &nvml_wrapper::Nvml, d: &nvml_wrapper::Device) -> Option<NvmlFabric> {
    use nvml_wrapper_sys::bindings::{nvmlGpuFabricInfo_v2_t, nvmlGpuFabricInfoV_t};
    // The symbol is a `Result` field; calling the generated method would panic when absent.
    let f = nvml.lib().nvmlDeviceGetGpuFabricInfoV.as_ref().ok()?;
    let mut info = nvmlGpuFabricInfo_v2_t {
        version: std::mem::size_of::<nvmlGpuFabricInfo_v2_t>() as u32 | (2 << 24),
        clusterUuid: [0; 16],
        status: 0,
        cliqueId: 0,
        state: 0,
        healthMask: 0,
    };
    // SAFETY: the handle is valid for `d`'s lifetime; NVML reads `version` and writes no more
    // than the v2 struct it names, so passing the smaller struct through the v3 pointer type
    // is what the versioned API is for.
    let rc = unsafe {
        f(
            d.handle(),
            (&mut info as *mut nvmlGpuFabricInfo_v2_t).cast::<nvmlGpuFabricInfoV_t>(),
        )
    };
    if rc != 0 {
        return None;
    }
    let state = match info.state as u32 {
        nvml_wrapper_sys::bindings::NVML_GPU_FABRIC_STATE_NOT_STARTED => "not_started",
        nvml_wrapper_sys::bindings::NVML_GPU_FABRIC_STATE_IN_PROGRESS => "in_progress",
        nvml_wrapper_sys::bindings::NVML_GPU_FABRIC_STATE_COMPLETED => "completed",
        _ => return None,
    };
    let u = info.clusterUuid;
    let hex: String = u.iter().map(|b| format!("{b:02x}")).collect();
    let cluster_uuid = format!(
        "{}-{}-{}-{}-{}",
        &hex[0..8],
        &hex[8..12],
        &hex[12..16],
        &hex[16..20],
        &hex[20..32]
    );
    let status = if info.status == 0 {
        "success".to_string()
    } else {
        nvml_wrapper::error::NvmlError::from(info.status)
            .to_string()
            .to_lowercase()
    };
    Some(NvmlFabric {
        cluster_uuid,
        clique_id: info.cliqueId,
        state: state.to_string(),
        status: Some(status),
    })
}

/// Whether a GPU's NVLink list is short enough to be hardware. A recorded `nvml.json` can
/// say anything: 375 000 links showed as 7 725 000 GB/s. The NCCL XML reader's bound on lanes
/// applies (no GPU has more than 18); past it the links are ignored with a warning and the
/// GPU's NVLink is unknown.
fn plausible_link_count(topo: &mut Topology, gn: NodeIndex, g: &NvmlGpu) -> bool {
    let max = super::ncclxml::MAX_NVLINK_COUNT as usize;
    if g.nvlinks.len() <= max {
        return true;
    }
    let why = format!(
        "NVML reported {} NVLinks for GPU {}, more than the {max} any GPU could have; ignored",
        g.nvlinks.len(),
        g.index
    );
    topo.warn(why.clone());
    if let NodeKind::Gpu(gpu) = &mut topo.node_mut(gn).kind {
        gpu.nvlink = NvlinkInfo::Unknown(why);
    }
    false
}

fn caps(s: &Option<String>) -> Option<bool> {
    s.as_deref().map(|v| v == "ok")
}

/// Fills `topo` (host 0) from an NVML answer: GPU identity, NVLinks, P2P status, fabric.
/// GPUs NVML reports that sysfs lacks are added under their NUMA node's CPU.
/// What NVML says of one GPU, over what sysfs found.
fn fill_gpu(gpu: &mut Gpu, g: &NvmlGpu) {
    gpu.dev = g.index as i32;
    gpu.name = g.name.clone().or(gpu.name.take());
    gpu.sm = g.sm().or(gpu.sm);
    gpu.memory_bytes = g.memory_bytes.or(gpu.memory_bytes);
    gpu.uuid = g.uuid.clone().or(gpu.uuid.take());
    gpu.nvlink = NvlinkInfo::Known;
    gpu.fabric = g.fabric.as_ref().map(|f| FabricInfo {
        cluster_uuid: f.cluster_uuid.clone(),
        clique_id: f.clique_id,
        state: f.state.clone(),
        status: f.status.clone(),
    });
    if gpu.device.is_none() {
        gpu.device = g.pci_device_id.map(|id| (id >> 16) as u16);
    }
    gpu.cuda = g.cuda.clone();
}

/// NVML's P2P answers per ordered GPU pair.
fn apply_p2p(report: &NvmlReport, topo: &mut Topology, host: HostId) {
    for p in &report.p2p {
        let (Ok(a), Ok(b)) = (BusId::parse(&p.from), BusId::parse(&p.to)) else {
            continue;
        };
        topo.p2p.insert(
            (host, a, b),
            P2pCaps {
                read: caps(&p.read),
                write: caps(&p.write),
                nvlink: caps(&p.nvlink),
                atomics: caps(&p.atomics),
            },
        );
    }
}

pub fn apply(report: &NvmlReport, topo: &mut Topology) {
    let host: HostId = 0;
    if let Some(h) = topo.hosts.get_mut(host as usize) {
        if report.driver_version.is_some() {
            h.driver_version = report.driver_version.clone();
        }
        h.cuda_driver_version = report.cuda_driver_version.clone();
        h.nvml_version = report.nvml_version.clone();
    }
    for e in &report.errors {
        topo.warn(e.clone());
    }

    // Pass 1: every GPU exists and knows its sm before links are added (lane bandwidth
    // depends on the declaring GPU's generation).
    let mut nodes: BTreeMap<u32, NodeIndex> = BTreeMap::new();
    for g in &report.gpus {
        let Some(busid) = g.busid() else {
            topo.warn(format!("NVML GPU {}: bad bus id '{}'", g.index, g.bus_id));
            continue;
        };
        let n = match topo.find(host, busid) {
            Some(n) if matches!(topo.node(n).kind, NodeKind::Gpu(_)) => n,
            Some(_) => {
                topo.warn(format!(
                    "NVML GPU {} at {busid} is not a GPU in sysfs",
                    g.index
                ));
                continue;
            }
            None => add_missing_gpu(topo, g, busid),
        };
        if let NodeKind::Gpu(gpu) = &mut topo.node_mut(n).kind {
            fill_gpu(gpu, g);
        }
        nodes.insert(g.index, n);
    }

    // GPUs sysfs found but NVML did not report keep an explicit "unknown".
    for n in topo.gpus() {
        if topo.node(n).host == host
            && !nodes.values().any(|&m| m == n)
            && let NodeKind::Gpu(gpu) = &mut topo.node_mut(n).kind
        {
            gpu.nvlink = NvlinkInfo::Unknown("NVML did not report this GPU".to_string());
        }
    }

    // Pass 2: NVLinks. Each active link adds one lane towards its remote end, keyed by the
    // remote bus id (ncclTopoGetXmlFromGpu, src/graph/xml.cc, all versions). An unreadable or
    // all-f remote is an NVSwitch hidden from this OS (VM/container), as NCCL assumes.
    let mut hidden: Option<NodeIndex> = None;
    for g in &report.gpus {
        let Some(&gn) = nodes.get(&g.index) else {
            continue;
        };
        if !plausible_link_count(topo, gn, g) {
            continue;
        }
        let mut lanes: BTreeMap<(Option<BusId>, String), u32> = BTreeMap::new();
        for l in g
            .nvlinks
            .iter()
            .filter(|l| l.active && l.p2p_supported != Some(false))
        {
            let remote = l
                .remote_bus_id
                .as_deref()
                .and_then(|s| BusId::parse(s).ok())
                .filter(|b| !b.is_placeholder());
            let kind = l
                .remote_type
                .clone()
                .unwrap_or_else(|| "unknown".to_string());
            *lanes.entry((remote, kind)).or_insert(0) += 1;
        }
        for ((remote, kind), count) in lanes {
            let target_node = remote.and_then(|b| topo.find(host, b));
            let target_is_gpu =
                target_node.is_some_and(|t| matches!(topo.node(t).kind, NodeKind::Gpu(_)));
            let target = if kind == "ibmnpu" {
                // NVLink to the CPU (POWER9): tclass 0x068001 in NCCL.
                match topo.root_cpu(gn) {
                    Some(c) => c,
                    None => continue,
                }
            } else if target_is_gpu {
                match target_node {
                    Some(t) => t,
                    None => continue,
                }
            } else if kind == "gpu" {
                topo.warn(format!(
                    "GPU {}: {count} NVLink(s) to GPU {} which is not visible here; ignored",
                    g.index,
                    remote.map(|b| b.to_string()).unwrap_or_else(|| "?".into())
                ));
                continue;
            } else {
                match remote {
                    Some(b) => match target_node {
                        Some(t) if matches!(topo.node(t).kind, NodeKind::NvSwitch(_)) => t,
                        _ => topo.add_node(
                            host,
                            None,
                            NodeKind::NvSwitch(NvSwitch {
                                busid: Some(b),
                                vendor: Some(0x10de),
                                device: None,
                            }),
                        ),
                    },
                    None => *hidden.get_or_insert_with(|| {
                        topo.add_node(
                            host,
                            None,
                            NodeKind::NvSwitch(NvSwitch {
                                busid: None,
                                vendor: None,
                                device: None,
                            }),
                        )
                    }),
                }
            };
            topo.add_nvlink(gn, target, count);
        }
    }

    apply_p2p(report, topo, host);
    if let Some(fact) = nvls_fact(topo, host) {
        topo.hosts[host as usize].nvls = Some(fact);
    }
    cuda_facts(report, topo, host);
}

/// What the CUDA driver's attributes mean for NCCL: a GPU without multicast gets no NVLS
/// (`ncclNvlsInit` asks `CU_DEVICE_ATTRIBUTE_MULTICAST_SUPPORTED`, src/transport/nvls.cc,
/// NCCL 2.28); one without VMM keeps CUMEM auto off, so P2P goes through legacy IPC handles
/// (`ncclCuMemEnable`, src/misc/cudawrap.cc; the plan's transport step reads the attribute
/// from the model). An earlier NVLS fact (old driver, fabric not registered) stays first.
fn cuda_facts(report: &NvmlReport, topo: &mut Topology, host: HostId) {
    let lacking = |f: fn(&topo_model::CudaAttrs) -> Option<bool>| -> Vec<&str> {
        report
            .gpus
            .iter()
            .filter(|g| g.cuda.as_ref().and_then(f) == Some(false))
            .map(|g| g.bus_id.as_str())
            .collect()
    };
    let no_multicast = lacking(|a| a.multicast);
    if let Some(first) = no_multicast.first()
        && let Some(h) = topo.hosts.get_mut(host as usize)
        && h.nvls.as_ref().is_none_or(|f| f.value)
    {
        h.nvls = Some(topo_model::FactNote {
            value: false,
            why: format!(
                "CUDA driver: no multicast on {} GPU(s), {first} first",
                no_multicast.len()
            ),
        });
    }
    let no_vmm = lacking(|a| a.vmm);
    if let Some(first) = no_vmm.first() {
        topo.warn(format!(
            "CUDA driver: no cuMem VMM support on {} GPU(s), {first} first: NCCL keeps CUMEM off, so P2P uses legacy IPC handles (P2P/IPC) instead of P2P/CUMEM",
            no_vmm.len()
        ));
    }
    if let Some(e) = &report.cuda_error {
        topo.warn(format!(
            "{e}: cuMem and multicast support not probed (NCCL's defaults assumed)"
        ));
    }
}

/// NVLS multicast availability from what NVML reported: NCCL turns NVLS off with a CUDA
/// driver before 12.1 (`ncclNvlsInit`, src/transport/nvls.cc, NCCL 2.28.9: driver version
/// below 12010), and on an NVSwitch machine the driver offers multicast only once the fabric
/// manager has registered the GPUs (NVML fabric state `completed`). `None` when NVML says
/// nothing either way.
fn nvls_fact(topo: &Topology, host: HostId) -> Option<topo_model::FactNote> {
    let h = topo.hosts.get(host as usize)?;
    let driver = h.cuda_driver_version.as_deref().and_then(|v| {
        let (major, minor) = v.trim().split_once('.').unwrap_or((v.trim(), "0"));
        Some((
            major.parse::<u32>().ok()?,
            minor.parse::<u32>().unwrap_or(0),
        ))
    });
    if let Some((major, minor)) = driver
        && (major, minor) < (12, 1)
    {
        return Some(topo_model::FactNote {
            value: false,
            why: format!("CUDA driver {major}.{minor}: NVLS multicast needs 12.1 or newer"),
        });
    }
    let nvswitch = topo.nvswitches().any(|n| topo.node(n).host == host);
    let pending: Vec<String> = topo
        .gpus()
        .into_iter()
        .filter(|&g| topo.node(g).host == host)
        .filter_map(|g| topo.gpu(g)?.fabric.as_ref().map(|f| f.state.clone()))
        .filter(|s| s != "completed")
        .collect();
    (nvswitch && !pending.is_empty()).then(|| topo_model::FactNote {
        value: false,
        why: format!(
            "NVML fabric state {} on {} GPU(s): the fabric manager has not registered them, \
             so the driver offers no multicast",
            pending[0],
            pending.len()
        ),
    })
}

fn add_missing_gpu(topo: &mut Topology, g: &NvmlGpu, busid: BusId) -> NodeIndex {
    let cpus: Vec<NodeIndex> = topo.cpus().collect();
    let cpu = g
        .numa_node
        .and_then(|numa| {
            cpus.iter()
                .copied()
                .find(|&c| topo.cpu(c).is_some_and(|x| x.numa == numa))
        })
        .or_else(|| cpus.first().copied());
    let mut gpu = Gpu::new(busid, g.index as i32);
    gpu.pcie = PcieLink {
        speed: g
            .max_pcie_gen
            .and_then(bw::pcie_speed_string)
            .map(str::to_string),
        width: g.max_pcie_width,
        ..Default::default()
    };
    gpu.device = g.pci_device_id.map(|id| (id >> 16) as u16);
    topo.warn(format!(
        "GPU {busid} reported by NVML is missing from sysfs: attached to its CPU directly"
    ));
    match cpu {
        Some(c) => topo.add_child(c, NodeKind::gpu(gpu)),
        None => topo.add_node(0, None, NodeKind::gpu(gpu)),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cuda_attributes_join_nvml_gpus_by_bus_id_not_ordinal() {
        let gpu = |i: u32, b: &str| NvmlGpu {
            index: i,
            bus_id: b.into(),
            ..Default::default()
        };
        let mut r = NvmlReport {
            gpus: vec![
                gpu(0, "00000000:18:00.0"),
                gpu(1, "00000000:2a:00.0"),
                gpu(2, "00000000:3a:00.0"),
            ],
            ..Default::default()
        };
        // CUDA numbers them in its own order and does not see the third (CUDA_VISIBLE_DEVICES).
        let attrs = |ordinal, vmm| topo_model::CudaAttrs {
            ordinal,
            vmm: Some(vmm),
            ..Default::default()
        };
        let cuda = vec![
            crate::cudadrv::CudaGpu {
                busid: BusId::parse("0000:2a:00.0").unwrap(),
                attrs: attrs(0, false),
            },
            crate::cudadrv::CudaGpu {
                busid: BusId::parse("0000:18:00.0").unwrap(),
                attrs: attrs(1, true),
            },
        ];
        attach_cuda(&mut r, Ok(cuda));
        assert_eq!(r.gpus[0].cuda, Some(attrs(1, true)));
        assert_eq!(r.gpus[1].cuda, Some(attrs(0, false)));
        assert_eq!(r.gpus[2].cuda, None);
        let back: NvmlReport = serde_json::from_str(&serde_json::to_string(&r).unwrap()).unwrap();
        assert_eq!(back, r);
        let mut r2 = NvmlReport::default();
        attach_cuda(
            &mut r2,
            Err("CUDA driver not found (libcuda.so.1 could not be loaded)".into()),
        );
        assert!(
            r2.cuda_error
                .as_deref()
                .unwrap()
                .starts_with("CUDA driver not found")
        );
    }

    #[test]
    fn report_round_trips_through_json() {
        let r = NvmlReport {
            schema: SCHEMA.into(),
            driver_version: Some("550.54.15".into()),
            gpus: vec![NvmlGpu {
                index: 0,
                bus_id: "00000000:18:00.0".into(),
                compute_capability: Some("9.0".into()),
                nvlinks: vec![NvmlLink {
                    link: 0,
                    active: true,
                    p2p_supported: Some(true),
                    remote_bus_id: Some("00000000:05:00.0".into()),
                    remote_type: Some("switch".into()),
                }],
                ..Default::default()
            }],
            ..Default::default()
        };
        let s = serde_json::to_string(&r).unwrap();
        let back: NvmlReport = serde_json::from_str(&s).unwrap();
        assert_eq!(back, r);
        assert_eq!(back.gpus[0].sm(), Some(90));
        assert_eq!(back.gpus[0].busid().unwrap().to_string(), "0000:18:00.0");
    }

    fn link(l: u32, remote: &str, kind: &str) -> NvmlLink {
        NvmlLink {
            link: l,
            active: true,
            p2p_supported: Some(true),
            remote_bus_id: Some(remote.into()),
            remote_type: Some(kind.into()),
        }
    }

    fn gpu(index: u32, bus: &str, links: Vec<NvmlLink>) -> NvmlGpu {
        NvmlGpu {
            index,
            name: Some("NVIDIA A100-SXM4-80GB".into()),
            bus_id: bus.into(),
            compute_capability: Some("8.0".into()),
            numa_node: Some(0),
            max_pcie_gen: Some(4),
            max_pcie_width: Some(16),
            nvlinks: links,
            ..Default::default()
        }
    }

    #[test]
    fn apply_places_every_kind_of_link() {
        use topo_model::{Cpu, SourceInfo};
        let mut t = Topology::new(SourceInfo::default());
        let cpu = t.add_node(
            0,
            None,
            NodeKind::Cpu(Cpu {
                numa: 0,
                ..Default::default()
            }),
        );
        let g0 = t.add_child(
            cpu,
            NodeKind::gpu(Gpu::new(BusId::parse("0000:07:00.0").unwrap(), 0)),
        );
        // GPU 0: 2 lanes to the peer GPU, 3 to a hidden (all-f) switch, 1 inactive, 1 with P2P
        // unsupported. GPU 1 exists only in NVML.
        let mut l = vec![
            link(0, "00000000:0F:00.0", "gpu"),
            link(1, "00000000:0F:00.0", "gpu"),
            link(2, "FFFFFFFF:FF:FF.0", "switch"),
            link(3, "ffffffff:ff:ff.0", "unknown"),
            link(4, "FFFFFFFF:FF:FF.0", "switch"),
            link(5, "00000000:0F:00.0", "gpu"),
            link(6, "00000000:0F:00.0", "gpu"),
        ];
        l[5].active = false;
        l[6].p2p_supported = Some(false);
        let report = NvmlReport {
            schema: SCHEMA.into(),
            gpus: vec![
                gpu(0, "00000000:07:00.0", l),
                gpu(
                    1,
                    "00000000:0F:00.0",
                    vec![
                        link(0, "00000000:07:00.0", "gpu"),
                        link(1, "00000000:c4:00.0", "switch"),
                    ],
                ),
            ],
            p2p: vec![NvmlP2p {
                from: "00000000:07:00.0".into(),
                to: "00000000:0F:00.0".into(),
                read: Some("ok".into()),
                write: Some("ok".into()),
                nvlink: Some("ok".into()),
                atomics: Some("not_supported".into()),
            }],
            ..Default::default()
        };
        apply(&report, &mut t);
        let gpus = t.gpus();
        assert_eq!(gpus.len(), 2);
        let g1 = gpus[1];
        assert_eq!(t.root_cpu(g1), Some(cpu));
        assert_eq!(
            t.gpu(g1).unwrap().pcie.speed.as_deref(),
            Some("16.0 GT/s PCIe")
        );
        assert!(t.warnings.iter().any(|w| w.contains("missing from sysfs")));
        let mut out: Vec<(Option<String>, u32, f64)> = t
            .nvlinks(g0)
            .iter()
            .map(|&(to, lanes, bw)| (t.node(to).busid().map(|b| b.to_string()), lanes, bw))
            .collect();
        out.sort_by(|a, b| a.0.cmp(&b.0));
        assert_eq!(
            out,
            vec![(None, 3, 60.0), (Some("0000:0f:00.0".into()), 2, 40.0)]
        );
        // A visible switch id becomes its own NVSwitch node; the hidden one is shared.
        assert_eq!(t.nvswitches().count(), 2);
        assert_eq!(t.gpu(g0).unwrap().sm, Some(80));
        assert_eq!(t.gpu(g0).unwrap().nvlink, NvlinkInfo::Known);
        let caps = &t.p2p[&(
            0,
            BusId::parse("0000:07:00.0").unwrap(),
            BusId::parse("0000:0f:00.0").unwrap(),
        )];
        assert_eq!((caps.read, caps.atomics), (Some(true), Some(false)));
    }

    #[test]
    fn cuda_versions_read_like_nvidia_smi() {
        assert_eq!(cuda_version_string(12040), "12.4");
        assert_eq!(cuda_version_string(13000), "13.0");
    }

    #[test]
    fn no_library_is_a_clear_reason() {
        // On machines without a driver this is the path every user sees.
        if let Err(e) = query() {
            assert!(e.starts_with("NVML"), "{e}");
        }
    }
}
