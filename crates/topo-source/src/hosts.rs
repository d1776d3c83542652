//! Several hosts, one source each (issue 28): sources named on the command line or in a host
//! list, loaded one by one and joined in node order ([`topo_model::Topology::join`]).

use crate::error::{Error, ErrorKind, Result};
use crate::{SourceSpec, load};
use std::path::{Path, PathBuf};
use topo_model::Topology;
use topo_model::inventory::{self, Facts};

/// The prefix that names a built-in profile where a path is expected.
pub const PROFILE_PREFIX: &str = "profile:";

/// A source named by one word: `profile:NAME`, a file or folder, or a built-in profile's bare
/// name where no such file exists (`topo diff`, `--from`, a host list's lines).
pub fn parse_source(arg: &str) -> Result<SourceSpec> {
    let name = arg.strip_prefix(PROFILE_PREFIX).unwrap_or(arg).trim();
    let mut s = SourceSpec::default();
    if Path::new(arg).exists() && !arg.starts_with(PROFILE_PREFIX) {
        s.from = Some(PathBuf::from(arg));
    } else if crate::profile::builtin_names().contains(&name.to_ascii_lowercase().as_str()) {
        s.profile = Some(name.to_string());
    } else {
        return Err(Error::new(
            ErrorKind::Input,
            format!("{arg}: no such file, folder or built-in profile"),
        ));
    }
    Ok(s)
}

/// The sources of a host list: one a line, `#` starts a comment, blank lines skipped, paths
/// relative to the list's folder.
pub fn read_host_list(path: &Path) -> Result<Vec<String>> {
    let text = crate::textfile::read_text(path, "host list")?;
    let dir = path.parent().unwrap_or(Path::new(""));
    let out: Vec<String> = text
        .lines()
        .map(|l| l.split('#').next().unwrap_or("").trim())
        .filter(|l| !l.is_empty())
        .map(|l| {
            if l.starts_with(PROFILE_PREFIX) || Path::new(l).is_absolute() {
                l.to_string()
            } else if dir.join(l).exists() {
                dir.join(l).to_string_lossy().into_owned()
            } else {
                l.to_string()
            }
        })
        .collect();
    if out.is_empty() {
        return Err(Error::new(
            ErrorKind::Input,
            format!("{}: the host list names no source", path.display()),
        ));
    }
    Ok(out)
}

/// Loads every host's source (each a machine of its own, no `--nodes`) and joins them in
/// order; an error names the source that failed.
pub fn load_hosts(specs: &[SourceSpec]) -> Result<Topology> {
    // Bounded before any source is read: a list of 100,000 lines would otherwise load as many
    // machines before the joined topology's capacity check refused them.
    if specs.len() > crate::MAX_NODES {
        return Err(Error::new(
            ErrorKind::Input,
            format!(
                "{} hosts given, more than the {} nodes topo plans; give fewer sources",
                specs.len(),
                crate::MAX_NODES
            ),
        ));
    }
    let mut parts = Vec::with_capacity(specs.len());
    for (i, spec) in specs.iter().enumerate() {
        let one = SourceSpec {
            nodes: None,
            ..spec.clone()
        };
        let t = load(&one).map_err(|e| {
            let what = spec
                .from
                .as_ref()
                .map(|p| p.display().to_string())
                .or_else(|| spec.profile.clone().map(|p| format!("{PROFILE_PREFIX}{p}")))
                .unwrap_or_else(|| "this machine".into());
            Error::new(e.kind, format!("host {i} ({what}): {}", e.message))
        })?;
        parts.push(t);
    }
    let joined = Topology::join(&parts)
        .ok_or_else(|| Error::new(ErrorKind::Input, "no host source given"))?;
    crate::check_capacity(&joined)?;
    crate::check_work(&joined, 1)?;
    Ok(joined)
}

/// What reading one fleet entry gave: its host-0 facts' fingerprint, with the facts
/// themselves only where its run of entries met that fingerprint first; or why it could not
/// be read (`topo_diagnose::fleet::Read`, which groups them).
pub type FactsRead = std::result::Result<(u64, Option<Facts>), String>;

/// Every entry's hardware facts (host 0 of each source, `topo diagnose --fleet`), read on up
/// to 16 cores by contiguous runs of entries and returned in the order given. Each run keeps
/// the facts of a fingerprint it meets first, so the first entry of a fingerprint in that
/// order carries them and a fleet of one build holds one copy (issue 45).
pub fn read_facts(paths: &[PathBuf]) -> Vec<FactsRead> {
    let threads = std::thread::available_parallelism()
        .map_or(2, |n| n.get())
        .min(16);
    let chunk = paths.len().div_ceil(threads).max(1);
    std::thread::scope(|s| {
        let parts: Vec<_> = paths
            .chunks(chunk)
            .map(|part| {
                s.spawn(move || {
                    let mut seen = std::collections::HashSet::new();
                    part.iter()
                        .map(|p| {
                            let spec = SourceSpec {
                                from: Some(p.clone()),
                                regular_only: true,
                                ..Default::default()
                            };
                            let f = load(&spec)
                                .map(|t| inventory::host_facts(&t, 0))
                                .map_err(|e| format!("{e:#}"))?;
                            let fp = inventory::fingerprint(&f);
                            Ok((fp, seen.insert(fp).then_some(f)))
                        })
                        .collect::<Vec<FactsRead>>()
                })
            })
            .collect();
        parts
            .into_iter()
            .flat_map(|h| h.join().unwrap_or_default())
            .collect()
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sources_are_profiles_or_paths() {
        let s = parse_source("profile:dgx-h100").unwrap();
        assert_eq!(s.profile.as_deref(), Some("dgx-h100"));
        assert!(parse_source("profile:nope").is_err());
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("a.xml");
        std::fs::write(&p, "<system/>").unwrap();
        let s = parse_source(p.to_str().unwrap()).unwrap();
        assert_eq!(s.from.as_deref(), Some(p.as_path()));
    }

    #[test]
    fn host_lists_resolve_paths_against_their_folder() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::write(dir.path().join("a.xml"), "<system/>").unwrap();
        let list = dir.path().join("hosts.txt");
        std::fs::write(
            &list,
            "# two hosts\na.xml\n\nprofile:dgx-h100  # a profile\n",
        )
        .unwrap();
        let got = read_host_list(&list).unwrap();
        assert_eq!(
            got,
            vec![
                dir.path().join("a.xml").to_string_lossy().into_owned(),
                "profile:dgx-h100".to_string()
            ]
        );
        std::fs::write(&list, "# nothing\n").unwrap();
        let e = read_host_list(&list).unwrap_err();
        assert!(e.message.contains("names no source"), "{}", e.message);
    }

    #[test]
    fn two_profiles_join_into_two_hosts() {
        let specs = [
            parse_source("profile:dgx-h100").unwrap(),
            parse_source("profile:dgx-a100").unwrap(),
        ];
        let t = load_hosts(&specs).unwrap();
        assert_eq!(t.host_count(), 2);
        assert!(t.copies().is_none());
        let same = load_hosts(&[specs[0].clone(), specs[0].clone()]).unwrap();
        assert_eq!(same.copies().map(|c| c.count), Some(2));
    }

    #[test]
    fn more_hosts_than_topo_plans_are_refused_before_reading_any() {
        // A path that does not exist: without the bound, loading host 0 would fail first.
        let spec = SourceSpec {
            from: Some(PathBuf::from("/nonexistent/host.xml")),
            ..Default::default()
        };
        let many = vec![spec; crate::MAX_NODES + 1];
        let e = load_hosts(&many).unwrap_err();
        assert!(e.message.contains("hosts given"), "{}", e.message);
    }
}
