//! A read-only file tree that discovery reads from: the disk under a root (the live machine,
//! a snapshot folder, a test tree) or a snapshot archive held in memory.
//!
//! Symlinks are resolved here, one component at a time, never by the kernel: sysfs is made
//! of relative links (`bus/pci/devices/X -> ../../../devices/pci0000:00/X`) that must work
//! inside any root, and a link that climbs out of the root, loops or chains more than
//! [`MAX_HOPS`] times is refused instead of followed. Files are then opened by a path that
//! holds no symlink, with `O_NOFOLLOW` on disk, through the bounded reader.

use super::read::{self, Cap, ReadError};
use std::cell::{Cell, RefCell};
use std::collections::{BTreeSet, HashMap};
use std::ffi::OsString;
use std::io;
use std::path::{Component, Path, PathBuf};

/// Linux's own limit on symlinks followed in one lookup (`MAXSYMLINKS`).
pub const MAX_HOPS: u32 = 40;

/// What is at a path, without following a final symlink.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Kind {
    File,
    Dir,
    Link,
    /// FIFO, device, socket: refused when read.
    Other,
}

/// The primitive operations, on physical paths (relative to the root, no symlink in them
/// except possibly the last component).
pub trait Tree {
    fn kind(&self, phys: &Path) -> io::Result<Kind>;
    fn link_target(&self, phys: &Path) -> io::Result<PathBuf>;
    fn read_phys(&self, phys: &Path, cap: Cap) -> Result<Vec<u8>, ReadError>;
    /// Entry names, sorted.
    fn list_phys(&self, phys: &Path) -> io::Result<Vec<String>>;
    /// The tree as the user named it (`box.tar.gz`, `snap/`), for messages.
    fn origin(&self) -> String;
    /// How a path inside reads in messages (`sys/x` or `box/sys/x` for a nested archive).
    fn member(&self, rel: &Path) -> PathBuf {
        rel.to_path_buf()
    }
    /// Whether an absolute link target means "from the root" (the live `/`) rather than
    /// "outside the tree".
    fn absolute_links_ok(&self) -> bool {
        false
    }
    /// Charges resolution work; false once a budget is spent (in-memory archives bound it).
    fn charge(&self, _steps: u64) -> bool {
        true
    }
    /// Where a link (a physical path) led before, for trees that cannot change.
    fn recall(&self, _link: &Path) -> Option<Resolved> {
        None
    }
    fn remember(&self, _link: &Path, _to: Resolved) {}
}

fn push_components(out: &mut Vec<OsString>, p: &Path) {
    // Reversed, so the next component to walk is at the end.
    for c in p.components().rev() {
        match c {
            Component::Normal(n) => out.push(n.to_owned()),
            Component::ParentDir => out.push(OsString::from("..")),
            _ => {}
        }
    }
}

/// Where a link led: the physical path, the hops it took (itself included), and whether a
/// component on the way was missing.
pub type Resolved = (PathBuf, u32, bool);

/// The physical path `rel` leads to, following symlinks inside the tree (the final one only
/// when `follow_last`). A missing component ends link-following: the rest is taken as
/// written, and reading it finds nothing. Trees that cannot change remember where each link
/// led, so a thousand links into one long chain cost one walk of the chain.
pub fn resolve(t: &dyn Tree, rel: &Path, follow_last: bool) -> Result<PathBuf, ReadError> {
    let mut pending = Vec::new();
    push_components(&mut pending, rel);
    let mut out = PathBuf::new();
    let (mut hops, mut missing) = (0, false);
    // Links being followed: (link, pending length before its target, hops before it).
    let mut frames: Vec<(PathBuf, usize, u32)> = Vec::new();
    loop {
        while frames.last().is_some_and(|f| f.1 == pending.len()) {
            if let Some((link, _, before)) = frames.pop() {
                t.remember(&link, (out.clone(), hops - before, missing));
            }
        }
        let Some(c) = pending.pop() else { break };
        if !t.charge(1) {
            return Err(ReadError::TooMuchResolving);
        }
        if c == ".." {
            if !out.pop() && !t.absolute_links_ok() {
                return Err(ReadError::Escapes);
            }
            continue;
        }
        let cand = out.join(&c);
        let last = pending.is_empty();
        let kind = if missing {
            Err(io::ErrorKind::NotFound.into())
        } else {
            t.kind(&cand)
        };
        match kind {
            Ok(Kind::Link) if follow_last || !last => {
                if let Some((to, h, m)) = t.recall(&cand) {
                    hops += h;
                    if hops > MAX_HOPS {
                        return Err(ReadError::TooManyLinks);
                    }
                    (out, missing) = (to, m);
                    continue;
                }
                hops += 1;
                if hops > MAX_HOPS {
                    return Err(ReadError::TooManyLinks);
                }
                let target = t.link_target(&cand)?;
                if target.is_absolute() {
                    if !t.absolute_links_ok() {
                        return Err(ReadError::Escapes);
                    }
                    out = PathBuf::new();
                }
                frames.push((cand, pending.len(), hops - 1));
                push_components(&mut pending, &target);
            }
            Ok(_) => out = cand,
            Err(e) if e.kind() == io::ErrorKind::NotFound => {
                missing = true;
                out = cand;
            }
            Err(e) => return Err(e.into()),
        }
    }
    Ok(out)
}

/// The bytes of the regular file at `rel` (links followed inside the tree), at most `cap`.
pub fn read(t: &dyn Tree, rel: &Path, cap: Cap) -> Result<Vec<u8>, ReadError> {
    let phys = resolve(t, rel, true)?;
    t.read_phys(&phys, cap)
}

pub fn list(t: &dyn Tree, rel: &Path) -> Result<Vec<String>, ReadError> {
    let phys = resolve(t, rel, true)?;
    Ok(t.list_phys(&phys)?)
}

/// A symlink's own target, as written.
pub fn read_link(t: &dyn Tree, rel: &Path) -> Result<PathBuf, ReadError> {
    let phys = resolve(t, rel, false)?;
    Ok(t.link_target(&phys)?)
}

/// Where `rel` leads, relative to the root, when it exists.
pub fn canonical(t: &dyn Tree, rel: &Path) -> Result<PathBuf, ReadError> {
    let phys = resolve(t, rel, true)?;
    t.kind(&phys)?;
    Ok(phys)
}

/// The disk under a root folder.
#[derive(Debug)]
pub struct Disk {
    root: PathBuf,
    system_root: bool,
}

impl Disk {
    pub fn new(root: &Path) -> Disk {
        Disk {
            root: root.to_path_buf(),
            system_root: std::fs::canonicalize(root).is_ok_and(|c| c == Path::new("/")),
        }
    }

    pub fn root(&self) -> &Path {
        &self.root
    }
}

impl Tree for Disk {
    fn kind(&self, phys: &Path) -> io::Result<Kind> {
        let t = std::fs::symlink_metadata(self.root.join(phys))?.file_type();
        Ok(if t.is_symlink() {
            Kind::Link
        } else if t.is_dir() {
            Kind::Dir
        } else if t.is_file() {
            Kind::File
        } else {
            Kind::Other
        })
    }
    fn link_target(&self, phys: &Path) -> io::Result<PathBuf> {
        std::fs::read_link(self.root.join(phys))
    }
    fn read_phys(&self, phys: &Path, cap: Cap) -> Result<Vec<u8>, ReadError> {
        read::file_opened(&self.root.join(phys), true, cap)
    }
    fn list_phys(&self, phys: &Path) -> io::Result<Vec<String>> {
        let mut names: Vec<String> = std::fs::read_dir(self.root.join(phys))?
            .filter_map(|e| e.ok())
            .map(|e| e.file_name().to_string_lossy().into_owned())
            .collect();
        names.sort();
        Ok(names)
    }
    fn origin(&self) -> String {
        self.root.display().to_string()
    }
    fn absolute_links_ok(&self) -> bool {
        self.system_root
    }
}

/// One entry of an in-memory tree.
#[derive(Debug)]
pub enum Node {
    Dir(BTreeSet<String>),
    File(Vec<u8>),
    Link(PathBuf),
}

/// A tree held in memory (a snapshot archive), optionally seen from a folder inside it.
/// The root is the node at the empty path.
#[derive(Debug, Default)]
pub struct Mem {
    pub(crate) nodes: HashMap<PathBuf, Node>,
    pub(crate) prefix: PathBuf,
    pub(crate) origin: String,
    /// Resolution steps left: links are resolved on every read, so a crafted tree of long
    /// chains cannot make that work unbounded.
    pub(crate) steps_left: Cell<u64>,
    /// Where each link led (at most one entry per link, so bounded by the tree).
    pub(crate) links_seen: RefCell<HashMap<PathBuf, Resolved>>,
}

impl Mem {
    /// The folder inside the archive that holds the snapshot (empty: the archive's top).
    pub fn prefix(&self) -> &Path {
        &self.prefix
    }

    /// Every symlink, by its path from the archive's top (not from [`Mem::prefix`]).
    pub fn links(&self) -> Vec<PathBuf> {
        self.nodes
            .iter()
            .filter(|(_, n)| matches!(n, Node::Link(_)))
            .map(|(p, _)| p.clone())
            .collect()
    }

    fn node(&self, phys: &Path) -> io::Result<&Node> {
        self.nodes
            .get(&self.prefix.join(phys))
            .ok_or_else(|| io::ErrorKind::NotFound.into())
    }
}

impl Tree for Mem {
    fn kind(&self, phys: &Path) -> io::Result<Kind> {
        Ok(match self.node(phys)? {
            Node::Dir(_) => Kind::Dir,
            Node::File(_) => Kind::File,
            Node::Link(_) => Kind::Link,
        })
    }
    fn link_target(&self, phys: &Path) -> io::Result<PathBuf> {
        match self.node(phys)? {
            Node::Link(t) => Ok(t.clone()),
            _ => Err(io::ErrorKind::InvalidInput.into()),
        }
    }
    fn read_phys(&self, phys: &Path, cap: Cap) -> Result<Vec<u8>, ReadError> {
        match self.node(phys)? {
            Node::File(d) if d.len() as u64 > cap.bytes => Err(ReadError::TooLarge(cap)),
            Node::File(d) => Ok(d.clone()),
            Node::Dir(_) => Err(ReadError::IsDir),
            // Unreachable after resolve, which follows the last link.
            Node::Link(_) => Err(ReadError::TooManyLinks),
        }
    }
    fn list_phys(&self, phys: &Path) -> io::Result<Vec<String>> {
        match self.node(phys)? {
            Node::Dir(c) => Ok(c.iter().cloned().collect()),
            _ => Err(io::Error::from_raw_os_error(libc::ENOTDIR)),
        }
    }
    fn origin(&self) -> String {
        self.origin.clone()
    }
    fn member(&self, rel: &Path) -> PathBuf {
        self.prefix.join(rel)
    }
    fn charge(&self, steps: u64) -> bool {
        let left = self.steps_left.get();
        self.steps_left.set(left.saturating_sub(steps));
        left >= steps
    }
    fn recall(&self, link: &Path) -> Option<Resolved> {
        self.links_seen.borrow().get(link).cloned()
    }
    fn remember(&self, link: &Path, to: Resolved) {
        self.links_seen.borrow_mut().insert(link.to_path_buf(), to);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn mem(entries: &[(&str, Node)]) -> Mem {
        let mut m = Mem {
            steps_left: Cell::new(1 << 20),
            ..Default::default()
        };
        m.nodes.insert(PathBuf::new(), Node::Dir(BTreeSet::new()));
        for (p, _) in entries {
            let mut anc = PathBuf::new();
            for c in Path::new(p).components() {
                let child = c.as_os_str().to_string_lossy().into_owned();
                if let Some(Node::Dir(set)) = m.nodes.get_mut(&anc) {
                    set.insert(child);
                }
                anc.push(c);
                m.nodes
                    .entry(anc.clone())
                    .or_insert_with(|| Node::Dir(BTreeSet::new()));
            }
        }
        for (p, n) in entries {
            let n = match n {
                Node::Dir(_) => Node::Dir(BTreeSet::new()),
                Node::File(d) => Node::File(d.clone()),
                Node::Link(t) => Node::Link(t.clone()),
            };
            if !matches!(n, Node::Dir(_)) {
                m.nodes.insert(PathBuf::from(p), n);
            }
        }
        m
    }

    #[test]
    fn links_resolve_inside_and_no_further() {
        let m = mem(&[
            (
                "sys/devices/pci0/dev/class",
                Node::File(b"0x0302\n".to_vec()),
            ),
            (
                "sys/bus/pci/devices/dev",
                Node::Link("../../../devices/pci0/dev".into()),
            ),
            ("d/s", Node::Link("../k".into())),
            ("d/t", Node::Link("s/../../../tmp/victim".into())),
            ("a", Node::Link("b".into())),
            ("b", Node::Link("a".into())),
            ("abs", Node::Link("/etc/passwd".into())),
        ]);
        assert_eq!(
            read(&m, Path::new("sys/bus/pci/devices/dev/class"), read::SYSFS).unwrap(),
            b"0x0302\n"
        );
        assert_eq!(
            canonical(&m, Path::new("sys/bus/pci/devices/dev")).unwrap(),
            Path::new("sys/devices/pci0/dev")
        );
        // `s` resolves first (to `k`, one level up), then the `..`s climb out.
        assert!(matches!(
            resolve(&m, Path::new("d/t"), true),
            Err(ReadError::Escapes)
        ));
        assert!(matches!(
            resolve(&m, Path::new("a"), true),
            Err(ReadError::TooManyLinks)
        ));
        assert!(matches!(
            resolve(&m, Path::new("abs"), true),
            Err(ReadError::Escapes)
        ));
        assert_eq!(read_link(&m, Path::new("a")).unwrap(), Path::new("b"));
        assert!(
            read(&m, Path::new("sys/nothing"), read::SYSFS)
                .unwrap_err()
                .is_not_found()
        );
    }

    #[test]
    fn remembered_links_still_count_their_hops() {
        // c0 -> c1 -> ... -> c39 -> end: c0 is 40 hops, Linux's limit.
        let mut e: Vec<(String, PathBuf)> = (0..40)
            .map(|i| {
                let next = if i == 39 {
                    "end".into()
                } else {
                    format!("c{}", i + 1)
                };
                (format!("c{i}"), PathBuf::from(next))
            })
            .collect();
        e.push(("via".into(), "c1".into()));
        e.push(("over".into(), "c0".into()));
        let mut entries: Vec<(&str, Node)> = vec![("end", Node::File(b"x".to_vec()))];
        entries.extend(e.iter().map(|(p, t)| (p.as_str(), Node::Link(t.clone()))));
        let m = mem(&entries);
        assert_eq!(
            resolve(&m, Path::new("c1"), true).unwrap(),
            Path::new("end")
        );
        assert!(m.recall(Path::new("c1")).is_some());
        // Through the remembered c1: 1 + 39 and 1 + 1 + 39 hops.
        assert_eq!(
            resolve(&m, Path::new("via"), true).unwrap(),
            Path::new("end")
        );
        assert!(matches!(
            resolve(&m, Path::new("over"), true),
            Err(ReadError::TooManyLinks)
        ));
        assert!(resolve(&m, Path::new("c0"), true).is_ok());
    }

    #[test]
    fn disk_links_cannot_leave_the_root() {
        let dir = tempfile::tempdir().unwrap();
        let root = dir.path().join("snap");
        std::fs::create_dir_all(root.join("proc")).unwrap();
        std::os::unix::fs::symlink("/etc/passwd", root.join("proc/hostname")).unwrap();
        std::os::unix::fs::symlink("../../x", root.join("proc/up")).unwrap();
        std::os::unix::fs::symlink("/dev/zero", root.join("proc/zero")).unwrap();
        let d = Disk::new(&root);
        for p in ["proc/hostname", "proc/up", "proc/zero"] {
            assert!(
                matches!(read(&d, Path::new(p), read::SYSFS), Err(ReadError::Escapes)),
                "{p}"
            );
        }
    }
}
