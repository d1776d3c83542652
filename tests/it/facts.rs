//! Hardware facts as inputs (issue 10, item 2): boards whose drivers refuse P2P, NVLS
//! multicast availability and the GPUs visible to the job change the plan as they change
//! NCCL's choices, from profiles and from the command line.

use crate::util::plan_1g as plan;
use crate::util::topo_clean_env as topo;
use serde_json::Value;

fn transports(p: &Value) -> Vec<String> {
    p["transport_pairs"]
        .as_array()
        .unwrap()
        .iter()
        .map(|t| t["transport"].as_str().unwrap().to_string())
        .collect()
}

fn warnings(p: &Value) -> String {
    p["warnings"]
        .as_array()
        .unwrap()
        .iter()
        .map(|w| w.as_str().unwrap())
        .collect::<Vec<_>>()
        .join("\n")
}

#[test]
fn rtx4090_pairs_use_shm_unless_peer_access_is_stated() {
    let (p, _) = plan(&["--profile", "2x-rtx4090"]);
    assert!(
        transports(&p).iter().all(|t| t == "SHM"),
        "{:?}",
        transports(&p)
    );
    let w = warnings(&p);
    assert!(w.contains("P2P refused for GPU 0, 1"), "{w}");
    assert!(w.contains("GeForce RTX 4090 (0x2684)"), "{w}");
    // A cluster of them names each GPU number once and counts the hosts.
    let (five, _) = plan(&["--profile", "2x-rtx4090", "--nodes", "5"]);
    let w = warnings(&five);
    assert!(w.contains("P2P refused for GPU 0, 1 on 5 hosts ("), "{w}");
    let (on, _) = plan(&["--profile", "2x-rtx4090", "--p2p", "on"]);
    let t = transports(&on);
    assert!(t.iter().all(|t| t.starts_with("P2P")), "{t:?}");
    // Boards not in the table keep P2P; --p2p off refuses it for them too.
    let (l40s, _) = plan(&["--profile", "pcie-8x-l40s"]);
    assert!(transports(&l40s).iter().any(|t| t.starts_with("P2P")));
    let (off, _) = plan(&["--profile", "pcie-8x-l40s", "--p2p", "off"]);
    let t = transports(&off);
    assert!(!t.iter().any(|t| t.starts_with("P2P")), "{t:?}");
}

#[test]
fn nvls_off_as_a_fact_drops_nvls_channels() {
    let (base, _) = plan(&["--profile", "dgx-h100"]);
    assert_eq!(base["channels"]["nvls"], 16, "{}", base["channels"]);
    let (off, _) = plan(&["--profile", "dgx-h100", "--nvls", "off"]);
    assert_eq!(off["channels"]["nvls"], 0, "{}", off["channels"]);
    assert!(warnings(&off).contains("NVLS off"), "{}", warnings(&off));
    // The same from a profile's host.nvls.
    let dir = tempfile::tempdir().unwrap();
    let src = std::fs::read_to_string(crate::util::fixture("profiles/dgx-h100.yaml")).unwrap();
    let yaml = src.replacen("host:\n", "host:\n  nvls: false\n", 1);
    assert_ne!(yaml, src, "dgx-h100.yaml has a host block");
    let f = dir.path().join("h800.yaml");
    std::fs::write(&f, yaml).unwrap();
    let (h800, _) = plan(&["--from", f.to_str().unwrap()]);
    assert_eq!(h800["channels"]["nvls"], 0);
    assert!(
        warnings(&h800).contains("host.nvls: false"),
        "{}",
        warnings(&h800)
    );
}

#[test]
fn cuda_visible_devices_plans_the_listed_gpus_with_their_numbers() {
    let (p, _) = plan(&[
        "--profile",
        "dgx-h100",
        "--env",
        "CUDA_VISIBLE_DEVICES=4,5,6,7",
    ]);
    assert_eq!(p["nranks"], 4);
    let w = warnings(&p);
    assert!(w.contains("4 of 8 GPUs per node visible"), "{w}");
    assert!(w.contains("cuda 0 = GPU 4 (0000:9d:00.0)"), "{w}");
    let devs: Vec<i64> = p["transport_pairs"]
        .as_array()
        .unwrap()
        .iter()
        .map(|t| t["from_dev"].as_i64().unwrap())
        .collect();
    assert!(devs.iter().all(|d| (4..8).contains(d)), "{devs:?}");
    let (two, _) = plan(&[
        "--profile",
        "dgx-h100",
        "--nodes",
        "2",
        "--env",
        "CUDA_VISIBLE_DEVICES=0,1",
    ]);
    assert_eq!(two["nranks"], 4);
}

#[test]
fn an_invalid_visible_list_is_one_clear_error() {
    for (v, want) in [
        ("4,5,6,8", "GPU 8 does not exist"),
        ("1,1", "listed twice"),
        ("MIG-5c1d", "MIG instance"),
    ] {
        let out = topo()
            .args(["plan", "--profile", "dgx-h100", "--env"])
            .arg(format!("CUDA_VISIBLE_DEVICES={v}"))
            .output()
            .unwrap();
        assert_eq!(out.status.code(), Some(2), "{v}");
        let err = String::from_utf8_lossy(&out.stderr);
        assert!(err.starts_with("error: "), "{err}");
        assert!(err.contains(want), "{v}: {err}");
        assert!(!err.contains("panicked"), "{err}");
    }
}

/// Incomplete inputs (issue 10, item 3): a hand-trimmed XML whose GPUs carry only `dev` is
/// refused like a skeleton file (NVLink and sm unknown), and a port without a speed is planned with a warning that
/// says what NCCL fills in at run time and what the plan assumed.
#[test]
fn hand_trimmed_files_are_refused_or_warned_consistently() {
    let dir = tempfile::tempdir().unwrap();
    let gpu = |bus: &str, dev: u32, sm: &str| {
        format!(
            r#"<pci busid="{bus}" class="0x030200" vendor="0x10de" device="0x2330" link_speed="32.0 GT/s PCIe" link_width="16"><gpu dev="{dev}"{sm} gdr="1"/></pci>"#
        )
    };
    let xml = |sm: &str, speed: &str| {
        format!(
            r#"<system version="1"><cpu numaid="0" affinity="ffffffff" arch="x86_64" vendor="GenuineIntel" familyid="6" modelid="143">{}{}<pci busid="0000:30:00.0" class="0x020700" vendor="0x15b3" device="0x1021"><nic><net name="mlx5_0" dev="0"{speed} gdr="1"/></nic></pci></cpu></system>"#,
            gpu("0000:10:00.0", 0, sm),
            gpu("0000:20:00.0", 1, sm)
        )
    };
    let trimmed = dir.path().join("trimmed.xml");
    std::fs::write(&trimmed, xml("", r#" speed="400000""#)).unwrap();
    let out = topo()
        .args(["plan", "--from"])
        .arg(&trimmed)
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2));
    let err = String::from_utf8_lossy(&out.stderr);
    // Without `sm` the file is not as NCCL dumped it, so its missing NVLinks are unknown too
    // (issue 44), which is refused first.
    assert!(
        err.contains("NVLink is unknown for 2 of 2 GPU(s)") && err.contains("trimmed"),
        "{err}"
    );
    let nospeed = dir.path().join("nospeed.xml");
    std::fs::write(&nospeed, xml(r#" sm="90""#, "")).unwrap();
    let (p, _) = plan(&["--from", nospeed.to_str().unwrap(), "--nodes", "2"]);
    let w = warnings(&p);
    assert!(
        w.contains("network port name(s) without a speed (mlx5_0"),
        "{w}"
    );
    assert!(
        w.contains("NCCL's net plugin reports it at run time"),
        "{w}"
    );
}

/// A port whose source does not say `gdr` (issue 10, item 3): the plan warns that NCCL asks
/// its net plugin at run time and that it assumed none, and `topo xml` leaves it unstated
/// (written as 0, NCCL would stop asking and run without GPUDirect RDMA).
#[test]
fn a_port_without_gdr_is_named_and_stays_unstated() {
    let dir = tempfile::tempdir().unwrap();
    let xml = |gdr: &str| {
        format!(
            r#"<system version="1"><cpu numaid="0" affinity="ffffffff" arch="x86_64" vendor="GenuineIntel" familyid="6" modelid="143"><pci busid="0000:10:00.0" class="0x030200" vendor="0x10de" device="0x2330" link_speed="32.0 GT/s PCIe" link_width="16"><gpu dev="0" sm="90" gdr="1"/></pci><pci busid="0000:30:00.0" class="0x020700" vendor="0x15b3" device="0x1021" link_speed="32.0 GT/s PCIe" link_width="16"><nic><net name="mlx5_0" dev="0" speed="400000"{gdr}/></nic></pci></cpu></system>"#
        )
    };
    let bare = dir.path().join("nogdr.xml");
    std::fs::write(&bare, xml("")).unwrap();
    let (p, _) = plan(&["--from", bare.to_str().unwrap(), "--nodes", "2"]);
    let w = warnings(&p);
    assert!(w.contains("GPUDirect RDMA unknown on mlx5_0"), "{w}");
    assert!(w.contains("the plan assumed it does not"), "{w}");
    let stated = dir.path().join("gdr.xml");
    std::fs::write(&stated, xml(r#" gdr="0""#)).unwrap();
    let (p, _) = plan(&["--from", stated.to_str().unwrap(), "--nodes", "2"]);
    let w = warnings(&p);
    assert!(!w.contains("GPUDirect RDMA unknown"), "{w}");
    // Stated off is a fact, and the plan states it as show and diagnose do.
    assert!(w.contains("GPUDirect RDMA not available on mlx5_0"), "{w}");
    let out = topo().args(["xml", "--from"]).arg(&bare).output().unwrap();
    assert!(out.status.success());
    let text = String::from_utf8_lossy(&out.stdout);
    let net = text.lines().find(|l| l.contains("<net ")).unwrap();
    assert!(!net.contains("gdr="), "{net}");
}

fn messages(p: &Value) -> Vec<(String, String, String)> {
    p["messages"]
        .as_array()
        .unwrap()
        .iter()
        .map(|m| {
            let s = |k: &str| m[k].as_str().unwrap().to_string();
            (s("code"), s("severity"), s("text"))
        })
        .collect()
}

/// VM artefacts (issue 10, item 3): each is named, and a differential run on the same
/// machine with them repaired says which of the plan's choices they caused.
#[test]
fn vm_artefacts_are_named_with_what_they_caused() {
    // IBM Cloud's gx3d H100 VM: emulated 2.5 GT/s x1 bridges above each GPU and NIC. NVLink
    // carries GPU traffic and each NIC shares its GPU's bridge, so the bridges change nothing.
    let ibm = crate::util::fixture("fixtures/xml/ibm-cloud-gx3d-h100-topo.xml");
    let (p, _) = plan(&["--from", ibm.to_str().unwrap()]);
    let m = messages(&p);
    let bridge = m
        .iter()
        .find(|m| m.0 == "virtualized-topology")
        .expect("bridge");
    // The judge's verdict, as show and diagnose state it (issue 44: one judgement).
    assert!(
        bridge
            .2
            .starts_with("Virtual-machine PCIe topology (8 emulated bridges"),
        "{}",
        bridge.2
    );
    let caused = m.iter().find(|m| m.0 == "vm-caused").expect("caused");
    assert_eq!(caused.1, "info");
    assert!(
        caused.2.contains("changed nothing in this plan"),
        "{}",
        caused.2
    );
    // The same VM with its H100s reading 16 GT/s and 400G ports, on 2 nodes: the GPU links
    // now cap the network, and the differential says by how much.
    let text = std::fs::read_to_string(&ibm)
        .unwrap()
        .replace(
            r#"subsystem_device="0x16c1" link_speed="32.0 GT/s PCIe" link_width="0""#,
            r#"subsystem_device="0x16c1" link_speed="16.0 GT/s PCIe" link_width="16""#,
        )
        .replace(r#"speed="200000""#, r#"speed="400000""#);
    let dir = tempfile::tempdir().unwrap();
    let slow = dir.path().join("gen4.xml");
    std::fs::write(&slow, text).unwrap();
    let (p, _) = plan(&["--from", slow.to_str().unwrap(), "--nodes", "2"]);
    let m = messages(&p);
    assert!(m.iter().any(|m| m.0 == "vm-gpu-link-slow"), "{m:?}");
    let caused = m.iter().find(|m| m.0 == "vm-caused").expect("caused");
    assert_eq!(caused.1, "warning");
    assert!(caused.2.contains("allreduce 1G:"), "{}", caused.2);
    assert!(caused.2.contains("busbw"), "{}", caused.2);
    // A bare-metal profile has none of them.
    let (p, _) = plan(&["--profile", "dgx-h100"]);
    assert!(!messages(&p).iter().any(|m| m.0.starts_with("vm-")));
}
