//! A snapshot's documents: `meta.json` (`topo.snapshot/v1`: who captured it, when, the
//! environment, whether NVML answered) and `nvml.json` (`topo.nvml/v1`: NVML's answer and the
//! CUDA driver's attributes, replayed as live discovery applies a fresh one). Written and read
//! by `topo_source::snapshot` and `topo_source::nvml`.

use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;

/// `meta.json`.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct Meta {
    pub schema: String,
    /// The topo version that captured it.
    pub topo_version: String,
    /// UTC, `2026-11-29T08:00:00Z`.
    pub captured_at: String,
    pub host: Option<String>,
    pub kernel: Option<String>,
    /// NCCL's spelling: `x86_64`, `arm64`, `ppc64`.
    pub arch: String,
    pub driver_version: Option<String>,
    pub cuda_driver_version: Option<String>,
    /// NCCL_* and CUDA_VISIBLE_DEVICES at capture time.
    #[serde(default)]
    pub env: BTreeMap<String, String>,
    #[serde(default)]
    pub nvml: NvmlStatus,
    /// Written last by a capture that finished: a snapshot without it is refused.
    #[serde(default)]
    pub complete: bool,
}

#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct NvmlStatus {
    /// NVML answered; its answer is `nvml.json`.
    pub available: bool,
    /// Why not, when it did not (`NVML not found (libnvidia-ml.so.1 could not be loaded)`).
    pub reason: Option<String>,
}

#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct NvmlReport {
    pub schema: String,
    pub driver_version: Option<String>,
    /// `12.4` (from NVML's integer 12040).
    pub cuda_driver_version: Option<String>,
    pub nvml_version: Option<String>,
    pub gpus: Vec<NvmlGpu>,
    /// One entry per ordered pair of GPUs.
    #[serde(default)]
    pub p2p: Vec<NvmlP2p>,
    /// Queries that failed in a way worth telling the user (a GPU that could not be opened…).
    #[serde(default)]
    pub errors: Vec<String>,
    /// Why the CUDA driver's attributes are missing (no libcuda, cuInit failed), when they are.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cuda_error: Option<String>,
}

#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct NvmlGpu {
    pub index: u32,
    pub name: Option<String>,
    /// As NVML prints it: `00000000:18:00.0`.
    pub bus_id: String,
    /// `9.0`.
    pub compute_capability: Option<String>,
    pub memory_bytes: Option<u64>,
    pub uuid: Option<String>,
    /// PCI device id (upper 16 bits) and vendor (lower 16 bits), NVML's `pciDeviceId`.
    pub pci_device_id: Option<u32>,
    pub numa_node: Option<i32>,
    pub max_pcie_gen: Option<u32>,
    pub max_pcie_width: Option<u32>,
    #[serde(default)]
    pub nvlinks: Vec<NvmlLink>,
    pub fabric: Option<NvmlFabric>,
    /// The CUDA driver's attributes of this GPU (`topo_source::cudadrv`), matched by bus id.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cuda: Option<CudaAttrs>,
}

#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct NvmlLink {
    pub link: u32,
    pub active: bool,
    /// NVLink capability "P2P supported"; `None` when NVML could not say.
    pub p2p_supported: Option<bool>,
    pub remote_bus_id: Option<String>,
    /// `gpu`, `switch`, `ibmnpu`, `unknown`; `None` when NVML could not say.
    pub remote_type: Option<String>,
}

#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct NvmlP2p {
    pub from: String,
    pub to: String,
    /// NVML P2P status per capability: `ok`, `chipset_not_supported`, `gpu_not_supported`,
    /// `ioh_topology_not_supported`, `disabled_by_regkey`, `not_supported`, `unknown`;
    /// `None` when the query failed.
    pub read: Option<String>,
    pub write: Option<String>,
    pub nvlink: Option<String>,
    pub atomics: Option<String>,
}

#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct NvmlFabric {
    pub cluster_uuid: String,
    pub clique_id: u32,
    /// `not_started`, `in_progress`, `completed`.
    pub state: String,
    /// NVML return code of the registration (`success` or the error name).
    pub status: Option<String>,
}

/// What the CUDA driver says about one GPU (`cuDeviceGetAttribute`), where a live probe or a
/// snapshot recorded it; each `None` when the driver did not know the attribute.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct CudaAttrs {
    /// The CUDA device ordinal (which may differ from NVML's index).
    pub ordinal: u32,
    /// `VIRTUAL_MEMORY_MANAGEMENT_SUPPORTED`: cuMem allocations (NCCL's P2P/CUMEM).
    pub vmm: Option<bool>,
    /// `HANDLE_TYPE_POSIX_FILE_DESCRIPTOR_SUPPORTED`: cuMem memory shareable as an fd.
    pub posix_fd: Option<bool>,
    /// `HANDLE_TYPE_FABRIC_SUPPORTED`: cuMem fabric handles (multi-node NVLink).
    pub fabric_handle: Option<bool>,
    /// `MULTICAST_SUPPORTED`: NVLink SHARP multicast objects (NCCL's NVLS).
    pub multicast: Option<bool>,
    /// `UNIFIED_ADDRESSING`: one address space for host and devices.
    pub unified_addressing: Option<bool>,
    /// `GPU_DIRECT_RDMA_WITH_CUDA_VMM_SUPPORTED` (CUMEM auto required it in NCCL 2.19-2.23).
    pub gdr_with_vmm: Option<bool>,
}
