//! The shared vocabulary of the NCCL model: graph patterns and graph ids here; path types,
//! algorithms, protocols and functions from `topo-vocab`. Internal order is NCCL HEAD's
//! (2.27+) numbering; older numberings are only a matter of printing (`PathType::number`).

use serde::{Deserialize, Serialize};

// Path types are the vocabulary's too: the log reader reads them from NCCL's logs.
pub use topo_vocab::PathType;

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
