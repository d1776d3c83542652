//! The NCCL version a log was written by: its version line, another program's text naming it
//! (a traceback, vLLM's banner), or the range its wording implies when neither is there. The
//! phrasings and the versions that print them are in docs/diagnose.md ("Log phrasings").

use topo_evidence::nccllog::NcclLog;
use topo_vocab::Algorithm;

/// A wording and the NCCL versions that print it: (words, range, the model version to use or
/// `None` when the range is older than topo models).
const WORDINGS: &[(&str, &str, Option<&str>)] = &[
    ("Initialized NET plugin", "2.27 or later", None),
    ("Using non-device net plugin", "2.19-2.23", Some("2.23")),
    ("(distance 3 >= 2)", "2.4-2.5", None),
    (".cu:", "2.4 or older (.cu source names)", None),
    ("include/shm.h", "2.4-2.11", None),
    ("=== System : maxWidth", "2.7-2.11", None),
    (
        "Latency/AlgBw",
        "2.5-2.18 (the one-header TUNING table)",
        None,
    ),
    ("via direct shared memory", "2.4-2.8", None),
    ("via P2P/direct pointer", "2.4-2.8", None),
];

/// The first wording of the log that dates it.
fn implied(log: &NcclLog) -> Option<&'static (&'static str, &'static str, Option<&'static str>)> {
    let texts = log
        .warnings
        .iter()
        .chain(&log.notable)
        .map(|e| e.text.as_str())
        .chain(log.connections.iter().map(|c| c.text.as_str()))
        .chain(log.system.iter().map(|s| s.header.text.as_str()));
    let texts: Vec<&str> = texts.take(4096).collect();
    let ring = log
        .connections
        .iter()
        .any(|c| c.text.contains("NCCL INFO Ring "));
    if ring {
        return Some(&("Ring NN : a -> b via", "2.4-2.6", None));
    }
    // A TUNING table of Tree and Ring alone predates CollNet (2.6).
    if !log.tuning.is_empty()
        && log
            .tuning
            .iter()
            .all(|c| matches!(c.algorithm, Algorithm::Tree | Algorithm::Ring))
    {
        return Some(&("a TUNING table of Tree and Ring only", "2.4-2.5", None));
    }
    WORDINGS
        .iter()
        .find(|(w, _, _)| texts.iter().any(|t| t.contains(w)))
}

/// The version in words, for the report: `NCCL 2.20.5 (line 5)`.
pub fn read(log: &NcclLog) -> String {
    if let (Some(v), Some(e)) = (&log.version, &log.version_line) {
        let how = if log.version_from_text {
            "named outside NCCL's version line"
        } else {
            "its version line"
        };
        return format!("NCCL {v} ({how}, line {})", e.line);
    }
    match implied(log) {
        Some((w, range, _)) => {
            format!("NCCL version not printed; its wording dates it to NCCL {range} (`{w}`)")
        }
        None => "NCCL version not printed".into(),
    }
}

/// The version to model when the log prints none: `Err` with the reason when its wording
/// dates it before the versions topo models, `Ok(None)` when nothing dates it.
pub fn model_version(log: &NcclLog) -> Result<Option<&'static str>, String> {
    match implied(log) {
        Some((w, range, Some(v))) => {
            let _ = (w, range);
            Ok(Some(v))
        }
        Some((w, range, None)) if !range.ends_with("or later") => Err(format!(
            "the log's wording (`{w}`) dates it to NCCL {range}, older than topo models (2.18-2.30)"
        )),
        _ => Ok(None),
    }
}

/// What a log shows, in one line: version, ranks and nodes, transports, the tables read.
pub fn shows(log: &NcclLog) -> String {
    let mut parts = vec![read(log)];
    if let Some(n) = log.nranks() {
        let nodes = log
            .nnodes()
            .map(|n| format!(" on {n} node(s)"))
            .unwrap_or_default();
        parts.push(format!("{n} rank(s){nodes}"));
    }
    let complete = log.ranks.values().filter(|r| r.init_complete).count();
    if complete > 0 {
        parts.push(format!("Init COMPLETE on {complete} rank(s)"));
    }
    let mut kinds: Vec<String> = vec![];
    for c in &log.connections {
        let k = c.transport.family();
        if !kinds.contains(&k) {
            kinds.push(k);
        }
    }
    if !kinds.is_empty() {
        parts.push(format!("transports {}", kinds.join(", ")));
    }
    if let Some(s) = &log.system {
        let gpus = s.nodes.iter().filter(|n| n.kind == "GPU").count();
        let nvs = s.nodes.iter().any(|n| n.kind == "NVS");
        parts.push(format!(
            "a topology dump of {gpus} GPU(s){}",
            if nvs { " on NVSwitch" } else { "" }
        ));
    }
    if !log.gpu_paths.is_empty() {
        let k: Vec<&str> = log
            .gpu_paths_by_name()
            .iter()
            .map(|(k, _)| k.name())
            .collect();
        parts.push(format!("a GPU path table ({})", k.join(", ")));
    }
    if !log.tuning.is_empty() {
        parts.push(format!("a TUNING table of {} cells", log.tuning.len()));
    }
    if !log.graphs.is_empty() {
        parts.push(format!("{} graph line(s)", log.graphs.len()));
    }
    parts.push(if log.warnings.is_empty() {
        "no WARN line".to_string()
    } else {
        format!(
            "{} WARN line(s), each harmless here (findings above)",
            log.warnings.len()
        )
    });
    parts.join("; ")
}
