//! The hang verdict's vocabulary: the `topo.hang/v1` document, the suspects and places it
//! names, the claims each evidence kind makes, and each code's severity. A leaf: the judges
//! write into [`Acc`], the verdict reads it.

use crate::report::Finding;
use topo_evidence::hang::Quote;
use topo_vocab::Code;

pub const SCHEMA: &str = topo_documents::schema::HANG;

pub use topo_documents::hang::{
    Cause, HangReport, OnTopology, Place, RankKind, Stuck, Suspect, Why,
};

/// One judge's reading of the cause, ranked against the others by `strength`.
pub struct Claim {
    pub cause: Cause,
    pub strength: u8,
    pub summary: String,
}

/// What the judges have found so far.
#[derive(Default)]
pub struct Acc {
    pub claims: Vec<Claim>,
    pub findings: Vec<Finding>,
    pub suspects: Vec<Suspect>,
    pub places: Vec<Place>,
    pub stuck: Vec<Stuck>,
    pub notes: Vec<String>,
    /// The places already named (kind, name): each once, found without a scan.
    place_keys: std::collections::HashSet<(&'static str, String)>,
}

impl Acc {
    pub fn claim(&mut self, cause: Cause, strength: u8, summary: impl Into<String>) {
        self.claims.push(Claim {
            cause,
            strength,
            summary: summary.into(),
        });
    }
    pub fn place(&mut self, kind: &'static str, name: impl Into<String>, why: impl Into<String>) {
        let name = name.into();
        if self.place_keys.insert((kind, name.clone())) {
            self.places.push(Place {
                kind: kind.into(),
                name,
                why: why.into(),
            });
        }
    }
}

/// A finding of a hang code, at the severity the code table gives it.
pub fn finding(code: Code, title: impl Into<String>, evidence: &[&Quote], fix: &str) -> Finding {
    Finding::new(code, title)
        .evidence(quotes(evidence.iter().copied()))
        .fix(fix)
}

/// At most six quoted lines, then how many more (each line once; only the six are written
/// out, so a finding over thousands of ranks costs a hash per line).
pub fn quotes<'a>(q: impl IntoIterator<Item = &'a Quote>) -> Vec<String> {
    let mut seen = std::collections::HashSet::new();
    let mut out = vec![];
    let mut more = 0;
    for x in q {
        if !seen.insert((x.file.as_str(), x.line, x.text.as_str())) {
            continue;
        }
        if out.len() < 6 {
            out.push(x.to_string());
        } else {
            more += 1;
        }
    }
    if more > 0 {
        out.push(format!("... and {more} more such lines"));
    }
    out
}

/// `0-2,4,6-9`: ranks as ranges (sorted, each once), at most 12 runs then a count.
pub fn ranges(ranks: &[u32]) -> String {
    let mut v = ranks.to_vec();
    v.sort_unstable();
    v.dedup();
    let mut runs: Vec<(u32, u32)> = vec![];
    for r in v {
        match runs.last_mut() {
            Some((_, hi)) if hi.checked_add(1) == Some(r) => *hi = r,
            _ => runs.push((r, r)),
        }
    }
    let shown: Vec<String> = runs
        .iter()
        .take(12)
        .map(|(a, b)| {
            if a == b {
                a.to_string()
            } else {
                format!("{a}-{b}")
            }
        })
        .collect();
    let rest: u64 = runs
        .iter()
        .skip(12)
        .map(|(a, b)| u64::from(b - a) + 1)
        .sum();
    if rest > 0 {
        format!("{} and {rest} more", shown.join(","))
    } else {
        shown.join(",")
    }
}

/// `rank 3` or `ranks 0-2,5`.
pub fn rank_words(ranks: &[u32]) -> String {
    let mut v = ranks.to_vec();
    v.sort_unstable();
    v.dedup();
    if v.len() == 1 {
        format!("rank {}", v[0])
    } else {
        format!("ranks {}", ranges(&v))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ranges_compress_and_cap() {
        assert_eq!(ranges(&[6, 0, 1, 2, 4, 5, 4]), "0-2,4-6");
        assert_eq!(rank_words(&[3]), "rank 3");
        let odd: Vec<u32> = (0..40).map(|i| i * 2).collect();
        assert_eq!(ranges(&odd), "0,2,4,6,8,10,12,14,16,18,20,22 and 28 more");
    }
}
