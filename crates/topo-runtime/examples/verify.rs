//! The runtime driven directly, with nccl-tests style options: what bench/verify measures, so a
//! benchmark run needs only this crate (`topo verify` makes the same library calls).
//!
//!     cargo run --release --example verify -- --ranks 2 --launch processes -b 8 -e 256M -f 2 -n 20
use std::process::ExitCode;

use topo_runtime::job::Job;
use topo_runtime::job::worker_main;
use topo_runtime::launch::{Launch, ProcessSpec};
use topo_runtime::verify::VerifyRequest;
use topo_runtime::{Algorithm, Collective, DataType, Protocol, Reduction};

fn size(s: &str) -> usize {
    topo_vocab::parse_size(s).expect("size") as usize
}

fn main() -> ExitCode {
    match worker_main() {
        Ok(true) => return ExitCode::SUCCESS,
        Ok(false) => {}
        Err(e) => {
            eprintln!("error: {e}");
            return ExitCode::FAILURE;
        }
    }
    let mut req = VerifyRequest::default();
    let mut launch = Launch::Threads;
    let mut json = false;
    let args: Vec<String> = std::env::args().skip(1).collect();
    let mut i = 0;
    while i < args.len() {
        let v = args.get(i + 1).cloned().unwrap_or_default();
        match args[i].as_str() {
            "--ranks" => req.ranks = v.parse().unwrap(),
            "-b" => req.min_bytes = size(&v),
            "-e" => req.max_bytes = size(&v),
            "-f" => req.step_factor = v.parse().unwrap(),
            "-n" => req.iters = v.parse().unwrap(),
            "-w" => req.warmup = v.parse().unwrap(),
            "-c" => req.check = v != "0",
            "-o" => req.op = Reduction::parse(&v).unwrap(),
            "-d" => req.dtype = DataType::parse(&v).unwrap(),
            "--channels" => req.nchannels = v.parse().unwrap(),
            "--in-place" => req.in_place = v != "0",
            "--pin" => req.pin_cpus = v != "0",
            "--algo" => req.algorithm = Some(Algorithm::parse(&v).unwrap()),
            "--proto" => req.protocol = Some(Protocol::from_name(&v).unwrap()),
            "--collective" => {
                req.collectives = if v == "all" {
                    Collective::RUN_ORDER.to_vec()
                } else {
                    vec![Collective::parse(&v).unwrap()]
                }
            }
            "--launch" => {
                launch = match v.as_str() {
                    "threads" => Launch::Threads,
                    "processes" => Launch::Processes(ProcessSpec {
                        program: std::env::current_exe().unwrap(),
                        args: vec![],
                        envs: vec![],
                    }),
                    "env" => Launch::Env,
                    _ => Launch::Auto,
                }
            }
            "--format" => json = v == "json",
            other => {
                eprintln!("error: unknown option {other}");
                return ExitCode::from(2);
            }
        }
        i += 2;
    }
    match Job::new(&req, launch).run() {
        Ok(Some(rep)) => {
            if json {
                println!("{}", serde_json::to_string_pretty(&rep.to_json()).unwrap());
            } else {
                print!("{}", rep.render_text());
            }
            if rep.wrong_total() > 0 {
                ExitCode::FAILURE
            } else {
                ExitCode::SUCCESS
            }
        }
        Ok(None) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("error: {e}");
            ExitCode::FAILURE
        }
    }
}
