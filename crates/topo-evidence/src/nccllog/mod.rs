//! NCCL_DEBUG=INFO log reader: text in, [`NcclLog`] out, no I/O.
//!
//! Logs arrive as pasted excerpts from tickets: many ranks and hosts interleaved, lines from
//! NCCL 2.4 to 2.30 (whose phrasings differ: docs/diagnose.md has them by version, checked
//! against the NCCL sources), launcher prefixes and terminal codes around them (`paste`),
//! nccl-tests output mixed in, often cut at both ends, sometimes several jobs in one file. The reader takes what each line
//! says and never fails on content; what it could not find is listed in [`NcclLog::missing`]
//! so a diagnosis can say which conclusions the excerpt cannot support.

mod dump;
mod evidence;
mod lines;
mod log;
pub mod paste;
pub mod system;

pub use evidence::{Evidence, Prefix};
pub use lines::{parse, parse_jobs};
pub use log::{
    ChannelCounts, Connection, Direction, GraphLine, InitTiming, NcclLog, P2pDisabled,
    QUOTED_PER_KIND, RankInfo, TreeLink, TuningCell, TuningChoice,
};
pub use topo_vocab::{Net, P2p, Transport};

#[cfg(test)]
mod tests;
