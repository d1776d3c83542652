//! The one judge shape: every fact topo states about a machine, a plan, a log or a result is a
//! [`Finding`] (`topo_model::message` re-exports it, with the judges' ordering). Documents carry
//! it in two shapes: show's and plan's `{code, severity, text}`, the diagnosis'
//! `{id, severity, title, evidence, fix}`; each shape reads back into the same type.

use serde::de::Deserializer;
use serde::ser::{SerializeStruct, Serializer};
use serde::{Deserialize, Serialize};
pub use topo_vocab::{Code, Severity};

/// One judged fact.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Finding {
    pub code: Code,
    pub severity: Severity,
    /// One sentence: what was found (a show/plan message's text, a diagnose finding's title).
    pub text: String,
    /// What proves it: quoted log lines (`file:line: text`), one line per node it rests on
    /// (`GPU0 (0000:18:00.0): downtrained: ...`), files and values.
    pub evidence: Vec<String>,
    /// What to do about it; empty where nothing needs doing.
    pub fix: String,
}

impl Finding {
    /// `code` at its usual severity (the code table's first).
    pub fn new(code: Code, text: impl Into<String>) -> Finding {
        Finding {
            code,
            severity: code.severity(),
            text: text.into(),
            evidence: vec![],
            fix: String::new(),
        }
    }

    /// `code` at `severity`, which the code's table must list: a code raised at a severity
    /// docs/codes.md does not give is a defect the test suite catches here.
    pub fn at(code: Code, severity: Severity, text: impl Into<String>) -> Finding {
        debug_assert!(
            code.allows(severity),
            "{code} raised at {severity}, which crates/topo-vocab/src/code.rs does not list"
        );
        Finding {
            severity,
            ..Finding::new(code, text)
        }
    }

    pub fn evidence(mut self, e: impl IntoIterator<Item = String>) -> Finding {
        self.evidence.extend(e);
        self
    }

    pub fn fix(mut self, f: impl Into<String>) -> Finding {
        self.fix = f.into();
        self
    }
}

/// A finding in show's and plan's documents: `{code, severity, text}`; evidence and fix are
/// the diagnosis' to print.
impl Serialize for Finding {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        let mut m = s.serialize_struct("Finding", 3)?;
        m.serialize_field("code", &self.code)?;
        m.serialize_field("severity", &self.severity)?;
        m.serialize_field("text", &self.text)?;
        m.end()
    }
}

/// `topo.diagnose/v1`'s shape of a finding: `{id, severity, title, evidence, fix}`.
pub struct AsDiagnosed<'a>(pub &'a Finding);

impl Serialize for AsDiagnosed<'_> {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        let f = self.0;
        let mut m = s.serialize_struct("Finding", 5)?;
        m.serialize_field("id", &f.code)?;
        m.serialize_field("severity", &f.severity)?;
        m.serialize_field("title", &f.text)?;
        m.serialize_field("evidence", &f.evidence)?;
        m.serialize_field("fix", &f.fix)?;
        m.end()
    }
}

/// For `#[serde(serialize_with)]` on a diagnosis' findings.
pub fn serialize_diagnosed<S: Serializer>(fs: &[Finding], s: S) -> Result<S::Ok, S::Error> {
    s.collect_seq(fs.iter().map(AsDiagnosed))
}

/// show's and plan's shape, read back: evidence and fix are not in it, so they come back empty.
#[derive(Deserialize)]
struct Short {
    code: Code,
    severity: Severity,
    text: String,
}

impl<'de> Deserialize<'de> for Finding {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Finding, D::Error> {
        let s = Short::deserialize(d)?;
        Ok(Finding {
            code: s.code,
            severity: s.severity,
            text: s.text,
            evidence: vec![],
            fix: String::new(),
        })
    }
}

/// `topo.diagnose/v1`'s shape, read back.
#[derive(Deserialize)]
struct Diagnosed {
    id: Code,
    severity: Severity,
    title: String,
    evidence: Vec<String>,
    fix: String,
}

/// For `#[serde(deserialize_with)]` on a diagnosis' findings.
pub fn deserialize_diagnosed<'de, D: Deserializer<'de>>(d: D) -> Result<Vec<Finding>, D::Error> {
    let v = Vec::<Diagnosed>::deserialize(d)?;
    Ok(v.into_iter()
        .map(|f| Finding {
            code: f.id,
            severity: f.severity,
            text: f.title,
            evidence: f.evidence,
            fix: f.fix,
        })
        .collect())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_finding_takes_its_code_s_usual_severity() {
        assert_eq!(
            Finding::new(Code::P2pDisabledByEnv, "x").severity,
            Severity::Error
        );
        assert_eq!(
            Finding::at(Code::PcieDowntrained, Severity::Info, "x").severity,
            Severity::Info
        );
    }

    #[test]
    #[cfg(debug_assertions)]
    #[should_panic(expected = "does not list")]
    fn a_severity_the_table_does_not_list_is_caught() {
        let _ = Finding::at(Code::NvlinkMesh, Severity::Error, "x");
    }

    #[test]
    fn the_two_document_shapes() {
        let f = Finding::new(Code::ShmTooSmall, "t")
            .evidence(["e".to_string()])
            .fix("f");
        assert_eq!(
            serde_json::to_string(&f).unwrap(),
            r#"{"code":"shm-too-small","severity":"warning","text":"t"}"#
        );
        assert_eq!(
            serde_json::to_string(&AsDiagnosed(&f)).unwrap(),
            r#"{"id":"shm-too-small","severity":"warning","title":"t","evidence":["e"],"fix":"f"}"#
        );
    }

    #[test]
    fn each_shape_reads_back() {
        let f = Finding::new(Code::ShmTooSmall, "t")
            .evidence(["e".to_string()])
            .fix("f");
        let short: Finding = serde_json::from_str(&serde_json::to_string(&f).unwrap()).unwrap();
        assert_eq!(short, Finding::new(Code::ShmTooSmall, "t"));
        let json = serde_json::to_string(&[AsDiagnosed(&f)]).unwrap();
        let mut de = serde_json::Deserializer::from_str(&json);
        assert_eq!(deserialize_diagnosed(&mut de).unwrap(), vec![f]);
    }
}
