//! A computed channel graph (`ncclTopoGraph`): what the search found for one pattern, and
//! what tuning and ring/tree construction read.

use super::types::{GraphId, PathType, Pattern};
use serde::Serialize;

#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct Graph {
    pub id: GraphId,
    pub pattern: Pattern,
    /// 0 never, 1 always, 2 try same NIC then allow crossing (`NCCL_CROSS_NIC`).
    pub cross_nic: u8,
    pub n_channels: usize,
    /// Per-channel bandwidth inside a node and across the network, GB/s.
    pub bw_intra: f64,
    pub bw_inter: f64,
    /// Extra network latency (us) from the NETs' `latency`.
    pub latency_inter: f64,
    pub type_intra: PathType,
    pub type_inter: PathType,
    pub same_channels: bool,
    /// Per channel, the GPU ranks of one node in order (NVLS: only the head).
    pub intra: Vec<Vec<usize>>,
    /// Per channel, (first, last) NET as indices into `System::nets` (inter-node graphs only).
    pub inter: Vec<(usize, usize)>,
}

impl Graph {
    /// An empty graph of `id` (no channel found, or not computed).
    pub fn empty(id: GraphId, pattern: Pattern) -> Graph {
        Graph {
            id,
            pattern,
            cross_nic: 0,
            n_channels: 0,
            bw_intra: 0.0,
            bw_inter: 0.0,
            latency_inter: 0.0,
            type_intra: PathType::Loc,
            type_inter: PathType::Pix,
            same_channels: true,
            intra: vec![],
            inter: vec![],
        }
    }
}
