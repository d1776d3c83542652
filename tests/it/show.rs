//! `topo show` through the real binary.
//!
//! The live tests run on whatever machine runs the suite; CI and the development boxes have
//! no NVIDIA GPU, so they check that show degrades to NUMA/PCI/NIC information and says why.
//! A machine with GPUs skips only the "no GPU" wording.

use crate::util::topo;

fn stdout(args: &[&str]) -> String {
    let out = topo().args(args).output().unwrap();
    assert!(
        out.status.success(),
        "topo {args:?} failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8(out.stdout).unwrap()
}

fn has_nvidia_gpu() -> bool {
    std::fs::read_dir("/sys/bus/pci/devices")
        .map(|d| {
            d.flatten().any(|e| {
                std::fs::read_to_string(e.path().join("vendor")).is_ok_and(|v| v.trim() == "0x10de")
                    && std::fs::read_to_string(e.path().join("class"))
                        .is_ok_and(|c| c.trim().starts_with("0x03"))
            })
        })
        .unwrap_or(false)
}

#[test]
fn live_summary_says_why_there_is_no_gpu() {
    let out = stdout(&["show"]);
    assert!(out.contains("NUMA nodes ("), "{out}");
    if !has_nvidia_gpu() {
        // The reason live discovery gives, said once.
        let json = stdout(&["show", "--format", "json"]);
        let v: serde_json::Value = serde_json::from_str(&json).unwrap();
        let why = v["hosts"][0]["gpu_discovery"].as_str().unwrap().to_string();
        assert!(out.contains("\nNo NVIDIA GPU"), "{out}");
        assert!(
            out.contains(why.trim_start_matches("no NVIDIA GPU found: ")),
            "{out}"
        );
        assert_eq!(out.matches("No NVIDIA GPU").count(), 1, "{out}");
        assert!(!out.contains("GPUs ("), "{out}");
    }
}

#[test]
fn live_json_is_one_document_with_the_contract_fields() {
    let out = stdout(&["show", "--format", "json"]);
    let v: serde_json::Value = serde_json::from_str(&out).expect("valid json");
    assert_eq!(v["schema"], "topo.show/v1");
    crate::util::assert_valid(&v, "live show");
    for k in [
        "gpus",
        "nics",
        "numa",
        "nvswitches",
        "pci_switches",
        "paths",
        "warnings",
    ] {
        assert!(v[k].is_array(), "{k} missing: {out}");
    }
    assert!(!v["numa"].as_array().unwrap().is_empty());
    if !has_nvidia_gpu() {
        assert!(v["gpus"].as_array().unwrap().is_empty());
        assert!(v["hosts"][0]["gpu_discovery"].is_string(), "{out}");
    }
    assert!(!out.contains("\"N/A\""));
}

#[test]
fn live_yaml_parses_and_every_view_runs() {
    let y = stdout(&["show", "--format", "yaml"]);
    let v: yaml_serde::Value = yaml_serde::from_str(&y).expect("valid yaml");
    assert_eq!(v["schema"].as_str(), Some("topo.show/v1"));
    for view in ["summary", "matrix", "pci", "paths", "dot"] {
        let text = stdout(&["show", "--view", view]);
        assert!(!text.is_empty(), "{view}");
        let j = stdout(&["show", "--view", view, "--format", "json"]);
        let v: serde_json::Value = serde_json::from_str(&j).unwrap();
        assert_eq!(v["view"], view);
        crate::util::assert_valid(&v, &format!("live show --view {view}"));
    }
    assert!(stdout(&["show", "--view", "dot"]).starts_with("digraph topo {"));
    assert!(stdout(&["show", "--view", "pci"]).contains("NUMA "));
}

#[test]
fn piped_and_no_color_output_has_no_escape_sequences() {
    // Piped (not a terminal): auto means no colour.
    let piped = stdout(&["show"]);
    assert!(!piped.contains('\x1b'));
    let out = topo()
        .env("NO_COLOR", "1")
        .args(["show", "--view", "pci"])
        .output()
        .unwrap();
    assert!(out.status.success());
    assert!(!String::from_utf8_lossy(&out.stdout).contains('\x1b'));
    // Forcing colour does colour, so the checks above can fail.
    let forced = stdout(&["--color", "always", "show"]);
    assert!(forced.contains("\x1b["), "{forced}");
    let never = stdout(&["--color", "never", "show", "--view", "matrix"]);
    assert!(!never.contains('\x1b'));
}

#[test]
fn output_file_is_plain_text() {
    let dir = tempfile::tempdir().unwrap();
    let f = dir.path().join("show.txt");
    topo()
        .args(["--color", "always", "show", "-o"])
        .arg(&f)
        .assert()
        .success();
    let text = std::fs::read_to_string(&f).unwrap();
    assert!(text.contains("NUMA nodes ("));
    assert!(!text.contains('\x1b'));
}

#[test]
fn bad_view_is_a_usage_error() {
    topo()
        .args(["show", "--view", "bogus"])
        .assert()
        .code(2)
        .stderr(predicates::str::contains("bogus"));
    topo().args(["show", "--format", "xml"]).assert().code(2);
}

// ---------------------------------------------------------------------------------------------
// Real topology files (fixtures/xml, provenance in fixtures/xml/README.md) and built-in
// profiles, through the binary.

const FIXTURES: [&str; 8] = [
    "aws-p4d-24xl-topo",
    "aws-p5-48xl-topo",
    "azure-ndv4-topo",
    "azure-ndv5-topo",
    "ibm-cloud-gx3d-h100-topo",
    "nccl-miner-2x-rtxa6000-nvlink-bridge",
    "panlichen-8x-rtx3090-switchtec",
    "rwkvinllama-2x-rtx4090-cx4",
];

/// `topo show` run from the repository root, so paths in the output are relative and stable.
fn show(args: &[&str]) -> String {
    let out = topo()
        .current_dir(env!("CARGO_MANIFEST_DIR"))
        .args(["show"])
        .args(args)
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "topo show {args:?}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8(out.stdout).unwrap()
}

fn xml(name: &str) -> String {
    format!("fixtures/xml/{name}.xml")
}

fn json_of(args: &[&str]) -> serde_json::Value {
    let mut a = args.to_vec();
    a.extend(["--format", "json"]);
    let v = serde_json::from_str(&show(&a)).unwrap();
    crate::util::assert_valid(&v, &format!("topo show {args:?}"));
    v
}

/// The matrix row of `label`, split into cells.
fn row(matrix: &str, label: &str) -> Vec<String> {
    matrix
        .lines()
        .find(|l| l.starts_with(&format!("{label} ")))
        .unwrap_or_else(|| panic!("no row {label} in\n{matrix}"))
        .split_whitespace()
        .map(str::to_string)
        .collect()
}

#[test]
fn fixture_views_snapshots() {
    for f in FIXTURES {
        let path = xml(f);
        for view in ["summary", "matrix"] {
            let text = show(&["--from", &path, "--view", view]);
            insta::assert_snapshot!(format!("{f}_{view}"), text);
        }
    }
    for f in ["ibm-cloud-gx3d-h100-topo", "panlichen-8x-rtx3090-switchtec"] {
        for view in ["pci", "paths"] {
            let text = show(&["--from", &xml(f), "--view", view]);
            insta::assert_snapshot!(format!("{f}_{view}"), text);
        }
    }
    let j = show(&[
        "--from",
        &xml("rwkvinllama-2x-rtx4090-cx4"),
        "--format",
        "json",
    ]);
    insta::assert_snapshot!("rwkvinllama-2x-rtx4090-cx4_json", j);
}

#[test]
fn ibm_gx3d_reads_like_nvidia_smi_and_pairs_nics_by_switch() {
    let f = xml("ibm-cloud-gx3d-h100-topo");
    let m = show(&["--from", &f, "--view", "matrix"]);
    let r0 = row(&m, "GPU0");
    // GPU0..GPU7, NIC0..NIC7 columns after the label.
    assert_eq!(r0[1], "X");
    assert!(r0[2..9].iter().all(|c| c == "NV18"), "{r0:?}");
    assert_eq!(r0[16], "PIX", "GPU0 pairs with NIC7 (mlx5_7): {r0:?}");
    assert_eq!(r0[9], "SYS", "NIC0 is on the other socket: {r0:?}");
    assert_eq!(r0[13], "NODE", "{r0:?}");
    assert!(m.contains("\nNIC Legend:\n\n  NIC0: mlx5_0\n"));
    let j = json_of(&["--from", &f]);
    let g0 = &j["gpus"][0];
    assert_eq!(g0["nvlink_lanes"], 18);
    assert_eq!(g0["nvswitch"], true);
    assert_eq!(g0["nearest_nic"], "mlx5_7");
    assert_eq!(g0["nic_path"], "PIX");
    assert_eq!(g0["numa"], 0);
    assert_eq!(j["nvswitches"].as_array().unwrap().len(), 4);
    let s = show(&["--from", &f]);
    assert!(s.contains("GPU0↔mlx5_7, GPU1↔mlx5_6"), "{s}");
    assert!(
        s.contains("Virtual-machine PCIe topology (8 emulated bridges, 16 links of width 0)"),
        "{s}"
    );
    let p = show(&["--from", &f, "--view", "pci"]);
    assert_eq!(p.matches("! emulated (VM) bridge").count(), 8);
}

#[test]
fn bridge_pair_and_pcie_boxes() {
    let m = show(&[
        "--from",
        &xml("nccl-miner-2x-rtxa6000-nvlink-bridge"),
        "--view",
        "matrix",
    ]);
    assert_eq!(row(&m, "GPU0")[2], "NV4");
    assert_eq!(row(&m, "GPU1")[1], "NV4");
    let m = show(&[
        "--from",
        &xml("rwkvinllama-2x-rtx4090-cx4"),
        "--view",
        "matrix",
    ]);
    assert_eq!(row(&m, "GPU0")[2], "SYS");
    let j = json_of(&["--from", &xml("rwkvinllama-2x-rtx4090-cx4")]);
    let p = j["paths"].as_array().unwrap();
    let g0g1 = p
        .iter()
        .find(|x| x["from"] == "GPU0" && x["to"] == "GPU1")
        .unwrap();
    assert_eq!(g0g1["type"], "SYS");
    assert_eq!(j["gpus"][1]["nic_path"], "SYS");
    assert_eq!(j["nics"][0]["gdr"], false);
    // Switchtec box: 4 GPUs per switch, the only NIC under the second socket's switch.
    let m = show(&[
        "--from",
        &xml("panlichen-8x-rtx3090-switchtec"),
        "--view",
        "matrix",
    ]);
    let r0 = row(&m, "GPU0");
    assert_eq!(r0[2..5], ["PIX", "PIX", "PIX"]);
    assert_eq!(r0[5], "SYS");
    assert_eq!(row(&m, "GPU4")[9], "PIX");
    let s = show(&["--from", &xml("panlichen-8x-rtx3090-switchtec")]);
    assert!(
        s.contains("GPUs 0–3 have no NIC on their socket (NUMA 0)"),
        "{s}"
    );
}

#[test]
fn skeleton_files_say_nvlink_is_unknown_and_keep_their_nics() {
    let f = xml("azure-ndv4-topo");
    let m = show(&["--from", &f, "--view", "matrix"]);
    assert!(m.contains("Note: NVLink unknown for GPUs 0–7"), "{m}");
    assert!(m.contains("  NIC0: hca@0101:00:00.0\n"), "{m}");
    assert_eq!(row(&m, "GPU0")[2], "PIX");
    let j = json_of(&["--from", &f]);
    assert_eq!(j["gpus"][0]["nvlink_lanes"], serde_json::Value::Null);
    assert_eq!(j["gpus"][0]["nvlink"]["state"], "unknown");
    assert_eq!(j["nics"].as_array().unwrap().len(), 8);
    // Issue 44: the HCA's port is assumed (named after its bus id); its speed and GDR stay
    // unknown.
    assert_eq!(j["nics"][0]["name"], "hca@0101:00:00.0");
    assert_eq!(j["nics"][0]["speed_gbps"], serde_json::Value::Null);
    assert_eq!(j["nics"][0]["gdr"], serde_json::Value::Null);
    let s = show(&["--from", &f]);
    assert!(s.contains("unknown (see note)"), "{s}");
    assert!(!s.contains("0 lanes"), "{s}");
}

#[test]
fn profiles_render_every_view() {
    for p in ["dgx-h100", "dgx-a100", "dgx-v100", "pcie-8x-l40s"] {
        for view in ["summary", "matrix", "pci", "paths", "dot"] {
            let text = show(&["--profile", p, "--view", view]);
            assert!(!text.is_empty());
        }
    }
    let m = show(&["--profile", "dgx-h100", "--view", "matrix"]);
    assert!(
        row(&m, "GPU3")[1..9]
            .iter()
            .filter(|c| *c == "NV18")
            .count()
            == 7
    );
    let m = show(&["--profile", "dgx-a100", "--view", "matrix"]);
    assert_eq!(row(&m, "GPU0")[2], "NV12");
    // Two nodes are two copies of one host: the host is described once, both are named.
    let two = json_of(&["--profile", "dgx-h100", "--nodes", "2"]);
    assert_eq!(two["gpus"].as_array().unwrap().len(), 8);
    assert_eq!(two["hosts"].as_array().unwrap().len(), 2);
    assert_eq!(two["hosts"][1]["copy_of"], 0);
    assert_eq!(two["copies"]["count"], 2);
    assert_eq!(two["copies"]["gpus"], 16);
}

/// `--nodes N` makes N copies of one machine: every view and format describes the first and
/// names the others once, so 4,096 copies cost what one does; a fault on one host makes it
/// a host of its own, listed in full.
#[test]
fn copies_are_described_once_and_a_faulty_host_in_full() {
    for view in ["summary", "matrix", "pci", "paths"] {
        let out = show(&["--profile", "hgx-h200", "--nodes", "4096", "--view", view]);
        assert_eq!(
            out.matches("GPU7").count(),
            show(&["--profile", "hgx-h200", "--nodes", "2", "--view", view])
                .matches("GPU7")
                .count(),
            "{view}"
        );
        assert!(
            out.contains("Hosts hgx-h200-1 to hgx-h200-4095 (4095 more) are copies of hgx-h200-0 (--nodes 4096)"),
            "{view}: {out}"
        );
    }
    let dot = show(&["--profile", "hgx-h200", "--nodes", "3", "--view", "dot"]);
    assert!(
        dot.starts_with("// Hosts hgx-h200-1 to hgx-h200-2"),
        "{dot}"
    );
    let d = json_of(&["--profile", "hgx-h200", "--nodes", "4096"]);
    assert_eq!(d["hosts"].as_array().unwrap().len(), 4096);
    assert_eq!(d["hosts"][4095]["copy_of"], 0);
    assert_eq!(d["gpus"].as_array().unwrap().len(), 8);
    assert_eq!(d["copies"]["gpus"], 32768);
    let faulty = json_of(&[
        "--profile",
        "hgx-h200",
        "--nodes",
        "3",
        "--without",
        "nvlink:GPU3@1",
    ]);
    assert!(faulty.get("copies").is_none());
    assert_eq!(faulty["gpus"].as_array().unwrap().len(), 24);
    assert_eq!(faulty["gpus"][11]["nvlink_lanes"], 0);
}

/// The outputs quoted in docs/show.md are what the binary prints: full blocks exactly,
/// excerpts (with `...` lines) line by line.
#[test]
fn docs_examples_are_current() {
    let doc =
        std::fs::read_to_string(concat!(env!("CARGO_MANIFEST_DIR"), "/docs/show.md")).unwrap();
    let (mut full, mut excerpts) = (0, 0);
    for block in doc.split("```\n$ ").skip(1) {
        let (cmd, rest) = block.split_once('\n').unwrap();
        let body = rest.split("```").next().unwrap();
        if cmd.contains("--format json") {
            continue;
        }
        let args: Vec<&str> = cmd
            .split(" | ")
            .next()
            .unwrap()
            .split_whitespace()
            .collect();
        assert_eq!(args[..2], ["topo", "show"], "{cmd}");
        let out = show(&args[2..]);
        let is_excerpt = body.lines().any(|l| l.trim() == "...");
        if is_excerpt {
            let lines: Vec<&str> = out.lines().collect();
            for l in body.lines().filter(|l| l.trim() != "...") {
                assert!(
                    lines.contains(&l),
                    "docs/show.md is stale for `{cmd}`: {l:?}"
                );
            }
            excerpts += 1;
        } else {
            assert_eq!(
                out.trim_end(),
                body.trim_end(),
                "docs/show.md is stale for `{cmd}`"
            );
            full += 1;
        }
    }
    assert_eq!(
        (full, excerpts),
        (3, 2),
        "matrix, paths, dot in full; summary, pci excerpts"
    );
}

/// Four sockets of a CPU NCCL does not know (x86, unknown vendor: LOC_BW between them), one
/// GPU each, and the first socket's five ports listed again under each of the other three.
fn repeated_nets_xml(dir: &std::path::Path) -> std::path::PathBuf {
    let mut x = String::from("<system version=\"1\">\n");
    for c in 0..4 {
        x += &format!(
            "<cpu numaid=\"{c}\" affinity=\"{:x}\" arch=\"x86_64\" vendor=\"SomeVendor\">\n\
             <pci busid=\"0000:{:02x}:00.0\" class=\"0x030200\" vendor=\"0x10de\" device=\"0x2330\" link_speed=\"32.0 GT/s PCIe\" link_width=\"16\">\n\
             <gpu dev=\"{c}\" sm=\"90\" rank=\"{c}\" gdr=\"1\"/>\n</pci>\n<nic>\n",
            1 << c,
            c + 1
        );
        for i in 0..5 {
            x += &format!(
                "<net name=\"mlx5_{i}\" dev=\"{i}\" speed=\"200000\" port=\"1\" gdr=\"1\"/>\n"
            );
        }
        x += "</nic>\n</cpu>\n";
    }
    x += "</system>\n";
    let p = dir.join("repeated.xml");
    std::fs::write(&p, x).unwrap();
    p
}

#[test]
fn a_warning_repeated_for_many_names_is_one_line() {
    let dir = tempfile::tempdir().unwrap();
    let p = repeated_nets_xml(dir.path());
    let out = stdout(&["show", "--from", p.to_str().unwrap(), "--color", "never"]);
    let text = out.replace("\n      ", " ");
    let again: Vec<&str> = text
        .lines()
        .filter(|l| l.contains("listed again"))
        .collect();
    assert_eq!(again.len(), 1, "{out}");
    assert!(
        again[0].contains("(15 times: mlx5_0, mlx5_1, mlx5_2, mlx5_3, ...)"),
        "{out}"
    );
    // The JSON keeps each one.
    let doc: serde_json::Value = serde_json::from_str(&stdout(&[
        "show",
        "--from",
        p.to_str().unwrap(),
        "--format",
        "json",
    ]))
    .unwrap();
    assert_eq!(doc["warnings"].as_array().unwrap().len(), 15);
}

#[test]
fn an_inferred_role_star_is_explained_and_a_placeholder_bandwidth_is_not_a_rate() {
    let dir = tempfile::tempdir().unwrap();
    let p = repeated_nets_xml(dir.path());
    let p = p.to_str().unwrap();
    let text = stdout(&["show", "--from", p, "--color", "never"]);
    assert!(text.contains("compute*"), "{text}");
    assert!(text.contains("* role inferred from the port"), "{text}");
    let svg = stdout(&["show", "--from", p, "--format", "svg"]);
    assert!(!svg.contains("5000 GB/s"), "{svg}");
    assert!(svg.contains(">bw unknown</text>"), "{svg}");
    let stated = stdout(&["show", "--profile", "dgx-h100", "--color", "never"]);
    if !stated.lines().any(|l| l.trim_end().ends_with('*')) {
        assert!(!stated.contains("role inferred"), "{stated}");
    }
}
