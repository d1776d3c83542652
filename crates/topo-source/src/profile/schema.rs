//! The profile YAML schema (documented for users in docs/profiles.md).
//!
//! Every struct denies unknown fields so a typo is an error with a line number, not a
//! silently ignored setting. Fields are optional wherever `defaults` can supply them; the
//! loader checks what is still missing after merging.

use serde::Deserialize;
use serde::de::{self, Deserializer, MapAccess, Visitor};
use std::collections::BTreeMap;
use std::fmt;
use std::marker::PhantomData;
use topo_model::BusId;

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Profile {
    pub name: String,
    pub description: Option<String>,
    /// Where the facts come from and what is assumed.
    pub provenance: Option<String>,
    #[serde(default)]
    pub host: HostSpec,
    pub cpu: CpuSpec,
    #[serde(default)]
    pub defaults: Defaults,
    pub numa: Vec<NumaSpec>,
    #[serde(default)]
    pub nvlink: NvlinkSpec,
    /// Free-form YAML whose only use is to hold anchors (`&gpu_pair`) that the rest of the file
    /// merges in with `<<: *gpu_pair`; never read otherwise.
    #[serde(default)]
    pub templates: Option<yaml_serde::Value>,
}

#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct HostSpec {
    pub name: Option<String>,
    pub kernel: Option<String>,
    pub driver_version: Option<String>,
    pub cuda_driver_version: Option<String>,
    pub nvml_version: Option<String>,
    #[serde(default)]
    pub env: BTreeMap<String, String>,
    /// NVLS multicast available: `false` for a box whose driver reports none (H800
    /// configurations, no fabric manager, CUDA driver before 12.1).
    pub nvls: Option<bool>,
    /// The multi-node NVLink domain the host's GPUs belong to (GB200/GB300 NVL72 trays).
    pub nvlink_domain: Option<NvlinkDomainSpec>,
    /// The fabric between nodes, where it is not NCCL's IB transport over the ports listed
    /// (EFA, Slingshot, TCPX/TCPXO, sockets) or has SHARP.
    pub fabric: Option<FabricSpec>,
}

/// `host.fabric`: the transport NCCL's NET runs over and what its plugin reports.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct FabricSpec {
    /// `ib`, `roce`, `efa`, `slingshot`, `tcpx`, `tcpxo` or `socket`.
    pub name: String,
    /// The plugin's per-device latency in us where it is not the fabric's default (aws-ofi-nccl
    /// gives p5en and later 35).
    pub latency: Option<f64>,
    /// SHARP (CollNet) in-network reduction available.
    pub sharp: Option<bool>,
}

/// `host.nvlink_domain`: every GPU of the host is registered with the NVLink fabric under
/// this cluster UUID and clique id (what NVML's GPU fabric info reports on such a tray).
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct NvlinkDomainSpec {
    /// GPUs in the whole domain: 72 for an NVL72 rack.
    pub gpus: u32,
    /// The fabric's cluster UUID; `--nodes` gives each further domain its own.
    pub cluster_uuid: Option<String>,
    /// NVML's clique id (one per NVLink partition; 0x7ffe as the default partition reports it).
    pub clique_id: Option<u32>,
}

/// CPU identity shared by every NUMA node (NCCL reads it per `<cpu>`, real machines have one
/// CPU model).
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct CpuSpec {
    pub arch: String,
    pub vendor: Option<String>,
    pub family: Option<u32>,
    pub model: Option<u32>,
    pub model_name: Option<String>,
}

/// Values merged into every GPU, NIC, port and switch that does not set them itself.
#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Defaults {
    pub gpu: Option<GpuSpec>,
    pub nic: Option<NicSpec>,
    pub port: Option<PortSpec>,
    pub switch: Option<SwitchSpec>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct NumaSpec {
    pub id: i32,
    /// sysfs cpulist, `0-55,112-167`.
    pub cpus: Option<String>,
    /// NCCL's cpumap form; computed from `cpus` when absent.
    pub affinity: Option<String>,
    #[serde(default)]
    pub switches: Vec<SwitchSpec>,
    #[serde(default)]
    pub gpus: Vec<Short<GpuSpec>>,
    #[serde(default)]
    pub nics: Vec<Short<NicSpec>>,
    #[serde(default)]
    pub devices: Vec<DeviceSpec>,
}

#[derive(Clone, Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct SwitchSpec {
    pub bus: Option<BusId>,
    pub vendor: Option<Hex>,
    pub device: Option<Hex>,
    pub subsystem_vendor: Option<Hex>,
    pub subsystem_device: Option<Hex>,
    pub link: Option<LinkSpec>,
    #[serde(default)]
    pub switches: Vec<SwitchSpec>,
    #[serde(default)]
    pub gpus: Vec<Short<GpuSpec>>,
    #[serde(default)]
    pub nics: Vec<Short<NicSpec>>,
    #[serde(default)]
    pub devices: Vec<DeviceSpec>,
}

#[derive(Clone, Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct GpuSpec {
    pub bus: Option<BusId>,
    /// NVML index; default: position in bus-id order (NVML's enumeration order).
    pub index: Option<i32>,
    pub name: Option<String>,
    pub sm: Option<u32>,
    pub memory_mib: Option<u64>,
    pub uuid: Option<String>,
    pub class: Option<Hex>,
    pub vendor: Option<Hex>,
    pub device: Option<Hex>,
    pub subsystem_vendor: Option<Hex>,
    pub subsystem_device: Option<Hex>,
    pub link: Option<LinkSpec>,
    pub gdr: Option<bool>,
    pub c2c: Option<C2cSpec>,
    /// Peer access between boards (`cudaDeviceCanAccessPeer`); default from the built-in
    /// table of device ids whose drivers refuse it.
    pub p2p: Option<bool>,
}

#[derive(Clone, Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct C2cSpec {
    /// Per-link bandwidth in MB/s as NVML reports it.
    pub bw_mbps: u64,
    pub count: u32,
}

#[derive(Clone, Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct NicSpec {
    pub bus: Option<BusId>,
    pub class: Option<Hex>,
    pub vendor: Option<Hex>,
    pub device: Option<Hex>,
    pub subsystem_vendor: Option<Hex>,
    pub subsystem_device: Option<Hex>,
    pub link: Option<LinkSpec>,
    pub ports: Option<Vec<Short<PortSpec>>>,
    /// `compute`, `storage` or `front-end` for every port of this NIC (a port's own wins).
    pub role: Option<topo_model::NetRole>,
}

#[derive(Clone, Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct PortSpec {
    pub name: Option<String>,
    /// Net plugin device index; default: order of appearance in the file.
    pub dev: Option<i32>,
    /// Mbit/s.
    pub speed: Option<u64>,
    pub port: Option<u32>,
    pub link_layer: Option<String>,
    pub gdr: Option<bool>,
    pub coll: Option<bool>,
    pub guid: Option<Hex>,
    pub maxconn: Option<u32>,
    pub latency: Option<f64>,
    pub netdev: Option<String>,
    /// `compute`, `storage` or `front-end`; inferred from speed, placement and name if absent.
    pub role: Option<topo_model::NetRole>,
}

/// Any other PCI function (NVMe, management NIC without a net device, ...).
#[derive(Clone, Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct DeviceSpec {
    pub bus: BusId,
    pub class: Hex,
    pub vendor: Option<Hex>,
    pub device: Option<Hex>,
    pub driver: Option<String>,
    pub link: Option<LinkSpec>,
}

#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct NvlinkSpec {
    pub nvswitch: Option<NvSwitchSpec>,
    #[serde(default)]
    pub pairs: Vec<PairSpec>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct NvSwitchSpec {
    /// One bus id per NVSwitch chip.
    pub chips: Vec<BusId>,
    /// NVLink lanes from each GPU to each chip, in `chips` order (5/5/4/4 on HGX H100).
    pub lanes: Vec<u32>,
    pub vendor: Option<Hex>,
    pub device: Option<Hex>,
    /// GPUs wired to the fabric; default: all.
    pub gpus: Option<Vec<GpuRef>>,
}

/// A direct GPU↔GPU NVLink (bridge, cube-mesh); declared once, created in both directions.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct PairSpec {
    pub a: GpuRef,
    pub b: GpuRef,
    pub lanes: u32,
}

/// A GPU named by NVML index (`3`) or bus id (`"0000:18:00.0"`).
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum GpuRef {
    Index(i32),
    Bus(BusId),
}

impl fmt::Display for GpuRef {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            GpuRef::Index(i) => write!(f, "gpu {i}"),
            GpuRef::Bus(b) => write!(f, "gpu {b}"),
        }
    }
}

impl<'de> Deserialize<'de> for GpuRef {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct V;
        impl Visitor<'_> for V {
            type Value = GpuRef;
            fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
                f.write_str("a gpu index or a quoted bus id")
            }
            fn visit_u64<E: de::Error>(self, v: u64) -> Result<GpuRef, E> {
                i32::try_from(v)
                    .map(GpuRef::Index)
                    .map_err(|_| E::custom(format!("gpu index {v} out of range")))
            }
            fn visit_i64<E: de::Error>(self, v: i64) -> Result<GpuRef, E> {
                Err(E::custom(format!("gpu index {v} out of range")))
            }
            fn visit_str<E: de::Error>(self, v: &str) -> Result<GpuRef, E> {
                BusId::parse(v).map(GpuRef::Bus).map_err(E::custom)
            }
        }
        d.deserialize_any(V)
    }
}

/// A 16-bit PCI id or a class code: a YAML integer (`0x10de`) or a string (`"0x10de"`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Hex(pub u64);

impl<'de> Deserialize<'de> for Hex {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct V;
        impl Visitor<'_> for V {
            type Value = Hex;
            fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
                f.write_str("a hex id such as 0x10de")
            }
            fn visit_u64<E: de::Error>(self, v: u64) -> Result<Hex, E> {
                Ok(Hex(v))
            }
            fn visit_i64<E: de::Error>(self, v: i64) -> Result<Hex, E> {
                u64::try_from(v)
                    .map(Hex)
                    .map_err(|_| E::custom(format!("negative id {v}")))
            }
            fn visit_str<E: de::Error>(self, v: &str) -> Result<Hex, E> {
                let t = v.trim();
                let digits = t
                    .strip_prefix("0x")
                    .or_else(|| t.strip_prefix("0X"))
                    .unwrap_or(t);
                u64::from_str_radix(digits, 16)
                    .map(Hex)
                    .map_err(|_| E::custom(format!("bad hex id '{v}'")))
            }
        }
        d.deserialize_any(V)
    }
}

impl Hex {
    pub fn u16(self, what: &str) -> Result<u16, String> {
        u16::try_from(self.0).map_err(|_| format!("{what} {:#x} does not fit in 16 bits", self.0))
    }
    pub fn u24(self, what: &str) -> Result<u32, String> {
        if self.0 > 0xff_ffff {
            return Err(format!(
                "{what} {:#x} is not a 24-bit pci class code",
                self.0
            ));
        }
        Ok(self.0 as u32)
    }
}

/// PCIe link: `gen5x16` / `gen4 x8` shorthand, or `{speed: "32.0 GT/s PCIe", width: 16}` with
/// the exact sysfs string NCCL would see (virtual machines report odd ones).
#[derive(Clone, Debug, PartialEq)]
pub struct LinkSpec {
    pub speed: String,
    pub width: u32,
}

impl LinkSpec {
    fn parse_short(s: &str) -> Result<LinkSpec, String> {
        let bad =
            || format!("bad pcie link '{s}' (expected gen1..gen6 with a width, e.g. gen5x16)");
        let t: String = s
            .chars()
            .filter(|c| !c.is_whitespace())
            .collect::<String>()
            .to_ascii_lowercase();
        let rest = t.strip_prefix("gen").ok_or_else(bad)?;
        let (g, w) = rest.split_once('x').ok_or_else(bad)?;
        let generation: u32 = g.parse().map_err(|_| bad())?;
        let width: u32 = w.parse().map_err(|_| bad())?;
        let speed = topo_model::bw::pcie_speed_string(generation).ok_or_else(bad)?;
        if !matches!(width, 1 | 2 | 4 | 8 | 16 | 32) {
            return Err(format!(
                "bad pcie link width {width} in '{s}' (1, 2, 4, 8, 16 or 32)"
            ));
        }
        Ok(LinkSpec {
            speed: speed.to_string(),
            width,
        })
    }
}

impl<'de> Deserialize<'de> for LinkSpec {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        #[derive(Deserialize)]
        #[serde(deny_unknown_fields)]
        struct Full {
            speed: String,
            width: u32,
        }
        struct V;
        impl<'de> Visitor<'de> for V {
            type Value = LinkSpec;
            fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
                f.write_str("a pcie link like gen5x16 or {speed, width}")
            }
            fn visit_str<E: de::Error>(self, v: &str) -> Result<LinkSpec, E> {
                LinkSpec::parse_short(v).map_err(E::custom)
            }
            fn visit_map<A: MapAccess<'de>>(self, map: A) -> Result<LinkSpec, A::Error> {
                let f = Full::deserialize(de::value::MapAccessDeserializer::new(map))?;
                if topo_model::bw::pcie_lane_value(&f.speed).is_none() {
                    return Err(de::Error::custom(format!(
                        "unknown pcie link speed '{}' (use a sysfs string such as '32.0 GT/s PCIe')",
                        f.speed
                    )));
                }
                Ok(LinkSpec {
                    speed: f.speed,
                    width: f.width,
                })
            }
        }
        d.deserialize_any(V)
    }
}

/// Types that can also be written as one string: a GPU or NIC as its bus id, a port as its
/// name.
pub trait FromShort: Sized {
    fn from_short(s: &str) -> Result<Self, String>;
}

impl FromShort for GpuSpec {
    fn from_short(s: &str) -> Result<Self, String> {
        Ok(GpuSpec {
            bus: Some(BusId::parse(s).map_err(|e| e.to_string())?),
            ..Default::default()
        })
    }
}
impl FromShort for NicSpec {
    fn from_short(s: &str) -> Result<Self, String> {
        Ok(NicSpec {
            bus: Some(BusId::parse(s).map_err(|e| e.to_string())?),
            ..Default::default()
        })
    }
}
impl FromShort for PortSpec {
    fn from_short(s: &str) -> Result<Self, String> {
        if s.trim().is_empty() {
            return Err("empty port name".into());
        }
        Ok(PortSpec {
            name: Some(s.to_string()),
            ..Default::default()
        })
    }
}

/// A list entry written either as a map or as its one-string short form. Errors inside the map
/// keep their own message and position (an untagged enum would hide them).
#[derive(Clone, Debug)]
pub struct Short<T>(pub T);

impl<'de, T: Deserialize<'de> + FromShort> Deserialize<'de> for Short<T> {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct V<T>(PhantomData<T>);
        impl<'de, T: Deserialize<'de> + FromShort> Visitor<'de> for V<T> {
            type Value = Short<T>;
            fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
                f.write_str("a map or a short string form")
            }
            fn visit_str<E: de::Error>(self, v: &str) -> Result<Short<T>, E> {
                T::from_short(v).map(Short).map_err(E::custom)
            }
            fn visit_map<A: MapAccess<'de>>(self, map: A) -> Result<Short<T>, A::Error> {
                T::deserialize(de::value::MapAccessDeserializer::new(map)).map(Short)
            }
        }
        d.deserialize_any(V(PhantomData))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn link_shorthand_and_full_form() {
        let l: LinkSpec = yaml_serde::from_str("gen5x16").unwrap();
        assert_eq!(
            l,
            LinkSpec {
                speed: "32.0 GT/s PCIe".into(),
                width: 16
            }
        );
        let l: LinkSpec = yaml_serde::from_str("Gen4 x8").unwrap();
        assert_eq!(
            l,
            LinkSpec {
                speed: "16.0 GT/s PCIe".into(),
                width: 8
            }
        );
        let l: LinkSpec = yaml_serde::from_str("{speed: '2.5 GT/s PCIe', width: 1}").unwrap();
        assert_eq!(l.width, 1);
        for bad in [
            "gen9x16",
            "gen5",
            "x16",
            "gen5x3",
            "{speed: 'fast', width: 16}",
            "{speed: '8 GT/s'}",
        ] {
            assert!(yaml_serde::from_str::<LinkSpec>(bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn hex_ids_as_numbers_or_strings() {
        assert_eq!(yaml_serde::from_str::<Hex>("0x10de").unwrap(), Hex(0x10de));
        assert_eq!(
            yaml_serde::from_str::<Hex>("'0x2330'").unwrap(),
            Hex(0x2330)
        );
        assert_eq!(
            yaml_serde::from_str::<Hex>("\"c030\"").unwrap(),
            Hex(0xc030)
        );
        assert!(yaml_serde::from_str::<Hex>("'0xzz'").is_err());
        assert!(Hex(0x1_0000).u16("device").is_err());
    }

    #[test]
    fn short_forms() {
        let v: Vec<Short<GpuSpec>> =
            yaml_serde::from_str("['0000:18:00.0', {bus: '0000:2a:00.0', index: 1}]").unwrap();
        assert_eq!(v[0].0.bus, Some(BusId::new(0, 0x18, 0, 0)));
        assert_eq!(v[1].0.index, Some(1));
        let p: Vec<Short<PortSpec>> =
            yaml_serde::from_str("[mlx5_0, {name: mlx5_1, port: 2}]").unwrap();
        assert_eq!(p[0].0.name.as_deref(), Some("mlx5_0"));
        assert_eq!(p[1].0.port, Some(2));
        // an unknown field inside the map form is still reported by name
        let e = yaml_serde::from_str::<Vec<Short<GpuSpec>>>("[{bus: '0000:18:00.0', smm: 90}]")
            .unwrap_err();
        assert!(e.to_string().contains("unknown field `smm`"), "{e}");
    }

    #[test]
    fn gpu_refs() {
        let v: Vec<GpuRef> = yaml_serde::from_str("[3, '0000:18:00.0']").unwrap();
        assert_eq!(
            v,
            vec![GpuRef::Index(3), GpuRef::Bus(BusId::new(0, 0x18, 0, 0))]
        );
        assert!(yaml_serde::from_str::<GpuRef>("-1").is_err());
        assert!(yaml_serde::from_str::<GpuRef>("'zz'").is_err());
    }
}
