//! Dissimilar hosts (issue 28): what each host decides on its own, and which of those
//! decisions NCCL reconciles across ranks and which it does not. Every rule names the NCCL
//! source that makes it; where NCCL's code does not say what happens, the text says unknown.

use super::env::EnvPolicy;
use super::search::Graphs;
use super::system::System;
use super::tuning::{CostTable, OpContext};
use super::types::Collective;
use super::version::NcclVersion;
use topo_model::message::{Finding, Severity};
use topo_model::{CpuArch, CpuVendor, HostId};
use topo_vocab::{Code, size_label};

/// One host's own view as its ranks compute it before AllGather3.
#[derive(Clone, Debug)]
pub struct HostView {
    pub host: HostId,
    pub name: String,
    pub gpus: usize,
    /// The compute capabilities of its GPUs, distinct, ascending.
    pub sm: Vec<u32>,
    pub cpu: Option<(CpuArch, CpuVendor)>,
    /// Its network ports and their bandwidths (GB/s), in NCCL's order.
    pub nets: Vec<f64>,
    /// NVLS support as `ncclNvlsInit` finds it on this host.
    pub nvls: bool,
    /// Its own search: ring channels and the tree pattern.
    pub ring_channels: usize,
    pub tree_pattern: u32,
}

/// The hosts' own views, where the hosts are dissimilar (`own` holds the searches of the hosts
/// that differ from host 0; the others searched as host 0 did). Empty for alike hosts.
pub fn views(
    a_topo: &topo_model::Topology,
    system: &System,
    host0: &Graphs,
    own: &[(HostId, Graphs)],
    nvls: &[(HostId, bool)],
) -> Vec<HostView> {
    if own.is_empty() {
        return vec![];
    }
    // Looked up once each: a search per host and a scan of every NIC per host grew with the
    // square of the hosts (issue 45).
    let own_of: std::collections::HashMap<HostId, &Graphs> =
        own.iter().rev().map(|(h, g)| (*h, g)).collect();
    let mut nets_of: std::collections::HashMap<HostId, Vec<f64>> = Default::default();
    for &n in &system.nets {
        if let Some(x) = system.nodes[n].net.as_ref() {
            nets_of.entry(system.nodes[n].host).or_default().push(x.bw);
        }
    }
    nvls.iter()
        .map(|&(h, nvls)| {
            let g = own_of.get(&h).copied().unwrap_or(host0);
            let ranks = system.host_gpus(h);
            let mut sm: Vec<u32> = ranks
                .iter()
                .filter_map(|&r| system.gpu(r).gpu.as_ref().map(|x| x.sm))
                .collect();
            sm.sort_unstable();
            sm.dedup();
            let nets = nets_of.get(&h).cloned().unwrap_or_default();
            HostView {
                host: h,
                name: host_name(a_topo, h),
                gpus: ranks.len(),
                sm,
                cpu: system.host_cpu(h).map(|c| (c.arch, c.vendor)),
                nets,
                nvls,
                ring_channels: g.ring.n_channels,
                tree_pattern: g.tree.pattern.number(),
            }
        })
        .collect()
}

/// A host's name as the findings give it: the source's, or `host N`.
pub fn host_name(topo: &topo_model::Topology, h: HostId) -> String {
    topo.hosts
        .get(h as usize)
        .and_then(|x| x.name.clone())
        .unwrap_or_else(|| format!("host {h}"))
}

/// What the findings read of the reconciled analysis.
pub struct Reconciled<'a> {
    pub hosts: &'a [HostView],
    pub version: NcclVersion,
    pub minor: u32,
    pub nranks: usize,
    pub nnodes: usize,
    /// Channels of the reconciled search (`ChannelCounts::search`) and NVLS channels.
    pub search_channels: usize,
    pub nvls_channels: usize,
    /// `NCCL_IGNORE_NET_MISMATCH` as set.
    pub ignore_net_mismatch: Option<&'a str>,
    /// Each distinct NCCL node's own p2p channels per peer, by name, where NCCL keeps them
    /// per rank (before 2.29; `Analysis::node_p2p`): the parts of a split host too.
    pub node_p2p: &'a [(HostId, usize)],
    /// A node's name in the findings.
    pub node_name: &'a dyn Fn(HostId) -> String,
}

/// The plan's messages about dissimilar hosts: one per kind of difference.
pub fn findings(a: &Reconciled) -> Vec<Finding> {
    let mut out = vec![];
    p2p_finding(a, &mut out);
    let v = a.hosts;
    if v.len() < 2 {
        return out;
    }
    nvls_finding(a, &mut out);
    cpu_finding(a, &mut out);
    nic_finding(a, &mut out);
    gpu_count_finding(a, &mut out);
    sm_finding(a, &mut out);
    out
}

/// Names of the hosts for which `f` holds, comma-separated.
fn names(v: &[HostView], f: impl Fn(&HostView) -> bool) -> String {
    v.iter()
        .filter(|h| f(h))
        .map(|h| h.name.as_str())
        .collect::<Vec<_>>()
        .join(", ")
}

/// Names comma-separated, the first six of many and how many more.
fn at_most_six(names: impl Iterator<Item = String>) -> String {
    let all: Vec<String> = names.collect();
    match all.len() {
        0..=6 => all.join(", "),
        n => format!("{} and {} more", all[..6].join(", "), n - 6),
    }
}

/// Hosts grouped by a decision: `value (host, host)`, in the order first met.
/// Each host's decision is made once (at 16,384 hosts, making it again per group was most
/// of the findings' time).
fn grouped<T: PartialEq + std::fmt::Display>(
    v: &[HostView],
    f: impl Fn(&HostView) -> T,
) -> Vec<String> {
    let all: Vec<T> = v.iter().map(f).collect();
    // Per group, its first host; per host, its group.
    let mut firsts: Vec<usize> = vec![];
    let mut group: Vec<usize> = Vec::with_capacity(all.len());
    for (i, k) in all.iter().enumerate() {
        match firsts.iter().position(|&j| all[j] == *k) {
            Some(g) => group.push(g),
            None => {
                group.push(firsts.len());
                firsts.push(i);
            }
        }
    }
    firsts
        .iter()
        .enumerate()
        .map(|(g, &first)| {
            let names: Vec<&str> = v
                .iter()
                .zip(&group)
                .filter(|&(_, &of)| of == g)
                .map(|(h, _)| h.name.as_str())
                .collect();
            format!("{} ({})", all[first], names.join(", "))
        })
        .collect()
}

fn differ<T: PartialEq>(v: &[HostView], f: impl Fn(&HostView) -> T) -> bool {
    let first = f(&v[0]);
    v.iter().any(|h| f(h) != first)
}

/// NVLS: a host without support searches no NVLS graph; AllGather3 takes the smallest
/// channel count, 0, and every rank turns NVLS off (`if (graphs[NCCL_ALGO_NVLS]->nChannels
/// == 0) comm->nvlsSupport = 0`, src/init.cc at every release from v2.18.1-1 to v2.30.7-1).
fn nvls_finding(a: &Reconciled, out: &mut Vec<Finding>) {
    let v = a.hosts;
    if !differ(v, |h| h.nvls) {
        return;
    }
    out.push(Finding::new(Code::HostsNvlsDiffer, format!(
            "NVLS support differs between hosts: NVLS on {}, none on {}; the hosts without it search no NVLS graph, AllGather3 keeps the smallest NVLS channel count (0) and every rank turns NVLS off (src/init.cc at NCCL {}: graphs[NCCL_ALGO_NVLS]->nChannels == 0 -> nvlsSupport = 0): NVLS and NVLS_TREE are unused on every host, a fallback NCCL reconciles (no hang)",
            names(v, |h| h.nvls),
            names(v, |h| !h.nvls),
            a.version
        ),
    ));
}

fn cpu_text(c: Option<(CpuArch, CpuVendor)>) -> String {
    match c {
        Some((arch, vendor)) => format!("{arch:?}/{vendor:?}").to_lowercase(),
        None => "unknown".into(),
    }
}

/// CPU architecture and vendor: from 2.22 AllGather3 marks them MIXED for every rank
/// (src/init.cc); the llMaxBw row follows MIXED only from 2.24 (src/graph/tuning.cc); before
/// 2.22 each rank tunes with its own CPU, so ranks can pick different algorithms or protocols
/// for one call and hang (NVIDIA/nccl#1136).
fn cpu_finding(a: &Reconciled, out: &mut Vec<Finding>) {
    let v = a.hosts;
    if !differ(v, |h| h.cpu) {
        return;
    }
    let minor = a.minor;
    let hosts = grouped(v, |h| cpu_text(h.cpu)).join(", ");
    let vendors_differ = differ(v, |h| h.cpu.map(|c| c.1));
    let (severity, text) = if minor < 22 {
        (
            Severity::Warning,
            format!(
                "not reconciled at NCCL {}: each rank tunes with its own host's first CPU (ncclTopoCpuType in src/graph/tuning.cc: the network overhead, 1 us on x86 Intel and 2 us on x86 AMD, and the llMaxBw row), so hosts can choose different algorithms or protocols for the same call, which hangs (NVIDIA/nccl#1136); this plan is rank 0's choice; NCCL 2.22 and later mark the CPUs MIXED for every rank",
                a.version
            ),
        )
    } else if minor < 24 && vendors_differ {
        (
            Severity::Warning,
            format!(
                "partly reconciled at NCCL {}: AllGather3 marks the vendor MIXED for every rank (src/init.cc), so the network overhead is the default 1 us everywhere, but the llMaxBw row still reads each rank's own CPU vendor (ncclTopoCpuType in src/graph/tuning.cc): AMD hosts and others can cap LL differently and choose different protocols for one call (the NVIDIA/nccl#1136 hang); NCCL 2.24 and later read MIXED there too",
                a.version
            ),
        )
    } else {
        (
            Severity::Info,
            format!(
                "reconciled at NCCL {}: AllGather3 marks the CPUs MIXED for every rank (src/init.cc), so every rank tunes alike: the default network overhead (1 us){}",
                a.version,
                if vendors_differ {
                    " and the AMD llMaxBw row (src/graph/tuning.cc)"
                } else {
                    ""
                }
            ),
        )
    };
    out.push(Finding::at(
        Code::HostsCpuDiffer,
        severity,
        format!("the hosts' CPUs differ: {hosts}; {text}"),
    ));
}

fn nets_text(h: &HostView) -> String {
    let mut sorted = h.nets.clone();
    sorted.sort_by(|a, b| b.total_cmp(a));
    let mut bws: Vec<String> = sorted.iter().map(|b| format!("{b:.1}")).collect();
    bws.dedup();
    format!("{} NIC port(s) at {} GB/s", h.nets.len(), bws.join("/"))
}

/// What NCCL_IGNORE_NET_MISMATCH does here: from 2.30 rank 0 compares the ranks' NET device
/// counts and stops at init on a difference only when it is 0 (v2.30.7-1 src/init.cc);
/// earlier releases do not read it.
pub fn note_net_mismatch(env: &mut EnvPolicy, hosts: &[HostView], version: &NcclVersion) {
    const VAR: &str = "NCCL_IGNORE_NET_MISMATCH";
    if !env.is_set(VAR) {
        return;
    }
    let text = if version.minor < 30 {
        format!(
            "ignored: NCCL {version} does not read it (2.30 and later compare the hosts' NET device counts)"
        )
    } else if hosts.len() < 2 || !differ(hosts, |h| h.nets.len()) {
        "changes nothing here: every host has the same number of NET devices".to_string()
    } else if env.value(VAR) == Some("0") {
        "NCCL stops at init: the hosts have different NET device counts".to_string()
    } else {
        "NCCL goes on although the hosts have different NET device counts (\"Detected mixed local Net device counts across ranks\")".to_string()
    };
    env.note_effect(VAR, text);
}

/// NIC counts and speeds: AllGather3 keeps the smallest ring and tree channel count and
/// bandwidth (src/init.cc); 2.30 also compares the NET device counts at rank 0 and goes on by
/// default (NCCL_IGNORE_NET_MISMATCH=1) or stops (=0). Where a channel's NIC on one host
/// meets a different rail on the other, whether the fabric connects them is not in NCCL's code.
fn nic_finding(a: &Reconciled, out: &mut Vec<Finding>) {
    let v = a.hosts;
    // The port speeds compared before their text, which is made only where they differ.
    let same_nets = v.iter().all(|h| h.nets == v[0].nets);
    if !differ(v, |h| h.nets.len()) && (same_nets || !differ(v, nets_text)) {
        return;
    }
    let alone = grouped(v, |h| h.ring_channels).join(", ");
    let count_differs = differ(v, |h| h.nets.len());
    let v30 = if a.minor >= 30 && count_differs {
        " NCCL 2.30 compares the counts at rank 0 (\"Detected mixed local Net device counts across ranks\", src/init.cc) and goes on under the default NCCL_IGNORE_NET_MISMATCH=1; a host whose listed device cannot be opened then leaves the other host's channels on it without a peer, a silent hang (NVIDIA/nccl#2428)."
    } else {
        ""
    };
    out.push(Finding::new(Code::HostsNicsDiffer, format!(
            "the hosts' NICs differ: {}; alone each would search {alone} ring graph channel(s), and AllGather3 keeps the smallest channel count and inter-node bandwidth over all ranks (src/init.cc at NCCL {}): the job runs {} on every host. Each host picks its channels' NICs from its own search, so a channel can leave one host on a NIC of another rail than it arrives on; whether the network connects those rails is not in NCCL's code (unknown).{v30}",
            grouped(v, nets_text).join(", "),
            a.version,
            a.search_channels,
        ),
    ));
    if a.minor >= 30 && count_differs && a.ignore_net_mismatch == Some("0") {
        out.push(Finding::new(Code::NcclInitFails, format!(
                "NCCL {} stops at init here: the hosts have different NET device counts and NCCL_IGNORE_NET_MISMATCH=0 (\"Detected mixed local Net device counts across ranks\", src/init.cc)",
                a.version
            ),
        ));
    }
}

/// GPUs per node: nodes are found from the ranks (`ringRecv[0]` of each rank's own search) and
/// keep their own ring and tree orders (src/init.cc, src/graph/connect.cc); the tuning and the
/// tree depth read the average `nRanks / nNodes` (src/graph/tuning.cc, connect.cc).
fn gpu_count_finding(a: &Reconciled, out: &mut Vec<Finding>) {
    let v = a.hosts;
    if !differ(v, |h| h.gpus) {
        return;
    }
    out.push(Finding::new(Code::HostsGpusDiffer, format!(
            "the nodes have different GPU counts: {}; NCCL supports it: each node's rings and trees cover its own GPUs (ncclTopoPreset/ncclTopoPostset, src/graph/connect.cc) and localRanks is counted per node (src/init.cc), while the cost model and the tree depth use the average of {} ranks per node (nRanks/nNodes, src/graph/tuning.cc at NCCL {}), so predicted times assume equal nodes",
            grouped(v, |h| h.gpus).join(", "),
            a.nranks / a.nnodes.max(1),
            a.version
        ),
    ));
}

/// Compute capability: min and max over every rank (AllGather1, src/init.cc) choose the
/// tuning row and LL128; each node keeps its own tree pattern (`nodesTreePatterns`). NVLS
/// channels come from each rank's own compute capability (`ncclNvlsInit`,
/// src/transport/nvls.cc) and are not reconciled.
fn sm_finding(a: &Reconciled, out: &mut Vec<Finding>) {
    let v = a.hosts;
    if !differ(v, |h| h.sm.clone()) {
        return;
    }
    let sm = |h: &HostView| {
        h.sm.iter()
            .map(|s| format!("sm{s}"))
            .collect::<Vec<_>>()
            .join("+")
    };
    let patterns = if differ(v, |h| h.tree_pattern) {
        format!(
            "; the nodes search different tree patterns ({}) and each keeps its own (nodesTreePatterns, maxTreePattern)",
            grouped(v, |h| h.tree_pattern).join(", ")
        )
    } else {
        String::new()
    };
    out.push(Finding::new(Code::HostsSmDiffer, format!(
            "the hosts' GPUs differ: {}; NCCL tunes every rank with the smallest and largest compute capability over all ranks (minCompCap/maxCompCap, src/init.cc at NCCL {}){patterns}",
            grouped(v, sm).join(", "),
            a.version
        ),
    ));
    let nvls_everywhere = v.iter().all(|h| h.nvls) && a.nvls_channels > 0;
    let blackwell_mix = v.iter().any(|h| h.sm.iter().any(|&s| s >= 100))
        && v.iter().any(|h| h.sm.iter().any(|&s| s < 100));
    // SM100 has its own NVLS channel count from v2.25.1-1 (channels::nvls_default_channels).
    if nvls_everywhere && blackwell_mix && a.minor >= 25 {
        out.push(Finding::at(
            Code::HostsSmDiffer,
            Severity::Warning,
            format!(
                "NVLS channel counts are not reconciled: each rank sets nvlsChannels from its own GPU's compute capability (ncclNvlsInit, src/transport/nvls.cc at NCCL {}: NVLS_NCHANNELS_SM90 below sm100, the SM100 counts from it), so Hopper and Blackwell hosts run NVLS with different channel counts; what that does to a collective is not in NCCL's code (unknown)",
                a.version
            ),
        ));
    }
}

/// p2p channels per peer: before 2.29 each rank keeps the count its own node's GPUs and NICs
/// ask for (v2.28.9-1 src/graph/paths.cc `ncclTopoComputeP2pChannels`), and each end of a
/// send/recv maps its parts onto channels with its own count (src/enqueue.cc: the connections
/// it sets up, `ncclP2pChannelForPart` over `p2pnChannelsPerPeer`; paths.cc: the power of two
/// "is relied on when mapping p2p peers to channels"). 2.29 takes the minimum over every rank
/// in AllGather3 (v2.29.7-1 src/init.cc).
fn p2p_finding(a: &Reconciled, out: &mut Vec<Finding>) {
    let v = a.node_p2p;
    if v.iter().all(|x| x.1 == v[0].1) {
        return;
    }
    let mut distinct: Vec<usize> = vec![];
    for &(_, c) in v {
        if !distinct.contains(&c) {
            distinct.push(c);
        }
    }
    let counts: Vec<String> = distinct
        .iter()
        .map(|&c| {
            let nodes = v.iter().filter(|x| x.1 == c).map(|x| (a.node_name)(x.0));
            format!("{c} ({})", at_most_six(nodes))
        })
        .collect();
    let counts = counts.join(", ");
    out.push(Finding::new(Code::HostsP2pChannelsDiffer, format!(
            "the nodes keep different p2p channel counts per peer: {counts}; before NCCL 2.29 each rank keeps its own node's count (src/graph/paths.cc ncclTopoComputeP2pChannels at NCCL {}) and each end of a send/recv sets up and splits over channels by its own count (src/enqueue.cc), so the two ends of a send/recv between these nodes disagree on its channels; what that does (a hang is likely) is not in NCCL's code (unknown). NCCL 2.29 and later take the minimum over all ranks (src/init.cc AllGather3); NCCL_NCHANNELS_PER_NET_PEER=1 makes every node's count 1 where every node has peers on other nodes, at a cost in send/recv bandwidth",
            a.version
        ),
    ));
}

/// Per-size choices: every rank selects the algorithm and protocol of a call from its own
/// cost table (`ncclTopoTuneModel`, src/graph/tuning.cc; the selection in src/enqueue.cc),
/// and nothing reconciles the choices. Hosts whose ranks tune with other inputs than rank
/// 0's (`Analysis::host_costs`) are checked at every planned size: where they choose another
/// algorithm, protocol or channel count (the multi-host oracle's `inconsistent per-size
/// choices`), the ranks of one call launch different kernels.
pub fn choice_findings(
    rank0: &CostTable,
    others: &[OwnTable],
    version: NcclVersion,
    (funcs, sizes): (&[Collective], &[u64]),
) -> Vec<Finding> {
    let mut out = vec![];
    for OwnTable {
        names,
        costs,
        own_cpu,
    } in others
    {
        let diffs: Vec<String> = funcs
            .iter()
            .filter_map(|&f| choice_difference(rank0, costs, f, sizes))
            .collect();
        if diffs.is_empty() {
            continue;
        }
        out.push(Finding::new(Code::HostsChoicesDiffer, format!(
                "ranks of one call choose different algorithms, protocols or channel counts: {} tune with {} and choose otherwise than rank 0: {}; NCCL does not reconcile per-size choices (each rank tunes and selects on its own: src/graph/tuning.cc, src/enqueue.cc at NCCL {version}), so the ranks of one call launch different kernels: a hang or wrong results (NVIDIA/nccl#1136 is this failure with mixed CPU vendors); this plan shows rank 0's choices",
                names.join(", "),
                tuned_with(rank0, costs, *own_cpu),
                diffs.join("; "),
            ),
        ));
    }
    out
}

/// The cost table some hosts tune with, for [`choice_findings`].
pub struct OwnTable<'a> {
    /// The hosts that share it.
    pub names: Vec<String>,
    pub costs: &'a CostTable,
    /// Tuned with their own CPU (`analyze::HostCosts::own_cpu`).
    pub own_cpu: bool,
}

/// What `costs` was tuned with that rank 0's table was not.
fn tuned_with(rank0: &CostTable, costs: &CostTable, own_cpu: bool) -> String {
    let mut why = vec![];
    if costs.nvls_channels != rank0.nvls_channels {
        why.push(format!(
            "{} NVLS channels (rank 0: {}; each rank sets them from its own GPU, src/transport/nvls.cc)",
            costs.nvls_channels, rank0.nvls_channels
        ));
    }
    if own_cpu {
        why.push("their own CPU (ncclTopoCpuType, src/graph/tuning.cc)".into());
    }
    why.join(" and ")
}

/// `AllReduce at 3 of 24 sizes, 1M-4M (at 1M: rank 0 NVLS/Simple on 32 channels, here
/// NVLS/Simple on 16 channels)`, where `other` chooses another algorithm, protocol or channel
/// count than `mine` at some of `sizes`.
fn choice_difference(
    mine: &CostTable,
    other: &CostTable,
    f: Collective,
    sizes: &[u64],
) -> Option<String> {
    let op = OpContext::default();
    let differ: Vec<(u64, String, String)> = sizes
        .iter()
        .filter_map(|&b| {
            let (x, y) = (mine.select(f, b, &op).ok()?, other.select(f, b, &op).ok()?);
            let key = |c: &crate::tuning::Choice| (c.algo, c.proto, c.nchannels);
            (key(&x) != key(&y)).then(|| {
                let label = |c: &crate::tuning::Choice| {
                    format!(
                        "{}/{} on {} channels",
                        c.algo.name(),
                        c.proto.name(),
                        c.nchannels
                    )
                };
                (b, label(&x), label(&y))
            })
        })
        .collect();
    let (first, last) = (differ.first()?, differ.last()?);
    let span = match first.0 == last.0 {
        true => size_label(first.0),
        false => format!("{}-{}", size_label(first.0), size_label(last.0)),
    };
    Some(format!(
        "{} at {} of {} sizes, {span} (at {}: rank 0 {}, here {})",
        f.name(),
        differ.len(),
        sizes.len(),
        size_label(first.0),
        first.1,
        first.2
    ))
}

#[cfg(test)]
mod tests {
    use crate::analyze::analyze_on_big_stack;
    use topo_model::testing::hgx;
    use topo_model::{NodeKind, Topology};
    use topo_vocab::Code;

    fn codes(a: &crate::analyze::Analysis) -> Vec<Code> {
        crate::plan::host_findings(a)
            .iter()
            .map(|m| m.code)
            .collect()
    }

    #[test]
    fn alike_hosts_have_no_views() {
        let a = analyze_on_big_stack(&hgx(8, 90).replicate(2), &[], "2.28");
        assert!(a.hosts.is_empty());
        assert!(codes(&a).is_empty());
    }

    #[test]
    fn a_smaller_host_searches_on_its_own_and_agrees_on_the_minimum() {
        let t = Topology::join(&[hgx(8, 90), hgx(2, 90)]).unwrap();
        let a = analyze_on_big_stack(&t, &[], "2.28");
        assert_eq!((a.nranks, a.nnodes), (10, 2));
        assert_eq!(a.hosts.len(), 2);
        let alone = a.hosts.iter().map(|h| h.ring_channels).min().unwrap();
        assert_eq!(a.counts.search, alone);
        assert!(codes(&a).contains(&Code::HostsGpusDiffer));
        // Every rank is in every ring once.
        for c in 0..a.counts.coll {
            let mut r = a.connection.ring(c).expect("ring closes");
            r.sort_unstable();
            assert_eq!(r, (0..10).collect::<Vec<_>>());
        }
    }

    #[test]
    fn p2p_channels_per_peer_are_each_hosts_own_before_2_29() {
        let mut bare = hgx(8, 90);
        bare.graph
            .retain_edges(|g, e| g[e].kind != topo_model::LinkKind::NvLink);
        let t = Topology::join(&[hgx(8, 90), bare]).unwrap();
        // Four channels to a remote peer: an NVLink peer asks for more (2 per NVLink's
        // worth of bandwidth), a PCIe peer for 2 (ncclTopoGetNchannels).
        let four = [("NCCL_NCHANNELS_PER_NET_PEER", "4")];
        let a = analyze_on_big_stack(&t, &four, "2.28");
        assert_eq!(a.node_p2p, [(0, 4), (1, 2)]);
        // Rank 0 logs its own host's count.
        assert_eq!(a.counts.p2p_per_peer, 4);
        let m = crate::plan::host_findings(&a)
            .into_iter()
            .find(|m| m.code == Code::HostsP2pChannelsDiffer)
            .expect("a finding");
        assert!(m.text.contains("4 (node-0), 2 (node-1)"), "{}", m.text);
        // One count for every rank: 2.29's minimum, or one channel to every remote peer.
        for (v, env) in [
            ("2.29", four),
            ("2.28", [("NCCL_NCHANNELS_PER_NET_PEER", "1")]),
        ] {
            let a = analyze_on_big_stack(&t, &env, v);
            assert!(!codes(&a).contains(&Code::HostsP2pChannelsDiffer), "{v}");
        }
    }

    /// `hgx(8, 90)` on AMD CPUs.
    fn amd_hgx() -> Topology {
        let mut amd = hgx(8, 90);
        for n in amd.graph.node_indices().collect::<Vec<_>>() {
            if let NodeKind::Cpu(c) = &mut amd.node_mut(n).kind {
                c.vendor = Some("AuthenticAMD".into());
                c.family = Some(25);
            }
        }
        amd
    }

    /// The sizes every plan shows by default: 8 B to 16 GiB, doubling.
    fn sizes() -> Vec<u64> {
        (3..=34).map(|s| 1u64 << s).collect()
    }

    fn choices(a: &crate::analyze::Analysis) -> Vec<String> {
        let funcs = [
            crate::types::Collective::AllReduce,
            crate::types::Collective::AllGather,
        ];
        crate::plan::choice_findings(a, &funcs, &sizes())
            .into_iter()
            .map(|m| m.text)
            .collect()
    }

    /// Hopper and Blackwell hosts both run NVLS with their own GPU's channel count: the
    /// sizes NVLS serves are split over different channel counts (the multi-host oracle's
    /// `inconsistent per-size choices`).
    #[test]
    fn nvls_channels_of_each_gpu_split_the_same_call_differently() {
        let t = Topology::join(&[hgx(8, 100), hgx(8, 90)]).unwrap();
        let a = analyze_on_big_stack(&t, &[], "2.28");
        assert_eq!(a.host_costs.len(), 1);
        let text = choices(&a).join("\n");
        assert!(
            text.contains("node-1 tune with 16 NVLS channels (rank 0: 32"),
            "{text}"
        );
        assert!(text.contains("on 32 channels, here NVLS"), "{text}");
        assert!(
            !text.contains("their own CPU"),
            "the CPUs are alike: {text}"
        );
        // Alike GPUs tune alike: nothing to compare.
        let same = Topology::join(&[hgx(8, 100), hgx(2, 100)]).unwrap();
        assert!(
            analyze_on_big_stack(&same, &[], "2.28")
                .host_costs
                .is_empty()
        );
    }

    /// Before 2.22 every rank tunes with its own CPU: an AMD host's network overhead (2 us)
    /// moves the crossovers; from 2.24 every rank reads MIXED and tunes alike.
    #[test]
    fn own_cpus_move_the_crossovers_before_2_22() {
        let t = Topology::join(&[hgx(8, 90), amd_hgx()]).unwrap();
        let a = analyze_on_big_stack(&t, &[], "2.21");
        let text = choices(&a).join("\n");
        assert!(text.contains("node-1 tune with their own CPU"), "{text}");
        let a = analyze_on_big_stack(&t, &[], "2.28");
        assert!(a.host_costs.is_empty());
    }

    #[test]
    fn cpu_vendors_become_mixed_from_2_22() {
        let t = Topology::join(&[hgx(8, 90), amd_hgx()]).unwrap();
        for (v, severity) in [("2.21", "warning"), ("2.23", "warning"), ("2.28", "info")] {
            let a = analyze_on_big_stack(&t, &[], v);
            let m = crate::plan::host_findings(&a)
                .into_iter()
                .find(|m| m.code == Code::HostsCpuDiffer)
                .unwrap_or_else(|| panic!("{v}: no cpu finding"));
            assert_eq!(format!("{:?}", m.severity).to_lowercase(), severity, "{v}");
        }
    }
}
