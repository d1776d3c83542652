//! PCI vendor and device names from the PCI ID database (`pci.ids`).
//!
//! Two copies are read: the machine's own file (`/usr/share/misc/pci.ids` on Debian and
//! Ubuntu, `/usr/share/hwdata/pci.ids` on Fedora), read when present, and a subset embedded
//! in the binary (`data/pci.ids`, cut by `scripts/gen-pci-ids.py`, its header says which
//! version and where from) so names work on machines without one. The newer of the two by its
//! `Version:` line answers first; the other fills what the first lacks. `TOPO_PCI_IDS` names
//! another file to read instead of the system's, or `none` to use the embedded subset only
//! (tests use that, so their output does not depend on the machine).

use crate::read::{self, Cap};
use std::collections::HashMap;
use std::path::Path;
use std::sync::OnceLock;

/// Debian's pci.ids is about 1.4 MB; 16 MiB leaves room for growth and no more.
pub const PCI_IDS: Cap = Cap {
    bytes: 16 << 20,
    what: "a pci.ids file",
};

const EMBEDDED: &str = include_str!("../data/pci.ids");
const SYSTEM_FILES: [&str; 2] = ["/usr/share/misc/pci.ids", "/usr/share/hwdata/pci.ids"];

/// One parsed pci.ids: vendor names and device names by id.
#[derive(Clone, Debug, Default)]
pub struct PciIds {
    /// The file's `Version:` line (`2026.08.22`), empty when it has none.
    pub version: String,
    /// Where it was read from (`embedded`, a path).
    pub origin: String,
    vendors: HashMap<u16, String>,
    devices: HashMap<(u16, u16), String>,
}

impl PciIds {
    /// Parses pci.ids text: vendor lines `10de  NVIDIA Corporation`, device lines indented
    /// by one tab; subsystem lines (two tabs), comments and the class list are skipped, and
    /// lines that do not parse are ignored, as lspci does.
    pub fn parse(text: &str, origin: &str) -> PciIds {
        let mut ids = PciIds {
            origin: origin.to_string(),
            ..Default::default()
        };
        let mut vendor = None;
        for line in text.lines() {
            if let Some(v) = line.strip_prefix("#\tVersion:") {
                ids.version = v.trim().to_string();
                continue;
            }
            if line.starts_with('#') || line.trim().is_empty() || line.starts_with("\t\t") {
                continue;
            }
            if line.starts_with("C ") {
                break;
            }
            if let Some(dev) = line.strip_prefix('\t') {
                if let (Some(v), Some((d, name))) = (vendor, split_id(dev)) {
                    ids.devices.insert((v, d), name);
                }
            } else {
                vendor = split_id(line).map(|(v, name)| {
                    ids.vendors.insert(v, name);
                    v
                });
            }
        }
        ids
    }

    pub fn vendor(&self, v: u16) -> Option<&str> {
        self.vendors.get(&v).map(String::as_str)
    }

    pub fn device(&self, v: u16, d: u16) -> Option<&str> {
        self.devices.get(&(v, d)).map(String::as_str)
    }

    pub fn len(&self) -> usize {
        self.devices.len()
    }

    pub fn is_empty(&self) -> bool {
        self.devices.is_empty()
    }
}

/// `10de  NVIDIA Corporation` → (0x10de, "NVIDIA Corporation").
fn split_id(s: &str) -> Option<(u16, String)> {
    let (id, name) = s.split_once(char::is_whitespace)?;
    if id.len() != 4 {
        return None;
    }
    let id = u16::from_str_radix(id, 16).ok()?;
    let name = name.trim();
    (!name.is_empty()).then(|| (id, name.to_string()))
}

/// The names topo shows: the newer database first, the other behind it.
#[derive(Debug)]
pub struct PciNames {
    pub primary: PciIds,
    pub fallback: Option<PciIds>,
}

impl PciNames {
    /// From the embedded subset and, when given, another file's text.
    pub fn new(other: Option<PciIds>) -> PciNames {
        let embedded = PciIds::parse(EMBEDDED, "embedded");
        match other {
            Some(o) if o.version > embedded.version => PciNames {
                primary: o,
                fallback: Some(embedded),
            },
            Some(o) => PciNames {
                primary: embedded,
                fallback: Some(o),
            },
            None => PciNames {
                primary: embedded,
                fallback: None,
            },
        }
    }

    fn each(&self) -> impl Iterator<Item = &PciIds> {
        std::iter::once(&self.primary).chain(self.fallback.as_ref())
    }

    /// The vendor's name, shortened for tables: `NVIDIA`, `Mellanox`, `AMD`.
    pub fn vendor(&self, v: u16) -> Option<String> {
        self.each().find_map(|d| d.vendor(v)).map(short_vendor)
    }

    /// The device's name as the database has it: `GB100 [B200]`.
    pub fn device_full(&self, v: u16, d: u16) -> Option<&str> {
        self.each().find_map(|x| x.device(v, d))
    }

    /// The device's marketing name where the database gives one in brackets (`B200` from
    /// `GB100 [B200]`, `ConnectX-7` from `MT2910 Family [ConnectX-7]`), else the whole name.
    pub fn device(&self, v: u16, d: u16) -> Option<&str> {
        self.device_full(v, d).map(bracketed)
    }
}

fn bracketed(name: &str) -> &str {
    match (name.rfind('['), name.strip_suffix(']')) {
        (Some(i), Some(_)) if i + 1 < name.len() - 1 => name[i + 1..name.len() - 1].trim(),
        _ => name,
    }
}

fn short_vendor(name: &str) -> String {
    let b = bracketed(name);
    if b != name {
        return b.to_string();
    }
    let mut s = name;
    for suffix in [
        " Corporation",
        " Technologies",
        ", Inc.",
        " Inc.",
        " Co., Ltd.",
        " Ltd.",
        " Limited",
    ] {
        s = s.strip_suffix(suffix).unwrap_or(s);
    }
    s.to_string()
}

/// The names for this process, read once: `TOPO_PCI_IDS` (a path, or `none`), else the
/// system's file where one exists. A file that cannot be read is skipped silently: names are
/// a convenience, and the embedded subset still answers.
pub fn names() -> &'static PciNames {
    static NAMES: OnceLock<PciNames> = OnceLock::new();
    NAMES.get_or_init(|| {
        let chosen = std::env::var_os("TOPO_PCI_IDS");
        let other = match chosen.as_deref() {
            Some(p) if p == "none" => None,
            Some(p) => read_file(Path::new(p)),
            None => SYSTEM_FILES.iter().find_map(|p| read_file(Path::new(p))),
        };
        PciNames::new(other)
    })
}

/// The embedded subset alone: the same names on every machine (unit tests).
pub fn embedded_names() -> &'static PciNames {
    static NAMES: OnceLock<PciNames> = OnceLock::new();
    NAMES.get_or_init(|| PciNames::new(None))
}

fn read_file(path: &Path) -> Option<PciIds> {
    let bytes = read::file(path, PCI_IDS).ok()?;
    let text = String::from_utf8_lossy(&bytes);
    let ids = PciIds::parse(&text, &path.display().to_string());
    (!ids.is_empty()).then_some(ids)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn embedded_names_current_gpus_and_nics() {
        let n = PciNames::new(None);
        assert_eq!(n.device(0x10de, 0x2901), Some("B200"));
        assert_eq!(n.device(0x10de, 0x2330), Some("H100 SXM5 80GB"));
        assert_eq!(n.device(0x10de, 0x2b85), Some("GeForce RTX 5090"));
        assert_eq!(n.device(0x15b3, 0x1021), Some("ConnectX-7"));
        assert_eq!(n.vendor(0x10de).as_deref(), Some("NVIDIA"));
        assert_eq!(n.vendor(0x15b3).as_deref(), Some("Mellanox"));
        assert_eq!(n.vendor(0x1002).as_deref(), Some("AMD/ATI"));
        // Every vendor keeps its name line, devices or not: a Samsung NVMe drive on a host
        // without pci.ids is still named by its maker.
        assert!(n.vendor(0x144d).is_some_and(|v| v.starts_with("Samsung")));
        assert!(n.vendor(0x1a03).is_some_and(|v| v.starts_with("ASPEED")));
        assert!(n.primary.version.as_str() >= "2026.08.22");
    }

    #[test]
    fn newer_file_answers_first_and_older_fills_gaps() {
        let newer = "#\tVersion: 2099.01.01\n10de  NVIDIA Corporation\n\t2901  Renamed [X200]\n\tffff  Future [Z1]\n";
        let n = PciNames::new(Some(PciIds::parse(newer, "test")));
        assert_eq!(n.device(0x10de, 0x2901), Some("X200"));
        assert_eq!(n.device(0x10de, 0xffff), Some("Z1"));
        // The embedded subset fills what the newer file lacks.
        assert_eq!(n.device(0x15b3, 0x1021), Some("ConnectX-7"));
        let older = "#\tVersion: 2001.01.01\n10de  NVIDIA\n\t2901  Old\n\tfffe  Only here\n";
        let n = PciNames::new(Some(PciIds::parse(older, "test")));
        assert_eq!(n.device(0x10de, 0x2901), Some("B200"));
        assert_eq!(n.device(0x10de, 0xfffe), Some("Only here"));
    }

    #[test]
    fn odd_lines_are_ignored() {
        let t = "zzzz  bad\n\t0001  orphan device\n10de  NV\n\tqq  bad\n\t\t10de 0001  sub\n\t0002  Good\nC 00  class\n\t01  x\n";
        let ids = PciIds::parse(t, "t");
        assert_eq!(ids.len(), 1);
        assert_eq!(ids.device(0x10de, 2), Some("Good"));
    }
}
