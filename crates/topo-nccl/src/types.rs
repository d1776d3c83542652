//! The shared vocabulary of the NCCL model: path and link types, graph patterns,
//! algorithms, protocols, functions. Internal order is NCCL HEAD's (2.27+) numbering; older
//! numberings are only a matter of printing (`PathType::number`).

use serde::{Deserialize, Serialize};
use std::fmt;

/// Path types, best first (`src/graph/topo.h`, `PATH_*`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
pub enum PathType {
    #[serde(rename = "LOC")]
    Loc,
    #[serde(rename = "NVL")]
    Nvl,
    #[serde(rename = "NVB")]
    Nvb,
    #[serde(rename = "C2C")]
    C2c,
    #[serde(rename = "PIX")]
    Pix,
    #[serde(rename = "PXB")]
    Pxb,
    #[serde(rename = "P2C")]
    P2c,
    #[serde(rename = "PXN")]
    Pxn,
    #[serde(rename = "PHB")]
    Phb,
    #[serde(rename = "SYS")]
    Sys,
    #[serde(rename = "NET")]
    Net,
    #[serde(rename = "DIS")]
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

    /// Exact, case-sensitive name lookup (NCCL's level parser, `ncclGetLevel`).
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

/// Graph search patterns (`NCCL_TOPO_PATTERN_*`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Pattern {
    BalancedTree = 1,
    SplitTree = 2,
    Tree = 3,
    Ring = 4,
    Nvls = 5,
    CollnetDirect = 6,
}

impl Pattern {
    pub fn number(self) -> u32 {
        self as u32
    }
}

/// The graphs NCCL computes at init, with their graph-file ids.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum GraphId {
    Ring = 0,
    Tree = 1,
    CollnetChain = 2,
    Nvls = 3,
    CollnetDirect = 4,
}

// Algorithms, protocols and collectives are the vocabulary the log reader and the runtime
// share (topo-vocab), under their one name.
pub use topo_vocab::{Algorithm, Collective, Protocol};

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
        assert_eq!(PathType::from_name("PXB"), Some(PathType::Pxb));
        assert_eq!(PathType::from_name("pxb"), None);
    }

    #[test]
    fn names_parse() {
        assert_eq!(Collective::parse("all_reduce"), Some(Collective::AllReduce));
        assert_eq!(
            Collective::parse("ReduceScatter"),
            Some(Collective::ReduceScatter)
        );
        assert_eq!(Algorithm::from_name("nvlstree"), Some(Algorithm::NvlsTree));
        assert_eq!(Protocol::from_name("ll128"), Some(Protocol::Ll128));
        assert!(Collective::parse("bogus").is_none());
    }
}
