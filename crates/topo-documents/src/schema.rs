//! The schema id of each document topo writes or reads (the `schema` field of its JSON). A
//! breaking change to a document bumps its version here and adds `docs/schema/<name>.v<N>.json`.

pub const SHOW: &str = "topo.show/v1";
pub const PLAN: &str = "topo.plan/v3";
pub const DIAGNOSE: &str = "topo.diagnose/v1";
pub const HANG: &str = "topo.hang/v1";
pub const DIFF: &str = "topo.diff/v1";
pub const FLEET: &str = "topo.fleet/v1";
pub const VERIFY: &str = "topo.verify/v1";
pub const CALIBRATE: &str = "topo.calibrate/v3";
pub const SNAPSHOT: &str = "topo.snapshot/v1";
pub const NVML: &str = "topo.nvml/v1";
pub const PROFILES: &str = "topo.profiles/v1";

/// Every id above, for the tests that hold docs/schema/ to them.
pub const ALL: [&str; 11] = [
    SHOW, PLAN, DIAGNOSE, HANG, DIFF, FLEET, VERIFY, CALIBRATE, SNAPSHOT, NVML, PROFILES,
];

#[cfg(test)]
mod tests {
    #[test]
    fn schema_ids_are_unique_and_versioned() {
        let mut seen = std::collections::BTreeSet::new();
        for id in super::ALL {
            assert!(seen.insert(id), "{id} twice");
            let (name, v) = id.split_once("/v").expect(id);
            assert!(
                name.starts_with("topo.") && v.parse::<u32>().is_ok(),
                "{id}"
            );
        }
    }
}
