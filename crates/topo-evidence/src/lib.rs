//! What users bring besides a topology, as data the judge can see without the readers' I/O
//! (issue 24): [`nccllog`], an NCCL_DEBUG=INFO log read from text (pasted, prefixed, several
//! jobs), [`nccltests`], nccl-tests output read from text or its `-J` JSON, and
//! [`hostfacts`], the facts a live machine or a snapshot gave. `topo-source` reads
//! files, pipes and machines into these; `topo-diagnose` judges them.

#![forbid(unsafe_code)]

pub mod hang;
pub mod hostfacts;
pub mod nccllog;
pub mod nccltests;
