//! The one request builder every command that reads a machine starts from: the source the
//! flags name, the facts they state over it (`--p2p`, `--nvls`, `--gpu`, `--sm`, `--nvlink`,
//! `--nic-speed`, `--gdr`, a profile lent to a file), the parts they fail (`--without`,
//! `--degrade`) and the `--env` settings, read from the flags once at the command's entry.
//! Below it nothing reads the flags: [`Request::load`] loads, states and fails in that order,
//! and [`Request::state`] does the last two on a topology a command found its own way
//! (diagnose's logs and live discovery).

use crate::cli::SourceArgs;
use crate::error;
use anyhow::Result;
use topo_model::Topology;
use topo_model::faults::Fault;
use topo_source::SourceSpec;

/// Which sources a command reads.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Hosts {
    /// One host (`--nodes` may replicate it); several `--from` or `--hosts` are refused.
    One,
    /// One source per host where several are named (`topo plan`).
    Several,
}

/// What the flags ask of the machine, typed; see the module's documentation.
#[derive(Clone, Debug)]
pub struct Request {
    source: Source,
    p2p: Option<bool>,
    nvls: Option<bool>,
    stated: topo_model::stated::Stated,
    /// `--profile` beside `--from`: its facts fill what the file leaves unknown.
    lent_profile: Option<String>,
    without: Vec<Fault>,
    degrade: Vec<Fault>,
    /// `--env` settings, in order.
    pub env: Vec<(String, String)>,
}

#[derive(Clone, Debug)]
enum Source {
    One(SourceSpec),
    Hosts(Vec<SourceSpec>),
}

/// A loaded machine: as the flags describe it, and (only when parts were failed and the
/// caller asked) as it was before.
pub struct Machine {
    pub topo: Topology,
    pub healthy: Option<Topology>,
}

impl Request {
    /// Reads the flags: `--env` first (a malformed one stops every command, even those that
    /// do not apply it), then the source.
    pub fn build(src: &SourceArgs, hosts: Hosts) -> Result<Request> {
        let env = src.env_overrides()?;
        let source = match hosts {
            Hosts::Several => match src.host_specs()? {
                Some(specs) => Source::Hosts(specs),
                None => Source::One(src.spec()?),
            },
            Hosts::One => Source::One(src.spec()?),
        };
        Ok(Request {
            source,
            p2p: src.p2p,
            nvls: src.nvls,
            stated: topo_model::stated::Stated {
                gpu: src.gpu_model,
                sm: src.sm,
                nvlink: src.nvlink,
                nic_speed_mbps: src.nic_speed,
                gdr: src.gdr,
                via: None,
            },
            lent_profile: src.profile.clone().filter(|_| src.first_from().is_some()),
            without: src.without.clone(),
            degrade: src.degrade.clone(),
            env,
        })
    }

    /// The one source's spec (a command that reads one host), to load its own way.
    pub fn spec(&self) -> &SourceSpec {
        match &self.source {
            Source::One(s) => s,
            Source::Hosts(specs) => &specs[0],
        }
    }

    /// Whether any part is failed (`--without`, `--degrade`).
    pub fn fails_parts(&self) -> bool {
        !self.without.is_empty() || !self.degrade.is_empty()
    }

    /// How many parts are failed.
    pub fn failed_parts(&self) -> usize {
        self.without.len() + self.degrade.len()
    }

    /// Loads the source (text escaped for a terminal with `escape_text`), states the facts
    /// and fails the parts; `keep_healthy` keeps a copy from before the failures.
    pub fn load(&self, escape_text: bool, keep_healthy: bool) -> Result<Machine> {
        let mut topo = match &self.source {
            Source::Hosts(specs) => {
                let mut specs = specs.clone();
                specs.iter_mut().for_each(|s| s.escape_text = escape_text);
                topo_source::hosts::load_hosts(&specs)?
            }
            Source::One(spec) => {
                let mut spec = spec.clone();
                spec.escape_text = escape_text;
                topo_source::load(&spec)?
            }
        };
        self.apply_facts(&mut topo)?;
        let healthy = (keep_healthy && self.fails_parts()).then(|| topo.clone());
        self.apply_faults(&mut topo)?;
        Ok(Machine { topo, healthy })
    }

    /// States the facts and fails the parts on a topology the command found itself.
    pub fn state(&self, topo: &mut Topology) -> Result<()> {
        self.apply_facts(topo)?;
        self.apply_faults(topo)
    }

    /// `--p2p`, `--nvls` and the stated facts, which the topology's source info records;
    /// with `--from` and `--profile`, the profile's facts fill what the flags left unknown.
    fn apply_facts(&self, topo: &mut Topology) -> Result<()> {
        topo_source::apply_facts(topo, self.p2p, self.nvls);
        if !self.stated.is_empty() {
            self.stated.apply(topo);
        }
        if let Some(name) = &self.lent_profile {
            let base = topo_source::profile::load_builtin(name)?;
            let via = format!("profile {name}");
            topo_model::stated::Stated::from_reference(&base, &via).apply(topo);
        }
        Ok(())
    }

    /// `--without` and then `--degrade`, in order, each noted in the source info; one error
    /// naming the flag and the part that does not exist.
    fn apply_faults(&self, topo: &mut Topology) -> Result<()> {
        let faults: Vec<Fault> = self.without.iter().chain(&self.degrade).cloned().collect();
        if faults.is_empty() {
            return Ok(());
        }
        let notes = topo_model::faults::apply_all(topo, &faults).map_err(|(i, e)| {
            let (flag, n) = if i < self.without.len() {
                ("--without", i + 1)
            } else {
                ("--degrade", i - self.without.len() + 1)
            };
            error::usage(
                format!("{flag} (the {}): {e}", ordinal(n)),
                "name a part the machine has, once (topo show --from ... lists GPUs, ports and bus ids)",
            )
        })?;
        topo.source.stated.extend(notes);
        Ok(())
    }
}

fn ordinal(n: usize) -> String {
    let suffix = match (n % 10, n % 100) {
        (_, 11..=13) => "th",
        (1, _) => "st",
        (2, _) => "nd",
        (3, _) => "rd",
        _ => "th",
    };
    format!("{n}{suffix}")
}

#[cfg(test)]
mod tests {
    use super::*;
    use clap::Parser;

    fn request(args: &[&str], hosts: Hosts) -> Result<Request> {
        let cli = crate::cli::Cli::try_parse_from(args).unwrap();
        let crate::cli::Command::Plan(a) = cli.command else {
            panic!("not plan: {args:?}");
        };
        Request::build(&a.source, hosts)
    }

    #[test]
    fn one_request_loads_states_and_fails_in_order() {
        let r = request(
            &[
                "topo",
                "plan",
                "--profile",
                "dgx-h100",
                "--p2p",
                "off",
                "--without",
                "gpu:7",
                "--env",
                "NCCL_P2P_LEVEL=NVL",
            ],
            Hosts::One,
        )
        .unwrap();
        assert_eq!(r.env, [("NCCL_P2P_LEVEL".into(), "NVL".into())]);
        assert_eq!(r.failed_parts(), 1);
        let m = r.load(false, true).unwrap();
        let healthy = m.healthy.expect("kept before the failure");
        assert_eq!(healthy.gpus().len(), m.topo.gpus().len() + 1);
        assert!(
            m.topo
                .source
                .stated
                .iter()
                .any(|s| s.contains("without GPU 7"))
        );
        let p2p_off = |t: &Topology| {
            t.gpus().iter().all(|&n| match &t.node(n).kind {
                topo_model::NodeKind::Gpu(g) => g.p2p == Some(false),
                _ => true,
            })
        };
        assert!(p2p_off(&m.topo) && p2p_off(&healthy));
        // Without a failed part there is no healthy copy to keep.
        let r = request(&["topo", "plan", "--profile", "dgx-h100"], Hosts::One).unwrap();
        assert!(r.load(false, true).unwrap().healthy.is_none());
    }

    #[test]
    fn a_missing_part_names_its_flag_and_place() {
        let r = request(
            &[
                "topo",
                "plan",
                "--profile",
                "dgx-h100",
                "--without",
                "gpu:1",
                "--without",
                "gpu:99",
            ],
            Hosts::One,
        )
        .unwrap();
        let e = crate::error::report(&r.load(false, false).err().unwrap());
        assert!(e.line.starts_with("--without (the 2nd): "), "{}", e.line);
    }

    #[test]
    fn bad_env_and_several_hosts_are_refused_where_one_is_read() {
        let e = request(&["topo", "plan", "--env", "NOEQUALS"], Hosts::One).unwrap_err();
        assert!(
            crate::error::report(&e)
                .line
                .contains("bad --env 'NOEQUALS'")
        );
        let two = [
            "topo",
            "plan",
            "--from",
            "profile:dgx-h100",
            "--from",
            "profile:hgx-h200",
        ];
        assert!(request(&two, Hosts::One).is_err());
        let r = request(&two, Hosts::Several).unwrap();
        assert_eq!(r.load(false, false).unwrap().topo.hosts.len(), 2);
    }
}
