//! Processes, env (torchrun / Slurm / Open MPI style) and fault tests. Child processes are
//! this test binary re-executed with `worker_entry` as the only test to run.
use std::ffi::OsString;
use std::net::TcpListener;
use std::time::Duration;

use topo_runtime::job::Job;
use topo_runtime::launch::{self, EnvInfo, Launch, ProcessSpec};
use topo_runtime::verify::{VerifyReport, VerifyRequest};
use topo_runtime::{Algorithm, Collective, DataType, Protocol, Reduction, RuntimeError};

/// `req` with this process as rank 0 of worker processes started from `spec`.
fn run_processes(req: &VerifyRequest, spec: &ProcessSpec) -> Result<VerifyReport, RuntimeError> {
    Job::new(req, Launch::Processes(spec.clone()))
        .run()
        .map(|r| r.expect("rank 0 reports"))
}

/// `req` as the rank `env` describes, over TCP or not, with this rank's own `timeout`.
fn run_env_with(
    req: &VerifyRequest,
    env: &EnvInfo,
    tcp: bool,
    timeout: Duration,
) -> Result<Option<VerifyReport>, RuntimeError> {
    Job::new(req, Launch::Env)
        .as_rank(env.clone())
        .tcp(tcp)
        .timeout(timeout)
        .run()
}

/// Entry of the worker processes; a no-op when run as a normal test.
#[test]
fn worker_entry() {
    if std::env::var(launch::ENV_SOCKET).is_err() {
        return;
    }
    if let (Ok(ms), Ok(rank)) = (
        std::env::var("TEST_DIE_AFTER_MS"),
        std::env::var(launch::ENV_RANK),
    ) && rank == "1"
    {
        let ms: u64 = ms.parse().unwrap();
        std::thread::spawn(move || {
            std::thread::sleep(Duration::from_millis(ms));
            std::process::exit(9);
        });
    }
    match topo_runtime::job::worker_main() {
        Ok(_) => std::process::exit(0),
        Err(e) => {
            eprintln!("worker error: {e}");
            std::process::exit(1)
        }
    }
}

fn spec(envs: &[(&str, &str)]) -> ProcessSpec {
    ProcessSpec {
        program: std::env::current_exe().unwrap(),
        args: ["worker_entry", "--exact", "--nocapture", "--test-threads=1"]
            .map(OsString::from)
            .to_vec(),
        envs: envs.iter().map(|(k, v)| (k.into(), v.into())).collect(),
    }
}

fn small(ranks: usize) -> VerifyRequest {
    VerifyRequest {
        ranks,
        collectives: Collective::RUN_ORDER.to_vec(),
        min_bytes: 0,
        max_bytes: 40_000,
        step_factor: 9.0,
        iters: 2,
        warmup: 1,
        timeout_s: 20.0,
        nchannels: 2,
        ..VerifyRequest::default()
    }
}

fn shm_entries() -> Vec<String> {
    std::fs::read_dir("/dev/shm")
        .map(|d| {
            d.flatten()
                .map(|e| e.file_name().to_string_lossy().into_owned())
                .collect()
        })
        .unwrap_or_default()
}

#[test]
fn processes_run_every_collective_right() {
    let before = shm_entries();
    for (n, algo, proto) in [
        (2, Algorithm::Direct, Protocol::Simple),
        (3, Algorithm::Ring, Protocol::Ll),
        (3, Algorithm::Tree, Protocol::Ll128),
        (8, Algorithm::Ring, Protocol::Simple),
    ] {
        let mut req = small(n);
        req.algorithm = Some(algo);
        req.protocol = Some(proto);
        if n == 8 {
            req.collectives = vec![Collective::AllReduce, Collective::AllToAll];
            req.dtype = DataType::Bf16;
            req.op = Reduction::Max;
        }
        if algo == Algorithm::Direct {
            req.shared_min_bytes = 0;
        }
        let rep = run_processes(&req, &spec(&[])).unwrap();
        assert_eq!(rep.wrong_total(), 0, "{}", rep.render_text());
        assert!(rep.rows.iter().all(|r| r.out_of_place.wrong == Some(0)));
    }
    assert_eq!(shm_entries(), before, "segments left in /dev/shm");
}

#[test]
fn a_killed_rank_is_named_and_nothing_is_left() {
    let before = shm_entries();
    let mut req = small(3);
    req.collectives = vec![Collective::AllReduce];
    req.min_bytes = 1 << 20;
    req.max_bytes = 1 << 20;
    req.iters = 1_000_000;
    req.algorithm = Some(Algorithm::Ring);
    req.timeout_s = 10.0;
    // Seen as the rank's death (its pidfd), not as the 10 s timeout running out.
    let err = run_processes(&req, &spec(&[("TEST_DIE_AFTER_MS", "300")])).unwrap_err();
    assert!(
        matches!(err, RuntimeError::PeerLost { rank: 1, .. }),
        "{err}"
    );
    assert!(err.to_string().contains("lost rank 1"), "{err}");
    assert_eq!(shm_entries(), before);
}

fn free_port() -> u16 {
    TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port()
}

fn env(rank: usize, world: usize, port: u16, token: &str) -> EnvInfo {
    EnvInfo {
        launcher: "torchrun",
        rank,
        world,
        local_rank: rank,
        single_host: true,
        master_addr: "127.0.0.1".into(),
        master_port: port,
        token: token.into(),
    }
}

/// Run env-mode ranks as threads (rank i starts after `delay[i]`).
fn run_env_threads(
    req: &VerifyRequest,
    envs: Vec<EnvInfo>,
    tcp: bool,
    timeout: Duration,
) -> Vec<Result<Option<topo_runtime::verify::VerifyReport>, RuntimeError>> {
    std::thread::scope(|s| {
        let hs: Vec<_> = envs
            .into_iter()
            .map(|e| {
                let req = req.clone();
                s.spawn(move || {
                    std::thread::sleep(Duration::from_millis(50 * e.rank as u64));
                    run_env_with(&req, &e, tcp, timeout)
                })
            })
            .collect();
        hs.into_iter().map(|h| h.join().unwrap()).collect()
    })
}

#[test]
fn env_ranks_over_tcp_and_shm_are_right() {
    for (tcp, n) in [(true, 3), (false, 3), (true, 2)] {
        let port = free_port();
        let token = format!("test-{port}");
        let mut req = small(n);
        req.algorithm = if tcp { Some(Algorithm::Ring) } else { None };
        let out = run_env_threads(
            &req,
            (0..n).map(|r| env(r, n, port, &token)).collect(),
            tcp,
            Duration::from_secs(20),
        );
        let mut reports = 0;
        for (r, o) in out.into_iter().enumerate() {
            match o {
                Ok(Some(rep)) => {
                    assert_eq!(rep.wrong_total(), 0, "{}", rep.render_text());
                    assert_eq!(rep.transport.name(), if tcp { "tcp" } else { "shm" });
                    reports += 1;
                }
                Ok(None) => assert_ne!(r, 0),
                Err(e) => panic!("rank {r} tcp={tcp}: {e}"),
            }
        }
        assert_eq!(reports, 1);
    }
}

#[test]
fn a_stranger_is_refused_while_the_job_completes() {
    let port = free_port();
    let token = "job-ok";
    let req = VerifyRequest {
        collectives: vec![Collective::AllReduce],
        ..small(2)
    };
    let stranger = std::thread::spawn(move || {
        std::thread::sleep(Duration::from_millis(20));
        // A TCP peer with the wrong token and a right-token peer with the wrong world size.
        let mut e = env(1, 2, port, "wrong-token");
        e.rank = 1;
        let r1 = run_env_with(&small(2), &e, true, Duration::from_secs(3));
        let r2 = run_env_with(
            &small(3),
            &env(2, 3, port, "job-ok"),
            true,
            Duration::from_secs(3),
        );
        (
            r1.err().map(|e| e.to_string()),
            r2.err().map(|e| e.to_string()),
        )
    });
    std::thread::sleep(Duration::from_millis(5));
    let out = std::thread::scope(|s| {
        let a =
            s.spawn(|| run_env_with(&req, &env(0, 2, port, token), true, Duration::from_secs(20)));
        let b = s.spawn(|| {
            std::thread::sleep(Duration::from_millis(400));
            run_env_with(&req, &env(1, 2, port, token), true, Duration::from_secs(20))
        });
        (a.join().unwrap(), b.join().unwrap())
    });
    let rep = out.0.unwrap().unwrap();
    assert_eq!(rep.wrong_total(), 0);
    assert!(out.1.unwrap().is_none());
    let (e1, e2) = stranger.join().unwrap();
    // Rank 0 cannot prove the stranger's token, so the stranger stops before proving anything.
    let e1 = e1.unwrap();
    assert!(e1.contains("does not know the job token"), "{e1}");
    assert!(e2.unwrap().contains("world size mismatch"));
}

#[test]
fn port_in_use_and_missing_peers_are_one_clear_error() {
    let busy = TcpListener::bind("127.0.0.1:0").unwrap();
    let port = busy.local_addr().unwrap().port();
    let req = small(2);
    let e = run_env_with(&req, &env(0, 2, port, "t"), true, Duration::from_secs(2)).unwrap_err();
    assert!(e.to_string().contains("already in use"), "{e}");

    let port = free_port();
    let e = run_env_with(&req, &env(0, 2, port, "t2"), true, Duration::from_secs(1)).unwrap_err();
    assert!(e.to_string().contains("ranks [1] to join"), "{e}");
    let e = run_env_with(&req, &env(0, 2, port, "t3"), false, Duration::from_secs(1)).unwrap_err();
    assert!(e.to_string().contains("ranks [1] to join"), "{e}");
    let e = run_env_with(&req, &env(1, 2, port, "t4"), true, Duration::from_secs(1)).unwrap_err();
    assert!(e.to_string().contains("rank 0"), "{e}");
}

#[test]
fn world_size_mismatch_on_one_host_is_one_clear_error() {
    let port = free_port();
    let out = std::thread::scope(|s| {
        let a = s.spawn(|| {
            run_env_with(
                &small(2),
                &env(0, 2, port, "w"),
                false,
                Duration::from_secs(2),
            )
        });
        let b = s.spawn(|| {
            std::thread::sleep(Duration::from_millis(100));
            run_env_with(
                &small(3),
                &env(1, 3, port, "w"),
                false,
                Duration::from_secs(2),
            )
        });
        (a.join().unwrap(), b.join().unwrap())
    });
    assert!(out.0.unwrap_err().to_string().contains("to join"));
    assert!(
        out.1
            .unwrap_err()
            .to_string()
            .contains("world size mismatch")
    );
}

/// Entry of env-mode rank processes (torchrun, Slurm and Open MPI style variables).
#[test]
fn env_worker_entry() {
    if std::env::var("TEST_ENV_WORKER").is_err() {
        return;
    }
    let req = VerifyRequest {
        collectives: vec![Collective::AllReduce, Collective::AllGather],
        ..small(2)
    };
    match Job::new(&req, Launch::Env).run() {
        Ok(Some(rep)) => {
            println!(
                "REPORT transport={} wrong={}",
                rep.transport.name(),
                rep.wrong_total()
            );
            std::process::exit(0)
        }
        Ok(None) => std::process::exit(0),
        Err(e) => {
            eprintln!("env worker error: {e}");
            std::process::exit(1)
        }
    }
}

fn run_env_processes(vars: &dyn Fn(usize) -> Vec<(String, String)>) -> String {
    let children: Vec<_> = (0..2)
        .map(|r| {
            std::process::Command::new(std::env::current_exe().unwrap())
                .args([
                    "env_worker_entry",
                    "--exact",
                    "--nocapture",
                    "--test-threads=1",
                ])
                .env("TEST_ENV_WORKER", "1")
                .envs(vars(r))
                .stdout(std::process::Stdio::piped())
                .spawn()
                .unwrap()
        })
        .collect();
    let mut out = String::new();
    for c in children {
        let o = c.wait_with_output().unwrap();
        assert!(o.status.success(), "{o:?}");
        out.push_str(&String::from_utf8_lossy(&o.stdout));
    }
    out
}

#[test]
fn torchrun_slurm_and_openmpi_style_processes() {
    let port = free_port();
    let torch = run_env_processes(&|r| {
        [
            ("RANK", r.to_string()),
            ("WORLD_SIZE", "2".into()),
            ("LOCAL_RANK", "0".into()),
            ("LOCAL_WORLD_SIZE", "1".into()),
            ("MASTER_ADDR", "127.0.0.1".into()),
            ("MASTER_PORT", port.to_string()),
        ]
        .map(|(k, v)| (k.to_string(), v))
        .to_vec()
    });
    assert!(torch.contains("REPORT transport=tcp wrong=0"), "{torch}");
    let port = free_port();
    let slurm = run_env_processes(&|r| {
        [
            ("SLURM_PROCID", r.to_string()),
            ("SLURM_NTASKS", "2".into()),
            ("SLURM_LOCALID", "0".into()),
            ("SLURM_JOB_NODELIST", "localhost,localhost".into()),
            ("SLURM_JOB_ID", "77".into()),
            ("MASTER_PORT", port.to_string()),
        ]
        .map(|(k, v)| (k.to_string(), v))
        .to_vec()
    });
    assert!(slurm.contains("REPORT transport=tcp wrong=0"), "{slurm}");
    let port = free_port();
    let ompi = run_env_processes(&|r| {
        [
            ("OMPI_COMM_WORLD_RANK", r.to_string()),
            ("OMPI_COMM_WORLD_SIZE", "2".into()),
            ("OMPI_COMM_WORLD_LOCAL_RANK", r.to_string()),
            ("OMPI_COMM_WORLD_LOCAL_SIZE", "2".into()),
            ("MASTER_PORT", port.to_string()),
            ("TOPO_JOB_TOKEN", format!("ompi-{port}")),
        ]
        .map(|(k, v)| (k.to_string(), v))
        .to_vec()
    });
    assert!(ompi.contains("REPORT transport=shm wrong=0"), "{ompi}");
}

#[test]
fn tcp_large_messages_do_not_deadlock_on_socket_buffers() {
    let port = free_port();
    let token = format!("big-{port}");
    let req = VerifyRequest {
        collectives: vec![
            Collective::AllReduce,
            Collective::AllToAll,
            Collective::Broadcast,
        ],
        min_bytes: 6 << 20,
        max_bytes: 6 << 20,
        iters: 1,
        warmup: 0,
        algorithm: Some(Algorithm::Ring),
        protocol: Some(Protocol::Simple),
        in_place: false,
        ..small(3)
    };
    let out = run_env_threads(
        &req,
        (0..3).map(|r| env(r, 3, port, &token)).collect(),
        true,
        Duration::from_secs(60),
    );
    for (r, o) in out.into_iter().enumerate() {
        match o {
            Ok(Some(rep)) => assert_eq!(rep.wrong_total(), 0, "{}", rep.render_text()),
            Ok(None) => {}
            Err(e) => panic!("rank {r}: {e}"),
        }
    }
}
