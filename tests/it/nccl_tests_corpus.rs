//! Every published nccl-tests table in `../shared/realdata/nccl-tests/{repos,threads}` read as
//! its source says it ran (issue 43): the right collective and rank count, and no row the
//! reader gets wrong, through the real binary with the machine its MANIFEST.md names. The
//! table below is derived from the two MANIFESTs (machine, nodes, GPUs per node, program);
//! files without nccl-tests rows (prose, markdown summaries, other tools) are not in it, and
//! the condensed table of nccl#527 is read as one run per row.

use crate::util::{realdata, topo_clean_env};

/// `(file under nccl-tests/, collective, ranks, the machine it ran on as flags)`.
const RUNS: [(&str, &str, usize, &str); 52] = [
    (
        "repos/alcf-polaris-a100-128x4-slingshot11-nccl2.18-setup1-allreduce.dat",
        "allreduce",
        512,
        "--profile dgx-a100 --nodes 128 --env CUDA_VISIBLE_DEVICES=0,1,2,3",
    ),
    (
        "repos/alcf-polaris-a100-2x4-slingshot11-nccl2.18-setup1-allreduce.dat",
        "allreduce",
        8,
        "--profile dgx-a100 --nodes 2 --env CUDA_VISIBLE_DEVICES=0,1,2,3",
    ),
    (
        "repos/alcf-polaris-a100-2x4-slingshot11-nccl2.18-setup2-allreduce.dat",
        "allreduce",
        8,
        "--profile dgx-a100 --nodes 2 --env CUDA_VISIBLE_DEVICES=0,1,2,3",
    ),
    (
        "repos/alcf-polaris-a100-2x4-slingshot11-nccl2.18-setup3-allreduce.dat",
        "allreduce",
        8,
        "--profile dgx-a100 --nodes 2 --env CUDA_VISIBLE_DEVICES=0,1,2,3",
    ),
    (
        "repos/alcf-polaris-a100-2x4-slingshot11-nccl2.18-setup4-allreduce.dat",
        "allreduce",
        8,
        "--profile dgx-a100 --nodes 2 --env CUDA_VISIBLE_DEVICES=0,1,2,3",
    ),
    (
        "repos/alcf-polaris-a100-2x4-slingshot11-nccl2.18-setup5-allreduce.dat",
        "allreduce",
        8,
        "--profile dgx-a100 --nodes 2 --env CUDA_VISIBLE_DEVICES=0,1,2,3",
    ),
    (
        "repos/alcf-polaris-a100-2x4-slingshot11-nccl2.21-setup1-allreduce.dat",
        "allreduce",
        8,
        "--profile dgx-a100 --nodes 2 --env CUDA_VISIBLE_DEVICES=0,1,2,3",
    ),
    (
        "repos/alcf-polaris-a100-2x4-slingshot11-nccl2.21-setup4-allreduce.dat",
        "allreduce",
        8,
        "--profile dgx-a100 --nodes 2 --env CUDA_VISIBLE_DEVICES=0,1,2,3",
    ),
    (
        "repos/alcf-polaris-a100-2x4-slingshot11-nccl2.21-setup5-allreduce.dat",
        "allreduce",
        8,
        "--profile dgx-a100 --nodes 2 --env CUDA_VISIBLE_DEVICES=0,1,2,3",
    ),
    (
        "repos/alcf-polaris-a100-540x4-slingshot11-nccl2.18-setup5-allreduce.dat",
        "allreduce",
        2160,
        "--profile dgx-a100 --nodes 540 --env CUDA_VISIBLE_DEVICES=0,1,2,3",
    ),
    (
        "repos/alcf-polaris-a100-8x4-slingshot11-nccl2.18-setup1-allreduce.dat",
        "allreduce",
        32,
        "--profile dgx-a100 --nodes 8 --env CUDA_VISIBLE_DEVICES=0,1,2,3",
    ),
    (
        "repos/alcf-polaris-a100-8x4-slingshot11-nccl2.18-setup2-allreduce.dat",
        "allreduce",
        32,
        "--profile dgx-a100 --nodes 8 --env CUDA_VISIBLE_DEVICES=0,1,2,3",
    ),
    (
        "repos/alcf-polaris-a100-8x4-slingshot11-nccl2.18-setup3-allreduce.dat",
        "allreduce",
        32,
        "--profile dgx-a100 --nodes 8 --env CUDA_VISIBLE_DEVICES=0,1,2,3",
    ),
    (
        "repos/alcf-polaris-a100-8x4-slingshot11-nccl2.18-setup4-allreduce.dat",
        "allreduce",
        32,
        "--profile dgx-a100 --nodes 8 --env CUDA_VISIBLE_DEVICES=0,1,2,3",
    ),
    (
        "repos/alcf-polaris-a100-8x4-slingshot11-nccl2.18-setup5-allreduce.dat",
        "allreduce",
        32,
        "--profile dgx-a100 --nodes 8 --env CUDA_VISIBLE_DEVICES=0,1,2,3",
    ),
    (
        "repos/alcf-polaris-a100-8x4-slingshot11-nccl2.21-setup1-allreduce.dat",
        "allreduce",
        32,
        "--profile dgx-a100 --nodes 8 --env CUDA_VISIBLE_DEVICES=0,1,2,3",
    ),
    (
        "repos/alcf-polaris-a100-8x4-slingshot11-nccl2.21-setup2-allreduce.dat",
        "allreduce",
        32,
        "--profile dgx-a100 --nodes 8 --env CUDA_VISIBLE_DEVICES=0,1,2,3",
    ),
    (
        "repos/alcf-polaris-a100-8x4-slingshot11-nccl2.21-setup3-allreduce.dat",
        "allreduce",
        32,
        "--profile dgx-a100 --nodes 8 --env CUDA_VISIBLE_DEVICES=0,1,2,3",
    ),
    (
        "repos/alcf-polaris-a100-8x4-slingshot11-nccl2.21-setup4-allreduce.dat",
        "allreduce",
        32,
        "--profile dgx-a100 --nodes 8 --env CUDA_VISIBLE_DEVICES=0,1,2,3",
    ),
    (
        "repos/alcf-polaris-a100-8x4-slingshot11-nccl2.21-setup5-allreduce.dat",
        "allreduce",
        32,
        "--profile dgx-a100 --nodes 8 --env CUDA_VISIBLE_DEVICES=0,1,2,3",
    ),
    (
        "repos/alcf-sophia-dgxa100-2x8-ib-nccl2.22.3-setup2-allreduce.dat",
        "allreduce",
        16,
        "--profile dgx-a100 --nodes 2",
    ),
    (
        "repos/alcf-sophia-dgxa100-2x8-ib-nccl2.22.3-setup6-allreduce.dat",
        "allreduce",
        16,
        "--profile dgx-a100 --nodes 2",
    ),
    (
        "repos/aws-batch-p5-h100-efa-allreduce.txt",
        "allreduce",
        8,
        "--profile aws-p5",
    ),
    (
        "repos/aws-p4de-a100-2x8-efa-allreduce.txt",
        "allreduce",
        16,
        "--profile aws-p4d --nodes 2",
    ),
    (
        "repos/aws-p5-h100-2x8-efa-eks-nccl2.18.5-allreduce-EXCERPT.txt",
        "allreduce",
        16,
        "--profile aws-p5 --nodes 2",
    ),
    (
        "repos/aws-p5en-h200-efa-topoaware-allreduce-EXCERPT.txt",
        "allreduce",
        128,
        "--profile hgx-h200 --nodes 16",
    ),
    (
        "repos/coreweave-a100-16x8-ib-las1-allreduce-2022-07.txt",
        "allreduce",
        128,
        "--profile dgx-a100 --nodes 16",
    ),
    (
        // The MANIFEST's 128 ranks is the pod's name; every row's busbw/algbw is 1.9375,
        // 2(n-1)/n on 32 ranks: rows of a 32-rank run under the 128-rank header.
        "repos/coreweave-a100-16x8-ib-sharp-las1-allreduce-2022-09.txt",
        "allreduce",
        32,
        "--profile dgx-a100 --nodes 4",
    ),
    (
        // The MANIFEST's 128 ranks is the pod's name; every row's busbw/algbw is 1.9375,
        // 2(n-1)/n on 32 ranks: rows of a 32-rank run under the 128-rank header.
        "repos/coreweave-a100-16x8-ib-sharp-las1-allreduce-2023-06-EXCERPT.txt",
        "allreduce",
        32,
        "--profile dgx-a100 --nodes 4",
    ),
    (
        "repos/coreweave-gb200-nvl72-1rack-72gpu-allreduce.txt",
        "allreduce",
        72,
        "--profile gb200-nvl72 --nodes 18",
    ),
    (
        "repos/coreweave-gb200-nvl72-20rack-1440gpu-ib-allreduce.txt",
        "allreduce",
        1440,
        "--profile gb200-nvl72 --nodes 360",
    ),
    (
        "repos/coreweave-gb200-nvl72-2rack-144gpu-ib-allreduce.txt",
        "allreduce",
        144,
        "--profile gb200-nvl72 --nodes 36",
    ),
    (
        // An "illustrative composite" (MANIFEST): busbw/algbw 1.9792 is 96 ranks, not 64.
        "repos/coreweave-h100-8x8-ib-sharp-allreduce-EXCERPT.txt",
        "allreduce",
        96,
        "--profile dgx-h100 --nodes 12",
    ),
    (
        "repos/dstack-gcp-a3high-h100-2x8-tcpx-allgather.txt",
        "allgather",
        16,
        "--profile dgx-h100 --nodes 2",
    ),
    (
        "repos/gcp-a3mega-h100-2x8-allreduce-lessizzmore.txt",
        "allreduce",
        16,
        "--profile gcp-a3-mega --nodes 2",
    ),
    (
        "repos/gt-violet-h100pcie-a100pcie-2x1-roce-cx7-hoststaged-allreduce-EXCERPT.txt",
        "allreduce",
        2,
        "--profile pcie-8x-h100-nvbridge --nodes 2 --env CUDA_VISIBLE_DEVICES=0",
    ),
    (
        "repos/kalavai-rtx4090-1x2-pcie-docker-allreduce.txt",
        "allreduce",
        2,
        "--profile 2x-rtx4090",
    ),
    (
        "repos/kalavai-rtx4090-1x2-pcie-k8s-allreduce.txt",
        "allreduce",
        2,
        "--profile 2x-rtx4090",
    ),
    (
        "repos/nrel-kestrel-h100-16x4-slingshot-cxi-allreduce.txt",
        "allreduce",
        64,
        "--profile dgx-h100 --nodes 16 --env CUDA_VISIBLE_DEVICES=0,1,2,3",
    ),
    (
        "repos/schmaustech-h200-2x8-socket-single-iface-ring-allreduce-nccl2.27.3.txt",
        "allreduce",
        16,
        "--profile hgx-h200 --nodes 2",
    ),
    (
        "repos/schmaustech-l40s-2x1-socket-net1-allreduce-nccl2.27.3.txt",
        "allreduce",
        2,
        "--profile pcie-8x-l40s --nodes 2 --env CUDA_VISIBLE_DEVICES=0",
    ),
    (
        "repos/schmaustech-l40s-2x2-roce-allreduce-nccl2.27.3.txt",
        "allreduce",
        4,
        "--profile pcie-8x-l40s --nodes 2 --env CUDA_VISIBLE_DEVICES=0,1",
    ),
    (
        "repos/skypilot-gcp-a3ultra-h200-2x8-gpudirect-rdma-allgather-gcp-testpods-nccl2.26.6.txt",
        "allgather",
        16,
        "--profile hgx-h200 --nodes 2",
    ),
    (
        "repos/skypilot-gcp-a3ultra-h200-2x8-gpudirect-rdma-allgather.txt",
        "allgather",
        16,
        "--profile hgx-h200 --nodes 2",
    ),
    (
        "repos/together-h100-1x8-nvlink-allreduce-ring-20260305.txt",
        "allreduce",
        8,
        "--profile dgx-h100",
    ),
    (
        "threads/coreweave-nccl-tests-pr43-gb200-nvl72-18x4-mnnvl-allreduce.txt",
        "allreduce",
        72,
        "--profile gb200-nvl72 --nodes 18",
    ),
    (
        "threads/coreweave-nccl-tests-pr48-gb200-20racks-1440gpu-allreduce-EXCERPT.txt",
        "allreduce",
        1440,
        "--profile gb200-nvl72 --nodes 360",
    ),
    (
        "threads/nccl-445-1x4-pcie-allreduce-large-sizes-EXCERPT.txt",
        "allreduce",
        4,
        "--profile 4x-rtx5090",
    ),
    (
        "threads/nccl-tests-119-a100sxm4-3x8-4xHDR-allreduce-EXCERPT.txt",
        "allreduce",
        24,
        "--profile dgx-a100 --nodes 3",
    ),
    (
        "threads/nccl-tests-232-h100-2x1-4nic-roce-tree-qps2-allreduce-EXCERPT.txt",
        "allreduce",
        2,
        "--profile dgx-h100 --nodes 2 --env CUDA_VISIBLE_DEVICES=0",
    ),
    (
        "threads/nccl-tests-252-h100-2x4-ib-ring-after-acs-off-EXCERPT.txt",
        "allreduce",
        8,
        "--profile dgx-h100 --nodes 2 --env CUDA_VISIBLE_DEVICES=0,1,2,3",
    ),
    (
        "repos/nrel-kestrel-h100-slingshot-cxi-allgather-EXCERPT.txt",
        "allgather",
        64,
        "--profile dgx-h100 --nodes 16 --env CUDA_VISIBLE_DEVICES=0,1,2,3",
    ),
];

/// Results whose own sources disagree on the rank count, judged with the machine's: the
/// 2-rack GB200 table shows `Rank 143` (144 ranks) while every row's busbw/algbw, 1.9844, is
/// 2(n-1)/n on 128.
const DISAGREE: [&str; 1] = ["repos/coreweave-gb200-nvl72-2rack-144gpu-ib-allreduce.txt"];

/// The runs that fail their reading, each with why; empty when all are read right.
fn misread(dir: &std::path::Path) -> Vec<String> {
    let mut bad = vec![];
    for (file, collective, ranks, machine) in RUNS {
        let out = topo_clean_env()
            .args(["diagnose", "--format", "json", "--nccl-tests"])
            .arg(dir.join(file))
            .args(machine.split(' '))
            .output()
            .unwrap();
        let err = String::from_utf8_lossy(&out.stderr);
        let doc: serde_json::Value = match serde_json::from_slice(&out.stdout) {
            Ok(d) if out.status.success() => d,
            _ => {
                bad.push(format!("{file}: {err}"));
                continue;
            }
        };
        let r = &doc["results"][0];
        let got = (r["collective"].as_str().unwrap_or(""), r["nranks"].as_u64());
        if got != (collective, Some(ranks as u64))
            || doc["results"].as_array().map(Vec::len) != Some(1)
        {
            bad.push(format!(
                "{file}: read as {got:?}, ran as {collective} on {ranks} ranks"
            ));
        }
        for f in doc["findings"].as_array().unwrap() {
            let id = f["id"].as_str().unwrap_or("");
            let expected = id == "nccl-tests-ranks-disagree" && DISAGREE.contains(&file);
            if (id == "nccl-tests-impossible-rows" || id == "nccl-tests-ranks-disagree")
                && !expected
            {
                bad.push(format!("{file}: {id}: {}", f["title"]));
            }
        }
    }
    bad
}

#[test]
fn every_published_table_is_read_as_it_ran() {
    let Some(dir) = realdata("nccl-tests") else {
        return;
    };
    let bad = misread(&dir);
    assert!(
        bad.is_empty(),
        "{} of {} misread:\n{}",
        bad.len(),
        RUNS.len(),
        bad.join("\n")
    );
}

/// nccl#527's table, one 1 GiB row per p4dn count: each row a run, whose busbw/algbw gives its
/// ranks; the run of the machine's rank count is judged, the others skipped, saying why.
#[test]
fn a_condensed_table_of_several_runs_is_read_as_one_run_per_row() {
    let Some(p) =
        realdata("nccl-tests/threads/nccl-527-p4dn-1to4node-efa-1GiB-allreduce-EXCERPT.txt")
    else {
        return;
    };
    let out = topo_clean_env()
        .args(["diagnose", "--profile", "aws-p4d", "--nodes", "4"])
        .args(["--format", "json", "--nccl-tests"])
        .arg(p)
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    let doc: serde_json::Value = serde_json::from_slice(&out.stdout).expect(&err);
    let judged = doc["results"].as_array().unwrap();
    assert_eq!(judged.len(), 1, "{doc}");
    assert_eq!(judged[0]["nranks"], 32, "{doc}");
    let text = doc.to_string();
    for n in [8, 16, 24] {
        assert!(
            text.contains(&format!("the result has {n} ranks")),
            "{text}"
        );
    }
}

/// nccl#340's second excerpt dropped the redop column: its rows are read from the figure after
/// the type on (not one column late, which gave 6,599 GB/s); their size column, twice their
/// count x 4 B, is the one figure that disagrees with the printed time and algbw, so they are
/// judged at count x type and named in one warning.
#[test]
fn rows_without_the_redop_column_are_read_by_their_figures_and_checked() {
    let Some(p) =
        realdata("nccl-tests/threads/nccl-340-rtx2080ti-1x2-nvlink-bridge-allreduce-EXCERPT.txt")
    else {
        return;
    };
    let out = topo_clean_env()
        .args([
            "diagnose",
            "--format",
            "json",
            "--profile",
            "2x-rtx4090",
            "--nccl-tests",
        ])
        .arg(p)
        .output()
        .unwrap();
    let doc: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    let r = &doc["results"][0];
    assert_eq!(
        (r["collective"].as_str(), r["nranks"].as_u64()),
        (Some("allreduce"), Some(2))
    );
    let ids: Vec<&str> = doc["findings"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(|f| f["id"].as_str())
        .collect();
    assert!(!ids.contains(&"nccl-tests-impossible-rows"), "{ids:?}");
    // The size column is twice count x 4 B; count x 4 B over the time is the printed algbw.
    let moved = doc["findings"]
        .as_array()
        .unwrap()
        .iter()
        .find(|f| f["id"] == "nccl-tests-size-from-count")
        .expect("the rows read at count x type are named");
    let text = moved.to_string();
    assert!(text.contains("13 rows' size column"), "{text}");
    assert!(
        text.contains("65536 B printed, 8192 x 4 B = 32768 B"),
        "{text}"
    );
    let rows = r["rows"].as_array().unwrap();
    assert_eq!(rows.len(), 14);
    let last = rows.iter().find(|x| x["bytes"] == 1u64 << 26).unwrap();
    assert_eq!(last["measured_busbw_gbps"], 20.34);
    assert!(!doc.to_string().contains("6599"));
}
