//! The network between nodes as a fact: which transport NCCL's NET runs over, and what a
//! node has of it (NICs per node, their speed, SHARP). Stated by `--fabric`, by a profile,
//! or read from a result's environment ([`from_env`]).
//!
//! The names are the ones documents, flags and fitted data key by: `ib`, `roce`, `efa`,
//! `slingshot`, `tcpx`, `tcpxo`, `socket`.

use std::fmt;
use std::str::FromStr;

/// A fabric by its name.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Fabric {
    /// InfiniBand through NCCL's own IB transport (`NET/IB`).
    Ib,
    /// RDMA over Converged Ethernet, also NCCL's IB transport (`NET/IB`, link layer Ethernet).
    Roce,
    /// AWS Elastic Fabric Adapter through the aws-ofi-nccl plugin (libfabric's `efa` provider).
    Efa,
    /// HPE Slingshot (Cassini NICs) through the aws-ofi-nccl plugin (libfabric's `cxi` provider).
    Slingshot,
    /// Google Cloud GPUDirect-TCPX (A3 High) through its net plugin.
    Tcpx,
    /// Google Cloud GPUDirect-TCPXO, "FasTrak" (A3 Mega), through its net plugin.
    Tcpxo,
    /// NCCL's socket transport over plain TCP interfaces (`NET/Socket`).
    Socket,
}

impl Fabric {
    pub const ALL: [Fabric; 7] = [
        Fabric::Ib,
        Fabric::Roce,
        Fabric::Efa,
        Fabric::Slingshot,
        Fabric::Tcpx,
        Fabric::Tcpxo,
        Fabric::Socket,
    ];

    /// The name flags, documents and fitted data use.
    pub fn name(self) -> &'static str {
        match self {
            Fabric::Ib => "ib",
            Fabric::Roce => "roce",
            Fabric::Efa => "efa",
            Fabric::Slingshot => "slingshot",
            Fabric::Tcpx => "tcpx",
            Fabric::Tcpxo => "tcpxo",
            Fabric::Socket => "socket",
        }
    }

    /// The network NCCL names after `NET/` on this fabric, where it is not NCCL's default
    /// choice: an external plugin's name, or `Socket`. `None` for IB and RoCE, which NCCL's
    /// built-in IB transport carries (the model's default when verbs devices are present).
    /// Plugin names as the current plugins register them: aws-ofi-nccl `Libfabric` (its
    /// `ncclNetPlugin` name from v1.13.0-aws, on EFA and on Slingshot; see
    /// [`Fabric::net_name_caveat`]), Google's `GPUDirectTCPX` and `FasTrak`.
    pub fn net_name(self) -> Option<&'static str> {
        match self {
            Fabric::Ib | Fabric::Roce => None,
            Fabric::Efa | Fabric::Slingshot => Some("Libfabric"),
            Fabric::Tcpx => Some("GPUDirectTCPX"),
            Fabric::Tcpxo => Some("FasTrak"),
            Fabric::Socket => Some("Socket"),
        }
    }

    /// When the plugin goes by another name, said beside [`Fabric::net_name`]: aws-ofi-nccl's
    /// NVIDIA interface registered `AWS Libfabric` up to v1.12.1-aws and `Libfabric` from
    /// v1.13.0-aws (src/nccl_ofi_interface_nvidia.c, commit 7c014f0d, 2024-08), and takes the
    /// old name back when NCCL_NET asks for it. No source states the plugin's version.
    pub fn net_name_caveat(self) -> Option<&'static str> {
        match self {
            Fabric::Efa | Fabric::Slingshot => Some(
                "aws-ofi-nccl's name from v1.13.0; AWS Libfabric up to v1.12.1 and when NCCL_NET=\"AWS Libfabric\" is set",
            ),
            _ => None,
        }
    }

    /// The latency in us the fabric's net plugin reports for each device (`props->latency`,
    /// which NCCL adds to every inter-node step, tuning.cc `latencyInter`): aws-ofi-nccl's
    /// platform table gives 75 us for p4d/p4de/p5/p5e and 35 us for p5en and later
    /// (src/platform-aws.cpp); Google's FasTrak plugin reports 5 us; NCCL's IB and socket
    /// transports report 0 (net_ib.cc, net_socket.cc). `None` where topo does not know what
    /// the plugin reports (Slingshot's libfabric without a platform entry, TCPX): NCCL's
    /// own constants then stand alone, as they do for a plugin that reports 0.
    pub fn plugin_latency_us(self) -> Option<f64> {
        match self {
            Fabric::Ib | Fabric::Roce | Fabric::Socket => Some(0.0),
            Fabric::Efa => Some(75.0),
            Fabric::Tcpxo => Some(5.0),
            Fabric::Slingshot | Fabric::Tcpx => None,
        }
    }

    /// Whether NCCL's IB transport carries it (GPUDirect RDMA over verbs).
    pub fn is_ib(self) -> bool {
        matches!(self, Fabric::Ib | Fabric::Roce)
    }
}

impl fmt::Display for Fabric {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// An unknown fabric name, with the known ones.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct UnknownFabric(pub String);

impl fmt::Display for UnknownFabric {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let names: Vec<&str> = Fabric::ALL.iter().map(|x| x.name()).collect();
        write!(
            f,
            "unknown fabric '{}' (known: {})",
            self.0,
            names.join(", ")
        )
    }
}

impl std::error::Error for UnknownFabric {}

impl FromStr for Fabric {
    type Err = UnknownFabric;

    /// The names of [`Fabric::name`], any case.
    fn from_str(s: &str) -> Result<Fabric, UnknownFabric> {
        let t = s.trim();
        Fabric::ALL
            .into_iter()
            .find(|f| f.name().eq_ignore_ascii_case(t))
            .ok_or_else(|| UnknownFabric(s.to_string()))
    }
}

/// What is known of a node's fabric: each field `None` where nobody said.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct FabricFacts {
    pub fabric: Option<Fabric>,
    /// NICs per node that carry the GPUs' traffic.
    pub nics: Option<u32>,
    /// Speed of each of them, Mbit/s (as NCCL's `speed`).
    pub nic_speed_mbps: Option<u64>,
    /// The plugin's per-device latency in us where it differs from the fabric's default.
    pub latency_us: Option<f64>,
    /// SHARP (CollNet) in-network reduction available.
    pub sharp: Option<bool>,
}

impl FabricFacts {
    pub fn is_empty(&self) -> bool {
        *self == FabricFacts::default()
    }

    /// `self` where it says, else `base`.
    pub fn over(&self, base: &FabricFacts) -> FabricFacts {
        FabricFacts {
            fabric: self.fabric.or(base.fabric),
            nics: self.nics.or(base.nics),
            nic_speed_mbps: self.nic_speed_mbps.or(base.nic_speed_mbps),
            latency_us: self.latency_us.or(base.latency_us),
            sharp: self.sharp.or(base.sharp),
        }
    }

    /// The latency the plugin reports: stated, else the fabric's.
    pub fn latency(&self) -> Option<f64> {
        self.latency_us
            .or_else(|| self.fabric.and_then(Fabric::plugin_latency_us))
    }
}

/// What a run's environment says of its fabric ([`from_env`]).
#[derive(Clone, Debug, Default, PartialEq)]
pub struct EnvFabric {
    pub fabric: Option<Fabric>,
    /// `NCCL_COLLNET_ENABLE=1` or an `NCCL_SHARP*` setting: the run asked for SHARP.
    pub sharp_asked: bool,
    /// An `NCCL_NET` value no fabric here models (kept as written): the caller says so in a
    /// finding rather than price the run as something it is not.
    pub unknown_net: Option<String>,
    /// The variable and value that decided `fabric`, `NCCL_NET=ofi`.
    pub because: Option<String>,
}

/// The fabric a run's environment names, from `(KEY, VALUE)` pairs (values may carry the
/// quotes of a shell line). In NCCL's own order: `NCCL_NET` picks the network outright
/// (NVIDIA/nccl src/net.cc, `ncclNetInit`); otherwise a loaded plugin comes before the
/// built-in IB transport, so the plugins' own variables (`FI_PROVIDER`,
/// `NCCL_GPUDIRECTTCPX_*`, `NCCL_FASTRAK_*`) name the fabric; `NCCL_IB_DISABLE=1` leaves
/// sockets. Nothing said: `fabric` is `None` (unknown, not InfiniBand).
pub fn from_env<'a>(env: impl IntoIterator<Item = (&'a str, &'a str)>) -> EnvFabric {
    let mut net: Option<String> = None;
    let mut provider: Option<String> = None;
    let (mut tcpx, mut tcpxo, mut ib_off) = (None, None, false);
    let mut out = EnvFabric::default();
    for (k, v) in env {
        let k = k.trim();
        let v = v.trim().trim_matches(|c| c == '"' || c == '\'').trim();
        match k {
            "NCCL_NET" => net = Some(v.to_string()),
            "FI_PROVIDER" => provider = Some(v.to_ascii_lowercase()),
            "NCCL_IB_DISABLE" => ib_off = v == "1",
            "NCCL_COLLNET_ENABLE" => out.sharp_asked |= v == "1",
            _ if k.starts_with("NCCL_SHARP") => out.sharp_asked = true,
            _ if k.starts_with("NCCL_GPUDIRECTTCPX_") => tcpx = Some(format!("{k}={v}")),
            _ if k.starts_with("NCCL_FASTRAK_") => tcpxo = Some(format!("{k}={v}")),
            _ => {}
        }
    }
    let by_provider = |p: &str| match p {
        "efa" => Some(Fabric::Efa),
        "cxi" => Some(Fabric::Slingshot),
        _ => None,
    };
    let mut set = |f: Fabric, why: String| {
        out.fabric = Some(f);
        out.because = Some(why);
    };
    if let Some(n) = net.filter(|n| !n.is_empty()) {
        let lower = n.to_ascii_lowercase();
        let ofi = matches!(
            lower.as_str(),
            "aws libfabric" | "libfabric" | "ofi" | "aws-ofi"
        );
        let named = match lower.as_str() {
            "ib" => Some(Fabric::Ib),
            "socket" => Some(Fabric::Socket),
            "gpudirecttcpx" => Some(Fabric::Tcpx),
            "fastrak" | "gpudirecttcpxo" => Some(Fabric::Tcpxo),
            _ if ofi => Some(
                provider
                    .as_deref()
                    .and_then(by_provider)
                    .unwrap_or(Fabric::Efa),
            ),
            _ => None,
        };
        match named {
            Some(f) => set(f, format!("NCCL_NET={n}")),
            None => out.unknown_net = Some(n),
        }
        return out;
    }
    if let Some(f) = provider.as_deref().and_then(by_provider) {
        set(f, format!("FI_PROVIDER={}", provider.unwrap_or_default()));
    } else if let Some(why) = tcpxo {
        set(Fabric::Tcpxo, why);
    } else if let Some(why) = tcpx {
        set(Fabric::Tcpx, why);
    } else if ib_off {
        set(Fabric::Socket, "NCCL_IB_DISABLE=1".into());
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_round_trip_and_unknown_ones_list_the_known() {
        for f in Fabric::ALL {
            assert_eq!(f.to_string().parse::<Fabric>(), Ok(f));
        }
        assert_eq!("RoCE".parse::<Fabric>(), Ok(Fabric::Roce));
        let e = "omnipath".parse::<Fabric>().unwrap_err().to_string();
        assert_eq!(
            e,
            "unknown fabric 'omnipath' (known: ib, roce, efa, slingshot, tcpx, tcpxo, socket)"
        );
    }

    fn read(pairs: &[(&str, &str)]) -> EnvFabric {
        from_env(pairs.iter().copied())
    }

    #[test]
    fn the_environment_names_the_fabric_in_ncc_order() {
        let f = |p: &[(&str, &str)]| read(p).fabric;
        assert_eq!(f(&[("NCCL_NET", "\"AWS Libfabric\"")]), Some(Fabric::Efa));
        assert_eq!(
            f(&[("NCCL_NET", "ofi"), ("FI_PROVIDER", "cxi")]),
            Some(Fabric::Slingshot)
        );
        assert_eq!(f(&[("FI_PROVIDER", "efa")]), Some(Fabric::Efa));
        assert_eq!(f(&[("FI_PROVIDER", "cxi")]), Some(Fabric::Slingshot));
        assert_eq!(f(&[("NCCL_NET", "GPUDirectTCPX")]), Some(Fabric::Tcpx));
        assert_eq!(
            f(&[("NCCL_GPUDIRECTTCPX_PORT_BEGIN", "50000")]),
            Some(Fabric::Tcpx)
        );
        assert_eq!(f(&[("NCCL_FASTRAK_CTRL_DEV", "eth0")]), Some(Fabric::Tcpxo));
        assert_eq!(f(&[("NCCL_IB_DISABLE", "1")]), Some(Fabric::Socket));
        assert_eq!(f(&[("NCCL_NET", "Socket")]), Some(Fabric::Socket));
        // A plugin loaded comes before NCCL_IB_DISABLE; NCCL_NET before either.
        assert_eq!(
            f(&[("NCCL_IB_DISABLE", "1"), ("FI_PROVIDER", "efa")]),
            Some(Fabric::Efa)
        );
        assert_eq!(
            f(&[("FI_PROVIDER", "efa"), ("NCCL_NET", "Socket")]),
            Some(Fabric::Socket)
        );
        assert_eq!(f(&[("NCCL_IB_HCA", "mlx5_0")]), None, "unknown, not ib");
        assert_eq!(
            read(&[("NCCL_NET", "ofi")]).because.as_deref(),
            Some("NCCL_NET=ofi")
        );
    }

    #[test]
    fn sharp_is_asked_and_an_unknown_net_is_kept_not_guessed() {
        assert!(read(&[("NCCL_COLLNET_ENABLE", "1")]).sharp_asked);
        assert!(read(&[("NCCL_SHARP_DISABLE", "0")]).sharp_asked);
        assert!(!read(&[("NCCL_COLLNET_ENABLE", "0")]).sharp_asked);
        let r = read(&[("NCCL_NET", "MyVendorNet"), ("FI_PROVIDER", "efa")]);
        assert_eq!(r.fabric, None);
        assert_eq!(r.unknown_net.as_deref(), Some("MyVendorNet"));
    }

    #[test]
    fn facts_layer_and_latency_follows_the_fabric() {
        let base = FabricFacts {
            fabric: Some(Fabric::Efa),
            nics: Some(4),
            ..Default::default()
        };
        let stated = FabricFacts {
            nics: Some(2),
            latency_us: Some(35.0),
            ..Default::default()
        };
        let both = stated.over(&base);
        assert_eq!((both.fabric, both.nics), (Some(Fabric::Efa), Some(2)));
        assert_eq!(both.latency(), Some(35.0));
        assert_eq!(base.latency(), Some(75.0));
        assert!(FabricFacts::default().is_empty());
    }
}
