//! `topo diagnose --fleet DIR`'s document (`topo.fleet/v1`): hosts grouped by the
//! fingerprint of their hardware facts (`topo_model::inventory`). The largest group is the
//! reference; every other group carries what differs from it, the golden-node check of a
//! cluster's burn-in. The binary lists the folder and `topo_source::hosts::read_facts` reads
//! each entry; this groups what they gave.

use std::collections::BTreeMap;
use topo_model::inventory::{self, Facts};

pub const SCHEMA: &str = topo_documents::schema::FLEET;

pub use topo_documents::fleet::{Fleet, Group, Row, Unreadable};

/// One entry read: its facts' fingerprint, and the facts themselves only where its reader met
/// that fingerprint first (`topo_source::hosts::FactsRead`). Keeping every entry's facts held
/// about 42 KB per entry, 4.3 GB at the 100,000-entry bound (issue 45); a fleet costs its
/// groups' facts and a fingerprint and a name per host.
pub type Read = Result<(u64, Option<Facts>), String>;

/// A host's name: its file name without the snapshot suffixes.
pub fn host_name(file_name: &str) -> String {
    for suffix in [".tar.gz", ".tgz", ".xml", ".yaml", ".yml", ".txt", ".log"] {
        if let Some(s) = file_name.strip_suffix(suffix) {
            return s.to_string();
        }
    }
    file_name.to_string()
}

/// The fleet of `folder` from its entries in folder order, `(file name, what reading it gave)`.
/// The facts of a fingerprint must come with its first entry in that order (a reader that
/// reads runs of entries in order keeps them there).
pub fn group(folder: String, entries: impl IntoIterator<Item = (String, Read)>) -> Fleet {
    let mut groups: BTreeMap<u64, (Facts, Vec<String>)> = BTreeMap::new();
    let mut unreadable = vec![];
    let mut hosts = 0;
    for (name, read) in entries {
        hosts += 1;
        match read {
            Ok((fp, facts)) => groups
                .entry(fp)
                .or_insert_with(|| (facts.unwrap_or_default(), vec![]))
                .1
                .push(host_name(&name)),
            Err(e) => unreadable.push(Unreadable {
                host: host_name(&name),
                error: e,
            }),
        }
    }
    let mut groups: Vec<(u64, (Facts, Vec<String>))> = groups.into_iter().collect();
    groups.sort_by(|a, b| b.1.1.len().cmp(&a.1.1.len()).then(a.1.1.cmp(&b.1.1)));
    let reference = groups.first().map(|g| g.1.0.clone()).unwrap_or_default();
    let groups = groups
        .into_iter()
        .map(|(fp, (f, hosts))| Group {
            fingerprint: format!("{fp:016x}"),
            hosts,
            differences: inventory::diff(&reference, &f)
                .into_iter()
                .map(|d| Row {
                    fact: d.fact,
                    reference: d.a,
                    here: d.b,
                })
                .collect(),
        })
        .collect();
    Fleet {
        schema: SCHEMA.into(),
        topo_version: env!("CARGO_PKG_VERSION").into(),
        folder,
        hosts,
        groups,
        unreadable,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn facts(gpus: &str) -> Facts {
        [("gpus".to_string(), gpus.to_string())].into()
    }

    #[test]
    fn the_largest_group_is_the_reference() {
        let (a, b) = (facts("8"), facts("4"));
        let (fa, fb) = (inventory::fingerprint(&a), inventory::fingerprint(&b));
        let f = group(
            "snaps".into(),
            [
                ("x.tar.gz".to_string(), Ok((fb, Some(b)))),
                ("y.xml".to_string(), Ok((fa, Some(a)))),
                ("z".to_string(), Ok((fa, None))),
                ("w.log".to_string(), Err("cannot read".to_string())),
            ],
        );
        assert_eq!(f.hosts, 4);
        assert_eq!(f.groups[0].hosts, ["y", "z"]);
        assert!(f.groups[0].differences.is_empty());
        assert_eq!(f.groups[1].hosts, ["x"]);
        assert_eq!(f.groups[1].differences[0].here.as_deref(), Some("4"));
        assert_eq!(f.groups[1].differences[0].reference.as_deref(), Some("8"));
        assert_eq!(f.unreadable[0].host, "w");
        assert!(f.has_outliers());
    }
}
