//! What the transport choice needs to know beyond the topology and the path policy: the
//! process/container layout of the ranks, the transport environment variables and the CUDA
//! driver facts. The integrator fills it from the environment; nothing here reads it.

use std::collections::BTreeMap;
use topo_vocab::{Fabric, Net};

/// The network the source's devices point at, with the evidence (`net_kind::KindCall::why`).
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum SourceNet {
    /// EFA devices and no IB one: the aws-ofi-nccl plugin's network, inferred.
    Efa(String),
    /// Only ports topo assumed, none of a known kind.
    Unknown(String),
    /// Every port reports what NCCL's socket transport reports (a file NCCL wrote while on
    /// sockets).
    Socket(String),
}

/// How the ranks of a host map onto processes and containers.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub enum RankPlacement {
    /// One process drives every GPU of its host (threads, `ncclCommInitAll`, nccl-tests `-g N`):
    /// ranks share a host hash and a pid hash, so P2P uses direct pointers.
    ProcessPerHost,
    /// One process per GPU in one OS instance (torchrun, mpirun, srun): same host hash and
    /// `/dev/shm`, different pid hash, so P2P goes through CUMEM or legacy IPC handles.
    #[default]
    ProcessPerGpu,
    /// One container (pod) per GPU, each seeing only its own GPU (NVIDIA/nccl#1781).
    ContainerPerGpu {
        /// The containers share a host hash: `NCCL_HOSTID` is set to one value in all of them
        /// (or they share the host's UTS namespace). Without it every container is a node.
        common_host_id: bool,
        /// The containers see the same `/dev/shm` device (host IPC or a shared mount); NCCL
        /// compares its `st_dev` before allowing P2P or SHM.
        shared_shm: bool,
    },
}

impl RankPlacement {
    /// True when NCCL sees the local ranks as one node but P2P and SHM cannot connect them
    /// (different `/dev/shm`): what `PathPolicy::isolated_ranks` must say for the paths.
    pub fn isolates_ranks(&self) -> bool {
        matches!(
            self,
            RankPlacement::ContainerPerGpu {
                common_host_id: true,
                shared_shm: false
            }
        )
    }

    /// True when every rank has its own host hash, so NCCL counts one node per rank.
    pub fn node_per_rank(&self) -> bool {
        matches!(
            self,
            RankPlacement::ContainerPerGpu {
                common_host_id: false,
                ..
            }
        )
    }

    pub fn describe(&self) -> &'static str {
        match self {
            RankPlacement::ProcessPerHost => "one process for all GPUs of a host",
            RankPlacement::ProcessPerGpu => "one process per GPU",
            RankPlacement::ContainerPerGpu { .. } => "one container per GPU",
        }
    }
}

/// Transport-level inputs. Path-level policy (P2P level and disable, SHM disable, GDR level,
/// PXN, NVB) is [`super::super::paths::PathPolicy`] and is not repeated here.
#[derive(Clone, Debug, PartialEq)]
pub struct TransportPolicy {
    /// NCCL minor version (2.`minor`): log forms, CUMEM default, "Check P2P Type" form.
    pub minor: u32,
    /// `NCCL_CUMEM_ENABLE`: `Some(true)`/`Some(false)` when set, `None` = the version default
    /// (off in 2.18, auto from 2.19).
    pub cumem: Option<bool>,
    /// `NCCL_P2P_DIRECT_DISABLE=1`: no direct pointers between ranks of one process.
    pub p2p_direct_disable: bool,
    /// `NCCL_P2P_READ_ENABLE`: `None` = auto (read on NVLink between two sm80 GPUs).
    pub p2p_read_enable: Option<bool>,
    /// `NCCL_P2P_USE_CUDA_MEMCPY=1`: copy-engine P2P (`/CE`), never read, never direct, and no
    /// relay through an intermediate GPU.
    pub p2p_use_cuda_memcpy: bool,
    /// `NCCL_NET`: the network to use, matched case-insensitively (`IB`, `Socket`, or a plugin
    /// name such as `NCCL RDMA Plugin v8`); `None` = the first that works (IB, then Socket).
    pub net: Option<String>,
    /// The fabric a flag or profile stated (`topo_model::netfacts`): its net plugin comes
    /// before NCCL's built-in IB transport, as a loaded plugin does (NVIDIA/nccl v2.28.9-1
    /// src/net.cc, `ncclNetInit` tries the external plugin first). `NCCL_NET` still wins.
    pub fabric: Option<topo_vocab::Fabric>,
    /// `NCCL_IB_DISABLE=1`: the built-in IB transport is off, sockets are used.
    pub ib_disable: bool,
    /// Whether the hosts have IB verbs devices the IB transport can use (IB or RoCE ports).
    /// `None` = assume the topology's network devices are verbs devices when there are any.
    pub ib_available: Option<bool>,
    /// What the source's own network devices say of the transport where nothing states it
    /// (`topo_model::net_kind`); `None` where they add nothing to the default.
    pub source_net: Option<SourceNet>,
    pub placement: RankPlacement,
    /// `CUDA_VISIBLE_DEVICES` as each rank's process sees it. One entry with several ranks per
    /// host means one GPU per process (Slurm `--gpus-per-task=1`, one GPU per pod): peers are
    /// then invisible to the process. `None` = unset (all GPUs visible).
    pub cuda_visible_devices: Option<String>,
    /// `cudaDriverVersion` (12040 for CUDA 12.4); `None` = unknown (assumed ≥ 12.0).
    pub cuda_driver_version: Option<u32>,
    /// `CU_DEVICE_ATTRIBUTE_VIRTUAL_MEMORY_MANAGEMENT_SUPPORTED`; `None` = unknown (assumed).
    pub vmm_supported: Option<bool>,
    /// `CU_DEVICE_ATTRIBUTE_GPU_DIRECT_RDMA_WITH_CUDA_VMM_SUPPORTED`, which CUMEM auto also
    /// required in 2.19–2.23; `None` = unknown (assumed).
    pub vmm_gdr_supported: Option<bool>,
    /// Whether legacy CUDA IPC works (`cudaIpcGetMemHandle`; fails on WSL). `None` = assumed.
    pub legacy_ipc: Option<bool>,
    /// `cudaDeviceCanAccessPeer` per ordered rank pair, where a CUDA probe ran; a missing pair
    /// is assumed to allow peer access.
    pub peer_access: BTreeMap<(usize, usize), bool>,
}

impl Default for TransportPolicy {
    fn default() -> Self {
        TransportPolicy {
            minor: 28,
            cumem: None,
            p2p_direct_disable: false,
            p2p_read_enable: None,
            p2p_use_cuda_memcpy: false,
            net: None,
            fabric: None,
            ib_disable: false,
            ib_available: None,
            source_net: None,
            placement: RankPlacement::default(),
            cuda_visible_devices: None,
            cuda_driver_version: None,
            vmm_supported: None,
            vmm_gdr_supported: None,
            legacy_ipc: None,
            peer_access: BTreeMap::new(),
        }
    }
}

/// `12040` → `12.4`.
pub(super) fn driver_str(v: u32) -> String {
    format!("{}.{}", v / 1000, (v % 1000) / 10)
}

impl TransportPolicy {
    /// Whether P2P buffers use the cuMem VMM API (`ncclCuMemEnable`, src/misc/cudawrap.cc),
    /// and why. 2.18: `NCCL_CUMEM_ENABLE` default 0. 2.19+: default -2 = auto, on when the
    /// driver is ≥ 12.0 and the device supports VMM; 2.19–2.23 also required GPUDirect RDMA
    /// with VMM (the attribute check was dropped in 2.24).
    pub fn cumem_enabled(&self) -> (bool, String) {
        if let Some(v) = self.cumem {
            return (v, format!("NCCL_CUMEM_ENABLE={}", u8::from(v)));
        }
        if self.minor <= 18 {
            return (false, "off by default in 2.18".into());
        }
        if let Some(d) = self.cuda_driver_version
            && d < 12000
        {
            return (
                false,
                format!("auto: CUDA driver {} is older than 12.0", driver_str(d)),
            );
        }
        if self.vmm_supported == Some(false) {
            return (
                false,
                "auto: the GPU reports no virtual memory management support".into(),
            );
        }
        if self.minor <= 23 && self.vmm_gdr_supported == Some(false) {
            return (
                false,
                "auto (2.19-2.23): the GPU reports no GPUDirect RDMA with VMM".into(),
            );
        }
        let driver = match self.cuda_driver_version {
            Some(d) => format!("CUDA driver {}", driver_str(d)),
            None => "CUDA driver assumed".into(),
        };
        (true, format!("auto (2.19+): {driver} >= 12.0 with VMM"))
    }

    /// Number of GPUs `CUDA_VISIBLE_DEVICES` names, `None` when unset.
    pub fn visible_count(&self) -> Option<usize> {
        self.cuda_visible_devices.as_deref().map(|s| {
            s.split(',')
                .map(str::trim)
                .filter(|x| !x.is_empty())
                .count()
        })
    }

    /// Whether a rank's process can see its local peers' GPUs as CUDA devices.
    pub(super) fn peers_visible(&self, local_ranks: usize) -> bool {
        match self.placement {
            RankPlacement::ProcessPerHost => true,
            RankPlacement::ContainerPerGpu { .. } => false,
            RankPlacement::ProcessPerGpu => match self.visible_count() {
                None => true,
                Some(n) => n >= 2 || local_ranks <= 1,
            },
        }
    }

    /// The network NCCL uses (`ncclNet->name`) and why.
    pub(crate) fn net_name(&self, have_nets: bool) -> (Net, String) {
        if let Some(n) = self.net.as_deref().map(str::trim).filter(|n| !n.is_empty()) {
            return (Net::from_nccl_net(n), format!("NCCL_NET={n} selects it"));
        }
        if let Some(f) = self.fabric
            && let Some(name) = f.net_name()
        {
            let caveat = f
                .net_name_caveat()
                .map(|c| format!(" ({c})"))
                .unwrap_or_default();
            return (
                Net::from_nccl_net(name),
                format!("the {f} fabric is stated: its transport is NET/{name}{caveat}"),
            );
        }
        // A stated fabric outranks whatever the devices suggest, IB and RoCE included.
        let source_net = self.source_net.as_ref().filter(|_| self.fabric.is_none());
        if let Some(SourceNet::Efa(why)) = source_net {
            // The plugin's name and its caveat are the stated EFA fabric's (one rule: the
            // vocabulary's `Fabric::net_name`). A loaded plugin comes before NCCL's IB and
            // socket transports, which NCCL_IB_DISABLE alone turns off.
            let efa = Fabric::Efa;
            let name = efa.net_name().unwrap_or("Libfabric");
            let caveat = efa.net_name_caveat().unwrap_or_default();
            return (
                Net::from_nccl_net(name),
                format!(
                    "the ports are EFA, inferred, not stated ({why}): NCCL reaches EFA through the aws-ofi-nccl plugin, NET/{name} ({caveat}); without it NCCL's IB transport skips EFA (link layer neither InfiniBand nor Ethernet) and falls back to sockets; --fabric efa states it"
                ),
            );
        }
        if self.ib_disable {
            return (
                Net::Socket,
                "NCCL_IB_DISABLE=1 turns the IB transport off, so sockets are used".into(),
            );
        }
        if let Some(SourceNet::Unknown(why)) = source_net {
            return (
                Net::Plugin(topo_model::net_kind::NetKind::Unknown.name().into()),
                format!(
                    "the network ports' kind is unknown ({why}): NCCL's NET is whichever transport opens them at run time (aws-ofi-nccl for EFA, IB for RoCE, sockets for plain Ethernet); --fabric states it"
                ),
            );
        }
        if let Some(SourceNet::Socket(why)) = source_net {
            return (
                Net::Socket,
                format!("the source's NET devices are NCCL's socket transport's ({why})"),
            );
        }
        if self.ib_available.unwrap_or(have_nets) {
            (Net::Ib, "IB verbs devices are present".into())
        } else {
            (
                Net::Socket,
                "no IB device is visible, so NCCL falls back to sockets".into(),
            )
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cumem_defaults_per_version() {
        let mut p = TransportPolicy {
            minor: 18,
            ..Default::default()
        };
        assert!(!p.cumem_enabled().0);
        p.minor = 19;
        assert!(p.cumem_enabled().0);
        p.cuda_driver_version = Some(11080);
        let (on, why) = p.cumem_enabled();
        assert!(!on);
        assert!(why.contains("11.8"), "{why}");
        p.cuda_driver_version = Some(12040);
        p.vmm_gdr_supported = Some(false);
        assert!(!p.cumem_enabled().0);
        p.minor = 24;
        assert!(p.cumem_enabled().0);
        p.vmm_supported = Some(false);
        assert!(!p.cumem_enabled().0);
        p.cumem = Some(true);
        assert_eq!(p.cumem_enabled(), (true, "NCCL_CUMEM_ENABLE=1".into()));
    }

    #[test]
    fn visibility_and_net_names() {
        let mut p = TransportPolicy::default();
        assert!(p.peers_visible(8));
        p.cuda_visible_devices = Some("3".into());
        assert!(!p.peers_visible(8));
        assert!(p.peers_visible(1));
        p.cuda_visible_devices = Some("0,1,2,3".into());
        assert!(p.peers_visible(8));
        assert_eq!(p.net_name(true).0, Net::Ib);
        assert_eq!(p.net_name(false).0, Net::Socket);
        p.net = Some("socket".into());
        assert_eq!(p.net_name(true).0, Net::Socket);
        p.net = Some("NCCL RDMA Plugin v8".into());
        assert_eq!(
            p.net_name(true).0,
            Net::Plugin("NCCL RDMA Plugin v8".into())
        );
        p.net = None;
        p.ib_disable = true;
        assert_eq!(p.net_name(true).0, Net::Socket);
        // What the source's devices say: EFA before NCCL_IB_DISABLE (a plugin comes first),
        // the stated fabric and NCCL_NET before EFA; unknown and socket after it.
        p.source_net = Some(SourceNet::Efa("rdmap79s0: an EFA verbs device name".into()));
        let (net, why) = p.net_name(true);
        assert_eq!(net, Net::Plugin("Libfabric".into()));
        assert!(why.contains("inferred, not stated (rdmap79s0"), "{why}");
        // The plugin's name depends on its version, which the reason states.
        assert!(
            why.contains(
                "NET/Libfabric (aws-ofi-nccl's name from v1.13.0; AWS Libfabric up to v1.12.1"
            ),
            "{why}"
        );
        p.fabric = Some(topo_vocab::Fabric::Ib);
        p.ib_disable = false;
        let (net, why) = p.net_name(true);
        assert_eq!(net, Net::Ib);
        assert!(!why.contains("inferred"), "{why}");
        p.fabric = None;
        p.ib_disable = false;
        p.source_net = Some(SourceNet::Unknown("nic@0000:10:1b.0".into()));
        let (net, why) = p.net_name(true);
        assert_eq!(net, Net::Plugin("unknown".into()));
        assert!(why.contains("kind is unknown"), "{why}");
        p.source_net = Some(SourceNet::Socket("eno1: port 0 and maxconn 65536".into()));
        let (net, why) = p.net_name(true);
        assert_eq!(net, Net::Socket);
        assert!(why.contains("socket transport's (eno1"), "{why}");
        assert!(
            RankPlacement::ContainerPerGpu {
                common_host_id: true,
                shared_shm: false
            }
            .isolates_ranks()
        );
        assert!(!RankPlacement::ProcessPerGpu.isolates_ranks());
    }
}
