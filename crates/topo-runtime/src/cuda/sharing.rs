//! How ranks share one GPU (issue 47 item 4), decided before any CUDA context exists.
//!
//! Threads of one process share one context, whose streams the driver feeds through
//! `CUDA_DEVICE_MAX_CONNECTIONS` hardware queues (8 unless set, at most 32: the CUDA C
//! programming guide, "Implicit synchronization"/environment variables); streams past that
//! share a queue, and a rank's kernel then waits behind another rank's kernel that waits for
//! it. The variable is read when the context is created, so [`prepare_queues`] sets it first
//! (one queue per rank's stream plus the default stream), and refuses, naming the fix, what
//! no setting can give. Each rank already has one stream only (`device::rank_main`), so
//! fewer streams per rank is not an option left.
//!
//! Processes have a context each, and contexts on one GPU take turns in time slices unless an
//! MPS server runs them at once (measured on an H200, 2026-12-04: ~4 ms per AllReduce at any
//! size). [`mps_plan`] decides whether a process job runs under MPS (one already running, or
//! one this run starts where `nvidia-cuda-mps-control` is installed) or in time slices, and
//! [`sharing_note`] says which in the report.
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

use crate::error::{Result, RuntimeError};

/// The driver's queues per context unless `CUDA_DEVICE_MAX_CONNECTIONS` says otherwise.
pub const DEFAULT_QUEUES: usize = 8;
/// The most the driver gives.
pub const MAX_QUEUES: usize = 32;

/// What the queue count needs for `rpg` ranks per GPU as threads.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Queues {
    /// The queues there are (the variable's or the default) are enough.
    Enough(usize),
    /// The variable is unset and the default is too few: set it to this.
    Set(usize),
    /// No queue count the driver gives is enough, or the variable is set too low: the error.
    Refuse(String),
}

/// The queue count `rpg` ranks of one process on one GPU need, against the variable's value.
pub fn queues(rpg: usize, var: Option<&str>) -> Queues {
    let need = rpg + 1;
    let have = match var.map(str::trim).filter(|v| !v.is_empty()) {
        None if need <= DEFAULT_QUEUES => return Queues::Enough(DEFAULT_QUEUES),
        None if need <= MAX_QUEUES => return Queues::Set(need),
        None => MAX_QUEUES,
        Some(v) => match v.parse::<usize>() {
            Ok(n) => n.clamp(1, MAX_QUEUES),
            Err(_) => {
                return Queues::Refuse(format!(
                    "CUDA_DEVICE_MAX_CONNECTIONS={v} is not a number: unset it or set {} to {MAX_QUEUES}",
                    need.min(MAX_QUEUES)
                ));
            }
        },
    };
    if need <= have {
        return Queues::Enough(have);
    }
    let hint = if need <= MAX_QUEUES {
        format!("set CUDA_DEVICE_MAX_CONNECTIONS={need} (at most {MAX_QUEUES})")
    } else {
        format!(
            "use at most {} --ranks-per-gpu, or --launch processes",
            MAX_QUEUES - 1
        )
    };
    Queues::Refuse(format!(
        "{rpg} ranks per GPU need {need} hardware queues and the driver gives {have}: {hint}"
    ))
}

/// Before any CUDA context: set `CUDA_DEVICE_MAX_CONNECTIONS` where `rpg` ranks per GPU as
/// threads need more queues than the default and the variable is unset; the error where no
/// setting is enough (`threads`: the job runs as threads of this process; process jobs have a
/// context per rank and need nothing). Returns a note when it set the variable.
pub fn prepare_queues(rpg: usize, threads: bool) -> Result<Option<String>> {
    let var = std::env::var("CUDA_DEVICE_MAX_CONNECTIONS").ok();
    match queues(rpg, var.as_deref()) {
        Queues::Enough(_) => Ok(None),
        Queues::Set(n) => {
            // SAFETY: called from `topo verify` before the CUDA driver is initialised and
            // before the run starts any thread (the ranks, the progress bar), so nothing
            // reads the environment concurrently.
            unsafe { std::env::set_var("CUDA_DEVICE_MAX_CONNECTIONS", n.to_string()) };
            Ok(Some(format!(
                "CUDA_DEVICE_MAX_CONNECTIONS={n} set for {rpg} ranks per GPU (one hardware queue per rank's stream and one for the default stream)"
            )))
        }
        Queues::Refuse(e) if threads => Err(RuntimeError::InvalidPlan(e)),
        Queues::Refuse(_) => Ok(None),
    }
}

/// How the processes of a job that share a GPU run.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub enum Sharing {
    /// One rank per GPU, or threads of one process: nothing shared between contexts.
    #[default]
    Alone,
    /// Under an MPS server: `started` when this run started it.
    Mps { started: bool },
    /// In time slices, and why MPS is not used.
    TimeSlices(String),
}

/// What to do about MPS for a job.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum MpsPlan {
    NotNeeded,
    /// A server answers at this pipe directory.
    UseRunning,
    /// Start one with this `nvidia-cuda-mps-control`.
    Start(PathBuf),
    TimeSlices(String),
}

/// The decision: MPS matters for processes that share a GPU; a running server is used; else
/// one is started where the control program is installed, unless `not_here` says why not
/// (`TOPO_CUDA_MPS=0`; under a launcher, whose other ranks topo did not start).
pub fn mps_plan(
    processes: bool,
    rpg: usize,
    running: bool,
    control: Option<PathBuf>,
    not_here: Option<&str>,
) -> MpsPlan {
    if !processes || rpg < 2 {
        return MpsPlan::NotNeeded;
    }
    if running {
        return MpsPlan::UseRunning;
    }
    if let Some(why) = not_here {
        return MpsPlan::TimeSlices(why.into());
    }
    match control {
        Some(c) => MpsPlan::Start(c),
        None => MpsPlan::TimeSlices("nvidia-cuda-mps-control is not installed".into()),
    }
}

/// The report's line on how the ranks that share a GPU ran.
pub fn sharing_note(rpg: usize, s: &Sharing) -> Option<String> {
    match s {
        Sharing::Alone => None,
        Sharing::Mps { started } => Some(format!(
            "{rpg} processes share each GPU under MPS ({}): their kernels run at once, as threads' do",
            if *started {
                "a server this run started and stopped"
            } else {
                "a server already running"
            }
        )),
        Sharing::TimeSlices(why) => Some(format!(
            "{rpg} processes share each GPU in time slices (no MPS: {why}): their contexts take turns of a few ms, so these times measure the GPU's scheduler, not the transport"
        )),
    }
}

/// The MPS pipe directory clients and the control program use.
pub fn pipe_dir(var: &dyn Fn(&str) -> Option<String>) -> PathBuf {
    var("CUDA_MPS_PIPE_DIRECTORY")
        .filter(|d| !d.is_empty())
        .map_or_else(|| PathBuf::from("/tmp/nvidia-mps"), PathBuf::from)
}

/// `name` on `PATH`.
pub fn on_path(name: &str, var: &dyn Fn(&str) -> Option<String>) -> Option<PathBuf> {
    var("PATH")?
        .split(':')
        .filter(|d| !d.is_empty())
        .map(|d| Path::new(d).join(name))
        .find(|p| p.is_file())
}

/// An MPS server this run started; stopped (`quit`) when dropped.
pub struct MpsServer {
    control: PathBuf,
}

impl MpsServer {
    /// `nvidia-cuda-mps-control -d`, then wait (at most 5 s) for its control pipe.
    pub fn start(control: &Path, pipe: &Path) -> Result<MpsServer> {
        let st = Command::new(control)
            .arg("-d")
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .status()
            .map_err(|e| RuntimeError::io("nvidia-cuda-mps-control -d", e))?;
        if !st.success() {
            return Err(RuntimeError::Unsupported(format!(
                "nvidia-cuda-mps-control -d failed ({st})"
            )));
        }
        let t = std::time::Instant::now();
        while !pipe.join("control").exists() {
            if t.elapsed() > std::time::Duration::from_secs(5) {
                return Err(RuntimeError::Unsupported(format!(
                    "the MPS server started but {} did not appear within 5 s",
                    pipe.join("control").display()
                )));
            }
            std::thread::sleep(std::time::Duration::from_millis(50));
        }
        Ok(MpsServer {
            control: control.to_path_buf(),
        })
    }
}

impl Drop for MpsServer {
    fn drop(&mut self) {
        use std::io::Write;
        if let Ok(mut c) = Command::new(&self.control)
            .stdin(Stdio::piped())
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
        {
            if let Some(mut i) = c.stdin.take() {
                let _ = i.write_all(b"quit\n");
            }
            let _ = c.wait();
        }
    }
}

/// Before any CUDA context of a job of `rpg` ranks per GPU: use or start MPS for processes
/// (`may_start`: topo starts every rank, so all of them will find the server), and say how
/// the ranks will share the GPU. The server (when started) lives as long as the returned
/// guard.
pub fn prepare_mps(processes: bool, rpg: usize, may_start: bool) -> (Sharing, Option<MpsServer>) {
    let var = |k: &str| std::env::var(k).ok();
    let pipe = pipe_dir(&var);
    let not_here = if var("TOPO_CUDA_MPS").as_deref() == Some("0") {
        Some("TOPO_CUDA_MPS=0")
    } else if !may_start {
        Some("none running, and under a launcher topo starts none")
    } else {
        None
    };
    let plan = mps_plan(
        processes,
        rpg,
        pipe.join("control").exists(),
        on_path("nvidia-cuda-mps-control", &var),
        not_here,
    );
    match plan {
        MpsPlan::NotNeeded => (Sharing::Alone, None),
        MpsPlan::UseRunning => (Sharing::Mps { started: false }, None),
        MpsPlan::TimeSlices(why) => (Sharing::TimeSlices(why), None),
        MpsPlan::Start(c) => match MpsServer::start(&c, &pipe) {
            Ok(s) => (Sharing::Mps { started: true }, Some(s)),
            Err(e) => (Sharing::TimeSlices(e.to_string()), None),
        },
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn queues_are_set_before_the_context_or_refused_by_name() {
        // Up to 7 ranks fit the driver's 8 queues with the default stream.
        assert_eq!(queues(7, None), Queues::Enough(8));
        // 8 ranks: the variable is set, not left to stall (the H200's 5 of 6 stalls).
        assert_eq!(queues(8, None), Queues::Set(9));
        assert_eq!(queues(31, None), Queues::Set(32));
        // Set by the user: enough, or an error naming the value that works.
        assert_eq!(queues(8, Some("32")), Queues::Enough(32));
        let Queues::Refuse(e) = queues(8, Some("8")) else {
            panic!()
        };
        assert!(
            e.contains("need 9") && e.contains("CUDA_DEVICE_MAX_CONNECTIONS=9"),
            "{e}"
        );
        // Past what the driver gives: no setting helps.
        let Queues::Refuse(e) = queues(40, None) else {
            panic!()
        };
        assert!(e.contains("at most 31 --ranks-per-gpu"), "{e}");
        let Queues::Refuse(e) = queues(40, Some("64")) else {
            panic!()
        };
        assert!(e.contains("the driver gives 32"), "{e}");
        let Queues::Refuse(e) = queues(2, Some("junk")) else {
            panic!()
        };
        assert!(e.contains("junk is not a number"), "{e}");
        // An empty value is unset.
        assert_eq!(queues(8, Some(" ")), Queues::Set(9));
    }

    #[test]
    fn processes_sharing_a_gpu_use_mps_where_it_can_run() {
        let ctl = Some(PathBuf::from("/usr/bin/nvidia-cuda-mps-control"));
        assert_eq!(
            mps_plan(false, 8, false, ctl.clone(), None),
            MpsPlan::NotNeeded
        );
        assert_eq!(
            mps_plan(true, 1, false, ctl.clone(), None),
            MpsPlan::NotNeeded
        );
        assert_eq!(
            mps_plan(true, 2, true, None, Some("x")),
            MpsPlan::UseRunning
        );
        assert_eq!(
            mps_plan(true, 2, false, ctl.clone(), None),
            MpsPlan::Start(ctl.clone().unwrap())
        );
        assert_eq!(
            mps_plan(true, 2, false, ctl, Some("TOPO_CUDA_MPS=0")),
            MpsPlan::TimeSlices("TOPO_CUDA_MPS=0".into())
        );
        let MpsPlan::TimeSlices(why) = mps_plan(true, 4, false, None, None) else {
            panic!()
        };
        assert!(why.contains("not installed"));
    }

    #[test]
    fn the_report_says_mps_or_time_slices() {
        assert_eq!(sharing_note(1, &Sharing::Alone), None);
        let m = sharing_note(2, &Sharing::Mps { started: true }).unwrap();
        assert!(
            m.contains("under MPS") && m.contains("this run started"),
            "{m}"
        );
        let m = sharing_note(2, &Sharing::Mps { started: false }).unwrap();
        assert!(m.contains("already running"), "{m}");
        let t = sharing_note(4, &Sharing::TimeSlices("x".into())).unwrap();
        assert!(
            t.contains("4 processes share each GPU in time slices (no MPS: x)"),
            "{t}"
        );
    }

    #[test]
    fn the_pipe_directory_and_programs_are_found() {
        assert_eq!(pipe_dir(&|_| None), PathBuf::from("/tmp/nvidia-mps"));
        assert_eq!(
            pipe_dir(&|k| (k == "CUDA_MPS_PIPE_DIRECTORY").then(|| "/x/mps".into())),
            PathBuf::from("/x/mps")
        );
        assert!(
            on_path("sh", &|k| (k == "PATH")
                .then(|| "/nonexistent:/bin:/usr/bin".into()))
            .is_some()
        );
        assert!(
            on_path("no-such-program-47", &|k| (k == "PATH")
                .then(|| "/bin".into()))
            .is_none()
        );
    }
}
