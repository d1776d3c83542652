//! The command line: clap definitions, and the checks that turn flags into library requests.
//! Nothing here does a command's work.

use crate::error;
use anyhow::Result;
use clap::{Args, Parser, Subcommand, ValueEnum};
use std::path::PathBuf;
use topo_source::SourceSpec;
use topo_vocab::{Algorithm, Collective, DataType, Protocol, Reduction};

#[derive(Parser, Debug)]
#[command(
    name = "topo",
    version,
    about = "How are the GPUs in this box connected, what will NCCL do on it, and how fast should a collective be",
    propagate_version = true,
    disable_help_subcommand = true
)]
pub struct Cli {
    /// Colour output: auto (terminal only, honours NO_COLOR), always, never.
    #[arg(long, global = true, default_value = "auto", value_parser = ["auto", "always", "never"])]
    pub color: String,
    #[command(subcommand)]
    pub command: Command,
}

#[derive(Subcommand, Debug)]
pub enum Command {
    /// Show the machine: GPUs, NVLink/NVSwitch, PCIe tree, NUMA, NICs.
    Show(ShowArgs),
    /// What NCCL will do: paths, transports, channels, rings/trees, algorithm and protocol per size.
    Plan(PlanArgs),
    /// Write NCCL_TOPO_FILE-compatible topology XML.
    Xml(XmlArgs),
    /// Capture this machine (sysfs, NVML answers, environment) for offline use.
    Snapshot(SnapshotArgs),
    /// Why NCCL does what it does here: findings with evidence and fixes, from the machine, a snapshot, a matrix or NCCL logs.
    Diagnose(DiagnoseArgs),
    /// Two machines compared: hardware differences and what they change in NCCL's plan.
    Diff(DiffArgs),
    /// One self-contained HTML file for a ticket: the findings, the machine, NCCL's plan,
    /// nccl-tests results against the expected band, the log against the model, provenance.
    Report(ReportArgs),
    /// Run collectives with topo's own runtime and print measured against predicted, like nccl-tests.
    Verify(VerifyArgs),
    /// Fit this host's latency and bandwidth (alpha, beta) for the host backend and cache them.
    Calibrate(CalibrateArgs),
    /// A rank started by `topo verify --launch processes` (not for use by hand).
    #[command(hide = true)]
    Worker,
    /// Print a shell completion script (bash, zsh, fish, elvish, powershell).
    Completions(CompletionsArgs),
    /// Print a manual page (roff): `topo man > topo.1`, `topo man show > topo-show.1`, or all
    /// of them with `topo man --dir DIR`.
    Man(ManArgs),
    /// Print the help of topo or of a subcommand (`topo help plan`).
    Help(HelpArgs),
}

#[derive(Args, Debug)]
pub struct DiffArgs {
    /// The reference: a file or folder (XML, snapshot, matrix, profile YAML, NCCL log),
    /// profile:NAME (or a built-in name), or live for this machine.
    #[arg(value_name = "A")]
    pub a: String,
    /// The machine compared with it, named the same ways.
    #[arg(value_name = "B")]
    pub b: String,
    /// Replicate both N times behind their NICs for the plan comparison.
    #[arg(long, value_name = "N")]
    pub nodes: Option<usize>,
    /// NCCL version to model (2.18 … 2.30); default: the NCCL found here, else 2.28.
    #[arg(long, value_name = "V")]
    pub nccl_version: Option<String>,
    #[arg(long, value_enum, default_value = "text")]
    pub format: DiffFormat,
    /// Write to this file instead of stdout (`-`: stdout).
    #[arg(short, long, value_name = "FILE")]
    pub output: Option<PathBuf>,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum)]
pub enum DiffFormat {
    Text,
    Json,
    /// One self-contained HTML page (inline CSS, no script or outside reference).
    Html,
}

#[derive(Args, Debug)]
pub struct CompletionsArgs {
    /// The shell to complete for.
    #[arg(value_enum)]
    pub shell: clap_complete::Shell,
}

#[derive(Args, Debug)]
pub struct ManArgs {
    /// The subcommand whose page to print (topo-show(1) for `show`); none for topo(1).
    #[arg(value_name = "COMMAND")]
    pub command: Option<String>,
    /// Write every page (topo.1, topo-show.1, ...) into this folder instead.
    #[arg(long, value_name = "DIR", conflicts_with = "command", value_hint = clap::ValueHint::DirPath)]
    pub dir: Option<PathBuf>,
}

#[derive(Args, Debug)]
pub struct HelpArgs {
    /// The subcommand to describe; none for topo itself.
    #[arg(value_name = "COMMAND")]
    pub command: Vec<String>,
}

/// Where the topology comes from (shared by show, plan, xml).
#[derive(Args, Debug, Clone, Default)]
pub struct SourceArgs {
    /// Read the machine from a file instead of this host: an NCCL topology XML, a snapshot
    /// (folder or .tar.gz from `topo snapshot`), a profile YAML, an `nvidia-smi topo -m` paste
    /// or an NCCL_DEBUG=INFO log; `-` or a pipe reads a log, paste or XML from it;
    /// `profile:NAME` names a built-in profile. `topo plan` takes it once per host, in node
    /// order (dissimilar hosts).
    #[arg(long, value_name = "PATH", value_hint = clap::ValueHint::AnyPath)]
    pub from: Vec<PathBuf>,
    /// `topo plan`: a host list, one source per line (`#` comments; paths relative to the
    /// list's folder), one host each in node order.
    #[arg(long, value_name = "FILE", value_hint = clap::ValueHint::FilePath)]
    pub hosts: Option<PathBuf>,
    /// A built-in hardware profile by name (`topo show --profile list` describes each;
    /// `topo completions` completes them). With --from, the profile lends what the file
    /// leaves out (GPU model, NVLink, port speed and GPUDirect RDMA) and the file keeps its
    /// PCI layout.
    #[arg(long, value_name = "NAME", value_parser = ProfileName)]
    pub profile: Option<String>,
    /// Replicate the node N times behind its NICs (what-if for N nodes; at most 16384).
    #[arg(long, value_name = "N", allow_hyphen_values = true)]
    pub nodes: Option<usize>,
    /// An environment setting the analysis should assume (repeatable), e.g. NCCL_P2P_DISABLE=1.
    #[arg(long = "env", value_name = "KEY=VALUE")]
    pub env: Vec<String>,
    /// Whether the GPUs' driver allows peer access (on, off), over the source and the
    /// built-in list of boards whose drivers refuse it (GeForce RTX 4090/5090).
    #[arg(long, value_name = "on|off", value_parser = on_off)]
    pub p2p: Option<bool>,
    /// Whether the driver offers NVLS multicast (on, off), over the source: off for H800
    /// boxes, a missing fabric manager, a CUDA driver before 12.1.
    #[arg(long, value_name = "on|off", value_parser = on_off)]
    pub nvls: Option<bool>,
    /// The GPU model, for a source that does not say (a matrix, a skeleton XML): sets the
    /// compute capability, the name and the NVLink lanes `--nvlink` uses (h100, h200, b200,
    /// b300, a100, v100, l40s, rtx4090, rtx5090, ...; an unknown name lists them all).
    #[arg(long = "gpu", value_name = "MODEL", value_parser = gpu_model)]
    pub gpu_model: Option<&'static topo_model::stated::GpuModel>,
    /// The GPUs' compute capability as NCCL writes it (90 for H100), for a source that does
    /// not say.
    #[arg(long, value_name = "SM", value_parser = clap::value_parser!(u32).range(30..=200))]
    pub sm: Option<u32>,
    /// How the GPUs are joined by NVLink where the source does not say: nvswitch, pairs
    /// (bridges, in bus-id order) or none; `:LANES` sets the lanes per GPU (nvswitch:18).
    #[arg(long, value_name = "SHAPE[:LANES]", value_parser = nvlink_shape)]
    pub nvlink: Option<(topo_model::stated::NvlinkShape, Option<u32>)>,
    /// The speed of each network port, in Gb/s (400, 400G): fills ports whose source does
    /// not say and overrides the compute ports' speed where it does (the plan says so).
    #[arg(long, value_name = "GBPS", value_parser = nic_speed)]
    pub nic_speed: Option<u64>,
    /// The fabric between nodes: ib, roce, efa, slingshot, tcpx, tcpxo or socket. NCCL's NET
    /// then runs over its transport (a net plugin's, or sockets) with the latency its plugin
    /// reports, over the source's and the profile's.
    #[arg(long, value_name = "NAME")]
    pub fabric: Option<topo_vocab::Fabric>,
    /// NICs per node: each node keeps its first N compute ports (NCCL's device order) and
    /// loses the others, over what the source lists.
    #[arg(long, value_name = "N", value_parser = clap::value_parser!(u32).range(1..=64))]
    pub nics: Option<u32>,
    /// GPUs per node: each node keeps its first N GPUs (NVML order), as a 4-GPU node stated
    /// on an 8-GPU profile.
    #[arg(long, value_name = "N", value_parser = clap::value_parser!(u32).range(1..=640))]
    pub gpus_per_node: Option<u32>,
    /// Whether the fabric offers SHARP in-network reduction (CollNet) (on, off).
    #[arg(long, value_name = "on|off", value_parser = on_off)]
    pub sharp: Option<bool>,
    /// Whether GPUDirect RDMA works on network ports whose source does not say (yes, no).
    #[arg(long, value_name = "yes|no", value_parser = on_off)]
    pub gdr: Option<bool>,
    /// A failed part (repeatable): nvlink:GPU3, nic:mlx5_2 or gpu:5, on host 0 or @HOST;
    /// `plan` says what it changes against the healthy machine.
    #[arg(long, value_name = "PART", value_parser = topo_model::faults::parse_without)]
    pub without: Vec<topo_model::faults::Fault>,
    /// A degraded part (repeatable): pcie:BUSID=gen4x8 or nvlink:GPU2=12 (lanes left), on
    /// host 0 or @HOST.
    #[arg(long, value_name = "PART=STATE", value_parser = topo_model::faults::parse_degrade)]
    pub degrade: Vec<topo_model::faults::Fault>,
    /// Read sysfs/procfs under this folder instead of / (live discovery only).
    #[arg(long, value_name = "DIR", env = "TOPO_SYSFS_ROOT", hide = true, value_parser = sysfs_root)]
    pub sysfs_root: Option<PathBuf>,
}

/// `--profile`: any name is taken here (topo-source says "unknown profile" with the list, and
/// accepts `DGX-H100`), but the built-in names are offered to `--help` and shell completion.
#[derive(Clone, Debug)]
pub struct ProfileName;

impl clap::builder::TypedValueParser for ProfileName {
    type Value = String;

    fn parse_ref(
        &self,
        cmd: &clap::Command,
        arg: Option<&clap::Arg>,
        value: &std::ffi::OsStr,
    ) -> Result<String, clap::Error> {
        clap::builder::StringValueParser::new().parse_ref(cmd, arg, value)
    }

    fn possible_values(
        &self,
    ) -> Option<Box<dyn Iterator<Item = clap::builder::PossibleValue> + '_>> {
        let names = topo_source::profile::builtin_names();
        Some(Box::new(
            names.into_iter().map(clap::builder::PossibleValue::new),
        ))
    }
}

/// `--profile list`: the name that lists the built-in profiles instead of loading one.
pub const PROFILE_LIST: &str = "list";

impl SourceArgs {
    /// `--profile list` asked for the listing (any case, as profile names are taken).
    pub fn wants_profile_list(&self) -> bool {
        self.profile
            .as_deref()
            .is_some_and(|p| p.trim().eq_ignore_ascii_case(PROFILE_LIST))
    }
}

/// The built-in profiles, one line each (name, then its description), or as a JSON array of
/// `{name, description}` for `--format json`.
pub fn profile_listing(json: bool) -> String {
    let list = topo_source::profile::builtin_list();
    if json {
        let v: Vec<serde_json::Value> = list
            .iter()
            .map(|(n, d)| serde_json::json!({"name": n, "description": d}))
            .collect();
        let doc = serde_json::json!({
            "schema": topo_documents::schema::PROFILES,
            "topo_version": env!("CARGO_PKG_VERSION"),
            "profiles": v,
        });
        return format!(
            "{}\n",
            serde_json::to_string_pretty(&doc).unwrap_or_default()
        );
    }
    let width = list.iter().map(|(n, _)| n.len()).max().unwrap_or(0);
    list.iter()
        .map(|(n, d)| format!("{n:<width$}  {d}\n"))
        .collect()
}

/// `--sysfs-root` / `TOPO_SYSFS_ROOT`: an empty value (`TOPO_SYSFS_ROOT=`) means unset, as
/// for most environment switches, instead of clap's "a value is required for --sysfs-root".
fn sysfs_root(s: &str) -> Result<PathBuf, std::convert::Infallible> {
    Ok(PathBuf::from(s))
}

fn gpu_model(s: &str) -> std::result::Result<&'static topo_model::stated::GpuModel, String> {
    topo_model::stated::gpu_model(s).ok_or_else(|| {
        let keys: Vec<&str> = topo_model::stated::GPU_MODELS
            .iter()
            .map(|m| m.key)
            .collect();
        format!("unknown GPU model '{s}' (known: {})", keys.join(", "))
    })
}

fn nvlink_shape(
    s: &str,
) -> std::result::Result<(topo_model::stated::NvlinkShape, Option<u32>), String> {
    let (shape, lanes) = match s.split_once(':') {
        Some((a, b)) => (a, Some(b)),
        None => (s, None),
    };
    let shape = topo_model::stated::NvlinkShape::parse(shape)
        .ok_or_else(|| format!("'{s}' is not nvswitch, pairs or none"))?;
    let lanes = match lanes {
        None => None,
        Some(l) => match l.parse::<u32>() {
            Ok(n) if (1..=18).contains(&n) => Some(n),
            _ => return Err(format!("'{l}' is not a lane count from 1 to 18")),
        },
    };
    Ok((shape, lanes))
}

/// `400`, `400G`, `400Gb/s`, `400gbps`: Gb/s, returned in Mbit/s.
fn nic_speed(s: &str) -> std::result::Result<u64, String> {
    let t = s.trim().to_ascii_lowercase();
    let num = t
        .trim_end_matches("bps")
        .trim_end_matches("b/s")
        .trim_end_matches('b')
        .trim_end_matches('g')
        .trim();
    match num.parse::<u64>() {
        Ok(g) if (1..=3200).contains(&g) => Ok(g * 1000),
        _ => Err(format!(
            "'{s}' is not a speed in Gb/s from 1 to 3200 (400, 400G)"
        )),
    }
}

fn on_off(s: &str) -> std::result::Result<bool, String> {
    match s.to_ascii_lowercase().as_str() {
        "on" | "1" | "yes" | "true" => Ok(true),
        "off" | "0" | "no" | "false" => Ok(false),
        _ => Err(format!("'{s}' is not on or off")),
    }
}

/// A flag's value the vocabulary does not take, as the contract's one `error:` line and its
/// `hint:`. Clap keeps it as the source of its error, and `cmd::main_entry` prints it as it
/// stands instead of clap's "invalid value" wording.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct BadValue {
    pub line: String,
    pub hint: String,
}

impl std::fmt::Display for BadValue {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.line)
    }
}

impl std::error::Error for BadValue {}

/// The collectives of `--collective` (a comma-separated list, or `all`), in order.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Collectives(pub Vec<Collective>);

/// A word of the vocabulary through its `FromStr`, or `{flag} {s}: unknown` with the accepted
/// words.
fn word<T: std::str::FromStr>(
    s: &str,
    flag: &str,
    accepted: &str,
) -> std::result::Result<T, BadValue> {
    s.parse().map_err(|_| BadValue {
        line: format!("{flag} {s}: unknown"),
        hint: format!("use one of {accepted}"),
    })
}

fn dtype_arg(s: &str) -> std::result::Result<DataType, BadValue> {
    word(
        s,
        "-d",
        "float, double, half, bfloat16, int32, int64, uint8",
    )
}

fn op_arg(s: &str) -> std::result::Result<Reduction, BadValue> {
    word(s, "-o", "sum, prod, min, max, avg")
}

fn proto_arg(s: &str) -> std::result::Result<Protocol, BadValue> {
    word(s, "--proto", "simple, ll, ll128")
}

/// `--algo` of verify: an algorithm the host backend runs.
fn host_algo_arg(s: &str) -> std::result::Result<Algorithm, BadValue> {
    let a: Algorithm = word(s, "--algo", "ring, tree, direct")?;
    if !matches!(a, Algorithm::Ring | Algorithm::Tree | Algorithm::Direct) {
        return Err(BadValue {
            line: format!(
                "--algo {}: the host backend runs ring, tree or direct",
                a.macro_name().to_lowercase()
            ),
            hint: "NVLS, CollNet and PAT need NVSwitch multicast, a network plugin or NCCL's own kernels; topo plan models them".into(),
        });
    }
    Ok(a)
}

/// `--collective` of verify: any collective, `all` in nccl-tests' usual order.
fn verify_collectives(s: &str) -> std::result::Result<Collectives, BadValue> {
    if s.eq_ignore_ascii_case("all") {
        return Ok(Collectives(Collective::RUN_ORDER.to_vec()));
    }
    s.split(',')
        .map(|t| {
            t.trim().parse().map_err(|_| BadValue {
                line: format!("unknown collective '{t}'"),
                hint: "use allreduce, allgather, reducescatter, broadcast, reduce, alltoall, sendrecv, or all".into(),
            })
        })
        .collect::<std::result::Result<_, _>>()
        .map(Collectives)
}

/// `--collective` of plan: the collectives NCCL's cost model covers, each once; `all` is
/// every one of them.
fn plan_collectives(s: &str) -> std::result::Result<Collectives, BadValue> {
    if s.eq_ignore_ascii_case("all") {
        return Ok(Collectives(Collective::TUNED.to_vec()));
    }
    let mut out = vec![];
    for tok in s.split(',') {
        let f: Collective = tok.parse().map_err(|_| BadValue {
            line: format!("unknown collective '{tok}'"),
            hint: "use allreduce, allgather, reducescatter, broadcast, reduce, or all".into(),
        })?;
        if !f.is_tuned() {
            return Err(BadValue {
                line: format!(
                    "{} has no NCCL cost model: NCCL runs it as point-to-point sends and receives",
                    f.cli_name()
                ),
                hint: "topo plan predicts allreduce, allgather, reducescatter, broadcast and reduce; the plan's p2p channel counts apply to sends".into(),
            });
        }
        if !out.contains(&f) {
            out.push(f);
        }
    }
    Ok(Collectives(out))
}

/// `--nodes` within 1 ..= `topo_source::MAX_NODES`, for every command that replicates.
pub fn check_nodes(nodes: Option<usize>) -> Result<()> {
    if let Some(0) = nodes {
        return Err(error::usage(
            "--nodes must be at least 1",
            "pass --nodes 2 for two nodes",
        ));
    }
    if let Some(n) = nodes
        && n > topo_source::MAX_NODES
    {
        return Err(error::usage(
            format!(
                "--nodes {n}: at most {} nodes are modelled",
                topo_source::MAX_NODES
            ),
            format!("pass --nodes {} or fewer", topo_source::MAX_NODES),
        ));
    }
    Ok(())
}

/// An empty root path counts as none: read this machine.
pub fn non_empty(p: &Option<PathBuf>) -> Option<PathBuf> {
    p.clone().filter(|p| !p.as_os_str().is_empty())
}

impl SourceArgs {
    /// The one `--from`, if any.
    pub fn first_from(&self) -> Option<&PathBuf> {
        self.from.first()
    }

    /// The source of a command that reads one host.
    pub fn spec(&self) -> Result<SourceSpec> {
        if self.from.len() > 1 || self.hosts.is_some() {
            return Err(error::usage(
                "this command reads one host: several --from or --hosts are for topo plan",
                "pass one --from, or run topo plan --from A --from B for dissimilar hosts",
            ));
        }
        check_nodes(self.nodes)?;
        let from = self.first_from().cloned();
        // `--from profile:NAME` where no such file exists names a built-in profile.
        if let Some(name) = from
            .as_ref()
            .filter(|p| !p.exists())
            .and_then(|p| p.to_str()?.strip_prefix(topo_source::hosts::PROFILE_PREFIX))
        {
            return Ok(SourceSpec {
                profile: Some(name.to_string()),
                nodes: self.nodes,
                node: self.node_facts(),
                ..Default::default()
            });
        }
        Ok(SourceSpec {
            // With --from, the profile is a base of facts (`apply_facts`), not the source.
            profile: self.profile.clone().filter(|_| from.is_none()),
            from,
            nodes: self.nodes,
            sysfs_root: non_empty(&self.sysfs_root),
            escape_text: false,
            regular_only: false,
            node: self.node_facts(),
        })
    }

    /// What the flags state about each node (`--gpus-per-node`, `--fabric`, `--nics`,
    /// `--nic-speed`, `--sharp`), laid onto the source before `--nodes` copies it.
    pub fn node_facts(&self) -> topo_model::netfacts::NodeFacts {
        topo_model::netfacts::NodeFacts {
            fabric: topo_vocab::FabricFacts {
                fabric: self.fabric,
                nics: self.nics,
                nic_speed_mbps: self.nic_speed,
                latency_us: None,
                sharp: self.sharp,
            },
            gpus: self.gpus_per_node,
        }
    }

    /// One source per host where several are named (`--from` repeated, `--hosts`), in node
    /// order; `None` for a plan of one source (`--nodes` replicates it).
    pub fn host_specs(&self) -> Result<Option<Vec<SourceSpec>>> {
        let mut words: Vec<String> = self
            .from
            .iter()
            .map(|p| p.to_string_lossy().into_owned())
            .collect();
        let named = words.len();
        if let Some(list) = &self.hosts {
            words.extend(topo_source::hosts::read_host_list(list)?);
        }
        if words.len() < 2 && self.hosts.is_none() {
            return Ok(None);
        }
        if self.nodes.is_some() {
            return Err(error::usage(
                "--nodes replicates one source: with one source per host there is nothing to replicate",
                "drop --nodes (each --from is one node), or pass one --from with --nodes N",
            ));
        }
        let mut specs = words
            .iter()
            .map(|w| topo_source::hosts::parse_source(w))
            .collect::<std::result::Result<Vec<_>, _>>()?;
        // A host list's lines are found, not named: a FIFO there is refused, not read.
        for s in specs.iter_mut().skip(named) {
            s.regular_only = true;
        }
        for s in specs.iter_mut() {
            s.node = self.node_facts();
        }
        Ok(Some(specs))
    }

    /// `--env` settings parsed into (key, value) pairs.
    pub fn env_overrides(&self) -> Result<Vec<(String, String)>> {
        self.env
            .iter()
            .map(|kv| match kv.split_once('=') {
                Some((k, v)) if !k.trim().is_empty() => Ok((k.trim().to_string(), v.to_string())),
                _ => Err(error::usage(
                    format!("bad --env '{kv}': expected KEY=VALUE"),
                    "for example --env NCCL_P2P_LEVEL=NVL",
                )),
            })
            .collect()
    }
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum)]
pub enum ShowView {
    Summary,
    Matrix,
    Pci,
    Paths,
    Dot,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum)]
pub enum DataFormat {
    Text,
    Json,
    Yaml,
    /// A picture of the machine (the view does not apply).
    Svg,
}

impl From<ShowView> for topo_report::ShowView {
    fn from(v: ShowView) -> Self {
        match v {
            ShowView::Summary => topo_report::ShowView::Summary,
            ShowView::Matrix => topo_report::ShowView::Matrix,
            ShowView::Pci => topo_report::ShowView::Pci,
            ShowView::Paths => topo_report::ShowView::Paths,
            ShowView::Dot => topo_report::ShowView::Dot,
        }
    }
}

#[derive(Args, Debug)]
pub struct ShowArgs {
    #[command(flatten)]
    pub source: SourceArgs,
    /// What to show: the summary, nvidia-smi's topo matrix, the PCIe tree, the paths between
    /// GPUs and NICs, or a Graphviz graph.
    #[arg(long, value_enum, default_value = "summary")]
    pub view: ShowView,
    /// With --view matrix: a narrow layout that fits the terminal (blocks of columns, the
    /// affinity columns as their own table) instead of nvidia-smi's own.
    #[arg(long)]
    pub compact: bool,
    /// With --nodes: describe every copy of the machine in full, as earlier versions did,
    /// instead of the first copy and a line naming the others.
    #[arg(long)]
    pub each_host: bool,
    #[arg(long, value_enum, default_value = "text")]
    pub format: DataFormat,
    /// Write to this file instead of stdout.
    #[arg(short = 'o', long = "output", value_name = "FILE", value_hint = clap::ValueHint::FilePath)]
    pub output: Option<PathBuf>,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum)]
pub enum PlanFormat {
    Text,
    Json,
    Yaml,
    TunerCsv,
    NcclGraph,
    /// Predicted busbw against message size per algorithm and protocol.
    Svg,
}

#[derive(Args, Debug)]
pub struct PlanArgs {
    #[command(flatten)]
    pub source: SourceArgs,
    /// allreduce, allgather, reducescatter, broadcast, reduce, or all (comma-separated);
    /// alltoall and sendrecv have no NCCL cost model to plan (`topo verify` runs them).
    #[arg(long, default_value = "allreduce", value_parser = plan_collectives)]
    pub collective: Collectives,
    /// Algorithms to consider, NCCL_ALGO grammar (auto = all): ring, tree, nvls, nvlstree, collnetdirect, collnetchain, pat.
    #[arg(long, default_value = "auto")]
    pub algo: String,
    /// Protocols to consider, NCCL_PROTO grammar (auto = all): ll, ll128, simple.
    #[arg(long, default_value = "auto")]
    pub proto: String,
    /// Smallest message size (nccl-tests syntax: 8, 1K, 16M, 4G).
    #[arg(
        short = 'b',
        long = "minbytes",
        default_value = "8",
        allow_hyphen_values = true
    )]
    pub min_bytes: String,
    /// Largest message size.
    #[arg(
        short = 'e',
        long = "maxbytes",
        default_value = "8G",
        allow_hyphen_values = true
    )]
    pub max_bytes: String,
    /// Multiplication factor between sizes.
    #[arg(
        short = 'f',
        long = "stepfactor",
        default_value = "2",
        allow_hyphen_values = true
    )]
    pub step_factor: u64,
    /// NCCL version to model (2.18 … 2.30); default: the NCCL found on this machine, else 2.28.
    #[arg(long, value_name = "V")]
    pub nccl_version: Option<String>,
    /// Plan for this NCCL version too and say what changes from --nccl-version to it (per
    /// collective and size), with the version data that differs (an NCCL upgrade).
    #[arg(long, value_name = "V")]
    pub against: Option<String>,
    #[arg(long, value_enum, default_value = "text")]
    pub format: PlanFormat,
    /// How ranks map to processes: process-per-gpu (torchrun), process-per-host (one process,
    /// all GPUs), container-per-gpu (own host hash), container-per-gpu-hostid (common
    /// NCCL_HOSTID, private /dev/shm), container-per-gpu-shared (common host id and /dev/shm).
    #[arg(long, default_value = "process-per-gpu")]
    pub placement: String,
    /// Trace every figure to the rule and constant that produced it.
    #[arg(long)]
    pub explain: bool,
    /// JSON/YAML transports: `classes` (one entry per transport, path, reason and NIC, with
    /// the pairs it covers) or `pairs` (also every pair on its own, `transport_pairs`).
    #[arg(long, value_enum, default_value = "classes")]
    pub transports: TransportListing,
    /// Write to this file instead of stdout.
    #[arg(short = 'o', long = "output", value_name = "FILE", value_hint = clap::ValueHint::FilePath)]
    pub output: Option<PathBuf>,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum)]
pub enum TransportListing {
    Classes,
    Pairs,
}

#[derive(Args, Debug)]
pub struct XmlArgs {
    #[command(flatten)]
    pub source: SourceArgs,
    /// Write to this file instead of stdout.
    #[arg(short = 'o', long = "output", value_name = "FILE", value_hint = clap::ValueHint::FilePath)]
    pub output: Option<PathBuf>,
}

#[derive(Args, Debug)]
pub struct SnapshotArgs {
    /// Output: a .tar.gz file, or a folder when the path ends with '/' or has no .tar.gz/.tgz
    /// suffix; `%h` is this host's name (`srun topo snapshot -o snaps/%h.tar.gz`).
    #[arg(
        short = 'o',
        long = "output",
        value_name = "FILE",
        default_value = "topo-snapshot.tar.gz"
    )]
    pub output: PathBuf,
    /// Read sysfs/procfs under this folder instead of / (for tests).
    #[arg(long, value_name = "DIR", env = "TOPO_SYSFS_ROOT", hide = true, value_parser = sysfs_root)]
    pub sysfs_root: Option<PathBuf>,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum)]
pub enum FailOn {
    Error,
    Warning,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum)]
pub enum DiagnoseFormat {
    Text,
    Json,
    /// With --fleet: one self-contained HTML page (for one machine: topo report).
    Html,
}

#[derive(Args, Debug)]
pub struct DiagnoseArgs {
    #[command(flatten)]
    pub source: SourceArgs,
    /// An NCCL_DEBUG=INFO log (repeatable; `-` for standard input, pipes read); compared
    /// with the model of the machine.
    #[arg(long = "nccl-log", value_name = "FILE")]
    pub nccl_log: Vec<PathBuf>,
    /// nccl-tests output (text as printed, or the -J JSON; repeatable; `-` for standard
    /// input): each size measured against the busbw expected for the machine and its band.
    /// Without --from/--profile the machine is inferred from the rank lines.
    #[arg(long = "nccl-tests", value_name = "FILE")]
    pub nccl_tests: Vec<PathBuf>,
    /// The collective of a --nccl-tests table that does not name its program.
    #[arg(long, value_name = "NAME")]
    pub collective: Option<String>,
    /// A reference machine: a built-in profile name or a snapshot/XML/profile file.
    #[arg(long, value_name = "PROFILE|SNAPSHOT")]
    pub expect: Option<String>,
    /// Exit 1 when a finding is at least this severe.
    #[arg(long, value_enum, value_name = "error|warning")]
    pub fail_on: Option<FailOn>,
    #[arg(long, value_enum, default_value = "text")]
    pub format: DiagnoseFormat,
    /// Hang triage: NCCL RAS reports (text or JSON), PyTorch watchdog logs, Flight Recorder
    /// analyzer output or JSON dumps, NCCL network errors (repeatable; a folder reads its
    /// files, one per rank; `-` for standard input). Names the suspect ranks, the place and
    /// the class of cause; with --from or --profile, the suspect GPUs and NICs on that machine.
    #[arg(long, value_name = "FILE|DIR", conflicts_with_all = ["fleet", "nccl_log", "nccl_tests", "expect"])]
    pub hang: Vec<PathBuf>,
    /// A folder of snapshots (or any sources), one per host: group the hosts by identical
    /// hardware, name the outliers and what differs from the largest group.
    #[arg(long, value_name = "DIR", value_hint = clap::ValueHint::DirPath)]
    pub fleet: Option<PathBuf>,
    /// NCCL version to model when no log names one (2.18 … 2.30).
    #[arg(long, value_name = "V")]
    pub nccl_version: Option<String>,
    /// Write to this file instead of stdout.
    #[arg(short = 'o', long = "output", value_name = "FILE", value_hint = clap::ValueHint::FilePath)]
    pub output: Option<PathBuf>,
}

#[derive(Args, Debug)]
pub struct ReportArgs {
    #[command(flatten)]
    pub source: SourceArgs,
    /// An NCCL_DEBUG=INFO log (repeatable; `-` for standard input): its findings and what
    /// NCCL did beside what topo expected.
    #[arg(long = "nccl-log", value_name = "FILE")]
    pub nccl_log: Vec<PathBuf>,
    /// nccl-tests output (repeatable): measured against the expected busbw and its band, per
    /// size. Without --from/--profile the machine is inferred from the rank lines.
    #[arg(long = "nccl-tests", value_name = "FILE")]
    pub nccl_tests: Vec<PathBuf>,
    /// The collective of a --nccl-tests table that does not name its program.
    #[arg(long, value_name = "NAME")]
    pub collective: Option<String>,
    /// NCCL version to model (2.18 … 2.30); default: the one a log or result names, else
    /// the NCCL found on this machine, else 2.28.
    #[arg(long, value_name = "V")]
    pub nccl_version: Option<String>,
    /// The HTML file to write (`-` for stdout); required: a report is a file to attach.
    #[arg(short = 'o', long = "output", value_name = "FILE", value_hint = clap::ValueHint::FilePath)]
    pub output: Option<PathBuf>,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum)]
pub enum Backend {
    /// CUDA when a driver and a GPU are present, else host.
    Auto,
    Host,
    Cuda,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum)]
pub enum LaunchKind {
    /// A launcher's environment (torchrun, Slurm, Open MPI) when present, else threads.
    Auto,
    /// One process, one thread per rank.
    Threads,
    /// topo starts one copy of itself per rank on this machine.
    Processes,
    /// Ranks started by torchrun, srun or mpirun (RANK/WORLD_SIZE, SLURM_*, OMPI_COMM_WORLD_*).
    Env,
}

/// How `topo verify` places the ranks it starts itself.
#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum)]
pub enum BindTo {
    /// Rank r of --launch threads or processes on the r-th CPU this process may use, when
    /// there are at least as many CPUs as ranks (mpirun's --bind-to core).
    Cpu,
    /// Wherever the scheduler puts them.
    None,
}

#[derive(Args, Debug)]
pub struct VerifyArgs {
    /// With --from or --profile: run that machine's schedule (rings, trees, channels, ranks)
    /// here to check it; timings are then this host's.
    #[command(flatten)]
    pub source: SourceArgs,
    /// allreduce, allgather, reducescatter, broadcast, reduce, alltoall, sendrecv, or all.
    #[arg(long, default_value = "allreduce", value_parser = verify_collectives)]
    pub collective: Collectives,
    #[arg(long, value_enum, default_value = "auto")]
    pub backend: Backend,
    /// Ranks (default: this host's CPUs, 2 to 8; with --from/--profile, that machine's GPUs).
    #[arg(long, value_name = "N", value_parser = ranks_arg)]
    pub ranks: Option<usize>,
    #[arg(long, value_enum, default_value = "auto")]
    pub launch: LaunchKind,
    /// Bind each rank of --launch threads/processes to a CPU of its own when the ranks fit
    /// (cpu), or leave them to the scheduler (none); a launcher binds --launch env ranks.
    #[arg(
        long = "bind-to",
        value_enum,
        default_value = "cpu",
        value_name = "WHAT"
    )]
    pub bind_to: BindTo,
    /// Smallest message size (nccl-tests syntax: 8, 1K, 16M, 4G).
    #[arg(
        short = 'b',
        long = "minbytes",
        default_value = "8",
        allow_hyphen_values = true
    )]
    pub min_bytes: String,
    /// Largest message size.
    #[arg(
        short = 'e',
        long = "maxbytes",
        default_value = "32M",
        allow_hyphen_values = true,
        value_parser = buffer_size_arg
    )]
    pub max_bytes: String,
    /// Multiplication factor between sizes.
    #[arg(
        short = 'f',
        long = "stepfactor",
        default_value = "2",
        allow_hyphen_values = true
    )]
    pub step_factor: u64,
    /// Timed iterations per size.
    #[arg(short = 'n', long = "iters", default_value = "20")]
    pub iters: usize,
    /// Warm-up iterations per size.
    #[arg(short = 'w', long = "warmup_iters", default_value = "5")]
    pub warmup: usize,
    /// Check results (1) or not (0).
    #[arg(short = 'c', long = "check", default_value = "1")]
    pub check: u8,
    /// Reduction: sum, prod, min, max, avg.
    #[arg(short = 'o', long = "op", default_value = "sum", value_parser = op_arg)]
    pub op: Reduction,
    /// Data type: float, double, half, bfloat16, int32, int64, uint8.
    #[arg(short = 'd', long = "datatype", default_value = "float", value_parser = dtype_arg)]
    pub dtype: DataType,
    /// Root rank of broadcast and reduce.
    #[arg(short = 'r', long = "root", default_value = "0")]
    pub root: usize,
    /// Force an algorithm: ring, tree, direct (host backend).
    #[arg(long, value_parser = host_algo_arg)]
    pub algo: Option<Algorithm>,
    /// Force a protocol: simple, ll, ll128.
    #[arg(long, value_parser = proto_arg)]
    pub proto: Option<Protocol>,
    /// Seconds a rank waits for a peer before failing.
    #[arg(long, default_value = "60", value_parser = timeout_arg)]
    pub timeout: f64,
    #[arg(long, value_enum, default_value = "text")]
    pub format: VerifyFormat,
    /// NCCL version to model for --from/--profile plans (2.18 … 2.30).
    #[arg(long, value_name = "V")]
    pub nccl_version: Option<String>,
    /// Channels per rank when the plan gives none (host default 1; CUDA default: the kernel
    /// model's, the fewest that reach 0.8 of the copy ceiling with every CTA resident).
    #[arg(long, value_name = "N", value_parser = nchannels_arg)]
    pub nchannels: Option<usize>,
    /// CUDA backend: ranks per GPU, to run every kernel and protocol on a one-GPU machine
    /// (rank r runs on GPU r / K).
    #[arg(
        long,
        value_name = "K",
        default_value = "1",
        value_parser = ranks_per_gpu_arg
    )]
    pub ranks_per_gpu: usize,
    /// CUDA backend: also run NCCL's collective on the same sizes (libnccl.so.2, loaded at
    /// run time; TOPO_NCCL names it) and print both busbw columns.
    #[arg(long, value_enum, value_name = "LIB")]
    pub compare: Option<Compare>,
    /// CUDA backend: measure the device-to-device copy ceiling on GPU 0 first; with every
    /// rank on one GPU, each row shows the ceiling in busbw and measured/ceiling.
    #[arg(long)]
    pub copy_ceiling: bool,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum)]
pub enum Compare {
    Nccl,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum)]
pub enum VerifyFormat {
    Text,
    Json,
    /// nccl-tests' own layout (2.19): its header, rank lines, one row per size with the
    /// out-of-place and in-place columns, and its footer; what nccl-tests parsers read.
    NcclTests,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum)]
pub enum CalibrateFormat {
    Text,
    Json,
}

#[derive(Args, Debug)]
pub struct CalibrateArgs {
    /// Largest message measured.
    #[arg(
        short = 'e',
        long = "maxbytes",
        default_value = "64M",
        value_parser = buffer_size_arg
    )]
    pub max_bytes: String,
    /// Iterations per size.
    #[arg(short = 'n', long = "iters", default_value = "5")]
    pub iters: usize,
    /// Sweeps per link; per size the fastest is kept (robust to other processes' load).
    #[arg(short = 'r', long = "repeats", default_value = "3")]
    pub repeats: usize,
    #[arg(long, value_enum, default_value = "text")]
    pub format: CalibrateFormat,
}

/// The most ranks `topo verify` runs (the runtime's own limit on a job's world size).
pub const MAX_RANKS: usize = topo_runtime::launch::MAX_RANKS;
/// The most channels per rank: what the host backend clamps to, above CUDA's 32.
pub const MAX_CHANNELS: usize = 64;
/// The most ranks per GPU: 64 already share one GPU's SMs two by two on the largest GPUs.
pub const MAX_RANKS_PER_GPU: usize = 64;

/// A count between `lo` and `hi`, checked where clap parses it so that no later arithmetic
/// (buffers, FIFOs per pair of ranks) sees a value it cannot size.
fn count_in(s: &str, lo: usize, hi: usize) -> std::result::Result<usize, String> {
    let n: usize = s
        .trim()
        .parse()
        .map_err(|_| format!("'{s}' is not a whole number from {lo} to {hi}"))?;
    if !(lo..=hi).contains(&n) {
        return Err(format!("{n} is outside {lo} to {hi}"));
    }
    Ok(n)
}

fn ranks_arg(s: &str) -> std::result::Result<usize, String> {
    count_in(s, 1, MAX_RANKS)
}

fn nchannels_arg(s: &str) -> std::result::Result<usize, String> {
    count_in(s, 1, MAX_CHANNELS)
}

fn ranks_per_gpu_arg(s: &str) -> std::result::Result<usize, String> {
    count_in(s, 1, MAX_RANKS_PER_GPU)
}

/// Seconds above 0 and at most a day: longer is no timeout at all, and `Duration` panics on
/// NaN, infinities, negatives and values past about 1.8e19 s.
fn timeout_arg(s: &str) -> std::result::Result<f64, String> {
    use topo_runtime::verify::MAX_TIMEOUT_S;
    let bad = || format!("'{s}' is not a number of seconds above 0 and at most {MAX_TIMEOUT_S}");
    let t: f64 = s.trim().parse().map_err(|_| bad())?;
    if !(t.is_finite() && t > 0.0 && t <= MAX_TIMEOUT_S) {
        return Err(bad());
    }
    Ok(t)
}

/// A largest message size for verify and calibrate: every rank's two buffers of it live in
/// this host's memory, so both share one cap, and the hint is written from it.
pub fn buffer_size_arg(s: &str) -> std::result::Result<String, String> {
    let cap = topo_runtime::verify::MAX_BUFFER_BYTES as u64;
    let n = crate::util::parse_size(s)?;
    if n > cap {
        let cap = crate::util::human_size(cap);
        return Err(format!(
            "more than {cap} per buffer; every rank's buffers live in this host's memory, pass -e {cap} or less"
        ));
    }
    Ok(s.to_string())
}

/// `1st`, `2nd`, `3rd`, `4th`: which of a repeated flag.
#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn timeouts_are_finite_positive_and_at_most_a_day() {
        for bad in [
            "nan", "NaN", "inf", "-inf", "1e30", "-1", "0", "86401", "x", "",
        ] {
            assert!(timeout_arg(bad).is_err(), "{bad}");
        }
        assert_eq!(timeout_arg("0.5"), Ok(0.5));
        assert_eq!(timeout_arg("86400"), Ok(86_400.0));
    }

    #[test]
    fn counts_are_bounded() {
        for bad in ["0", "4097", "18446744073709551615", "-1", "1.5", "many"] {
            assert!(ranks_arg(bad).is_err(), "{bad}");
        }
        assert_eq!(ranks_arg("1"), Ok(1));
        assert_eq!(ranks_arg("4096"), Ok(4096));
        assert!(nchannels_arg("0").is_err());
        assert!(nchannels_arg("65").is_err());
        assert_eq!(nchannels_arg("64"), Ok(64));
        assert!(ranks_per_gpu_arg("0").is_err());
        assert!(ranks_per_gpu_arg("65").is_err());
    }

    #[test]
    fn vocabulary_flags_parse_through_from_str_with_one_line_errors() {
        assert_eq!(dtype_arg("bf16"), Ok(DataType::Bf16));
        assert_eq!(dtype_arg("float8").unwrap_err().line, "-d float8: unknown");
        assert_eq!(
            op_arg("xor").unwrap_err().hint,
            "use one of sum, prod, min, max, avg"
        );
        assert_eq!(proto_arg("LL128"), Ok(Protocol::Ll128));
        assert_eq!(
            host_algo_arg("nvls-tree").unwrap_err().line,
            "--algo nvls_tree: the host backend runs ring, tree or direct"
        );
        assert_eq!(host_algo_arg("Direct"), Ok(Algorithm::Direct));
        assert_eq!(
            verify_collectives("allreduce, all_gather").unwrap().0,
            [Collective::AllReduce, Collective::AllGather]
        );
        assert_eq!(verify_collectives("ALL").unwrap().0, Collective::RUN_ORDER);
        assert_eq!(
            verify_collectives("gather").unwrap_err().line,
            "unknown collective 'gather'"
        );
        assert_eq!(
            plan_collectives("allreduce,allreduce,bcast").unwrap().0,
            [Collective::AllReduce, Collective::Broadcast]
        );
        assert!(
            plan_collectives("sendrecv")
                .unwrap_err()
                .line
                .starts_with("sendrecv has no NCCL cost model")
        );
        assert_eq!(plan_collectives("all").unwrap().0, Collective::TUNED);
    }

    #[test]
    fn buffer_sizes_share_one_cap_named_in_the_hint() {
        assert_eq!(buffer_size_arg("16G").as_deref(), Ok("16G"));
        let e = buffer_size_arg("1T").unwrap_err();
        assert!(
            e.contains("more than 16G per buffer") && e.contains("pass -e 16G or less"),
            "{e}"
        );
        assert!(buffer_size_arg("17179869185").is_err());
        let e = buffer_size_arg("18446744073709551615").unwrap_err();
        assert!(e.contains("16G"), "{e}");
        assert!(buffer_size_arg("99999999999999999999").is_err());
        assert!(buffer_size_arg("16E").is_err());
    }
}
