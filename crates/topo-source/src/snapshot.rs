//! Snapshots: capture the files discovery reads, replay them through the live code path.
//!
//! A snapshot is a folder (or a .tar.gz of one) holding the sysfs/procfs files discovery read,
//! at their real paths with sysfs's relative symlinks kept as symlinks, plus `meta.json`
//! (who, when, environment, NVML status, and the completion mark written last) and
//! `nvml.json` (NVML's answer, when there was one). Replaying it runs
//! [`live::discover_with`] on that folder, or on the archive read into memory
//! ([`super::archive`]: never extracted), so a snapshot and the machine it came from give the
//! same model. Captures are written atomically ([`crate::atomic`]).

use super::live::{self, Inputs};
use super::nvml::{self, NvmlReport};
use super::read::{self, Cap};
use super::sysfs::Sysfs;
use super::tree::{self, Disk, Kind, Tree};
use crate::error::{self, ErrorKind};
use anyhow::Result;
use std::collections::{BTreeMap, HashMap};
use std::path::{Component, Path, PathBuf};
use topo_model::{SourceInfo, Topology};

pub const SCHEMA: &str = topo_documents::schema::SNAPSHOT;
pub(crate) use crate::META;
const NVML: &str = "nvml.json";

/// `meta.json`: the snapshot document's types (`topo_documents::snapshot`).
pub use topo_documents::snapshot::{Meta, NvmlStatus};

const NOT_RECORDED: &str = "NVML was not recorded with this tree (no nvml.json)";

/// Inputs for a tree that is not the live root: `meta.json` and `nvml.json` when present.
/// A file that exists but does not parse is an error; absent files mean "no NVML" and the
/// running binary's architecture and environment.
pub fn recorded_inputs(root: &Path) -> Result<Inputs> {
    let disk = Disk::new(root);
    let meta = read_meta(&disk, root)?;
    inputs_from(&disk, meta, root)
}

fn inputs_from(t: &dyn Tree, meta: Option<Meta>, shown: &Path) -> Result<Inputs> {
    let nvml = match read_json_file(t, NVML, read::NVML_JSON, shown)? {
        Some(text) => Ok(serde_json::from_slice::<NvmlReport>(&text)
            .map_err(|e| bad(shown, &format!("{}: not NVML JSON: {e}", member(t, NVML))))?),
        None => Err(meta
            .as_ref()
            .and_then(|m| m.nvml.reason.clone())
            .unwrap_or_else(|| NOT_RECORDED.to_string())),
    };
    Ok(Inputs {
        nvml,
        arch: meta
            .as_ref()
            .map(|m| m.arch.clone())
            .filter(|a| !a.is_empty())
            .unwrap_or_else(live::host_arch),
        env: meta.map(|m| m.env).unwrap_or_else(live::process_env),
    })
}

fn bad(path: &Path, why: &str) -> anyhow::Error {
    error::fail(
        ErrorKind::Snapshot,
        format!("cannot read snapshot {}: {why}", path.display()),
    )
}

/// `name` as the tree holds it (`box/nvml.json` in an archive of a folder).
fn member(t: &dyn Tree, name: &str) -> String {
    t.member(Path::new(name)).display().to_string()
}

/// A small JSON file at the snapshot's top; `None` when absent. Errors name the snapshot the
/// user passed and the member, never a temporary path.
fn read_json_file(t: &dyn Tree, name: &str, cap: Cap, shown: &Path) -> Result<Option<Vec<u8>>> {
    match tree::read(t, Path::new(name), cap) {
        Ok(b) => Ok(Some(b)),
        Err(e) if e.is_not_found() => Ok(None),
        Err(e) => Err(bad(shown, &format!("{}: {e}", member(t, name)))),
    }
}

fn read_meta(t: &dyn Tree, shown: &Path) -> Result<Option<Meta>> {
    let Some(text) = read_json_file(t, META, read::META_JSON, shown)? else {
        return Ok(None);
    };
    let bad_json = |e: serde_json::Error| bad(shown, &format!("bad meta.json: {e}"));
    let value: serde_json::Value = serde_json::from_slice(&text).map_err(bad_json)?;
    // The schema first: a snapshot from a newer topo should say so, not name a missing field.
    let schema = value.get("schema").and_then(|v| v.as_str()).unwrap_or("");
    if schema != SCHEMA {
        return Err(bad(
            shown,
            &format!("unknown schema '{schema}' (expected {SCHEMA})"),
        ));
    }
    let m: Meta = serde_json::from_value(value).map_err(bad_json)?;
    Ok(Some(m))
}

/// Replays a snapshot folder or .tar.gz. An archive is read into memory, never unpacked.
pub fn load(path: &Path) -> Result<Topology> {
    let tree: Box<dyn Tree> = if path.is_dir() {
        Box::new(Disk::new(path))
    } else {
        Box::new(super::archive::load(path).map_err(|why| bad(path, &why))?)
    };
    load_tree(tree, path)
}

fn load_tree(tree: Box<dyn Tree>, shown: &Path) -> Result<Topology> {
    let Some(meta) = read_meta(&*tree, shown)? else {
        return Err(bad(shown, "not a topo snapshot (no meta.json)"));
    };
    if !meta.complete {
        return Err(bad(
            shown,
            "incomplete snapshot (meta.json has no completion mark): its capture did not finish",
        ));
    }
    let inputs = inputs_from(&*tree, Some(meta), shown)?;
    let fs = Sysfs::replay(tree);
    let mut topo = live::discover_with(&fs, inputs);
    if let Some((rel, why)) = fs.refusal() {
        return Err(bad(shown, &format!("{}: {why}", rel.display())));
    }
    topo.source = SourceInfo {
        kind: topo_model::SourceKind::Snapshot,
        origin: Some(shown.display().to_string()),
        ..Default::default()
    };
    Ok(topo)
}

/// One entry of a snapshot being captured.
enum Item {
    Dir,
    File(Vec<u8>),
    /// A symlink with its relative target, as sysfs has it.
    Link(PathBuf),
}

/// The snapshot's entries, planned in memory and written once as a folder or an archive.
struct Plan<'a> {
    fs: &'a Sysfs,
    items: BTreeMap<PathBuf, Item>,
    /// meta.json, written after everything else: its completion mark says the rest is there.
    meta: Vec<u8>,
    /// Lexical path prefix → its physical path (symlinks resolved), so shared prefixes are
    /// resolved once.
    memo: HashMap<PathBuf, PathBuf>,
}

impl<'a> Plan<'a> {
    fn new(fs: &'a Sysfs) -> Plan<'a> {
        Plan {
            fs,
            items: BTreeMap::new(),
            meta: Vec::new(),
            memo: HashMap::new(),
        }
    }

    /// Adds `rel` (a path discovery touched): folders on the way, symlinks with their relative
    /// target (and the target itself), and the file, preferring the bytes discovery read.
    /// Returns the physical path of `rel`; `None` when part of it does not exist.
    fn add(&mut self, rel: &Path, depth: u32) -> Option<PathBuf> {
        if depth > 40 {
            return None;
        }
        let comps: Vec<Component> = rel.components().collect();
        let mut phys = PathBuf::new();
        let mut lexical = PathBuf::new();
        for (i, c) in comps.iter().enumerate() {
            lexical.push(c);
            if let Some(p) = self.memo.get(&lexical) {
                phys = p.clone();
                continue;
            }
            match c {
                Component::ParentDir => {
                    phys.pop();
                }
                Component::Normal(_) => {
                    let cand = phys.join(c);
                    let src = self.fs.tree();
                    let kind = src.kind(&cand).ok()?;
                    if kind == Kind::Link {
                        let target = src.link_target(&cand).ok()?;
                        if target.is_absolute() {
                            return None;
                        }
                        self.items.insert(cand, Item::Link(target.clone()));
                        phys = self.add(&phys.join(&target), depth + 1)?;
                    } else if kind == Kind::Dir {
                        self.items.entry(cand.clone()).or_insert(Item::Dir);
                        phys = cand;
                    } else {
                        if i + 1 == comps.len() && !self.items.contains_key(&cand) {
                            // Unreadable attributes (and FIFOs, devices, oversized files) are
                            // left out: replay sees them as absent.
                            let bytes = self
                                .fs
                                .content(rel)
                                .or_else(|| src.read_phys(&cand, read::SYSFS).ok())?;
                            self.items.insert(cand.clone(), Item::File(bytes));
                        }
                        phys = cand;
                    }
                }
                _ => continue,
            }
            self.memo.insert(lexical.clone(), phys.clone());
        }
        Some(phys)
    }

    fn add_file(&mut self, name: &str, text: String) {
        self.items
            .insert(PathBuf::from(name), Item::File((text + "\n").into_bytes()));
    }

    /// (regular files, their bytes).
    fn size(&self) -> (u64, u64) {
        self.items.values().fold((0, 0), |(n, b), it| match it {
            Item::File(d) => (n + 1, b + d.len() as u64),
            _ => (n, b),
        })
    }

    /// Writes the tree into `out`, a fresh private folder: folders and files are created,
    /// never opened through a link, and meta.json comes last.
    fn write_folder(&self, out: &Path) -> std::io::Result<()> {
        use std::os::unix::fs::OpenOptionsExt;
        let create = |to: &Path, d: &[u8]| {
            let mut f = std::fs::OpenOptions::new()
                .write(true)
                .create_new(true)
                .custom_flags(libc::O_NOFOLLOW)
                .open(to)?;
            std::io::Write::write_all(&mut f, d)
        };
        for (rel, it) in &self.items {
            let to = out.join(rel);
            make_parents(out, rel)?;
            match it {
                Item::Dir => std::fs::create_dir(&to)?,
                Item::File(d) => create(&to, d)?,
                Item::Link(t) => std::os::unix::fs::symlink(t, &to)?,
            }
        }
        create(&out.join(META), &self.meta)
    }

    fn write_archive(&self, w: &mut dyn std::io::Write) -> std::io::Result<()> {
        let gz = flate2::write::GzEncoder::new(w, flate2::Compression::default());
        let mut tb = tar::Builder::new(gz);
        let meta = Item::File(self.meta.clone());
        let meta_path = PathBuf::from(META);
        let all = self.items.iter().chain([(&meta_path, &meta)]);
        for (rel, it) in all {
            let mut h = tar::Header::new_gnu();
            h.set_mtime(0);
            match it {
                Item::Dir => {
                    h.set_entry_type(tar::EntryType::Directory);
                    h.set_size(0);
                    h.set_mode(0o755);
                    tb.append_data(&mut h, rel, std::io::empty())?;
                }
                Item::File(d) => {
                    h.set_entry_type(tar::EntryType::Regular);
                    h.set_size(d.len() as u64);
                    h.set_mode(0o644);
                    tb.append_data(&mut h, rel, d.as_slice())?;
                }
                Item::Link(t) => {
                    h.set_entry_type(tar::EntryType::Symlink);
                    h.set_size(0);
                    h.set_mode(0o777);
                    tb.append_link(&mut h, rel, t)?;
                }
            }
        }
        tb.into_inner()?.finish()?.flush()
    }
}

/// Creates the folders above `rel` under `out` that are missing, refusing to pass through
/// anything but a real folder.
fn make_parents(out: &Path, rel: &Path) -> std::io::Result<()> {
    let mut cur = out.to_path_buf();
    let comps: Vec<_> = rel.components().collect();
    for c in comps.iter().take(comps.len().saturating_sub(1)) {
        cur.push(c);
        match std::fs::symlink_metadata(&cur) {
            Ok(m) if m.is_dir() => {}
            Ok(_) => return Err(std::io::Error::from_raw_os_error(libc::ENOTDIR)),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => std::fs::create_dir(&cur)?,
            Err(e) => return Err(e),
        }
    }
    Ok(())
}

/// Civil UTC time from the Unix clock (no date crate needed for one timestamp).
pub fn utc_now() -> String {
    let secs = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_secs() as i64)
        .unwrap_or(0);
    let (days, rem) = (secs.div_euclid(86_400), secs.rem_euclid(86_400));
    // Howard Hinnant's days-to-civil algorithm.
    let z = days + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z - era * 146_097;
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let d = doy - (153 * mp + 2) / 5 + 1;
    let m = if mp < 10 { mp + 3 } else { mp - 9 };
    let y = yoe + era * 400 + i64::from(m <= 2);
    format!(
        "{y:04}-{m:02}-{d:02}T{:02}:{:02}:{:02}Z",
        rem / 3600,
        rem % 3600 / 60,
        rem % 60
    )
}

/// A .tar.gz name, or `-` (stdout: an archive, the only form a stream can carry).
fn is_archive_name(p: &Path) -> bool {
    if p.as_os_str() == "-" {
        return true;
    }
    let n = p
        .file_name()
        .map(|n| n.to_string_lossy().to_ascii_lowercase())
        .unwrap_or_default();
    n.ends_with(".tar.gz") || n.ends_with(".tgz")
}

/// Captures the machine under `root` into `out` (a .tar.gz, or a folder when `out` has no
/// .tar.gz/.tgz suffix); returns a one-line summary.
/// Every file a reader read from a tree, as physical paths (what a snapshot must keep for
/// that reader to give the same answer from it).
struct Recorder<'a> {
    inner: &'a dyn Tree,
    read: std::cell::RefCell<std::collections::BTreeSet<PathBuf>>,
}

impl Tree for Recorder<'_> {
    fn kind(&self, phys: &Path) -> std::io::Result<Kind> {
        self.inner.kind(phys)
    }
    fn link_target(&self, phys: &Path) -> std::io::Result<PathBuf> {
        self.inner.link_target(phys)
    }
    fn read_phys(&self, phys: &Path, cap: Cap) -> Result<Vec<u8>, read::ReadError> {
        self.read.borrow_mut().insert(phys.to_path_buf());
        self.inner.read_phys(phys, cap)
    }
    fn list_phys(&self, phys: &Path) -> std::io::Result<Vec<String>> {
        self.inner.list_phys(phys)
    }
    fn origin(&self) -> String {
        self.inner.origin()
    }
    fn absolute_links_ok(&self) -> bool {
        self.inner.absolute_links_ok()
    }
}

/// What `topo diagnose` reads besides the topology (ACS control of the bridges, IOMMU mode,
/// kernel modules, memory, the container's cgroup), so that a snapshot is diagnosed like the
/// machine. Of /proc/mounts only the /dev/shm line is kept: the other mounts can name
/// servers and paths that are not the snapshot's business.
fn add_host_facts(plan: &mut Plan, fs: &Sysfs) {
    let rec = Recorder {
        inner: fs.tree(),
        read: Default::default(),
    };
    let _ = crate::hostfacts::read_tree(&rec, Some(BTreeMap::new()), None);
    let mounts = Path::new("proc/mounts");
    // proc/mounts is a link to the reading process's own table (proc/PID/mounts).
    let is_mounts = |r: &Path| r.starts_with("proc") && r.file_name() == Some("mounts".as_ref());
    for rel in rec.read.into_inner() {
        if !is_mounts(&rel) && !rel.starts_with("meta.json") && !rel.starts_with(NVML) {
            plan.add(&rel, 0);
        }
    }
    if let Ok(m) = tree::read(fs.tree(), mounts, read::SYSFS) {
        let shm: Vec<&str> = std::str::from_utf8(&m)
            .unwrap_or("")
            .lines()
            .filter(|l| l.split_whitespace().nth(1) == Some("/dev/shm"))
            .collect();
        if !shm.is_empty() {
            plan.add_file("proc/mounts", shm.join("\n"));
        }
    }
}

pub fn capture(root: &Path, out: &Path) -> Result<String> {
    if !root.is_dir() {
        return Err(error::fail(
            ErrorKind::SysfsRoot,
            format!(
                "cannot read sysfs root {}: no such directory",
                root.display()
            ),
        ));
    }
    let live_root = live::is_system_root(root);
    let inputs = if live_root {
        Inputs {
            nvml: nvml::query(),
            arch: live::host_arch(),
            env: live::process_env(),
        }
    } else {
        recorded_inputs(root)?
    };
    let nvml = inputs.nvml.clone();
    let fs = Sysfs::new(root);
    let topo = live::discover_with(&fs, inputs.clone());

    let archive = is_archive_name(out);
    if !archive && out.exists() && !out.is_dir() {
        return Err(error::fail(
            ErrorKind::SnapshotOutput,
            format!(
                "cannot write snapshot to {}: it exists and is not a folder",
                out.display()
            ),
        ));
    }
    if !archive
        && out.exists()
        && std::fs::read_dir(out)
            .map(|mut d| d.next().is_some())
            .unwrap_or(true)
    {
        return Err(error::fail(
            ErrorKind::SnapshotOutput,
            format!(
                "cannot write snapshot to {}: folder exists and is not empty",
                out.display()
            ),
        ));
    }

    let mut plan = Plan::new(&fs);
    for rel in fs.touched() {
        plan.add(&rel, 0);
    }
    let host = topo.hosts.first().cloned().unwrap_or_default();
    let meta = Meta {
        schema: SCHEMA.to_string(),
        topo_version: env!("CARGO_PKG_VERSION").to_string(),
        captured_at: utc_now(),
        host: host.name.clone(),
        kernel: host.kernel.clone(),
        arch: inputs.arch.clone(),
        driver_version: host.driver_version.clone(),
        cuda_driver_version: host.cuda_driver_version.clone(),
        env: redact_env(&inputs.env),
        nvml: NvmlStatus {
            available: nvml.is_ok(),
            reason: nvml.as_ref().err().cloned(),
        },
        complete: true,
    };
    add_host_facts(&mut plan, &fs);
    plan.meta = (serde_json::to_string_pretty(&meta)? + "\n").into_bytes();
    if let Ok(r) = &nvml {
        plan.add_file(NVML, serde_json::to_string_pretty(r)?);
    }

    let (files, bytes) = plan.size();
    let (files, bytes) = (files + 1, bytes + plan.meta.len() as u64);
    let written = if archive {
        crate::atomic::write_file(out, |w| plan.write_archive(w)).map(|()| {
            let on_disk = (out.as_os_str() != "-").then(|| std::fs::metadata(out).ok());
            on_disk.flatten().map_or(bytes, |m| m.len())
        })
    } else {
        crate::atomic::write_dir(out, |dir| plan.write_folder(dir)).map(|()| bytes)
    };
    let shown = written.map_err(|e| write_error(out, &e, archive))?;
    Ok(format!(
        "captured {files} files ({} KiB) to {}",
        shown.div_ceil(1024),
        if out.as_os_str() == "-" {
            "stdout".into()
        } else {
            out.display().to_string()
        }
    ))
}

/// What a snapshot records instead of a value that may be a secret.
pub const REDACTED: &str = "<redacted>";

/// Words in a variable's name that mark its value as a secret (`NCCL_NET_AUTH_TOKEN`).
const SECRET_WORDS: &[&str] = &["KEY", "TOKEN", "SECRET", "PASS", "CRED", "AUTH"];

/// NCCL tuning variables whose names hold a secret word but whose values are not secrets
/// (an InfiniBand partition key is a routing number).
const NOT_SECRET: &[&str] = &["NCCL_IB_PKEY"];

/// The environment a snapshot records: values of variables named like secrets, and values
/// that look like credentials whatever their name, replaced by [`REDACTED`]; everything
/// else (the tuning variables the model reads) verbatim. A snapshot is made to be shared.
pub fn redact_env(env: &BTreeMap<String, String>) -> BTreeMap<String, String> {
    env.iter()
        .map(|(k, v)| {
            let up = k.to_ascii_uppercase();
            let named_secret =
                !NOT_SECRET.contains(&up.as_str()) && SECRET_WORDS.iter().any(|w| up.contains(w));
            let v = if named_secret || looks_like_credential(v) {
                REDACTED.to_string()
            } else {
                v.clone()
            };
            (k.clone(), v)
        })
        .collect()
}

/// A URL with a user and password, an HTTP authorization value, or a long opaque token
/// (32 or more letters and digits in one word, as API keys are). Paths, interface and HCA
/// lists and GPU UUIDs are not.
fn looks_like_credential(v: &str) -> bool {
    let v = v.trim();
    let userinfo = v.split_once("://").is_some_and(|(_, rest)| {
        rest.split(['/', '?', '#'])
            .next()
            .is_some_and(|auth| auth.contains('@'))
    });
    let lower = v.to_ascii_lowercase();
    let token = v.len() >= 32
        && !v.starts_with(['.', '/'])
        && !v.starts_with("GPU-")
        && !v.starts_with("MIG-")
        && v.bytes()
            .all(|b| b.is_ascii_alphanumeric() || b"+/=_-.".contains(&b))
        && v.bytes().any(|b| b.is_ascii_digit())
        && v.bytes().any(|b| b.is_ascii_alphabetic());
    userinfo || lower.starts_with("bearer ") || lower.starts_with("basic ") || token
}

fn write_error(out: &Path, e: &std::io::Error, archive: bool) -> anyhow::Error {
    let not_empty = matches!(e.raw_os_error(), Some(libc::ENOTEMPTY | libc::EEXIST));
    if !archive && not_empty {
        return error::fail(
            ErrorKind::SnapshotOutput,
            format!(
                "cannot write snapshot to {}: folder exists and is not empty",
                out.display()
            ),
        );
    }
    error::fail(
        ErrorKind::SnapshotWrite,
        format!("cannot write {}: {}", out.display(), error::io_reason(e)),
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn secrets_are_redacted_and_tuning_kept() {
        let env: BTreeMap<String, String> = [
            ("NCCL_NET_AUTH_TOKEN", "abc"),
            ("NCCL_SECRET", "x"),
            ("NCCL_MY_PASSWD", "hunter2"),
            ("NCCL_IB_PKEY", "0x8001"),
            ("NCCL_DEBUG_FILE", "https://u:p@logs.example/x"),
            ("NCCL_PLUGIN_CONF", "Bearer abc"),
            ("NCCL_COMMENT", "sk2Xk9aQ0vL3mN8pR4tY7wZ1bC5dE6fG"),
            ("NCCL_IB_HCA", "mlx5_0:1,mlx5_1:1"),
            ("NCCL_SOCKET_IFNAME", "eth0"),
            (
                "NCCL_TOPO_FILE",
                "/etc/nccl/topo-0123456789abcdef0123456789.xml",
            ),
            ("NCCL_ALGO", "Ring"),
            (
                "CUDA_VISIBLE_DEVICES",
                "GPU-8a1b2c3d-1111-2222-3333-444455556666",
            ),
        ]
        .into_iter()
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .collect();
        let r = redact_env(&env);
        for k in [
            "NCCL_NET_AUTH_TOKEN",
            "NCCL_SECRET",
            "NCCL_MY_PASSWD",
            "NCCL_DEBUG_FILE",
            "NCCL_PLUGIN_CONF",
            "NCCL_COMMENT",
        ] {
            assert_eq!(r[k], REDACTED, "{k}");
        }
        for k in [
            "NCCL_IB_PKEY",
            "NCCL_IB_HCA",
            "NCCL_SOCKET_IFNAME",
            "NCCL_TOPO_FILE",
            "NCCL_ALGO",
            "CUDA_VISIBLE_DEVICES",
        ] {
            assert_eq!(r[k], env[k], "{k}");
        }
    }

    #[test]
    fn timestamps_are_iso_utc() {
        let t = utc_now();
        assert_eq!(t.len(), 20);
        assert!(t.ends_with('Z'));
        assert_eq!(&t[4..5], "-");
    }
}
