//! `--format svg` through the real binary: `-o` writes the picture whole, the documents are
//! well-formed XML on real fixtures, and a refused view says so.

use crate::util::{fixture, topo_clean_env};

fn well_formed(doc: &str) {
    let mut r = quick_xml::Reader::from_str(doc);
    loop {
        match r.read_event() {
            Ok(quick_xml::events::Event::Eof) => break,
            Ok(_) => {}
            Err(e) => panic!("not well-formed at {}: {e}", r.buffer_position()),
        }
    }
    assert!(doc.starts_with("<svg") && doc.trim_end().ends_with("</svg>"));
}

fn run(args: &[&str]) -> String {
    let out = topo_clean_env().args(args).output().unwrap();
    assert!(
        out.status.success(),
        "topo {args:?}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8(out.stdout).unwrap()
}

#[test]
fn show_svg_to_a_file() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("box.svg");
    let p = path.to_string_lossy().into_owned();
    let out = run(&["show", "--profile", "dgx-h100", "--format", "svg", "-o", &p]);
    assert!(out.is_empty(), "nothing on stdout with -o");
    let doc = std::fs::read_to_string(&path).unwrap();
    well_formed(&doc);
    assert_eq!(doc.matches(r#"<rect class="gpu""#).count(), 8);
    assert_eq!(doc.matches(r#"<rect class="nvs""#).count(), 1);
    // Only the file: no temporary left beside it.
    assert_eq!(std::fs::read_dir(dir.path()).unwrap().count(), 1);
}

#[test]
fn show_svg_on_real_xml_dumps() {
    for f in [
        "fixtures/xml/aws-p5-48xl-topo.xml",
        "fixtures/xml/nccl-miner-2x-rtxa6000-nvlink-bridge.xml",
        "fixtures/xml/panlichen-8x-rtx3090-switchtec.xml",
    ] {
        let doc = run(&[
            "show",
            "--from",
            &fixture(f).to_string_lossy(),
            "--format",
            "svg",
        ]);
        well_formed(&doc);
        assert!(doc.contains(r#"<rect class="gpu""#), "{f}");
    }
}

#[test]
fn plan_svg_plots_every_collective() {
    let doc = run(&[
        "plan",
        "--profile",
        "dgx-h100",
        "--nodes",
        "2",
        "--nccl-version",
        "2.28",
        "--collective",
        "all",
        "--format",
        "svg",
    ]);
    well_formed(&doc);
    for c in [
        "AllReduce",
        "AllGather",
        "ReduceScatter",
        "Broadcast",
        "Reduce",
    ] {
        assert!(doc.contains(&format!("{c} · 16 ranks on 2 nodes")), "{c}");
    }
}

#[test]
fn show_svg_refuses_other_views() {
    let out = topo_clean_env()
        .args([
            "show",
            "--profile",
            "dgx-h100",
            "--view",
            "matrix",
            "--format",
            "svg",
        ])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("--view matrix has no SVG form"), "{err}");
}

/// A matrix states no GPUDirect RDMA either way: the picture marks its ports `GDR ?`, as the
/// text view does, and a profile that states it draws `GDR` without the mark.
#[test]
fn show_svg_marks_an_unknown_gdr() {
    let m = fixture("fixtures/matrices/deepep-590-hgx-b300-cx8-bond.txt");
    let doc = run(&["show", "--from", &m.to_string_lossy(), "--format", "svg"]);
    well_formed(&doc);
    assert!(doc.contains("GDR ?"), "no unknown-GDR mark");
    let known = run(&["show", "--profile", "dgx-h100", "--format", "svg"]);
    assert!(known.contains("GDR") && !known.contains("GDR ?"));
}
