//! Hostile input through the real binary: every bad input gets one `error:` line (plus an
//! optional `hint:`), exit code 2, no panic, and stays bounded in time and memory.

use crate::util::topo;
use std::path::Path;

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

const XML: &str = include_str!("../../fixtures/xml/rwkvinllama-2x-rtx4090-cx4.xml");

#[test]
fn nodes_has_a_ceiling() {
    let err = fails(&["show", "--profile", "dgx-h100", "--nodes", "100000"], 2);
    assert!(err.contains("--nodes 100000"), "{err}");
    assert!(err.contains("16384"), "{err}");
    fails(&["plan", "--profile", "dgx-h100", "--nodes", "16385"], 2);
    fails(&["xml", "--profile", "dgx-h100", "--nodes", "16385"], 2);
}

#[test]
fn nodes_ceiling_counts_gpus_too() {
    // 200 GPUs in one host: 4096 copies would be 819200 GPUs, over the 131,072 modelled.
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
    let err = fails(&["plan", "--from", &f, "--nodes", "4096"], 2);
    assert!(err.contains("819200 GPUs"), "{err}");
}

#[test]
fn many_nodes_stay_fast() {
    // Per-host lookups that scanned every host made these minutes long in a debug build
    // (xml 512 nodes: over 100 s; show 256 nodes: 50 s); now they take seconds.
    let out = topo()
        .args(["xml", "--profile", "dgx-h100", "--nodes", "512"])
        .output()
        .unwrap();
    assert!(out.status.success());
    let xml = String::from_utf8(out.stdout).unwrap();
    assert_eq!(xml.matches("<gpu ").count(), 512 * 8);
    assert_eq!(xml.matches("<cpu ").count(), 512 * 2);

    let out = topo()
        .args([
            "show",
            "--profile",
            "dgx-h100",
            "--nodes",
            "256",
            "--each-host",
            "--format",
            "json",
        ])
        .output()
        .unwrap();
    assert!(out.status.success());
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(v["gpus"].as_array().map(Vec::len), Some(256 * 8));
    assert!(v.get("copies").is_none());
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
    // libyaml's scanner is quadratic in flow nesting: 200k brackets took a minute. 100k fit
    // under the profile's file cap, so the nesting check is what refuses them.
    let dir = tempfile::tempdir().unwrap();
    let text = format!(
        "name: x\ntemplates: {}{}\n",
        "[".repeat(100_000),
        "]".repeat(100_000)
    );
    let f = write(dir.path(), "deep.yaml", text.as_bytes());
    let err = fails(&["show", "--from", &f], 2);
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

/// One `<cpu>` holding `n` GPUs, on one line: the shape that made parsing quadratic.
fn wide_xml(cpus: usize, per_cpu: usize) -> String {
    let mut s = String::from(r#"<system version="1">"#);
    for c in 0..cpus {
        s += &format!(r#"<cpu numaid="{c}" affinity="ff" arch="x86_64" vendor="GenuineIntel">"#);
        for i in 0..per_cpu {
            let n = c * per_cpu + i;
            s += &format!(
                r#"<pci busid="0000:{:02x}:{:02x}.{}" class="0x030200" vendor="0x10de" device="0x2330"><gpu dev="{n}" sm="90" rank="{n}" gdr="1"/></pci>"#,
                n / 256,
                (n / 8) % 32,
                n % 8
            );
        }
        s += "</cpu>";
    }
    s + "</system>"
}

#[test]
fn huge_xml_is_refused_quickly() {
    // 60 000 GPUs (10 MB): parsing alone took minutes and the path tables would not fit.
    let dir = tempfile::tempdir().unwrap();
    let f = write(dir.path(), "wide.xml", wide_xml(1, 60_000).as_bytes());
    let err = fails(&["show", "--from", &f], 2);
    assert!(
        err.contains("<cpu> opened at line 1 column 21 has more than 640 child elements"),
        "{err}"
    );
}

#[test]
fn host_larger_than_nccl_can_hold_is_refused() {
    let dir = tempfile::tempdir().unwrap();
    let f = write(dir.path(), "two.xml", wide_xml(2, 400).as_bytes());
    let err = fails(&["show", "--from", &f], 2);
    assert!(
        err.contains("host 0 has more than 640 GPUs, more than NCCL can hold per node"),
        "{err}"
    );
}

#[test]
fn devices_and_pipes_are_refused_not_read_forever() {
    for dev in ["/dev/zero", "/dev/null"] {
        if !Path::new(dev).exists() {
            continue;
        }
        let err = fails(&["show", "--from", dev], 2);
        assert!(
            err.starts_with(&format!(
                "error: cannot read {dev}: not a regular file or folder"
            )),
            "{err}"
        );
    }
}

#[test]
fn oversized_profile_is_refused_before_reading() {
    let dir = tempfile::tempdir().unwrap();
    let f = dir.path().join("big.yaml");
    std::fs::File::create(&f)
        .unwrap()
        .set_len(100 << 20)
        .unwrap();
    let err = fails(&["show", "--from", f.to_str().unwrap()], 2);
    assert!(
        err.contains("104857600 bytes is too large for a profile"),
        "{err}"
    );
}

#[test]
fn huge_attribute_is_an_error_with_line_and_column() {
    let dir = tempfile::tempdir().unwrap();
    let long = "A".repeat(1_000_000);
    let f = write(
        dir.path(),
        "long.xml",
        XML.replacen(r#"arch="x86_64""#, &format!(r#"arch="{long}""#), 1)
            .as_bytes(),
    );
    let out = topo().args(["show", "--from", &f]).output().unwrap();
    assert_eq!(out.status.code(), Some(2));
    // NCCL's tokenizer refuses it; the value is never echoed.
    assert!(out.stderr.len() < 1_000, "{} bytes", out.stderr.len());
    let text = String::from_utf8(out.stderr).unwrap();
    assert!(
        text.contains("column")
            && text.contains(
                "<cpu> arch is 1000000 characters long; NCCL reads values of at most 255"
            ),
        "{text}"
    );
}

#[test]
fn impossible_gpu_numbers_are_flagged() {
    let dir = tempfile::tempdir().unwrap();
    let f = write(
        dir.path(),
        "odd.xml",
        XML.replace(r#"sm="89""#, r#"sm="0""#)
            .replace(r#"dev="1" sm"#, r#"dev="0" sm"#)
            .as_bytes(),
    );
    let out = topo()
        .args(["show", "--from", &f, "--format", "json"])
        .output()
        .unwrap();
    assert!(out.status.success());
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    // sm 0 used to be reported as compute capability 0.0.
    assert_eq!(v["gpus"][0]["sm"], serde_json::Value::Null, "{v}");
    let warnings = v["warnings"].to_string();
    assert!(
        warnings.contains(r#"sm=\"0\" is not a compute capability; ignored"#),
        "{warnings}"
    );
    assert!(
        warnings.contains(r#"GPU 0000:46:00.0: <gpu> dev=\"0\" is also GPU 0000:01:00.0's"#),
        "{warnings}"
    );
}

#[test]
fn profile_names_ignore_case() {
    let out = topo()
        .args(["show", "--profile", "DGX-H100", "--format", "json"])
        .output()
        .unwrap();
    assert!(out.status.success());
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(v["gpus"].as_array().map(Vec::len), Some(8));
    let err = fails(&["show", "--profile", "Nope"], 2);
    assert!(
        err.starts_with(
            "error: unknown profile 'Nope'\nhint: available profiles: 2x-rtx2080ti-nvbridge, 2x-rtx4090, 4x-rtx5090"
        ),
        "{err}"
    );
}

#[test]
fn element_with_100k_attributes_reads_fast() {
    // Each attribute was checked against all earlier ones: a 1 MB file took a minute.
    // numaid plus 15 copies of a are kept: 14 repeats, then one "more than 16" warning.
    let dir = tempfile::tempdir().unwrap();
    let attrs: String = (0..100_000).map(|_| r#" a="1""#).collect();
    let f = write(
        dir.path(),
        "attrs.xml",
        format!(r#"<system version="1"><cpu numaid="0"{attrs}/></system>"#).as_bytes(),
    );
    let out = topo().args(["show", "--from", &f]).output().unwrap();
    assert!(out.status.success());
    let text = String::from_utf8(out.stdout).unwrap();
    assert!(
        text.contains("<cpu> has more than 16 attributes; the rest are ignored"),
        "{text}"
    );
    assert_eq!(text.matches("repeats attribute 'a'").count(), 14, "{text}");
}

#[test]
fn profile_with_thousands_of_gpus_is_refused_quickly() {
    let yaml = std::fs::read_to_string(concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/profiles/2x-rtx4090.yaml"
    ))
    .unwrap();
    // 10,000 fit under the profile's file cap, so the GPU count is what refuses them.
    let gpus: Vec<String> = (0..10_000)
        .map(|i| {
            format!(
                "\"0000:{:02x}:{:02x}.{}\"",
                0x50 + i / 256,
                (i / 8) % 32,
                i % 8
            )
        })
        .collect();
    let text = yaml.replace(
        r#"gpus: [{bus: "0000:46:00.0", index: 1}]"#,
        &format!("gpus: [{}]", gpus.join(", ")),
    );
    assert_ne!(text, yaml);
    let dir = tempfile::tempdir().unwrap();
    let f = write(dir.path(), "many.yaml", text.as_bytes());
    let err = fails(&["show", "--from", &f], 2);
    // Building it first took 6 s in a debug build, growing with the square of the count.
    assert!(
        err.contains("10001 gpus, more than the 640 NCCL can hold per node"),
        "{err}"
    );
}

#[test]
fn xml_without_gpus_says_so() {
    let dir = tempfile::tempdir().unwrap();
    let f = write(
        dir.path(),
        "nogpu.xml",
        br#"<system version="1"><cpu numaid="0" affinity="ff" arch="x86_64" vendor="GenuineIntel"/></system>"#,
    );
    let out = topo().args(["xml", "--from", &f]).output().unwrap();
    assert!(out.status.success());
    let err = String::from_utf8(out.stderr).unwrap();
    assert_eq!(
        err,
        "warning: the topology has no GPU, so the XML lists none (NCCL adds GPUs it finds at run time)\n"
    );
    assert!(String::from_utf8(out.stdout).unwrap().contains("<cpu "));
}

#[test]
fn closed_stderr_does_not_abort() {
    // eprintln! panicked on the broken pipe, the panic hook's eprintln! panicked again, and
    // the process aborted (SIGABRT) instead of exiting with its code.
    let dir = tempfile::tempdir().unwrap();
    let f = write(
        dir.path(),
        "warn.xml",
        XML.replace(r#"link_width="16""#, r#"link_width="99999999999""#)
            .as_bytes(),
    );
    for (args, code) in [
        (vec!["xml", "--from", f.as_str()], 0),
        (vec!["show", "--profile", "nope"], 2),
        (vec!["show", "--bogus"], 2),
    ] {
        let (reader, writer) = std::io::pipe().unwrap();
        drop(reader);
        let status = std::process::Command::new(assert_cmd::cargo::cargo_bin("topo"))
            .args(&args)
            .stdout(std::process::Stdio::null())
            .stderr(writer)
            .status()
            .unwrap();
        assert_eq!(status.code(), Some(code), "{args:?}: {status:?}");
    }
}

#[test]
fn env_given_to_show_or_xml_is_said_to_be_unused() {
    for cmd in ["show", "xml"] {
        let out = topo()
            .args([cmd, "--profile", "dgx-h100", "--env", "NCCL_P2P_DISABLE=1"])
            .output()
            .unwrap();
        assert!(out.status.success());
        let err = String::from_utf8(out.stderr).unwrap();
        assert_eq!(
            err,
            format!(
                "warning: topo {cmd} describes the hardware and does not apply --env (NCCL_P2P_DISABLE); topo plan does\n"
            )
        );
    }
}

#[test]
fn absurd_c2c_is_ignored_with_one_warning_each() {
    let gh = |c2c: &str| {
        format!(
            r#"<system version="1"><cpu numaid="0" affinity="ff" arch="arm64" vendor="NVIDIA"><pci busid="0009:01:00.0" class="0x030200" vendor="0x10de" device="0x2342"><gpu dev="0" sm="90" rank="0" gdr="1">{c2c}</gpu></pci></cpu></system>"#
        )
    };
    let dir = tempfile::tempdir().unwrap();
    for (name, c2c, warning) in [
        (
            "big",
            r#"<c2c bw="99999999999999" count="4294967295"/>"#,
            r#"<c2c bw=\"99999999999999\" count=\"4294967295\"> is implausible; ignored"#,
        ),
        (
            "neg",
            r#"<c2c bw="45000" count="-1"/>"#,
            r#"<c2c> count=\"-1\" is out of range; ignored"#,
        ),
    ] {
        let f = write(dir.path(), &format!("{name}.xml"), gh(c2c).as_bytes());
        let out = topo()
            .args(["show", "--from", &f, "--format", "json"])
            .output()
            .unwrap();
        assert!(out.status.success());
        let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
        let warnings = v["warnings"].as_array().unwrap();
        assert_eq!(warnings.len(), 1, "{warnings:?}");
        assert!(
            warnings[0]
                .as_str()
                .unwrap()
                .contains(&warning.replace("\\\"", "\"")),
            "{warnings:?}"
        );
        // No C2C link: the GPU reaches its CPU over PCIe only.
        let links = v["links"].to_string();
        assert!(!links.contains("\"c2c\""), "{links}");
    }
}

#[test]
fn bidi_and_c1_controls_are_escaped_in_text_and_json() {
    let dir = tempfile::tempdir().unwrap();
    let f = write(
        dir.path(),
        "bidi.xml",
        XML.replacen(r#"name="mlx5_0""#, "name=\"mlx\u{202e}5_0\u{9b}2J\"", 1)
            .as_bytes(),
    );
    let out = topo().args(["show", "--from", &f]).output().unwrap();
    assert!(out.status.success());
    let text = String::from_utf8(out.stdout).unwrap();
    assert!(text.contains("mlx\\u{202e}5_0\\u{9b}2J"), "{text}");
    assert!(!text.contains('\u{202e}') && !text.contains('\u{9b}'));
    // The file name reaches diagnose's JSON ("checked": "topology of ...").
    let named = write(dir.path(), "n\u{9b}\u{202e}.xml", XML.as_bytes());
    let out = topo()
        .args(["diagnose", "--from", &named, "--format", "json"])
        .output()
        .unwrap();
    let json = String::from_utf8(out.stdout).unwrap();
    assert!(json.contains("n\\u009b\\u202e.xml (2 GPUs)"), "{json}");
    assert!(
        !json.contains('\u{202e}') && !json.contains('\u{9b}'),
        "{json}"
    );
    let v: serde_json::Value = serde_json::from_str(&json).unwrap();
    let checked = v["checked"][0].as_str().unwrap();
    assert!(checked.contains("n\u{9b}\u{202e}.xml"), "{checked}");
}

#[test]
fn a_file_of_no_known_format_is_not_quoted() {
    let dir = tempfile::tempdir().unwrap();
    let line = "root:$6$Vv4q1tY2$0123456789abcdefSECRETHASH:19000:0:99999:7:::";
    let shadow = write(dir.path(), "shadow", format!("{line}\n").as_bytes());
    for args in [
        vec!["diagnose", "--expect", shadow.as_str()],
        vec!["show", "--from", shadow.as_str()],
    ] {
        let out = topo().args(&args).output().unwrap();
        let err = String::from_utf8(out.stderr).unwrap();
        assert_eq!(out.status.code(), Some(2), "{err}");
        assert!(err.contains("not a format topo reads"), "{err}");
        assert!(!err.contains("SECRET") && !err.contains("$6$"), "{err}");
    }
    // Named .yaml it is read as a profile: the parser's excerpt is cut short.
    let long = format!("{line}{}", "x".repeat(200));
    let y = write(dir.path(), "p.yaml", format!("{long}\n").as_bytes());
    let out = topo().args(["show", "--from", &y]).output().unwrap();
    let err = String::from_utf8(out.stderr).unwrap();
    assert_eq!(out.status.code(), Some(2), "{err}");
    assert!(
        !err.contains("SECRETHASH") && !err.contains("xxxxx"),
        "{err}"
    );
}

#[test]
fn a_plain_tar_is_named_as_such() {
    let dir = tempfile::tempdir().unwrap();
    let mut tar = vec![0u8; 1024];
    tar[..8].copy_from_slice(b"meta.jso");
    tar[257..263].copy_from_slice(b"ustar\0");
    let f = write(dir.path(), "snap.tar", &tar);
    let out = topo().args(["show", "--from", &f]).output().unwrap();
    let err = String::from_utf8(out.stderr).unwrap();
    assert_eq!(out.status.code(), Some(2), "{err}");
    assert!(
        err.contains("a plain tar archive: snapshots are .tar.gz (gzip); compress it or unpack it and pass the folder"),
        "{err}"
    );
}
