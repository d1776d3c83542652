//! `CUDA_VISIBLE_DEVICES`: the GPUs a job sees, and the renumbering NCCL works with.
//!
//! CUDA numbers the listed GPUs 0, 1, ... in list order; NCCL's ranks run on those CUDA
//! devices, while its topology and logs keep each GPU's NVML index (`nvmlDev`, the XML's
//! `dev`). Entries are CUDA ordinals (the default `CUDA_DEVICE_ORDER=FASTEST_FIRST` equals
//! PCI bus order, NVML's order, on a box of identical GPUs), `GPU-<uuid>` (a unique prefix
//! is enough, as for CUDA) or `MIG-<uuid>`. CUDA stops at the first invalid entry and hides
//! the rest, a silent way to lose GPUs; here an invalid list is an error.

use crate::error::{Error, ErrorKind, Result};
use petgraph::graph::NodeIndex;
use std::collections::HashSet;
use topo_model::{HostId, Topology};

const VAR: &str = "CUDA_VISIBLE_DEVICES";

/// The last `CUDA_VISIBLE_DEVICES` of the environment, if any.
pub fn setting(env: &[(String, String)]) -> Option<&str> {
    env.iter()
        .rev()
        .find(|(k, _)| k == VAR)
        .map(|(_, v)| v.as_str())
}

fn bad(value: &str, why: String) -> Error {
    Error::new(
        ErrorKind::Env { name: VAR.into() },
        format!("{VAR}={value}: {why}"),
    )
    .help("list GPUs by index (0,1,2) or UUID (GPU-8e5a...), as nvidia-smi -L shows them")
}

/// The GPUs of `host` the list names, in list order (CUDA device 0 first).
fn pick(topo: &Topology, host: HostId, value: &str) -> Result<Vec<NodeIndex>> {
    let gpus: Vec<NodeIndex> = topo
        .gpus()
        .into_iter()
        .filter(|&g| topo.node(g).host == host)
        .collect();
    let mut out: Vec<NodeIndex> = vec![];
    for entry in value.split(',').map(str::trim) {
        let g = if entry.starts_with("MIG-") {
            return Err(bad(
                value,
                format!(
                    "{entry} is a MIG instance: NCCL runs one rank per MIG instance without \
                     P2P or NVLink between instances, which topo does not model; list whole GPUs"
                ),
            ));
        } else if let Some(uuid) = entry.strip_prefix("GPU-") {
            let hits: Vec<NodeIndex> = gpus
                .iter()
                .copied()
                .filter(|&g| {
                    topo.gpu(g)
                        .and_then(|x| x.uuid.as_deref())
                        .is_some_and(|u| u.trim_start_matches("GPU-").starts_with(uuid))
                })
                .collect();
            match hits[..] {
                [g] => g,
                [] => return Err(bad(value, format!("no GPU has UUID {entry}"))),
                _ => return Err(bad(value, format!("{entry} matches {} GPUs", hits.len()))),
            }
        } else {
            let i: usize = entry
                .parse()
                .map_err(|_| bad(value, format!("'{entry}' is not a GPU index or UUID")))?;
            *gpus.get(i).ok_or_else(|| {
                bad(
                    value,
                    format!("GPU {i} does not exist: the host has {} GPUs", gpus.len()),
                )
            })?
        };
        if out.contains(&g) {
            return Err(bad(value, format!("{entry} is listed twice")));
        }
        out.push(g);
    }
    Ok(out)
}

/// The topology as the job sees it, and a note on the renumbering; `None` without the
/// variable. Every host gets the same list (one launcher setting per node).
pub fn apply(topo: &Topology, env: &[(String, String)]) -> Result<Option<(Topology, String)>> {
    let Some(value) = setting(env) else {
        return Ok(None);
    };
    if value.trim().is_empty() {
        return Err(bad(value, "an empty list hides every GPU".into()));
    }
    let mut keep = HashSet::new();
    let mut first: Vec<NodeIndex> = vec![];
    for h in 0..topo.host_count() as HostId {
        let v = pick(topo, h, value)?;
        if h == 0 {
            first = v.clone();
        }
        keep.extend(v);
    }
    let total = topo
        .gpus()
        .iter()
        .filter(|&&g| topo.node(g).host == 0)
        .count();
    let map: Vec<String> = first
        .iter()
        .enumerate()
        .filter_map(|(i, &g)| {
            let x = topo.gpu(g)?;
            Some(format!("cuda {i} = GPU {} ({})", x.dev, x.busid))
        })
        .collect();
    let note = format!(
        "{VAR}={value}: {} of {total} GPUs per node visible: {}; NCCL's ranks \
         run on them in that order and its logs and topology keep the NVML numbers",
        first.len(),
        map.join(", ")
    );
    Ok(Some((topo.retain_gpus(&keep), note)))
}

#[cfg(test)]
mod tests {
    use super::*;
    use topo_model::testing;

    fn env(v: &str) -> Vec<(String, String)> {
        vec![(VAR.to_string(), v.to_string())]
    }

    #[test]
    fn a_subset_keeps_the_listed_gpus_in_list_order() {
        let t = testing::hgx(8, 90);
        let (sub, note) = apply(&t, &env("7,4")).unwrap().unwrap();
        let devs: Vec<i32> = sub
            .gpus()
            .iter()
            .map(|&g| sub.gpu(g).unwrap().dev)
            .collect();
        assert_eq!(devs, vec![4, 7]);
        assert!(note.contains("2 of 8 GPUs"), "{note}");
        assert!(note.contains("cuda 0 = GPU 7"), "{note}");
        assert_eq!(sub.nets().len(), t.nets().len());
    }

    #[test]
    fn invalid_lists_are_errors() {
        let t = testing::hgx(8, 90);
        for (v, want) in [
            ("0,8", "GPU 8 does not exist"),
            ("0,0", "listed twice"),
            ("x", "not a GPU index"),
            ("", "empty list"),
            ("MIG-3b2", "MIG instance"),
            ("GPU-ffff", "no GPU has UUID"),
        ] {
            let e = apply(&t, &env(v)).unwrap_err().to_string();
            assert!(e.contains(want), "{v}: {e}");
        }
        assert!(apply(&t, &[]).unwrap().is_none());
    }

    #[test]
    fn uuids_and_their_prefixes_name_gpus() {
        let mut t = testing::hgx(8, 90);
        for (i, g) in t.gpus().into_iter().enumerate() {
            if let topo_model::NodeKind::Gpu(x) = &mut t.node_mut(g).kind {
                x.uuid = Some(format!("GPU-{i}e5a0000-1111-2222-3333-444455556666"));
            }
        }
        let (sub, note) = apply(&t, &env("GPU-3e5a,GPU-5e5a0000-1111"))
            .unwrap()
            .unwrap();
        assert_eq!(sub.gpus().len(), 2);
        assert!(note.contains("cuda 0 = GPU 3"), "{note}");
    }
}
