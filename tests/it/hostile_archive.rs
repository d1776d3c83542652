//! Hostile snapshots through the real binary: crafted archives (made here, member by member,
//! with raw headers where the tar crate would refuse to write them) and crafted snapshot
//! folders. Each must end in exit 2 with one `error:` line (and an optional `hint:`), leave a
//! victim file outside untouched, and write nothing: topo runs with an empty TMPDIR and an
//! empty working folder, both checked empty afterwards. Limits: docs/input-limits.md.

use assert_cmd::Command;
use flate2::Compression;
use flate2::write::GzEncoder;
use std::io::{self, Read, Write};
use std::path::{Path, PathBuf};
use std::time::Duration;

const META: &str = r#"{"schema":"topo.snapshot/v1","topo_version":"0.1.0","captured_at":"2026-12-01T00:00:00Z","arch":"x86_64","complete":true}"#;

fn fixture(name: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("fixtures/snapshots")
        .join(name)
}

/// One tar member; `size` overrides the declared size (a header may lie).
#[derive(Debug)]
struct M {
    name: Vec<u8>,
    kind: u8,
    link: Vec<u8>,
    data: Vec<u8>,
    size: Option<u64>,
}

fn file(name: &str, data: &[u8]) -> M {
    M {
        name: name.into(),
        kind: b'0',
        link: vec![],
        data: data.to_vec(),
        size: None,
    }
}

fn dir(name: &str) -> M {
    M {
        name: name.into(),
        kind: b'5',
        link: vec![],
        data: vec![],
        size: None,
    }
}

fn link(name: &str, target: &str) -> M {
    M {
        name: name.into(),
        kind: b'2',
        link: target.into(),
        data: vec![],
        size: None,
    }
}

fn special(name: &str, kind: u8, target: &str) -> M {
    M {
        name: name.into(),
        kind,
        link: target.into(),
        data: vec![],
        size: None,
    }
}

fn octal(field: &mut [u8], v: u64) {
    let s = format!("{v:0w$o}\0", w = field.len() - 1);
    field.copy_from_slice(s.as_bytes());
}

/// A ustar header block, names cut at 100 bytes (longer ones come in a GNU `L` record).
fn header(name: &[u8], kind: u8, link: &[u8], size: u64) -> [u8; 512] {
    let mut h = [0u8; 512];
    let n = name.len().min(100);
    h[..n].copy_from_slice(&name[..n]);
    octal(&mut h[100..108], 0o644);
    octal(&mut h[108..116], 0);
    octal(&mut h[116..124], 0);
    if size < 0o77777777777 {
        octal(&mut h[124..136], size);
    } else {
        h[124] = 0x80;
        h[128..136].copy_from_slice(&size.to_be_bytes());
    }
    octal(&mut h[136..148], 0);
    h[156] = kind;
    let l = link.len().min(100);
    h[157..157 + l].copy_from_slice(&link[..l]);
    h[257..263].copy_from_slice(b"ustar\0");
    h[263..265].copy_from_slice(b"00");
    h[148..156].copy_from_slice(b"        ");
    let sum: u32 = h.iter().map(|&b| u32::from(b)).sum();
    let s = format!("{sum:06o}\0 ");
    h[148..156].copy_from_slice(s.as_bytes());
    h
}

/// Writes tar members into any writer.
struct Tar<W: Write>(W);

impl<W: Write> Tar<W> {
    fn record(&mut self, kind: u8, bytes: &[u8]) {
        let mut v = bytes.to_vec();
        v.push(0);
        self.raw(&header(b"././@LongLink", kind, b"", v.len() as u64), &v);
    }

    fn raw(&mut self, h: &[u8; 512], data: &[u8]) {
        self.0.write_all(h).unwrap();
        self.0.write_all(data).unwrap();
        self.pad(data.len() as u64);
    }

    fn pad(&mut self, len: u64) {
        let pad = (512 - len % 512) % 512;
        self.0.write_all(&vec![0; pad as usize]).unwrap();
    }

    fn add(&mut self, m: &M) {
        if m.name.len() > 100 {
            self.record(b'L', &m.name);
        }
        if m.link.len() > 100 {
            self.record(b'K', &m.link);
        }
        let size = m.size.unwrap_or(m.data.len() as u64);
        self.raw(&header(&m.name, m.kind, &m.link, size), &m.data);
    }

    /// A member whose content is `n` zero bytes, streamed.
    fn zeros(&mut self, name: &str, n: u64) {
        self.0
            .write_all(&header(name.as_bytes(), b'0', b"", n))
            .unwrap();
        io::copy(&mut io::repeat(0).take(n), &mut self.0).unwrap();
        self.pad(n);
    }

    fn end(mut self) -> W {
        self.0.write_all(&[0; 1024]).unwrap();
        self.0
    }
}

fn gz_file(path: &Path) -> Tar<GzEncoder<std::fs::File>> {
    Tar(GzEncoder::new(
        std::fs::File::create(path).unwrap(),
        Compression::fast(),
    ))
}

fn archive(path: &Path, members: &[M]) {
    let mut t = gz_file(path);
    for m in members {
        t.add(m);
    }
    t.end().finish().unwrap();
}

/// A scratch area: where archives are made, plus an empty TMPDIR and working folder for
/// topo, and a victim file outside both.
struct Scene {
    dir: tempfile::TempDir,
}

impl Scene {
    fn new() -> Scene {
        let dir = tempfile::tempdir().unwrap();
        for d in ["tmp", "cwd", "in"] {
            std::fs::create_dir(dir.path().join(d)).unwrap();
        }
        std::fs::write(dir.path().join("victim"), "untouched").unwrap();
        Scene { dir }
    }

    fn path(&self, name: &str) -> PathBuf {
        self.dir.path().join("in").join(name)
    }

    /// Runs `topo show --from input`; checks exit 2, one error line, and that nothing was
    /// written. Returns the error line.
    fn refuses(&self, input: &Path) -> String {
        let out = Command::cargo_bin("topo")
            .unwrap()
            .args(["show", "--from"])
            .arg(input)
            .env("TMPDIR", self.dir.path().join("tmp"))
            .env_remove("TOPO_SYSFS_ROOT")
            .current_dir(self.dir.path().join("cwd"))
            .timeout(Duration::from_secs(60))
            .output()
            .unwrap();
        let err = String::from_utf8_lossy(&out.stderr).to_string();
        assert_eq!(out.status.code(), Some(2), "{}: {err}", input.display());
        assert!(out.stdout.is_empty());
        let lines: Vec<&str> = err.lines().collect();
        assert!(lines[0].starts_with("error: "), "{err}");
        assert!(
            lines.len() == 1 || (lines.len() == 2 && lines[1].starts_with("hint: ")),
            "{err}"
        );
        assert!(!err.contains("panicked") && !err.contains("internal error"));
        self.nothing_written();
        lines[0].to_string()
    }

    fn nothing_written(&self) {
        for d in ["tmp", "cwd"] {
            let n = std::fs::read_dir(self.dir.path().join(d)).unwrap().count();
            assert_eq!(n, 0, "topo wrote into {d}");
        }
        let v = std::fs::read_to_string(self.dir.path().join("victim")).unwrap();
        assert_eq!(v, "untouched");
    }

    fn victim(&self) -> PathBuf {
        self.dir.path().join("victim")
    }
}

fn assert_has(err: &str, needle: &str) {
    assert!(err.contains(needle), "expected '{needle}' in: {err}");
}

#[test]
fn a_two_symlink_chain_cannot_write_through() {
    // The issue's exploit: each link passes a text-only check, together they lead out, and a
    // file member at the second link's path used to be written through it.
    let s = Scene::new();
    let deep = (0..20)
        .map(|i| format!("d{i}"))
        .collect::<Vec<_>>()
        .join("/");
    let ups = "../".repeat(64);
    let victim = s.victim().display().to_string();
    let a = s.path("evil.tar.gz");
    archive(
        &a,
        &[
            file("meta.json", META.as_bytes()),
            dir(&deep),
            link(&format!("{deep}/s"), "../../k"),
            link(
                &format!("{deep}/t"),
                &format!("s/{ups}{}", victim.trim_start_matches('/')),
            ),
            file(&format!("{deep}/t"), b"overwritten"),
        ],
    );
    let err = s.refuses(&a);
    assert_has(&err, "evil.tar.gz");
    // Without the file member the chain itself is refused as leading outside.
    archive(
        &a,
        &[
            file("meta.json", META.as_bytes()),
            link(&format!("{deep}/s"), "../../k"),
            link(&format!("{deep}/t"), &format!("s/{ups}tmp/victim")),
        ],
    );
    assert_has(&s.refuses(&a), "points outside the snapshot");
}

#[test]
fn only_files_folders_and_symlinks_are_members() {
    let s = Scene::new();
    let cases: [(u8, &str); 5] = [
        (b'1', "hard link"),
        (b'3', "device file"),
        (b'4', "device file"),
        (b'6', "fifo"),
        (b'S', "sparse file"),
    ];
    for (kind, what) in cases {
        let a = s.path("k.tar.gz");
        archive(
            &a,
            &[
                file("meta.json", META.as_bytes()),
                special("proc/cpuinfo", kind, "meta.json"),
            ],
        );
        let err = s.refuses(&a);
        assert_has(&err, &format!("proc/cpuinfo: {what}"));
    }
}

#[test]
fn symlink_loops_and_long_chains_are_refused() {
    let s = Scene::new();
    let a = s.path("loop.tar.gz");
    archive(
        &a,
        &[
            file("meta.json", META.as_bytes()),
            link("sys/a", "b"),
            link("sys/b", "a"),
        ],
    );
    assert_has(&s.refuses(&a), "too many levels of symbolic links");
    let mut m = vec![file("meta.json", META.as_bytes()), file("end", b"x")];
    for i in 0..60 {
        let next = if i == 59 {
            "end".to_string()
        } else {
            format!("l{}", i + 1)
        };
        m.push(link(&format!("l{i}"), &next));
    }
    archive(&a, &m);
    assert_has(&s.refuses(&a), "too many levels of symbolic links");
    // Direct escapes: relative and absolute.
    for target in ["../../../../etc", "/etc"] {
        archive(
            &a,
            &[file("meta.json", META.as_bytes()), link("sys", target)],
        );
        assert_has(&s.refuses(&a), "points outside the snapshot");
    }
}

#[test]
fn bad_names_are_refused() {
    let s = Scene::new();
    let a = s.path("names.tar.gz");
    let long_part = format!("sys/{}", "a".repeat(300));
    let long_path = format!("sys/{}", "abcdefgh/".repeat(600));
    let cases: Vec<(Vec<u8>, &str)> = vec![
        (b"sys/\xff\xfe".to_vec(), "is not UTF-8"),
        (b"/etc/passwd".to_vec(), "is an absolute path"),
        (b"../x".to_vec(), "climbs out with '..'"),
        (b"sys/../../x".to_vec(), "climbs out with '..'"),
        (long_part.into_bytes(), "has a part longer than 255 bytes"),
        (long_path.into_bytes(), "long name record of"),
        (b"sys/\x1b]0;pwned\x07".to_vec(), "holds control characters"),
    ];
    for (name, why) in cases {
        let mut m = file("x", b"data");
        m.name = name;
        archive(&a, &[file("meta.json", META.as_bytes()), m]);
        let err = s.refuses(&a);
        assert_has(&err, why);
        assert!(!err.contains('\x1b'), "raw escape in: {err}");
    }
}

#[test]
fn gzip_bombs_stop_at_the_limits() {
    let s = Scene::new();
    // One member that says 1 GiB: refused at its header, before any of it is inflated.
    let a = s.path("one.tar.gz");
    let mut t = gz_file(&a);
    t.add(&file("meta.json", META.as_bytes()));
    t.zeros("proc/cpuinfo", 1 << 30);
    t.end().finish().unwrap();
    assert!(std::fs::metadata(&a).unwrap().len() < 8 << 20);
    assert_has(
        &s.refuses(&a),
        "proc/cpuinfo: 1073741824 bytes, more than the 8 MiB",
    );
    // Many members under the per-file cap: stopped by the total.
    let a = s.path("many.tar.gz");
    let mut t = gz_file(&a);
    t.add(&file("meta.json", META.as_bytes()));
    for i in 0..8 {
        t.zeros(&format!("sys/f{i}"), 8 << 20);
    }
    t.end().finish().unwrap();
    assert_has(&s.refuses(&a), "more than 24 MiB of content");
    // Zeros after the end-of-archive marker.
    let a = s.path("tail.tar.gz");
    let mut t = gz_file(&a);
    t.add(&file("meta.json", META.as_bytes()));
    let mut gz = t.end();
    io::copy(&mut io::repeat(0).take(64 << 20), &mut gz).unwrap();
    gz.finish().unwrap();
    assert_has(&s.refuses(&a), "data after the end-of-archive marker");
}

#[test]
fn a_flood_of_empty_members_stops_at_the_entry_limit() {
    // The issue's case is 990k; past the 100k limit the count stops it the same way.
    let s = Scene::new();
    let a = s.path("flood.tar.gz");
    let mut t = gz_file(&a);
    t.add(&file("meta.json", META.as_bytes()));
    for i in 0..150_000 {
        t.0.write_all(&header(format!("e/{i}").as_bytes(), b'0', b"", 0))
            .unwrap();
    }
    t.end().finish().unwrap();
    assert_has(&s.refuses(&a), "more than 100000 members");
}

#[test]
fn a_huge_single_line_cpuinfo_is_refused() {
    let s = Scene::new();
    let a = s.path("cpu.tar.gz");
    let mut t = gz_file(&a);
    t.add(&file("meta.json", META.as_bytes()));
    t.zeros("proc/cpuinfo", 12 << 20);
    t.end().finish().unwrap();
    assert_has(
        &s.refuses(&a),
        "proc/cpuinfo: 12582912 bytes, more than the 8 MiB a snapshot file may hold",
    );
    // At the cap, it is read; a single line of NULs gives no CPU, not an error.
    let mut t = gz_file(&a);
    t.add(&file("meta.json", META.as_bytes()));
    t.zeros("proc/cpuinfo", 8 << 20);
    t.end().finish().unwrap();
    Command::cargo_bin("topo")
        .unwrap()
        .args(["show", "--from"])
        .arg(&a)
        .assert()
        .success();
}

#[test]
fn trailing_garbage_is_refused() {
    let s = Scene::new();
    let good = s.path("good.tar.gz");
    Command::cargo_bin("topo")
        .unwrap()
        .args(["snapshot", "--sysfs-root"])
        .arg(fixture("pcie-8gpu"))
        .arg("-o")
        .arg(&good)
        .assert()
        .success();
    let bytes = std::fs::read(&good).unwrap();
    // Bytes after the gzip stream.
    let a = s.path("garbage.tar.gz");
    let mut b = bytes.clone();
    b.extend_from_slice(b"trailing garbage");
    std::fs::write(&a, &b).unwrap();
    assert_has(&s.refuses(&a), "data after the end of the gzip stream");
    // A second gzip member (what `cat a.tar.gz b.tar.gz` makes).
    let mut b = bytes.clone();
    b.extend_from_slice(&bytes);
    std::fs::write(&a, &b).unwrap();
    assert_has(&s.refuses(&a), "data after the end of the gzip stream");
    // Members hidden after the end-of-archive marker, inside the gzip stream.
    let mut t = gz_file(&a);
    t.add(&file("meta.json", META.as_bytes()));
    let mut gz = t.end();
    gz.write_all(&header(b"hidden", b'0', b"", 0)).unwrap();
    gz.finish().unwrap();
    assert_has(&s.refuses(&a), "data after the end-of-archive marker");
}

#[test]
fn a_snapshot_without_its_completion_mark_is_refused() {
    let s = Scene::new();
    let a = s.path("partial.tar.gz");
    let meta = META.replace(r#","complete":true"#, "");
    archive(&a, &[file("meta.json", meta.as_bytes())]);
    assert_has(&s.refuses(&a), "incomplete snapshot");
    // The same as a folder.
    let d = s.path("partial");
    std::fs::create_dir(&d).unwrap();
    std::fs::write(d.join("meta.json"), meta).unwrap();
    assert_has(&s.refuses(&d), "incomplete snapshot");
}

#[test]
fn member_errors_name_the_archive_and_member() {
    let s = Scene::new();
    let a = s.path("box.tar.gz");
    archive(
        &a,
        &[
            dir("box"),
            file("box/meta.json", META.as_bytes()),
            file("box/nvml.json", b"{"),
        ],
    );
    let err = s.refuses(&a);
    assert!(
        err.starts_with(&format!(
            "error: cannot read snapshot {}: box/nvml.json: not NVML JSON",
            a.display()
        )),
        "{err}"
    );
}

fn copy_tree(from: &Path, to: &Path) {
    std::fs::create_dir_all(to).unwrap();
    for e in std::fs::read_dir(from).unwrap() {
        let e = e.unwrap();
        let t = e.file_type().unwrap();
        let dst = to.join(e.file_name());
        if t.is_symlink() {
            std::os::unix::fs::symlink(std::fs::read_link(e.path()).unwrap(), &dst).unwrap();
        } else if t.is_dir() {
            copy_tree(&e.path(), &dst);
        } else {
            std::fs::copy(e.path(), &dst).unwrap();
        }
    }
}

fn mkfifo(p: &Path) {
    let st = std::process::Command::new("mkfifo")
        .arg(p)
        .status()
        .unwrap();
    assert!(st.success());
}

#[test]
fn snapshot_folders_with_special_files_are_refused() {
    let s = Scene::new();
    let snap = s.path("snap");
    copy_tree(&fixture("pcie-8gpu"), &snap);
    let cpuinfo = snap.join("proc/cpuinfo");
    let reset = || {
        let _ = std::fs::remove_file(&cpuinfo);
    };
    reset();
    mkfifo(&cpuinfo);
    assert_has(
        &s.refuses(&snap),
        "proc/cpuinfo: is a fifo, not a regular file",
    );
    reset();
    std::os::unix::fs::symlink("/dev/zero", &cpuinfo).unwrap();
    assert_has(
        &s.refuses(&snap),
        "proc/cpuinfo: a symlink on the way leads outside",
    );
    reset();
    // A relative link to a FIFO inside the snapshot: followed, then refused by type.
    mkfifo(&snap.join("proc/fifo"));
    std::os::unix::fs::symlink("fifo", &cpuinfo).unwrap();
    assert_has(&s.refuses(&snap), "is a fifo");
    reset();
    // 3 GB, sparse: refused by its size, not read.
    let f = std::fs::File::create(&cpuinfo).unwrap();
    f.set_len(3 << 30).unwrap();
    assert_has(&s.refuses(&snap), "proc/cpuinfo: larger than 8 MiB");
    reset();
    std::fs::write(&cpuinfo, "vendor_id : GenuineIntel\n").unwrap();
    // The host name linked to /etc/passwd: never followed.
    let host = snap.join("proc/sys/kernel/hostname");
    std::fs::create_dir_all(host.parent().unwrap()).unwrap();
    let _ = std::fs::remove_file(&host);
    std::os::unix::fs::symlink("/etc/passwd", &host).unwrap();
    let err = s.refuses(&snap);
    assert_has(
        &err,
        "proc/sys/kernel/hostname: a symlink on the way leads outside",
    );
    assert!(!err.contains("root:"), "{err}");
}

/// Eight writers to one output: each exits 0 or 2 with an error line, and what is left is
/// one complete snapshot with no temporary beside it.
#[test]
fn concurrent_snapshots_leave_one_complete_output() {
    let s = Scene::new();
    for name in ["same.tar.gz", "same"] {
        let out = s.path(name);
        let kids: Vec<_> = (0..8)
            .map(|_| {
                std::process::Command::new(assert_cmd::cargo::cargo_bin("topo"))
                    .args(["snapshot", "--sysfs-root"])
                    .arg(fixture("hgx-h100-8gpu"))
                    .arg("-o")
                    .arg(&out)
                    .stderr(std::process::Stdio::piped())
                    .spawn()
                    .unwrap()
            })
            .collect();
        let mut ok = 0;
        for k in kids {
            let o = k.wait_with_output().unwrap();
            let err = String::from_utf8_lossy(&o.stderr);
            match o.status.code() {
                Some(0) => ok += 1,
                Some(2) => assert!(err.starts_with("error: "), "{err}"),
                c => panic!("exit {c:?}: {err}"),
            }
        }
        assert!(ok >= 1, "{name}: no writer succeeded");
        Command::cargo_bin("topo")
            .unwrap()
            .args(["show", "--from"])
            .arg(&out)
            .assert()
            .success();
        let names: Vec<String> = std::fs::read_dir(s.path(""))
            .unwrap()
            .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
            .collect();
        assert!(
            names.iter().all(|n| !n.starts_with('.')),
            "temporaries left: {names:?}"
        );
    }
}

#[test]
fn output_files_are_replaced_whole() {
    let s = Scene::new();
    let out = s.path("plan.txt");
    // A link at the target is replaced, not followed.
    std::os::unix::fs::symlink(s.victim(), &out).unwrap();
    Command::cargo_bin("topo")
        .unwrap()
        .args(["show", "--profile", "dgx-h100", "-o"])
        .arg(&out)
        .assert()
        .success();
    s.nothing_written();
    assert!(std::fs::read_to_string(&out).unwrap().contains("GPU"));
    // A failed write (here: the source is bad) leaves the old file as it was.
    std::fs::write(&out, "old").unwrap();
    let bad = s.path("bad.xml");
    std::fs::write(&bad, "<system").unwrap();
    Command::cargo_bin("topo")
        .unwrap()
        .args(["xml", "--from"])
        .arg(&bad)
        .arg("-o")
        .arg(&out)
        .assert()
        .code(2);
    assert_eq!(std::fs::read_to_string(&out).unwrap(), "old");
}

mod props {
    use super::*;
    use proptest::prelude::*;
    use topo_source::{archive, tree};

    fn name() -> impl Strategy<Value = Vec<u8>> {
        let part = prop_oneof![
            Just(b"a".to_vec()),
            Just(b"b".to_vec()),
            Just(b"..".to_vec()),
            Just(b".".to_vec()),
            Just(b"".to_vec()),
            Just(b"\xff".to_vec()),
            Just(b"meta.json".to_vec()),
        ];
        proptest::collection::vec(part, 1..5).prop_map(|parts| parts.join(&b'/'))
    }

    fn member() -> impl Strategy<Value = M> {
        let kind = prop_oneof![
            Just(b'0'),
            Just(b'0'),
            Just(b'5'),
            Just(b'2'),
            Just(b'2'),
            Just(b'1'),
            Just(b'6'),
            Just(b'x'),
        ];
        (name(), kind, name(), 0usize..600, any::<bool>()).prop_map(
            |(name, kind, target, len, abs)| {
                let mut link = if abs { b"/".to_vec() } else { vec![] };
                link.extend(target);
                M {
                    name,
                    kind,
                    link,
                    data: if kind == b'0' {
                        vec![b'x'; len]
                    } else {
                        vec![]
                    },
                    size: None,
                }
            },
        )
    }

    proptest! {
        #![proptest_config(ProptestConfig { cases: 256, ..Default::default() })]
        /// Any member list: no panic; what is accepted holds no bad name or type, and every
        /// symlink in it resolves inside the tree.
        #[test]
        fn the_archive_reader_accepts_only_safe_trees(members in proptest::collection::vec(member(), 0..12)) {
            let dir = tempfile::tempdir().unwrap();
            let p = dir.path().join("a.tar.gz");
            archive_members(&p, &members);
            if let Ok(mem) = archive::load(&p) {
                // `x` is a PAX record describing the next member; its own name means nothing.
                for m in members.iter().filter(|m| m.kind != b'x') {
                    prop_assert!(std::str::from_utf8(&m.name).is_ok());
                    prop_assert!(!m.name.starts_with(b"/"));
                    prop_assert!(!m.name.split(|&b| b == b'/').any(|c| c == b".."));
                    prop_assert!(matches!(m.kind, b'0' | b'5' | b'2'));
                }
                // Links are checked from the archive's top; the snapshot may sit one folder down.
                if mem.prefix().as_os_str().is_empty() {
                    for m in members.iter().filter(|m| m.kind == b'2') {
                        let rel = Path::new(std::str::from_utf8(&m.name).unwrap());
                        let r = tree::resolve(&mem, rel, true);
                        prop_assert!(r.is_ok(), "{:?}: {:?}", rel, r);
                    }
                }
            }
            prop_assert_eq!(std::fs::read_dir(dir.path()).unwrap().count(), 1);
        }
    }

    fn archive_members(p: &Path, members: &[M]) {
        let mut t = gz_file(p);
        for m in members {
            t.add(m);
        }
        t.end().finish().unwrap();
    }
}

/// Writes the worst cases into `$TOPO_HOSTILE_CORPUS` for measuring topo on them
/// (`/usr/bin/time -v topo show --from ...`, figures in docs/input-limits.md).
#[test]
#[ignore]
fn write_corpus_for_measurement() {
    let Some(out) = std::env::var_os("TOPO_HOSTILE_CORPUS") else {
        return;
    };
    let out = PathBuf::from(out);
    std::fs::create_dir_all(&out).unwrap();
    let meta = file("meta.json", META.as_bytes());
    let mut t = gz_file(&out.join("bomb-1g-member.tar.gz"));
    t.add(&meta);
    t.zeros("proc/cpuinfo", 1 << 30);
    t.end().finish().unwrap();
    let mut t = gz_file(&out.join("bomb-many-members.tar.gz"));
    t.add(&meta);
    for i in 0..64 {
        t.zeros(&format!("sys/f{i}"), 8 << 20);
    }
    t.end().finish().unwrap();
    let mut t = gz_file(&out.join("bomb-trailing-zeros.tar.gz"));
    t.add(&meta);
    let mut gz = t.end();
    io::copy(&mut io::repeat(0).take(1 << 30), &mut gz).unwrap();
    gz.finish().unwrap();
    let mut t = gz_file(&out.join("flood-990k.tar.gz"));
    t.add(&meta);
    for i in 0..990_000 {
        t.0.write_all(&header(format!("e/{i}").as_bytes(), b'0', b"", 0))
            .unwrap();
    }
    t.end().finish().unwrap();
    let mut t = gz_file(&out.join("cpuinfo-15m-line.tar.gz"));
    t.add(&meta);
    t.zeros("proc/cpuinfo", 15 << 20);
    t.end().finish().unwrap();
    // Accepted, near the limits: 23 MiB of content, a 7 MiB cpuinfo, 99k members.
    let mut t = gz_file(&out.join("near-limits-ok.tar.gz"));
    t.add(&meta);
    t.zeros("sys/big0", 8 << 20);
    t.zeros("sys/big1", 8 << 20);
    t.zeros("proc/cpuinfo", 7 << 20);
    for i in 0..99_000 {
        t.add(&file(&format!("sys/devices/x/f{i:06}"), b"x"));
    }
    t.end().finish().unwrap();
    // Deep names: stopped by the 8 MiB name budget.
    let mut t = gz_file(&out.join("names-budget.tar.gz"));
    t.add(&meta);
    let deep = (0..60)
        .map(|i| format!("d{i}"))
        .collect::<Vec<_>>()
        .join("/");
    for i in 0..99_000 {
        t.add(&file(&format!("{deep}/f{i:06}"), b"x"));
    }
    t.end().finish().unwrap();
    // A chain of 39 links (just allowed) and 60k links into it: accepted, each link resolved once.
    let mut m = vec![file("meta.json", META.as_bytes()), file("end", b"x")];
    for i in 0..39 {
        let next = if i == 38 {
            "end".to_string()
        } else {
            format!("c{}", i + 1)
        };
        m.push(link(&format!("c{i}"), &next));
    }
    for i in 0..60_000 {
        m.push(link(&format!("f/{i}"), "../c0"));
    }
    archive(&out.join("links-fanout.tar.gz"), &m);
    let mut m = vec![meta, file("end", b"x")];
    for i in 0..40_000 {
        m.push(link(&format!("l{i}"), &format!("l{}", (i + 1) % 40_000)));
    }
    archive(&out.join("links-40k-loop.tar.gz"), &m);
}

#[test]
fn common_tar_layouts_load() {
    // `tar -C box -czf x.tar.gz .` starts with `./` and prefixes every name with it.
    let s = Scene::new();
    let a = s.path("dot.tar.gz");
    archive(
        &a,
        &[
            dir("./"),
            dir("./proc"),
            file("./proc/cpuinfo", b"vendor_id : GenuineIntel\n"),
            file("./meta.json", META.as_bytes()),
        ],
    );
    Command::cargo_bin("topo")
        .unwrap()
        .args(["show", "--from"])
        .arg(&a)
        .assert()
        .success();
    // A file named `.` is not the top.
    archive(&a, &[file("meta.json", META.as_bytes()), file(".", b"x")]);
    assert_has(&s.refuses(&a), "names no file");
}

/// `-o` in a shared sticky folder (/tmp) where another user (uid 65534, when the tests run as
/// root) left a link named like the output pointing at their FIFO: following it would hand
/// them the output, or block for ever with no reader. The link is replaced instead; their
/// FIFO itself at the target is refused.
#[test]
fn output_never_follows_a_link_to_a_fifo() {
    use std::os::unix::ffi::OsStrExt;
    use std::os::unix::fs::PermissionsExt;
    let s = Scene::new();
    let shared = s.path("shared");
    std::fs::create_dir(&shared).unwrap();
    std::fs::set_permissions(&shared, std::fs::Permissions::from_mode(0o1777)).unwrap();
    let (fifo, link) = (shared.join("fifo"), shared.join("plan.txt"));
    let c = std::ffi::CString::new(fifo.as_os_str().as_bytes()).unwrap();
    // SAFETY: a valid C string.
    assert_eq!(unsafe { libc::mkfifo(c.as_ptr(), 0o666) }, 0);
    std::os::unix::fs::symlink(&fifo, &link).unwrap();
    // SAFETY: geteuid has no preconditions.
    let root = unsafe { libc::geteuid() } == 0;
    if root {
        std::os::unix::fs::lchown(&fifo, Some(65534), Some(65534)).unwrap();
        std::os::unix::fs::lchown(&link, Some(65534), Some(65534)).unwrap();
    }
    Command::cargo_bin("topo")
        .unwrap()
        .args(["show", "--profile", "dgx-h100", "-o"])
        .arg(&link)
        .timeout(Duration::from_secs(60))
        .assert()
        .success();
    assert!(std::fs::symlink_metadata(&link).unwrap().is_file());
    assert!(std::fs::read_to_string(&link).unwrap().contains("GPU"));
    if root {
        let out = Command::cargo_bin("topo")
            .unwrap()
            .args(["show", "--profile", "dgx-h100", "-o"])
            .arg(&fifo)
            .timeout(Duration::from_secs(60))
            .output()
            .unwrap();
        assert_eq!(out.status.code(), Some(2));
        let err = String::from_utf8(out.stderr).unwrap();
        assert!(
            err.starts_with("error: cannot write ") && err.contains("owned by another user"),
            "{err}"
        );
    }
}

#[test]
fn output_dash_is_stdout() {
    let s = Scene::new();
    let out = Command::cargo_bin("topo")
        .unwrap()
        .current_dir(s.path(""))
        .args(["show", "--profile", "dgx-h100", "-o", "-"])
        .output()
        .unwrap();
    assert!(out.status.success());
    assert!(String::from_utf8(out.stdout).unwrap().contains("GPU"));
    assert!(!s.path("-").exists());
}
