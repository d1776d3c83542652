//! NCCL_* variables NCCL does not read: misspellings (`NCCL_P2P_DISABLED`) that silently do
//! nothing, found against the variables NCCL 2.18–2.30 read.

use super::{Finding, Input, Report, Severity};
use crate::ReportExt;
use topo_model::message::Code;

/// Variables NCCL (and the PyTorch wrappers people set beside them) read.
const KNOWN: &[&str] = &[
    "NCCL_ALGO",
    "NCCL_ASYNC_ERROR_HANDLING",
    "NCCL_BLOCKING_WAIT",
    "NCCL_BUFFSIZE",
    "NCCL_CGA_CLUSTER_SIZE",
    "NCCL_CHECK_POINTERS",
    "NCCL_CHUNK_SIZE",
    "NCCL_COLLNET_ENABLE",
    "NCCL_COLLNET_NODE_THRESHOLD",
    "NCCL_COMM_BLOCKING",
    "NCCL_COMM_ID",
    "NCCL_COMM_SPLIT_SHARE_RESOURCES",
    "NCCL_CONF_FILE",
    "NCCL_CROSS_NIC",
    "NCCL_CTA_POLICY",
    "NCCL_CUMEM_ENABLE",
    "NCCL_CUMEM_HOST_ENABLE",
    "NCCL_DEBUG",
    "NCCL_DEBUG_FILE",
    "NCCL_DEBUG_SUBSYS",
    "NCCL_DEBUG_TIMESTAMP_FORMAT",
    "NCCL_DEBUG_TIMESTAMP_LEVELS",
    "NCCL_DMABUF_ENABLE",
    "NCCL_GDRCOPY_ENABLE",
    "NCCL_GDR_FLUSH_DISABLE",
    "NCCL_GRAPH_DUMP_FILE",
    "NCCL_GRAPH_DUMP_FILE_RANK",
    "NCCL_GRAPH_FILE",
    "NCCL_GRAPH_MIXING_SUPPORT",
    "NCCL_GRAPH_REGISTER",
    "NCCL_HOSTID",
    "NCCL_IB_ADAPTIVE_ROUTING",
    "NCCL_IB_ADDR_FAMILY",
    "NCCL_IB_ADDR_RANGE",
    "NCCL_IB_AR_THRESHOLD",
    "NCCL_IB_CUDA_SUPPORT",
    "NCCL_IB_DATA_DIRECT",
    "NCCL_IB_DISABLE",
    "NCCL_IB_ECE_ENABLE",
    "NCCL_IB_FIFO_TC",
    "NCCL_IB_GID_INDEX",
    "NCCL_IB_HCA",
    "NCCL_IB_MERGE_NICS",
    "NCCL_IB_MERGE_VFS",
    "NCCL_IB_PCI_RELAXED_ORDERING",
    "NCCL_IB_PKEY",
    "NCCL_IB_QPS_PER_CONNECTION",
    "NCCL_IB_RETRY_CNT",
    "NCCL_IB_ROCE_VERSION_NUM",
    "NCCL_IB_SL",
    "NCCL_IB_SPLIT_DATA_ON_QPS",
    "NCCL_IB_TC",
    "NCCL_IB_TIMEOUT",
    "NCCL_IB_USE_INLINE",
    "NCCL_IGNORE_CPU_AFFINITY",
    "NCCL_IGNORE_DISABLED_P2P",
    "NCCL_IGNORE_NET_MISMATCH",
    "NCCL_LAUNCH_MODE",
    "NCCL_LEGACY_CUDA_REGISTER",
    "NCCL_LL128_BUFFSIZE",
    "NCCL_LL128_C2C",
    "NCCL_LL128_NTHREADS",
    "NCCL_LL_BUFFSIZE",
    "NCCL_LOCAL_REGISTER",
    "NCCL_MAX_CTAS",
    "NCCL_MAX_DIRECT_ARITY",
    "NCCL_MAX_NCHANNELS",
    "NCCL_MAX_NRINGS",
    "NCCL_MAX_NTHREADS",
    "NCCL_MAX_NVLS_ARITY",
    "NCCL_MAX_P2P_NCHANNELS",
    "NCCL_MAX_WORK_ELEMENTS",
    "NCCL_MIN_CTAS",
    "NCCL_MIN_NCHANNELS",
    "NCCL_MIN_NRINGS",
    "NCCL_MIN_P2P_NCHANNELS",
    "NCCL_MNNVL_CLIQUE_ID",
    "NCCL_MNNVL_CROSS_CLIQUE",
    "NCCL_MNNVL_ENABLE",
    "NCCL_MNNVL_RAIL_PER_HOST",
    "NCCL_MNNVL_SCATTER_NETS_ENABLE",
    "NCCL_MNNVL_UUID",
    "NCCL_NCHANNELS_PER_NET_PEER",
    "NCCL_NET",
    "NCCL_NETDEVS_POLICY",
    "NCCL_NET_DISABLE_INTRA",
    "NCCL_NET_FORCE_FLUSH",
    "NCCL_NET_FORCE_MERGE",
    "NCCL_NET_GDR_C2C",
    "NCCL_NET_GDR_LEVEL",
    "NCCL_NET_GDR_MLOPART",
    "NCCL_NET_GDR_READ",
    "NCCL_NET_MERGE_LEVEL",
    "NCCL_NET_MERGE_POLICY",
    "NCCL_NET_OVERHEAD",
    "NCCL_NET_PLUGIN",
    "NCCL_NET_SHARED_BUFFERS",
    "NCCL_NET_SHARED_COMMS",
    "NCCL_NSOCKS_PERTHREAD",
    "NCCL_NTHREADS",
    "NCCL_NVB_DISABLE",
    "NCCL_NVB_PRECONNECT",
    "NCCL_NVLSTREE_MAX_CHUNKSIZE",
    "NCCL_NVLS_CHUNKSIZE",
    "NCCL_NVLS_ENABLE",
    "NCCL_NVLS_NCHANNELS",
    "NCCL_P2P_DIRECT_DISABLE",
    "NCCL_P2P_DISABLE",
    "NCCL_P2P_LEVEL",
    "NCCL_P2P_LL_THRESHOLD",
    "NCCL_P2P_MAX_PEERS",
    "NCCL_P2P_NET_CHUNKSIZE",
    "NCCL_P2P_NVL_CHUNKSIZE",
    "NCCL_P2P_PCI_CHUNKSIZE",
    "NCCL_P2P_PER_CHANNEL_NET_BW",
    "NCCL_P2P_PXN_LEVEL",
    "NCCL_P2P_READ_ENABLE",
    "NCCL_P2P_SCHEDULE_GROUP_SIZE",
    "NCCL_P2P_USE_CUDA_MEMCPY",
    "NCCL_PAT_ENABLE",
    "NCCL_PROFILER_PLUGIN",
    "NCCL_PROTO",
    "NCCL_PXN_C2C",
    "NCCL_PXN_DISABLE",
    "NCCL_RAS_ENABLE",
    "NCCL_RUNTIME_CONNECT",
    "NCCL_SET_THREAD_NAME",
    "NCCL_SHM_DISABLE",
    "NCCL_SHM_LOCALITY",
    "NCCL_SHM_MEMCPY_MODE",
    "NCCL_SHM_USE_CUDA_MEMCPY",
    "NCCL_SOCKET_FAMILY",
    "NCCL_SOCKET_IFNAME",
    "NCCL_SOCKET_NTHREADS",
    "NCCL_STEPS",
    "NCCL_THREAD_THRESHOLDS",
    "NCCL_TOPO_DUMP_FILE",
    "NCCL_TOPO_DUMP_FILE_RANK",
    "NCCL_TOPO_FILE",
    "NCCL_TUNER_PLUGIN",
    "NCCL_WIN_ENABLE",
    "NCCL_WORK_ARGS_BYTES",
    "NCCL_WORK_FIFO_BYTES",
    "NCCL_WORK_FIFO_DEPTH",
];

/// Levenshtein distance, capped: names differ by a letter or two when misspelled.
fn distance(a: &str, b: &str) -> usize {
    let (a, b): (Vec<char>, Vec<char>) = (a.chars().collect(), b.chars().collect());
    let mut prev: Vec<usize> = (0..=b.len()).collect();
    for (i, ca) in a.iter().enumerate() {
        let mut cur = vec![i + 1; b.len() + 1];
        for (j, cb) in b.iter().enumerate() {
            cur[j + 1] = (prev[j] + usize::from(ca != cb))
                .min(prev[j + 1] + 1)
                .min(cur[j] + 1);
        }
        prev = cur;
    }
    prev[b.len()]
}

fn closest(name: &str) -> Option<&'static str> {
    KNOWN
        .iter()
        .map(|k| (distance(name, k), *k))
        .filter(|(d, _)| *d <= 2)
        .min()
        .map(|x| x.1)
}

/// Every NCCL_* name the inputs mention, with where it was seen.
fn names(input: &Input) -> Vec<(String, String)> {
    let mut out: Vec<(String, String)> = vec![];
    let mut push = |k: &str, at: String| {
        if k.starts_with("NCCL_") && !out.iter().any(|(n, _)| n == k) {
            out.push((k.to_string(), at));
        }
    };
    for k in input.env.keys() {
        push(k, "the environment".into());
    }
    if let Some(f) = input.facts {
        for k in f.env.keys() {
            push(k, f.env_source.clone());
        }
    }
    for l in &input.logs {
        for (k, (_, e)) in &l.log.launch_env {
            push(k, format!("{}:{}", l.name, e.line));
        }
        for (k, (_, e)) in &l.log.env {
            push(k, format!("{}:{}", l.name, e.line));
        }
    }
    out
}

/// Variables of NCCL's net plugins that people set beside NCCL's own: the HPC-X RDMA/SHARP
/// plugin's IBext switch (NVIDIA/nccl#1053 logs it `set by environment`). NCCL does not read
/// them; its plugin does.
const PLUGIN: &[&str] = &["NCCL_IBEXT_DISABLE"];

/// Every `(KEY, VALUE)` of the inputs' environments, NCCL's and its plugins' (`FI_*`).
fn pairs(input: &Input) -> Vec<(String, String)> {
    let mut out: Vec<(String, String)> = input
        .env
        .iter()
        .map(|(k, v)| (k.clone(), v.clone()))
        .collect();
    if let Some(f) = input.facts {
        out.extend(f.env.iter().map(|(k, v)| (k.clone(), v.clone())));
    }
    for l in &input.logs {
        let log = &l.log;
        for (k, (v, _)) in &log.launch_env {
            out.extend(v.as_ref().map(|v| (k.clone(), v.clone())));
        }
        for (k, (v, _)) in &log.env {
            out.push((k.clone(), v.clone()));
        }
    }
    out
}

/// An `NCCL_NET` no fabric models: its plugin's speed and latency are unknown, so the run
/// must not be priced as InfiniBand (issue 43: `NCCL_NET="AWS Libfabric"` was taken silently).
fn net_not_modelled(input: &Input, r: &mut Report) {
    let env = pairs(input);
    let read = topo_vocab::fabric::from_env(env.iter().map(|(k, v)| (k.as_str(), v.as_str())));
    if let Some(net) = read.unknown_net {
        let known: Vec<&str> = topo_vocab::Fabric::ALL.iter().map(|f| f.name()).collect();
        r.add(
            Finding::new(
                Code::NetNotModelled,
                format!("NCCL_NET={net} names a network topo does not model: its speed and latency are unknown, and the plan does not price it as InfiniBand"),
            )
            .evidence([format!("NCCL_NET={net}")])
            .fix(format!("state the fabric it is with --fabric ({}), and its NICs with --nics and --nic-speed", known.join(", "))),
        );
    }
}

pub fn run(input: &Input, r: &mut Report) {
    net_not_modelled(input, r);
    let all = names(input);
    // A name a log shows as `set by environment` was read, by NCCL or its plugin.
    let read_in_log = |k: &str| input.logs.iter().any(|l| l.log.env.contains_key(k));
    if all.is_empty() {
        return;
    }
    r.checked(format!("{} NCCL_* variable name(s)", all.len()));
    let mut typo = vec![];
    let mut unknown = vec![];
    for (k, at) in all {
        if KNOWN.contains(&k.as_str())
            || PLUGIN.contains(&k.as_str())
            || read_in_log(&k)
            || topo_nccl::whatif::CONTAINER_LABELS.contains(&k.as_str())
        {
            continue;
        }
        match closest(&k) {
            Some(c) => typo.push(format!(
                "{k} ({at}): not an NCCL variable; did you mean {c}?"
            )),
            None => unknown.push(format!("{k} ({at}): not a variable NCCL 2.18–2.30 reads")),
        }
    }
    let sev = if typo.is_empty() {
        Severity::Info
    } else {
        Severity::Warning
    };
    if typo.is_empty() && unknown.is_empty() {
        return;
    }
    r.add(
        Finding::at(
            Code::UnknownNcclVariable,
            sev,
            "NCCL_* variables that NCCL does not read are set: they change nothing (a misspelling silently keeps the default)",
        )
        .evidence(typo.into_iter().chain(unknown))
        .fix("correct the spelling or remove the variable (`NCCL_DEBUG=INFO` logs each variable NCCL did read as `set by environment`)"),
    );
}

#[cfg(test)]
mod fabric_tests {
    use super::*;
    use std::collections::BTreeMap;

    #[test]
    fn an_unknown_ncc_net_is_said_and_a_known_one_is_not() {
        let judge = |net: &str| {
            let env: BTreeMap<String, String> = [("NCCL_NET".to_string(), net.to_string())].into();
            let input = Input {
                env,
                ..Default::default()
            };
            let r = crate::diagnose(&input);
            r.findings
                .iter()
                .map(|f| f.code)
                .filter(|&c| c == Code::NetNotModelled)
                .collect::<Vec<_>>()
        };
        assert_eq!(judge("MyVendorNet"), vec![Code::NetNotModelled]);
        assert!(judge("\"AWS Libfabric\"").is_empty());
        assert!(judge("IB").is_empty());
    }
}

#[cfg(test)]
mod tests {
    #[test]
    fn close_names_are_suggested() {
        assert_eq!(
            super::closest("NCCL_P2P_DISABLED"),
            Some("NCCL_P2P_DISABLE")
        );
        assert_eq!(super::closest("NCCL_IB_HCAS"), Some("NCCL_IB_HCA"));
        assert_eq!(super::closest("NCCL_SOMETHING_ELSE"), None);
    }
}
