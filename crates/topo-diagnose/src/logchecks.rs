//! What an NCCL log alone proves: SHM where P2P was turned off, ranks of one box split into
//! hosts, one GPU per process, NVLS off, NET without GPUDirect RDMA, a virtual PCI tree, WARNs.

use super::{Finding, Input, LogInput, Report, Severity, quote, quote_some};
use crate::ReportExt;
use topo_evidence::nccllog::{Connection, Evidence, NcclLog};
use topo_model::message::Code;
use topo_vocab::PathType;

/// The P2P switches whose presence turns NVLink pairs into SHM (NCCL_P2P_DISABLE=1, or a
/// NCCL_P2P_LEVEL below the pair's path type).
const P2P_VARS: [&str; 2] = ["NCCL_P2P_DISABLE", "NCCL_P2P_LEVEL"];

pub fn run(l: &LogInput, input: &Input, r: &mut Report) {
    let log = l.log;
    if log.is_empty() {
        if log.launch_env.is_empty() && log.devices.is_empty() {
            r.skip(
                format!("log {}", l.name),
                "no NCCL INFO or WARN line in it: not an NCCL_DEBUG=INFO log",
            );
        } else {
            r.checked(format!(
                "{}: a launch command or nccl-tests header ({} NCCL_* exports, {} devices)",
                l.name,
                log.launch_env.len(),
                log.devices.len()
            ));
            command_only(l, input, r);
        }
        return;
    }
    r.checked(format!("log {} ({} NCCL lines)", l.name, log.nccl_lines));
    let explained = super::signatures::run(l, r);
    super::loggdr::run(l, r);
    shm(l, input, r);
    path_table(l, input, r);
    separate_hosts(l, r);
    single_gpu(l, input, r);
    nvls(l, input, r);
    super::logfacts::nvls_requested(l, input, r);
    super::logfacts::p2p_disabled(l, r);
    virtual_pci(l, r);
    warns(l, r, &explained);
    super::compare::run(l, input, r);
}

fn conn_lines<'a>(cs: impl IntoIterator<Item = &'a Connection>) -> Vec<(usize, &'a str)> {
    cs.into_iter().map(|c| (c.line, c.text.as_str())).collect()
}

/// Where the environment of a log says a variable was set: NCCL's own `set by environment`
/// line, a launch command in the paste, or the environment passed in.
pub(crate) fn env_evidence(l: &LogInput, input: &Input, var: &str) -> Option<String> {
    if let Some((v, e)) = l.log.env.get(var) {
        return Some(format!("{} (value {v})", quote(&l.name, e.line, &e.text)));
    }
    // The launch command is often pasted beside the log, as another file.
    for o in std::iter::once(l).chain(input.exporters(var, l)) {
        if let Some((v, e)) = o.log.launch_env.get(var) {
            let shown = around(&e.text, var);
            let val = v.as_deref().map(|v| format!(" = {v}")).unwrap_or_default();
            return Some(format!(
                "{var}{val} exported by the launch command: {}",
                quote(&o.name, e.line, &shown)
            ));
        }
    }
    input
        .env
        .get(var)
        .map(|v| format!("{var}={v} in the environment"))
}

fn shm(l: &LogInput, input: &Input, r: &mut Report) {
    let log = l.log;
    let shm: Vec<&Connection> = log
        .connections
        .iter()
        .filter(|c| c.transport.is_shm())
        .collect();
    if shm.is_empty() {
        return;
    }
    let env: Vec<String> = P2P_VARS
        .iter()
        .filter_map(|v| env_evidence(l, input, v))
        .collect();
    let nvlink_gpus: Vec<(String, String)> = input
        .logs
        .iter()
        .flat_map(|o| {
            nvlink_gpu_names(o.log)
                .into_iter()
                .map(move |(n, e)| (n, quote(&o.name, e.line, &e.text)))
        })
        .take(1)
        .collect();
    let mut ev = quote_some(&l.name, conn_lines(shm.iter().copied()), 3);
    let nvlink = input
        .topo
        .is_some_and(|t| t.gpus().iter().any(|&g| !t.nvlinks(g).is_empty()))
        || log.gpu_paths_nvlink()
        || !nvlink_gpu_names(log).is_empty();
    if env.is_empty() && !nvlink && super::signatures::mixed_local_pairs(log).is_some() {
        // Some pairs of the host use P2P, these do not: their PCIe path is beyond NCCL's P2P
        // level (src/graph/paths.cc ncclTopoCheckP2p: PXB by default from 2.23, SYS before
        // except on Intel, ARM and Zhaoxin CPUs), typically a pair across CPU sockets.
        let p2p = log.connections.iter().find(|c| c.transport.is_p2p());
        ev.extend(p2p.map(|c| {
            format!(
                "{} (another pair of the host uses P2P)",
                quote(&l.name, c.line, &c.text)
            )
        }));
        r.add(
            Finding::new(Code::ShmPciePath, "some GPU pairs of the host use shared memory (SHM) while others use P2P: those pairs' PCIe path (across CPU sockets) is beyond NCCL's P2P level, so SHM is NCCL's expected choice")
            .evidence(ev)
            .fix("nothing to fix: P2P across the CPU interconnect is usually slower; NCCL_P2P_LEVEL=SYS allows it where the platform handles it well (measure first)"),
        );
        return;
    }
    if env.is_empty() && log.p2p_disabled.iter().any(|p| !p.nvlink) {
        // NCCL said why: the driver refuses P2P on a PCIe pair (`p2p-disabled-pcie`).
        return;
    }
    if env.is_empty() {
        r.add(
            Finding::new(Code::P2pRefused, format!(
                    "{} connections between GPUs of one host go through shared memory (SHM): NCCL refused P2P for them",
                    shm.len()
                ),
            )
            .evidence(ev)
            .fix("find which cause applies: the other findings and `topo diagnose --from <the machine> --nccl-log <log>` name it (P2P level, ACS, IOMMU, no P2P support, containers)"),
        );
        return;
    }
    ev.extend(env);
    ev.extend(
        nvlink_gpus
            .iter()
            .map(|(_, q)| format!("{q} (an SXM GPU: NVLink-connected)")),
    );
    let title = if nvlink_gpus.is_empty() {
        "P2P is turned off by NCCL_P2P_* in the environment: GPUs of one host talk through shared memory (SHM)"
    } else {
        "P2P is turned off by NCCL_P2P_* in the environment: NVLink-connected GPUs talk through shared memory (SHM) instead"
    };
    r.add(
        Finding::new(Code::P2pDisabledByEnv, title)
            .evidence(ev)
            .fix("unset NCCL_P2P_DISABLE and NCCL_P2P_LEVEL (drop their `-x`/export from the job script), and the other NCCL_* settings unless they are needed; NCCL then uses P2P over NVLink"),
    );
}

/// The GRAPH path table between GPUs: a pair joined only through the CPU (PHB, NODE, SYS) is
/// beyond NCCL's default P2P level (PXB from 2.23; SYS before, PXB on Intel, ARM, Zhaoxin):
/// NCCL uses SHM there by design (src/graph/paths.cc ncclTopoCheckP2p).
fn path_table(l: &LogInput, input: &Input, r: &mut Report) {
    let log = l.log;
    if log.gpu_paths_nvlink() {
        return;
    }
    let Some((kind, e)) = log
        .gpu_paths
        .iter()
        .find(|(k, _)| matches!(k, PathType::Phb | PathType::Sys))
    else {
        return;
    };
    let mut ev = vec![format!(
        "{} (GPU to GPU: {kind}, through the CPU)",
        quote(&l.name, e.line, &e.text)
    )];
    let env: Vec<String> = P2P_VARS
        .iter()
        .filter_map(|v| env_evidence(l, input, v))
        .collect();
    let level = if env.is_empty() {
        "beyond NCCL's default P2P level (PXB, or SYS on AMD CPUs with two GPUs and before 2.23 outside Intel, ARM and Zhaoxin)".to_string()
    } else {
        ev.extend(env);
        "beyond the P2P level the environment sets".to_string()
    };
    if let Some(g) = log.graphs.first() {
        ev.push(quote(&l.name, g.evidence.line, &g.evidence.text));
    }
    r.add(
        Finding::new(Code::ShmPciePath, format!("the GPUs are joined by a {kind} path in NCCL's path table (PCIe through the CPU, no NVLink): {level}, so NCCL uses shared memory (SHM) between them, as designed"))
        .evidence(ev)
        .fix("nothing to fix: this is not a lost NVLink; NCCL_P2P_LEVEL=SYS allows P2P across the CPU where the platform handles it well (measure first); putting the GPUs under one PCIe switch or socket is the hardware answer outside a VM"),
    );
}

/// A launch command pasted alone that turns P2P off on SXM (NVLink) GPUs: the SHM it causes
/// is certain before any log line (NVIDIA/nccl-tests#166).
fn command_only(l: &LogInput, input: &Input, r: &mut Report) {
    let sxm = nvlink_gpu_names(l.log);
    let env: Vec<String> = P2P_VARS
        .iter()
        .filter_map(|v| env_evidence(l, input, v))
        .collect();
    if sxm.is_empty() || env.is_empty() {
        return;
    }
    let mut ev = env;
    ev.extend(sxm.iter().take(1).map(|(_, e)| {
        format!(
            "{} (an SXM GPU: NVLink-connected)",
            quote(&l.name, e.line, &e.text)
        )
    }));
    r.add(
        Finding::new(Code::P2pDisabledByEnv, "P2P is turned off by NCCL_P2P_* in the environment: NVLink-connected GPUs talk through shared memory (SHM) instead")
        .evidence(ev)
        .fix("unset NCCL_P2P_DISABLE and NCCL_P2P_LEVEL (drop their `-x`/export from the job script), and the other NCCL_* settings unless they are needed; NCCL then uses P2P over NVLink"),
    );
}

/// GPUs the nccl-tests header names as SXM (always NVLink-connected boards).
fn nvlink_gpu_names(log: &NcclLog) -> Vec<(String, &Evidence)> {
    let mut out = vec![];
    for (_, name, e) in &log.devices {
        if name.contains("SXM") && !out.iter().any(|(n, _): &(String, &Evidence)| n == name) {
            out.push((name.clone(), e));
        }
    }
    out
}

/// Whether the hostnames look like Kubernetes pods (`…-worker-0`, `…-0`).
fn pod_like(host: &str) -> bool {
    host.rsplit_once('-').is_some_and(|(a, b)| {
        !a.is_empty() && !b.is_empty() && b.chars().all(|c| c.is_ascii_digit())
    })
}

/// Ranks NCCL counted as separate nodes, each with one GPU, that are in fact GPUs of one box:
/// each process sees one GPU (cudaDev 0) but they are different physical GPUs (nvmlDev,
/// busId), hostnames look like pods (NVIDIA/nccl#1781).
fn separate_hosts(l: &LogInput, r: &mut Report) {
    let log = l.log;
    let ranks: Vec<_> = log.ranks.values().filter(|x| x.nnodes.is_some()).collect();
    if ranks.len() < 2
        || ranks
            .iter()
            .any(|x| x.local_ranks != Some(1) || x.nnodes < Some(2))
    {
        return;
    }
    let devs: std::collections::BTreeSet<_> =
        log.ranks.values().filter_map(|x| x.nvml_dev).collect();
    let one_each = log
        .ranks
        .values()
        .all(|x| x.cuda_dev.is_none_or(|d| d == 0));
    let distinct_gpus = devs.len() == log.ranks.len() && devs.len() > 1;
    let pods = log.hosts.iter().all(|h| pod_like(h));
    if !(one_each && distinct_gpus) {
        return;
    }
    let socket: Vec<&Connection> = log
        .connections
        .iter()
        .filter(|c| c.transport.is_socket())
        .collect();
    let mut ev: Vec<String> = ranks
        .iter()
        .filter_map(|x| x.comm_line.as_ref())
        .map(|e| quote(&l.name, e.line, &e.text))
        .collect();
    ev.extend(
        log.ranks
            .values()
            .filter_map(|x| x.init_line.as_ref())
            .map(|e| quote(&l.name, e.line, &e.text)),
    );
    ev.push(format!(
        "each rank is cudaDev 0 of its process but a different physical GPU (nvmlDev {}){}",
        devs.iter()
            .map(|d| d.to_string())
            .collect::<Vec<_>>()
            .join(", "),
        if pods {
            "; hostnames look like pods of one job"
        } else {
            ""
        }
    ));
    if let Some(e) = &log.p2p_type_line {
        ev.push(quote(&l.name, e.line, &e.text));
    }
    ev.extend(quote_some(&l.name, conn_lines(socket.iter().copied()), 2));
    let sev = if socket.is_empty() {
        Severity::Warning
    } else {
        Severity::Error
    };
    r.add(
        Finding::at(
            Code::RanksOnSeparateHosts,
            sev,
            if socket.is_empty() {
                "ranks on GPUs of one machine run in separate containers, so NCCL counts them as separate nodes and uses the network between them".to_string()
            } else {
                "ranks on GPUs of one machine run in separate containers (pods), so NCCL treats them as separate hosts and sends over TCP sockets (NET/Socket) instead of NVLink".to_string()
            },
        )
        .evidence(ev)
        .fix("run the ranks of a machine in one pod/container that sees all its GPUs (NVLink P2P needs it); if they must stay separate, a common NCCL_HOSTID plus host IPC and PID namespaces is the minimum, and even then P2P is not guaranteed (NVIDIA/nccl#1781)"),
    );
}

fn single_gpu(l: &LogInput, input: &Input, r: &mut Report) {
    let log = l.log;
    let narrowed: Vec<_> = log
        .ranks
        .values()
        .filter(|x| x.cuda_dev == Some(0) && x.nvml_dev.is_some_and(|d| d > 0))
        .collect();
    let all_zero = log
        .ranks
        .values()
        .all(|x| x.cuda_dev.is_none_or(|d| d == 0));
    if narrowed.is_empty() || !all_zero || log.ranks.len() < 2 {
        one_gpu_dump(l, r);
        return;
    }
    let shared_host = log
        .ranks
        .values()
        .any(|x| x.local_ranks.is_some_and(|n| n > 1));
    let hostid = log.env.get("NCCL_HOSTID");
    let containers = hostid.is_some()
        || log.hosts.iter().all(|h| pod_like(h))
        || input.facts.is_some_and(|f| !f.container.is_empty());
    let p2p: Vec<&Connection> = log
        .connections
        .iter()
        .filter(|c| c.transport.is_p2p())
        .collect();
    let mut ev: Vec<String> = narrowed
        .iter()
        .filter_map(|x| x.init_line.as_ref())
        .map(|e| quote(&l.name, e.line, &e.text))
        .collect();
    ev.push("cudaDev 0 with nvmlDev > 0: the process sees only that GPU (container device isolation or CUDA_VISIBLE_DEVICES)".into());
    if let Some((v, e)) = hostid {
        ev.push(format!("{} (value {v})", quote(&l.name, e.line, &e.text)));
    }
    ev.extend(quote_some(&l.name, conn_lines(p2p.iter().copied()), 2));
    let severe = shared_host && containers;
    let title = if severe && !p2p.is_empty() {
        "each container sees one GPU: NCCL reports P2P between them, but without all GPUs visible in one container the traffic does not go over NVLink"
    } else {
        "each process sees only one GPU: NCCL can use NVLink P2P between such processes only when they share a container (and IPC/PID namespaces) that sees all GPUs"
    };
    r.add(
        Finding::at(
            Code::SingleGpuVisible,
            if severe { Severity::Error } else { Severity::Warning },
            title,
        )
        .evidence(ev)
        .fix("put the ranks of a machine in one container/pod that exposes all its GPUs (one process per GPU inside it), instead of one GPU per pod"),
    );
}

/// A `=== System` block with one GPU whose graph leaves the node after it (`type LOC/...`,
/// `NET/0 GPU/0 NET/0`): the process sees one GPU and reaches its peers through the network
/// (NVIDIA/nccl#326: one V100 per container; #324: no CUDA IPC, so no NVLink, between them).
fn one_gpu_dump(l: &LogInput, r: &mut Report) {
    let log = l.log;
    let Some(sys) = &log.system else { return };
    let gpus: Vec<_> = sys.nodes.iter().filter(|n| n.kind == "GPU").collect();
    let Some(g) = log
        .graphs
        .iter()
        .find(|g| g.type_intra == Some(PathType::Loc))
    else {
        return;
    };
    // One GPU per node is a normal cluster; one per process on one host is not.
    if gpus.len() != 1
        || log.nranks() == Some(1)
        || super::signatures::nodes(log) == super::signatures::Nodes::Many
    {
        return;
    }
    let mut ev = vec![format!(
        "{} (the only GPU in this process's topology)",
        quote(&l.name, gpus[0].evidence.line, &gpus[0].evidence.text)
    )];
    ev.extend(
        sys.nodes
            .iter()
            .find(|n| n.kind == "CPU" && n.id == 0xFFFF_FFFF_FFFF_FFFF)
            .map(|n| {
                format!(
                    "{} (a CPU of unknown NUMA node)",
                    quote(&l.name, n.evidence.line, &n.evidence.text)
                )
            }),
    );
    ev.push(format!(
        "{} (the graph holds one GPU per node: its peers are reached over the network)",
        quote(&l.name, g.evidence.line, &g.evidence.text)
    ));
    r.add(
        Finding::at(Code::SingleGpuVisible, Severity::Warning, "each process sees only one GPU: NCCL can use NVLink P2P between such processes only when they share a container (and IPC/PID namespaces) that sees all GPUs")
        .evidence(ev)
        .fix("put the ranks of a machine in one container/pod that exposes all its GPUs (one process per GPU inside it), instead of one GPU per pod"),
    );
}

fn nvls(l: &LogInput, input: &Input, r: &mut Report) {
    let log = l.log;
    let off: Vec<&(bool, Evidence)> = log.nvls_support.iter().filter(|(ok, _)| !ok).collect();
    if off.is_empty() {
        // `0 nvls channels` on an NVSwitch Hopper+ box with several local ranks.
        let Some(ch) = &log.channels else { return };
        let local = log
            .ranks
            .values()
            .filter_map(|x| x.local_ranks)
            .max()
            .unwrap_or(0);
        let nvswitch_hopper = input.topo.is_some_and(|t| {
            t.nvswitches().next().is_some()
                && t.gpus()
                    .iter()
                    .any(|&g| t.gpu(g).and_then(|g| g.sm).is_some_and(|sm| sm >= 90))
        });
        if ch.nvls == Some(0)
            && local > 1
            && nvswitch_hopper
            && !log.env.contains_key("NCCL_NVLS_ENABLE")
        {
            r.add(
                Finding::new(Code::NvlsUnavailable, "NVLink SHARP (NVLS) is off on an NVSwitch machine: 0 nvls channels",
                )
                .evidence([quote(&l.name, ch.evidence.line, &ch.evidence.text)])
                .fix("check that the fabric manager runs and NVLS multicast is supported (driver ≥ 530, CUDA ≥ 12.1, no NCCL_NVLS_ENABLE=0); without NVLS single-node allreduce peaks near 370 GB/s instead of ~480"),
            );
        }
        return;
    }
    let mut ev = quote_some(
        &l.name,
        off.iter().map(|(_, e)| (e.line, e.text.as_str())),
        2,
    );
    ev.extend(super::logfacts::tuning_nvls_zero(l));
    let f = match super::logfacts::nvswitch(l, input) {
        super::logfacts::Fabric::NoNvls(why) => {
            ev.push(why);
            Finding::at(
                Code::NvlsUnavailable,
                Severity::Info,
                "NVLink SHARP (NVLS) is not available, as expected: it needs Hopper-or-newer GPUs on NVSwitches (HGX/DGX H100 and later) and this machine has none",
            )
            .fix("nothing to fix: NCCL uses rings and trees here; do not list NVLS in NCCL_ALGO")
        }
        super::logfacts::Fabric::Nvswitch(why) => {
            ev.push(why);
            Finding::new(Code::NvlsUnavailable, "NVLink SHARP (NVLS) multicast is not available to NCCL on an NVSwitch machine",
            )
            .fix("start the fabric manager (nvidia-fabricmanager; `nvidia-smi -q | grep -i -A2 fabric` must say Completed), use driver ≥ 530 and CUDA ≥ 12.1, and in containers expose the IMEX/multicast devices")
        }
        super::logfacts::Fabric::Unknown => Finding::new(Code::NvlsUnavailable, "NVLink SHARP (NVLS) multicast is not available to NCCL",
        )
        .fix("on an NVSwitch system (HGX/DGX H100 or newer) start the fabric manager and check `nvidia-smi -q | grep -i fabric`; on any other machine NVLS does not exist and this line is expected (pass --from or --profile to tell)"),
    };
    r.add(f.evidence(ev));
}

/// PCI links below 1 GB/s in the `=== System` dump, or emulated bridges (TI 104c:8232, QEMU
/// 1b36): a hypervisor's PCI tree, not the host's.
fn virtual_pci(l: &LogInput, r: &mut Report) {
    let Some(sys) = &l.log.system else { return };
    let slow: Vec<&topo_evidence::nccllog::system::SysLine> = sys
        .nodes
        .iter()
        .filter(|n| {
            n.kind == "PCI"
                && (n.link.as_ref().is_some_and(|(t, b)| t == "PCI" && *b < 1.0)
                    || n.extra.starts_with("104c8232")
                    || n.extra.starts_with("1b36"))
        })
        .collect();
    if slow.is_empty() {
        return;
    }
    let mut ev = vec![quote(&l.name, sys.header.line, &sys.header.text)];
    ev.extend(quote_some(
        &l.name,
        slow.iter()
            .map(|n| (n.evidence.line, n.evidence.text.as_str())),
        3,
    ));
    ev.push(format!(
        "{} PCI bridge(s) at {} GB/s towards the CPU: an emulated bridge (104c:8232 is what QEMU/KVM pxb-pcie setups show), not real hardware",
        slow.len(),
        slow.iter()
            .filter_map(|n| n.link.as_ref().map(|x| x.1))
            .fold(f64::MAX, f64::min)
    ));
    r.add(
        Finding::new(Code::VirtualizedTopology, "NCCL sees a virtual machine's PCI tree: emulated bridges at 0.2 GB/s hide the real switches and links, so its topology and search can go wrong",
        )
        .evidence(ev)
        .fix("give NCCL the bare-metal topology (`topo snapshot` on the host, `topo xml --from host.tar.gz -o host-topo.xml`, NCCL_TOPO_FILE=host-topo.xml in the VM), or fix the hypervisor's PCIe setup (pass through the switches; in the reported case, ACS capability `ecap_acs` on the host's devices)"),
    );
}

/// The WARN lines no catalogue entry or other check explains.
fn warns(l: &LogInput, r: &mut Report, explained: &[usize]) {
    // A set: a log of a million WARN lines stays linear.
    let explained: std::collections::HashSet<usize> = explained.iter().copied().collect();
    let rest: Vec<&Evidence> = l
        .log
        .warnings
        .iter()
        .filter(|e| !explained.contains(&e.line) && !e.text.contains("P2P is disabled between"))
        .collect();
    if rest.is_empty() {
        return;
    }
    r.add(
        Finding::new(
            Code::NcclWarning,
            format!(
                "NCCL printed {} WARN line(s) that topo's catalogue of NCCL messages does not know",
                rest.len()
            ),
        )
        .evidence(quote_some(
            &l.name,
            rest.iter().map(|e| (e.line, e.text.as_str())),
            5,
        ))
        .fix("read the WARN lines first: they name the failing call (the `file.cc:line` before NCCL WARN is where NCCL's source checks it)"),
    );
}

/// The part of a long command line around `needle`, so the quote shows it.
fn around(text: &str, needle: &str) -> String {
    let Some(at) = text.find(needle) else {
        return text.chars().take(200).collect();
    };
    let start = text[..at]
        .char_indices()
        .rev()
        .nth(80)
        .map_or(0, |(i, _)| i);
    let end = text[at..]
        .char_indices()
        .nth(needle.len() + 80)
        .map_or(text.len(), |(i, _)| at + i);
    format!(
        "{}{}{}",
        if start > 0 { "…" } else { "" },
        &text[start..end],
        if end < text.len() { "…" } else { "" }
    )
}
