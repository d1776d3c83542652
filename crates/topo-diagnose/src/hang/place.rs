//! The verdict placed on a machine (issue 46, item 3, first part): for each suspect GPU and
//! NIC, the NICs that share its PCIe switch (its rail, as NCCL picks the closest NIC in
//! `ncclTopoGetLocalNet`, src/graph/topo.cc) and the other GPUs behind those NICs, whose ranks
//! share the suspect link. One machine is given (`--from`, `--profile`): every node of the job
//! is taken to be like its first host.

use super::model::{HangReport, OnTopology, Why};
use topo_model::Topology;
use topo_model::nic_judge::near;

/// `5`, `1 (NVML 2)`: the NVML index NCCL and the topology number GPUs by.
fn nvml_index(gpu: &str) -> Option<i32> {
    match gpu.split_once("(NVML ") {
        Some((_, n)) => n.trim_end_matches(')').trim().parse().ok(),
        None => gpu.split_whitespace().next()?.parse().ok(),
    }
}

pub fn place_on(r: &mut HangReport, topo: &Topology, source: &str) {
    let gpus = topo.gpus();
    let Some(host) = gpus.first().map(|g| topo.node(*g).host) else {
        r.notes.push(format!(
            "{source}: no GPU, so the verdict is not placed on it"
        ));
        return;
    };
    let gpus: Vec<_> = gpus
        .into_iter()
        .filter(|g| topo.node(*g).host == host)
        .collect();
    let nets: Vec<_> = topo
        .nets()
        .into_iter()
        .filter(|n| topo.node(*n).host == host)
        .collect();
    let dev = |g| topo.gpu(g).map_or(-1, |x| x.dev);
    let name = |n| topo.net(n).map_or(String::new(), |x| x.name.clone());
    let mut out: Vec<OnTopology> = vec![];
    for s in &r.suspects {
        // A NIC named by the evidence (`mlx5_0:1`), else the suspect GPU's own NICs.
        let hca = (s.why == Why::NetworkEndpoint)
            .then(|| {
                r.places
                    .iter()
                    .find(|p| {
                        p.kind == "nic" && s.node.as_deref().is_some_and(|n| p.name.starts_with(n))
                    })
                    .and_then(|p| p.name.rsplit(' ').next())
                    .map(|h| h.split(':').next().unwrap_or(h).to_string())
            })
            .flatten();
        let gpu = s.gpu.as_deref().and_then(nvml_index);
        let g = gpu.and_then(|i| gpus.iter().copied().find(|g| dev(*g) == i));
        let nics: Vec<_> = match (&hca, g) {
            (Some(h), _) => nets.iter().copied().filter(|n| name(*n) == *h).collect(),
            (None, Some(g)) => nets.iter().copied().filter(|n| near(topo, g, *n)).collect(),
            (None, None) => continue,
        };
        let sharing: Vec<i32> = gpus
            .iter()
            .copied()
            .filter(|x| nics.iter().any(|n| near(topo, *x, *n)))
            .map(dev)
            .collect();
        let who = if s.ranks.is_empty() {
            s.node.clone().unwrap_or_else(|| "a process".into())
        } else {
            super::model::rank_words(&s.ranks)
        };
        let subject = match (gpu, &hca) {
            (_, Some(h)) => format!("{who}: {h}"),
            (Some(i), None) => format!("{who}: GPU {i}"),
            (None, None) => who,
        };
        let mut nic_names: Vec<String> = nics.iter().map(|n| name(*n)).collect();
        nic_names.dedup();
        let list = |v: &[i32]| {
            v.iter()
                .map(|x| x.to_string())
                .collect::<Vec<_>>()
                .join(",")
        };
        let others: Vec<i32> = sharing
            .iter()
            .copied()
            .filter(|x| Some(*x) != gpu)
            .collect();
        let why = match (nic_names.is_empty(), hca.is_some(), others.is_empty()) {
            (true, _, _) => format!(
                "no NIC shares a PCIe switch with it on {source}: its traffic crosses the CPU to reach one"
            ),
            (false, true, _) => format!(
                "{} is the closest NIC of GPU(s) {}: their ranks use that link",
                nic_names.join(", "),
                list(&sharing)
            ),
            (false, false, true) => format!(
                "its NIC {} (same PCIe switch) serves it alone",
                nic_names.join(", ")
            ),
            (false, false, false) => format!(
                "its NIC {} (same PCIe switch) is shared with GPU(s) {}: their ranks use the same link",
                nic_names.join(", "),
                list(&others)
            ),
        };
        let row = OnTopology {
            subject,
            gpu,
            nics: nic_names,
            gpus_sharing: sharing,
            why,
        };
        if !out.contains(&row) && out.len() < 1024 {
            out.push(row);
        }
    }
    if gpu_less(r) && out.is_empty() {
        r.notes
            .push(format!("{source}: no suspect names a GPU or NIC to place"));
    }
    r.on_topology = out;
    r.notes.push(format!(
        "placed on {source}: every node is taken to be like its first host"
    ));
}

fn gpu_less(r: &HangReport) -> bool {
    r.suspects.iter().all(|s| s.gpu.is_none())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn nvml_indices_read_from_both_forms() {
        assert_eq!(nvml_index("5"), Some(5));
        assert_eq!(nvml_index("1 (NVML 2)"), Some(2));
        assert_eq!(nvml_index("?"), None);
    }
}
