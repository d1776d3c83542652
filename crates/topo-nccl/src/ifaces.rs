//! Which IP interfaces NCCL's sockets use: the socket transport's devices and the bootstrap's
//! interface, by `ncclFindInterfaces` (NVIDIA/nccl v2.28.9-1 src/misc/socket.cc). With
//! NCCL_SOCKET_IFNAME set (longer than one character), its list decides: entries match by
//! name prefix, `=` makes them exact, `^` excludes them. Unset, NCCL tries in turn `ib*`,
//! then every interface but `docker*`, `lo*` and `virbr*`, then `docker*`, then `lo*`, then
//! `virbr*`, and stops at the first step that finds one; `veth*` and `cali*` are never left
//! out by that default. NCCL also skips interfaces that are down or have no IPv4/IPv6
//! address, which no topology source states: every interface a source lists is taken as up
//! with an address. The bootstrap takes the first interface found; the socket transport
//! takes them all (up to MAX_IFS, 16), in the order the host lists them.

use crate::env::HcaFilter;

/// NCCL's MAX_IFS (src/include/socket.h, 2.28): the socket transport's interface limit.
const MAX_IFS: usize = 16;

/// The default search, step by step: the list each step matches with, and how it reads.
const DEFAULT_STEPS: [(&str, &str); 5] = [
    ("ib", "the ib* interfaces"),
    (
        "^docker,lo,virbr",
        "no ib* interface, so every interface but docker*, lo* and virbr*",
    ),
    ("docker", "no other interface, so the docker* ones"),
    ("lo", "no other interface, so the lo* ones"),
    ("virbr", "no other interface, so the virbr* ones"),
];

/// The interfaces NCCL's sockets take on one host.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct IfacePick {
    /// Taken, in the host's order: the socket transport's devices; the first is the bootstrap's.
    pub kept: Vec<String>,
    /// Listed but not taken.
    pub left_out: Vec<String>,
    /// Why, in words: which rule decided.
    pub rule: String,
}

/// `ncclFindInterfaces` over the interface names a host lists, in its order.
pub fn find_interfaces(names: &[&str], ifname: Option<(&str, &HcaFilter)>) -> IfacePick {
    let mut seen: Vec<&str> = vec![];
    for &n in names {
        if !seen.contains(&n) {
            seen.push(n);
        }
    }
    let take = |f: &HcaFilter| -> Vec<String> {
        seen.iter()
            .filter(|n| f.keeps(n, -1))
            .take(MAX_IFS)
            .map(|n| n.to_string())
            .collect()
    };
    let (kept, rule) = match ifname {
        Some((raw, f)) => {
            let kept = take(f);
            let rule = if kept.is_empty() {
                format!(
                    "NCCL_SOCKET_IFNAME={raw} matches none of them: NCCL finds no socket interface and init fails"
                )
            } else {
                format!("NCCL_SOCKET_IFNAME={raw}")
            };
            (kept, rule)
        }
        None => DEFAULT_STEPS
            .iter()
            .map(|(list, why)| (take(&HcaFilter::parse(list)), why))
            .find(|(k, _)| !k.is_empty())
            .map_or_else(
                || (vec![], "no interface at all".to_string()),
                |(k, why)| (k, format!("NCCL_SOCKET_IFNAME unset: {why}")),
            ),
    };
    let left_out = seen
        .iter()
        .filter(|n| !kept.iter().any(|k| k == *n))
        .map(|n| n.to_string())
        .collect();
    IfacePick {
        kept,
        left_out,
        rule,
    }
}

impl IfacePick {
    /// One sentence: what was taken, what was left out, and why.
    pub fn text(&self) -> String {
        let mut s = format!(
            "NCCL's socket interfaces (ncclFindInterfaces, src/misc/socket.cc, NCCL 2.28): {}",
            self.rule
        );
        if let Some(first) = self.kept.first() {
            s.push_str(&format!(
                "; kept {}; the bootstrap uses {first}",
                self.kept.join(", ")
            ));
        }
        if !self.left_out.is_empty() {
            s.push_str(&format!("; left out {}", self.left_out.join(", ")));
        }
        s.push_str(" (each taken as up with an address: no source states that)");
        s
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// NCCL_SOCKET_IFNAME as `EnvPolicy` reads it: ignored unless longer than one character.
    fn parse_ifname(value: &str) -> Option<HcaFilter> {
        (value.len() > 1).then(|| HcaFilter::parse(value))
    }

    fn pick(names: &[&str], env: Option<&str>) -> Vec<String> {
        let f = env.and_then(parse_ifname);
        find_interfaces(names, env.zip(f.as_ref())).kept
    }

    #[test]
    fn default_prefers_ib_then_all_but_docker_lo_virbr() {
        assert_eq!(
            pick(&["eth0", "ib0", "ib1", "docker0"], None),
            ["ib0", "ib1"]
        );
        let any = pick(
            &["docker0", "eth0", "lo", "veth12", "cali9", "virbr0"],
            None,
        );
        assert_eq!(any, ["eth0", "veth12", "cali9"]);
        assert_eq!(pick(&["lo", "docker0"], None), ["docker0"]);
        assert_eq!(pick(&["lo", "virbr0"], None), ["lo"]);
        assert_eq!(pick(&["virbr0"], None), ["virbr0"]);
        assert!(pick(&[], None).is_empty());
    }

    #[test]
    fn the_variable_matches_prefixes_excludes_and_exact_names() {
        let names = ["eth0", "eth1", "ens5", "docker0"];
        assert_eq!(pick(&names, Some("eth")), ["eth0", "eth1"]);
        assert_eq!(pick(&names, Some("^eth,docker")), ["ens5"]);
        assert_eq!(pick(&names, Some("=eth")), Vec::<String>::new());
        assert_eq!(pick(&names, Some("=eth1")), ["eth1"]);
        // One character is ignored, as NCCL ignores it: the default applies.
        assert_eq!(pick(&names, Some("e")), ["eth0", "eth1", "ens5"]);
    }

    #[test]
    fn text_names_kept_left_out_and_bootstrap() {
        let f = parse_ifname("bond");
        let p = find_interfaces(&["eth0", "bond0"], Some("bond").zip(f.as_ref()));
        let t = p.text();
        assert!(
            t.contains(
                "NCCL_SOCKET_IFNAME=bond; kept bond0; the bootstrap uses bond0; left out eth0"
            ),
            "{t}"
        );
        let ib = parse_ifname("ib");
        let none = find_interfaces(&["eth0"], Some("ib").zip(ib.as_ref()));
        assert!(none.text().contains("init fails"), "{}", none.text());
    }
}
