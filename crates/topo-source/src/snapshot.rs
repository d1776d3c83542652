//! Snapshots: capture the files discovery reads, replay them through the live code path.
//!
//! A snapshot is a folder (or a .tar.gz of one) holding the sysfs/procfs files discovery read,
//! at their real paths with sysfs's relative symlinks kept as symlinks, plus `meta.json`
//! (who, when, environment, NVML status) and `nvml.json` (NVML's answer, when there was one).
//! Replaying it runs [`live::discover_with`] on that folder, so a snapshot and the machine it
//! came from give the same model.

use super::live::{self, Inputs};
use super::nvml::{self, NvmlReport};
use super::sysfs::Sysfs;
use crate::error::{self, ErrorKind};
use anyhow::{Context, Result};
use serde::{Deserialize, Serialize};
use std::collections::{BTreeMap, HashMap};
use std::io::Read;
use std::path::{Component, Path, PathBuf};
use topo_model::{SourceInfo, Topology};

pub const SCHEMA: &str = "topo.snapshot/v1";
const META: &str = "meta.json";
const NVML: &str = "nvml.json";

/// `meta.json`.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct Meta {
    pub schema: String,
    /// The topo version that captured it.
    pub topo_version: String,
    /// UTC, `2026-11-29T08:00:00Z`.
    pub captured_at: String,
    pub host: Option<String>,
    pub kernel: Option<String>,
    /// NCCL's spelling: `x86_64`, `arm64`, `ppc64`.
    pub arch: String,
    pub driver_version: Option<String>,
    pub cuda_driver_version: Option<String>,
    /// NCCL_* and CUDA_VISIBLE_DEVICES at capture time.
    #[serde(default)]
    pub env: BTreeMap<String, String>,
    #[serde(default)]
    pub nvml: NvmlStatus,
}

#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct NvmlStatus {
    /// NVML answered; its answer is `nvml.json`.
    pub available: bool,
    /// Why not, when it did not (`NVML not found (libnvidia-ml.so.1 could not be loaded)`).
    pub reason: Option<String>,
}

const NOT_RECORDED: &str = "NVML was not recorded with this tree (no nvml.json)";

/// Inputs for a tree that is not the live root: `meta.json` and `nvml.json` when present.
/// A file that exists but does not parse is an error; absent files mean "no NVML" and the
/// running binary's architecture and environment.
pub fn recorded_inputs(root: &Path) -> Result<Inputs> {
    let meta = read_meta(root)?;
    let nvml_path = root.join(NVML);
    let nvml = if nvml_path.is_file() {
        let text = std::fs::read_to_string(&nvml_path)
            .map_err(|e| bad(&nvml_path, &super::io_reason(&e)))?;
        let r: NvmlReport = serde_json::from_str(&text)
            .map_err(|e| bad(&nvml_path, &format!("not NVML JSON: {e}")))?;
        Ok(r)
    } else {
        Err(meta
            .as_ref()
            .and_then(|m| m.nvml.reason.clone())
            .unwrap_or_else(|| NOT_RECORDED.to_string()))
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

fn read_meta(root: &Path) -> Result<Option<Meta>> {
    read_meta_shown(root, &root.join(META))
}

/// [`read_meta`] with errors naming `shown` (the archive the user passed, not the temporary
/// folder it was unpacked into).
fn read_meta_shown(root: &Path, shown: &Path) -> Result<Option<Meta>> {
    let p = root.join(META);
    if !p.is_file() {
        return Ok(None);
    }
    let text = std::fs::read_to_string(&p).map_err(|e| bad(shown, &super::io_reason(&e)))?;
    let bad_json = |e: serde_json::Error| bad(shown, &format!("bad meta.json: {e}"));
    let value: serde_json::Value = serde_json::from_str(&text).map_err(bad_json)?;
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

/// Replays a snapshot folder or .tar.gz.
pub fn load(path: &Path) -> Result<Topology> {
    let origin = Some(path.display().to_string());
    if path.is_dir() {
        return load_dir(path, path, origin);
    }
    let tmp = TempDir::new()?;
    extract(path, tmp.path())?;
    // An archive of a folder may hold the snapshot one level down.
    let root = if tmp.path().join(META).is_file() {
        tmp.path().to_path_buf()
    } else {
        let sub: Vec<PathBuf> = std::fs::read_dir(tmp.path())
            .map(|rd| {
                rd.filter_map(|e| e.ok())
                    .map(|e| e.path())
                    .filter(|p| p.join(META).is_file())
                    .collect()
            })
            .unwrap_or_default();
        match sub.as_slice() {
            [one] => one.clone(),
            _ => tmp.path().to_path_buf(),
        }
    };
    load_dir(&root, path, origin)
}

fn load_dir(root: &Path, shown: &Path, origin: Option<String>) -> Result<Topology> {
    let shown_meta = if root.starts_with(shown) {
        root.join(META)
    } else {
        shown.to_path_buf()
    };
    if read_meta_shown(root, &shown_meta)?.is_none() {
        return Err(bad(shown, "not a topo snapshot (no meta.json)"));
    }
    let inputs = recorded_inputs(root)?;
    let fs = Sysfs::new(root);
    let mut topo = live::discover_with(&fs, inputs);
    topo.source = SourceInfo {
        kind: "snapshot".into(),
        origin,
    };
    Ok(topo)
}

/// A temporary folder removed on drop (std only: tempfile is a dev-dependency).
struct TempDir(PathBuf);

impl TempDir {
    fn new() -> Result<TempDir> {
        let nanos = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map(|d| d.as_nanos())
            .unwrap_or(0);
        // The counter keeps two loads in one process (threads in tests) apart.
        static NEXT: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);
        let n = NEXT.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        let p = std::env::temp_dir().join(format!("topo-{}-{nanos}-{n}", std::process::id()));
        std::fs::create_dir_all(&p).with_context(|| format!("cannot create {}", p.display()))?;
        Ok(TempDir(p))
    }
    fn path(&self) -> &Path {
        &self.0
    }
}

impl Drop for TempDir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

/// Archive limits: a snapshot is a few MiB; anything far larger is not one.
const MAX_BYTES: u64 = 1 << 30;
const MAX_ENTRIES: usize = 1_000_000;

/// Removes `.` components; `None` for absolute paths or any `..`.
fn clean_relative(p: &Path) -> Option<PathBuf> {
    let mut out = PathBuf::new();
    for c in p.components() {
        match c {
            Component::Normal(n) => out.push(n),
            Component::CurDir => {}
            _ => return None,
        }
    }
    Some(out)
}

/// Lexically resolves `target` from the folder `dir` (both relative to the root); `None`
/// when it climbs above the root or is absolute.
fn resolve_inside(dir: &Path, target: &Path) -> Option<PathBuf> {
    let mut out: Vec<std::ffi::OsString> = dir
        .components()
        .filter_map(|c| {
            if let Component::Normal(n) = c {
                Some(n.to_owned())
            } else {
                None
            }
        })
        .collect();
    for c in target.components() {
        match c {
            Component::Normal(n) => out.push(n.to_owned()),
            Component::CurDir => {}
            Component::ParentDir => {
                out.pop()?;
            }
            _ => return None,
        }
    }
    Some(out.iter().collect())
}

/// True when no existing prefix of `rel` under `root` is a symlink: entries are only ever
/// written at physical paths, never through a link.
fn no_symlink_prefix(root: &Path, rel: &Path) -> bool {
    let mut cur = root.to_path_buf();
    let comps: Vec<_> = rel.components().collect();
    for c in comps.iter().take(comps.len().saturating_sub(1)) {
        cur.push(c);
        match std::fs::symlink_metadata(&cur) {
            Ok(m) if m.file_type().is_symlink() => return false,
            _ => {}
        }
    }
    true
}

/// Extracts a .tar.gz into `dest` safely: no absolute paths, no `..`, nothing written through
/// a symlink, symlinks must resolve inside `dest`, sizes bounded.
fn extract(archive: &Path, dest: &Path) -> Result<()> {
    let corrupt = |e: &dyn std::fmt::Display| {
        let msg = e.to_string().to_lowercase();
        let msg = msg.split(" (os error").next().unwrap_or(&msg).to_string();
        bad(archive, &format!("truncated or corrupt archive ({msg})"))
    };
    let f = std::fs::File::open(archive).map_err(|e| bad(archive, &super::io_reason(&e)))?;
    let mut ar = tar::Archive::new(flate2::read::GzDecoder::new(std::io::BufReader::new(f)));
    let mut total: u64 = 0;
    let mut links: Vec<PathBuf> = Vec::new();
    let entries = ar.entries().map_err(|e| corrupt(&e))?;
    for (i, entry) in entries.enumerate() {
        let mut e = entry.map_err(|e| corrupt(&e))?;
        if i >= MAX_ENTRIES {
            return Err(bad(archive, "too many entries for a snapshot"));
        }
        let raw = e.path().map_err(|e| corrupt(&e))?.into_owned();
        let Some(rel) = clean_relative(&raw) else {
            return Err(bad(
                archive,
                &format!("unsafe path '{}' in archive", raw.display()),
            ));
        };
        if rel.as_os_str().is_empty() {
            continue;
        }
        if !no_symlink_prefix(dest, &rel) {
            return Err(bad(
                archive,
                &format!("entry '{}' lies beneath a symlink", rel.display()),
            ));
        }
        let out = dest.join(&rel);
        let kind = e.header().entry_type();
        if kind.is_dir() {
            std::fs::create_dir_all(&out)
                .with_context(|| format!("cannot create {}", out.display()))?;
        } else if kind.is_file() {
            if let Some(p) = out.parent() {
                std::fs::create_dir_all(p)
                    .with_context(|| format!("cannot create {}", p.display()))?;
            }
            let size = e.header().size().map_err(|e| corrupt(&e))?;
            total = total.saturating_add(size);
            if total > MAX_BYTES {
                return Err(bad(archive, "more than 1 GiB of content: not a snapshot"));
            }
            let mut buf = Vec::with_capacity(size.min(1 << 20) as usize);
            (&mut e)
                .take(size)
                .read_to_end(&mut buf)
                .map_err(|e| corrupt(&e))?;
            std::fs::write(&out, &buf)
                .with_context(|| format!("cannot write {}", out.display()))?;
        } else if kind.is_symlink() {
            let target = e
                .link_name()
                .map_err(|e| corrupt(&e))?
                .map(|t| t.into_owned())
                .unwrap_or_default();
            let parent = rel.parent().unwrap_or(Path::new(""));
            match resolve_inside(parent, &target) {
                Some(r) if !r.as_os_str().is_empty() => {}
                _ => {
                    return Err(bad(
                        archive,
                        &format!("symlink '{}' points outside the snapshot", rel.display()),
                    ));
                }
            }
            if let Some(p) = out.parent() {
                std::fs::create_dir_all(p)
                    .with_context(|| format!("cannot create {}", p.display()))?;
            }
            if std::fs::symlink_metadata(&out).is_err() {
                std::os::unix::fs::symlink(&target, &out)
                    .with_context(|| format!("cannot create {}", out.display()))?;
            }
            links.push(out);
        }
        // Hard links, devices and FIFOs have no place in a snapshot: skipped.
    }
    // Tar stops at its end marker; reading the gzip stream to its end checks the trailer
    // (length and CRC), so a cut after the last entry is still caught.
    std::io::copy(&mut ar.into_inner(), &mut std::io::sink()).map_err(|e| corrupt(&e))?;
    // Lexical checks cannot see every combination of links; the resolved paths can.
    let base = std::fs::canonicalize(dest)
        .with_context(|| format!("cannot resolve {}", dest.display()))?;
    for l in links {
        if let Ok(c) = std::fs::canonicalize(&l)
            && !c.starts_with(&base)
        {
            return Err(bad(archive, "a symlink resolves outside the snapshot"));
        }
    }
    Ok(())
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
    src: &'a Path,
    fs: &'a Sysfs,
    items: BTreeMap<PathBuf, Item>,
    /// Lexical path prefix → its physical path (symlinks resolved), so shared prefixes are
    /// resolved once.
    memo: HashMap<PathBuf, PathBuf>,
}

impl<'a> Plan<'a> {
    fn new(src: &'a Path, fs: &'a Sysfs) -> Plan<'a> {
        Plan {
            src,
            fs,
            items: BTreeMap::new(),
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
                    let from = self.src.join(&cand);
                    let md = std::fs::symlink_metadata(&from).ok()?;
                    if md.file_type().is_symlink() {
                        let target = std::fs::read_link(&from).ok()?;
                        if target.is_absolute() {
                            return None;
                        }
                        self.items.insert(cand, Item::Link(target.clone()));
                        phys = self.add(&phys.join(&target), depth + 1)?;
                    } else if md.is_dir() {
                        self.items.entry(cand.clone()).or_insert(Item::Dir);
                        phys = cand;
                    } else {
                        if i + 1 == comps.len() && !self.items.contains_key(&cand) {
                            // Unreadable attributes are left out: replay sees them as absent.
                            let bytes =
                                self.fs.content(rel).or_else(|| std::fs::read(&from).ok())?;
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

    fn write_folder(&self, out: &Path) -> Result<()> {
        let ctx = |p: &Path| format!("cannot write {}", p.display());
        std::fs::create_dir_all(out).with_context(|| ctx(out))?;
        for (rel, it) in &self.items {
            let to = out.join(rel);
            if let Some(parent) = to.parent() {
                std::fs::create_dir_all(parent).with_context(|| ctx(parent))?;
            }
            match it {
                Item::Dir => std::fs::create_dir_all(&to).with_context(|| ctx(&to))?,
                Item::File(d) => std::fs::write(&to, d).with_context(|| ctx(&to))?,
                Item::Link(t) => std::os::unix::fs::symlink(t, &to).with_context(|| ctx(&to))?,
            }
        }
        Ok(())
    }

    fn write_archive(&self, out: &Path) -> Result<()> {
        let f = std::fs::File::create(out)
            .with_context(|| format!("cannot write {}", out.display()))?;
        let gz = flate2::write::GzEncoder::new(
            std::io::BufWriter::new(f),
            flate2::Compression::default(),
        );
        let mut tb = tar::Builder::new(gz);
        for (rel, it) in &self.items {
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
        let mut w = tb.into_inner()?.finish()?;
        std::io::Write::flush(&mut w)?;
        Ok(())
    }
}

/// Civil UTC time from the Unix clock (no date crate needed for one timestamp).
fn utc_now() -> String {
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

fn is_archive_name(p: &Path) -> bool {
    let n = p
        .file_name()
        .map(|n| n.to_string_lossy().to_ascii_lowercase())
        .unwrap_or_default();
    n.ends_with(".tar.gz") || n.ends_with(".tgz")
}

/// Captures the machine under `root` into `out` (a .tar.gz, or a folder when `out` has no
/// .tar.gz/.tgz suffix); returns a one-line summary.
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

    let mut plan = Plan::new(root, &fs);
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
        env: inputs.env.clone(),
        nvml: NvmlStatus {
            available: nvml.is_ok(),
            reason: nvml.as_ref().err().cloned(),
        },
    };
    plan.add_file(META, serde_json::to_string_pretty(&meta)?);
    if let Ok(r) = &nvml {
        plan.add_file(NVML, serde_json::to_string_pretty(r)?);
    }

    let (files, bytes) = plan.size();
    let shown = if archive {
        plan.write_archive(out)?;
        std::fs::metadata(out).map(|m| m.len()).unwrap_or(bytes)
    } else {
        plan.write_folder(out)?;
        bytes
    };
    Ok(format!(
        "captured {files} files ({} KiB) to {}",
        shown.div_ceil(1024),
        out.display()
    ))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn paths_stay_inside() {
        assert_eq!(
            clean_relative(Path::new("./sys/a")),
            Some(PathBuf::from("sys/a"))
        );
        assert_eq!(clean_relative(Path::new("/etc/passwd")), None);
        assert_eq!(clean_relative(Path::new("sys/../../x")), None);
        assert_eq!(
            resolve_inside(
                Path::new("sys/bus/pci/devices"),
                Path::new("../../../devices/pci0000:00/0000:00:00.0")
            ),
            Some(PathBuf::from("sys/devices/pci0000:00/0000:00:00.0"))
        );
        assert_eq!(resolve_inside(Path::new("sys"), Path::new("../../x")), None);
        assert_eq!(resolve_inside(Path::new("sys"), Path::new("/x")), None);
    }

    #[test]
    fn timestamps_are_iso_utc() {
        let t = utc_now();
        assert_eq!(t.len(), 20);
        assert!(t.ends_with('Z'));
        assert_eq!(&t[4..5], "-");
    }
}
