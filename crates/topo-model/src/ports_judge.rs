//! What a host's network ports add up to (issue 24: one home for every judgement; these were
//! show's own rules): no port at all, ports the source lists by PCI class only, and the
//! compute bandwidth per GPU. Whether a host without a port in the source has none is known
//! only where the source scans the whole host.

use crate::message::{Code, Finding, Severity};
use crate::nic_judge::Names;
use crate::{NetRole, Topology};
use petgraph::graph::NodeIndex;

fn verdict(code: Code, summary: String) -> Finding {
    Finding::at(code, Severity::Info, summary)
}

/// A host with GPUs and no network port in the source. Only a scan of the host (live,
/// snapshot) or a profile says there is none; a matrix lists only the RDMA NICs nvidia-smi
/// sees, and an XML or a log may be cut, so there the network is unknown, not absent.
pub fn absent(topo: &Topology) -> Finding {
    let kind = topo.source.kind;
    if kind.lists_every_device() {
        return verdict(
            Code::NetworkNone,
            "No network ports found: this host can only run single-node jobs".to_string(),
        );
    }
    verdict(
        Code::NetworkUnknown,
        format!(
            "No network port in this {kind} source: whether the host has one is unknown here (nvidia-smi lists only the RDMA NICs it sees; an XML or a log may leave them out)"
        ),
    )
}

/// NICs the source lists by PCI class only (a skeleton XML): their ports are unknown.
pub fn pci_only(nics: usize) -> Option<Finding> {
    (nics > 0).then(|| {
        verdict(
            Code::NicPciOnly,
            format!(
                "{nics} NIC{} listed by PCI class only: port names, speeds and GPUDirect RDMA support are unknown",
                if nics == 1 { "" } else { "s" }
            ),
        )
    })
}

/// Gb/s per GPU over the compute ports of `nets` (`role` tells them apart) for `gpus` GPUs;
/// storage and front-end ports (a DGX's storage CX-7s, a 100 GbE uplink, docker0) are named
/// and left out. Nothing without GPUs or without a known compute speed.
pub fn compute_total(
    topo: &Topology,
    gpus: usize,
    nets: &[NodeIndex],
    role: impl Fn(NodeIndex) -> NetRole,
    names: &impl Names,
) -> Option<Finding> {
    let speed = |n: NodeIndex| topo.net(n).and_then(|x| x.speed_mbps);
    let compute: Vec<NodeIndex> = nets
        .iter()
        .copied()
        .filter(|&n| role(n) == NetRole::Compute)
        .collect();
    let total: u64 = compute.iter().filter_map(|&n| speed(n)).sum();
    if total == 0 || gpus == 0 {
        return None;
    }
    let unknown = compute.iter().filter(|&&n| speed(n).is_none()).count();
    let mut line = format!(
        "{} compute network port{} with {} Gb/s in total: {} Gb/s per GPU",
        compute.len(),
        if compute.len() == 1 { "" } else { "s" },
        gbps(total),
        per_gpu(total as f64 / 1000.0 / gpus as f64)
    );
    if unknown > 0 {
        line.push_str(&format!(
            " (at least: the speed of {unknown} of them is unknown)"
        ));
    }
    let mut left = vec![];
    for r in [NetRole::Storage, NetRole::FrontEnd] {
        let v: Vec<String> = nets
            .iter()
            .filter(|&&n| role(n) == r)
            .map(|&n| names.label(n))
            .collect();
        if !v.is_empty() {
            left.push(format!("{} {} ({})", v.len(), r.name(), v.join(", ")));
        }
    }
    if !left.is_empty() {
        line.push_str(&format!("; not counted: {}", left.join(", ")));
    }
    Some(verdict(Code::NetworkTotal, line))
}

/// `400`, `0.1`: a port speed in Mb/s as Gb/s, with decimals only when needed.
pub fn gbps(mbps: u64) -> String {
    if mbps.is_multiple_of(1000) {
        (mbps / 1000).to_string()
    } else {
        format!("{}", mbps as f64 / 1000.0)
    }
}

/// `400`, `66.7`: Gb/s per GPU with one decimal only when needed.
fn per_gpu(gbps: f64) -> String {
    if (gbps - gbps.round()).abs() < 1e-9 {
        format!("{gbps:.0}")
    } else {
        format!("{gbps:.1}")
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::nic_judge::PlainNames;
    use crate::testing::hgx;

    #[test]
    fn compute_ports_are_counted_per_gpu_and_the_others_named() {
        let t = hgx(8, 90);
        let nets = t.nets();
        let storage = nets[7];
        let role = |n| {
            if n == storage {
                NetRole::Storage
            } else {
                NetRole::Compute
            }
        };
        let v = compute_total(&t, 8, &nets, role, &PlainNames(&t)).unwrap();
        let speed = t.net(nets[0]).and_then(|x| x.speed_mbps).unwrap();
        assert!(
            v.text.starts_with(&format!(
                "7 compute network ports with {} Gb/s in total",
                gbps(7 * speed)
            )),
            "{}",
            v.text
        );
        assert!(v.text.contains("not counted: 1 storage ("), "{}", v.text);
        assert!(compute_total(&t, 0, &nets, role, &PlainNames(&t)).is_none());
    }

    #[test]
    fn no_port_is_absent_only_where_the_whole_host_was_read() {
        let mut t = hgx(1, 90);
        t.source.kind = crate::SourceKind::Profile;
        assert_eq!(absent(&t).code, Code::NetworkNone);
        t.source.kind = crate::SourceKind::Xml;
        assert_eq!(absent(&t).code, Code::NetworkUnknown);
        assert_eq!(pci_only(0), None);
        assert!(pci_only(2).unwrap().text.starts_with("2 NICs listed"));
        assert_eq!((gbps(400_000), gbps(100)), ("400".into(), "0.1".into()));
    }
}
