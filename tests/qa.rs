//! Hostile input through the real binary: every bad input gets one `error:` line (plus an
//! optional `hint:`), exit code 2, no panic, and stays bounded in time and memory.

use assert_cmd::Command;
use std::path::Path;
use std::time::{Duration, Instant};

fn topo() -> Command {
    let mut c = Command::cargo_bin("topo").unwrap();
    c.env_remove("NO_COLOR");
    c.timeout(Duration::from_secs(120));
    c
}

/// Runs topo expecting failure; returns stderr after checking the contract's shape.
fn fails(args: &[&str], code: i32) -> String {
    let out = topo().args(args).output().unwrap();
    let err = String::from_utf8(out.stderr).unwrap();
    assert_eq!(out.status.code(), Some(code), "topo {args:?}: {err}");
    assert!(out.stdout.is_empty(), "topo {args:?} wrote to stdout");
    let lines: Vec<&str> = err.lines().collect();
    assert!(
        !lines.is_empty() && lines[0].starts_with("error: "),
        "topo {args:?}: {err}"
    );
    assert!(
        lines.len() == 1 || (lines.len() == 2 && lines[1].starts_with("hint: ")),
        "topo {args:?}: not one error line plus a hint: {err}"
    );
    assert!(
        !err.contains("panicked") && !err.contains("internal error"),
        "{err}"
    );
    assert!(!err.contains("os error"), "raw io error text: {err}");
    err
}

fn write(dir: &Path, name: &str, text: &[u8]) -> String {
    let p = dir.join(name);
    std::fs::write(&p, text).unwrap();
    p.display().to_string()
}

const XML: &str = include_str!("../fixtures/xml/rwkvinllama-2x-rtx4090-cx4.xml");

#[test]
fn nodes_has_a_ceiling() {
    let t = Instant::now();
    let err = fails(&["show", "--profile", "dgx-h100", "--nodes", "100000"], 2);
    assert!(err.contains("--nodes 100000"), "{err}");
    assert!(err.contains("4096"), "{err}");
    assert!(t.elapsed() < Duration::from_secs(5));
    fails(&["plan", "--profile", "dgx-h100", "--nodes", "4097"], 2);
    fails(&["xml", "--profile", "dgx-h100", "--nodes", "4097"], 2);
}

#[test]
fn nodes_ceiling_counts_gpus_too() {
    // 200 GPUs in one host: 4096 copies would be 819200 GPUs.
    let dir = tempfile::tempdir().unwrap();
    let mut s = String::from(
        r#"<system version="1"><cpu numaid="0" affinity="ff" arch="x86_64" vendor="GenuineIntel">"#,
    );
    for i in 0..200 {
        s += &format!(
            r#"<pci busid="0000:{:02x}:00.0" class="0x030200" vendor="0x10de" device="0x2330"><gpu dev="{i}" sm="90" rank="{i}" gdr="1"/></pci>"#,
            i + 1
        );
    }
    s += "</cpu></system>";
    let f = write(dir.path(), "big.xml", s.as_bytes());
    let t = Instant::now();
    let err = fails(&["plan", "--from", &f, "--nodes", "4096"], 2);
    assert!(err.contains("819200 GPUs"), "{err}");
    assert!(t.elapsed() < Duration::from_secs(10));
}

#[test]
fn many_nodes_stay_fast() {
    // Per-host lookups that scanned every host made these minutes long in a debug build
    // (xml 512 nodes: over 100 s; show 256 nodes: 50 s); now they take seconds.
    let t = Instant::now();
    let out = topo()
        .args(["xml", "--profile", "dgx-h100", "--nodes", "512"])
        .output()
        .unwrap();
    assert!(out.status.success());
    let xml = String::from_utf8(out.stdout).unwrap();
    assert_eq!(xml.matches("<gpu ").count(), 512 * 8);
    assert_eq!(xml.matches("<cpu ").count(), 512 * 2);
    assert!(t.elapsed() < Duration::from_secs(30), "{:?}", t.elapsed());

    let t = Instant::now();
    let out = topo()
        .args([
            "show",
            "--profile",
            "dgx-h100",
            "--nodes",
            "256",
            "--format",
            "json",
        ])
        .output()
        .unwrap();
    assert!(out.status.success());
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(v["gpus"].as_array().map(Vec::len), Some(256 * 8));
    assert!(t.elapsed() < Duration::from_secs(30), "{:?}", t.elapsed());
}

#[test]
fn unwritable_output_names_the_file_and_the_reason() {
    for cmd in ["show", "plan", "xml"] {
        let err = fails(
            &[cmd, "--profile", "dgx-h100", "-o", "/nonexistent/dir/file"],
            2,
        );
        assert!(
            err.starts_with("error: cannot write /nonexistent/dir/file: no such file or directory"),
            "{err}"
        );
        assert!(err.contains("hint: "), "{err}");
    }
}

#[test]
fn full_stdout_is_one_lowercase_error() {
    let Ok(full) = std::fs::File::create("/dev/full") else {
        return;
    };
    let out = std::process::Command::new(assert_cmd::cargo::cargo_bin("topo"))
        .args(["show", "--profile", "dgx-h100"])
        .stdout(full)
        .output()
        .unwrap();
    let err = String::from_utf8(out.stderr).unwrap();
    assert_eq!(out.status.code(), Some(2), "{err}");
    assert_eq!(
        err.lines().next(),
        Some("error: cannot write to stdout: no space left on device"),
        "{err}"
    );
}

#[test]
fn env_is_checked_by_every_command_that_takes_it() {
    for cmd in ["show", "xml", "plan"] {
        let err = fails(&[cmd, "--profile", "dgx-h100", "--env", "=x"], 2);
        assert!(err.contains("bad --env '=x'"), "{err}");
        let err = fails(
            &[cmd, "--profile", "dgx-h100", "--env", "NCCL_P2P_LEVEL"],
            2,
        );
        assert!(err.contains("bad --env 'NCCL_P2P_LEVEL'"), "{err}");
    }
}

#[test]
fn usage_errors_are_one_line_with_a_hint() {
    for args in [
        &["plan", "--profile", "dgx-h100", "--nodes", "abc"][..],
        &[
            "plan",
            "--profile",
            "dgx-h100",
            "-f",
            "99999999999999999999",
        ],
        &["show", "--view", "bogus"],
        &["show", "--bogus"],
        &["bogus"],
    ] {
        let err = fails(args, 2);
        assert!(err.contains("\nhint: "), "{args:?}: {err}");
    }
}

#[test]
fn negative_sizes_reach_the_size_parser() {
    let err = fails(&["plan", "--profile", "dgx-h100", "-b", "-1"], 2);
    assert!(err.contains("bad size '-1'"), "{err}");
}

#[test]
fn xml_named_yaml_is_read_as_xml() {
    let dir = tempfile::tempdir().unwrap();
    let f = write(dir.path(), "box.yaml", XML.as_bytes());
    let out = topo().args(["show", "--from", &f]).output().unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{err}");
    let text = String::from_utf8(out.stdout).unwrap();
    assert!(text.contains("GPUs (2)"), "{text}");
    assert!(text.contains("source xml"), "{text}");
}

#[test]
fn gzip_named_xml_is_not_parsed_as_text() {
    let dir = tempfile::tempdir().unwrap();
    let f = write(dir.path(), "box.xml", b"\x1f\x8b\x08\x00garbage");
    let err = fails(&["show", "--from", &f], 2);
    assert!(!err.contains("not UTF-8"), "{err}");
}

#[test]
fn profile_named_xml_says_what_it_is() {
    let dir = tempfile::tempdir().unwrap();
    let yaml = std::fs::read(concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/profiles/2x-rtx4090.yaml"
    ))
    .unwrap();
    let f = write(dir.path(), "box.xml", &yaml);
    let out = topo().args(["show", "--from", &f]).output().unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(
        String::from_utf8(out.stdout)
            .unwrap()
            .contains("source profile")
    );
}

#[test]
fn out_of_range_warning_quotes_the_file() {
    let dir = tempfile::tempdir().unwrap();
    let f = write(
        dir.path(),
        "sm.xml",
        XML.replace(r#"sm="89""#, r#"sm="99999999999999999999""#)
            .as_bytes(),
    );
    let out = topo().args(["xml", "--from", &f]).output().unwrap();
    let err = String::from_utf8(out.stderr).unwrap();
    assert!(out.status.success(), "{err}");
    assert!(
        err.contains(r#"<gpu> sm="99999999999999999999" is out of range; ignored"#),
        "{err}"
    );
}

#[test]
fn bad_nvlink_count_warns_once() {
    let dir = tempfile::tempdir().unwrap();
    let gpu = |bus: &str, dev: u32, nv: &str| {
        format!(
            r#"<pci busid="{bus}" class="0x030200" vendor="0x10de" device="0x2330"><gpu dev="{dev}" sm="90" rank="{dev}" gdr="1">{nv}</gpu></pci>"#
        )
    };
    let s = format!(
        r#"<system version="1"><cpu numaid="0" affinity="ff" arch="x86_64" vendor="GenuineIntel">{}{}</cpu></system>"#,
        gpu(
            "0000:01:00.0",
            0,
            r#"<nvlink target="0000:02:00.0" count="4294967296" tclass="0x030200"/>"#
        ),
        gpu("0000:02:00.0", 1, "")
    );
    let f = write(dir.path(), "nv.xml", s.as_bytes());
    let out = topo().args(["xml", "--from", &f]).output().unwrap();
    let err = String::from_utf8(out.stderr).unwrap();
    assert!(out.status.success(), "{err}");
    assert_eq!(err.lines().count(), 1, "{err}");
    assert!(
        err.contains(r#"count="4294967296" is out of range"#),
        "{err}"
    );
}

#[test]
fn deeply_nested_yaml_fails_fast() {
    // libyaml's scanner is quadratic in flow nesting: 200k brackets took a minute.
    let dir = tempfile::tempdir().unwrap();
    let text = format!(
        "name: x\ntemplates: {}{}\n",
        "[".repeat(200_000),
        "]".repeat(200_000)
    );
    let f = write(dir.path(), "deep.yaml", text.as_bytes());
    let t = Instant::now();
    let err = fails(&["show", "--from", &f], 2);
    assert!(t.elapsed() < Duration::from_secs(5), "{:?}", t.elapsed());
    assert!(err.contains("line 2 column"), "{err}");
    assert!(err.contains("nested deeper than"), "{err}");
}

#[test]
fn empty_profile_says_empty() {
    let dir = tempfile::tempdir().unwrap();
    for name in ["empty.yaml", "empty"] {
        let f = write(dir.path(), name, b"");
        let err = fails(&["show", "--from", &f], 2);
        assert!(err.contains(": empty file"), "{err}");
        let f = write(dir.path(), name, b"  \n# only a comment\n");
        let err = fails(&["show", "--from", &f], 2);
        assert!(err.contains(": empty file"), "{err}");
    }
}

#[test]
fn snapshot_write_errors_read_like_the_rest() {
    let err = fails(&["snapshot", "-o", "/nonexistent/dir/x.tar.gz"], 2);
    assert!(
        err.starts_with("error: cannot write /nonexistent/dir/x.tar.gz: no such file or directory"),
        "{err}"
    );
}

#[test]
fn snapshot_onto_a_file_says_it_is_not_a_folder() {
    let dir = tempfile::tempdir().unwrap();
    let f = write(dir.path(), "taken", b"x");
    let err = fails(&["snapshot", "-o", &f], 2);
    assert!(err.contains("exists and is not a folder"), "{err}");
    assert_eq!(std::fs::read(&f).unwrap(), b"x");
}

fn tar_gz(path: &Path, files: &[(&str, &str)]) {
    let f = std::fs::File::create(path).unwrap();
    let gz = flate2::write::GzEncoder::new(f, flate2::Compression::default());
    let mut tb = tar::Builder::new(gz);
    for (name, text) in files {
        let mut h = tar::Header::new_gnu();
        h.set_size(text.len() as u64);
        h.set_mode(0o644);
        tb.append_data(&mut h, name, text.as_bytes()).unwrap();
    }
    tb.into_inner().unwrap().finish().unwrap();
}

#[test]
fn snapshot_meta_errors_name_the_archive() {
    let dir = tempfile::tempdir().unwrap();
    let a = dir.path().join("bad.tar.gz");
    tar_gz(&a, &[("meta.json", "{not json")]);
    let err = fails(&["show", "--from", a.to_str().unwrap()], 2);
    assert!(
        err.starts_with(&format!(
            "error: cannot read snapshot {}: bad meta.json",
            a.display()
        )),
        "{err}"
    );
    assert!(!err.contains("/tmp/topo-"), "{err}");

    let a = dir.path().join("newer.tar.gz");
    tar_gz(&a, &[("meta.json", r#"{"schema":"topo.snapshot/v2"}"#)]);
    let err = fails(&["show", "--from", a.to_str().unwrap()], 2);
    assert!(
        err.contains("unknown schema 'topo.snapshot/v2' (expected topo.snapshot/v1)"),
        "{err}"
    );
}

#[test]
fn empty_sysfs_root_variable_means_unset() {
    let out = topo()
        .args(["show", "--format", "json"])
        .env("TOPO_SYSFS_ROOT", "")
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{err}");
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(v["source"]["kind"], "live", "{v}");
}

#[test]
fn missing_sysfs_root_names_the_variable() {
    let out = topo()
        .args(["show"])
        .env("TOPO_SYSFS_ROOT", "/nonexistent/root")
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2));
    let err = String::from_utf8(out.stderr).unwrap();
    assert!(
        err.starts_with("error: cannot read sysfs root /nonexistent/root: no such directory\nhint: set TOPO_SYSFS_ROOT"),
        "{err}"
    );
}

#[test]
fn gpu_less_source_is_named_when_planning() {
    let dir = tempfile::tempdir().unwrap();
    let f = write(
        dir.path(),
        "nogpu.xml",
        br#"<system version="1"><cpu numaid="0" affinity="ff" arch="x86_64" vendor="GenuineIntel"/></system>"#,
    );
    let err = fails(&["plan", "--from", &f], 2);
    assert!(
        err.starts_with(&format!(
            "error: the topology has no GPU to plan for: the XML file {f} lists none\n"
        )),
        "{err}"
    );
    assert!(!err.contains("--from box.tar.gz"), "{err}");
}
