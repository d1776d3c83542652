//! One test per sample of `../shared/realdata/hangs/` (MANIFEST.md gives what a correct tool
//! reports for each), then generated jobs of thousands of ranks with known answers.

use super::*;
use topo_evidence::hang::{self as ev, HangEvidence};
use topo_vocab::Code;

fn samples() -> Option<std::path::PathBuf> {
    let d = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../../../shared/realdata/hangs");
    if d.join("MANIFEST.md").exists() {
        Some(d)
    } else {
        eprintln!("skipped: {} is absent", d.display());
        None
    }
}

fn read(names: &[(&str, &str)]) -> HangReport {
    let mut e = HangEvidence::default();
    for (n, t) in names {
        ev::read(n, t, &mut e);
    }
    judge(&e)
}

/// The report of one sample, `None` (skipped) where the samples are absent.
fn sample(name: &str) -> Option<HangReport> {
    let d = samples()?;
    let text = std::fs::read_to_string(d.join(name)).unwrap_or_else(|e| panic!("{name}: {e}"));
    Some(read(&[(name, &text)]))
}

fn has(r: &HangReport, words: &[&str]) {
    for w in words {
        assert!(r.verdict.contains(w), "verdict lacks {w:?}: {}", r.verdict);
    }
}

fn suspect(r: &HangReport, ranks: &[u32], why: Why) {
    assert!(
        r.suspects.iter().any(|s| s.why == why && s.ranks == ranks),
        "no {why:?} suspect {ranks:?} in {:#?}",
        r.suspects
    );
}

fn finding(r: &HangReport, code: Code, words: &[&str]) {
    assert!(
        r.findings
            .iter()
            .any(|f| f.code == code && words.iter().all(|w| f.text.contains(w))),
        "no {code} with {words:?}: {:#?}",
        r.findings
    );
}

/// Each sample: the cause class and the words the verdict must name.
#[test]
fn every_sample_gets_the_manifest_verdict() {
    let cases: &[(&str, Cause, &[&str])] = &[
        (
            "alpaca-207-ncclRemoteError-net-ib-error12-peer-11.214.147.122.log",
            Cause::NetworkFirstUse,
            &[
                "peer 11.214.147.122",
                "status 12 (RETRY_EXC_ERR)",
                "ncclRemoteError",
            ],
        ),
        (
            "arctictraining-219-1x8-watchdog-allgather-seq120049-and-watchdog-stuck-480s-EXCERPT.log",
            Cause::RankSilent,
            &["_ALLGATHER_BASE seq 120049", "rank 2 timed out"],
        ),
        (
            "basicsr-737-watchdog-allreduce-seq808-ranks0-2-last-enqueued-811-EXCERPT.log",
            Cause::Undetermined,
            &["ALLREDUCE seq 808", "ranks 0-2", "not in the evidence"],
        ),
        (
            "fr-dump-tutorial-v2.5-unpickled-entry-allreduce-EXCERPT.txt",
            Cause::Healthy,
            &["nothing pending", "pg 0 (default_pg)"],
        ),
        (
            "fr-torchcomms-debugserver-aggregated-text-dump-annotated-EXCERPT.txt",
            Cause::Desync,
            &["rank 1 never issued main_comm collective 4 (nccl:all_reduce)"],
        ),
        (
            "fr-trace-pytorch-140563-128rank-allreduce-collective39-size-mismatch-1025-vs-262144-EXCERPT.txt",
            Cause::Desync,
            &[
                "collective 39",
                "rank 22 with SIZE_OR_SYNTAX_MISMATCH: [[262144]]",
                "126 other rank(s) with [[1025]]",
                "not proven",
            ],
        ),
        (
            "fr-trace-tutorial-1x2-rank1-missing-allreduce-collective5.txt",
            Cause::Desync,
            &[
                "rank 1 never issued 0:default_pg collective 5 (nccl:all_reduce)",
                "crash.py:44",
                "of 2",
            ],
        ),
        (
            "fr-trace-tutorial-torchcomms-1x2-just-print-entries-j-rank1-short-by-one.txt",
            Cause::Desync,
            &["rank 1 never issued", "collective 5 (all_reduce)"],
        ),
        (
            "llamafactory-8261-watchdog-allreduce-seq2847-pg1-ranks-differ-last-enqueued-EXCERPT.log",
            Cause::RankSilent,
            &[
                "rank 1 of PG 1 GUID 1",
                "ALLREDUCE seq 2847",
                "ranks 0,2 timed out",
            ],
        ),
        (
            "milabench-269-multinode-dinov2-watchdog-allreduce-seq2070-node-cn-d003-rank6-EXCERPT.log",
            Cause::RankSilent,
            &["ranks 0-5", "ALLREDUCE seq 2070", "rank 6 timed out"],
        ),
        (
            "nccl-1405-k8s-ibplugin-net-ib-status12-vendor129-peer-10.216.210.236-EXCERPT.log",
            Cause::NetworkFirstUse,
            &[
                "kp-ddp-worker-0 (GPU 4)",
                "peer 10.216.210.236",
                "status 12",
                "(3 times)",
            ],
        ),
        (
            "nccl-1610-alltoall-two-threads-same-comm-watchdog-seq216-pg11-EXCERPT.log",
            Cause::ConcurrentUse,
            &[
                "ALLTOALL_BASE",
                "ALLREDUCE",
                "PG 11 GUID 119",
                "PG 11 GUID 112",
            ],
        ),
        (
            "nccl-1710-cx7-mlx5_0-local-access-violation-node201-peer-status9-node023-EXCERPT.log",
            Cause::NetworkFault,
            &["local access violation work queue error on node201 mlx5_0:1"],
        ),
        (
            "nccl-1730-32x8-ras-2.26.2-ok-while-pytorch-watchdog-allreduce-timeout-rank118-EXCERPT.log",
            Cause::StuckInTransfer,
            &[
                "ALLREDUCE seq 2398459 timed out on rank 118",
                "256-rank",
                "launched",
            ],
        ),
        (
            "nccl-1762-2node-ras-2.27.3-incomplete-nocomm-corrupt-report-EXCERPT.txt",
            Cause::RankMissing,
            &[
                "process 60004",
                "node 10.4.109.13",
                "GPU 0",
                "rank 1 of comm b3398875b8b2a063",
            ],
        ),
        (
            "nccl-230-4node-net-ib-local-catastrophic-error-hca-container-000057-EXCERPT.log",
            Cause::NetworkFault,
            &[
                "local catastrophic error on container-e275-1553839402050-12124-01-000057",
                "3 processes",
            ],
        ),
        (
            "nccl-426-roce-net-ib-error12-at-start-gid-index-EXCERPT.log",
            Cause::NetworkFirstUse,
            &["-worker-1 (GPU 0)", "status 12", "never exchanged data"],
        ),
        (
            "nccl-969-2.14.3-net-ib-collective-mismatch-local-size-vs-remote-size-peer-10.10.23.6.log",
            Cause::Desync,
            &[
                "so-ucloud-10-10-23-10",
                "peer 10.10.23.6",
                "496640",
                "65536",
            ],
        ),
        (
            "nccl-ras-docs-json-2.29.1-missing-rank1-unresponsive.json",
            Cause::RankMissing,
            &[
                "rank 1 of comm ae94423cfbb2ef4a is unresponsive",
                "node 172.16.64.245",
                "GPU 1",
                "process 1524345",
            ],
        ),
        (
            "nccl-ras-docs-monitor-json-peer-dead.json",
            Cause::RankDead,
            &["process 1524345 on node 172.16.64.245 (GPU 1) died at 2025-12-19 13:07:07"],
        ),
        (
            "nccl-ras-docs-monitor-text-banner.txt",
            Cause::NoEvidence,
            &[],
        ),
        (
            "nccl-ras-docs-monitor-text-peer-dead.txt",
            Cause::RankDead,
            &["process 1524345 on node 172.16.64.245 (GPU 1) died at 2025-12-19 13:07:07"],
        ),
        (
            "nccl-ras-docs-text-dead-process-rank21-node213-gpu5-EXCERPT.txt",
            Cause::RankDead,
            &[
                "process 3487984 on node 172.16.64.213, GPU 5",
                "dead",
                "rank 21 of comm cf264af53edbe986",
            ],
        ),
        (
            "nccl-ras-docs-text-finalize-status-mismatch-EXCERPT.txt",
            Cause::Teardown,
            &[
                "26 UNKNOWN",
                "4 RUNNING",
                "2 FINALIZE",
                "ranks 0,8,16,24 yet to finalize",
            ],
        ),
        (
            "nccl-ras-docs-text-healthy-communicators-EXCERPT.txt",
            Cause::Healthy,
            &["group 0: 8 comm(s) x 4 ranks, RUNNING/OK"],
        ),
        (
            "nccl-ras-docs-text-healthy-job-summary-EXCERPT.txt",
            Cause::Healthy,
            &["32 process(es) on 4 node(s)"],
        ),
        (
            "nccl-ras-docs-text-incomplete-rank21-unresponsive-node213-gpu5-EXCERPT.txt",
            Cause::RankMissing,
            &[
                "process 3487984 on node 172.16.64.213, GPU 5",
                "unresponsive",
                "rank 21 of comm cf264af53edbe986",
            ],
        ),
        (
            "nccl-ras-docs-text-mismatch-collective-counts-6650-vs-6649-EXCERPT.txt",
            Cause::TransientMismatch,
            &[
                "differ by 1",
                "ranks 0,2-5,7 on 172.16.64.210 at 6649",
                "26 rank(s) (not itemised) at 6650",
                "does not move",
            ],
        ),
        (
            "nccl-ras-docs-text-running-mismatch-summary-EXCERPT.txt",
            Cause::TransientMismatch,
            &["MISMATCH", "group 0"],
        ),
        (
            "nccl-ras-example-2.30.7-2x4-exit-rank7-dead-EXCERPT.txt",
            Cause::RankDead,
            &[
                "process 3748990 on node node1, GPU 3",
                "its rank is not in the report",
            ],
        ),
        (
            "nccl-ras-example-2.30.7-2x4-exit-rank7-incomplete-EXCERPT.txt",
            Cause::RankMissing,
            &[
                "process 3748990 on node node1, GPU 3",
                "rank 7 of comm 1bdb83b038775869",
            ],
        ),
        (
            "nccl-ras-example-2.30.7-2x4-healthy-verbose.txt",
            Cause::Healthy,
            &[
                "8 process(es) on 2 node(s)",
                "1 comm(s) x 8 ranks, RUNNING/OK",
            ],
        ),
        (
            "ncclras-json-2.28.9-ray-1node-2gpu-rank1-unresponsive-invalid-json-missing-comma.json",
            Cause::RankMissing,
            &[
                "rank 1 of comm a1349768e9517ed7 is unresponsive",
                "node 10.0.77.184",
                "GPU 1",
                "process 10017",
            ],
        ),
        (
            "openrlhf-1126-multinode-dump-signal-from-rank34-save-model-EXCERPT.log",
            Cause::Undetermined,
            &["ranks 0-1,3,5,7", "not in the evidence"],
        ),
        (
            "openrlhf-1126-multinode-dump-signal-from-rank6-rank7-allreduce-seq460631-EXCERPT.log",
            Cause::RankSilent,
            &["ranks 0-1,3-5", "ALLREDUCE seq 460631", "rank 7 timed out"],
        ),
        (
            "torchtune-1165-1x4-watchdog-allgather-seq15037-ranks1-3-rank0-silent-EXCERPT.log",
            Cause::RankSilent,
            &[
                "rank 0 of PG 0",
                "_ALLGATHER_BASE seq 15037",
                "ranks 1-3 timed out",
            ],
        ),
        (
            "verl-1158-1node-fsdp-ulysses-watchdog-alltoall-seq4486-pg2-EXCERPT.log",
            Cause::RankSilent,
            &[
                "ranks 0-2,4-6 of PG 2 GUID 9 (ranks within the group)",
                "ALLTOALL seq 4486",
                "ranks 3,7 timed out",
            ],
        ),
        (
            "vllm-48720-4x1-gb10-tp4-ras-2.30.4-allreduce-desync-51op-spread-AUTHOR-ABBREVIATED-EXCERPT.txt",
            Cause::Desync,
            &[
                "AllReduce launch counts differ by 51",
                "rank 1 on 10.0.0.8 at 27911",
                "rank 0 on 10.0.0.7 at 27860",
            ],
        ),
        (
            "vllm-5484-ray-tp-watchdog-gather-seq158046-rank1-EXCERPT.log",
            Cause::RankSilent,
            &["rank 0 of PG 1", "GATHER seq 158046", "rank 1 timed out"],
        ),
        (
            "weathergenerator-1533-fsdp2-watchdog-allreduce-seq1085-ranks2-3-EXCERPT.log",
            Cause::RankSilent,
            &["ranks 0-1", "ALLREDUCE seq 1085", "ranks 2-3 timed out"],
        ),
    ];
    let Some(dir) = samples() else { return };
    let mut listed: Vec<String> = std::fs::read_dir(&dir)
        .unwrap()
        .filter_map(|e| e.ok()?.file_name().into_string().ok())
        .filter(|n| !n.ends_with(".md"))
        .collect();
    listed.sort();
    let mut named: Vec<String> = cases.iter().map(|c| c.0.to_string()).collect();
    named.sort();
    assert_eq!(listed, named, "every sample has a case");
    for (name, cause, words) in cases {
        let r = sample(name).unwrap();
        assert_eq!(r.cause, *cause, "{name}: {}", r.verdict);
        for w in *words {
            assert!(
                r.verdict.contains(w),
                "{name}: verdict lacks {w:?}: {}",
                r.verdict
            );
        }
    }
}

#[test]
fn samples_name_the_suspects_and_places() {
    let Some(_) = samples() else { return };
    let r =
        sample("torchtune-1165-1x4-watchdog-allgather-seq15037-ranks1-3-rank0-silent-EXCERPT.log")
            .unwrap();
    suspect(&r, &[0], Why::NotReported);
    assert_eq!(r.stuck[0].ranks, [3, 1, 2]);
    let r =
        sample("nccl-ras-docs-text-mismatch-collective-counts-6650-vs-6649-EXCERPT.txt").unwrap();
    for k in [0, 2, 3, 4, 5, 7] {
        suspect(&r, &[k], Why::Behind);
    }
    assert_eq!(r.suspects[0].node.as_deref(), Some("172.16.64.210"));
    let r = sample("vllm-48720-4x1-gb10-tp4-ras-2.30.4-allreduce-desync-51op-spread-AUTHOR-ABBREVIATED-EXCERPT.txt").unwrap();
    suspect(&r, &[1], Why::Ahead);
    assert!(
        r.suspects
            .iter()
            .any(|s| s.ranks == [0] && s.detail.contains("51 behind"))
    );
    let r = sample("fr-trace-pytorch-140563-128rank-allreduce-collective39-size-mismatch-1025-vs-262144-EXCERPT.txt").unwrap();
    suspect(&r, &[22], Why::Mismatched);
    suspect(&r, &[110], Why::Mismatched);
    let r = sample(
        "nccl-1710-cx7-mlx5_0-local-access-violation-node201-peer-status9-node023-EXCERPT.log",
    )
    .unwrap();
    assert!(
        r.places
            .iter()
            .any(|p| p.kind == "nic" && p.name == "node201 mlx5_0:1")
    );
    finding(
        &r,
        Code::HangNetworkFault,
        &[
            "node023 (GPU 0) got status 9 (REM_INV_REQ_ERR)",
            "peer 10.1.3.201",
            "node201",
        ],
    );
    let r = sample(
        "milabench-269-multinode-dinov2-watchdog-allreduce-seq2070-node-cn-d003-rank6-EXCERPT.log",
    )
    .unwrap();
    assert!(
        r.places
            .iter()
            .any(|p| p.name.contains("cn-d003") && p.why.contains("rank 6"))
    );
    let r = sample(
        "arctictraining-219-1x8-watchdog-allgather-seq120049-and-watchdog-stuck-480s-EXCERPT.log",
    )
    .unwrap();
    finding(&r, Code::HangWatchdogStuck, &["rank 7", "480 s"]);
    let r = sample("weathergenerator-1533-fsdp2-watchdog-allreduce-seq1085-ranks2-3-EXCERPT.log")
        .unwrap();
    assert!(
        r.stuck[0]
            .summary
            .contains("rank 2 enqueued 34 more after it"),
        "{}",
        r.stuck[0].summary
    );
    let r = sample(
        "openrlhf-1126-multinode-dump-signal-from-rank6-rank7-allreduce-seq460631-EXCERPT.log",
    )
    .unwrap();
    assert!(
        r.stuck[0].summary.contains("first to time out: rank 6"),
        "{}",
        r.stuck[0].summary
    );
    let r =
        sample("nccl-1762-2node-ras-2.27.3-incomplete-nocomm-corrupt-report-EXCERPT.txt").unwrap();
    finding(&r, Code::HangRasInconsistent, &["#2-0", "255"]);
    let r = sample(
        "ncclras-json-2.28.9-ray-1node-2gpu-rank1-unresponsive-invalid-json-missing-comma.json",
    )
    .unwrap();
    assert!(
        r.notes.iter().any(|n| n.contains("RAS JSON repaired")),
        "{:?}",
        r.notes
    );
    let r = sample("nccl-ras-docs-text-healthy-job-summary-EXCERPT.txt").unwrap();
    assert!(r.findings.is_empty() && r.worst.is_none(), "{r:#?}");
    let r = sample("fr-trace-tutorial-1x2-rank1-missing-allreduce-collective5.txt").unwrap();
    suspect(&r, &[1], Why::NeverJoined);
}

/// A healthy RAS report beside a PyTorch timeout is not "healthy": everything launched.
#[test]
fn ras_ok_with_a_timeout_is_stuck_in_transfer_not_a_missing_rank() {
    let ras = "Communicators... (0.01s)\n=============\n\nGroup     Comms     Nodes     Ranks     Ranks     Ranks    Status  Errors\n    #  in group  per comm  per node  per comm  in group\n    0         1         2         4         8         8   RUNNING      OK\n";
    let wd = "[rank5]:[E603 17:48:01.0 ProcessGroupNCCL.cpp:632] [Rank 5] Watchdog caught collective operation timeout: WorkNCCL(SeqNum=9, OpType=ALLREDUCE, NumelIn=8, NumelOut=8, Timeout(ms)=1) ran for 2 milliseconds before timing out.\n";
    let r = read(&[("ras.txt", ras), ("rank5.log", wd)]);
    assert_eq!(r.cause, Cause::StuckInTransfer, "{}", r.verdict);
    assert!(!r.suspects.iter().any(|s| s.why == Why::NotReported));
    let alone = read(&[("rank5.log", wd)]);
    assert_eq!(alone.cause, Cause::RankSilent, "{}", alone.verdict);
}

/// Two RAS queries: the same spread both times is frozen (a desync); moving counts are not.
#[test]
fn repeated_ras_queries_tell_frozen_from_moving() {
    let q = |a: u64, b: u64| {
        format!(
            "NCCL version 2.26.2 compiled with CUDA 12.4\n\nWarnings\n========\n\n#0-0 (27a079b828ff1a75) MISMATCH\n  Communicator ranks have different AllReduce operation counts\n  7 ranks have launched up to operation {a}\n  1 ranks have launched up to operation {b}\n  Rank 3 -- GPU 3 managed by process 9 on node h1\n"
        )
    };
    let frozen = read(&[("q.txt", &format!("{}{}", q(10, 9), q(10, 9)))]);
    assert_eq!(frozen.cause, Cause::RankMissing, "{}", frozen.verdict);
    has(
        &frozen,
        &["unchanged across queries", "never launched operation 10"],
    );
    suspect(&frozen, &[3], Why::Behind);
    // One query, one rank 4 behind the seven others (NCCL's 2.30.7 straggler example).
    let straggler = read(&[("q.txt", &q(64, 60))]);
    assert_eq!(straggler.cause, Cause::RankMissing, "{}", straggler.verdict);
    has(&straggler, &["stragglers", "rank 3 on h1 at 60"]);
    let moving = read(&[("q.txt", &format!("{}{}", q(10, 9), q(12, 11)))]);
    assert_eq!(moving.cause, Cause::TransientMismatch, "{}", moving.verdict);
}

/// A rank whose host never enqueued the stuck work did not join it.
#[test]
fn a_rank_that_never_enqueued_the_collective_is_named() {
    let t = "[rank0]:[E1 ProcessGroupNCCL.cpp:1] [PG ID 0 PG GUID 0(default_pg) Rank 0]  failure detected by watchdog at work sequence id: 50 PG status: last enqueued work: 52, last completed work: 49\n[rank1]:[E1 ProcessGroupNCCL.cpp:1] [PG ID 0 PG GUID 0(default_pg) Rank 1] Received a dump signal due to a collective timeout from  rank 0 and we will try our best to dump the debug info. Last enqueued NCCL work: 49, last completed NCCL work: 49.\n";
    let r = read(&[("x.log", t)]);
    assert_eq!(r.cause, Cause::RankMissing, "{}", r.verdict);
    suspect(&r, &[1], Why::NeverJoined);
    has(
        &r,
        &[
            "rank 1",
            "never enqueued",
            "seq 50",
            "last enqueued work is 49",
        ],
    );
}

/// Stacks: one call site is a note; two call sites for one seq are a desync.
#[test]
fn stacks_of_the_failed_collective_name_the_call_site() {
    let one = |g: u32, site: &str| {
        format!(
            "[rank{g}]:[E1 ProcessGroupNCCL.cpp:1] [Rank {g}] Watchdog caught collective operation timeout: WorkNCCL(SeqNum=7, OpType=ALLREDUCE, NumelIn=8, NumelOut=8, Timeout(ms)=1) ran for 2 milliseconds before timing out.\n[rank{g}]:[E1 ProcessGroupNCCL.cpp:2] [PG ID 0 PG GUID 0(default_pg) Rank {g}] Stack trace of the failed collective: \n[rank{g}]:#0 all_reduce from /usr/lib/python3/site-packages/torch/distributed/distributed_c10d.py:2501\n[rank{g}]:#1 {site}\n[rank{g}]:#2 <module> from /w/train.py:90\n"
        )
    };
    let same = [
        one(0, "step from /w/train.py:44"),
        one(1, "step from /w/train.py:44"),
    ]
    .concat();
    let r = read(&[("x.log", &same)]);
    assert_eq!(r.cause, Cause::Undetermined, "{}", r.verdict);
    assert!(
        r.notes
            .iter()
            .any(|n| n.contains("ranks 0-1 at #1 step from /w/train.py:44")),
        "{:?}",
        r.notes
    );
    let differ = [
        one(0, "save from /w/ckpt.py:12"),
        one(1, "step from /w/train.py:44"),
        one(2, "step from /w/train.py:44"),
    ]
    .concat();
    let r = read(&[("x.log", &differ)]);
    assert_eq!(r.cause, Cause::Desync, "{}", r.verdict);
    has(
        &r,
        &[
            "ranks 1-2 at #1 step from /w/train.py:44",
            "rank 0 at #1 save from /w/ckpt.py:12",
        ],
    );
    suspect(&r, &[0], Why::Mismatched);
}

/// The same seq with another op on one rank is a desync; all-to-all sizes may differ.
#[test]
fn another_op_or_size_at_the_same_seq_is_a_desync() {
    let line = |g: u32, op: &str, n: u64| {
        format!(
            "[rank{g}]:[E1 ProcessGroupNCCL.cpp:1] [Rank {g}] Watchdog caught collective operation timeout: WorkNCCL(SeqNum=7, OpType={op}, NumelIn={n}, NumelOut={n}, Timeout(ms)=1) ran for 2 milliseconds before timing out.\n"
        )
    };
    let t = [
        line(0, "ALLREDUCE", 8),
        line(1, "ALLREDUCE", 8),
        line(2, "ALLREDUCE", 16),
    ]
    .concat();
    let r = read(&[("x.log", &t)]);
    assert_eq!(r.cause, Cause::Desync, "{}", r.verdict);
    suspect(&r, &[2], Why::Mismatched);
    let a2a = [line(0, "ALLTOALL", 8), line(1, "ALLTOALL", 16)].concat();
    assert_eq!(read(&[("x.log", &a2a)]).cause, Cause::Undetermined);
}

/// Generated jobs: `n` ranks in `pgs` process groups (the default group and others with
/// their own group ranks), mixed launcher prefixes, one rank silent in every group.
fn job(n: u32, silent: u32) -> String {
    let mut out = String::new();
    for g in 0..n {
        if g == silent {
            continue;
        }
        let prefix = match g % 4 {
            0 => format!("[rank{g}]:"),
            1 => format!("[1,{g}]<stdout>:[rank{g}]:"),
            2 => format!("node{:04}.cluster [stderr] [rank{g}]:", g / 8),
            _ => format!("2024-05-01T12:00:00.1Z {g}: [rank{g}]:"),
        };
        out.push_str(&format!("{prefix}[E0101 00:10:00.1 ProcessGroupNCCL.cpp:632] [Rank {g}] Watchdog caught collective operation timeout: WorkNCCL(SeqNum=100, OpType=ALLREDUCE, NumelIn=64, NumelOut=64, Timeout(ms)=600000) ran for 600001 milliseconds before timing out.\n"));
        out.push_str(&format!("{prefix}[E0101 00:10:00.2 ProcessGroupNCCL.cpp:2268] [PG ID 0 PG GUID 0(default_pg) Rank {g}]  failure detected by watchdog at work sequence id: 100 PG status: last enqueued work: {}, last completed work: 99\n", 100 + g % 3));
        // A tensor-parallel group of 8: group rank g % 8, stuck in its own all-gather.
        out.push_str(&format!("{prefix}[E0101 00:10:01.0 ProcessGroupNCCL.cpp:2268] [PG ID 1 PG GUID 7(tp) Rank {}]  failure detected by watchdog at work sequence id: 40 PG status: last enqueued work: 40, last completed work: 39\n", g % 8));
    }
    out
}

#[test]
fn generated_thousands_of_ranks_name_the_silent_rank() {
    for (n, silent) in [(4096, 2901), (1024, 0), (2048, 2047)] {
        let r = read(&[("job.log", &job(n, silent))]);
        let s = r.suspects.iter().find(|s| {
            s.why == Why::NotReported && s.group.as_deref() == Some("PG 0 GUID 0 (default_pg)")
        });
        // The highest rank silent is beyond what the others show: no gap to see.
        if silent == n - 1 {
            assert!(s.is_none(), "{s:?}");
            assert_eq!(r.cause, Cause::Undetermined, "{n}: {}", r.verdict);
            continue;
        }
        assert_eq!(r.cause, Cause::RankSilent, "{n}: {}", r.verdict);
        let s = s.unwrap_or_else(|| panic!("{n}: {:#?}", r.suspects));
        assert_eq!(s.ranks, [silent]);
        assert_eq!(s.rank_kind, RankKind::Global);
        assert_eq!(r.stuck.len(), 2, "{:#?}", r.stuck);
        assert_eq!(r.stuck[0].ranks.len() as u32, n - 1);
        assert!(
            r.stuck[0].summary.contains("enqueued 2 more"),
            "{}",
            r.stuck[0].summary
        );
        // The TP group's rank numbers are group ranks: every one of 0..8 reported.
        assert!(
            !r.suspects.iter().any(
                |s| s.group.as_deref() == Some("PG 1 GUID 7 (tp)") && s.why == Why::NotReported
            )
        );
        assert!(!r.findings.iter().any(|f| f.code == Code::HangConcurrentUse));
    }
}

#[test]
fn generated_ras_reports_of_thousands_of_ranks_merge_by_hash() {
    // 4096 ranks, two communicators; one has 3 ranks unresponsive, listed with their places.
    let mut t = String::from(
        "NCCL version 2.30.7 compiled with CUDA 12.8\n\nErrors\n======\n\nINCOMPLETE\n  Missing communicator data from 3 job processes\n",
    );
    for (r, node) in [(17u32, 2u32), (900, 112), (4001, 500)] {
        t.push_str(&format!(
            "  Process {} on node 10.0.{}.{} managing GPU {}\n",
            1000 + r,
            node / 256,
            node % 256,
            r % 8
        ));
    }
    t.push_str("\n#0-0 (00000000000000aa) INCOMPLETE\n  Missing communicator data from 3 ranks\n");
    for (r, node) in [(17u32, 2u32), (900, 112), (4001, 500)] {
        t.push_str(&format!(
            "  Rank {r} -- GPU {} managed by process {} on node 10.0.{}.{}\n",
            r % 8,
            1000 + r,
            node / 256,
            node % 256
        ));
    }
    t.push_str("\n#1-0 (00000000000000bb) MISMATCH\n  Communicator ranks have different AllGather operation counts\n  4095 ranks have launched up to operation 77\n  1 rank has launched up to operation 76\n  Rank 3000 -- GPU 0 managed by process 7 on node 10.0.9.9\n");
    let r = read(&[("ras.txt", &t)]);
    assert_eq!(r.cause, Cause::RankMissing, "{}", r.verdict);
    for k in [17, 900, 4001] {
        let s = r.suspects.iter().find(|s| s.ranks == [k]).unwrap();
        assert_eq!(s.why, Why::Unresponsive);
        assert_eq!(s.pid, Some(1000 + u64::from(k)));
        assert_eq!(s.group.as_deref(), Some("comm 00000000000000aa (#0-0)"));
    }
    suspect(&r, &[3000], Why::Behind);
    assert_eq!(
        r.findings
            .iter()
            .filter(|f| f.code == Code::HangRankMissing)
            .count(),
        3
    );
}

/// Linear: four times the ranks take under six times as long (the limits tests' rule).
#[test]
fn judging_is_linear_in_the_ranks() {
    // The best of two runs: the machine is shared, the noise is in the slow runs.
    let time = |n: u32| {
        let text = job(n, 5);
        (0..2)
            .map(|_| {
                let t = std::time::Instant::now();
                let r = read(&[("job.log", &text)]);
                assert_eq!(r.cause, Cause::RankSilent);
                t.elapsed()
            })
            .min()
            .unwrap_or_default()
    };
    // Both sizes past the caches (about 4 and 16 MB of events), so the ratio is the work's.
    let small = time(4096).max(std::time::Duration::from_millis(5));
    let big = time(16384);
    eprintln!("4096 ranks {small:?}, 16384 ranks {big:?}");
    assert!(big < small * 6, "4096 ranks {small:?}, 16384 ranks {big:?}");
}

#[test]
fn nothing_recognised_says_so() {
    let r = read(&[("notes.txt", "hello\nworld\n")]);
    assert_eq!(r.cause, Cause::NoEvidence);
    assert!(r.notes[0].contains("no hang evidence recognised"));
    assert!(r.worst.is_none());
}

#[test]
fn benign_async_events_are_not_faults() {
    let r = read(&[(
        "n.log",
        "h1:1:2 [0] NCCL WARN NET/IB : mlx5_2:1 Got async event : GID table change\nh1:1:2 [0] NCCL WARN NET/IB : mlx5_3:1 Got async event : port error\n",
    )]);
    assert_eq!(r.cause, Cause::NetworkFault);
    has(&r, &["port error on h1 mlx5_3:1"]);
    assert_eq!(r.findings.len(), 1, "{:#?}", r.findings);
}

/// Hostile input: fragments of every format cut, glued and mixed with noise never panic, and
/// every report has a verdict.
mod hostile {
    use super::*;
    use proptest::prelude::*;

    const PIECES: &[&str] = &[
        "[rank3]:[E101 00:00:01.0 ProcessGroupNCCL.cpp:1] [Rank 3] Watchdog caught collective operation timeout: WorkNCCL(SeqNum=",
        "[PG ID 0 PG GUID 0(default_pg) Rank 1]  failure detected by watchdog at work sequence id: 9 PG status: last enqueued work: ",
        "Received a dump signal due to a collective timeout from  rank ",
        "#0-0 (27a079b828ff1a75) MISMATCH",
        "  4294967295 ranks have launched up to operation 18446744073709551615",
        "  Rank 99999999999 -- GPU 0 managed by process 1 on node h",
        "The missing rank: 5, x, 7",
        "Group     Comms     Nodes     Ranks     Ranks     Ranks    Status  Errors",
        "    0         1         0       7-8         0         0   NOCOMM  INCOMPLETE,MISMATCH",
        "Errors\n======\nDEAD\n  Process 7 on node n managing GPU 0",
        "Not all ranks joining collective 5 at entry 4\nmissing ranks: {1, 2,",
        "Collective 39 at entry 38 errors\nerror msg: Culprit rank ; Error type: ",
        "Rank 0        Rank 1\n------------  ------------\nall_reduce(a)",
        "--- Collectives ---\n 4 g True 4 op s {1",
        "h:1:2 [0] NCCL WARN NET/IB : Got completion from peer 1.2.3.4<5> with status=",
        "x [y](http://z) [",
        "h:1:2 [0] NCCL WARN NET/IB : mlx5_0:1 Got async event : local catastrophic error",
        "NET/IB : req 0/1 tag 0 peer 1.1.1.1<1> collective mismatch error, local size 1 remote size",
        "{\"communicators\": [{\"hash\": 1, \"ranks\": [{\"rank\": -1, \"collective_counts\": {\"AllReduce\": \"x\"}}",
        "{\"pg_status\": {\"0\": {}}, \"entries\": [(1, None, ...",
        "[2025-01-01 00:00:00] PEER_DEAD: ",
        "\u{1b}[31m\r",
        "[[[[[[[[",
        "[rank1]:[E1231 99999999999999999999:99:99.1 ProcessGroupNCCL.cpp:1] [Rank 1] Watchdog caught collective operation timeout: WorkNCCL(SeqNum=18446744073709551615, OpType=A)",
        "{\"communicators\": [{\"hash\": \"0x2\", \"size\": 4294967295, \"ranks\": [{\"rank\": 4294967295, \"collective_counts\": {\"AllReduce\": 18446744073709551615, \"Reduce\": 18446744073709551615}}]}]}",
        "[rank999999999]:[E1 ProcessGroupNCCL.cpp:1] [Rank 4000000000] Watchdog caught collective operation timeout: WorkNCCL(SeqNum=1, OpType=ALLREDUCE)",
    ];

    fn text() -> impl Strategy<Value = String> {
        prop::collection::vec(
            prop_oneof![
                prop::sample::select(PIECES).prop_map(str::to_string),
                "[ -~]{0,40}",
                "[0-9]{1,25}",
            ],
            0..40,
        )
        .prop_map(|v| v.join(if v.len() % 3 == 0 { "" } else { "\n" }))
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(400))]
        #[test]
        fn hostile_pieces_never_panic(t in text(), u in text()) {
            let r = read(&[("a.log", &t), ("b.json", &u)]);
            prop_assert!(!r.verdict.is_empty());
            prop_assert!(r.suspects.len() <= SUSPECTS_MAX);
        }
    }
}
