//! What the lines around an nccl-tests table say about its run: the launch command (`mpirun
//! -np 16 ... all_reduce_perf -g 1`, `srun -N 2 --ntasks-per-node 8 ...`, `./all_reduce_perf
//! -g 8`) and the settings given on any line (`-x NAME=VAL`, `--env NAME=VAL`, `export
//! NAME=VAL`, `NAME=VAL cmd`, anywhere in the line, prose included).
//!
//! Flags mirrored: nccl-tests `-g` (GPUs per thread) and `-t` (threads per process), src/common.cu
//! 2.17; Open MPI's `-np`/`-n` (processes), `-N`/`-npernode`/`--npernode` (processes per node);
//! Slurm's `-n`/`--ntasks`, `-N`/`--nodes`, `--ntasks-per-node`; torchrun's `--nnodes` and
//! `--nproc-per-node`.

use serde::Serialize;

/// The launch commands kept per input: a file is a paste of a few runs, not a script.
pub const MAX_LAUNCHES: usize = 64;
/// A command continued with `\` is joined over at most this many lines.
pub const MAX_CONTINUED: usize = 64;

/// One launch command and the rank arithmetic it states.
#[derive(Clone, Debug, Default, PartialEq, Serialize)]
pub struct Launch {
    /// The line (1-based) the command starts on, and its text (continuations joined).
    pub line: usize,
    pub text: String,
    /// `all_reduce_perf`, the nccl-tests program it runs.
    pub program: Option<String>,
    /// Processes in all (`-np`, `-n`, `--ntasks`).
    pub procs: Option<u64>,
    /// Nodes (`srun -N`, `--nodes`, `--nnodes`).
    pub nodes: Option<u64>,
    /// Processes per node (`mpirun -N`, `-npernode`, `--ntasks-per-node`, `--nproc-per-node`).
    pub per_node: Option<u64>,
    /// nccl-tests `-g` and `-t`: GPUs per thread, threads per process.
    pub gpus: Option<u64>,
    pub threads: Option<u64>,
}

impl Launch {
    /// The ranks the command implies: processes (or nodes x processes per node) x threads x
    /// GPUs; `None` where it does not give the processes.
    pub fn ranks(&self) -> Option<u64> {
        let procs = self.procs.or_else(|| Some(self.nodes? * self.per_node?))?;
        let per = self.gpus.unwrap_or(1).max(1) * self.threads.unwrap_or(1).max(1);
        procs.checked_mul(per)
    }
}

const LAUNCHERS: [&str; 10] = [
    "mpirun", "mpiexec", "orterun", "prterun", "srun", "torchrun", "jsrun", "aprun", "flux",
    "sbatch",
];

/// Whether `line` runs a launcher or an nccl-tests program (`./build/all_reduce_perf`); an
/// NCCL log line that names one is not a command.
pub fn is_command(line: &str) -> bool {
    if line.contains(" NCCL INFO ") || line.contains(" NCCL WARN ") {
        return false;
    }
    words(line).iter().any(|w| {
        let base = w.rsplit('/').next().unwrap_or(w);
        LAUNCHERS.contains(&base) || is_program(base)
    })
}

fn is_program(base: &str) -> bool {
    base.len() > 5 && (base.ends_with("_perf") || base.ends_with("_perf_mpi"))
}

/// The words of a shell line, quotes grouping (`NCCL_NET="AWS Libfabric"` is one word, quotes
/// dropped). Unbalanced quotes run to the end of the line.
pub fn words(line: &str) -> Vec<String> {
    let mut out = vec![];
    let mut cur = String::new();
    let mut quote: Option<char> = None;
    let mut any = false;
    for c in line.chars() {
        match (quote, c) {
            (Some(q), c) if c == q => quote = None,
            (Some(_), c) => cur.push(c),
            (None, '"' | '\'') => {
                quote = Some(c);
                any = true;
            }
            (None, c) if c.is_whitespace() => {
                if any || !cur.is_empty() {
                    out.push(std::mem::take(&mut cur));
                }
                any = false;
            }
            (None, c) => cur.push(c),
        }
    }
    if any || !cur.is_empty() {
        out.push(cur);
    }
    out
}

/// Reads a command's flags; `line` is where it starts.
pub fn read(text: &str, line: usize) -> Launch {
    let w = words(text);
    let mut l = Launch {
        line,
        text: text.to_string(),
        ..Default::default()
    };
    let prog = w
        .iter()
        .position(|x| is_program(x.rsplit('/').next().unwrap_or(x)));
    if let Some(p) = prog {
        let base = w[p].rsplit('/').next().unwrap_or(&w[p]);
        l.program = Some(base.trim_end_matches("_mpi").to_string());
    }
    let slurm = w.iter().any(|x| {
        let b = x.rsplit('/').next().unwrap_or(x);
        b == "srun" || b == "sbatch"
    });
    let (launcher, test) = w.split_at(prog.map_or(w.len(), |p| p + 1));
    for (flag, value) in flags(launcher) {
        let Ok(n) = value.parse::<u64>() else {
            continue;
        };
        match flag {
            "-np" | "--np" | "-n" | "--ntasks" => l.procs = Some(n),
            "-N" if slurm => l.nodes = Some(n),
            "-N" | "-npernode" | "--npernode" | "--ntasks-per-node" | "--nproc-per-node"
            | "--nproc_per_node" => l.per_node = Some(n),
            "--nodes" | "--nnodes" => l.nodes = Some(n),
            _ => {}
        }
    }
    for (flag, value) in flags(test) {
        let Ok(n) = value.parse::<u64>() else {
            continue;
        };
        match flag {
            "-g" | "--ngpus" => l.gpus = Some(n),
            "-t" | "--nthreads" => l.threads = Some(n),
            _ => {}
        }
    }
    l
}

/// `(flag, value)` pairs: `-np 16`, `--nodes=2`.
fn flags(w: &[String]) -> Vec<(&str, &str)> {
    let mut out = vec![];
    for (i, x) in w.iter().enumerate() {
        if !x.starts_with('-') {
            continue;
        }
        if let Some((f, v)) = x.split_once('=') {
            out.push((f, v));
        } else if let Some(v) = w.get(i + 1) {
            out.push((x.as_str(), v.as_str()));
        }
    }
    out
}

/// `NCCL_*` and `CUDA_VISIBLE_DEVICES` settings a line gives a value to, in any of the forms a
/// launch line or its prose uses; a value's trailing punctuation (`NCCL_ALGO=Ring,` in a
/// sentence) is not part of it.
pub fn settings(line: &str) -> Vec<(String, String)> {
    if !line.contains("NCCL_") && !line.contains("CUDA_VISIBLE_DEVICES") {
        return vec![];
    }
    let mut out = vec![];
    for w in words(line) {
        let w = w
            .strip_prefix("--env=")
            .or_else(|| w.strip_prefix("-x="))
            .unwrap_or(&w);
        let w = w.trim_start_matches(['`', '(', '*']);
        let Some((name, value)) = w.split_once('=') else {
            continue;
        };
        let value = value.trim_end_matches(['.', ',', ';', ':', ')', '`', '*', '"', '\'']);
        if is_setting(name) && !value.is_empty() && !value.starts_with('$') {
            out.push((name.to_string(), value.to_string()));
        }
    }
    out
}

fn is_setting(name: &str) -> bool {
    (name.starts_with("NCCL_") && name.len() > 5 || name == "CUDA_VISIBLE_DEVICES")
        && name
            .chars()
            .all(|c| c.is_ascii_uppercase() || c.is_ascii_digit() || c == '_')
}

#[cfg(test)]
mod tests {
    use super::*;

    fn env(line: &str) -> Vec<(String, String)> {
        settings(line)
    }

    fn kv(k: &str, v: &str) -> (String, String) {
        (k.to_string(), v.to_string())
    }

    #[test]
    fn every_form_of_a_setting_anywhere_in_a_line_is_read() {
        let one_line = "$ mpirun --allow-run-as-root --hostfile hosts.txt -x  NCCL_ALGO=Tree -x NCCL_DEBUG=INFO -x LD_LIBRARY_PATH -x NCCL_IB_HCA=mlx5_0,mlx5_1 -np 2 ./all_reduce_perf -b 2M -g 1";
        assert_eq!(
            env(one_line),
            [
                kv("NCCL_ALGO", "Tree"),
                kv("NCCL_DEBUG", "INFO"),
                kv("NCCL_IB_HCA", "mlx5_0,mlx5_1")
            ]
        );
        assert_eq!(
            env("export NCCL_NET=\"AWS Libfabric\""),
            [kv("NCCL_NET", "AWS Libfabric")]
        );
        assert_eq!(
            env("srun --env=NCCL_PROTO=Simple all_reduce_perf"),
            [kv("NCCL_PROTO", "Simple")]
        );
        assert_eq!(
            env("NCCL_MIN_NCHANNELS=8 CUDA_VISIBLE_DEVICES=0,1 ./all_reduce_perf"),
            [
                kv("NCCL_MIN_NCHANNELS", "8"),
                kv("CUDA_VISIBLE_DEVICES", "0,1")
            ]
        );
        // Prose: the sentence's punctuation is not the value.
        assert_eq!(
            env("We set NCCL_ALGO=Ring, then NCCL_PROTO=Simple."),
            [kv("NCCL_ALGO", "Ring"), kv("NCCL_PROTO", "Simple")]
        );
        // A shell variable and a bare `-x NAME` carry no value here.
        assert!(env("-x NCCL_SOCKET_IFNAME=$IFACE -x NCCL_DEBUG").is_empty());
    }

    #[test]
    fn launch_commands_give_the_ranks() {
        let l = read(
            "mpirun -np 16 -npernode 8 -x NCCL_DEBUG=INFO /opt/nccl-tests/build/all_reduce_perf -b 8 -e 8G -f 2 -g 1",
            3,
        );
        assert_eq!(l.program.as_deref(), Some("all_reduce_perf"));
        assert_eq!((l.procs, l.per_node, l.gpus), (Some(16), Some(8), Some(1)));
        assert_eq!(l.ranks(), Some(16));
        let s = read("srun -N 4 --ntasks-per-node=2 all_gather_perf -g 4", 1);
        assert_eq!(
            (s.nodes, s.per_node, s.ranks()),
            (Some(4), Some(2), Some(32))
        );
        let g = read("#  ./all_reduce_perf -b 8 -e 128M -f 2 -g 2", 1);
        assert_eq!((g.procs, g.gpus, g.ranks()), (None, Some(2), None));
        // `-n` after the program is nccl-tests' iteration count, not processes.
        let n = read("./all_reduce_perf -b 2M -e 16G -n 10 -g 1", 1);
        assert_eq!(n.procs, None);
        assert!(is_command("(head) $ torchrun --nnodes 2 train.py"));
        assert!(!is_command("the perf of all reduce"));
    }
}
