//! The report is well-formed (a strict XML reader accepts it: every element closed, only
//! predefined entities), refers to nothing outside itself, has unique ids, escapes every
//! string a hostile input can set, and stays the same size whatever the node count.

use super::doc::scope_css;
use super::strict::check;
use super::*;
use topo_model::testing::hgx;
use topo_model::{NodeKind, Topology};
use topo_nccl::plan::PlanRequest;
use topo_nccl::version::NcclVersion;

fn request() -> PlanRequest {
    PlanRequest {
        funcs: vec![topo_nccl::types::Collective::AllReduce],
        sizes: (3..=33).map(|k| 1u64 << k).collect(),
        version: NcclVersion::parse("2.28").unwrap(),
        version_source: "test".into(),
        placement: Default::default(),
        env: vec![],
        env_origin: Default::default(),
        explain: false,
    }
}

fn provenance(name: &str) -> Provenance {
    Provenance {
        topo_version: "0.0.0-test".into(),
        generated: "2026-12-06T00:00:00Z".into(),
        command: format!("topo report --from {name} -o r.html"),
        inputs: vec![InputFile {
            role: "--from".into(),
            name: name.into(),
            bytes: Some(3),
            sha256: Some("ab".repeat(32)),
            note: None,
        }],
    }
}

/// The report of `t` with its plan, plot and diagnosis, as the binary builds it.
fn report(t: &Topology, prov: &Provenance, extra: Vec<Finding>) -> String {
    let (analysis, plan) = topo_nccl::plan::analyzed(t, &request(), Default::default()).unwrap();
    let panels = crate::svg::plot::panels(&analysis, &plan).unwrap();
    let mut diagnosis = topo_diagnose::diagnose(&topo_diagnose::Input {
        topo: Some(t),
        ..Default::default()
    });
    diagnosis.findings.extend(extra);
    let input = Input {
        topo: Some(t),
        plan: Some(&plan),
        panels: &panels,
        plan_note: None,
        diagnosis: &diagnosis,
        provenance: prov,
    };
    let mut out = vec![];
    write(&mut out, &input).unwrap();
    String::from_utf8(out).unwrap()
}

use topo_model::message::{Code, Finding, Severity};

#[test]
fn every_section_is_there_and_the_document_is_strict() {
    let t = hgx(8, 90).replicate(2);
    let doc = report(&t, &provenance("box.xml"), vec![]);
    let c = check(&doc);
    for id in [
        "top",
        "summary",
        "findings",
        "machine",
        "matrix-0",
        "plan",
        "results",
        "log",
        "provenance",
    ] {
        assert!(c.ids.iter().any(|x| x == id), "no #{id}");
    }
    // The machine drawing and the plot, inline, their styles scoped to their own figure.
    assert!(doc.contains("<div class=\"h-figure h-machine\"><svg"));
    assert!(doc.contains("<div class=\"h-figure h-plot\"><svg"));
    assert!(doc.contains(".h-machine text{"));
    assert!(!doc.contains("\ntext{"), "an unscoped rule");
    // nvidia-smi's cells with NCCL's path on hover; the pair matrix with its reason.
    assert!(doc.contains("title=\"GPU0 ↔ GPU1: NV18 (nvidia-smi); NCCL path NVL"));
    assert!(doc.contains("<td class=\"h-p2p\" title=\"rank 0 (GPU0) → rank 1 (GPU1): P2P/"));
    assert!(doc.contains("ab".repeat(32).as_str()));
    assert!(doc.contains("2026-12-06T00:00:00Z"));
}

#[test]
fn findings_are_the_diagnosis_findings() {
    let t = hgx(8, 90);
    let extra = vec![
        Finding::new(Code::P2pDisabledByEnv, "P2P off <b>")
            .evidence((0..40).map(|i| format!("log:{i}: NCCL_P2P_DISABLE=1")))
            .fix("unset it & rerun"),
        Finding::at(Code::PcieDowntrained, Severity::Info, "a link at x8"),
    ];
    let (analysis, plan) = topo_nccl::plan::analyzed(&t, &request(), Default::default()).unwrap();
    let panels = crate::svg::plot::panels(&analysis, &plan).unwrap();
    let mut diagnosis = topo_diagnose::diagnose(&topo_diagnose::Input {
        topo: Some(&t),
        ..Default::default()
    });
    diagnosis.findings.extend(extra);
    let prov = provenance("x");
    let input = Input {
        topo: Some(&t),
        plan: Some(&plan),
        panels: &panels,
        plan_note: None,
        diagnosis: &diagnosis,
        provenance: &prov,
    };
    let mut out = vec![];
    write(&mut out, &input).unwrap();
    let doc = String::from_utf8(out).unwrap();
    let c = check(&doc);
    let mut want: Vec<(String, String, String)> = diagnosis
        .findings
        .iter()
        .map(|f| {
            (
                f.code.to_string(),
                f.severity.name().to_string(),
                f.text.clone(),
            )
        })
        .collect();
    let mut got = c.findings.clone();
    want.sort();
    got.sort();
    assert_eq!(got, want);
    // Most severe first; evidence cut with a count; the fix escaped.
    assert_eq!(c.findings[0].1, "error");
    assert!(doc.contains("… and 16 more evidence lines not listed"));
    assert!(doc.contains("unset it &amp; rerun"));
    assert!(doc.contains("P2P off &lt;b&gt;"));
}

#[test]
fn hostile_names_are_escaped() {
    let mut t = hgx(2, 90);
    t.hosts[0].name = Some("<script>alert(1)</script>&amp\u{1}\u{ffff}".into());
    t.source.origin = Some("x\"/><script>".into());
    let nets = t.nets();
    if let NodeKind::Net(n) = &mut t.node_mut(nets[0]).kind {
        n.name = "</td><script>".into();
    }
    let g = t.gpus()[0];
    if let NodeKind::Gpu(x) = &mut t.node_mut(g).kind {
        x.name = Some("]]><!-- '\"".into());
    }
    let hostile = Finding::new(Code::P2pDisabledByEnv, "</span><script>x</script>")
        .evidence(["</li><img src=http://evil/x>".to_string()])
        .fix("\"><a href=\"http://evil\">");
    let doc = report(
        &t,
        &provenance("<img src=//evil/x onerror=alert(1)>.xml"),
        vec![hostile],
    );
    check(&doc);
    assert!(!doc.contains("<script"));
    assert!(doc.contains("&lt;/td&gt;&lt;script&gt;"), "NIC name");
    assert!(doc.contains("x&quot;/&gt;&lt;script&gt;"), "source origin");
    assert!(doc.contains("&lt;img src=//evil/x onerror=alert(1)&gt;.xml"));
    assert!(doc.contains("\\x01\\u{ffff}"), "controls made visible");
}

/// A cluster reads like its node: the classes, the first node's pairs and cut lists keep
/// the report's size whatever the node count.
#[test]
fn size_does_not_grow_with_nodes() {
    let small = report(&hgx(8, 90).replicate(2), &provenance("a"), vec![]);
    let large = report(&hgx(8, 90).replicate(512), &provenance("a"), vec![]);
    check(&large);
    assert!(
        large.len() < small.len() + small.len() / 4,
        "{} bytes at 512 nodes against {} at 2",
        large.len(),
        small.len()
    );
}

#[test]
fn css_scoping_prefixes_every_selector() {
    assert_eq!(
        scope_css("\ntext{a:b}\n.x,.y{c:d}\n", "s"),
        "\n.s text{a:b}\n.s .x,.s .y{c:d}\n"
    );
}

#[test]
fn no_plan_and_no_machine_say_why() {
    let diagnosis = topo_diagnose::diagnose(&topo_diagnose::Input::default());
    let prov = Provenance::default();
    let input = Input {
        topo: None,
        plan: None,
        panels: &[],
        plan_note: Some("the machine has no GPU".into()),
        diagnosis: &diagnosis,
        provenance: &prov,
    };
    let mut out = vec![];
    write(&mut out, &input).unwrap();
    let doc = String::from_utf8(out).unwrap();
    check(&doc);
    assert!(doc.contains("NCCL&apos;s plan: the machine has no GPU"));
    assert!(doc.contains("no machine: the inputs describe none"));
}

/// The checker itself fails on what it must catch.
#[test]
fn the_checker_refuses_bad_documents() {
    let base = "<!DOCTYPE html>\n<html><body>BODY</body></html>";
    for bad in [
        "<a href=\"http://x/\">x</a>",
        "<a href=\"//x/\">x</a>",
        "<p style=\"background:url(http://x)\">x</p>",
        "<div id=\"a\"></div><div id=\"a\"></div>",
        "<p>unclosed",
        "<p onclick=\"x()\">x</p>",
        "<p>&nbsp;</p>",
        "<svg><script>x</script></svg>",
    ] {
        let doc = base.replace("BODY", bad);
        let r = std::panic::catch_unwind(|| check(&doc));
        assert!(r.is_err(), "accepted {bad}");
    }
    check(&base.replace("BODY", "<a href=\"#top\">ok</a><br/>"));
}
