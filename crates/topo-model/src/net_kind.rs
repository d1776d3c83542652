//! Which of NCCL's network transports a source's NET device belongs to, from the device
//! itself: the one rule the readers (an NCCL-written `<net>`), the judges and the plan's
//! transport choice share.
//!
//! An NCCL topology file records the devices of the transport NCCL opened, each with the
//! properties that transport reports, and the transports report differently (NVIDIA/nccl
//! v2.28.9-1):
//! - the socket transport names its devices after IP interfaces and reports port 0, the
//!   device index as guid and 65536 as maxComms for every one
//!   (`ncclNetSocketGetProperties`, src/transport/net_socket.cc);
//! - the IB transport names them after verbs devices (`mlx5_0`), numbers ports from 1 and
//!   takes guid and maxComms (the QP limit) from the HCA (`ncclIbGetProperties`,
//!   src/transport/net_ib.cc), and it opens only ports whose link layer is InfiniBand or
//!   Ethernet (`ncclIbInitDevices`);
//! - AWS EFA is reached through the aws-ofi-nccl plugin, whose devices keep the EFA verbs
//!   device's name (`rdmap<bus>s<slot>` under rdma-core's naming, `efa_<n>` before it). EFA's
//!   kernel driver reports an unspecified link layer (`efa_port_link_layer`,
//!   drivers/infiniband/hw/efa/efa_verbs.c), so NCCL's own IB transport skips it: without the
//!   plugin NCCL falls back to sockets.
//!
//! Properties outrank names (an interface called `ib0` with the socket transport's answers is
//! a socket device); where nothing tells, the kind stays unknown.

use crate::{Net, Nic, NodeKind, Topology};
use petgraph::graph::NodeIndex;

/// Amazon's PCI vendor id.
pub const AMAZON_VENDOR: u16 = 0x1d0f;

/// The NCCL transport a NET device belongs to.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum NetKind {
    /// NCCL's IB transport (InfiniBand or RoCE verbs ports).
    Ib,
    /// NCCL's socket transport (an IP interface).
    Socket,
    /// AWS EFA, through the aws-ofi-nccl plugin.
    Efa,
    /// Nothing in the source tells.
    Unknown,
}

impl NetKind {
    pub fn name(self) -> &'static str {
        match self {
            NetKind::Ib => "IB",
            NetKind::Socket => "socket",
            NetKind::Efa => "EFA",
            NetKind::Unknown => "unknown",
        }
    }
}

/// A device's kind and the evidence for it, in a few words (`rdmap79s0: an EFA device name`).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct KindCall {
    pub kind: NetKind,
    pub why: String,
}

/// Amazon EFA functions by PCI id: the Linux `efa` driver's table (`efa_pci_tbl`,
/// drivers/infiniband/hw/efa/efa_main.c: 0xefa0-0xefa3; amzn-drivers' efa r3.3.0 adds
/// 0xefa4). Amazon's other functions (ENA 0xec20, NVMe) are not EFA.
pub fn is_efa_pci(vendor: Option<u16>, device: Option<u16>) -> bool {
    vendor == Some(AMAZON_VENDOR) && matches!(device, Some(0xefa0..=0xefa4))
}

/// Verbs device names of the RDMA drivers NCCL's IB transport opens: the kernel's own names
/// (`mlx5_0`, `bnxt_re0`, `irdma0`, ...) and rdma-core's persistent ones by link layer
/// (`ibp<bus>s<slot>` InfiniBand, `rocep...` RoCE). A merged NIC joins several with `+`.
fn verbs_ib_name(name: &str) -> bool {
    const PREFIXES: [&str; 10] = [
        "mlx4_", "mlx5_", "ibp", "rocep", "roceo", "bnxt_re", "irdma", "qedr", "hfi1_", "erdma",
    ];
    !name.is_empty()
        && name
            .split('+')
            .all(|part| PREFIXES.iter().any(|p| part.starts_with(p)))
}

/// EFA device names: rdma-core names a verbs device whose link layer is neither InfiniBand
/// nor Ethernet `rdmap<bus>s<slot>` (kernel-boot/rdma_rename.c), which on a GPU server is
/// EFA; older images keep the driver's `efa_<n>`.
fn efa_name(name: &str) -> bool {
    name.starts_with("rdmap") || name.starts_with("efa")
}

/// The transport `net` belongs to, from the net and the PCI function `nic` above it.
pub fn classify(net: &Net, nic: Option<&Nic>) -> KindCall {
    let call = |kind, why: String| KindCall { kind, why };
    let name = net.name.as_str();
    if net.socket {
        return call(
            NetKind::Socket,
            format!("{name}: the source shows NCCL's socket transport on it"),
        );
    }
    if let Some(n) = nic.filter(|n| is_efa_pci(n.vendor, n.device)) {
        let dev = n.device.unwrap_or_default();
        return call(
            NetKind::Efa,
            format!("{name}: PCI {AMAZON_VENDOR:04x}:{dev:04x} is an Amazon EFA function"),
        );
    }
    if efa_name(name) {
        return call(NetKind::Efa, format!("{name}: an EFA verbs device name"));
    }
    if net.port == 0 && net.maxconn == Some(65536) {
        return call(
            NetKind::Socket,
            format!(
                "{name}: port 0 and maxconn 65536, what NCCL's socket transport reports (IB ports number from 1)"
            ),
        );
    }
    if let Some(l) = net.link_layer.as_deref() {
        return call(NetKind::Ib, format!("{name}: a verbs port, link layer {l}"));
    }
    if verbs_ib_name(name) && net.port >= 1 {
        return call(NetKind::Ib, format!("{name}: a verbs device name"));
    }
    call(
        NetKind::Unknown,
        format!("{name}: neither its name nor its properties tell which transport opened it"),
    )
}

/// [`classify`] for the port `n` of `t`, with the PCI function above it; `None` when `n` is
/// not a port.
pub fn of_port(t: &Topology, n: NodeIndex) -> Option<KindCall> {
    let net = t.net(n)?;
    let nic = t.node(n).parent.and_then(|p| match &t.node(p).kind {
        NodeKind::Nic(x) => Some(x),
        _ => None,
    });
    Some(classify(net, nic))
}

/// The ports of a fused (virtual) NIC, from the name NCCL gives it: NCCL 2.21 and later merge
/// the ports NCCL_NET_MERGE_LEVEL allows (default PORT: the ports of one card) into one device
/// (`ncclTopoMakeVNics`, src/graph/topo.cc) whose name joins the ports' names with `+` and
/// whose speed is their sum (`ncclIbMakeVDeviceInternal`, src/transport/net_ib/init.cc,
/// NVIDIA/nccl master after v2.30). `None` for a name that is not such a join.
pub fn fused_ports(name: &str) -> Option<Vec<&str>> {
    let parts: Vec<&str> = name.split('+').collect();
    (parts.len() >= 2 && parts.iter().all(|p| !p.trim().is_empty())).then_some(parts)
}

/// A fused NIC said in words: `a fused NIC of 2 ports (mlx5_0, mlx5_1) whose 200 Gb/s is
/// their speeds summed, as NCCL reports it`. `None` for a plain device.
pub fn fused_text(name: &str, speed_mbps: Option<u64>) -> Option<String> {
    let ports = fused_ports(name)?;
    let speed = match speed_mbps {
        // Mb/s as Gb/s, decimals only where needed (as the NIC table prints speeds).
        Some(m) if m > 0 && m.is_multiple_of(1000) => format!(
            " whose {} Gb/s is their speeds summed, as NCCL reports it",
            m / 1000
        ),
        Some(m) if m > 0 => format!(
            " whose {} Gb/s is their speeds summed, as NCCL reports it",
            m as f64 / 1000.0
        ),
        _ => String::new(),
    };
    Some(format!(
        "a fused NIC of {} ports ({}){speed}",
        ports.len(),
        ports.join(", ")
    ))
}

#[cfg(test)]
mod tests {
    #[test]
    fn a_fused_name_lists_its_ports_and_a_plain_one_is_none() {
        assert_eq!(fused_ports("mlx5_0+mlx5_1"), Some(vec!["mlx5_0", "mlx5_1"]));
        assert_eq!(fused_ports("mlx5_0"), None);
        assert_eq!(fused_ports("mlx5_0+"), None);
        let t = fused_text("mlx5_0+mlx5_1", Some(200_000)).unwrap();
        assert_eq!(
            t,
            "a fused NIC of 2 ports (mlx5_0, mlx5_1) whose 200 Gb/s is their speeds summed, as NCCL reports it"
        );
        assert_eq!(
            fused_text("a+b+c", None).unwrap(),
            "a fused NIC of 3 ports (a, b, c)"
        );
    }

    use super::*;

    fn net(name: &str, port: u32, guid: u64, maxconn: u32) -> Net {
        Net {
            name: name.into(),
            port,
            guid: Some(guid),
            maxconn: Some(maxconn),
            ..Default::default()
        }
    }

    #[test]
    fn an_ib_hca_stays_ib() {
        let c = classify(&net("mlx5_0", 1, 0xa87cb10003e1a258, 131072), None);
        assert_eq!(c.kind, NetKind::Ib, "{}", c.why);
        let merged = classify(&net("mlx5_0+mlx5_1", 1, 0x1, 131072), None);
        assert_eq!(merged.kind, NetKind::Ib);
        let assumed = Net {
            name: "hca@0101:00:00.0".into(),
            port: 1,
            link_layer: Some("InfiniBand".into()),
            ..Default::default()
        };
        assert_eq!(classify(&assumed, None).kind, NetKind::Ib);
    }

    #[test]
    fn socket_properties_outrank_an_ib_like_name() {
        let c = classify(&net("ib0", 0, 0, 65536), None);
        assert_eq!(c.kind, NetKind::Socket);
        assert!(c.why.contains("port 0 and maxconn 65536"), "{}", c.why);
        assert_eq!(
            classify(&net("eno1", 0, 0, 65536), None).kind,
            NetKind::Socket
        );
        let plain = Net {
            name: "eth0".into(),
            socket: true,
            ..Default::default()
        };
        assert_eq!(classify(&plain, None).kind, NetKind::Socket);
    }

    #[test]
    fn efa_by_name_or_pci_id() {
        let c = classify(&net("rdmap79s0", 1, 0, 1024), None);
        assert_eq!(c.kind, NetKind::Efa);
        let nic = Nic {
            vendor: Some(0x1d0f),
            device: Some(0xefa1),
            ..Default::default()
        };
        let by_id = classify(&net("nic@0000:10:1b.0", 1, 0, 0), Some(&nic));
        assert_eq!(by_id.kind, NetKind::Efa);
        assert!(by_id.why.contains("1d0f:efa1"), "{}", by_id.why);
        // Amazon's ENA is Amazon's but not EFA.
        assert!(!is_efa_pci(Some(0x1d0f), Some(0xec20)));
        assert!(!is_efa_pci(None, Some(0xefa0)));
    }

    #[test]
    fn unknown_stays_unknown() {
        let c = classify(&net("eth0", 1, 0x1234, 1024), None);
        assert_eq!(c.kind, NetKind::Unknown, "{}", c.why);
        // A verbs-like name with port 0 but no socket signature is not called IB either.
        let odd = Net {
            name: "mlx5_0".into(),
            ..Default::default()
        };
        assert_eq!(classify(&odd, None).kind, NetKind::Unknown);
        assert_eq!(NetKind::Unknown.name(), "unknown");
    }
}
