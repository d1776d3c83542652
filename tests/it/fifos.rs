//! No FIFO hangs a command (issue 45): a FIFO named on the command line whose writer holds it
//! open and sends nothing ends at the read deadline (`TOPO_READ_TIMEOUT`) with one error; a
//! FIFO found in a `--fleet` folder or a host list is refused without being opened.

use crate::util::{fixture, topo_clean_env};
use std::fs::File;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

/// A FIFO in `dir` and a descriptor holding it open for writing, silent (Linux opens a FIFO
/// read-write without waiting for a reader).
fn silent_fifo(dir: &Path, name: &str) -> (PathBuf, File) {
    let p = dir.join(name);
    let st = std::process::Command::new("mkfifo")
        .arg(&p)
        .status()
        .unwrap();
    assert!(st.success());
    let w = std::fs::OpenOptions::new()
        .read(true)
        .write(true)
        .open(&p)
        .unwrap();
    (p, w)
}

struct Ran {
    code: Option<i32>,
    stderr: String,
    took: Duration,
}

fn run(args: &[&str]) -> Ran {
    let t0 = Instant::now();
    let out = topo_clean_env()
        .env("TOPO_READ_TIMEOUT", "1")
        .current_dir(fixture(""))
        .args(args)
        .timeout(Duration::from_secs(60))
        .output()
        .unwrap();
    Ran {
        code: out.status.code(),
        stderr: String::from_utf8_lossy(&out.stderr).into_owned(),
        took: t0.elapsed(),
    }
}

fn assert_deadline(r: &Ran, what: &str) {
    assert_eq!(r.code, Some(2), "{what}: {}", r.stderr);
    assert!(
        r.stderr.contains("did not finish within 1 s"),
        "{what}: {}",
        r.stderr
    );
    assert_eq!(
        r.stderr.lines().filter(|l| l.starts_with("error:")).count(),
        1,
        "{what}: {}",
        r.stderr
    );
    assert!(r.took < Duration::from_secs(20), "{what}: {:?}", r.took);
}

#[test]
fn a_silent_fifo_named_on_the_command_line_ends_at_the_deadline() {
    let dir = tempfile::tempdir().unwrap();
    let (fifo, _writer) = silent_fifo(dir.path(), "held");
    let f = fifo.to_str().unwrap();
    let cases: Vec<Vec<&str>> = vec![
        vec!["show", "--from", f],
        vec!["plan", "--from", f],
        vec!["xml", "--from", f],
        vec!["verify", "--backend", "host", "--ranks", "2", "--from", f],
        vec!["plan", "--hosts", f],
        vec!["diff", f, "dgx-h100"],
        vec!["diagnose", "--profile", "dgx-h100", "--expect", f],
        vec!["diagnose", "--nccl-log", f, "--fail-on", "warning"],
        vec!["diagnose", "--nccl-tests", f, "--profile", "dgx-h100"],
        vec!["diagnose", "--from", f],
    ];
    // Each case only waits out its 1 s deadline, so they wait side by side.
    let ran: Vec<Ran> = std::thread::scope(|s| {
        let runs: Vec<_> = cases.iter().map(|a| s.spawn(|| run(a))).collect();
        runs.into_iter().map(|h| h.join().unwrap()).collect()
    });
    for (args, r) in cases.iter().zip(&ran) {
        assert_deadline(r, &args.join(" "));
    }
}

/// A host list's lines and a fleet folder's entries are found, not named: a FIFO there may
/// be another user's, planted in a shared sticky folder and held open. It is refused at once,
/// unopened; a symlink loop says so.
#[test]
fn a_fifo_found_in_a_fleet_folder_or_host_list_is_refused_unopened() {
    let dir = tempfile::tempdir().unwrap();
    let fleet = dir.path().join("snaps");
    std::fs::create_dir(&fleet).unwrap();
    std::os::unix::fs::symlink(
        fixture("fixtures/snapshots/hgx-h100-8gpu"),
        fleet.join("good"),
    )
    .unwrap();
    let (_fifo, _writer) = silent_fifo(&fleet, "planted");
    std::os::unix::fs::symlink("loop-b", fleet.join("loop-a")).unwrap();
    std::os::unix::fs::symlink("loop-a", fleet.join("loop-b")).unwrap();
    let t0 = Instant::now();
    let out = topo_clean_env()
        .args([
            "diagnose",
            "--format",
            "json",
            "--fail-on",
            "warning",
            "--fleet",
        ])
        .arg(&fleet)
        .timeout(Duration::from_secs(60))
        .output()
        .unwrap();
    assert!(t0.elapsed() < Duration::from_secs(20));
    let doc: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    let unreadable = doc["unreadable"].to_string();
    assert!(
        unreadable.contains("planted: is a fifo, not a regular file or folder"),
        "{unreadable}"
    );
    assert!(
        unreadable.contains("loop-a: too many levels of symbolic links"),
        "{unreadable}"
    );
    let list = dir.path().join("hosts.txt");
    std::fs::write(&list, "snaps/good\nsnaps/planted\n").unwrap();
    let r = run(&["plan", "--hosts", list.to_str().unwrap()]);
    assert_eq!(r.code, Some(2), "{}", r.stderr);
    assert!(
        r.stderr
            .contains("planted: is a fifo, not a regular file or folder"),
        "{}",
        r.stderr
    );
    assert!(r.took < Duration::from_secs(20));
}

/// Standard input named twice, once as `/dev/stdin`, is refused, not read twice.
#[test]
fn stdin_named_as_dash_and_dev_stdin_is_one_usage_error() {
    let out = topo_clean_env()
        .args(["diagnose", "--nccl-log", "-", "--nccl-log", "/dev/stdin"])
        .write_stdin("x NCCL INFO y\n")
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{err}");
    assert!(err.contains("standard input (`-`) is named twice"), "{err}");
}

/// `topo man --dir` writes every page or none: a FIFO (or a folder) at one page's name is
/// refused before any page is written, naming the file and the fix, and never opened (it
/// used to hang on a FIFO nobody read, or stop half way with a hint about `-o`).
#[test]
fn man_dir_writes_every_page_or_none() {
    for blocker in ["fifo", "folder"] {
        let dir = tempfile::tempdir().unwrap();
        let old = dir.path().join("topo.1");
        std::fs::write(&old, "old page\n").unwrap();
        let at = dir.path().join("topo-show.1");
        if blocker == "fifo" {
            let st = std::process::Command::new("mkfifo")
                .arg(&at)
                .status()
                .unwrap();
            assert!(st.success());
        } else {
            std::fs::create_dir(&at).unwrap();
        }
        let r = run(&["man", "--dir", dir.path().to_str().unwrap()]);
        assert_eq!(r.code, Some(2), "{blocker}: {}", r.stderr);
        let lines: Vec<&str> = r.stderr.lines().collect();
        assert_eq!(lines.len(), 2, "{blocker}: {}", r.stderr);
        assert!(
            lines[0].starts_with("error: --dir ")
                && lines[0].contains("topo-show.1")
                && lines[0].ends_with("no page was written"),
            "{blocker}: {}",
            r.stderr
        );
        assert!(
            lines[1].starts_with("hint: remove or rename ") && lines[1].contains("topo-show.1"),
            "{blocker}: {}",
            r.stderr
        );
        assert!(!r.stderr.contains("-o"), "{blocker}: {}", r.stderr);
        assert_eq!(std::fs::read_to_string(&old).unwrap(), "old page\n");
        let mut names: Vec<String> = std::fs::read_dir(dir.path())
            .unwrap()
            .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
            .collect();
        names.sort();
        assert_eq!(names, ["topo-show.1", "topo.1"], "{blocker}");
    }
}
