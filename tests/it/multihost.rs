//! Two "hosts" as two network namespaces joined by a veth pair, made by the test itself: ranks
//! started the way torchrun starts them (RANK, WORLD_SIZE, LOCAL_WORLD_SIZE, MASTER_ADDR,
//! MASTER_PORT) meet over TCP and run a collective. Needs root and `ip`; skipped with a
//! message otherwise. Traffic stays on the veth pair between the two namespaces.

use std::process::{Command, Stdio};

/// Link-local addresses on the test's own veth pair; nothing outside the namespaces has them.
const ADDR: [&str; 2] = ["169.254.77.1", "169.254.77.2"];

struct Namespaces {
    names: [String; 2],
}

impl Namespaces {
    /// Two namespaces with a veth pair between them, or `None` (with the reason) where the
    /// machine does not allow it.
    fn create() -> Result<Namespaces, String> {
        let id = std::process::id();
        let names = [format!("topo-it-{id}-a"), format!("topo-it-{id}-b")];
        let ns = Namespaces { names };
        let (a, b) = (&ns.names[0], &ns.names[1]);
        let (va, vb) = (format!("tva{id}"), format!("tvb{id}"));
        let steps: Vec<Vec<&str>> = vec![
            vec!["netns", "add", a],
            vec!["netns", "add", b],
            vec!["link", "add", &va, "type", "veth", "peer", "name", &vb],
            vec!["link", "set", &va, "netns", a],
            vec!["link", "set", &vb, "netns", b],
            vec!["-n", a, "addr", "add", "169.254.77.1/30", "dev", &va],
            vec!["-n", b, "addr", "add", "169.254.77.2/30", "dev", &vb],
            vec!["-n", a, "link", "set", &va, "up"],
            vec!["-n", b, "link", "set", &vb, "up"],
            vec!["-n", a, "link", "set", "lo", "up"],
            vec!["-n", b, "link", "set", "lo", "up"],
        ];
        for s in steps {
            let ok = Command::new("ip")
                .args(&s)
                .stderr(Stdio::null())
                .status()
                .is_ok_and(|st| st.success());
            if !ok {
                return Err(format!(
                    "`ip {}` failed (needs root and network namespaces)",
                    s.join(" ")
                ));
            }
        }
        Ok(ns)
    }
}

impl Drop for Namespaces {
    fn drop(&mut self) {
        for n in &self.names {
            let _ = Command::new("ip").args(["netns", "del", n]).status();
        }
    }
}

/// Runs rank `r` of a 2-rank `topo verify --launch env` in namespace `r`, with the launcher's
/// variables `vars(r)`; checks both succeed and returns rank 0's output.
fn run_pair(ns: &Namespaces, vars: impl Fn(usize) -> Vec<(&'static str, String)>) -> String {
    let bin = assert_cmd::cargo::cargo_bin("topo");
    let cache = std::env::temp_dir().join(format!("topo-it-cache-{}", std::process::id()));
    // One small calibration for both ranks, so neither measures the full one on first use.
    let cal = Command::new(&bin)
        .args(["calibrate", "-e", "1M", "-n", "2", "-r", "1"])
        .env("XDG_CACHE_HOME", &cache)
        .output()
        .unwrap();
    assert!(cal.status.success(), "calibrate: {cal:?}");
    let ranks: Vec<_> = (0..2)
        .map(|r| {
            let mut c = Command::new("ip");
            c.args(["netns", "exec", &ns.names[r]])
                .arg(&bin)
                .args([
                    "verify", "--launch", "env", "-b", "1K", "-e", "1M", "-f", "32",
                ])
                .args(["-n", "2", "-w", "1", "--collective", "allreduce,allgather"])
                .args(["--timeout", "60"])
                .env("XDG_CACHE_HOME", &cache)
                // nccl-tests' one line per size, which the rows below are read by.
                .env("COLUMNS", "200")
                .stdout(Stdio::piped())
                .stderr(Stdio::piped());
            for (k, v) in vars(r) {
                c.env(k, v);
            }
            c.spawn().unwrap()
        })
        .collect();
    let outs: Vec<_> = ranks
        .into_iter()
        .map(|c| c.wait_with_output().unwrap())
        .collect();
    for (r, o) in outs.iter().enumerate() {
        assert!(
            o.status.success(),
            "rank {r}: {}",
            String::from_utf8_lossy(&o.stderr)
        );
    }
    assert!(
        outs[1].stdout.is_empty(),
        "rank 1 printed: {}",
        String::from_utf8_lossy(&outs[1].stdout)
    );
    let text = String::from_utf8_lossy(&outs[0].stdout).into_owned();
    assert!(text.contains("transport tcp"), "{text}");
    assert!(text.contains("2 ranks"), "{text}");
    for row in text.lines().filter(|l| !l.starts_with('#')) {
        let cols: Vec<&str> = row.split_whitespace().collect();
        assert_eq!(cols[8], "0", "wrong results: {row}");
    }
    text
}

fn port() -> u16 {
    29000 + (std::process::id() % 1000) as u16
}

#[test]
fn ranks_in_two_network_namespaces_meet_over_tcp() {
    let ns = match Namespaces::create() {
        Ok(ns) => ns,
        Err(why) => {
            eprintln!("skipped: {why}");
            return;
        }
    };
    // torchrun's variables.
    run_pair(&ns, |r| {
        vec![
            ("RANK", r.to_string()),
            ("WORLD_SIZE", "2".into()),
            ("LOCAL_RANK", "0".into()),
            ("LOCAL_WORLD_SIZE", "1".into()),
            ("MASTER_ADDR", ADDR[0].into()),
            ("MASTER_PORT", port().to_string()),
        ]
    });
    // Slurm's: the rendezvous host is the first of the compact node list.
    run_pair(&ns, |r| {
        vec![
            ("SLURM_PROCID", r.to_string()),
            ("SLURM_NTASKS", "2".into()),
            ("SLURM_LOCALID", "0".into()),
            ("SLURM_JOB_ID", "4242".into()),
            ("SLURM_JOB_NODELIST", "169.254.77.[1-2]".into()),
            ("MASTER_PORT", (port() + 1).to_string()),
        ]
    });
}
