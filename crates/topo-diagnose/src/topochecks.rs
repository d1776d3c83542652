//! What the machine's topology shows: a virtual PCI tree, downtrained links, ports without
//! GPUDirect RDMA, uneven NVLink, fabric not ready, pairs without P2P support, GPUs without a
//! near NIC, pairs too far for P2P.

use super::{Finding, Input, Report};
use crate::ReportExt;
use topo_model::Topology;
use topo_model::message::Code;
use topo_nccl::analyze::{self, Request, RuntimeFacts};
use topo_nccl::types::PathType;
use topo_nccl::version::{DEFAULT_VERSION, NcclVersion};

pub fn run(t: &Topology, input: &Input, r: &mut Report) {
    let origin = t
        .source
        .origin
        .clone()
        .unwrap_or_else(|| t.source.kind.to_string());
    if t.gpus().is_empty() {
        r.skip(
            "topology checks (PCIe, NVLink, fabric, P2P, rails)",
            format!("{origin}: no NVIDIA GPU in it"),
        );
        return;
    }
    r.checked(format!("topology of {origin} ({} GPUs)", t.gpus().len()));
    pcie(t, r);
    gdr(t, r);
    nvlink(t, r);
    fabric(t, r);
    p2p_support(t, r);
    rails(t, r);
    paths(t, input, r);
    source_warnings(t, r);
}

/// What the source's reader assumed or repaired (cells run together, a cut file, a
/// self-loop NVLink, devices listed by PCI class only): the warnings show and plan print
/// (`Topology::warning_messages`, code `source-warning`), as one finding with each as
/// evidence, last among the topology's findings (they qualify the others, they do not cause).
fn source_warnings(t: &Topology, r: &mut Report) {
    // A topology a log implies is the log's reading, whose gaps the log notes already say.
    if t.source.kind == topo_model::SourceKind::NcclLog {
        return;
    }
    let all: Vec<String> = t.warning_messages().map(|w| w.text).collect();
    let Some(first) = all.first() else {
        return;
    };
    let text = if all.len() == 1 {
        format!("the source's reader assumed or repaired: {first}")
    } else {
        format!(
            "the source's reader assumed or repaired {} things, first: {first}",
            all.len()
        )
    };
    let evidence = if all.len() > 1 { all } else { vec![] };
    r.add(finding_of(
        Finding::new(topo_model::message::SOURCE_WARNING, text).evidence(evidence),
        "check what was assumed against the machine; state what the source leaves out (--gpu, --nvlink, --nic-speed, --gdr) or read the machine itself (`topo snapshot` there, or an XML NCCL dumped there with NCCL_TOPO_DUMP_FILE)",
    ));
}

/// The ports' GPUDirect RDMA as show and plan state it (`topo_model::net_judge`), with what
/// to do about it. Host facts (nvidia_peermem, DMA-BUF) are judged apart (`hostchecks`) and
/// merge into the same finding.
fn gdr(t: &Topology, r: &mut Report) {
    for v in topo_model::net_judge::verdicts(t, t.nets()) {
        let fix = if v.code == Code::NetGdrUnknown {
            format!(
                "{}; `topo snapshot` on the host records whether nvidia_peermem or DMA-BUF is there",
                topo_model::net_judge::STATE_GDR
            )
        } else {
            "`modprobe nvidia_peermem` (or the open kernel driver with a 5.12+ kernel for DMA-BUF); NCCL logs `GPU Direct RDMA Enabled` when it works".to_string()
        };
        r.add(finding_of(v, fix));
    }
}

/// A judge's verdict (`topo_model::*_judge`, the rule show and plan state too) as a finding:
/// its code, severity and summary, the first 8 evidence lines, and what to do about it.
fn finding_of(mut v: Finding, fix: impl Into<String>) -> Finding {
    let more = v.evidence.len().saturating_sub(8);
    if more > 0 {
        v.evidence.truncate(8);
        v.evidence.push(format!("... and {more} more"));
    }
    v.fix(fix)
}

/// The PCIe facts show and plan state too (`topo_model::pcie_judge`: one rule, code and
/// severity each), with what to do about each.
fn pcie(t: &Topology, r: &mut Report) {
    use topo_model::pcie_judge::{self as judge, DOWNTRAINED, UPSTREAM_SLOWER, VIRTUAL};
    for v in judge::verdicts(t, t.graph.node_indices()) {
        let fix = match v.code {
            // A VM's tree: the judge's own fix (`judge::VM_FIX`), which every view states.
            VIRTUAL | judge::FLATTENED => judge::VM_FIX,
            DOWNTRAINED => {
                "reseat the card or riser, check the slot's BIOS bifurcation and lane settings; `lspci -vv` LnkSta against LnkCap shows it (`topo show --view pci` flags it)"
            }
            UPSTREAM_SLOWER => {
                "move the device to a slot whose switch or root port matches its generation, or accept the slower link (NCCL plans with it)"
            }
            _ => "",
        };
        r.add(finding_of(v, fix));
    }
}

/// Missing NVLink lanes and NVLS stated off, as show and plan state them
/// (`topo_model::nvlink_judge`, `nvls_judge`: one rule, code and severity each), with what to
/// do about them.
fn nvlink(t: &Topology, r: &mut Report) {
    let nvls = topo_model::nvls_judge::verdicts(t, t.graph.node_indices());
    let shape = topo_model::nvlink_shape::problems(t);
    for v in topo_model::nvlink_judge::verdicts(t, t.gpus())
        .into_iter()
        .chain(nvls)
        .chain(shape)
    {
        let fix = match v.code {
            Code::NvlsUnavailable => {
                "NVLS needs NVSwitch GPUs of sm 90 or newer, the fabric manager running and CUDA driver 12.1+, and NCCL_NVLS_ENABLE not 0; where the machine has them, drop the stated `nvls: false` (or --nvls off)"
            }
            Code::NvlinkIslands => {
                "keep each job's GPUs inside one island (CUDA_VISIBLE_DEVICES) where it fits; across islands NCCL's rings run at PCIe speed, so check that every bridge is fitted (`nvidia-smi topo -m` shows NV# for each bridged pair)"
            }
            Code::NvlinkUnknown => {
                "state it: --nvlink nvswitch|pairs|none (or --gpu MODEL), or read the machine live or from `topo snapshot`, where NVML lists each GPU's NVLinks"
            }
            Code::NvlinkOutside => topo_model::nvlink_shape::OUTSIDE_FIX,
            _ => {
                "check `nvidia-smi nvlink -s` (inactive links) and `nvidia-smi nvlink -e` (errors); reseat bridges, reset the GPU, or have the board serviced"
            }
        };
        r.add(finding_of(v, fix));
    }
}

/// NVLink fabric registration as show and plan state it (`topo_model::fabric_judge`), with
/// what to do about it. A live host's NVML facts are judged apart (`hostchecks`) and merge
/// into the same finding.
fn fabric(t: &Topology, r: &mut Report) {
    for v in topo_model::fabric_judge::verdicts(t, t.gpus()) {
        let fix = match v.code {
            Code::FabricManagerNotReady => FABRIC_FIX,
            Code::NvlinkFabricPartial => {
                "every GPU of an NVSwitch or MNNVL host registers with the fabric manager: check `nvidia-smi -q | grep -A3 Fabric` on each GPU, restart the fabric manager (and IMEX on GB200), then reset the GPUs that stay out"
            }
            _ => continue,
        };
        r.add(finding_of(v, fix));
    }
}

const FABRIC_FIX: &str = "start the fabric manager with the same version as the driver (`systemctl enable --now nvidia-fabricmanager`; on GB200/MNNVL also IMEX) and wait for state completed (`nvidia-smi -q | grep -A2 Fabric`)";

/// The live host's fabric states (`hostchecks`) as the finding the topology's fabric gives
/// (`topo_model::fabric_judge`): one code, one severity, one text.
pub(super) fn fabric_finding(ev: Vec<String>) -> Finding {
    finding_of(topo_model::fabric_judge::not_ready_verdict(ev), FABRIC_FIX)
}

/// Peer access as show and plan state it (`topo_model::p2p_judge`), with what to do about it.
fn p2p_support(t: &Topology, r: &mut Report) {
    for v in topo_model::p2p_judge::verdicts(t, t.gpus()) {
        let fix = if v.code == Code::P2pRefusedByDriver {
            format!(
                "nothing to set for these boards: use GPUs with NVLink (bridge or NVSwitch) or data-center GPUs for P2P; SHM works, at host-memory speed; {}",
                topo_model::p2p_judge::STATE_P2P
            )
        } else {
            "`nvidia-smi topo -p2p r` shows the same; chipset/IOH refusals need GPUs under one PCIe switch or with NVLink, and ACS or the IOMMU can block P2P (see acs-redirect, iommu-translation)".to_string()
        };
        r.add(finding_of(v, fix));
    }
}

/// Where the NICs sit against the GPUs, as show states it (`topo_model::nic_judge`: one rule,
/// code and severity); the problems only, with what to do about each.
fn rails(t: &Topology, r: &mut Report) {
    // In a VM the guest's PCIe tree is the hypervisor's: moving cards is not the fix there.
    let vm = r
        .findings
        .iter()
        .any(|f| matches!(f.code, Code::VirtualizedTopology | Code::TopologyFlattened));
    for v in topo_model::nic_judge::every_host(t, &topo_model::nic_judge::PlainNames(t), true) {
        let fix = if vm {
            "this is a virtual machine's PCIe tree (see virtualized-topology or topology-flattened): where the NICs sit here is the hypervisor's view, so give NCCL the host's topology (NCCL_TOPO_FILE from the cloud provider) before moving anything"
        } else {
            placement_fix(v.code)
        };
        r.add(finding_of(v, fix));
    }
    // A fused NIC is a fact, not a problem: said as show and plan say it, with nothing to do.
    if let Some(v) = topo_model::nic_judge::fused_named(t) {
        let fix = v.fix.clone();
        r.add(finding_of(v, fix));
    }
}

fn placement_fix(code: Code) -> &'static str {
    match code {
        Code::NicNumaRemote => {
            "bind each rank to its GPU's NUMA node and keep PXN on (NCCL_PXN_DISABLE unset) so NCCL sends through a GPU on a socket with a NIC; a NIC on every socket avoids the hop"
        }
        Code::NicNoneNear => {
            "put NICs under the GPUs' PCIe switches (one rail per GPU); until then GPU-to-NIC traffic crosses the CPU's root complex"
        }
        _ => {
            "pair every GPU with a NIC under the same PCIe switch (one rail per GPU), or keep PXN on (NCCL_PXN_DISABLE unset) so NCCL routes through a GPU that has one"
        }
    }
}

/// GPU pairs the model sends through SHM because their PCIe path is longer than the P2P
/// level, and SHM on NVLink pairs caused by the environment.
fn paths(t: &Topology, input: &Input, r: &mut Report) {
    if t.gpus().iter().any(|&g| {
        t.gpu(g)
            .is_some_and(|g| matches!(g.nvlink, topo_model::NvlinkInfo::Unknown(_)))
    }) {
        r.skip("P2P paths", "NVLink is unknown in this topology");
        return;
    }
    let version = input
        .version
        .as_deref()
        .and_then(|v| NcclVersion::parse(v).ok())
        .unwrap_or(DEFAULT_VERSION);
    let req = Request {
        topo: t,
        env: input.env.clone().into_iter().collect(),
        version,
        placement: Default::default(),
        facts: RuntimeFacts::default(),
    };
    let a = match analyze::analyze(&req) {
        Ok(a) => a,
        Err(e) => {
            r.skip("P2P paths", format!("the model failed: {}", e.message));
            return;
        }
    };
    r.checked(format!("P2P paths and transports (NCCL {version} model)"));
    // What the plan says of the same machine beyond its PCIe and NVLink: NCCL's init stopping
    // on it, and hosts that decide apart (`topo_nccl::plan`, the findings plan prints).
    for f in topo_nccl::plan::init_stops(&a)
        .into_iter()
        .chain(topo_nccl::plan::host_findings(&a))
    {
        let fix = match f.code {
            Code::NcclInitFails | Code::NetNone => {
                "plan it with `topo plan` (it names the NCCL version that runs it), or use an NCCL version the finding says runs it"
            }
            _ => {
                "make the hosts alike (same GPUs, NICs, NVLink and driver), or run the job on hosts of one kind; `topo diff` lists what differs"
            }
        };
        r.add(finding_of(f, fix));
    }
    let shm: Vec<&topo_nccl::transport::PairTransport> = a
        .transports
        .iter()
        .filter(|p| !p.inter_node && p.transport.is_shm() && p.from < p.to)
        .collect();
    let far: Vec<String> = shm
        .iter()
        .filter(|p| p.anomaly.is_none() && p.path.is_some_and(|x| x > PathType::Pxb))
        .map(|p| format!("GPU{} <-> GPU{}: {}", p.from_dev, p.to_dev, p.reason))
        .collect();
    if !far.is_empty() {
        let n = far.len();
        r.add(
            Finding::new(Code::P2pPathTooFar, format!("{n} GPU pair(s) are too far apart on PCIe for P2P (through the CPU): NCCL uses shared memory (SHM) between them"),
            )
            .evidence(far.into_iter().take(4).chain((n > 4).then(|| format!("... and {} more pairs", n - 4))))
            .fix("run jobs on GPUs under one PCIe switch or NVLink-bridged pairs (CUDA_VISIBLE_DEVICES), or try NCCL_P2P_LEVEL=SYS where the platform supports P2P through the CPU (measure: often slower than SHM)"),
        );
    }
    let env_off: Vec<String> = shm
        .iter()
        .filter_map(|p| {
            p.anomaly
                .as_ref()
                .map(|a| format!("GPU{} <-> GPU{}: {a}", p.from_dev, p.to_dev))
        })
        .collect();
    let vars: Vec<String> = ["NCCL_P2P_DISABLE", "NCCL_P2P_LEVEL"]
        .iter()
        .filter_map(|k| {
            input
                .env
                .get(*k)
                .map(|v| format!("{k}={v} in the environment"))
        })
        .collect();
    if !env_off.is_empty() && !vars.is_empty() {
        r.add(
            Finding::new(Code::P2pDisabledByEnv, "P2P is turned off by NCCL_P2P_* in the environment: NVLink-connected GPUs would talk through shared memory (SHM)",
            )
            .evidence(vars.into_iter().chain(env_off.into_iter().take(3)))
            .fix("unset NCCL_P2P_DISABLE and NCCL_P2P_LEVEL; NCCL then uses P2P over NVLink"),
        );
    }
}
