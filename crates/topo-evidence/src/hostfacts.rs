//! What a machine or snapshot tells `topo diagnose` beyond the topology: environment,
//! container signs, /dev/shm, PCIe ACS, IOMMU, NVLink states, fabric, MIG, NVML P2P,
//! GPUDirect RDMA readiness. Only the facts: `topo_source::hostfacts` reads them, and every
//! check it could not read is in [`HostFacts::skipped`] with the reason.

use serde::Serialize;
use std::collections::BTreeMap;

#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct Skip {
    pub check: String,
    pub why: String,
}

/// ACS control of one PCI bridge above a GPU.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct Acs {
    pub bridge: String,
    pub ctrl: u16,
    /// Request or completion redirect is on: peer traffic goes up to the root complex.
    pub redirect: bool,
}

#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct NvlinkState {
    pub gpu: u32,
    pub link: u32,
    pub active: bool,
}

#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct GpuState {
    pub index: u32,
    pub bus_id: String,
    pub name: Option<String>,
    pub fabric_state: Option<String>,
    pub fabric_status: Option<String>,
    pub mig: Option<bool>,
}

#[derive(Clone, Debug, Default, PartialEq, Serialize)]
pub struct HostFacts {
    /// Where the reads were rooted.
    pub root: String,
    /// NCCL_*, CUDA_VISIBLE_DEVICES, NVIDIA_VISIBLE_DEVICES and their source.
    pub env: BTreeMap<String, String>,
    pub env_source: String,
    /// What says this is a container or a Kubernetes pod, one phrase each.
    pub container: Vec<String>,
    pub kubernetes: bool,
    pub shm_bytes: Option<u64>,
    /// The /proc/mounts line /dev/shm came from.
    pub shm_line: Option<String>,
    pub acs: Vec<Acs>,
    /// `translation` (DMA, DMA-FQ), `passthrough` (identity) or `off`, with the file read.
    pub iommu: Option<(String, String)>,
    /// NVIDIA display-class PCI functions sysfs lists (all GPUs in the box, visible or not).
    pub pci_gpus: Vec<String>,
    /// GPUs NVML (this process) sees; `None` without NVML.
    pub gpus: Option<Vec<GpuState>>,
    pub nvlinks: Vec<NvlinkState>,
    /// NVML P2P status per ordered pair (bus ids) that is not `ok`.
    pub p2p_refused: Vec<(String, String, String)>,
    /// `nvidia_peermem` / `nv_peer_mem` loaded, and the kernel release (DMA-BUF needs ≥ 5.12).
    pub peermem: Option<bool>,
    pub kernel: Option<String>,
    /// The CPU reports a hypervisor (`hypervisor` flag in /proc/cpuinfo).
    pub hypervisor: Option<bool>,
    pub skipped: Vec<Skip>,
}

impl HostFacts {
    /// Records a check that could not be read, with the reason.
    pub fn skip(&mut self, check: &str, why: impl Into<String>) {
        self.skipped.push(Skip {
            check: check.into(),
            why: why.into(),
        });
    }
}

/// Environment variables that matter to NCCL placement.
pub fn relevant_env(vars: impl IntoIterator<Item = (String, String)>) -> BTreeMap<String, String> {
    vars.into_iter()
        .filter(|(k, _)| {
            k.starts_with("NCCL_")
                || k == "CUDA_VISIBLE_DEVICES"
                || k == "NVIDIA_VISIBLE_DEVICES"
                || k == "KUBERNETES_SERVICE_HOST"
        })
        .collect()
}
