//! Integration tests: the real `topo` binary on fixtures, and the library crates on the same
//! inputs. One test binary (as ripgrep does), one module per area, shared helpers in `util`.

mod codes;
mod diagnose;
mod diagnose_corpus;
mod diagnose_paste;
mod facts;
mod fidelity;
mod fleet;
mod hostile_archive;
mod hostile_input;
mod hosts;
mod layout;
mod live;
mod meta;
mod mnnvl;
mod model;
mod multihost;
mod nccl_tests;
mod oracle;
mod oracle_corpus;
mod parity;
mod plan;
mod profile_sources;
mod profiles;
mod qa;
mod schema;
mod show;
mod show_facts;
mod stated;
mod svg;
mod unknowns;
mod util;
mod verify;
mod whatif;
mod width;
mod xml;
