//! The one judge shape: every fact topo states about a machine, a plan, a log or a result is a
//! [`Finding`] — a stable `code` a monitoring rule can match (every code, its severities and
//! meaning: docs/codes.md), a severity taken from the code's table, the sentence a person
//! reads, the evidence it rests on and the fix. Show, plan and diagnose raise and merge the
//! same type and differ only in which findings they select and how they print them
//! (`topo.show/v1` and `topo.plan/v3` carry `{code, severity, text}`, `topo.diagnose/v1`
//! `{id, severity, title, evidence, fix}`). The text may change between versions; the code
//! does not. The type itself is a document's (`topo_documents::finding`, re-exported here); the
//! order every view lists findings in is the model's, below.

pub use topo_documents::finding::{
    AsDiagnosed, Finding, deserialize_diagnosed, serialize_diagnosed,
};
pub use topo_vocab::{Code, Severity};

/// Where a finding stands in every view's list of problems (issue 44): by severity, then the
/// cause before its symptoms and the generic last. A cause is a fact that explains others: a
/// VM's tree (its NIC distances and PCIe figures follow), NVLink islands or missing lanes,
/// a driver refusing P2P (SHM follows), init that stops. Generic: what the source leaves
/// unknown (GPUDirect RDMA, port speed, NVLink), what the reader assumed, and the plan's
/// standing assumptions; last, what the source's reader assumed or repaired (`source-warning`),
/// which qualifies every other finding and which show lists after its verdicts. Show (among its
/// summary's problems), plan and `diagnose --from` order by [`key`]; diagnose with logs
/// refines it (`topo_diagnose`).
pub fn rank(code: Code, severity: Severity) -> (std::cmp::Reverse<Severity>, u8) {
    let tier = match code {
        Code::VirtualizedTopology
        | Code::TopologyFlattened
        | Code::NvlinkIslands
        | Code::NvlinkDegraded
        | Code::P2pRefusedByDriver
        | Code::P2pDenied
        | Code::FabricManagerNotReady
        | Code::NcclInitFails
        | Code::NetNone
        | Code::P2pDisabledByEnv
        | Code::HostsChoicesDiffer => 0,
        Code::SourceWarning => 3,
        Code::NetGdrUnknown
        | Code::NetSpeedUnknown
        | Code::NvlinkUnknown
        | Code::P2pAssumed
        | Code::NetSocketSpeed
        | Code::EnvUnknown
        | Code::PcieUpstreamSlower => 2,
        _ => 1,
    };
    (std::cmp::Reverse(severity), tier)
}

/// Where a finding stands in every view, a total order (issue 44): [`rank`] (severity, then
/// cause, symptom, generic, the reader's notes), then within a tier the code in docs/codes.md's
/// order, then the text. The order raised is not part of it: show, plan and diagnose raise the
/// same findings in different orders, and a tier kept in raised order listed two warnings one
/// way in show and the other way in plan.
pub fn key(f: &Finding) -> (std::cmp::Reverse<Severity>, u8, Code, &str) {
    let (severity, tier) = rank(f.code, f.severity);
    (severity, tier, f.code, f.text.as_str())
}

/// `findings` in [`key`] order.
pub fn order(findings: &mut [Finding]) {
    findings.sort_by(|a, b| key(a).cmp(&key(b)));
}

/// Code of a warning the source raised while reading its input (`Topology::warnings`): those
/// are free text about what the input could not say or had to repair, one code for all.
pub const SOURCE_WARNING: Code = Code::SourceWarning;

/// Findings gathered host by host (plan and diagnose judge every host): the same finding
/// (code and text) on several hosts is said once, with its evidence from each and ` (on N
/// hosts)`.
#[derive(Default)]
pub struct OnHosts(Vec<(Finding, usize)>);

impl OnHosts {
    /// `v`, found on `hosts` hosts (a replicated machine's copies count as many).
    pub fn add(&mut self, v: Finding, hosts: usize) {
        let same = self
            .0
            .iter_mut()
            .find(|(m, _)| m.code == v.code && m.text == v.text);
        match same {
            Some((m, count)) => {
                *count += hosts;
                m.evidence.extend(v.evidence);
            }
            None => self.0.push((v, hosts)),
        }
    }

    pub fn into_findings(self) -> Vec<Finding> {
        self.0
            .into_iter()
            .map(|(mut v, count)| {
                if count > 1 {
                    v.text.push_str(&format!(" (on {count} hosts)"));
                }
                v
            })
            .collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Raised in any order, the same findings come out in one order: by severity, tier,
    /// code, then text.
    #[test]
    fn the_order_is_total_whatever_the_order_raised() {
        let raised = vec![
            Finding::new(Code::NetGdrUnknown, "b"),
            Finding::new(Code::SourceWarning, "a"),
            Finding::new(Code::NicNoneNear, "z"),
            Finding::new(Code::NicMissing, "y"),
            Finding::new(Code::PcieUpstreamSlower, "c"),
            Finding::new(Code::NvlinkIslands, "x"),
            Finding::new(Code::NicNoneNear, "a"),
            Finding::new(Code::NcclInitFails, "e"),
        ];
        let want = [
            (Code::NcclInitFails, "e"),
            (Code::NvlinkIslands, "x"),
            (Code::NicNoneNear, "a"),
            (Code::NicNoneNear, "z"),
            (Code::NicMissing, "y"),
            (Code::PcieUpstreamSlower, "c"),
            (Code::NetGdrUnknown, "b"),
            (Code::SourceWarning, "a"),
        ];
        let mut one = raised.clone();
        order(&mut one);
        let mut other: Vec<Finding> = raised.into_iter().rev().collect();
        order(&mut other);
        assert_eq!(one, other);
        let got: Vec<(Code, &str)> = one.iter().map(|f| (f.code, f.text.as_str())).collect();
        assert_eq!(got, want);
    }
}
