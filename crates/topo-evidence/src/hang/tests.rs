use super::*;

fn ev(name: &str, text: &str) -> HangEvidence {
    let mut e = HangEvidence::default();
    read(name, text, &mut e);
    e
}

const INCOMPLETE: &str = "Communicators... (2.05s)
=============

Group     Comms     Nodes     Ranks     Ranks     Ranks    Status  Errors
    #  in group  per comm  per node  per comm  in group
    0         1         4       7-8        32        32   RUNNING  INCOMPLETE

Errors
======

INCOMPLETE
  Missing communicator data from 1 job process
  Process 3487984 on node 172.16.64.213 managing GPU 5

#0-0 (cf264af53edbe986) INCOMPLETE
  Missing communicator data from 1 rank
  The missing rank: 21

Warnings
========

TIMEOUT
  Encountered 2 communication timeouts while gathering communicator data
";

#[test]
fn ras_text_report_reads_table_processes_and_comms() {
    let e = ev("r.txt", INCOMPLETE);
    assert_eq!(e.ras.len(), 1, "{e:#?}");
    let r = &e.ras[0];
    assert_eq!(r.groups.len(), 1);
    assert_eq!(r.groups[0].ranks_per_node, "7-8");
    assert_eq!(r.groups[0].errors, "INCOMPLETE");
    assert_eq!(r.processes_listed.len(), 1);
    let p = &r.processes_listed[0];
    assert_eq!(p.state, ProcessState::Unresponsive);
    assert_eq!(p.place.pid, Some(3487984));
    assert_eq!(p.place.node.as_deref(), Some("172.16.64.213"));
    assert_eq!(p.place.gpu.as_deref(), Some("5"));
    assert_eq!(r.comms[0].hash, "cf264af53edbe986");
    let g = &r.comms[0].rank_groups[0];
    assert!(matches!(g.what, GroupWhat::Missing { .. }));
    assert_eq!(g.ranks[0].rank, 21);
    assert_eq!(r.gather_timeouts, Some(2));
    assert_eq!(e.inputs[0].kinds, vec!["ras"]);
}

#[test]
fn ras_two_queries_in_one_file_are_two_reports() {
    let one = "NCCL version 2.26.2 compiled with CUDA 12.4\n\nWarnings\n========\n\n#0-0 (27a079b828ff1a75) MISMATCH\n  Communicator ranks have different AllReduce operation counts\n  3 ranks have launched up to operation 10\n  1 ranks have launched up to operation 9\n  Rank 2 -- GPU 2 managed by process 7 on node h1\n";
    let e = ev("q.txt", &format!("{one}\n{one}"));
    assert_eq!(e.ras.len(), 2);
    let c = &e.ras[1].comms[0];
    assert_eq!(c.op.as_deref(), Some("AllReduce"));
    assert_eq!(c.rank_groups.len(), 2);
    assert_eq!(c.rank_groups[1].ranks[0].place.node.as_deref(), Some("h1"));
}

#[test]
fn ras_json_with_the_2_28_comma_defect_is_repaired() {
    let text = r#"{"nccl_version": "2.28.9", "communicators": [{"hash": "0xa1", "size": 2,
      "ranks": [{"rank": 0, "host": "h", "pid": 1, "cuda_dev": 0, "nvml_dev": 0,
        "status": {"init_state": 0, "async_error": 0}, "collective_counts": {"AllReduce": 4}}],
      "missing_ranks": [{"rank": 1, "host": "h", "pid": 2, "cuda_dev": 1, "nvml_dev": 1
        "status": {"unresponsive": true, "considered_dead": false}}]}]}"#;
    let e = ev("x.json", text);
    let r = &e.ras[0];
    assert!(r.json);
    assert!(r.repaired.as_deref().unwrap().contains("2.28.7-2.28.9"));
    let c = &r.comms[0];
    assert_eq!(c.hash, "a1");
    assert_eq!(c.kind, "INCOMPLETE");
    let m = c
        .rank_groups
        .iter()
        .find(|g| matches!(g.what, GroupWhat::Missing { .. }))
        .unwrap();
    assert_eq!(m.ranks[0].rank, 1);
    assert_eq!(m.ranks[0].place.gpu.as_deref(), Some("1"));
    assert_eq!(
        m.what,
        GroupWhat::Missing {
            unresponsive: Some(true),
            dead: Some(false)
        }
    );
}

#[test]
fn monitor_events_and_mixed_inputs() {
    let e = ev(
        "mixed.log",
        "RAS Monitor Mode - watching for peer changes (Ctrl+C to exit)...\n[2025-12-19 13:07:07] PEER_DEAD: Process 1524345 on node 172.16.64.245 managing GPU 1\n[rank3]:[E101 00:00:01.0 ProcessGroupNCCL.cpp:1] [Rank 3] Watchdog caught collective operation timeout: WorkNCCL(SeqNum=7, OpType=ALLREDUCE, NumelIn=1, NumelOut=1, Timeout(ms)=1) ran for 2 milliseconds before timing out.\n[1,3]<stdout>:h9:1:2 [0] NCCL WARN NET/IB : Got async event : port error\n",
    );
    assert_eq!(e.peer_events[0].event, "PEER_DEAD");
    assert_eq!(e.peer_events[0].place.pid, Some(1524345));
    assert_eq!(e.watchdog.len(), 1);
    assert_eq!(e.net[0].host.as_deref(), Some("h9"));
    assert_eq!(
        e.inputs[0].kinds,
        vec!["ras-monitor", "ras", "watchdog", "net-error"]
    );
}

#[test]
fn unrelated_text_is_noted_and_long_lines_are_capped() {
    let long = "x".repeat(LINE_MAX * 3) + " NET/IB : Got async event : port error";
    let e = ev("n.txt", &format!("hello\n{long}\n"));
    assert!(e.net.is_empty());
    assert_eq!(e.notes.len(), 1);
    assert!(e.notes[0].starts_with("n.txt: no hang evidence"));
}

/// Pathological lines (every recogniser let in, brackets everywhere, a link at the end, a
/// long JSON document) cost linear time: four times the input under six times the time.
#[test]
fn hostile_lines_read_in_linear_time() {
    let line = format!(
        "[rank1]:[E1 ProcessGroupNCCL.cpp:1] {} NET/IB : Got completion from peer {} [a](http://b) #0-0 (ab) MISMATCH Rank 1 -- GPU",
        "[rank".repeat(1500),
        "[".repeat(4000)
    );
    let json = |n: usize| {
        format!(
            "{{\"communicators\": [{}]}}",
            vec!["{\"hash\": \"0x1\", \"ranks\": [{\"rank\": 0}], \"missing_ranks\": []}"; n]
                .join(",\n")
        )
    };
    let time = |n: usize| {
        let text = format!("{}\n", line).repeat(n);
        let doc = json(n * 20);
        (0..2)
            .map(|_| {
                let t = std::time::Instant::now();
                let mut e = HangEvidence::default();
                read("l.log", &text, &mut e);
                read("r.json", &doc, &mut e);
                t.elapsed()
            })
            .min()
            .unwrap_or_default()
    };
    let small = time(200).max(std::time::Duration::from_millis(5));
    let big = time(800);
    assert!(big < small * 6, "{small:?} then {big:?}");
}
