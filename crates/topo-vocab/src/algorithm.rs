//! NCCL's algorithms and protocols.

use std::fmt;

/// An algorithm. Declaration order is NCCL's index order (ties in selection go to the earlier
/// one); `Direct` is topo's host runtime's own and comes last, outside [`Algorithm::ALL`].
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Algorithm {
    Tree,
    Ring,
    CollnetDirect,
    CollnetChain,
    Nvls,
    NvlsTree,
    Pat,
    /// Not NCCL's: a single copy through memory every rank maps (a registered-buffer one-shot
    /// style), which topo's host runtime runs; each rank reduces its share of every input and
    /// writes it to every output.
    Direct,
}

impl Algorithm {
    /// NCCL's algorithms, in index order.
    pub const ALL: [Algorithm; 7] = [
        Algorithm::Tree,
        Algorithm::Ring,
        Algorithm::CollnetDirect,
        Algorithm::CollnetChain,
        Algorithm::Nvls,
        Algorithm::NvlsTree,
        Algorithm::Pat,
    ];

    /// The name NCCL prints (`Tree`, `Ring`, `CollNetDirect`, `NVLSTree`, ...).
    pub fn name(self) -> &'static str {
        match self {
            Algorithm::Tree => "Tree",
            Algorithm::Ring => "Ring",
            Algorithm::CollnetDirect => "CollNetDirect",
            Algorithm::CollnetChain => "CollNetChain",
            Algorithm::Nvls => "NVLS",
            Algorithm::NvlsTree => "NVLSTree",
            Algorithm::Pat => "PAT",
            Algorithm::Direct => "Direct",
        }
    }

    /// The suffix of NCCL's `NCCL_ALGO_*` constant (`RING`, `NVLS_TREE`), as `topo verify`
    /// prints it.
    pub fn macro_name(self) -> &'static str {
        match self {
            Algorithm::Tree => "TREE",
            Algorithm::Ring => "RING",
            Algorithm::CollnetDirect => "COLLNET_DIRECT",
            Algorithm::CollnetChain => "COLLNET_CHAIN",
            Algorithm::Nvls => "NVLS",
            Algorithm::NvlsTree => "NVLS_TREE",
            Algorithm::Pat => "PAT",
            Algorithm::Direct => "DIRECT",
        }
    }

    /// The lowercase name documents and `--algo` use (`nvlstree`).
    pub fn cli_name(self) -> &'static str {
        match self {
            Algorithm::Tree => "tree",
            Algorithm::Ring => "ring",
            Algorithm::CollnetDirect => "collnetdirect",
            Algorithm::CollnetChain => "collnetchain",
            Algorithm::Nvls => "nvls",
            Algorithm::NvlsTree => "nvlstree",
            Algorithm::Pat => "pat",
            Algorithm::Direct => "direct",
        }
    }

    /// NCCL_ALGO's tokens: NCCL's printed names of its own algorithms, any case.
    pub fn from_name(s: &str) -> Option<Algorithm> {
        Algorithm::ALL
            .into_iter()
            .find(|a| a.name().eq_ignore_ascii_case(s.trim()))
    }

    /// The command line's names: [`Algorithm::macro_name`] in any case, `-` for `_`
    /// (`nvls-tree`), `Direct` included.
    pub fn parse(s: &str) -> Option<Algorithm> {
        let u = s.to_ascii_uppercase().replace('-', "_");
        Algorithm::ALL
            .into_iter()
            .chain([Algorithm::Direct])
            .find(|a| a.macro_name() == u)
    }
}

impl fmt::Display for Algorithm {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// A protocol, in NCCL's index order.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Protocol {
    Ll,
    Ll128,
    Simple,
}

impl Protocol {
    pub const ALL: [Protocol; 3] = [Protocol::Ll, Protocol::Ll128, Protocol::Simple];

    /// The name NCCL prints (`LL`, `LL128`, `Simple`).
    pub fn name(self) -> &'static str {
        match self {
            Protocol::Ll => "LL",
            Protocol::Ll128 => "LL128",
            Protocol::Simple => "Simple",
        }
    }

    /// The suffix of NCCL's `NCCL_PROTO_*` constant (`SIMPLE`), as `topo verify` prints it.
    pub fn macro_name(self) -> &'static str {
        match self {
            Protocol::Ll => "LL",
            Protocol::Ll128 => "LL128",
            Protocol::Simple => "SIMPLE",
        }
    }

    /// The lowercase name documents and `--proto` use.
    pub fn cli_name(self) -> &'static str {
        match self {
            Protocol::Ll => "ll",
            Protocol::Ll128 => "ll128",
            Protocol::Simple => "simple",
        }
    }

    /// Either name, any case (NCCL_PROTO's tokens and the command line's).
    pub fn from_name(s: &str) -> Option<Protocol> {
        Protocol::ALL
            .into_iter()
            .find(|p| p.name().eq_ignore_ascii_case(s.trim()))
    }
}

impl fmt::Display for Protocol {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn algorithm_names_round_trip() {
        for a in Algorithm::ALL {
            assert_eq!(Algorithm::from_name(a.name()), Some(a));
            assert_eq!(Algorithm::from_name(&a.name().to_lowercase()), Some(a));
            assert_eq!(Algorithm::parse(a.macro_name()), Some(a));
            assert_eq!(Algorithm::from_name(a.cli_name()), Some(a));
            assert_eq!(a.to_string(), a.name());
        }
        assert_eq!(Algorithm::parse("direct"), Some(Algorithm::Direct));
        assert_eq!(Algorithm::parse("nvls-tree"), Some(Algorithm::NvlsTree));
        // NCCL_ALGO knows no Direct and no underscores.
        assert_eq!(Algorithm::from_name("Direct"), None);
        assert_eq!(Algorithm::from_name("nvls_tree"), None);
        assert_eq!(
            Algorithm::from_name(" nvlstree "),
            Some(Algorithm::NvlsTree)
        );
    }

    #[test]
    fn protocol_names_round_trip() {
        for p in Protocol::ALL {
            assert_eq!(Protocol::from_name(p.name()), Some(p));
            assert_eq!(Protocol::from_name(p.macro_name()), Some(p));
            assert_eq!(Protocol::from_name(p.cli_name()), Some(p));
            assert_eq!(p.to_string(), p.name());
        }
        assert_eq!(Protocol::from_name("ll128"), Some(Protocol::Ll128));
        assert_eq!(Protocol::from_name("bogus"), None);
    }
}
