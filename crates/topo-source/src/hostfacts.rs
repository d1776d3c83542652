//! The extra reads `topo diagnose` needs beyond the topology: environment, container signs,
//! /dev/shm, PCIe ACS, IOMMU, NVLink states, fabric, MIG, NVML P2P, GPUDirect RDMA readiness.
//!
//! Every read is rooted at a folder (`/` live, a snapshot folder, or a fixture), and every
//! check that cannot be read is recorded in [`HostFacts::skipped`] with the reason, so the
//! diagnosis can say what it could not check. The diagnose engine only sees [`HostFacts`].

use super::nvml::NvmlReport;
use crate::tree::{self, Tree};
use std::collections::BTreeMap;
use std::path::Path;

pub use topo_evidence::hostfacts::*;

/// Reads everything under `root`. `env` is the process environment for a live root, or
/// `None` to take the snapshot's `meta.json` environment; `nvml` is the live NVML answer (or
/// the reason there is none) when `root` is `/`; a snapshot's `nvml.json` is read otherwise.
pub fn read(
    root: &Path,
    env: Option<BTreeMap<String, String>>,
    nvml: Option<Result<NvmlReport, String>>,
) -> HostFacts {
    let disk = crate::tree::Disk::new(root);
    let mut f = read_tree(&disk, env, nvml);
    f.root = root.display().to_string();
    f
}

/// [`read`] of any tree: a folder, or a snapshot archive read into memory, so that an archive
/// gives the same facts as its unpacked folder.
pub fn read_tree(
    t: &dyn Tree,
    env: Option<BTreeMap<String, String>>,
    nvml: Option<Result<NvmlReport, String>>,
) -> HostFacts {
    let live = nvml.is_some();
    let root = &Root(t);
    let mut f = HostFacts {
        root: t.origin(),
        ..Default::default()
    };
    read_env(&mut f, root, env);
    read_container(&mut f, root);
    read_shm(&mut f, root);
    read_pci(&mut f, root);
    read_iommu(&mut f, root);
    read_nvml(&mut f, root, nvml);
    if live {
        apply_live_mig(&mut f);
    }
    read_modules(&mut f, root);
    f.hypervisor = text(root, "proc/cpuinfo").map(|c| {
        c.lines()
            .any(|l| l.starts_with("flags") && l.split_whitespace().any(|w| w == "hypervisor"))
    });
    f
}

/// The tree the facts are read from; every path is relative to its root and links are
/// followed only inside it.
struct Root<'a>(&'a dyn Tree);

impl Root<'_> {
    fn exists(&self, rel: &str) -> bool {
        tree::canonical(self.0, Path::new(rel)).is_ok()
    }

    fn bytes(&self, rel: &str, cap: crate::read::Cap) -> Result<Vec<u8>, String> {
        tree::read(self.0, Path::new(rel), cap).map_err(|e| e.to_string())
    }
}

/// A small file under the root, bounded like every sysfs read (a FIFO or device is refused).
fn text(root: &Root, rel: &str) -> Option<String> {
    let bytes = root.bytes(rel, crate::read::SYSFS).ok()?;
    String::from_utf8(bytes).ok()
}

fn read_env(f: &mut HostFacts, root: &Root, env: Option<BTreeMap<String, String>>) {
    if let Some(env) = env {
        f.env = relevant_env(env);
        f.env_source = "this process".into();
        return;
    }
    let meta =
        text(root, "meta.json").and_then(|m| serde_json::from_str::<serde_json::Value>(&m).ok());
    match meta
        .as_ref()
        .and_then(|m| m.get("env"))
        .and_then(|e| e.as_object())
    {
        Some(obj) => {
            f.env = relevant_env(
                obj.iter()
                    .filter_map(|(k, v)| Some((k.clone(), v.as_str()?.to_string()))),
            );
            f.env_source = "the snapshot's meta.json".into();
        }
        None => f.skip("environment", "the snapshot has no meta.json environment"),
    }
}

fn read_container(f: &mut HostFacts, root: &Root) {
    for (rel, sign) in [
        (".dockerenv", "/.dockerenv exists (Docker)"),
        ("run/.containerenv", "/run/.containerenv exists (Podman)"),
        (
            "var/run/secrets/kubernetes.io/serviceaccount",
            "a Kubernetes service account is mounted",
        ),
    ] {
        if root.exists(rel) {
            f.container.push(sign.into());
        }
    }
    if let Some(cg) = text(root, "proc/1/cgroup") {
        if cg.contains("kubepods") {
            f.container.push("/proc/1/cgroup names kubepods".into());
        } else if cg.contains("docker") || cg.contains("containerd") {
            f.container
                .push("/proc/1/cgroup names a container runtime".into());
        }
    }
    if f.env.contains_key("KUBERNETES_SERVICE_HOST") {
        f.container.push("KUBERNETES_SERVICE_HOST is set".into());
    }
    f.kubernetes = f
        .container
        .iter()
        .any(|s| s.contains("ubernetes") || s.contains("kubepods"));
}

/// `size=65536k` and friends, in bytes.
fn size_option(opts: &str) -> Option<u64> {
    let v = opts.split(',').find_map(|o| o.strip_prefix("size="))?;
    let (num, mult) = match v.chars().last()? {
        'k' | 'K' => (&v[..v.len() - 1], 1u64 << 10),
        'm' | 'M' => (&v[..v.len() - 1], 1 << 20),
        'g' | 'G' => (&v[..v.len() - 1], 1 << 30),
        _ => (v, 1),
    };
    num.parse::<u64>().ok().map(|n| n * mult)
}

fn read_shm(f: &mut HostFacts, root: &Root) {
    let Some(mounts) = text(root, "proc/mounts") else {
        f.skip("/dev/shm size", "proc/mounts not readable");
        return;
    };
    let Some(line) = mounts
        .lines()
        .find(|l| l.split_whitespace().nth(1) == Some("/dev/shm"))
    else {
        f.skip("/dev/shm size", "no /dev/shm mount in proc/mounts");
        return;
    };
    f.shm_line = Some(line.to_string());
    let opts = line.split_whitespace().nth(3).unwrap_or("");
    // tmpfs without size= gets half of RAM.
    f.shm_bytes = size_option(opts).or_else(|| {
        let mem = text(root, "proc/meminfo")?;
        let kb: u64 = mem
            .lines()
            .find(|l| l.starts_with("MemTotal:"))?
            .split_whitespace()
            .nth(1)?
            .parse()
            .ok()?;
        Some(kb * 1024 / 2)
    });
}

const PCI_DIR: &str = "sys/bus/pci/devices";

fn hex_attr(root: &Root, dev: &str, name: &str) -> Option<u32> {
    let s = text(root, &format!("{PCI_DIR}/{dev}/{name}"))?;
    u32::from_str_radix(s.trim().trim_start_matches("0x"), 16).ok()
}

/// GPUs from sysfs, then ACS control on every bridge above them.
fn read_pci(f: &mut HostFacts, root: &Root) {
    let Ok(names) = tree::list(root.0, Path::new(PCI_DIR)) else {
        f.skip("PCIe ACS", "sys/bus/pci/devices not readable");
        return;
    };
    let mut bridges = std::collections::BTreeSet::new();
    for n in &names {
        let (Some(v), Some(c)) = (hex_attr(root, n, "vendor"), hex_attr(root, n, "class")) else {
            continue;
        };
        if v != 0x10de || c >> 16 != 0x03 {
            continue;
        }
        f.pci_gpus.push(n.clone());
        // The real path holds every upstream bridge: .../0000:15:01.0/0000:16:00.0/<gpu>.
        if let Ok(real) = tree::canonical(root.0, &Path::new(PCI_DIR).join(n)) {
            for comp in real.components() {
                let s = comp.as_os_str().to_string_lossy();
                if s != n.as_str() && s.len() == 12 && s.as_bytes()[4] == b':' {
                    bridges.insert(s.into_owned());
                }
            }
        }
    }
    let mut unreadable = vec![];
    for b in bridges {
        match acs_ctrl(root, &format!("{PCI_DIR}/{b}/config")) {
            Ok(Some(ctrl)) => f.acs.push(Acs {
                bridge: b,
                ctrl,
                redirect: ctrl & 0x000c != 0,
            }),
            Ok(None) => {}
            Err(why) => unreadable.push(format!("{b}: {why}")),
        }
    }
    if let Some(first) = unreadable.first() {
        let more = unreadable.len() - 1;
        let tail = if more > 0 {
            format!(" (and {more} more bridges)")
        } else {
            String::new()
        };
        f.skip("PCIe ACS", format!("{first}{tail}"));
    }
}

/// The ACS control register of a PCI config space, `None` when the device has no ACS
/// capability; `Err` when the extended space cannot be read (it needs root).
fn acs_ctrl(root: &Root, rel: &str) -> Result<Option<u16>, String> {
    let cfg = root.bytes(rel, crate::read::PCI_CONFIG)?;
    if cfg.len() < 0x104 {
        return Err(format!(
            "config space is {} bytes (the extended part needs root)",
            cfg.len()
        ));
    }
    let u32_at =
        |o: usize| -> Option<u32> { Some(u32::from_le_bytes(cfg.get(o..o + 4)?.try_into().ok()?)) };
    let mut off = 0x100usize;
    for _ in 0..64 {
        let Some(h) = u32_at(off) else { break };
        if h == 0 || h == 0xffff_ffff {
            break;
        }
        if h & 0xffff == 0x000d {
            let ctrl = cfg
                .get(off + 6..off + 8)
                .map(|b| u16::from_le_bytes([b[0], b[1]]));
            return Ok(ctrl);
        }
        let next = ((h >> 20) & 0xffc) as usize;
        if next < 0x100 || next <= off {
            break;
        }
        off = next;
    }
    Ok(None)
}

fn read_iommu(f: &mut HostFacts, root: &Root) {
    let Some(gpu) = f.pci_gpus.first().cloned() else {
        f.skip("IOMMU mode", "no NVIDIA GPU in sys/bus/pci/devices");
        return;
    };
    let rel = format!("sys/bus/pci/devices/{gpu}/iommu_group/type");
    match text(root, &rel) {
        Some(t) => {
            let mode = match t.trim() {
                "identity" => "passthrough",
                "DMA" | "DMA-FQ" => "translation",
                other => other,
            };
            f.iommu = Some((mode.to_string(), format!("/{rel}: {}", t.trim())));
        }
        None if root.exists(&format!("sys/bus/pci/devices/{gpu}/iommu_group")) => {
            f.skip("IOMMU mode", format!("/{rel} not readable"));
        }
        None => f.iommu = Some(("off".into(), format!("GPU {gpu} has no iommu_group"))),
    }
}

fn read_nvml(f: &mut HostFacts, root: &Root, nvml: Option<Result<NvmlReport, String>>) {
    let report = match nvml {
        Some(r) => r,
        None => match text(root, "nvml.json") {
            Some(t) => {
                serde_json::from_str::<NvmlReport>(&t).map_err(|e| format!("nvml.json: {e}"))
            }
            None => Err("no NVML answer recorded (nvml.json)".into()),
        },
    };
    let mig =
        text(root, "nvml.json").and_then(|t| serde_json::from_str::<serde_json::Value>(&t).ok());
    let r = match report {
        Ok(r) => r,
        Err(why) => {
            for c in [
                "NVLink states",
                "GPU fabric state",
                "MIG mode",
                "NVML P2P status",
            ] {
                f.skip(c, why.clone());
            }
            return;
        }
    };
    let mut gpus = vec![];
    for g in &r.gpus {
        let mig_mode = mig
            .as_ref()
            .and_then(|v| v["gpus"].as_array())
            .and_then(|a| a.iter().find(|x| x["index"] == g.index))
            .and_then(|x| x["mig_mode"].as_bool());
        gpus.push(GpuState {
            index: g.index,
            bus_id: g.bus_id.clone(),
            name: g.name.clone(),
            fabric_state: g.fabric.as_ref().map(|x| x.state.clone()),
            fabric_status: g.fabric.as_ref().and_then(|x| x.status.clone()),
            mig: mig_mode,
        });
        for l in &g.nvlinks {
            f.nvlinks.push(NvlinkState {
                gpu: g.index,
                link: l.link,
                active: l.active,
            });
        }
    }
    if gpus.iter().all(|g| g.mig.is_none()) {
        f.skip(
            "MIG mode",
            "NVML's answer has no MIG mode (check with nvidia-smi -q | grep -A1 'MIG Mode')",
        );
    }
    for q in &r.p2p {
        let refused = [&q.read, &q.write]
            .into_iter()
            .flatten()
            .find(|s| s.as_str() != "ok");
        if let Some(s) = refused {
            f.p2p_refused
                .push((q.from.clone(), q.to.clone(), s.clone()));
        }
    }
    f.gpus = Some(gpus);
}

/// MIG mode per GPU index from the live driver (NVML's `nvmlDeviceGetMigMode`); GPUs without
/// MIG support answer "not supported", which counts as off.
pub fn live_mig() -> Result<Vec<(u32, bool)>, String> {
    std::panic::catch_unwind(|| {
        let nvml = nvml_wrapper::Nvml::init().map_err(|e| super::nvml::describe_error(&e))?;
        let n = nvml
            .device_count()
            .map_err(|e| super::nvml::describe_error(&e))?;
        Ok((0..n)
            .filter_map(|i| {
                let d = nvml.device_by_index(i).ok()?;
                Some((i, d.mig_mode().is_ok_and(|m| m.current == 1)))
            })
            .collect())
    })
    .unwrap_or_else(|_| Err("NVML failed while reading MIG mode".into()))
}

fn apply_live_mig(f: &mut HostFacts) {
    let Some(gpus) = f.gpus.as_mut() else { return };
    match live_mig() {
        Ok(modes) => {
            for g in gpus.iter_mut() {
                g.mig = modes.iter().find(|m| m.0 == g.index).map(|m| m.1);
            }
            f.skipped.retain(|s| s.check != "MIG mode");
        }
        Err(why) => f.skip("MIG mode", why),
    }
}

fn read_modules(f: &mut HostFacts, root: &Root) {
    f.kernel = text(root, "proc/sys/kernel/osrelease").map(|s| s.trim().to_string());
    match text(root, "proc/modules") {
        Some(m) => {
            f.peermem = Some(m.lines().any(|l| {
                let name = l.split_whitespace().next().unwrap_or("");
                name == "nvidia_peermem" || name == "nv_peer_mem"
            }))
        }
        None => f.skip("GPUDirect RDMA", "proc/modules not readable"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn shm_sizes() {
        assert_eq!(size_option("rw,nosuid,size=65536k"), Some(64 << 20));
        assert_eq!(size_option("rw,size=2g"), Some(2 << 30));
        assert_eq!(size_option("rw,nosuid"), None);
    }
}
