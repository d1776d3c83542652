//! The network NCCL would open on the shared AWS and socket XMLs (issue 44): the transport the
//! plan names, how many NICs each GPU has, and that an inference is said to be one. The
//! files are read in place (`util::realdata`), each test skipping, saying so, without them.

use crate::util::{realdata, topo_clean_env};
use serde_json::Value;
use std::collections::{BTreeMap, BTreeSet};

/// `topo plan --format json` of `file` on two nodes with `extra` flags.
fn plan_json(file: &std::path::Path, extra: &[&str]) -> Value {
    let file = file.to_str().unwrap();
    let mut args = vec!["--nodes", "2", "--from", file];
    args.extend(extra);
    crate::util::plan_doc(&args).0
}

/// Every inter-node transport of the plan with its reason and the GPUs of node 0 that send
/// on each NIC.
fn net_rows(
    plan: &Value,
) -> (
    BTreeSet<String>,
    Vec<String>,
    BTreeMap<String, BTreeSet<u64>>,
) {
    // Ranks per node, node by node: node 0 holds the first of them.
    let per_node = plan["ranks_per_node"][0].as_u64().unwrap();
    let reasons = plan["reasons"].as_array().unwrap();
    let (mut names, mut why, mut per_nic) = (BTreeSet::new(), vec![], BTreeMap::new());
    for t in plan["transports"].as_array().unwrap() {
        let name = t["transport"].as_str().unwrap();
        if !name.starts_with("NET/") {
            continue;
        }
        names.insert(name.to_string());
        let r = t["reason"].as_u64().unwrap() as usize;
        why.push(reasons[r].as_str().unwrap().to_string());
        let nic = t["nic"].as_str().unwrap_or("(socket)").to_string();
        for p in t["pairs"].as_array().unwrap() {
            let src = p[0].as_u64().unwrap();
            if src < per_node {
                per_nic
                    .entry(nic.clone())
                    .or_insert_with(BTreeSet::new)
                    .insert(src);
            }
        }
    }
    (names, why, per_nic)
}

#[test]
fn p5_efa_is_inferred_and_named_as_the_plugin_names_it() {
    let Some(f) = realdata("topo-xml/aws-p5-48xl-topo.xml") else {
        return;
    };
    let plan = plan_json(&f, &["--gpu", "h100", "--nvlink", "nvswitch"]);
    let (names, why, per_nic) = net_rows(&plan);
    assert_eq!(names, BTreeSet::from(["NET/Libfabric".to_string()]));
    for w in &why {
        assert!(w.contains("EFA, inferred, not stated"), "{w}");
        assert!(w.contains("rdmap79s0: an EFA verbs device name"), "{w}");
        assert!(
            w.contains(
                "NET/Libfabric (aws-ofi-nccl's name from v1.13.0; AWS Libfabric up to v1.12.1"
            ),
            "{w}"
        );
        assert!(w.contains("32 such port(s) per host"), "{w}");
        assert!(w.contains("falls back to sockets"), "{w}");
        // 1:4: every GPU has four NICs beside it, and channel 0 takes one of them.
        assert!(w.contains("a tie: 4 NICs are equally near"), "{w}");
    }
    assert_eq!(per_nic.len(), 8, "{per_nic:?}");
    assert!(per_nic.values().all(|g| g.len() == 1), "{per_nic:?}");
    // What is stated still wins over what is inferred.
    let stated = plan_json(
        &f,
        &["--gpu", "h100", "--nvlink", "nvswitch", "--fabric", "ib"],
    );
    let (names, why, _) = net_rows(&stated);
    assert_eq!(names, BTreeSet::from(["NET/IB".to_string()]));
    assert!(why.iter().all(|w| !w.contains("inferred")), "{why:?}");
}

#[test]
fn p4d_skeleton_nics_are_ports_of_unknown_kind_two_gpus_each() {
    let Some(f) = realdata("topo-xml/aws-p4d-24xl-topo.xml") else {
        return;
    };
    let plan = plan_json(&f, &["--gpu", "a100", "--nvlink", "nvswitch"]);
    let (names, why, per_nic) = net_rows(&plan);
    assert_eq!(names, BTreeSet::from(["NET/unknown".to_string()]));
    for w in &why {
        assert!(w.contains("the network ports' kind is unknown"), "{w}");
        assert!(w.contains("--fabric states it"), "{w}");
    }
    assert_eq!(per_nic.len(), 4, "{per_nic:?}");
    assert!(per_nic.values().all(|g| g.len() == 2), "{per_nic:?}");
    let warnings = plan["warnings"].to_string();
    assert!(
        warnings.contains("4 network controller(s) (PCI class 0x0200, no vendor or device id)"),
        "{warnings}"
    );
    assert!(warnings.contains("of unknown kind"), "{warnings}");
    // Stated, the fabric names the plugin, and the same four ports carry it.
    let efa = plan_json(
        &f,
        &["--gpu", "a100", "--nvlink", "nvswitch", "--fabric", "efa"],
    );
    let (names, _, per_nic) = net_rows(&efa);
    assert_eq!(names, BTreeSet::from(["NET/Libfabric".to_string()]));
    assert_eq!(per_nic.len(), 4, "{per_nic:?}");
}

/// The same p4d layout with the ids another revision of the file carries (1d0f:efa0), written
/// here by hand: an Amazon EFA function is an EFA port, inferred and said to be.
#[test]
fn an_efa_function_by_pci_id_is_an_assumed_efa_port() {
    let mut xml = String::from("<system version=\"1\">\n");
    for (numa, buses) in [(0, ["10", "20"]), (1, ["90", "a0"])] {
        xml += &format!(
            "<cpu numaid=\"{numa}\" arch=\"x86_64\" vendor=\"GenuineIntel\" familyid=\"6\" modelid=\"85\">\n"
        );
        for (i, b) in buses.iter().enumerate() {
            xml += &format!(
                "<pci busid=\"ffff:ff:0{}.0\" class=\"0x060400\" link_speed=\"8 GT/s\" link_width=\"16\">\n",
                numa * 2 + i + 1
            );
            for dev in ["1c", "1d"] {
                xml += &format!(
                    "<pci busid=\"0000:{b}:{dev}.0\" class=\"0x030200\" vendor=\"0x10de\" device=\"0x20b0\" link_speed=\"8 GT/s\" link_width=\"16\"/>\n"
                );
            }
            xml += &format!(
                "<pci busid=\"0000:{b}:1b.0\" class=\"0x020000\" vendor=\"0x1d0f\" device=\"0xefa0\" link_speed=\"8 GT/s\" link_width=\"16\"/>\n</pci>\n"
            );
        }
        xml += "</cpu>\n";
    }
    xml += "</system>\n";
    let dir = tempfile::tempdir().unwrap();
    let f = dir.path().join("p4d-ids.xml");
    std::fs::write(&f, xml).unwrap();
    let plan = plan_json(&f, &["--gpu", "a100", "--nvlink", "nvswitch"]);
    let (names, why, per_nic) = net_rows(&plan);
    assert_eq!(names, BTreeSet::from(["NET/Libfabric".to_string()]));
    assert!(
        why.iter()
            .all(|w| w.contains("inferred, not stated") && w.contains("1d0f:efa0")),
        "{why:?}"
    );
    assert_eq!(per_nic.len(), 4, "{per_nic:?}");
    assert!(per_nic.keys().all(|n| n.starts_with("efa@")), "{per_nic:?}");
    assert!(per_nic.values().all(|g| g.len() == 2), "{per_nic:?}");
    let warnings = plan["warnings"].to_string();
    assert!(
        warnings.contains("4 Amazon EFA function(s)") && warnings.contains("are assumptions"),
        "{warnings}"
    );
}

#[test]
fn an_nccl_written_socket_device_plans_sockets() {
    let Some(f) = realdata("topo-xml/nccl-miner-2x-rtxa6000-nvlink-bridge.xml") else {
        return;
    };
    let plan = plan_json(&f, &[]);
    let (names, why, per_nic) = net_rows(&plan);
    assert_eq!(names, BTreeSet::from(["NET/Socket".to_string()]));
    for w in &why {
        assert!(
            w.contains("NCCL's socket transport's (eno1: port 0 and maxconn 65536"),
            "{w}"
        );
    }
    // One interface for both GPUs.
    assert_eq!(per_nic.values().map(BTreeSet::len).sum::<usize>(), 2);
    // GPUDirect RDMA is no question on a socket device: show raises nothing about it.
    let show = topo_clean_env()
        .args(["show", "--from"])
        .arg(&f)
        .output()
        .unwrap();
    let text = String::from_utf8_lossy(&show.stdout);
    assert!(show.status.success());
    assert!(!text.contains("GPUDirect RDMA not available"), "{text}");
}
