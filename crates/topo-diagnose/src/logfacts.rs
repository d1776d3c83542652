//! Log findings whose advice depends on the hardware: NVLS asked for and absent, and P2P
//! refused by the driver on a PCIe pair (expected) or an NVLink pair (a fault).

use super::{Finding, Input, LogInput, Report, quote, quote_some};
use crate::ReportExt;
use topo_model::message::Code;
use topo_vocab::Algorithm;

/// What the evidence says about NVLS on the machine: it needs Hopper-or-newer GPUs on
/// NVSwitches (and the fabric manager); anything else cannot have it.
pub enum Fabric {
    Nvswitch(String),
    /// No NVSwitch, or GPUs older than Hopper (an A100 HGX has NVSwitches but no multicast).
    NoNvls(String),
    Unknown,
}

/// Whether the job ran on an NVSwitch machine, from the topology passed in, else the log's
/// own `=== System` block, NVLS heads and channels, P2P-disabled lines and GPU names.
pub fn nvswitch(l: &LogInput, input: &Input) -> Fabric {
    // A topology implied by Init lines alone does not know NVLink: the log decides then.
    if let Some(t) = input.topo.filter(|t| nvlink_known(t)) {
        let name = t
            .source
            .origin
            .clone()
            .unwrap_or_else(|| t.source.kind.to_string());
        let sms: Vec<u32> = t.gpus().iter().filter_map(|&g| t.gpu(g)?.sm).collect();
        if !sms.is_empty() && sms.iter().all(|&sm| sm < 90) {
            return Fabric::NoNvls(format!(
                "the machine ({name}) has GPUs older than Hopper (SM {}): no NVLS",
                sms[0]
            ));
        }
        if t.nvswitches().next().is_some() {
            return Fabric::Nvswitch(format!("the machine ({name}) has NVSwitches"));
        }
        return Fabric::NoNvls(format!("the machine ({name}) has no NVSwitch"));
    }
    let log = l.log;
    if let Some(sys) = &log.system {
        let nvs = sys.nodes.iter().any(|n| n.kind == "NVS");
        let e = quote(&l.name, sys.header.line, &sys.header.text);
        return if nvs {
            Fabric::Nvswitch(format!("{e} (its dump lists an NVS node)"))
        } else {
            Fabric::NoNvls(format!("{e} (its dump lists no NVSwitch)"))
        };
    }
    if !log.nvls_heads.is_empty() || log.channels.as_ref().is_some_and(|c| c.nvls > Some(0)) {
        return Fabric::Nvswitch("the log prints NVLS heads or channels".into());
    }
    if let Some(p) = log.p2p_disabled.iter().find(|p| !p.nvlink) {
        return Fabric::NoNvls(format!(
            "{} (NCCL found the GPUs connected by PCIe only)",
            quote(&l.name, p.evidence.line, &p.evidence.text)
        ));
    }
    if let Some((_, name, e)) = log.devices.iter().find(|(_, n, _)| consumer_gpu(n)) {
        return Fabric::NoNvls(format!(
            "{} ({name}: a consumer GPU, never on an NVSwitch)",
            quote(&l.name, e.line, &e.text)
        ));
    }
    if let Some((_, name, e)) = log.devices.iter().find(|(_, n, _)| pre_hopper(n)) {
        return Fabric::NoNvls(format!(
            "{} ({name}: older than Hopper, no NVLS even on NVSwitches)",
            quote(&l.name, e.line, &e.text)
        ));
    }
    if let Some((k, e)) = log
        .gpu_paths_by_name()
        .first()
        .filter(|_| !log.gpu_paths_nvlink())
    {
        return Fabric::NoNvls(format!(
            "{} (GPU-to-GPU paths are {k}, no NVLink)",
            quote(&l.name, e.line, &e.text)
        ));
    }
    Fabric::Unknown
}

fn nvlink_known(t: &topo_model::Topology) -> bool {
    let gpus = t.gpus();
    !gpus.is_empty()
        && gpus.iter().all(|&g| {
            t.gpu(g)
                .is_some_and(|x| !matches!(x.nvlink, topo_model::NvlinkInfo::Unknown(_)))
        })
}

/// Data-centre and workstation GPUs before Hopper (NVLS multicast is SM 90+).
fn pre_hopper(name: &str) -> bool {
    let n = name.to_ascii_uppercase();
    [
        "V100", "A100", "A800", "A30", "A40", "A10", "A6000", "A5000", "A4000", "T4", "P100",
    ]
    .iter()
    .any(|m| n.split([' ', '-']).any(|w| w == *m))
}

/// GeForce and workstation boards: PCIe only, no P2P on most, never NVSwitch.
fn consumer_gpu(name: &str) -> bool {
    let n = name.to_ascii_lowercase();
    n.contains("geforce") || n.contains(" rtx ") || n.starts_with("rtx ") || n.contains("titan")
}

/// `NCCL_ALGO` lists NVLS (or NVLSTree) and the job got no NVLS: `0 nvls channels`, or
/// multicast not available. NCCL then runs other algorithms silently (2.17+, enqueue.cc).
pub fn nvls_requested(l: &LogInput, input: &Input, r: &mut Report) {
    let log = l.log;
    let Some(algo) = algo_value(l, input) else {
        return;
    };
    let wants = !algo.0.starts_with('^')
        && algo.0.split(',').any(|a| {
            matches!(
                Algorithm::from_name(a),
                Some(Algorithm::Nvls | Algorithm::NvlsTree)
            )
        });
    let zero = log.channels.as_ref().filter(|c| c.nvls == Some(0));
    let off: Vec<_> = log.nvls_support.iter().filter(|(ok, _)| !ok).collect();
    if !wants || (zero.is_none() && off.is_empty()) {
        return;
    }
    let mut ev = vec![algo.1];
    if let Some(c) = zero {
        ev.push(quote(&l.name, c.evidence.line, &c.evidence.text));
    }
    ev.extend(tuning_nvls_zero(l));
    ev.extend(quote_some(
        &l.name,
        off.iter().map(|(_, e)| (e.line, e.text.as_str())),
        2,
    ));
    let fix = match nvswitch(l, input) {
        Fabric::NoNvls(why) => {
            ev.push(why);
            "remove NVLS from NCCL_ALGO: NVLS needs Hopper-or-newer GPUs on NVSwitches (HGX/DGX H100 and later) and this machine has none"
        }
        Fabric::Nvswitch(why) => {
            ev.push(why);
            "make NVLS available: the fabric manager running (`nvidia-smi -q | grep -i -A2 fabric` says Completed), driver ≥ 530, CUDA ≥ 12.1, NCCL_NVLS_ENABLE not 0, multicast devices visible in the container; or drop NVLS from NCCL_ALGO"
        }
        Fabric::Unknown => {
            "on an NVSwitch machine (HGX/DGX H100 or newer) start the fabric manager and check NCCL_NVLS_ENABLE; on any other machine drop NVLS from NCCL_ALGO, it cannot run there"
        }
    };
    r.add(
        Finding::new(
            Code::NvlsRequestedUnavailable,
            "NCCL_ALGO asks for NVLS but the job has no NVLS channels: NCCL ran other algorithms",
        )
        .evidence(ev)
        .fix(fix),
    );
}

/// The logged TUNING table gives every NVLS cell 0 GB/s: NCCL's tuner will never pick it.
pub fn tuning_nvls_zero(l: &LogInput) -> Option<String> {
    let cells: Vec<_> = l
        .log
        .tuning
        .iter()
        .filter(|c| matches!(c.algorithm, Algorithm::Nvls | Algorithm::NvlsTree))
        .collect();
    (!cells.is_empty() && cells.iter().all(|c| c.bw_gbps == 0.0)).then(|| {
        format!(
            "{}: the TUNING table gives all {} NVLS cells 0 GB/s, so NCCL never picks NVLS",
            l.name,
            cells.len()
        )
    })
}

/// NCCL_ALGO's value and where it was seen.
fn algo_value(l: &LogInput, input: &Input) -> Option<(String, String)> {
    if let Some((v, e)) = l.log.env.get("NCCL_ALGO") {
        return Some((v.clone(), quote(&l.name, e.line, &e.text)));
    }
    for o in std::iter::once(l).chain(input.exporters("NCCL_ALGO", l)) {
        if let Some((Some(v), e)) = o.log.launch_env.get("NCCL_ALGO") {
            return Some((v.clone(), quote(&o.name, e.line, &e.text)));
        }
    }
    let v = input.env.get("NCCL_ALGO")?;
    Some((v.clone(), format!("NCCL_ALGO={v} in the environment")))
}

/// NCCL checks NVML's P2P status for every pair it would use P2P on (graph/paths.cc, 2.12+):
/// refused on a PCIe pair it logs INFO and uses SHM (consumer GPUs, some VMs); refused on an
/// NVLink pair it WARNs and fails init.
pub fn p2p_disabled(l: &LogInput, r: &mut Report) {
    let log = l.log;
    let (nvl, pcie): (Vec<_>, Vec<_>) = log.p2p_disabled.iter().partition(|p| p.nvlink);
    // Every rank prints every pair, in either order: each unordered pair once.
    let pairs = |v: &[&topo_evidence::nccllog::P2pDisabled]| {
        let set: std::collections::BTreeSet<(i32, i32)> = v
            .iter()
            .map(|x| (x.gpus.0.min(x.gpus.1), x.gpus.0.max(x.gpus.1)))
            .collect();
        let shown: Vec<String> = set
            .iter()
            .take(8)
            .map(|(a, b)| format!("{a}-{b}"))
            .collect();
        let more = set.len().saturating_sub(8);
        let tail = if more > 0 {
            format!(" and {more} more")
        } else {
            String::new()
        };
        format!("{}{tail}", shown.join(", "))
    };
    if !nvl.is_empty() {
        r.add(
            Finding::new(Code::P2pDisabledNvlink, format!("the driver refuses P2P between NVLink-connected GPUs ({}): a fabric or hardware fault, and NCCL stops", pairs(&nvl)),
            )
            .evidence(quote_some(&l.name, nvl.iter().map(|p| (p.evidence.line, p.evidence.text.as_str())), 3))
            .fix("check the NVLinks (`nvidia-smi nvlink -s`, `nvidia-smi topo -p2p rw`), on NVSwitch systems the fabric manager (`systemctl status nvidia-fabricmanager`, versions matching the driver), then reset the GPUs or reboot; NCCL_IGNORE_DISABLED_P2P=1 only hides it"),
        );
    }
    if !pcie.is_empty() {
        let mut ev = quote_some(
            &l.name,
            pcie.iter()
                .map(|p| (p.evidence.line, p.evidence.text.as_str())),
            3,
        );
        let shm = log
            .connections
            .iter()
            .filter(|c| c.transport.is_shm())
            .count();
        if shm > 0 {
            ev.push(format!("{shm} connection line(s) go via SHM instead"));
        }
        r.add(
            Finding::new(Code::P2pDisabledPcie, format!("the driver does not allow P2P between the PCIe-connected GPUs ({}), so NCCL uses shared memory (SHM): expected on consumer (GeForce) GPUs and in many VMs", pairs(&pcie)),
            )
            .evidence(ev)
            .fix("nothing to fix on consumer GPUs (their driver has no PCIe P2P); on data-centre GPUs check ACS and the IOMMU (`topo diagnose` on the machine) or the hypervisor's P2P support"),
        );
    }
}
