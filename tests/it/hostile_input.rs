//! Hostile input through the real binary (issue 6, part B): YAML nesting hidden behind a
//! quote, `--nodes` on a host with hundreds of NICs, terminal escapes in names, NVML link
//! counts, and a stdout that cannot take the output. Each ends in one clear line.

use std::path::Path;

use crate::util::topo;

fn write(dir: &Path, name: &str, text: &[u8]) -> String {
    let p = dir.join(name);
    std::fs::write(&p, text).unwrap();
    p.display().to_string()
}

/// Runs topo expecting exit 2 with one `error:` line (and at most a hint); returns stderr.
fn fails(args: &[&str]) -> String {
    let out = topo().args(args).output().unwrap();
    let err = String::from_utf8(out.stderr).unwrap();
    assert_eq!(out.status.code(), Some(2), "topo {args:?}: {err}");
    assert!(out.stdout.is_empty(), "topo {args:?} wrote to stdout");
    let lines: Vec<&str> = err.lines().collect();
    assert!(lines[0].starts_with("error: "), "{err}");
    assert!(
        lines.len() == 1 || (lines.len() == 2 && lines[1].starts_with("hint: ")),
        "not one error line plus a hint: {err}"
    );
    err
}

#[test]
fn yaml_nesting_behind_a_quote_in_a_plain_scalar_is_refused() {
    // The old pre-check took the `'` of `a 'b` for an opening quote and skipped every
    // bracket after it: 100k nested `[` then took 40 s in the YAML scanner.
    let dir = tempfile::tempdir().unwrap();
    let n = 100_000;
    let text = format!(
        "name: a 'b\ntemplates: {}{}\n",
        "[".repeat(n),
        "]".repeat(n)
    );
    assert!(text.len() > 200_000);
    let f = write(dir.path(), "bypass.yaml", text.as_bytes());
    let err = fails(&["show", "--from", &f]);
    assert!(
        err.contains("line 2 column 75: lists or maps nested deeper than 64 levels"),
        "{err}"
    );
    // Indented blocks count as well.
    let f = write(
        dir.path(),
        "blocks.yaml",
        format!("{}x\n", "- ".repeat(5000)).as_bytes(),
    );
    let err = fails(&["show", "--from", &f]);
    assert!(err.contains("nested deeper than 64 levels"), "{err}");
}

/// One CPU with `nics` NICs of one port each, and one GPU.
fn many_nics_xml(nics: usize) -> String {
    let mut s = String::from(
        r#"<system version="1"><cpu numaid="0" affinity="ff" arch="x86_64" vendor="GenuineIntel">"#,
    );
    s += r#"<pci busid="0000:01:00.0" class="0x030200" vendor="0x10de" device="0x2330" link_speed="16.0 GT/s PCIe" link_width="16"><gpu dev="0" sm="90" rank="0" gdr="1"/></pci>"#;
    for i in 0..nics {
        s += &format!(
            r#"<pci busid="0000:{:02x}:{:02x}.0" class="0x020700" vendor="0x15b3" device="0x1021" link_speed="16.0 GT/s PCIe" link_width="16"><nic><net name="mlx5_{i}" dev="{i}" speed="400000" port="1" gdr="1"/></nic></pci>"#,
            0x10 + i / 32,
            i % 32
        );
    }
    s + "</cpu></system>"
}

#[test]
fn nodes_of_a_host_with_600_nics_are_bounded_by_work() {
    let dir = tempfile::tempdir().unwrap();
    let f = write(dir.path(), "nics.xml", many_nics_xml(600).as_bytes());
    for (cmd, nodes) in [("plan", "64"), ("show", "100")] {
        let err = fails(&[cmd, "--from", &f, "--nodes", nodes]);
        assert!(
            err.starts_with(&format!(
                "error: --nodes {nodes}: {nodes} nodes of 1,202 devices would build "
            )),
            "{err}"
        );
        assert!(err.contains("the limit is 67,108,864"), "{err}");
        assert!(err.contains("hint: pass --nodes 46 or fewer"), "{err}");
    }
}

#[test]
fn escapes_in_xml_values_never_reach_the_terminal() {
    let dir = tempfile::tempdir().unwrap();
    let xml = many_nics_xml(2)
        .replace("mlx5_0", "mlx5_0\x1b]0;pwned\x07\x1b[2J")
        .replace(r#"link_width="16""#, "link_width=\"16\nerror: forged\"");
    let f = write(dir.path(), "esc.xml", xml.as_bytes());
    for args in [
        vec!["show", "--from", &f],
        vec!["show", "--from", &f, "--view", "matrix"],
        vec!["show", "--from", &f, "--view", "pci"],
        vec!["show", "--from", &f, "--view", "dot"],
        vec!["show", "--from", &f, "--color", "always"],
        vec!["plan", "--from", &f],
        vec!["xml", "--from", &f],
    ] {
        let out = topo().args(&args).output().unwrap();
        assert!(out.status.success(), "{args:?}");
        let (so, se) = (
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr),
        );
        let colour_free = so.replace("\x1b[", "").replace("m\\x1b", "");
        assert!(
            !se.contains('\x1b') && !se.contains('\x07'),
            "{args:?}: {se}"
        );
        assert!(
            !so.contains('\x07') && !so.contains("\x1b]") && !so.contains("\x1b[2J"),
            "{args:?}"
        );
        if !args.contains(&"always") {
            assert!(!colour_free.contains('\x1b'), "{args:?}");
        }
        assert!(
            !so.lines().any(|l| l.starts_with("error:")),
            "{args:?}: {so}"
        );
        assert!(
            !se.lines().any(|l| l.starts_with("error:")),
            "{args:?}: {se}"
        );
    }
    let out = topo().args(["show", "--from", &f]).output().unwrap();
    let so = String::from_utf8(out.stdout).unwrap();
    assert!(so.contains(r"mlx5_0\x1b]0;pwned\x07\x1b[2J"), "{so}");
    // JSON stays JSON: serde's own escapes, not ours on top.
    let out = topo()
        .args(["show", "--from", &f, "--format", "json"])
        .output()
        .unwrap();
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert!(
        v.to_string()
            .contains(r"mlx5_0\u001b]0;pwned\u0007\u001b[2J"),
        "{v}"
    );
}

#[test]
fn escapes_in_file_names_and_host_names_are_escaped() {
    let dir = tempfile::tempdir().unwrap();
    let f = write(dir.path(), "bad\x1b]0;t\x07\nerror: x.yaml", b"name: [\n");
    let out = topo().args(["show", "--from", &f]).output().unwrap();
    let se = String::from_utf8(out.stderr).unwrap();
    assert_eq!(out.status.code(), Some(2), "{se}");
    assert!(!se.contains('\x1b') && !se.contains('\x07'), "{se}");
    assert_eq!(
        se.lines().filter(|l| l.starts_with("error:")).count(),
        1,
        "{se}"
    );
    assert!(se.contains(r"bad\x1b]0;t\x07"), "{se}");

    let text = topo_source::profile::builtin_text("2x-rtx4090").unwrap();
    let name = text.lines().find(|l| l.starts_with("name:")).unwrap();
    let evil = text.replacen(name, "name: \"box\\e]0;t\\a\\nerror: forged\"", 1);
    let f = write(dir.path(), "host.yaml", evil.as_bytes());
    let out = topo().args(["show", "--from", &f]).output().unwrap();
    let so = String::from_utf8(out.stdout).unwrap();
    assert!(out.status.success());
    assert!(!so.contains('\x1b') && !so.contains('\x07'), "{so}");
    assert!(!so.lines().any(|l| l.starts_with("error:")), "{so}");
}

#[test]
fn nvml_link_counts_are_bounded() {
    // A recorded nvml.json with 375 000 links on one GPU showed 7 725 000 GB/s of NVLink.
    // 5 000 links (500 KB) are past the bound as well, and within any nvml.json size cap.
    let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("fixtures/snapshots/hgx-h100-8gpu");
    let dir = tempfile::tempdir().unwrap();
    let snap = dir.path().join("snap");
    copy_dir(&src, &snap);
    let mut nvml: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(snap.join("nvml.json")).unwrap()).unwrap();
    let link = nvml["gpus"][0]["nvlinks"][0].clone();
    nvml["gpus"][0]["nvlinks"] = serde_json::Value::Array(vec![link; 5_000]);
    std::fs::write(snap.join("nvml.json"), nvml.to_string()).unwrap();
    let out = topo()
        .args(["show", "--from", snap.to_str().unwrap(), "--format", "json"])
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    let warnings = v["warnings"].to_string();
    assert!(
        warnings.contains("NVML reported 5000 NVLinks for GPU 0, more than the 1024"),
        "{warnings}"
    );
    let gpu0 = &v["gpus"][0];
    assert!(gpu0.to_string().contains("more than the 1024"), "{gpu0}");
}

fn copy_dir(from: &Path, to: &Path) {
    std::fs::create_dir_all(to).unwrap();
    for e in std::fs::read_dir(from).unwrap() {
        let e = e.unwrap();
        let dest = to.join(e.file_name());
        let ty = e.file_type().unwrap();
        if ty.is_dir() {
            copy_dir(&e.path(), &dest);
        } else if ty.is_symlink() {
            std::os::unix::fs::symlink(std::fs::read_link(e.path()).unwrap(), &dest).unwrap();
        } else {
            std::fs::copy(e.path(), &dest).unwrap();
        }
    }
}

#[test]
fn a_full_or_closed_stdout_is_an_error_and_a_closed_pipe_is_quiet() {
    let bin = assert_cmd::cargo::cargo_bin("topo");
    if let Ok(full) = std::fs::File::create("/dev/full") {
        let out = std::process::Command::new(&bin)
            .args(["show", "--profile", "dgx-h100"])
            .stdout(full)
            .output()
            .unwrap();
        let err = String::from_utf8(out.stderr).unwrap();
        assert_eq!(out.status.code(), Some(2), "{err}");
        assert_eq!(
            err,
            "error: cannot write to stdout: no space left on device\n"
        );
    }
    // `topo show >&-`: the shell closes descriptor 1 before topo starts.
    let out = std::process::Command::new("sh")
        .arg("-c")
        .arg(format!("'{}' show --profile dgx-h100 >&-", bin.display()))
        .output()
        .unwrap();
    let err = String::from_utf8(out.stderr).unwrap();
    assert_eq!(out.status.code(), Some(2), "{err}");
    assert_eq!(err, "error: cannot write to stdout: it is closed\n");
    // `> /dev/null` is a choice, not a closed stdout.
    let status = std::process::Command::new(&bin)
        .args(["show", "--profile", "dgx-h100"])
        .stdout(std::process::Stdio::null())
        .status()
        .unwrap();
    assert!(status.success());
    // A reader that stops early (`| head -1`): no message, SIGPIPE's status.
    let (reader, writer) = std::io::pipe().unwrap();
    drop(reader);
    let out = std::process::Command::new(&bin)
        .args(["show", "--profile", "dgx-h100", "--nodes", "64"])
        .stdout(writer)
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(141));
    assert!(
        out.stderr.is_empty(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
}

#[test]
fn one_host_too_large_for_its_path_tables_is_refused() {
    // Within every per-kind cap and NCCL's 640 children per element, but with 9000 plain
    // PCI functions on 15 more CPUs: more device pairs than the path tables may hold.
    let mut s = many_nics_xml(600).replace("</system>", "");
    for cpu in 1..16 {
        s += &format!(r#"<cpu numaid="{cpu}" affinity="ff" arch="x86_64" vendor="GenuineIntel">"#);
        for i in 0..600 {
            s += &format!(
                r#"<pci busid="{cpu:04x}:{:02x}:{:02x}.0" class="0x010802" vendor="0x144d" device="0xa808"/>"#,
                i / 32,
                i % 32
            );
        }
        s += "</cpu>";
    }
    s += "</system>";
    let dir = tempfile::tempdir().unwrap();
    let f = write(dir.path(), "wide.xml", s.as_bytes());
    let err = fails(&["show", "--from", &f]);
    assert!(
        err.contains("device pairs for NCCL's path tables; the limit is 67,108,864"),
        "{err}"
    );
}

/// A parent that discards output with a read-write /dev/null (Python's subprocess.DEVNULL,
/// CI runners, service managers) is not a closed stdout.
#[test]
fn a_read_write_dev_null_stdout_is_discarded_quietly() {
    let null = std::fs::OpenOptions::new()
        .read(true)
        .write(true)
        .open("/dev/null")
        .unwrap();
    let out = std::process::Command::new(assert_cmd::cargo::cargo_bin("topo"))
        .args(["show", "--profile", "dgx-h100"])
        .stdout(null)
        .output()
        .unwrap();
    let err = String::from_utf8(out.stderr).unwrap();
    assert!(out.status.success(), "{err}");
    assert!(err.is_empty(), "{err}");
}

#[test]
fn a_matrix_header_past_640_columns_names_the_header() {
    // 5000 columns and rows once took minutes and was refused as "more than 640 CPUs".
    let cols: Vec<String> = (0..5000).map(|i| format!("GPU{i}")).collect();
    let text = format!("\t{}\n{}\n", cols.join("\t"), cols.join("\n"));
    let dir = tempfile::tempdir().unwrap();
    let f = write(dir.path(), "wide.txt", text.as_bytes());
    let err = fails(&["show", "--from", &f]);
    assert!(
        err.contains("more than 640 GPUs/NICs in the matrix header"),
        "{err}"
    );
}

#[test]
fn repeated_nccl_logs_have_a_total_cap() {
    // Two sparse 200 MB logs, each within its own cap: refused on their sizes, unread.
    let dir = tempfile::tempdir().unwrap();
    let mut args = vec![
        "diagnose".to_string(),
        "--profile".into(),
        "dgx-h100".into(),
    ];
    for name in ["a.log", "b.log"] {
        let p = dir.path().join(name);
        std::fs::File::create(&p)
            .unwrap()
            .set_len(200 << 20)
            .unwrap();
        args.extend(["--nccl-log".into(), p.display().to_string()]);
    }
    let args: Vec<&str> = args.iter().map(String::as_str).collect();
    let err = fails(&args);
    assert!(
        err.contains("b.log: the logs together hold more than 256 MiB"),
        "{err}"
    );
}

/// An `nvidia-smi topo -m` paste whose CPU affinity lists 200,000 CPUs (issue 45: show's text
/// summary took 109 s, 25,000 took 1.7 s): four times the entries, under six times the time,
/// and the list shown cut.
#[test]
fn a_huge_cpu_affinity_in_a_matrix_costs_linear_time() {
    let dir = tempfile::tempdir().unwrap();
    let matrix = |n: usize| {
        let l: Vec<String> = (0..n).map(|i| i.to_string()).collect();
        let l = l.join(",");
        let p = dir.path().join(format!("m{n}.txt"));
        std::fs::write(
            &p,
            format!("\tGPU0\tGPU1\tCPU Affinity\tNUMA Affinity\nGPU0\t X \tNV3\t{l}\t\tN/A\nGPU1\tNV3\t X \t{l}\t\tN/A\n"),
        )
        .unwrap();
        p
    };
    let run = |p: &std::path::Path| {
        let t0 = std::time::Instant::now();
        let out = crate::util::topo_clean_env()
            .args(["show", "--from"])
            .arg(p)
            .output()
            .unwrap();
        let took = t0.elapsed();
        assert!(
            out.status.success(),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
        assert!(out.stdout.len() < 20_000, "{}", out.stdout.len());
        took
    };
    let (small, large) = (matrix(50_000), matrix(200_000));
    let (mut a, mut b) = (std::time::Duration::MAX, std::time::Duration::MAX);
    for _ in 0..3 {
        a = a.min(run(&small));
        b = b.min(run(&large));
    }
    assert!(b < a * 6, "{a:?} -> {b:?}");
}
