//! topo's measured-behaviour layer: what nccl-tests would measure for NCCL's choice.
//!
//! NCCL's cost model (`tuning.rs`, NCCL's own constants and formulas) ranks algorithm × protocol
//! pairs; its time leaves out launch overheads and pipeline ramp-up, so it is 1.5-3x fast at
//! small and mid sizes against published nccl-tests tables. This layer keeps the choice (algorithm,
//! protocol, channels, and NCCL's bandwidth `bw` for it) and replaces the time by
//! `lat_us + tb / bw_efficiency + ramp × sqrt(tb)`, `tb = bytes / (1000 × bw)` being NCCL's own
//! bandwidth term in us, with `lat_us`, `bw_efficiency` and `ramp` fitted per
//! (GPU generation, collective, algorithm, protocol, one node or several) to the published results
//! in `fixtures/fidelity/` by `bench/fidelity/fit.py`. The constants are data
//! (`data/measured.yaml`), each rule naming the fixtures it came from. A choice no rule matches
//! keeps NCCL's time and says so.

use crate::tuning::Choice;
use serde::Deserialize;
use std::sync::OnceLock;

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct Rule {
    arch: String,
    collective: String,
    algo: String,
    proto: String,
    nodes: String,
    lat_us: f64,
    bw_efficiency: f64,
    /// Coefficient of sqrt(NCCL's bandwidth term in us): the pipeline ramp of mid sizes.
    ramp: f64,
    points: usize,
    sizes: String,
    from: Vec<String>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct Rules {
    rules: Vec<Rule>,
}

impl Rule {
    /// `tb` is NCCL's bandwidth term of the time (bytes / bw), us.
    fn time_us(&self, tb: f64) -> f64 {
        self.lat_us + tb / self.bw_efficiency + self.ramp * tb.sqrt()
    }
}

fn rules() -> &'static [Rule] {
    static RULES: OnceLock<Vec<Rule>> = OnceLock::new();
    RULES.get_or_init(|| {
        // Embedded and checked by the unit tests below: a malformed file fails them, not a user.
        let r: Rules = yaml_serde::from_str(include_str!("../data/measured.yaml"))
            .expect("data/measured.yaml parses");
        r.rules
    })
}

/// The expected (measured-behaviour) time of a choice and where its constants came from.
#[derive(Clone, Debug, PartialEq)]
pub struct Expected {
    pub time_us: f64,
    /// The rule applied (`sm90 allreduce NVLS/Simple one node: ...`), or why none was.
    pub basis: String,
}

/// `sm` is the GPUs' compute capability as NCCL reads it (90 for H100), `nnodes` the node count.
pub fn expected(c: &Choice, sm: u32, nnodes: usize) -> Expected {
    let arch = format!("sm{sm}");
    let nodes = if nnodes > 1 { "multi" } else { "single" };
    let hit = rules().iter().find(|r| {
        r.arch == arch
            && r.collective == c.func.cli_name()
            && r.algo == c.algo.name()
            && r.proto == c.proto.name()
            && r.nodes == nodes
    });
    match hit {
        Some(r) if c.bw > 0.0 => Expected {
            time_us: r.time_us(c.bytes as f64 / (1000.0 * c.bw)),
            basis: format!(
                "{} {} {}/{} {}: lat {} us, bandwidth x {}, ramp {} (fitted on {} sizes {} of {})",
                r.arch,
                r.collective,
                r.algo,
                r.proto,
                if nnodes > 1 {
                    "several nodes"
                } else {
                    "one node"
                },
                r.lat_us,
                r.bw_efficiency,
                r.ramp,
                r.points,
                r.sizes,
                r.from.join(", ")
            ),
        },
        _ => Expected {
            time_us: c.time_us,
            basis: format!(
                "NCCL's time: no published result calibrates {arch} {} {}/{} on {}",
                c.func.cli_name(),
                c.algo.name(),
                c.proto.name(),
                if nnodes > 1 {
                    "several nodes"
                } else {
                    "one node"
                }
            ),
        },
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::types::{Algo, Func, Proto};

    fn choice(algo: Algo, proto: Proto, bytes: u64, lat_us: f64, bw: f64) -> Choice {
        Choice {
            func: Func::AllReduce,
            bytes,
            algo,
            proto,
            time_us: lat_us + bytes as f64 / (1000.0 * bw),
            bw,
            lat_us,
            nchannels: 16,
            nthreads: 512,
            considered: vec![],
            rejected: vec![],
            explain: vec![],
        }
    }

    #[test]
    fn every_rule_is_complete_and_physical() {
        assert!(!rules().is_empty());
        for r in rules() {
            assert!(r.arch.starts_with("sm"), "{r:?}");
            assert!(Algo::ALL.iter().any(|a| a.name() == r.algo), "{r:?}");
            assert!(Proto::from_name(&r.proto).is_some(), "{r:?}");
            assert!(r.nodes == "single" || r.nodes == "multi", "{r:?}");
            assert!(r.lat_us.is_finite() && r.lat_us >= 0.0, "{r:?}");
            assert!(
                r.bw_efficiency.is_finite() && r.bw_efficiency > 0.0,
                "{r:?}"
            );
            assert!(r.ramp.is_finite() && r.ramp >= 0.0, "{r:?}");
            assert!(r.points > 0 && !r.from.is_empty(), "{r:?}");
        }
    }

    #[test]
    fn a_rule_replaces_nccls_latency_and_scales_its_bandwidth() {
        let r = rules()
            .iter()
            .find(|r| r.arch == "sm90" && r.algo == "NVLS" && r.nodes == "single")
            .expect("an H100 NVLS rule");
        let c = choice(Algo::Nvls, Proto::Simple, 1 << 30, 25.0, 272.0);
        let e = expected(&c, 90, 1);
        let tb = (1u64 << 30) as f64 / (1000.0 * 272.0);
        let want = r.lat_us + tb / r.bw_efficiency + r.ramp * tb.sqrt();
        assert!((e.time_us - want).abs() < 1e-9, "{e:?}");
        assert!(e.basis.contains("fitted on"), "{}", e.basis);
    }

    #[test]
    fn no_rule_keeps_nccls_time_and_says_so() {
        let c = choice(Algo::Ring, Proto::Simple, 1 << 20, 10.0, 100.0);
        let e = expected(&c, 75, 1);
        assert_eq!(e.time_us, c.time_us);
        assert!(
            e.basis.starts_with("NCCL's time: no published result"),
            "{}",
            e.basis
        );
    }
}
