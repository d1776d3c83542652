//! PCI bus ids: the stable identifiers of every device in the model.

use serde::{Deserialize, Deserializer, Serialize, Serializer};
use std::fmt;

/// A PCI bus id packed the way NCCL packs it (`src/graph/topo.cc`, `busIdToInt64`, all
/// versions): every hex digit of `dddd:bb:dd.f` concatenated, so `0000:1b:00.0` is `0x1b000`.
/// Domain may be wider than 16 bits (NVML prints 8 domain digits; hidden NVSwitches show up
/// as `fffffff:ff:ff.0`).
#[derive(Clone, Copy, Default, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct BusId(pub u64);

impl BusId {
    pub fn new(domain: u32, bus: u8, device: u8, function: u8) -> BusId {
        BusId(
            ((domain as u64) << 20)
                | ((bus as u64) << 12)
                | ((device as u64) << 4)
                | function as u64,
        )
    }

    pub fn domain(self) -> u32 {
        (self.0 >> 20) as u32
    }
    pub fn bus(self) -> u8 {
        ((self.0 >> 12) & 0xff) as u8
    }
    pub fn device(self) -> u8 {
        ((self.0 >> 4) & 0xff) as u8
    }
    pub fn function(self) -> u8 {
        (self.0 & 0xf) as u8
    }

    /// NCCL's integer form as printed in its logs (`busId 1b000`).
    pub fn as_nccl_int(self) -> u64 {
        self.0
    }

    /// True for the all-`f` placeholder NVML reports for a device it cannot see
    /// (typically an NVSwitch hidden from a VM or container).
    pub fn is_placeholder(self) -> bool {
        self.bus() == 0xff && self.device() == 0xff && (self.domain() & 0xffff) == 0xffff
    }

    /// Parses `dddd:bb:dd.f`, `dddddddd:bb:dd.f` (NVML) or `bb:dd.f` (domain 0), any case.
    pub fn parse(s: &str) -> Result<BusId, BusIdError> {
        let t = s.trim();
        let bad = || BusIdError(s.to_string());
        let (rest, func) = t.rsplit_once('.').ok_or_else(bad)?;
        let parts: Vec<&str> = rest.split(':').collect();
        let (dom, bus, dev) = match parts.as_slice() {
            [d, b, v] => (*d, *b, *v),
            [b, v] => ("0", *b, *v),
            _ => return Err(bad()),
        };
        let hex = |x: &str, max_len: usize| -> Result<u64, BusIdError> {
            if x.is_empty() || x.len() > max_len || !x.chars().all(|c| c.is_ascii_hexdigit()) {
                return Err(bad());
            }
            u64::from_str_radix(x, 16).map_err(|_| bad())
        };
        let domain = hex(dom, 8)?;
        let bus = hex(bus, 2)?;
        let dev = hex(dev, 2)?;
        let func = hex(func, 1)?;
        Ok(BusId((domain << 20) | (bus << 12) | (dev << 4) | func))
    }
}

impl fmt::Display for BusId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "{:04x}:{:02x}:{:02x}.{:x}",
            self.domain(),
            self.bus(),
            self.device(),
            self.function()
        )
    }
}

impl fmt::Debug for BusId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "BusId({self})")
    }
}

/// A PCI bus id that does not parse; holds the text as given.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error("bad pci bus id '{0}' (expected dddd:bb:dd.f)")]
pub struct BusIdError(pub String);

impl std::str::FromStr for BusId {
    type Err = BusIdError;
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        BusId::parse(s)
    }
}

impl Serialize for BusId {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.collect_str(self)
    }
}

impl<'de> Deserialize<'de> for BusId {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        let s = String::deserialize(d)?;
        BusId::parse(&s).map_err(serde::de::Error::custom)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_the_forms_seen_in_the_wild() {
        assert_eq!(BusId::parse("0000:1b:00.0").unwrap().0, 0x1b000);
        assert_eq!(BusId::parse("00000000:1B:00.0").unwrap().0, 0x1b000);
        assert_eq!(BusId::parse("1b:00.0").unwrap().0, 0x1b000);
        let f = BusId::parse("fffffff:ff:ff.0").unwrap();
        assert!(f.is_placeholder());
        assert_eq!(
            BusId::parse("0101:00:00.0").unwrap().to_string(),
            "0101:00:00.0"
        );
        assert_eq!(
            BusId::parse("ffff:ff:01.0").unwrap().to_string(),
            "ffff:ff:01.0"
        );
    }

    #[test]
    fn rejects_garbage() {
        for s in [
            "",
            "1b",
            "0000:1b:00",
            "zz:00.0",
            "0000:1b:00.10",
            "0000:100:00.0",
            ":.",
            "0:0:0:0.0",
        ] {
            assert!(BusId::parse(s).is_err(), "{s}");
        }
    }

    #[test]
    fn round_trips_through_text() {
        for s in [
            "0000:00:00.0",
            "0000:c1:00.1",
            "0001:41:1f.7",
            "ffffffff:ff:ff.f",
        ] {
            assert_eq!(BusId::parse(s).unwrap().to_string(), s);
        }
    }
}
