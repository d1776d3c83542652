//! The environment policy: every NCCL_* variable (and CUDA_VISIBLE_DEVICES) that can change
//! what NCCL decides on a machine, parsed once for one NCCL version.
//!
//! The caller passes the process environment merged with `--env` overrides (overrides win,
//! i.e. later pairs replace earlier ones). Values NCCL would silently misread are errors here,
//! naming the variable and what it accepts. Each variable that was set is recorded with its
//! value; whoever uses it adds the decision it changed (`note_effect`), so a plan can list
//! `env[]` with `name`, `value`, `effect`.

use crate::error::{Error, ErrorKind, Result};
use crate::types::{Algorithm, Collective, PathType, Protocol};
use crate::version::{AlgoProtoGrammar, VersionData};
use serde::Serialize;

/// Functions with their own NCCL_ALGO / NCCL_PROTO entry, in NCCL's order.
const TUNED: [Collective; 5] = Collective::TUNED;

/// Per function, which algorithms and protocols the user allows (`algoEnable`/`protoEnable`).
/// Protocol values: 0 off, 1 on, 2 auto (LL128's default: decided by the topology).
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct EnableMatrix {
    pub algo: [[u8; 7]; 5],
    pub proto: [[u8; 3]; 5],
}

impl Default for EnableMatrix {
    fn default() -> Self {
        EnableMatrix {
            algo: [[1; 7]; 5],
            proto: [[1, 2, 1]; 5],
        }
    }
}

impl EnableMatrix {
    pub fn algo(&self, f: Collective, a: Algorithm) -> u8 {
        func_index(f).map(|i| self.algo[i][a as usize]).unwrap_or(1)
    }
    pub fn proto(&self, f: Collective, p: Protocol) -> u8 {
        func_index(f)
            .map(|i| self.proto[i][p as usize])
            .unwrap_or(1)
    }
}

fn func_index(f: Collective) -> Option<usize> {
    TUNED.iter().position(|x| *x == f)
}

/// One variable that was set, with what it changed.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct EnvEntry {
    pub name: String,
    pub value: String,
    /// What it changed in the plan, `; `-joined (from the differential run, `whatif`), or
    /// why it changed nothing; `None` only before the comparison ran.
    pub effect: Option<String>,
    /// `changed`, `unchanged`, `not_modelled` (NCCL reads it, topo does not) or `unknown`
    /// (NCCL does not read it).
    pub status: String,
    /// One line per difference from the plan without this variable.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub changes: Vec<String>,
    /// Where the value came from when not the process or `--env` (`profile host.env`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub origin: Option<String>,
}

#[derive(Clone, Debug, Default, PartialEq, Serialize)]
struct SetVar {
    name: String,
    value: String,
    effects: Vec<String>,
}

/// Parsed environment. `None` means "unset: the version's default applies".
#[derive(Clone, Debug, Default, PartialEq, Serialize)]
pub struct EnvPolicy {
    /// NCCL_P2P_DISABLE=1.
    pub p2p_disable: bool,
    /// NCCL_P2P_LEVEL (already resolved: `NCCL_P2P_DISABLE=1` wins and gives LOC).
    pub p2p_level: Option<PathType>,
    pub shm_disable: bool,
    pub cumem_enable: Option<i64>,
    pub net_gdr_level: Option<PathType>,
    pub net_gdr_read: Option<i64>,
    pub net_gdr_c2c: Option<bool>,
    pub ib_disable: bool,
    pub net: Option<String>,
    pub pxn_disable: bool,
    pub pxn_c2c: Option<bool>,
    pub p2p_pxn_level: Option<i64>,
    pub nvb_disable: bool,
    pub nvls_enable: Option<i64>,
    pub collnet_enable: Option<bool>,
    /// NCCL_ALGO / NCCL_PROTO applied to the default matrix.
    pub enable: EnableMatrix,
    pub algo: Option<String>,
    pub proto: Option<String>,
    /// Tokens an old NCCL (≤ 2.23) silently ignores in NCCL_ALGO / NCCL_PROTO.
    pub ignored_tokens: Vec<String>,
    /// NCCL_MIN_NCHANNELS (falls back to NCCL_MIN_NRINGS).
    pub min_nchannels: Option<i64>,
    pub max_nchannels: Option<i64>,
    pub min_ctas: Option<i64>,
    pub max_ctas: Option<i64>,
    pub nthreads: Option<i64>,
    pub ll128_nthreads: Option<i64>,
    /// Tree LL, LL128, Simple, Ring LL, LL128, Simple; -2 for values not given.
    pub thread_thresholds: Option<[i64; 6]>,
    pub cross_nic: Option<i64>,
    pub net_disable_intra: bool,
    pub p2p_read_enable: Option<bool>,
    pub p2p_direct_disable: bool,
    pub p2p_use_cuda_memcpy: bool,
    pub ignore_disabled_p2p: Option<i64>,
    pub nvls_nchannels: Option<i64>,
    pub pat_enable: Option<i64>,
    /// NCCL_NET_OVERHEAD in ns.
    pub net_overhead: Option<i64>,
    pub buffsize: Option<i64>,
    pub ll_buffsize: Option<i64>,
    pub ll128_buffsize: Option<i64>,
    pub nchannels_per_net_peer: Option<i64>,
    /// NCCL_MIN_P2P_NCHANNELS and NCCL_MAX_P2P_NCHANNELS: send/recv channels.
    pub min_p2p_nchannels: Option<i64>,
    pub max_p2p_nchannels: Option<i64>,
    /// NCCL_P2P_PER_CHANNEL_NET_BW in GB/s (2.29+).
    pub p2p_per_channel_net_bw: Option<i64>,
    /// NCCL_P2P_MAX_PEERS (2.30+); values of 0 or less are left at the default, as NCCL does.
    pub p2p_max_peers: Option<i64>,
    pub ll128_c2c: Option<bool>,
    /// NCCL_IB_HCA, parsed: exclude (`^`), exact (`=`), and `(name, port)` entries.
    pub ib_hca: Option<HcaFilter>,
    /// NCCL_SOCKET_IFNAME as written and parsed (`crate::ifaces`); `None` when unset or a
    /// single character, which NCCL ignores.
    pub socket_ifname: Option<(String, HcaFilter)>,
    /// CUDA_VISIBLE_DEVICES entries up to the first invalid one (CUDA stops there).
    pub cuda_visible_devices: Option<Vec<String>>,
    /// Multi-node NVLink (init.cc and mnnvl.cc, NCCL 2.28.9): NCCL_MNNVL_ENABLE (0 off, 1
    /// forced, 2 auto), the fabric UUID and clique id overrides (-1: NVML's; clique -2: the
    /// rack), and the search's NCCL_MNNVL_SCATTER_NETS_ENABLE / NCCL_MNNVL_RAIL_PER_HOST.
    pub mnnvl_enable: Option<i64>,
    pub mnnvl_uuid: Option<i64>,
    pub mnnvl_clique_id: Option<i64>,
    pub mnnvl_scatter_nets: Option<bool>,
    pub mnnvl_rail_per_host: Option<bool>,
    /// NIC fusion (2.21+, `crate::vnic`): NCCL_NET_MERGE_LEVEL, and NCCL_IB_MERGE_NICS=0,
    /// with which the IB plugin refuses every join.
    pub net_merge_level: Option<crate::vnic::MergeLevel>,
    pub ib_merge_nics: Option<bool>,
    vars: Vec<SetVar>,
}

/// Variables the policy reads; anything else is ignored.
pub const VARIABLES: [&str; 59] = [
    "NCCL_P2P_DISABLE",
    "NCCL_P2P_LEVEL",
    "NCCL_SHM_DISABLE",
    "NCCL_CUMEM_ENABLE",
    "NCCL_NET_GDR_LEVEL",
    "NCCL_NET_GDR_READ",
    "NCCL_NET_GDR_C2C",
    "NCCL_IB_DISABLE",
    "NCCL_NET",
    "NCCL_PXN_DISABLE",
    "NCCL_PXN_C2C",
    "NCCL_P2P_PXN_LEVEL",
    "NCCL_NVB_DISABLE",
    "NCCL_NVLS_ENABLE",
    "NCCL_COLLNET_ENABLE",
    "NCCL_ALGO",
    "NCCL_PROTO",
    "NCCL_MIN_NCHANNELS",
    "NCCL_MAX_NCHANNELS",
    "NCCL_MIN_NRINGS",
    "NCCL_MAX_NRINGS",
    "NCCL_MIN_CTAS",
    "NCCL_MAX_CTAS",
    "NCCL_NTHREADS",
    "NCCL_LL128_NTHREADS",
    "NCCL_THREAD_THRESHOLDS",
    "NCCL_CROSS_NIC",
    "NCCL_NET_DISABLE_INTRA",
    "NCCL_P2P_READ_ENABLE",
    "NCCL_P2P_DIRECT_DISABLE",
    "NCCL_P2P_USE_CUDA_MEMCPY",
    "NCCL_IGNORE_DISABLED_P2P",
    "NCCL_NVLS_NCHANNELS",
    "NCCL_PAT_ENABLE",
    "NCCL_NET_OVERHEAD",
    "NCCL_BUFFSIZE",
    "NCCL_LL_BUFFSIZE",
    "NCCL_LL128_BUFFSIZE",
    "NCCL_NCHANNELS_PER_NET_PEER",
    "NCCL_MIN_P2P_NCHANNELS",
    "NCCL_MAX_P2P_NCHANNELS",
    "NCCL_P2P_PER_CHANNEL_NET_BW",
    "NCCL_P2P_MAX_PEERS",
    "NCCL_LL128_C2C",
    "CUDA_VISIBLE_DEVICES",
    // Read for completeness of `env[]`: they name files rather than change decisions.
    "NCCL_TOPO_FILE",
    "NCCL_GRAPH_FILE",
    "NCCL_TUNER_PLUGIN",
    "NCCL_NET_PLUGIN",
    "NCCL_IB_HCA",
    "NCCL_SOCKET_IFNAME",
    "NCCL_MNNVL_ENABLE",
    "NCCL_MNNVL_UUID",
    "NCCL_MNNVL_CLIQUE_ID",
    "NCCL_MNNVL_SCATTER_NETS_ENABLE",
    "NCCL_MNNVL_RAIL_PER_HOST",
    // v2.30.7-1 src/init.cc: whether rank 0 goes on when hosts have different NET device
    // counts (dissimilar hosts, `hetero::findings`).
    "NCCL_IGNORE_NET_MISMATCH",
    "NCCL_NET_MERGE_LEVEL",
    "NCCL_IB_MERGE_NICS",
];

/// NCCL_IB_HCA as `ncclIbInitDevices` reads it (NVIDIA/nccl v2.28.9-1
/// src/transport/net_ib.cc): a leading `^` excludes the listed devices, then a leading `=`
/// asks for exact names instead of prefixes; entries are `name[:port]` separated by `,`
/// (`parseStringList`, src/misc/utils.cc), a port of -1 (none given) matching every port.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize)]
pub struct HcaFilter {
    pub exclude: bool,
    pub exact: bool,
    pub entries: Vec<(String, i64)>,
}

impl HcaFilter {
    pub fn parse(value: &str) -> HcaFilter {
        let mut v = value;
        let exclude = v.starts_with('^');
        if exclude {
            v = &v[1..];
        }
        let exact = v.starts_with('=');
        if exact {
            v = &v[1..];
        }
        let mut entries = vec![];
        for item in v.split(',') {
            // `name:port`: the port is atoi of what follows the first ':' (0 when not a number).
            let (name, port) = match item.split_once(':') {
                Some((n, p)) => {
                    let digits: String = p
                        .trim_start()
                        .chars()
                        .take_while(|c| c.is_ascii_digit())
                        .collect();
                    (n, digits.parse::<i64>().unwrap_or(0))
                }
                None => (item, -1),
            };
            if !name.is_empty() {
                entries.push((name.to_string(), port));
            }
        }
        HcaFilter {
            exclude,
            exact,
            entries,
        }
    }

    /// `matchIfList(name, port, …) ^ searchNot` (src/misc/utils.cc): an empty list matches.
    pub fn keeps(&self, name: &str, port: i64) -> bool {
        let matched = self.entries.is_empty()
            || self.entries.iter().any(|(p, pp)| {
                let name_ok = if self.exact {
                    name == p
                } else {
                    name.starts_with(p.as_str())
                };
                name_ok && (*pp == -1 || port == -1 || *pp == port)
            });
        matched != self.exclude
    }
}

fn bad(name: &str, value: &str, accepted: &str) -> Error {
    Error::new(
        ErrorKind::Env { name: name.into() },
        format!("bad {name}='{value}': expected {accepted}"),
    )
}

/// A malformed NCCL_ALGO/NCCL_PROTO list, with what would be accepted.
fn bad_list(name: &str, message: String, help: String) -> Error {
    Error::new(ErrorKind::Env { name: name.into() }, message).help(help)
}

/// An integer the way NCCL reads it (`strtoll` base 0: decimal, `0x` hex), but whole-string.
fn int(name: &str, value: &str, accepted: &str) -> Result<i64> {
    let t = value.trim();
    let (neg, body) = match t.strip_prefix('-') {
        Some(b) => (true, b),
        None => (false, t.strip_prefix('+').unwrap_or(t)),
    };
    let parsed = if let Some(h) = body.strip_prefix("0x").or_else(|| body.strip_prefix("0X")) {
        i64::from_str_radix(h, 16).ok()
    } else if !body.is_empty() && body.bytes().all(|b| b.is_ascii_digit()) {
        body.parse::<i64>().ok()
    } else {
        None
    };
    parsed
        .map(|v| if neg { -v } else { v })
        .ok_or_else(|| bad(name, value, accepted))
}

fn one_of(name: &str, value: &str, allowed: &[i64], accepted: &str) -> Result<i64> {
    let v = int(name, value, accepted)?;
    if allowed.contains(&v) {
        Ok(v)
    } else {
        Err(bad(name, value, accepted))
    }
}

fn flag(name: &str, value: &str) -> Result<bool> {
    Ok(one_of(name, value, &[0, 1], "0 or 1")? == 1)
}

fn at_least(name: &str, value: &str, min: i64, accepted: &str) -> Result<i64> {
    let v = int(name, value, accepted)?;
    if v >= min {
        Ok(v)
    } else {
        Err(bad(name, value, accepted))
    }
}

/// NCCL_P2P_LEVEL / NCCL_NET_GDR_LEVEL: an exact path-type name up to SYS, or a legacy number
/// 0..5 (LOC, PIX, PXB, PHB, SYS, SYS; larger clamps to SYS) — `ncclGetLevel`, paths.cc.
fn level(name: &str, value: &str, data: &VersionData) -> Result<PathType> {
    let names = data.level_names();
    if let Some(p) = names.iter().copied().find(|p| p.name() == value) {
        return Ok(p);
    }
    let list: Vec<&str> = names.iter().map(|p| p.name()).collect();
    let accepted = format!(
        "one of {} (case-sensitive) or a number 0-5",
        list.join(", ")
    );
    if value.starts_with(|c: char| c.is_ascii_digit()) {
        let n = int(name, value, &accepted)?;
        const OLD: [PathType; 6] = [
            PathType::Loc,
            PathType::Pix,
            PathType::Pxb,
            PathType::Phb,
            PathType::Sys,
            PathType::Sys,
        ];
        return Ok(OLD[(n.clamp(0, 5)) as usize]);
    }
    Err(bad(name, value, &accepted))
}

fn algo_names(data: &VersionData) -> Vec<&'static str> {
    data.algorithms().iter().map(|a| a.name()).collect()
}

/// NCCL_ALGO / NCCL_PROTO for one version. `elems` are the names in index order; the result
/// is written into `rows` (one row per tuned function).
fn parse_list<const N: usize>(
    name: &str,
    value: &str,
    elems: &[&str],
    grammar: AlgoProtoGrammar,
    rows: &mut [[u8; N]; 5],
    ignored: &mut Vec<String>,
) -> Result<()> {
    let accepted = format!(
        "{} (case-insensitive, comma-separated, optional leading ^{})",
        elems.join(", "),
        if grammar == AlgoProtoGrammar::PerFunction {
            "; per function as func:list, entries separated by ;"
        } else {
            ""
        }
    );
    let lookup = |tok: &str| elems.iter().position(|e| e.eq_ignore_ascii_case(tok));
    match grammar {
        AlgoProtoGrammar::SingleList => {
            // ≤2.23 parseList: one list for every function; unknown names are skipped.
            let (def, set, body) = match value.strip_prefix('^') {
                Some(b) => (1, 0, b),
                None => (0, 1, value),
            };
            let mut row = [0u8; N];
            for slot in row.iter_mut().take(elems.len()) {
                *slot = def;
            }
            for tok in body.split(',').filter(|t| !t.is_empty()) {
                match lookup(tok) {
                    Some(i) => row[i] = set,
                    None => ignored.push(format!("{name}: '{tok}'")),
                }
            }
            for r in rows.iter_mut() {
                for (i, v) in row.iter().enumerate().take(elems.len()) {
                    r[i] = *v;
                }
            }
            Ok(())
        }
        AlgoProtoGrammar::PerFunction => {
            // 2.24+ parseList: `[func:]list` entries split on ';' (empty entries skipped, as
            // strtok does); only an entry at the very start may omit the function.
            let mut offset = 0usize;
            for entry in value.split(';') {
                let start = offset;
                offset += entry.len() + 1;
                if entry.is_empty() {
                    continue;
                }
                let mut parts = entry.split(':').filter(|p| !p.is_empty());
                let first = parts.next().unwrap_or("");
                let (prefix, list) = match parts.next() {
                    Some(l) => (Some(first), l),
                    None => {
                        if start != 0 {
                            return Err(bad_list(
                                name,
                                format!(
                                    "bad {name}='{value}': entry '{entry}' needs a function prefix (func:list); only the first entry may omit it"
                                ),
                                format!("accepted: {accepted}"),
                            ));
                        }
                        (None, first)
                    }
                };
                let (unset, set, list) = match list.strip_prefix('^') {
                    Some(l) => (1u8, 0u8, l),
                    None => (0u8, 1u8, list),
                };
                let mut found = false;
                for (fi, f) in TUNED.iter().enumerate() {
                    if let Some(p) = prefix
                        && !p.eq_ignore_ascii_case(f.name())
                    {
                        continue;
                    }
                    found = true;
                    for slot in rows[fi].iter_mut().take(elems.len()) {
                        *slot = unset;
                    }
                    for tok in list.split(',').filter(|t| !t.is_empty()) {
                        match lookup(tok) {
                            Some(i) => rows[fi][i] = set,
                            None => {
                                return Err(bad_list(
                                    name,
                                    format!("bad {name}='{value}': unknown name '{tok}'"),
                                    format!("accepted: {accepted}"),
                                ));
                            }
                        }
                    }
                }
                if !found {
                    let funcs: Vec<&str> = TUNED.iter().map(|f| f.name()).collect();
                    return Err(bad_list(
                        name,
                        format!(
                            "bad {name}='{value}': unknown function '{}'",
                            prefix.unwrap_or("")
                        ),
                        format!("functions: {} (case-insensitive)", funcs.join(", ")),
                    ));
                }
            }
            Ok(())
        }
    }
}

/// The value in force of each variable topo reads: the last setting of each, in the order of
/// [`VARIABLES`] (a stable order for `env[]`).
struct Latest(Vec<(String, String)>);

impl Latest {
    fn of(vars: &[(String, String)]) -> Latest {
        let mut latest: Vec<(String, String)> = Vec::new();
        for (k, v) in vars {
            if !VARIABLES.contains(&k.as_str()) {
                continue;
            }
            match latest.iter_mut().find(|(n, _)| n == k) {
                Some(slot) => slot.1 = v.clone(),
                None => latest.push((k.clone(), v.clone())),
            }
        }
        latest.sort_by_key(|(k, _)| VARIABLES.iter().position(|n| n == k));
        Latest(latest)
    }

    fn get(&self, n: &str) -> Option<&str> {
        self.0.iter().find(|(k, _)| k == n).map(|(_, v)| v.as_str())
    }
}

/// A variable that takes one of a few integers: its name, the values NCCL accepts, how to
/// say them, and the field it sets (the table of NCCL_PARAM-style knobs).
type Choice = (
    &'static str,
    &'static [i64],
    &'static str,
    fn(&mut EnvPolicy) -> &mut Option<i64>,
);

const CHOICES: &[Choice] = &[
    ("NCCL_CUMEM_ENABLE", &[-2, 0, 1], "0, 1 or -2 (auto)", |p| {
        &mut p.cumem_enable
    }),
    ("NCCL_NET_GDR_READ", &[-2, 0, 1], "0, 1 or -2 (auto)", |p| {
        &mut p.net_gdr_read
    }),
    ("NCCL_P2P_PXN_LEVEL", &[0, 1, 2], "0, 1 or 2", |p| {
        &mut p.p2p_pxn_level
    }),
    ("NCCL_NVLS_ENABLE", &[0, 1, 2], "0, 1 or 2 (auto)", |p| {
        &mut p.nvls_enable
    }),
    ("NCCL_MNNVL_ENABLE", &[0, 1, 2], "0, 1 or 2 (auto)", |p| {
        &mut p.mnnvl_enable
    }),
    ("NCCL_CROSS_NIC", &[0, 1, 2], "0, 1 or 2", |p| {
        &mut p.cross_nic
    }),
    ("NCCL_IGNORE_DISABLED_P2P", &[0, 1, 2], "0, 1 or 2", |p| {
        &mut p.ignore_disabled_p2p
    }),
    ("NCCL_PAT_ENABLE", &[0, 1, 2], "0, 1 or 2 (auto)", |p| {
        &mut p.pat_enable
    }),
];

impl EnvPolicy {
    /// Parses the variables the model reads; later pairs win over earlier ones, so pass the
    /// process environment first and `--env` overrides after it.
    pub fn from_env(vars: &[(String, String)], data: &VersionData) -> Result<EnvPolicy> {
        let set = Latest::of(vars);
        let mut p = EnvPolicy::default();
        for (k, v) in &set.0 {
            p.vars.push(SetVar {
                name: k.clone(),
                value: v.clone(),
                effects: vec![],
            });
        }
        p.read_p2p(&set, data)?;
        p.read_flags(&set)?;
        p.read_choices(&set)?;
        p.read_net_and_mnnvl(&set)?;
        p.read_channels(&set, data)?;
        p.read_threads_and_buffers(&set)?;
        p.read_filters(&set);
        p.read_fusion(&set, data)?;
        p.read_algo_proto(&set, data)?;
        p.unread_by_version(&set, data);
        Ok(p)
    }

    /// NCCL_P2P_DISABLE, NCCL_P2P_LEVEL and NCCL_NET_GDR_LEVEL, and how they combine.
    fn read_p2p(&mut self, set: &Latest, data: &VersionData) -> Result<()> {
        let (p, get) = (self, |n: &str| set.get(n));
        if let Some(v) = get("NCCL_P2P_DISABLE") {
            // Only exactly 1 disables (ncclGetLevel); 0 is the default.
            p.p2p_disable = flag("NCCL_P2P_DISABLE", v)?;
        }
        if let Some(v) = get("NCCL_P2P_LEVEL") {
            let l = level("NCCL_P2P_LEVEL", v, data)?;
            if p.p2p_disable {
                p.note_effect(
                    "NCCL_P2P_LEVEL",
                    "ignored: NCCL_P2P_DISABLE=1 takes precedence",
                );
            } else {
                p.p2p_level = Some(l);
            }
        }
        if p.p2p_disable {
            p.p2p_level = Some(PathType::Loc);
        }
        if let Some(v) = get("NCCL_NET_GDR_LEVEL") {
            p.net_gdr_level = Some(level("NCCL_NET_GDR_LEVEL", v, data)?);
        }
        Ok(())
    }

    /// The on/off variables (only exactly 1 is on, as ncclGetLevel reads them).
    fn read_flags(&mut self, set: &Latest) -> Result<()> {
        let (p, get) = (self, |n: &str| set.get(n));
        let b = |n: &str| -> Result<Option<bool>> { get(n).map(|v| flag(n, v)).transpose() };
        p.shm_disable = b("NCCL_SHM_DISABLE")?.unwrap_or(false);
        p.ib_disable = b("NCCL_IB_DISABLE")?.unwrap_or(false);
        p.pxn_disable = b("NCCL_PXN_DISABLE")?.unwrap_or(false);
        p.nvb_disable = b("NCCL_NVB_DISABLE")?.unwrap_or(false);
        p.net_disable_intra = b("NCCL_NET_DISABLE_INTRA")?.unwrap_or(false);
        p.p2p_direct_disable = b("NCCL_P2P_DIRECT_DISABLE")?.unwrap_or(false);
        p.p2p_use_cuda_memcpy = b("NCCL_P2P_USE_CUDA_MEMCPY")?.unwrap_or(false);
        p.p2p_read_enable = b("NCCL_P2P_READ_ENABLE")?;
        p.collnet_enable = b("NCCL_COLLNET_ENABLE")?;
        p.net_gdr_c2c = b("NCCL_NET_GDR_C2C")?;
        p.pxn_c2c = b("NCCL_PXN_C2C")?;
        p.ll128_c2c = b("NCCL_LL128_C2C")?;

        Ok(())
    }

    /// The variables that take one of a few integers: one row each in [`CHOICES`].
    fn read_choices(&mut self, set: &Latest) -> Result<()> {
        for &(name, allowed, accepted, field) in CHOICES {
            if let Some(v) = set.get(name) {
                *field(self) = Some(one_of(name, v, allowed, accepted)?);
            }
        }
        Ok(())
    }

    fn read_net_and_mnnvl(&mut self, set: &Latest) -> Result<()> {
        let (p, get) = (self, |n: &str| set.get(n));
        if let Some(v) = get("NCCL_NET") {
            if v.trim().is_empty() {
                return Err(bad(
                    "NCCL_NET",
                    v,
                    "a network name such as IB or Socket, or a plugin's name",
                ));
            }
            p.net = Some(v.to_string());
        }
        if let Some(v) = get("NCCL_MNNVL_UUID") {
            p.mnnvl_uuid = Some(int("NCCL_MNNVL_UUID", v, "an integer (-1: NVML's UUID)")?);
        }
        if let Some(v) = get("NCCL_MNNVL_CLIQUE_ID") {
            p.mnnvl_clique_id = Some(int(
                "NCCL_MNNVL_CLIQUE_ID",
                v,
                "an integer (-1: NVML's clique id, -2: one clique per rack)",
            )?);
        }
        if let Some(v) = get("NCCL_MNNVL_SCATTER_NETS_ENABLE") {
            p.mnnvl_scatter_nets = Some(flag("NCCL_MNNVL_SCATTER_NETS_ENABLE", v)?);
        }
        if let Some(v) = get("NCCL_MNNVL_RAIL_PER_HOST") {
            p.mnnvl_rail_per_host = Some(flag("NCCL_MNNVL_RAIL_PER_HOST", v)?);
        }
        Ok(())
    }

    /// Channel and CTA counts, the legacy ring counts, the P2P peer knobs.
    fn read_channels(&mut self, set: &Latest, data: &VersionData) -> Result<()> {
        let (p, get) = (self, |n: &str| set.get(n));
        let chans = format!("a channel count 1-{}", data.max_channels);
        let count = |n: &str| -> Result<Option<i64>> {
            get(n).map(|v| at_least(n, v, 1, &chans)).transpose()
        };
        // NCCL_*_NCHANNELS win over the legacy NCCL_*_NRINGS (init.cc).
        p.min_nchannels = count("NCCL_MIN_NCHANNELS")?;
        p.max_nchannels = count("NCCL_MAX_NCHANNELS")?;
        let min_rings = count("NCCL_MIN_NRINGS")?;
        let max_rings = count("NCCL_MAX_NRINGS")?;
        if p.min_nchannels.is_none() {
            p.min_nchannels = min_rings;
        } else if min_rings.is_some() {
            p.note_effect("NCCL_MIN_NRINGS", "ignored: NCCL_MIN_NCHANNELS is set");
        }
        if p.max_nchannels.is_none() {
            p.max_nchannels = max_rings;
        } else if max_rings.is_some() {
            p.note_effect("NCCL_MAX_NRINGS", "ignored: NCCL_MAX_NCHANNELS is set");
        }
        p.min_ctas = count("NCCL_MIN_CTAS")?;
        p.max_ctas = count("NCCL_MAX_CTAS")?;
        p.nvls_nchannels = count("NCCL_NVLS_NCHANNELS")?;
        p.nchannels_per_net_peer = count("NCCL_NCHANNELS_PER_NET_PEER")?;
        p.min_p2p_nchannels = count("NCCL_MIN_P2P_NCHANNELS")?;
        p.max_p2p_nchannels = count("NCCL_MAX_P2P_NCHANNELS")?;
        p.read_p2p_peer_knobs(
            get("NCCL_P2P_PER_CHANNEL_NET_BW"),
            get("NCCL_P2P_MAX_PEERS"),
            data,
        )?;

        Ok(())
    }

    fn read_threads_and_buffers(&mut self, set: &Latest) -> Result<()> {
        let (p, get) = (self, |n: &str| set.get(n));
        // Thread counts: NCCL clamps out-of-range values (tuning.cc getNthreads); only
        // non-numbers are errors here.
        if let Some(v) = get("NCCL_NTHREADS") {
            p.nthreads = Some(int(
                "NCCL_NTHREADS",
                v,
                "a multiple of 32 between 64 and 512",
            )?);
        }
        if let Some(v) = get("NCCL_LL128_NTHREADS") {
            p.ll128_nthreads = Some(int(
                "NCCL_LL128_NTHREADS",
                v,
                "a multiple of 32 between 160 and 640",
            )?);
        }
        if let Some(v) = get("NCCL_THREAD_THRESHOLDS") {
            let accepted =
                "up to six integers 'treeLL treeLL128 treeSimple ringLL ringLL128 ringSimple'";
            let toks: Vec<&str> = v.split_whitespace().collect();
            if toks.is_empty() || toks.len() > 6 {
                return Err(bad("NCCL_THREAD_THRESHOLDS", v, accepted));
            }
            let mut t = [-2i64; 6];
            for (i, tok) in toks.iter().enumerate() {
                t[i] = int("NCCL_THREAD_THRESHOLDS", tok, accepted)
                    .map_err(|_| bad("NCCL_THREAD_THRESHOLDS", v, accepted))?;
            }
            p.thread_thresholds = Some(t);
        }
        if let Some(v) = get("NCCL_NET_OVERHEAD") {
            p.net_overhead = Some(at_least(
                "NCCL_NET_OVERHEAD",
                v,
                0,
                "a non-negative number of nanoseconds",
            )?);
        }
        let bytes = |n: &str| -> Result<Option<i64>> {
            get(n)
                .map(|v| at_least(n, v, 1, "a positive number of bytes"))
                .transpose()
        };
        p.buffsize = bytes("NCCL_BUFFSIZE")?;
        p.ll_buffsize = bytes("NCCL_LL_BUFFSIZE")?;
        p.ll128_buffsize = bytes("NCCL_LL128_BUFFSIZE")?;

        Ok(())
    }

    /// NCCL_IB_MERGE_NICS, read from 2.20 (`ncclIbInit`, src/transport/net_ib.cc, v2.20.5-1),
    /// and NCCL_NET_MERGE_LEVEL, from 2.21 (`ncclTopoMakeVNics`, src/graph/topo.cc). NCCL keeps
    /// its default level for a name it does not know (`kvConvertToInt`'s answer goes unchecked).
    fn read_fusion(&mut self, set: &Latest, data: &VersionData) -> Result<()> {
        let (p, get) = (self, |n: &str| set.get(n));
        let minor = data.minor();
        for (name, since) in [("NCCL_IB_MERGE_NICS", 20), ("NCCL_NET_MERGE_LEVEL", 21)] {
            if minor < since && get(name).is_some() {
                p.note_effect(
                    name,
                    format!("ignored: NCCL 2.{minor} does not read it (added in 2.{since})"),
                );
            }
        }
        if let Some(v) = get("NCCL_IB_MERGE_NICS").filter(|_| minor >= 20) {
            p.ib_merge_nics =
                Some(int("NCCL_IB_MERGE_NICS", v, "an integer (0 keeps ports apart)")? != 0);
        }
        if let Some(v) = get("NCCL_NET_MERGE_LEVEL").filter(|_| minor >= 21) {
            p.net_merge_level = crate::vnic::MergeLevel::parse(v.trim());
            if p.net_merge_level.is_none() {
                p.note_effect(
                    "NCCL_NET_MERGE_LEVEL",
                    "not a level NCCL knows (LOC PORT PIX PXB P2C PXN PHB SYS): it keeps the default, PORT",
                );
            }
        }
        Ok(())
    }

    /// NCCL_IB_HCA and CUDA_VISIBLE_DEVICES.
    fn read_filters(&mut self, set: &Latest) {
        let (p, get) = (self, |n: &str| set.get(n));
        if let Some(v) = get("NCCL_IB_HCA") {
            p.ib_hca = Some(HcaFilter::parse(v));
        }
        if let Some(v) = get("NCCL_SOCKET_IFNAME") {
            // socket.cc (ncclFindInterfaces, NCCL 2.28) ignores a value of one character.
            p.socket_ifname = (v.len() > 1).then(|| (v.to_string(), HcaFilter::parse(v)));
        }
        if let Some(v) = get("CUDA_VISIBLE_DEVICES") {
            let (list, stopped) = cuda_visible(v);
            if let Some(tok) = stopped {
                p.note_effect(
                    "CUDA_VISIBLE_DEVICES",
                    format!("entries from '{tok}' on are ignored (CUDA stops at the first invalid entry)"),
                );
            }
            p.cuda_visible_devices = Some(list);
        }
    }

    /// NCCL_PROTO and NCCL_ALGO in the grammar of the version.
    fn read_algo_proto(&mut self, set: &Latest, data: &VersionData) -> Result<()> {
        let (p, get) = (self, |n: &str| set.get(n));
        let elems_algo = algo_names(data);
        let grammar = data.rules.algo_proto_grammar;
        let mut enable = EnableMatrix::default();
        let mut ignored = vec![];
        if let Some(v) = get("NCCL_PROTO") {
            let protos: Vec<&str> = Protocol::ALL.iter().map(|p| p.name()).collect();
            parse_list(
                "NCCL_PROTO",
                v,
                &protos,
                grammar,
                &mut enable.proto,
                &mut ignored,
            )?;
            p.proto = Some(v.to_string());
        }
        if let Some(v) = get("NCCL_ALGO") {
            parse_list(
                "NCCL_ALGO",
                v,
                &elems_algo,
                grammar,
                &mut enable.algo,
                &mut ignored,
            )?;
            p.algo = Some(v.to_string());
        }
        for tok in &ignored {
            let var = tok.split(':').next().unwrap_or("").to_string();
            p.note_effect(
                &var,
                format!(
                    "NCCL {} ignores unknown name {}",
                    data.version,
                    &tok[var.len() + 2..]
                ),
            );
        }
        p.ignored_tokens = ignored;
        p.enable = enable;

        Ok(())
    }

    /// Variables this version does not read: noted, and their value dropped.
    fn unread_by_version(&mut self, set: &Latest, data: &VersionData) {
        let (p, get) = (self, |n: &str| set.get(n));
        let minor = data.minor();
        let missing = [
            (
                "NCCL_NET_GDR_C2C",
                data.defaults.net_gdr_c2c.is_none(),
                "2.26",
            ),
            ("NCCL_PXN_C2C", data.defaults.pxn_c2c.is_none(), "2.27"),
            ("NCCL_LL128_C2C", data.defaults.ll128_c2c.is_none(), "2.27"),
            (
                "NCCL_PAT_ENABLE",
                data.defaults.pat_enable.is_none(),
                "2.23",
            ),
        ];
        for (name, absent, since) in missing {
            if absent && get(name).is_some() {
                p.note_effect(
                    name,
                    format!("ignored: NCCL 2.{minor} does not read it (added in {since})"),
                );
                match name {
                    "NCCL_NET_GDR_C2C" => p.net_gdr_c2c = None,
                    "NCCL_PXN_C2C" => p.pxn_c2c = None,
                    "NCCL_LL128_C2C" => p.ll128_c2c = None,
                    _ => p.pat_enable = None,
                }
            }
        }
    }

    /// NCCL_P2P_PER_CHANNEL_NET_BW (v2.29.7-1 src/graph/paths.cc, a divisor there: 0 would
    /// stop NCCL) and NCCL_P2P_MAX_PEERS (v2.30.7-1 src/init.cc: 0 or less is ignored), each
    /// only where the version reads it.
    fn read_p2p_peer_knobs(
        &mut self,
        bw: Option<&str>,
        peers: Option<&str>,
        data: &VersionData,
    ) -> Result<()> {
        let minor = data.minor();
        let bw_var = "NCCL_P2P_PER_CHANNEL_NET_BW";
        if let Some(v) = bw {
            if data.defaults.p2p_per_channel_net_bw.is_some() {
                self.p2p_per_channel_net_bw =
                    Some(at_least(bw_var, v, 1, "a bandwidth in GB/s, 1 or more")?);
            } else {
                self.note_effect(
                    bw_var,
                    format!("ignored: NCCL 2.{minor} does not read it (added in 2.29)"),
                );
            }
        }
        let peers_var = "NCCL_P2P_MAX_PEERS";
        if let Some(v) = peers {
            if data.defaults.p2p_max_peers.is_none() {
                self.note_effect(
                    peers_var,
                    format!("ignored: NCCL 2.{minor} does not read it (added in 2.30)"),
                );
            } else {
                let n = int(peers_var, v, "a number of peers")?;
                if n > 0 {
                    self.p2p_max_peers = Some(n);
                } else {
                    self.note_effect(peers_var, "ignored: NCCL leaves values of 0 or less unset");
                }
            }
        }
        Ok(())
    }

    /// Whether `var` was set.
    pub fn is_set(&self, var: &str) -> bool {
        self.vars.iter().any(|v| v.name == var)
    }

    /// The raw value of a variable that was set.
    pub fn value(&self, var: &str) -> Option<&str> {
        self.vars
            .iter()
            .find(|v| v.name == var)
            .map(|v| v.value.as_str())
    }

    /// Records a decision `var` changed. Unset variables are ignored; repeats are kept once.
    pub fn note_effect(&mut self, var: &str, effect: impl Into<String>) {
        let e = effect.into();
        if let Some(v) = self.vars.iter_mut().find(|v| v.name == var)
            && !v.effects.contains(&e)
        {
            v.effects.push(e);
        }
    }

    /// The notes recorded for `var` (why it was ignored, which decision it changed).
    pub fn notes(&self, var: &str) -> Vec<String> {
        self.vars
            .iter()
            .find(|v| v.name == var)
            .map(|v| v.effects.clone())
            .unwrap_or_default()
    }

    /// Every variable that was set, in a stable order, with its effects.
    pub fn effects(&self) -> Vec<EnvEntry> {
        self.vars
            .iter()
            .map(|v| EnvEntry {
                name: v.name.clone(),
                value: v.value.clone(),
                effect: if v.effects.is_empty() {
                    None
                } else {
                    Some(v.effects.join("; "))
                },
                status: String::new(),
                changes: vec![],
                origin: None,
            })
            .collect()
    }

    /// CUMEM setting in force (version default when unset).
    pub fn cumem_enable_or(&self, data: &VersionData) -> i64 {
        self.cumem_enable.unwrap_or(data.defaults.cumem_enable)
    }
    pub fn net_gdr_c2c_or(&self, data: &VersionData) -> bool {
        self.net_gdr_c2c
            .unwrap_or(data.defaults.net_gdr_c2c.unwrap_or(0) == 1)
    }
    pub fn pxn_c2c_or(&self, data: &VersionData) -> bool {
        self.pxn_c2c
            .unwrap_or(data.defaults.pxn_c2c.unwrap_or(0) == 1)
    }
    pub fn ll128_c2c_or(&self, data: &VersionData) -> bool {
        self.ll128_c2c
            .unwrap_or(data.defaults.ll128_c2c.unwrap_or(0) == 1)
    }
    pub fn pat_enable_or(&self, data: &VersionData) -> i64 {
        self.pat_enable
            .unwrap_or(data.defaults.pat_enable.unwrap_or(0))
    }
    pub fn cross_nic_or(&self, data: &VersionData) -> i64 {
        self.cross_nic.unwrap_or(data.defaults.cross_nic)
    }
    pub fn nvls_enable_or(&self, data: &VersionData) -> i64 {
        self.nvls_enable.unwrap_or(data.defaults.nvls_enable)
    }
    pub fn collnet_enable_or(&self, data: &VersionData) -> bool {
        self.collnet_enable
            .unwrap_or(data.defaults.collnet_enable == 1)
    }
}

/// CUDA_VISIBLE_DEVICES: indices or `GPU-`/`MIG-` UUIDs (prefixes allowed); CUDA uses the
/// entries before the first invalid one. Returns the valid entries and the first invalid one.
fn cuda_visible(v: &str) -> (Vec<String>, Option<String>) {
    let mut out = vec![];
    if v.trim().is_empty() {
        return (out, None);
    }
    for tok in v.split(',') {
        let t = tok.trim();
        let ok = (!t.is_empty() && t.bytes().all(|b| b.is_ascii_digit()))
            || t.starts_with("GPU-")
            || t.starts_with("MIG-");
        if !ok {
            return (out, Some(t.to_string()));
        }
        out.push(t.to_string());
    }
    (out, None)
}

#[cfg(test)]
mod tests;
