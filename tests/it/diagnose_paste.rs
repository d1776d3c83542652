//! `topo diagnose` on what people paste: standard input, launcher prefixes, several jobs, and
//! the findings for NVLS asked for and absent, P2P refused by the driver (PCIe: info, NVLink:
//! error), advice that fits the hardware, and a `!` in the comparison.

use crate::util::{assert_valid, topo_clean_env};
use serde_json::Value;

/// `topo diagnose --format json ARGS` with `stdin` piped in as `--nccl-log -`.
fn piped(stdin: &str, args: &[&str]) -> Value {
    let mut a = vec!["diagnose", "--format", "json", "--nccl-log", "-"];
    a.extend_from_slice(args);
    let o = topo_clean_env()
        .args(&a)
        .write_stdin(stdin)
        .output()
        .unwrap();
    assert_eq!(o.status.code(), Some(0), "{o:?}");
    let v: Value = serde_json::from_slice(&o.stdout).unwrap();
    assert_valid(&v, "diagnose --nccl-log -");
    v
}

fn finding<'a>(v: &'a Value, id: &str) -> Option<&'a Value> {
    v["findings"].as_array()?.iter().find(|f| f["id"] == id)
}

fn top(v: &Value) -> (String, String) {
    let f = &v["findings"][0];
    (
        f["id"].as_str().unwrap_or("").into(),
        f["severity"].as_str().unwrap_or("").into(),
    )
}

const H20_SOCKET: &str = "fixtures/logs/nccl-1781-h20-cross-pod-net-socket.log";

#[test]
fn a_log_piped_through_kubectl_and_mpirun_is_read_from_stdin() {
    let text = std::fs::read_to_string(crate::util::fixture(H20_SOCKET)).unwrap();
    let pasted: String = text
        .lines()
        .enumerate()
        .map(|(i, l)| match i % 3 {
            0 => format!("2024-05-01T12:00:00.{i:03}Z [1,0]<stdout>:{l}\r\n"),
            1 => format!("\x1b[0;32m{l}\x1b[0m\n"),
            _ => format!("[rank1]: {l}\n"),
        })
        .collect();
    let v = piped(&pasted, &[]);
    assert_eq!(top(&v), ("ranks-on-separate-hosts".into(), "error".into()));
    let ev = finding(&v, "ranks-on-separate-hosts").unwrap()["evidence"].to_string();
    assert!(ev.contains("stdin:"), "{ev}");
}

#[test]
fn stdin_named_twice_is_a_clear_error() {
    let o = topo_clean_env()
        .args(["diagnose", "--nccl-log", "-", "--from", "-"])
        .write_stdin("")
        .output()
        .unwrap();
    assert_eq!(o.status.code(), Some(2));
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(
        err.starts_with("error: standard input (`-`) is named twice"),
        "{err}"
    );
}

#[test]
fn from_stdin_reads_a_matrix_or_a_log() {
    let m = std::fs::read_to_string(crate::util::fixture(
        "fixtures/matrices/fastdeploy-8xa100-sxm4-40gb-4numa-3nic.txt",
    ))
    .unwrap();
    let o = topo_clean_env()
        .args(["diagnose", "--format", "json", "--from", "-"])
        .write_stdin(m)
        .output()
        .unwrap();
    assert_eq!(o.status.code(), Some(0), "{o:?}");
    let v: Value = serde_json::from_slice(&o.stdout).unwrap();
    assert!(
        v["checked"]
            .to_string()
            .contains("topology of standard input (8 GPUs)"),
        "{v}"
    );
}

const NVLS_ASKED: &str = "\
h:1:1 [0] NCCL INFO NCCL version 2.21.5+cuda12.4
h:1:1 [0] NCCL INFO NCCL_ALGO set by environment to NVLS
h:1:1 [0] NCCL INFO comm 0x1 rank 0 nRanks 8 nNodes 1 localRanks 8 localRank 0 MNNVL 0
h:1:1 [0] NCCL INFO NVLS multicast support is not available on dev 0
h:1:1 [0] NCCL INFO 24 coll channels, 24 collnet channels, 0 nvls channels, 32 p2p channels, 32 p2p channels per peer
";

#[test]
fn nvls_requested_and_absent_is_an_error_with_advice_for_the_machine() {
    let v = piped(NVLS_ASKED, &["--profile", "dgx-h100"]);
    assert_eq!(
        top(&v),
        ("nvls-requested-unavailable".into(), "error".into())
    );
    let f = finding(&v, "nvls-requested-unavailable").unwrap();
    assert!(f["fix"].as_str().unwrap().contains("fabric manager"), "{f}");
    // On a PCIe box the same log gets no fabric-manager advice.
    let v = piped(NVLS_ASKED, &["--profile", "pcie-8x-l40s"]);
    let f = finding(&v, "nvls-requested-unavailable").unwrap();
    let fix = f["fix"].as_str().unwrap();
    assert!(
        fix.starts_with("remove NVLS from NCCL_ALGO") && !fix.contains("fabric"),
        "{f}"
    );
    let nvls = finding(&v, "nvls-unavailable").unwrap();
    assert_eq!(nvls["severity"], "info");
    assert!(
        !nvls["fix"].as_str().unwrap().contains("fabric manager"),
        "{nvls}"
    );
}

const GEFORCE: &str = "\
# Rank  0 Group  0 Pid  11 on  box device  0 [0x01] NVIDIA GeForce RTX 4090
# Rank  1 Group  0 Pid  11 on  box device  1 [0x02] NVIDIA GeForce RTX 4090
box:11:11 [0] NCCL INFO NCCL version 2.19.3+cuda12.3
box:11:11 [0] NCCL INFO P2P is disabled between connected GPUs 0 and 1. You can repress this message with NCCL_IGNORE_DISABLED_P2P=1.
box:11:11 [0] NCCL INFO NVLS multicast support is not available on dev 0
box:11:21 [0] NCCL INFO Channel 00 : 0[0] -> 1[1] via SHM/direct/direct
box:11:22 [1] NCCL INFO Channel 00 : 1[1] -> 0[0] via SHM/direct/direct
";

#[test]
fn p2p_disabled_on_a_pcie_pair_is_an_expected_info_without_fabric_advice() {
    let v = piped(GEFORCE, &[]);
    let f = finding(&v, "p2p-disabled-pcie").unwrap();
    assert_eq!(f["severity"], "info");
    assert!(f["evidence"].to_string().contains("via SHM"), "{f}");
    assert!(finding(&v, "p2p-refused").is_none(), "{v}");
    let nvls = finding(&v, "nvls-unavailable").unwrap();
    assert_eq!(nvls["severity"], "info", "{nvls}");
    assert!(!v.to_string().contains("fabric manager"), "{v}");
    assert_eq!(v["worst"], "info");
}

#[test]
fn p2p_disabled_on_an_nvlink_pair_is_an_error() {
    let log = "n:5:5 [2] graph/paths.cc:323 NCCL WARN P2P is disabled between NVLINK connected GPUs 2 and 3. This should not be the case given their connectivity, and is probably due to a hardware issue. If you still want to proceed, you can set NCCL_IGNORE_DISABLED_P2P=1.\n";
    let v = piped(log, &[]);
    assert_eq!(top(&v), ("p2p-disabled-nvlink".into(), "error".into()));
    assert!(finding(&v, "p2p-disabled-pcie").is_none());
}

#[test]
fn a_bang_in_the_comparison_is_a_warning_and_every_ring_is_compared() {
    let log = "\
h:1:1 [0] NCCL INFO NCCL version 2.21.5+cuda12.4
h:1:1 [0] NCCL INFO comm 0x1 rank 0 nRanks 8 nNodes 1 localRanks 8 localRank 0 MNNVL 0
h:1:1 [0] NCCL INFO Channel 00/24 : 0 1 2 3 4 5 6 7
h:1:1 [0] NCCL INFO Channel 05/24 : 0 2 1 3 4 5 6 7
";
    let v = piped(log, &["--profile", "dgx-h100"]);
    let f = finding(&v, "log-differs-from-plan").unwrap();
    assert_eq!(f["severity"], "warning");
    assert!(f["evidence"].to_string().contains("ring 5 order"), "{f}");
    assert!(!v["verdict"].as_str().unwrap().starts_with("no problem"));
}

#[test]
fn two_jobs_in_one_file_are_judged_apart() {
    let job = |pid: u32, via: &str| {
        format!(
            "h:{pid}:1 [0] NCCL INFO NCCL version 2.19.3+cuda12.3\n\
             h:{pid}:1 [0] NCCL INFO Channel 00 : 0[0] -> 1[1] via {via}\n"
        )
    };
    let text = format!("{}{}", job(10, "SHM/direct/direct"), job(11, "P2P/IPC"));
    let v = piped(&text, &[]);
    let f = finding(&v, "p2p-refused").unwrap();
    assert!(f["evidence"].to_string().contains("stdin:2:"), "{f}");
    assert!(v["checked"].to_string().contains("stdin (job 2)"), "{v}");
}

#[test]
fn nvls_off_on_an_a100_nvswitch_box_is_expected() {
    // nccl-tests#228's situation: NVSwitches, but GPUs older than Hopper.
    let log = "\
#  Rank  0 Group  0 Pid  5180 on user device  0 [0x0f] NVIDIA A100-SXM4-80GB
user:5180:5231 [0] NCCL INFO NVLS multicast support is not available on dev 0
user:5180:5231 [0] NCCL INFO 2 coll channels, 0 nvls channels, 2 p2p channels, 2 p2p channels per peer
";
    let v = piped(log, &[]);
    let f = finding(&v, "nvls-unavailable").unwrap();
    assert_eq!(f["severity"], "info", "{f}");
    assert!(
        f["evidence"].to_string().contains("older than Hopper"),
        "{f}"
    );
    let v = piped(log, &["--profile", "dgx-a100"]);
    assert_eq!(finding(&v, "nvls-unavailable").unwrap()["severity"], "info");
}

#[test]
fn show_reads_from_stdin_too_and_refuses_what_it_cannot_tell() {
    let m = std::fs::read_to_string(crate::util::fixture(
        "fixtures/matrices/fastdeploy-8xa100-sxm4-40gb-4numa-3nic.txt",
    ))
    .unwrap();
    let o = topo_clean_env()
        .args(["show", "--from", "-"])
        .write_stdin(m)
        .output()
        .unwrap();
    assert_eq!(o.status.code(), Some(0), "{o:?}");
    assert!(String::from_utf8_lossy(&o.stdout).contains("nvidia-smi (standard input)"));
    let o = topo_clean_env()
        .args(["show", "--from", "-"])
        .write_stdin("hello\n")
        .output()
        .unwrap();
    assert_eq!(o.status.code(), Some(2));
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(
        err.starts_with("error: cannot read standard input: neither an NCCL log"),
        "{err}"
    );
}

#[test]
fn a_tuning_table_without_nvls_is_evidence() {
    let tuning = "\
h:1:1 [0] NCCL INFO   Algorithm   |                    CollNetChain                  |                            NVLS                  |
h:1:1 [0] NCCL INFO   Protocol    |             LL |          LL128 |         Simple |             LL |          LL128 |         Simple |
h:1:1 [0] NCCL INFO     AllReduce |     5.0/   0.0 |     8.5/   0.0 |    14.0/   0.0 |     0.0/   0.0 |     0.0/   0.0 |     0.0/   0.0 |
";
    let v = piped(&format!("{NVLS_ASKED}{tuning}"), &["--profile", "dgx-h100"]);
    let f = finding(&v, "nvls-requested-unavailable").unwrap();
    assert!(
        f["evidence"]
            .to_string()
            .contains("the TUNING table gives all 3 NVLS cells 0 GB/s"),
        "{f}"
    );
}
