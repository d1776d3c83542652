//! The pictures are XML a browser opens (checked with quick-xml here, rendered with
//! Chromium by scripts/render-svg.sh), carry the elements they promise, and escape every
//! name a hostile file can set.

use super::{machine, plot};
use crate::show::model::Ctx;
use topo_model::testing::{hgx, pcie_box};
use topo_model::{NodeKind, P2pCaps, Topology};
use topo_nccl::plan::PlanRequest;
use topo_nccl::version::NcclVersion;

/// Parses the whole document; any markup error fails the test with quick-xml's message.
/// Attributes must unescape and every entity must be one XML predefines (an SVG has no DTD).
fn assert_well_formed(doc: &str) {
    use quick_xml::events::{BytesStart, Event};
    let mut r = quick_xml::Reader::from_str(doc);
    let mut depth = 0i32;
    let mut elements = 0;
    let attrs = |e: &BytesStart| {
        for a in e.attributes() {
            a.expect("attribute parses")
                .normalized_value(quick_xml::XmlVersion::Implicit1_0)
                .expect("attribute value unescapes");
        }
    };
    loop {
        match r.read_event() {
            Ok(Event::Start(e)) => {
                attrs(&e);
                depth += 1;
                elements += 1;
            }
            Ok(Event::Empty(e)) => {
                attrs(&e);
                elements += 1;
            }
            Ok(Event::End(_)) => depth -= 1,
            Ok(Event::GeneralRef(e)) => {
                let name: &str = &e;
                assert!(
                    matches!(name, "lt" | "gt" | "amp" | "quot" | "apos") || name.starts_with('#'),
                    "unknown entity &{name};"
                );
            }
            Ok(Event::Eof) => break,
            Ok(_) => {}
            Err(e) => panic!("not well-formed at {}: {e}", r.buffer_position()),
        }
    }
    assert_eq!(depth, 0, "unclosed elements");
    assert!(elements > 3);
    assert!(doc.starts_with("<svg"), "{}", &doc[..doc.len().min(80)]);
}

fn machine_svg(t: &Topology) -> String {
    machine::render(&Ctx::new(t))
}

fn count(doc: &str, needle: &str) -> usize {
    doc.matches(needle).count()
}

/// GPU 0 → GPU 1 reported by NVML as not P2P capable, as on a box with P2P disabled.
fn p2p_disabled(mut t: Topology) -> Topology {
    let g = t.gpus();
    let (a, b) = (t.gpu(g[0]).unwrap().busid, t.gpu(g[1]).unwrap().busid);
    t.p2p.insert(
        (0, a, b),
        P2pCaps {
            read: Some(false),
            write: Some(false),
            ..Default::default()
        },
    );
    t
}

#[test]
fn hgx_draws_one_box_per_gpu_and_one_switch_block() {
    let doc = machine_svg(&hgx(8, 90));
    assert_well_formed(&doc);
    assert_eq!(count(&doc, r#"<rect class="gpu""#), 8);
    assert_eq!(
        count(&doc, r#"<rect class="nvs""#),
        1,
        "one block for 4 chips"
    );
    assert!(doc.contains("NVSwitch fabric · 4 chips · 18 NVLinks per GPU"));
    // One NVLink drop per GPU, not one line per GPU × chip.
    assert_eq!(count(&doc, r#"<line class="nvl""#), 8);
    assert_eq!(count(&doc, r#"class="nic r"#), 8);
    assert!(doc.contains("mlx5_7 · rail 7"));
    assert_eq!(count(&doc, "class=\"anomaly\""), 0);
}

#[test]
fn pcie_box_has_numa_domains_and_no_fabric() {
    let doc = machine_svg(&pcie_box("GenuineIntel", 6, 143, true, true));
    assert_well_formed(&doc);
    assert_eq!(count(&doc, r#"<rect class="gpu""#), 4);
    assert_eq!(count(&doc, r#"<rect class="numa""#), 2);
    assert_eq!(count(&doc, r#"<rect class="nvs""#), 0);
    assert!(count(&doc, r#"<rect class="sw""#) >= 2);
    assert!(doc.contains("NUMA 1"));
    assert!(doc.contains(r#"class="sys""#), "the inter-socket link");
}

#[test]
fn p2p_disabled_pair_is_a_red_path() {
    let doc = machine_svg(&p2p_disabled(hgx(2, 90)));
    assert_well_formed(&doc);
    assert_eq!(count(&doc, r#"<path class="anomaly""#), 1);
    assert_eq!(count(&doc, r#"<rect class="gpu bad""#), 2);
    assert!(doc.contains("GPU0 → GPU1: SHM"), "{doc}");
    assert!(doc.contains("NVML reports P2P as not supported"));
}

#[test]
fn hostile_names_are_escaped() {
    let mut t = hgx(2, 90);
    t.hosts[0].name = Some("<script>alert(1)</script>&amp\u{1}\u{ffff}".into());
    t.source.origin = Some("x\"/><script>".into());
    let nets = t.nets();
    if let NodeKind::Net(n) = &mut t.node_mut(nets[0]).kind {
        n.name = "</text><script>".into();
    }
    let g = t.gpus()[0];
    if let NodeKind::Gpu(x) = &mut t.node_mut(g).kind {
        x.name = Some("]]><!-- '\"".into());
    }
    let doc = machine_svg(&t);
    assert_well_formed(&doc);
    assert!(!doc.contains("<script"), "{doc}");
    assert!(doc.contains("&lt;script&gt;alert(1)&lt;/script&gt;&amp;amp\\x01\\u{ffff}"));
    assert!(doc.contains("&lt;/text&gt;&lt;script&gt;"));
}

#[test]
fn many_hosts_are_summarised() {
    let doc = machine_svg(&hgx(2, 90).replicate(6));
    assert_well_formed(&doc);
    assert_eq!(count(&doc, r#"<rect class="gpu""#), 8, "4 hosts drawn");
    assert!(doc.contains("2 more hosts not drawn"));
}

#[test]
fn small_machine_snapshot() {
    insta::assert_snapshot!("svg_hgx2", machine_svg(&hgx(2, 90)));
}

fn request(sizes: Vec<u64>) -> PlanRequest {
    PlanRequest {
        funcs: vec![
            topo_nccl::types::Collective::AllReduce,
            topo_nccl::types::Collective::AllGather,
        ],
        sizes,
        version: NcclVersion::parse("2.28").unwrap(),
        version_source: "test".into(),
        placement: Default::default(),
        env: vec![],
        env_origin: Default::default(),
        explain: false,
    }
}

#[test]
fn plot_panels_follow_the_model() {
    let t = hgx(8, 90).replicate(2);
    let sizes: Vec<u64> = (3..=33).map(|k| 1u64 << k).collect();
    let (analysis, plan) =
        topo_nccl::plan::analyzed(&t, &request(sizes.clone()), Default::default()).unwrap();
    let panels = plot::panels(&analysis, &plan).unwrap();
    assert_eq!(panels.len(), 2);
    for p in &panels {
        assert_eq!(p.chosen.points.len(), sizes.len());
        assert!(p.predicted.len() >= 3, "{:?}", p.predicted);
        assert!(p.measured.is_empty());
        // The chosen point is the fastest, so no predicted series beats it at its size.
        for &(b, bw) in &p.chosen.points {
            let best = p
                .predicted
                .iter()
                .flat_map(|s| s.points.iter().filter(|x| x.0 == b).map(|x| x.1))
                .fold(0.0, f64::max);
            assert!(
                (best - bw).abs() <= 1e-6 * bw.max(1.0),
                "{b}: {best} vs {bw}"
            );
        }
    }
    assert!(panels[0].predicted.iter().any(|s| s.label == "Ring/Simple"));
    let doc = plot::render(&plot::title(&plan), &panels).unwrap();
    assert_well_formed(&doc);
    assert!(doc.contains("AllReduce · 16 ranks on 2 nodes"));
    assert!(doc.contains("NCCL&apos;s choice") || doc.contains("NCCL's choice"));
    assert!(doc.contains("Ring/Simple"));
    assert!(count(&doc, "<polyline") > panels[0].predicted.len());
}

#[test]
fn measured_series_join_the_plot_and_names_are_escaped() {
    let t = hgx(8, 90);
    let (analysis, plan) = topo_nccl::plan::analyzed(
        &t,
        &request(vec![1 << 10, 1 << 20, 1 << 30]),
        Default::default(),
    )
    .unwrap();
    let mut panels = plot::panels(&analysis, &plan).unwrap();
    panels[0].measured.push(plot::Series {
        label: "measured <verify>\u{2}".into(),
        points: vec![(1 << 10, 1.0), (1 << 20, 100.0), (1 << 30, f64::NAN)],
    });
    let doc = plot::render("<script>&", &panels).unwrap();
    assert_well_formed(&doc);
    assert!(!doc.contains("<script"));
    assert!(!doc.contains("<verify"));
    assert!(doc.contains("measured &lt;verify&gt;\\x02"));
}

/// One rank: the model's time is 0 (a copy), so there is no busbw to plot; the document is
/// still a valid, empty plot rather than NaN coordinates.
#[test]
fn single_rank_plot_is_valid() {
    let t = hgx(1, 90);
    let (analysis, plan) =
        topo_nccl::plan::analyzed(&t, &request(vec![8, 1 << 20]), Default::default()).unwrap();
    let panels = plot::panels(&analysis, &plan).unwrap();
    let doc = plot::render(&plot::title(&plan), &panels).unwrap();
    assert_well_formed(&doc);
    assert!(!doc.contains("NaN") && !doc.contains("inf"), "{doc}");
}

/// The expected band is one shaded polygon, and a plan without one draws none (its picture
/// stays what `topo plan --format svg` drew before bands existed).
#[test]
fn a_band_is_one_polygon_and_a_plan_has_none() {
    let t = hgx(8, 90);
    let (analysis, plan) = topo_nccl::plan::analyzed(
        &t,
        &request(vec![1 << 20, 1 << 24, 1 << 28]),
        Default::default(),
    )
    .unwrap();
    let mut panels = plot::panels(&analysis, &plan).unwrap();
    let doc = plot::render("plan", &panels).unwrap();
    assert_eq!(count(&doc, "<polygon"), 0);
    panels[0].band = vec![
        (1 << 20, 10.0, 20.0),
        (1 << 24, 100.0, 150.0),
        (1 << 28, f64::NAN, 1.0),
    ];
    let doc = plot::render("plan", &panels).unwrap();
    assert_well_formed(&doc);
    assert_eq!(count(&doc, "<polygon"), 1);
    assert!(doc.contains("expected band"));
}
