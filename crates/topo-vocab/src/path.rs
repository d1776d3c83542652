//! NCCL's path types between two devices of its system graph, by the names its logs print
//! (`src/graph/topo.h` `PATH_*` and `topoPathTypeStr`, 2.27+ numbering): the model computes
//! them, the log reader reads them from GRAPH path tables and graph lines.

use std::fmt;
use std::str::FromStr;

use crate::Unknown;

/// Path types, best first (`src/graph/topo.h`, `PATH_*`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum PathType {
    Loc,
    Nvl,
    Nvb,
    C2c,
    Pix,
    Pxb,
    P2c,
    Pxn,
    Phb,
    Sys,
    Net,
    Dis,
}

impl PathType {
    pub const ALL: [PathType; 12] = [
        PathType::Loc,
        PathType::Nvl,
        PathType::Nvb,
        PathType::C2c,
        PathType::Pix,
        PathType::Pxb,
        PathType::P2c,
        PathType::Pxn,
        PathType::Phb,
        PathType::Sys,
        PathType::Net,
        PathType::Dis,
    ];

    pub fn name(self) -> &'static str {
        match self {
            PathType::Loc => "LOC",
            PathType::Nvl => "NVL",
            PathType::Nvb => "NVB",
            PathType::C2c => "C2C",
            PathType::Pix => "PIX",
            PathType::Pxb => "PXB",
            PathType::P2c => "P2C",
            PathType::Pxn => "PXN",
            PathType::Phb => "PHB",
            PathType::Sys => "SYS",
            PathType::Net => "NET",
            PathType::Dis => "DIS",
        }
    }

    /// Exact, case-sensitive name lookup (NCCL's level parser, `ncclGetLevel`, and what its
    /// logs print).
    pub fn from_name(s: &str) -> Option<PathType> {
        PathType::ALL.iter().copied().find(|p| p.name() == s)
    }

    /// The numeric value NCCL `minor` prints in logs (distances in GDR lines, levels):
    /// C2C was inserted in 2.26 and P2C in 2.27.
    pub fn number(self, minor: u32) -> u32 {
        let head = self as u32;
        let mut n = head;
        if minor < 27 && self > PathType::P2c {
            n -= 1;
        }
        if minor < 26 && self > PathType::C2c {
            n -= 1;
        }
        n
    }

    pub fn next(self) -> PathType {
        let i = self as usize;
        PathType::ALL[(i + 1).min(PathType::ALL.len() - 1)]
    }
}

impl fmt::Display for PathType {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// [`PathType::from_name`]: `NVL`, `PXB`, exactly as NCCL prints them.
impl FromStr for PathType {
    type Err = Unknown;
    fn from_str(s: &str) -> Result<Self, Unknown> {
        PathType::from_name(s).ok_or_else(|| Unknown {
            what: "path type",
            given: s.to_string(),
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn path_numbers_follow_the_renumberings() {
        assert_eq!(PathType::Pxb.number(30), 5);
        assert_eq!(PathType::Pxb.number(26), 5);
        assert_eq!(PathType::Pxb.number(21), 4);
        assert_eq!(PathType::Phb.number(30), 8);
        assert_eq!(PathType::Phb.number(26), 7);
        assert_eq!(PathType::Phb.number(18), 6);
        assert_eq!(PathType::Sys.number(18), 7);
        assert_eq!(PathType::Net.number(26), 9);
    }

    #[test]
    fn names_parse_exactly_and_print_back() {
        for p in PathType::ALL {
            assert_eq!(p.name().parse(), Ok(p));
            assert_eq!(p.to_string(), p.name());
        }
        assert_eq!(PathType::from_name("pxb"), None);
        assert_eq!(
            "NODE".parse::<PathType>().unwrap_err().to_string(),
            "unknown path type 'NODE'"
        );
    }
}
