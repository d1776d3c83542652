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

fn page_provenance() -> Provenance {
    Provenance {
        topo_version: "0.0.0-test".into(),
        generated: "2026-12-06T00:00:00Z".into(),
        command: "topo diff <a> <b> --format html".into(),
        inputs: vec![],
    }
}

/// A string every page must show as text: markup, an entity, a control and a quote.
const HOSTILE: &str = "</td><script>alert(1)</script>&amp;\u{1b}[31m\"'";
const HOSTILE_SHOWN: &str =
    "&lt;/td&gt;&lt;script&gt;alert(1)&lt;/script&gt;&amp;amp;\\x1b[31m&quot;&apos;";

fn diff_doc() -> topo_diagnose::diff::Diff {
    use topo_diagnose::diff::{Diff, DiffRow, Side};
    let side = |arg: &str| Side {
        arg: arg.into(),
        kind: topo_model::SourceKind::Snapshot,
        hosts: 1,
    };
    Diff {
        schema: topo_diagnose::diff::SCHEMA.into(),
        topo_version: "0.0.0-test".into(),
        a: side(&format!("a{HOSTILE}.tar.gz")),
        b: side("b"),
        hardware: vec![
            DiffRow {
                fact: format!("gpu 0 model{HOSTILE}"),
                a: Some("H100".into()),
                b: None,
            },
            DiffRow {
                fact: "gpu 0 pcie".into(),
                a: Some("Gen5 x16".into()),
                b: Some(format!("Gen5 x16 (x8 now){HOSTILE}")),
            },
        ],
        nccl_version: "2.28".into(),
        plan_changes: vec![format!("allreduce 1 GiB: Ring -> Tree {HOSTILE}")],
        plan_error: None,
    }
}

#[test]
fn a_diff_page_is_strict_and_shows_every_row_escaped() {
    let d = diff_doc();
    let mut out = vec![];
    diff(&mut out, &d, &page_provenance()).unwrap();
    let doc = String::from_utf8(out).unwrap();
    let c = check(&doc);
    for id in [
        "top",
        "summary",
        "hardware",
        "hardware-facts",
        "plan",
        "plan-changes",
        "provenance",
    ] {
        assert!(c.ids.iter().any(|x| x == id), "no #{id}");
    }
    let rows: Vec<Vec<String>> = c
        .rows
        .iter()
        .filter(|(id, _)| id == "hardware-facts")
        .map(|(_, r)| r.clone())
        .collect();
    let visible = |s: &str| s.replace('\u{1b}', "\\x1b");
    let want: Vec<Vec<String>> = d
        .hardware
        .iter()
        .map(|r| {
            vec![
                visible(&r.fact),
                visible(r.a.as_deref().unwrap_or("(none)")),
                visible(r.b.as_deref().unwrap_or("(none)")),
            ]
        })
        .collect();
    assert_eq!(rows, want);
    assert!(!doc.contains("<script"));
    assert_eq!(
        doc.matches(HOSTILE_SHOWN).count(),
        5,
        "A, 2 facts, 1 change, the title"
    );
    assert!(doc.contains("A and B differ: 2 hardware facts, 1 change in NCCL&apos;s plan."));
}

#[test]
fn a_diff_page_says_why_the_plans_were_not_compared() {
    let mut d = diff_doc();
    d.hardware.clear();
    d.plan_changes.clear();
    d.nccl_version.clear();
    d.plan_error = Some("A cannot be planned: unsupported nccl version 1.0".into());
    let mut out = vec![];
    diff(&mut out, &d, &page_provenance()).unwrap();
    let doc = String::from_utf8(out).unwrap();
    check(&doc);
    assert!(doc.contains("Not compared: A cannot be planned: unsupported nccl version 1.0"));
    assert!(doc.contains("the plans were not compared"));
    assert!(doc.contains(crate::diff::HW_SAME));
}

/// A fleet of `hosts` hosts in `groups` groups, each outlier with `facts` differences, and
/// `bad` unreadable entries; every name hostile.
fn fleet_doc(hosts: usize, groups: usize, facts: usize, bad: usize) -> topo_diagnose::fleet::Fleet {
    use topo_diagnose::fleet::{Fleet, Group, Row, Unreadable};
    let per = hosts / groups;
    Fleet {
        schema: topo_diagnose::fleet::SCHEMA.into(),
        topo_version: "0.0.0-test".into(),
        folder: format!("snaps{HOSTILE}"),
        hosts: per * groups + bad,
        groups: (0..groups)
            .map(|g| Group {
                fingerprint: format!("{g:016x}"),
                hosts: (0..per).map(|h| format!("node{g}-{h}{HOSTILE}")).collect(),
                differences: if g == 0 {
                    vec![]
                } else {
                    (0..facts)
                        .map(|f| Row {
                            fact: format!("gpu {f} pcie{HOSTILE}"),
                            reference: Some("Gen5 x16".into()),
                            here: (f % 2 == 0).then(|| format!("Gen5 x16 (x8 now){HOSTILE}")),
                        })
                        .collect()
                },
            })
            .collect(),
        unreadable: (0..bad)
            .map(|i| Unreadable {
                host: format!("bad{i}{HOSTILE}"),
                error: format!("cannot read snapshot bad{i}{HOSTILE}.tar.gz: truncated"),
            })
            .collect(),
    }
}

#[test]
fn a_fleet_page_is_strict_and_agrees_with_its_document() {
    let d = fleet_doc(12, 3, 4, 2);
    let mut out = vec![];
    fleet(&mut out, &d, &page_provenance()).unwrap();
    let doc = String::from_utf8(out).unwrap();
    let c = check(&doc);
    for id in [
        "summary",
        "groups",
        "outliers",
        "group-1",
        "group-2",
        "unreadable",
        "unreadable-entries",
        "provenance",
    ] {
        assert!(c.ids.iter().any(|x| x == id), "no #{id}");
    }
    assert!(!doc.contains("<script"));
    let visible = |s: &str| s.replace('\u{1b}', "\\x1b");
    let table = |id: &str| -> Vec<Vec<String>> {
        c.rows
            .iter()
            .filter(|(t, _)| t == id)
            .map(|(_, r)| r.clone())
            .collect()
    };
    let groups: Vec<Vec<String>> = d
        .groups
        .iter()
        .enumerate()
        .map(|(i, g)| {
            vec![
                i.to_string(),
                crate::fleet::role(i).to_string(),
                g.hosts.len().to_string(),
                g.fingerprint.clone(),
                g.differences.len().to_string(),
                visible(&crate::fleet::hosts_line(&g.hosts, 8)),
            ]
        })
        .collect();
    assert_eq!(table("groups"), groups);
    for (i, g) in d.groups.iter().enumerate().skip(1) {
        let want: Vec<Vec<String>> = g
            .differences
            .iter()
            .map(|r| {
                let v = |x: &Option<String>| visible(x.as_deref().unwrap_or("(none)"));
                vec![visible(&r.fact), v(&r.here), v(&r.reference)]
            })
            .collect();
        assert_eq!(table(&format!("group-{i}")), want);
    }
    let bad: Vec<Vec<String>> = d
        .unreadable
        .iter()
        .map(|u| vec![visible(&u.host), visible(&u.error)])
        .collect();
    assert_eq!(table("unreadable-entries"), bad);
    assert!(doc.contains(&format!("snaps{HOSTILE_SHOWN}")), "the folder");
    assert!(doc.contains(
        "8 hosts in 2 outlier groups differ from the reference (4 hosts); 2 entries could not be read."
    ));
    let mut alike = fleet_doc(3, 1, 0, 0);
    alike.hosts = 3;
    let mut out = vec![];
    fleet(&mut out, &alike, &page_provenance()).unwrap();
    let doc = String::from_utf8(out).unwrap();
    check(&doc);
    assert!(doc.contains(">3 hosts alike.</p>"));
}

/// 100,000 hosts in 5,000 classes, each with 300 differences, and 10,000 unreadable entries:
/// the page lists the first groups, rows and names with counts, and stays small.
#[test]
fn a_fleet_page_is_bounded_whatever_the_fleet() {
    let small = fleet_doc(30, 3, 40, 2);
    let large = fleet_doc(100_000, 5_000, 300, 10_000);
    let page = |d: &topo_diagnose::fleet::Fleet| {
        let mut out = vec![];
        fleet(&mut out, d, &page_provenance()).unwrap();
        String::from_utf8(out).unwrap()
    };
    let (s, l) = (page(&small), page(&large));
    check(&l);
    assert!(l.len() < 8 << 20, "{} bytes", l.len());
    assert!(l.contains("… and 4800 more groups not listed"));
    assert!(l.contains("… and 4967 more outlier groups detailed"));
    assert!(l.contains("… and 9800 more unreadable entries not listed"));
    assert!(l.contains(" and 12 more</td>"), "hosts of a group cut");
    assert!(s.len() < l.len());
}

/// Channel 0's tree and its mirror: every rank once, one edge per non-root rank, the nodes
/// and GPUs named.
#[test]
fn trees_are_drawn_with_their_mirror() {
    let t = hgx(8, 90).replicate(4);
    let doc = report(&t, &provenance("box.xml"), vec![]);
    check(&doc);
    let figures: Vec<&str> = doc
        .split("<div class=\"h-figure h-tree\">")
        .skip(1)
        .map(|s| &s[..s.find("</div>").unwrap()])
        .collect();
    assert_eq!(figures.len(), 2, "tree 0 and its mirror");
    assert!(figures[0].contains("tree 0 (channel 0)"));
    assert!(figures[1].contains("tree 1, its mirror (channel "));
    for f in &figures {
        let boxes: usize = (0..4)
            .map(|n| f.matches(&format!("<rect class=\"n{n}")).count())
            .sum();
        assert_eq!(boxes, 32, "a box per rank");
        assert_eq!(f.matches(" root\"").count(), 1, "one root");
        let edges =
            f.matches("<line class=\"intra\"").count() + f.matches("<line class=\"inter\"").count();
        assert_eq!(edges, 31);
        assert_eq!(
            f.matches("<line class=\"inter\"").count(),
            3,
            "4 nodes: 3 hops"
        );
        for n in 0..4 {
            assert!(f.contains(&format!(">node {n}</text>")));
        }
        assert!(f.contains(">GPU7</text>"));
    }
    // A tree is not drawn past the rings' bound; the text lists it still.
    let big = report(&hgx(8, 90).replicate(16), &provenance("a"), vec![]);
    assert!(!big.contains("h-tree"));
}

/// Every matrix sits in a box that scrolls sideways, so a wide one never widens the page; the
/// print style lets it out.
#[test]
fn matrices_scroll_in_their_own_box() {
    let doc = report(&hgx(8, 90).replicate(2), &provenance("a"), vec![]);
    let tables = doc.matches("<table class=\"h-matrix").count();
    assert!(tables >= 2);
    assert_eq!(
        doc.matches("<div class=\"h-wide\"><table class=\"h-matrix")
            .count(),
        tables
    );
    assert!(doc.contains(".h-wide{overflow-x:auto"));
    assert!(doc.contains("@media print{") && doc.contains(".h-wide{overflow:visible}"));
}
