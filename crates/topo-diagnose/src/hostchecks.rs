//! What the live machine (or a snapshot of it) shows beyond its topology: visible GPUs,
//! containers, /dev/shm, ACS, IOMMU, NVLink states, fabric, MIG, NVML P2P, GPUDirect RDMA.

use super::{Finding, Input, Report, Severity};
use crate::ReportExt;
use topo_evidence::hostfacts::HostFacts;
use topo_model::message::Code;

pub fn run(f: &HostFacts, input: &Input, r: &mut Report) {
    for s in &f.skipped {
        r.skip(s.check.clone(), s.why.clone());
    }
    r.checked(format!(
        "machine at {} ({} NVIDIA GPU(s) in sysfs)",
        f.root,
        f.pci_gpus.len()
    ));
    if f.pci_gpus.is_empty() {
        r.skip(
            "GPU checks (visible GPUs, ACS, IOMMU, NVLink, fabric, MIG, P2P, GPUDirect RDMA)",
            "no NVIDIA GPU in sys/bus/pci/devices on this machine",
        );
    }
    visibility(f, r);
    shm(f, r);
    acs(f, r);
    iommu(f, r);
    nvlink(f, r);
    fabric(f, r);
    mig(f, r);
    p2p(f, r);
    gdr(f, input, r);
    vm(f, r);
}

/// A guest's PCI tree is the hypervisor's: worth saying even when nothing else looks wrong.
fn vm(f: &HostFacts, r: &mut Report) {
    if f.hypervisor != Some(true) || f.pci_gpus.is_empty() {
        return;
    }
    r.add(
        Finding::at(
            Code::VirtualizedTopology,
            Severity::Info,
            "this machine is a virtual machine: NCCL sees the hypervisor's PCI tree, which may hide PCIe switches, NVSwitches and NUMA placement",
        )
        .evidence(["/proc/cpuinfo flags include `hypervisor`".to_string()])
        .fix("compare `topo show --view pci` here with the host's; if they differ, give NCCL the host's topology (NCCL_TOPO_FILE from `topo xml --from host.tar.gz`)"),
    );
}

fn visibility(f: &HostFacts, r: &mut Report) {
    let visible = f.gpus.as_ref().map(Vec::len);
    let cvd = f.env.get("CUDA_VISIBLE_DEVICES");
    let cvd_one = cvd.is_some_and(|v| !v.is_empty() && !v.contains(','));
    let in_box = f.pci_gpus.len();
    if in_box < 2 || !(visible == Some(1) || cvd_one) {
        return;
    }
    let mut ev = vec![format!(
        "sysfs lists {in_box} NVIDIA GPUs ({})",
        f.pci_gpus.join(", ")
    )];
    if let Some(v) = visible {
        ev.push(format!("NVML in this process sees {v}"));
    }
    if let Some(v) = cvd {
        ev.push(format!("CUDA_VISIBLE_DEVICES={v} ({})", f.env_source));
    }
    ev.extend(f.container.iter().cloned());
    r.add(
        Finding::at(
            Code::SingleGpuVisible,
            Severity::Warning,
            format!("this process sees one of the machine's {in_box} GPUs: ranks split this way cannot use NVLink P2P with each other unless they share one container that sees all GPUs"),
        )
        .evidence(ev)
        .fix("run one container/pod per machine exposing all GPUs (one process per GPU inside it) instead of one GPU per container"),
    );
    if f.kubernetes {
        r.add(
            Finding::at(
                Code::RanksOnSeparateHosts,
                Severity::Warning,
                "a Kubernetes pod with one GPU of a multi-GPU node: ranks in sibling pods get their own host hash, so NCCL treats them as separate hosts and uses the network between them",
            )
            .evidence(f.container.iter().cloned().chain([format!("{in_box} GPUs in the node, {} visible", visible.unwrap_or(1))]))
            .fix("request all GPUs of the node in one pod (nvidia.com/gpu: N) and run one rank per GPU inside it"),
        );
    }
}

fn shm(f: &HostFacts, r: &mut Report) {
    // NCCL only uses /dev/shm between GPUs of one host.
    let Some(bytes) = f.shm_bytes.filter(|_| !f.pci_gpus.is_empty()) else {
        return;
    };
    r.checked("/dev/shm size");
    if bytes >= 512 << 20 {
        return;
    }
    let mib = bytes >> 20;
    r.add(
        Finding::new(Code::ShmTooSmall, format!("/dev/shm is {mib} MiB: NCCL's shared-memory buffers and proxy need more, and jobs fail with bus errors or fall back"),
        )
        .evidence(f.shm_line.iter().map(|l| format!("/proc/mounts: {l}")))
        .fix("give the container a larger /dev/shm: `docker run --shm-size=16g` (or --ipc=host); in Kubernetes mount an emptyDir with medium: Memory at /dev/shm"),
    );
}

fn acs(f: &HostFacts, r: &mut Report) {
    if f.acs.is_empty() {
        return;
    }
    r.checked(format!("PCIe ACS on {} bridge(s) above GPUs", f.acs.len()));
    let on: Vec<String> = f
        .acs
        .iter()
        .filter(|a| a.redirect)
        .map(|a| {
            format!(
                "{}: ACS control 0x{:04x} ({}{})",
                a.bridge,
                a.ctrl,
                if a.ctrl & 0x4 != 0 { "ReqRedir+ " } else { "" },
                if a.ctrl & 0x8 != 0 { "CmpltRedir+" } else { "" }
            )
        })
        .collect();
    if on.is_empty() {
        return;
    }
    r.add(
        Finding::new(Code::AcsRedirect, "PCIe ACS redirects peer-to-peer traffic up to the CPU root complex: GPU P2P and GPUDirect RDMA are slow or hang",
        )
        .evidence(on)
        .fix("disable ACS on the PCIe switches (BIOS option, or `setpci -s <bridge> ECAP_ACS+0x6.w=0000` at boot) on bare metal; keep it only where VMs need it"),
    );
}

fn iommu(f: &HostFacts, r: &mut Report) {
    let Some((mode, ev)) = &f.iommu else { return };
    r.checked(format!("IOMMU mode ({mode})"));
    if mode != "translation" {
        return;
    }
    r.add(
        Finding::new(Code::IommuTranslation, "the IOMMU translates GPU DMA addresses: peer-to-peer and GPUDirect RDMA traffic is slowed or breaks",
        )
        .evidence([ev.clone()])
        .fix("boot with the IOMMU in pass-through (`iommu=pt`, with `intel_iommu=on` or `amd_iommu=on`) or off on bare-metal GPU nodes"),
    );
}

fn nvlink(f: &HostFacts, r: &mut Report) {
    if f.nvlinks.is_empty() {
        return;
    }
    r.checked("NVLink link states");
    let mut down: std::collections::BTreeMap<u32, Vec<u32>> = Default::default();
    for l in f.nvlinks.iter().filter(|l| !l.active) {
        down.entry(l.gpu).or_default().push(l.link);
    }
    if down.is_empty() {
        return;
    }
    let ev = down
        .iter()
        .map(|(g, links)| {
            let total = f.nvlinks.iter().filter(|l| l.gpu == *g).count();
            format!(
                "GPU{g}: link(s) {} inactive ({} of {total} up)",
                links
                    .iter()
                    .map(|x| x.to_string())
                    .collect::<Vec<_>>()
                    .join(", "),
                total - links.len()
            )
        })
        .collect::<Vec<_>>();
    r.add(
        Finding::new(Code::NvlinkDegraded, "NVLink links are down: those GPUs get less NVLink bandwidth and NCCL's rings and trees are built around them",
        )
        .evidence(ev)
        .fix("check `nvidia-smi nvlink -s` and `nvidia-smi nvlink -e`; reset the GPUs or have the board serviced"),
    );
}

fn fabric(f: &HostFacts, r: &mut Report) {
    let Some(gpus) = &f.gpus else { return };
    let ev: Vec<String> = gpus
        .iter()
        .filter_map(|g| {
            let s = g.fabric_state.as_deref()?;
            let bad =
                s != "completed" || g.fabric_status.as_deref().is_some_and(|x| x != "success");
            bad.then(|| {
                format!(
                    "GPU{} ({}): fabric state {s}{}",
                    g.index,
                    g.bus_id,
                    g.fabric_status
                        .as_deref()
                        .map(|x| format!(", status {x}"))
                        .unwrap_or_default()
                )
            })
        })
        .collect();
    if gpus.iter().any(|g| g.fabric_state.is_some()) {
        r.checked("GPU fabric state");
    }
    if !ev.is_empty() {
        r.add(super::topochecks::fabric_finding(ev));
    }
}

fn mig(f: &HostFacts, r: &mut Report) {
    let Some(gpus) = &f.gpus else { return };
    let on: Vec<String> = gpus
        .iter()
        .filter(|g| g.mig == Some(true))
        .map(|g| format!("GPU{} ({}): MIG mode enabled", g.index, g.bus_id))
        .collect();
    if gpus.iter().any(|g| g.mig.is_some()) {
        r.checked("MIG mode");
    }
    if on.is_empty() {
        return;
    }
    r.add(
        Finding::new(Code::MigEnabled, "MIG is enabled: NCCL cannot use NVLink or P2P between MIG instances, and communication between them goes through the host",
        )
        .evidence(on)
        .fix("disable MIG on GPUs used for multi-GPU jobs: `nvidia-smi -i <gpu> -mig 0` (then reset the GPU)"),
    );
}

fn p2p(f: &HostFacts, r: &mut Report) {
    if f.p2p_refused.is_empty() {
        return;
    }
    r.add(
        Finding::new(Code::P2pDenied, "NVML reports that GPU pairs cannot do P2P: NCCL falls back to shared memory (SHM) for them",
        )
        .evidence(
            f.p2p_refused
                .iter()
                .take(6)
                .map(|(a, b, s)| format!("NVML P2P status {a} -> {b}: {s}")),
        )
        .fix("`nvidia-smi topo -p2p r` shows the same; consumer GPUs have P2P disabled in the driver, and chipset/IOH refusals need GPUs under one PCIe switch or with NVLink"),
    );
}

fn gdr(f: &HostFacts, input: &Input, r: &mut Report) {
    let Some(peermem) = f.peermem else { return };
    let rdma_nics = input.topo.is_some_and(|t| {
        t.nets().iter().any(|&n| {
            t.net(n)
                .is_some_and(|x| x.name.starts_with("mlx") || x.link_layer.is_some())
        })
    });
    if f.pci_gpus.is_empty() || !rdma_nics {
        return;
    }
    r.checked("GPUDirect RDMA readiness");
    if peermem {
        return;
    }
    let dmabuf = f.kernel.as_deref().is_some_and(kernel_has_dmabuf);
    let ev = vec![
        "nvidia_peermem is not in /proc/modules".to_string(),
        format!(
            "kernel {}: DMA-BUF {}",
            f.kernel.as_deref().unwrap_or("unknown"),
            if dmabuf {
                "possible (5.12+)"
            } else {
                "needs 5.12+"
            }
        ),
    ];
    r.add(
        Finding::at(
            Code::GdrUnavailable,
            if dmabuf { Severity::Info } else { Severity::Warning },
            if dmabuf {
                "GPUDirect RDMA depends on DMA-BUF here (nvidia_peermem is not loaded)"
            } else {
                "GPUDirect RDMA is unavailable: no nvidia_peermem and a kernel without DMA-BUF; network traffic is staged through host memory"
            },
        )
        .evidence(ev)
        .fix("`modprobe nvidia_peermem` (or use the open kernel driver with a 5.12+ kernel for DMA-BUF); NCCL logs `GPU Direct RDMA Enabled` when it works"),
    );
}

fn kernel_has_dmabuf(k: &str) -> bool {
    let mut it = k.split(['.', '-']);
    let major: u32 = it.next().and_then(|x| x.parse().ok()).unwrap_or(0);
    let minor: u32 = it.next().and_then(|x| x.parse().ok()).unwrap_or(0);
    (major, minor) >= (5, 12)
}
