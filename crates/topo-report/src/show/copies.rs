//! Show's account of the hosts `--nodes` copied: every view describes the first copy, and
//! says once what the other copies are (names, NVLink domains) instead of repeating them:
//! 16,384 copies of an 8-GPU host would be a gigabyte of identical JSON.

use serde::Serialize;
use topo_model::{Copies, HostId, Topology};

/// The whole replicated topology behind a [`super::model::Ctx`] built on its first copy.
#[derive(Clone, Copy)]
pub(crate) struct Replicas<'a> {
    pub whole: &'a Topology,
    pub copies: Copies,
}

/// The document's `copies` field.
#[derive(Serialize)]
pub(crate) struct CopiesDoc {
    /// Copies of the machine, the first included (`--nodes`).
    pub count: usize,
    /// Hosts in one copy; the first copy's are the hosts the document lists in full.
    pub hosts_per_copy: usize,
    /// Every host of every copy (`hosts[]` names each, with `copy_of`).
    pub hosts: usize,
    pub gpus: usize,
    /// The NVLink fabric clusters the copies' GPUs are registered in, in copy order.
    pub nvlink_clusters: Vec<String>,
    pub note: String,
}

impl<'a> Replicas<'a> {
    pub fn of(whole: &'a Topology) -> Option<Replicas<'a>> {
        whole.copies().map(|copies| Replicas { whole, copies })
    }

    pub fn hosts(&self) -> usize {
        self.copies.count * self.copies.per_copy
    }

    /// The first copy's host that `host` is a copy of (`None` for a host of the first copy).
    pub fn copy_of(&self, host: usize) -> Option<HostId> {
        (host >= self.copies.per_copy).then(|| (host % self.copies.per_copy) as HostId)
    }

    /// The NVLink cluster of `host`'s GPUs (see [`Topology::cluster_of_copy`]).
    pub fn cluster(&self, host: usize) -> Option<&'a str> {
        let per = self.copies.per_copy;
        self.whole
            .cluster_of_copy(&self.copies, host / per, (host % per) as HostId)
    }

    /// Distinct clusters in copy order: one per NVLink domain the copies fill.
    fn clusters(&self) -> Vec<String> {
        let mut out: Vec<String> = vec![];
        for h in (0..self.hosts()).step_by(self.copies.per_copy.max(1)) {
            if let Some(c) = self.cluster(h)
                && out.last().is_none_or(|l| l != c)
            {
                out.push(c.to_string());
            }
        }
        out
    }

    pub fn doc(&self) -> CopiesDoc {
        let c = &self.copies;
        CopiesDoc {
            count: c.count,
            hosts_per_copy: c.per_copy,
            hosts: self.hosts(),
            gpus: self
                .whole
                .graph
                .node_weights()
                .filter(|n| matches!(n.kind, topo_model::NodeKind::Gpu(_)))
                .count(),
            nvlink_clusters: self.clusters(),
            note: self.sentence(),
        }
    }

    /// One sentence for every view: which hosts are copies of which, and where they differ.
    pub fn sentence(&self) -> String {
        let c = &self.copies;
        let name = |h: usize| {
            self.whole
                .hosts
                .get(h)
                .and_then(|x| x.name.clone())
                .unwrap_or_else(|| format!("host{h}"))
        };
        let (first, last) = (c.per_copy, self.hosts() - 1);
        let others = if first == last {
            format!("Host {}", name(first))
        } else {
            format!("Hosts {} to {}", name(first), name(last))
        };
        let of = if c.per_copy == 1 {
            name(0)
        } else {
            format!("{} to {}", name(0), name(c.per_copy - 1))
        };
        let mut s = format!(
            "{others} ({} more) are copies of {of} (--nodes {}), not repeated here",
            last + 1 - first,
            c.count
        );
        let clusters = self.clusters();
        if clusters.len() > 1 {
            s.push_str(&format!(
                "; they fill {} NVLink domains, each its own fabric cluster ({} to {})",
                clusters.len(),
                clusters[0],
                clusters[clusters.len() - 1]
            ));
        }
        s.push('.');
        s
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use topo_model::testing::hgx;

    #[test]
    fn the_sentence_names_the_copies_and_their_domains() {
        let r = hgx(8, 90).replicate(4);
        let x = Replicas::of(&r).unwrap();
        assert_eq!(x.copy_of(0), None);
        assert_eq!(x.copy_of(3), Some(0));
        assert_eq!(
            x.sentence(),
            "Hosts node-1 to node-3 (3 more) are copies of node-0 (--nodes 4), not repeated here."
        );
        let d = x.doc();
        assert_eq!((d.count, d.hosts, d.gpus), (4, 4, 32));
        assert!(d.nvlink_clusters.is_empty());
        let two = hgx(8, 90).replicate(2);
        assert!(
            Replicas::of(&two)
                .unwrap()
                .sentence()
                .starts_with("Host node-1 (1 more)")
        );
        assert!(Replicas::of(&hgx(8, 90)).is_none());
    }
}
