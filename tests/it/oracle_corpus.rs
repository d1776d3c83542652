//! Shared by `tests/it/oracle.rs` and `bench/oracle/sweep.rs`: one corpus entry (a generated
//! machine and NCCL's answer for it) and topo's analysis of it, through the library.

use serde::{Deserialize, Serialize};
use topo_nccl::analyze::{self, Analysis, Request, RuntimeFacts};
use topo_nccl::differential::OracleAnswer;
use topo_nccl::transport::RankPlacement;
use topo_nccl::version::NcclVersion;

/// One line of `fixtures/oracle/corpus.jsonl`.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct Entry {
    /// `topo_nccl::testgen::generate` seed.
    pub seed: u64,
    pub summary: String,
    /// Identical hosts (`nccl-oracle --nodes`, `topo plan --nodes`).
    pub nodes: usize,
    pub env: Vec<(String, String)>,
    pub xml: String,
    /// NCCL's answer; `None` when the oracle refused the machine (`error` says why).
    pub oracle: Option<OracleAnswer>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
    /// The NCCL version of the oracle that answered (its tag's `major.minor`); the corpus
    /// recorded before versions were swept has none: 2.28.
    #[serde(default = "first_version", skip_serializing_if = "is_first_version")]
    pub version: String,
}

fn first_version() -> String {
    "2.28".into()
}

fn is_first_version(v: &String) -> bool {
    *v == first_version()
}

/// topo's analysis of a machine, as `topo plan --from XML --nodes N --nccl-version VERSION
/// --env ...` computes it.
pub fn analyze_machine(
    xml: &str,
    env: &[(String, String)],
    nodes: usize,
    version: &str,
) -> anyhow::Result<Analysis> {
    let mut topo = topo_source::ncclxml::parse_str(xml, "generated")?;
    if nodes > 1 {
        topo = topo.replicate(nodes);
    }
    // The oracle's net plugin joins no ports (no `makeVDevice`, its README): NCCL with it keeps
    // every port apart, as the IB plugin does with NCCL_IB_MERGE_NICS=0 (2.20 and later).
    let mut env = env.to_vec();
    if !env.iter().any(|(k, _)| k == "NCCL_IB_MERGE_NICS") {
        env.push(("NCCL_IB_MERGE_NICS".into(), "0".into()));
    }
    Ok(analyze::analyze(&Request {
        topo: &topo,
        env,
        version: NcclVersion::parse(version)?,
        placement: RankPlacement::ProcessPerGpu,
        facts: RuntimeFacts::default(),
    })?)
}

/// The kind of a difference on one machine (docs/differential.md, "Remaining differences"):
/// `split` when NCCL or topo splits a host into several nodes, `net` on two nodes otherwise,
/// `search` on one.
// Used by bench/oracle/sweep.rs, which includes this file; the tests only tally.
#[allow(dead_code)]
pub fn difference_kind(e: &Entry, a: &Analysis) -> &'static str {
    let gpus_per_host = a.nranks / e.nodes.max(1);
    let oracle_ring = e
        .oracle
        .as_ref()
        .and_then(|o| o.graphs.get("ring"))
        .and_then(|g| g.channels.first())
        .map_or(gpus_per_host, Vec::len);
    if a.nnodes > e.nodes || oracle_ring < gpus_per_host {
        "split"
    } else if e.nodes > 1 {
        "net"
    } else {
        "search"
    }
}
