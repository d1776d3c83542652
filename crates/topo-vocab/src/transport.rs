//! How NCCL connects two ranks, by the names its `Channel .. via ..` lines and topo's
//! documents use.

use std::convert::Infallible;
use std::fmt;
use std::str::FromStr;

/// A transport by its document name: `P2P/CUMEM`, `P2P/IPC`, `P2P/direct`, `P2P/indirect`,
/// `P2P/MNNVL`, `P2P` (a log that names no flavour), `SHM`, `NET/IB`, `NET/Socket`,
/// `NET/<plugin>`, `COLLNET`. The per-connection detail (P2P read and copy engine, NET
/// device, proxy and GPUDirect RDMA) travels beside it.
#[derive(Clone, Debug, PartialEq, Eq, Hash, Default)]
pub enum Transport {
    P2p(P2p),
    Shm,
    Net(Net),
    CollNet,
    /// A name none of the above holds (what a log printed), kept as read; empty for a
    /// connection not decided yet.
    Other(String),
    #[default]
    Undecided,
}

/// How P2P maps the peer's buffers.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum P2p {
    /// cuMem allocations exported as file descriptors (`P2P/CUMEM`).
    Cumem,
    /// Legacy CUDA IPC handles (`P2P/IPC`).
    Ipc,
    /// Same process: device pointers used directly (`P2P/direct`, logged `direct pointer`).
    Direct,
    /// Through the buffers of an intermediate GPU (`P2P/indirect`).
    Indirect,
    /// Multi-node NVLink (`P2P/MNNVL`).
    Mnnvl,
    /// A log line that names no flavour (`P2P`).
    Unnamed,
}

/// The network NCCL's NET transport runs over, by the name it prints.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub enum Net {
    Ib,
    Socket,
    /// An external net plugin's name (`Libfabric`).
    Plugin(String),
}

impl P2p {
    const ALL: [P2p; 6] = [
        P2p::Cumem,
        P2p::Ipc,
        P2p::Direct,
        P2p::Indirect,
        P2p::Mnnvl,
        P2p::Unnamed,
    ];

    /// The part after `P2P/` (empty for [`P2p::Unnamed`]).
    pub fn name(self) -> &'static str {
        match self {
            P2p::Cumem => "CUMEM",
            P2p::Ipc => "IPC",
            P2p::Direct => "direct",
            P2p::Indirect => "indirect",
            P2p::Mnnvl => "MNNVL",
            P2p::Unnamed => "",
        }
    }
}

impl Net {
    /// The name NCCL prints after `NET/`.
    pub fn name(&self) -> &str {
        match self {
            Net::Ib => "IB",
            Net::Socket => "Socket",
            Net::Plugin(s) => s,
        }
    }

    /// `NCCL_NET`'s value: NCCL matches it against each network's name in any case
    /// (src/init.cc, `strcasecmp`), so `ib` and `socket` name the built-in ones; surrounding
    /// blanks are not part of it.
    pub fn from_nccl_net(s: &str) -> Net {
        let s = s.trim();
        if s.eq_ignore_ascii_case(Net::Ib.name()) {
            Net::Ib
        } else if s.eq_ignore_ascii_case(Net::Socket.name()) {
            Net::Socket
        } else {
            Net::Plugin(s.to_string())
        }
    }

    /// NCCL's network name (`IB`, `Socket`, else a plugin's).
    pub fn from_name(s: &str) -> Net {
        match s {
            "IB" => Net::Ib,
            "Socket" => Net::Socket,
            other => Net::Plugin(other.to_string()),
        }
    }
}

impl Transport {
    /// A document name; total: what no variant holds is kept as [`Transport::Other`], so
    /// printing gives the text back.
    pub fn parse(s: &str) -> Transport {
        match s {
            "" => Transport::Undecided,
            "SHM" => Transport::Shm,
            "COLLNET" => Transport::CollNet,
            "P2P" => Transport::P2p(P2p::Unnamed),
            _ => {
                if let Some(f) = s.strip_prefix("P2P/") {
                    if let Some(p) = P2p::ALL
                        .into_iter()
                        .find(|p| !f.is_empty() && p.name() == f)
                    {
                        return Transport::P2p(p);
                    }
                } else if let Some(n) = s.strip_prefix("NET/") {
                    return Transport::Net(Net::from_name(n));
                }
                Transport::Other(s.to_string())
            }
        }
    }

    pub fn is_p2p(&self) -> bool {
        matches!(self, Transport::P2p(_))
    }

    pub fn is_shm(&self) -> bool {
        matches!(self, Transport::Shm)
    }

    pub fn is_net(&self) -> bool {
        matches!(self, Transport::Net(_))
    }

    /// NET over sockets (`NET/Socket`).
    pub fn is_socket(&self) -> bool {
        matches!(self, Transport::Net(Net::Socket))
    }

    /// Whether two transports are of one family (any P2P, any NET, else the same transport):
    /// what counts as a difference between a log and the model.
    pub fn same_family(&self, other: &Transport) -> bool {
        match (self, other) {
            (Transport::P2p(_), Transport::P2p(_)) | (Transport::Net(_), Transport::Net(_)) => true,
            _ => self == other,
        }
    }

    /// The family's name: `P2P`, `NET`, or the transport's own.
    pub fn family(&self) -> String {
        match self {
            Transport::P2p(_) => "P2P".into(),
            Transport::Net(_) => "NET".into(),
            t => t.to_string(),
        }
    }

    /// The P2P flavour, for a P2P transport.
    pub fn p2p(&self) -> Option<P2p> {
        match self {
            Transport::P2p(p) => Some(*p),
            _ => None,
        }
    }
}

impl fmt::Display for Transport {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Transport::P2p(P2p::Unnamed) => f.write_str("P2P"),
            Transport::P2p(p) => write!(f, "P2P/{}", p.name()),
            Transport::Shm => f.write_str("SHM"),
            Transport::Net(n) => write!(f, "NET/{}", n.name()),
            Transport::CollNet => f.write_str("COLLNET"),
            Transport::Other(s) => f.write_str(s),
            Transport::Undecided => Ok(()),
        }
    }
}

// By name, as the maps keyed by transport name that documents print were ordered.
impl Ord for Transport {
    fn cmp(&self, other: &Transport) -> std::cmp::Ordering {
        self.to_string().cmp(&other.to_string())
    }
}

impl PartialOrd for Transport {
    fn partial_cmp(&self, other: &Transport) -> Option<std::cmp::Ordering> {
        Some(self.cmp(other))
    }
}

impl FromStr for Transport {
    type Err = Infallible;
    fn from_str(s: &str) -> Result<Transport, Infallible> {
        Ok(Transport::parse(s))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Every name the model and the log reader produce, and text neither knows.
    const NAMES: [&str; 16] = [
        "P2P/CUMEM",
        "P2P/IPC",
        "P2P/direct",
        "P2P/indirect",
        "P2P/MNNVL",
        "P2P",
        "SHM",
        "NET/IB",
        "NET/Socket",
        "NET/AWS Libfabric",
        "NET/",
        "COLLNET",
        "",
        "P2P/",
        "P2P/bogus",
        "weird/thing",
    ];

    #[test]
    fn names_round_trip() {
        for s in NAMES {
            assert_eq!(Transport::parse(s).to_string(), s);
            assert_eq!(s.parse::<Transport>().unwrap(), Transport::parse(s));
        }
        assert_eq!(Transport::parse("P2P/CUMEM"), Transport::P2p(P2p::Cumem));
        assert_eq!(Transport::parse("NET/IB"), Transport::Net(Net::Ib));
        assert!(Transport::parse("NET/Socket").is_socket());
        assert!(Transport::parse("P2P").is_p2p());
        assert!(!Transport::parse("P2P/bogus").is_p2p());
        assert_eq!(Transport::parse("SHM"), Transport::Shm);
        assert_eq!(Transport::parse(""), Transport::Undecided);
        let mut sorted: Vec<Transport> = NAMES.iter().map(|s| Transport::parse(s)).collect();
        sorted.sort();
        let mut names = NAMES;
        names.sort();
        let back: Vec<String> = sorted.iter().map(|t| t.to_string()).collect();
        assert_eq!(back, names);
    }

    #[test]
    fn nccl_net_values_name_the_built_in_networks_in_any_case() {
        assert_eq!(Net::from_nccl_net(" ib "), Net::Ib);
        assert_eq!(Net::from_nccl_net("SOCKET"), Net::Socket);
        assert_eq!(
            Net::from_nccl_net("NCCL RDMA Plugin v8"),
            Net::Plugin("NCCL RDMA Plugin v8".into())
        );
    }

    #[test]
    fn families() {
        let t = |s| Transport::parse(s);
        assert!(t("P2P/CUMEM").same_family(&t("P2P/IPC")));
        assert!(t("NET/IB").same_family(&t("NET/Socket")));
        assert!(!t("SHM").same_family(&t("P2P")));
        assert_eq!(t("P2P/MNNVL").family(), "P2P");
        assert_eq!(t("NET/Socket").family(), "NET");
        assert_eq!(t("SHM").family(), "SHM");
    }
}
