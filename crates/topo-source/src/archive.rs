//! Snapshot archives (.tar.gz) read as a stream into memory, never extracted to disk.
//!
//! An archive may come from anyone, so it is read the way `tar -t` would be, with every
//! member checked before it is kept: regular files, folders and symlinks only (hard links,
//! devices, FIFOs and sparse files are refused), names that are UTF-8 without control
//! characters, `..` or a leading `/`, and bounds on members, names and bytes that are checked
//! as the stream goes, so an archive of a million empty members or a gzip bomb stops at the
//! limit instead of after the work. Symlinks are kept as data and resolved in the memory
//! tree ([`super::tree`]); one that leads outside the archive, loops or chains too long is
//! refused. Nothing is written anywhere. Limits: docs/input-limits.md.

use super::read::{self, ReadError};
use super::tree::{self, Mem, Node};
use std::collections::{BTreeSet, HashMap};
use std::io::{BufRead, Read};
use std::path::{Path, PathBuf};

/// Members (headers, long-name and PAX records included). An 8-GPU HGX capture has about
/// 1000.
pub const MAX_ENTRIES: usize = 100_000;
/// Tree nodes, folders implied by member names included.
pub const MAX_NODES: usize = MAX_ENTRIES + 20_000;
/// One member's content: the largest per-file cap a snapshot reader applies (nvml.json and
/// /proc/cpuinfo, 8 MiB each).
pub const MAX_MEMBER: u64 = read::NVML_JSON.bytes;
/// All members' content together (a real capture holds well under 1 MiB).
pub const MAX_TOTAL: u64 = 24 << 20;
/// Bytes of all node paths together, so deep names cannot multiply memory.
pub const MAX_NAME_BYTES: u64 = 8 << 20;
/// One path (a quarter of Linux's PATH_MAX: the deepest sysfs path topo reads is under
/// 200 bytes), one component (NAME_MAX), folders deep.
pub const MAX_PATH: usize = 1024;
pub const MAX_COMPONENT: usize = 255;
pub const MAX_DEPTH: usize = 64;
/// A PAX extended header.
const MAX_PAX: u64 = 64 << 10;
/// Zero padding allowed after the end-of-archive marker (tar pads to its record size,
/// 10 KiB by default).
const MAX_PADDING: u64 = 1 << 20;
/// Path components walked while resolving symlinks, over the archive's whole life (checking
/// every link once, then the replay). A real capture needs a few ten thousand.
pub const MAX_RESOLVE_STEPS: u64 = 2_000_000;

/// Reads `path` into a memory tree; the error is the reason, for the caller to prefix with
/// the archive's name.
pub fn load(path: &Path) -> Result<Mem, String> {
    let (f, len) = read::open_regular(path, false).map_err(|e| e.to_string())?;
    if len > read::ARCHIVE.bytes {
        return Err(ReadError::TooLarge(read::ARCHIVE).to_string());
    }
    load_from(std::io::BufReader::new(f), &path.display().to_string())
}

/// [`load`] from any byte stream (the fuzz target feeds it bytes); `origin` names it.
pub fn load_from<R: BufRead>(r: R, origin: &str) -> Result<Mem, String> {
    let mut ar = tar::Archive::new(flate2::bufread::GzDecoder::new(r));
    let mut b = Builder::new(origin);
    {
        let entries = ar.entries().map_err(|e| corrupt(&e))?.raw(true);
        for entry in entries {
            b.member(entry.map_err(|e| corrupt(&e))?)?;
        }
    }
    if b.pending.open {
        return Err(corrupt(&"an extension record with no member after it"));
    }
    check_end(ar.into_inner())?;
    b.finish()
}

fn corrupt(e: &dyn std::fmt::Display) -> String {
    let msg = e.to_string().to_lowercase();
    let msg = msg.split(" (os error").next().unwrap_or(&msg).to_string();
    format!("truncated or corrupt archive ({msg})")
}

/// After the end-of-archive marker: zero padding only, then the end of the gzip stream (its
/// CRC and length checked by reading to the end), then the end of the file. Anything else is
/// data some other reader might take for more members.
fn check_end<R: BufRead>(mut gz: flate2::bufread::GzDecoder<R>) -> Result<(), String> {
    let mut rest = Vec::new();
    (&mut gz)
        .take(MAX_PADDING + 1)
        .read_to_end(&mut rest)
        .map_err(|e| corrupt(&e))?;
    if rest.len() as u64 > MAX_PADDING || rest.iter().any(|&b| b != 0) {
        return Err("data after the end-of-archive marker".into());
    }
    let mut inner = gz.into_inner();
    let left = inner.fill_buf().map_err(|e| corrupt(&e))?;
    if !left.is_empty() {
        return Err("data after the end of the gzip stream".into());
    }
    Ok(())
}

/// Names from GNU long-name and PAX records, for the member that follows them.
#[derive(Default)]
struct Pending {
    name: Option<Vec<u8>>,
    link: Option<Vec<u8>>,
    /// An extension record was read and its member has not come yet.
    open: bool,
}

struct Builder {
    mem: Mem,
    pending: Pending,
    headers: usize,
    content: u64,
    name_bytes: u64,
}

type Entry<'a, R> = tar::Entry<'a, flate2::bufread::GzDecoder<R>>;

impl Builder {
    fn new(origin: &str) -> Builder {
        let mut mem = Mem {
            origin: origin.to_string(),
            ..Default::default()
        };
        mem.steps_left.set(MAX_RESOLVE_STEPS);
        mem.nodes.insert(PathBuf::new(), Node::Dir(BTreeSet::new()));
        Builder {
            mem,
            pending: Pending::default(),
            headers: 0,
            content: 0,
            name_bytes: 0,
        }
    }

    fn member<R: BufRead>(&mut self, mut e: Entry<R>) -> Result<(), String> {
        self.headers += 1;
        if self.headers > MAX_ENTRIES {
            return Err(format!("more than {MAX_ENTRIES} members: not a snapshot"));
        }
        let t = e.header().entry_type();
        let size = e.header().entry_size().map_err(|e| corrupt(&e))?;
        self.pending.open = t.is_gnu_longname()
            || t.is_gnu_longlink()
            || t.is_pax_local_extensions()
            || t.is_pax_global_extensions();
        if self.pending.open {
            return self.extension(&mut e, t, size);
        }
        let raw = self
            .pending
            .name
            .take()
            .unwrap_or_else(|| e.header().path_bytes().into_owned());
        let rel = clean_name(&raw)?;
        check_type(t, &rel)?;
        let is_dir = t.is_dir() || (t.is_file() && raw.ends_with(b"/"));
        if (is_dir || t.is_symlink()) && size != 0 {
            return Err(format!(
                "{}: a folder or symlink member with data",
                rel.display()
            ));
        }
        if rel.as_os_str().is_empty() {
            // `tar -C box .` starts with `./`: the top itself, which exists already.
            return match is_dir {
                true => Ok(()),
                false => Err(format!(
                    "member name '{}' names no file",
                    printable_bytes(&raw)
                )),
            };
        }
        if is_dir {
            return self.insert(&rel, Node::Dir(BTreeSet::new()));
        }
        if t.is_symlink() {
            let target = match self.pending.link.take() {
                Some(l) => l,
                None => e
                    .header()
                    .link_name_bytes()
                    .unwrap_or_default()
                    .into_owned(),
            };
            let target = link_target(&rel, &target)?;
            return self.insert(&rel, Node::Link(target));
        }
        self.file(&rel, e, size)
    }

    /// A GNU long-name or PAX record: it names (or describes) the member after it.
    fn extension<R: BufRead>(
        &mut self,
        e: &mut Entry<R>,
        t: tar::EntryType,
        size: u64,
    ) -> Result<(), String> {
        if t.is_pax_local_extensions() || t.is_pax_global_extensions() {
            let v = read_record(e, size, MAX_PAX, "pax header")?;
            return self.pax(&v, t.is_pax_global_extensions());
        }
        let v = read_record(e, size, MAX_PATH as u64 + 1, "long name")?;
        let v = v.split(|&b| b == 0).next().unwrap_or(&[]).to_vec();
        if t.is_gnu_longname() {
            self.pending.name = Some(v);
        } else {
            self.pending.link = Some(v);
        }
        Ok(())
    }

    fn file<R: BufRead>(&mut self, rel: &Path, e: Entry<R>, size: u64) -> Result<(), String> {
        let shown = rel.display();
        if size > MAX_MEMBER {
            return Err(format!(
                "{shown}: {size} bytes, more than the {} a snapshot file may hold",
                read::human(MAX_MEMBER)
            ));
        }
        self.content += size;
        if self.content > MAX_TOTAL {
            return Err(format!(
                "more than {} of content: not a snapshot",
                read::human(MAX_TOTAL)
            ));
        }
        let mut data = Vec::with_capacity(size as usize);
        e.take(size)
            .read_to_end(&mut data)
            .map_err(|e| corrupt(&e))?;
        if data.len() as u64 != size {
            return Err(corrupt(&"a member is cut short"));
        }
        self.insert(rel, Node::File(data))
    }

    /// PAX records `LEN key=value\n`: `path` and `linkpath` name the next member; a `size`
    /// would make this reader and others disagree on where members start, so it is refused.
    fn pax(&mut self, v: &[u8], global: bool) -> Result<(), String> {
        let mut rest = v;
        while !rest.is_empty() {
            let sp = rest
                .iter()
                .position(|&b| b == b' ')
                .ok_or_else(|| corrupt(&"bad pax record"))?;
            let len: usize = std::str::from_utf8(&rest[..sp])
                .ok()
                .and_then(|s| s.parse().ok())
                .filter(|&n| n > sp + 1 && n <= rest.len())
                .ok_or_else(|| corrupt(&"bad pax record"))?;
            let rec = &rest[sp + 1..len];
            rest = &rest[len..];
            let rec = rec.strip_suffix(b"\n").unwrap_or(rec);
            let Some(eq) = rec.iter().position(|&b| b == b'=') else {
                return Err(corrupt(&"bad pax record"));
            };
            let (key, val) = (&rec[..eq], &rec[eq + 1..]);
            match key {
                b"path" | b"linkpath" | b"size" if global => {
                    return Err("a global pax header that renames or resizes members".into());
                }
                b"path" => self.pending.name = Some(val.to_vec()),
                b"linkpath" => self.pending.link = Some(val.to_vec()),
                b"size" => return Err("a pax header that overrides a member's size".into()),
                _ => {}
            }
        }
        Ok(())
    }

    /// Adds a node and any missing folders above it. A path twice, or beneath a file or a
    /// symlink, is refused: nothing is ever looked up through a member's own name. Each folder
    /// is created once, so the work per member is one lookup plus the folders it adds.
    fn insert(&mut self, rel: &Path, node: Node) -> Result<(), String> {
        let parent = rel.parent().unwrap_or(Path::new(""));
        self.ensure_dir(parent, rel)?;
        match (self.mem.nodes.get(rel), &node) {
            (Some(Node::Dir(_)), Node::Dir(_)) => return Ok(()),
            (Some(_), _) => {
                return Err(format!("{}: appears twice in the archive", rel.display()));
            }
            (None, _) => {}
        }
        self.add_node(rel, node)
    }

    /// Makes `dir` a folder, creating it and the folders above it that are missing.
    fn ensure_dir(&mut self, dir: &Path, rel: &Path) -> Result<(), String> {
        let mut missing = Vec::new();
        let mut cur = Some(dir);
        while let Some(d) = cur {
            match self.mem.nodes.get(d) {
                Some(Node::Dir(_)) => break,
                Some(Node::Link(_)) => {
                    return Err(format!("{}: lies beneath a symlink", rel.display()));
                }
                Some(Node::File(_)) => {
                    return Err(format!("{}: lies beneath a file", rel.display()));
                }
                None => missing.push(d),
            }
            cur = d.parent();
        }
        for d in missing.into_iter().rev() {
            self.add_node(d, Node::Dir(BTreeSet::new()))?;
        }
        Ok(())
    }

    /// Inserts a node whose parent is a folder, and names it there.
    fn add_node(&mut self, p: &Path, node: Node) -> Result<(), String> {
        self.count_node(p)?;
        let parent = p.parent().unwrap_or(Path::new(""));
        if let (Some(Node::Dir(children)), Some(name)) =
            (self.mem.nodes.get_mut(parent), p.file_name())
        {
            children.insert(name.to_string_lossy().into_owned());
        }
        self.mem.nodes.insert(p.to_path_buf(), node);
        Ok(())
    }

    fn count_node(&mut self, p: &Path) -> Result<(), String> {
        self.name_bytes += p.as_os_str().len() as u64;
        if self.mem.nodes.len() >= MAX_NODES {
            return Err(format!(
                "more than {MAX_NODES} files and folders: not a snapshot"
            ));
        }
        if self.name_bytes > MAX_NAME_BYTES {
            return Err(format!(
                "more than {} of names: not a snapshot",
                read::human(MAX_NAME_BYTES)
            ));
        }
        Ok(())
    }

    /// Every symlink must resolve inside the archive, in a bounded number of hops.
    fn finish(self) -> Result<Mem, String> {
        let mut links = self.mem.links();
        // Sorted, so the member an error names does not depend on hashing.
        links.sort();
        for l in links {
            match tree::resolve(&self.mem, &l, true) {
                Ok(_) => {}
                Err(ReadError::Escapes) => {
                    return Err(format!(
                        "symlink '{}' points outside the snapshot",
                        l.display()
                    ));
                }
                Err(e) => return Err(format!("symlink '{}': {e}", l.display())),
            }
        }
        let mut mem = self.mem;
        mem.prefix = snapshot_root(&mem.nodes);
        // Remembered links are keyed by paths from the top, which the prefix changes.
        mem.links_seen.borrow_mut().clear();
        Ok(mem)
    }
}

/// `tar czf box.tgz box/` puts the snapshot one folder down: use that folder when the top
/// has no meta.json and exactly one folder holding one.
fn snapshot_root(nodes: &HashMap<PathBuf, Node>) -> PathBuf {
    if nodes.contains_key(Path::new(crate::META)) {
        return PathBuf::new();
    }
    let Some(Node::Dir(top)) = nodes.get(Path::new("")) else {
        return PathBuf::new();
    };
    let with_meta: Vec<&String> = top
        .iter()
        .filter(|n| {
            matches!(nodes.get(Path::new(n.as_str())), Some(Node::Dir(_)))
                && matches!(
                    nodes.get(&Path::new(n.as_str()).join(crate::META)),
                    Some(Node::File(_))
                )
        })
        .collect();
    match with_meta.as_slice() {
        [one] => PathBuf::from(one.as_str()),
        _ => PathBuf::new(),
    }
}

/// Regular files, folders and symlinks only: anything else could not come from a capture,
/// and a hard link or device is what an extracting reader would be tricked by.
fn check_type(t: tar::EntryType, rel: &Path) -> Result<(), String> {
    let what = if t.is_hard_link() {
        "hard link".to_string()
    } else if t.is_character_special() || t.is_block_special() {
        "device file".to_string()
    } else if t.is_fifo() {
        "fifo".to_string()
    } else if t.is_gnu_sparse() {
        "sparse file".to_string()
    } else if t.is_file() || t.is_contiguous() || t.is_dir() || t.is_symlink() {
        return Ok(());
    } else {
        format!("member of type '{}'", printable_bytes(&[t.as_byte()]))
    };
    Err(format!(
        "{}: {what} (a snapshot holds only files, folders and symlinks)",
        rel.display()
    ))
}

fn printable_bytes(b: &[u8]) -> String {
    printable(&String::from_utf8_lossy(b))
}

fn read_record<R: BufRead>(
    e: &mut Entry<R>,
    size: u64,
    max: u64,
    what: &str,
) -> Result<Vec<u8>, String> {
    if size > max {
        return Err(format!(
            "a {what} record of {size} bytes (at most {} allowed)",
            read::human(max)
        ));
    }
    let mut v = Vec::with_capacity(size as usize);
    e.take(size).read_to_end(&mut v).map_err(|e| corrupt(&e))?;
    if v.len() as u64 != size {
        return Err(corrupt(&"a member is cut short"));
    }
    Ok(v)
}

/// Control characters shown escaped, so a name cannot rewrite the terminal or forge a line;
/// long names cut, so an error stays one readable line.
fn printable(s: &str) -> String {
    const SHOWN: usize = 120;
    let mut out: String = s
        .chars()
        .take(SHOWN)
        .map(|c| {
            if c.is_control() {
                c.escape_default().to_string()
            } else {
                c.to_string()
            }
        })
        .collect();
    if s.chars().nth(SHOWN).is_some() {
        out.push('…');
    }
    out
}

/// A member name as a clean relative path: UTF-8, no control characters, not absolute, no
/// `..`, within the length and depth limits. `.` components and a trailing `/` are dropped,
/// so `./` is the empty path: the archive's top.
fn clean_name(raw: &[u8]) -> Result<PathBuf, String> {
    let lossy = || printable(&String::from_utf8_lossy(raw));
    let s =
        std::str::from_utf8(raw).map_err(|_| format!("member name '{}' is not UTF-8", lossy()))?;
    let bad = |why: &str| Err(format!("member name '{}' {why}", printable(s)));
    if s.chars().any(char::is_control) {
        return bad("holds control characters");
    }
    if raw.len() > MAX_PATH {
        return bad(&format!("is longer than {MAX_PATH} bytes"));
    }
    if s.starts_with('/') {
        return bad("is an absolute path");
    }
    let mut out = String::with_capacity(s.len());
    let mut depth = 0;
    for part in s.split('/') {
        match part {
            "" | "." => continue,
            ".." => return bad("climbs out with '..'"),
            p if p.len() > MAX_COMPONENT => {
                return bad(&format!("has a part longer than {MAX_COMPONENT} bytes"));
            }
            p => {
                if depth > 0 {
                    out.push('/');
                }
                out.push_str(p);
                depth += 1;
            }
        }
    }

    if depth > MAX_DEPTH {
        return bad(&format!("is more than {MAX_DEPTH} folders deep"));
    }
    Ok(PathBuf::from(out))
}

/// A symlink target kept as data: UTF-8, relative, short. Where it leads is checked once the
/// whole tree is known.
fn link_target(rel: &Path, raw: &[u8]) -> Result<PathBuf, String> {
    let shown = rel.display();
    let s = std::str::from_utf8(raw)
        .map_err(|_| format!("symlink '{shown}' has a target that is not UTF-8"))?;
    if s.is_empty() || raw.len() > MAX_PATH || s.chars().any(char::is_control) {
        return Err(format!(
            "symlink '{shown}' has an empty, overlong or unprintable target"
        ));
    }
    if s.starts_with('/') {
        return Err(format!("symlink '{shown}' points outside the snapshot"));
    }
    Ok(PathBuf::from(s))
}
