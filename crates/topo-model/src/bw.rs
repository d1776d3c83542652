//! Link bandwidths computed the way NCCL computes them (`src/graph/topo.h`, `topo.cc`).
//!
//! The constants differ between NCCL versions, so they live in [`BwConstants`], whose
//! default is the 2.26–2.30 table; `nccl::version` loads the per-version values as data.

use serde::{Deserialize, Serialize};

/// Bandwidth constants in GB/s (10^9 B/s), NCCL's `*_BW` defines.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct BwConstants {
    pub loc: f64,
    pub sm60_nvlink: f64,
    pub sm70_nvlink: f64,
    pub sm80_nvlink: f64,
    pub sm86_nvlink: f64,
    pub sm90_nvlink: f64,
    /// `None` before 2.25 (Blackwell unknown: falls to the SM90 lane rate).
    pub sm100_nvlink: Option<f64>,
    pub pci: f64,
    pub bdw_qpi: f64,
    pub skl_qpi: f64,
    /// Sapphire/Emerald Rapids classes exist from 2.26 on.
    pub srp_qpi: Option<f64>,
    pub erp_qpi: Option<f64>,
    /// `None` in 2.18, where AMD inter-socket fell through to LOC_BW.
    pub amd: Option<f64>,
    pub zpi: f64,
    pub yongfeng_zpi: f64,
    pub p9: f64,
    pub arm: f64,
}

impl Default for BwConstants {
    /// NCCL 2.27–2.30 values (`src/graph/topo.h`).
    fn default() -> Self {
        BwConstants {
            loc: 5000.0,
            sm60_nvlink: 18.0,
            sm70_nvlink: 20.0,
            sm80_nvlink: 20.0,
            sm86_nvlink: 12.0,
            sm90_nvlink: 20.6,
            sm100_nvlink: Some(40.1),
            pci: 12.0,
            bdw_qpi: 6.0,
            skl_qpi: 10.0,
            srp_qpi: Some(22.0),
            erp_qpi: Some(40.0),
            amd: Some(16.0),
            zpi: 6.0,
            yongfeng_zpi: 9.0,
            p9: 32.0,
            arm: 6.0,
        }
    }
}

impl BwConstants {
    /// Per-lane NVLink bandwidth for the GPU that owns the link (`ncclTopoNVLinkBw`).
    pub fn nvlink_lane(&self, sm: u32) -> f64 {
        match sm {
            s if s >= 100 => self.sm100_nvlink.unwrap_or(self.sm90_nvlink),
            s if s >= 90 => self.sm90_nvlink,
            86 => self.sm86_nvlink,
            s if s >= 80 => self.sm80_nvlink,
            s if s >= 70 => self.sm70_nvlink,
            s if s >= 60 => self.sm60_nvlink,
            _ => self.sm80_nvlink,
        }
    }

    /// Inter-socket (SYS) bandwidth chosen from the source CPU (`ncclTopoConnectCpus`):
    /// its architecture, vendor, and CPUID family and model (`Cpu::sys_bw` passes them).
    pub fn sys_bw(
        &self,
        arch: CpuArch,
        vendor: CpuVendor,
        family: Option<u32>,
        model: Option<u32>,
    ) -> f64 {
        match arch {
            CpuArch::Power => self.p9,
            CpuArch::Arm => self.arm,
            CpuArch::X86 => match vendor {
                CpuVendor::Intel => match intel_class(model) {
                    IntelClass::Erp => self.erp_qpi.or(self.srp_qpi).unwrap_or(self.skl_qpi),
                    IntelClass::Srp => self.srp_qpi.unwrap_or(self.skl_qpi),
                    IntelClass::Skl => self.skl_qpi,
                    IntelClass::Bdw => self.bdw_qpi,
                },
                CpuVendor::Amd => self.amd.unwrap_or(self.loc),
                CpuVendor::Zhaoxin => {
                    if family == Some(7) && model == Some(0x5b) {
                        self.yongfeng_zpi
                    } else {
                        self.zpi
                    }
                }
                CpuVendor::Other => self.loc,
            },
            CpuArch::Other => self.loc,
        }
    }
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum CpuArch {
    X86,
    Arm,
    Power,
    Other,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum CpuVendor {
    Intel,
    Amd,
    Zhaoxin,
    Other,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum IntelClass {
    Bdw,
    Skl,
    Srp,
    Erp,
}

/// Intel family-6 model classes (`src/graph/topo.cc`, 2.26+; before 2.26 only SKL/BDW exist,
/// which `BwConstants` expresses by leaving `srp_qpi`/`erp_qpi` unset).
pub fn intel_class(model: Option<u32>) -> IntelClass {
    match model.unwrap_or(0) {
        m if m >= 0xcf => IntelClass::Erp,
        m if m >= 0x8f => IntelClass::Srp,
        m if m >= 0x55 => IntelClass::Skl,
        _ => IntelClass::Bdw,
    }
}

/// Per-lane PCIe rate in NCCL's unit (100 Mbit/s) for a sysfs `link_speed` string, matched by
/// prefix as NCCL does (`kvDictPciGen`); `None` when the string is unknown (NCCL then uses
/// the Gen3 value 60).
pub fn pcie_lane_value(speed: &str) -> Option<u32> {
    // Order matters: NCCL walks the table in this order with a prefix compare.
    const TABLE: &[(&str, u32)] = &[
        ("2.5 GT/s", 15),
        ("5 GT/s", 30),
        ("8 GT/s", 60),
        ("16 GT/s", 120),
        ("32 GT/s", 240),
        ("2.5 GT/s PCIe", 15),
        ("5.0 GT/s PCIe", 30),
        ("8.0 GT/s PCIe", 60),
        ("16.0 GT/s PCIe", 120),
        ("32.0 GT/s PCIe", 240),
        ("64.0 GT/s PCIe", 480),
    ];
    let s = speed.trim();
    TABLE
        .iter()
        .find(|(k, _)| s.starts_with(k))
        .map(|(_, v)| *v)
}

/// The NCCL rate used when the speed string is missing or unknown (Gen3).
pub const PCIE_DEFAULT_LANE_VALUE: u32 = 60;

/// GT/s per lane parsed loosely from any speed string ("32.0 GT/s PCIe", "32 GT/s PCIe/s",
/// "16 GT/s"): for display and generation checks, not for NCCL's bandwidth.
pub fn pcie_gts(speed: &str) -> Option<f64> {
    let s = speed.trim();
    let num: String = s
        .chars()
        .take_while(|c| c.is_ascii_digit() || *c == '.')
        .collect();
    let v: f64 = num.parse().ok()?;
    if s[num.len()..].trim_start().starts_with("GT/s") && v > 0.0 {
        Some(v)
    } else {
        None
    }
}

/// PCIe generation from the per-lane transfer rate.
pub fn pcie_generation(gts: f64) -> Option<u32> {
    const GENS: &[(f64, u32)] = &[
        (2.5, 1),
        (5.0, 2),
        (8.0, 3),
        (16.0, 4),
        (32.0, 5),
        (64.0, 6),
        (128.0, 7),
    ];
    GENS.iter()
        .find(|(g, _)| (gts - g).abs() < 0.01)
        .map(|(_, n)| *n)
}

/// The canonical sysfs string for a generation, as NCCL 2.30 writes it from NVML.
pub fn pcie_speed_string(generation: u32) -> Option<&'static str> {
    Some(match generation {
        1 => "2.5 GT/s PCIe",
        2 => "5.0 GT/s PCIe",
        3 => "8.0 GT/s PCIe",
        4 => "16.0 GT/s PCIe",
        5 => "32.0 GT/s PCIe",
        6 => "64.0 GT/s PCIe",
        _ => return None,
    })
}

/// PCIe link bandwidth in GB/s: `width * lane_value / 80`, width 0 counting as 16 and an
/// unknown speed as Gen3 (`ncclTopoAddPci`, all versions).
pub fn pcie_bw(speed: Option<&str>, width: Option<u32>) -> f64 {
    let lane = speed
        .and_then(pcie_lane_value)
        .unwrap_or(PCIE_DEFAULT_LANE_VALUE);
    let w = match width {
        None | Some(0) => 16,
        Some(w) => w,
    };
    w as f64 * lane as f64 / 80.0
}

/// Network port bandwidth in GB/s from the port speed in Mbit/s (`speed / 8000`; a missing or
/// non-positive speed counts as 10000 Mbit/s, NCCL's default).
pub fn net_bw(speed_mbps: Option<u64>) -> f64 {
    match speed_mbps {
        Some(s) if s > 0 => s as f64 / 8000.0,
        _ => 10000.0 / 8000.0,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn pcie_bandwidths_match_the_reference() {
        assert_eq!(pcie_bw(Some("8.0 GT/s PCIe"), Some(16)), 12.0);
        assert_eq!(pcie_bw(Some("16.0 GT/s PCIe"), Some(16)), 24.0);
        assert_eq!(pcie_bw(Some("32.0 GT/s PCIe"), Some(16)), 48.0);
        assert_eq!(pcie_bw(Some("64.0 GT/s PCIe"), Some(16)), 96.0);
        assert_eq!(pcie_bw(Some("16.0 GT/s PCIe"), Some(8)), 12.0);
        assert_eq!(pcie_bw(Some("8 GT/s"), Some(16)), 12.0);
        // width 0 counts as 16; unknown/empty speed as Gen3
        assert_eq!(pcie_bw(Some("32.0 GT/s PCIe"), Some(0)), 48.0);
        assert_eq!(pcie_bw(Some(""), Some(16)), 12.0);
        assert_eq!(pcie_bw(None, None), 12.0);
        // "32 GT/s PCIe/s" (seen in real dumps) matches the old-kernel "32 GT/s" prefix
        assert_eq!(pcie_bw(Some("32 GT/s PCIe/s"), Some(16)), 48.0);
        // "16.0 GT/s PCIe" does not match "16 GT/s", but its own entry
        assert_eq!(pcie_lane_value("16.0 GT/s PCIe"), Some(120));
        assert_eq!(pcie_lane_value("Unknown"), None);
    }

    #[test]
    fn nvlink_lanes_by_generation() {
        let c = BwConstants::default();
        assert_eq!(c.nvlink_lane(90) * 18.0, 370.8);
        assert_eq!(c.nvlink_lane(80) * 12.0, 240.0);
        assert_eq!(c.nvlink_lane(86) * 4.0, 48.0);
        assert!((c.nvlink_lane(100) * 18.0 - 721.8).abs() < 1e-9);
        assert_eq!(c.nvlink_lane(70) * 6.0, 120.0);
        assert_eq!(c.nvlink_lane(50), 20.0);
    }

    #[test]
    fn loose_gts_parsing() {
        assert_eq!(pcie_gts("32.0 GT/s PCIe"), Some(32.0));
        assert_eq!(pcie_gts("32 GT/s PCIe/s"), Some(32.0));
        assert_eq!(pcie_gts("2.5 GT/s"), Some(2.5));
        assert_eq!(pcie_gts("Unknown"), None);
        assert_eq!(pcie_generation(16.0), Some(4));
        assert_eq!(net_bw(Some(400000)), 50.0);
        assert_eq!(net_bw(None), 1.25);
    }
}
