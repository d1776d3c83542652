use super::*;
use serde_json::Value;

fn load(v: &str) -> VersionData {
    VersionData::for_version(v).unwrap().1
}

#[test]
fn version_strings() {
    let ok: &[(&str, u32, Option<u32>)] = &[
        ("2.28", 28, None),
        ("2.28.9", 28, Some(9)),
        ("2.28.9-1", 28, Some(9)),
        ("v2.30.7-1", 30, Some(7)),
        ("2.29.7+cuda12.9", 29, Some(7)),
        (" 2.18.6 ", 18, Some(6)),
    ];
    for (s, minor, patch) in ok {
        let v = NcclVersion::parse(s).unwrap();
        assert_eq!((v.major, v.minor, v.patch), (2, *minor, *patch), "{s}");
    }
    assert_eq!(
        NcclVersion::parse("2.28.9-1").unwrap().to_string(),
        "2.28.9"
    );
    assert_eq!(NcclVersion::parse("2.28").unwrap().short(), "2.28");
    let e = NcclVersion::parse("2.17").unwrap_err().message;
    assert_eq!(
        e,
        "unsupported nccl version 2.17: supported versions are 2.18, 2.19, 2.20, 2.21, 2.22, 2.23, 2.24, 2.25, 2.26, 2.27, 2.28, 2.29, 2.30"
    );
    assert!(
        NcclVersion::parse("3.0")
            .unwrap_err()
            .message
            .contains("unsupported nccl version 3.0")
    );
    for bad in ["", "2", "2.x", "2.28.9.1", "two.28", "2.28.", "2..28"] {
        let e = NcclVersion::parse(bad).unwrap_err().message;
        assert!(
            e.starts_with(&format!("bad nccl version '{bad}'")),
            "{bad}: {e}"
        );
    }
}

#[test]
fn every_version_loads_and_says_how_exact_it_is() {
    for m in SUPPORTED_MINORS {
        let d = load(&format!("2.{m}"));
        assert_eq!(d.version, format!("2.{m}"));
        assert_eq!(d.minor(), m);
        let documented = [18, 21, 23, 27, 28, 30].contains(&m);
        assert_eq!(d.documented, documented, "2.{m}");
        if !documented {
            let n = d.note.as_deref().unwrap();
            assert!(n.contains("not read in detail"), "2.{m}: {n}");
            assert!(
                d.provenance().contains("data plus changes"),
                "{}",
                d.provenance()
            );
        }
        let rows = d.tuning.per_ch_max_tree_bw.len();
        assert_eq!(d.tuning.ll_max_bw.len(), rows);
        assert_eq!(d.tuning.per_ch_max_ring_ll128_bw.len(), rows);
        assert_eq!(d.tuning.per_ch_max_tree_ll128_bw.len(), rows);
        assert_eq!(
            rows,
            if m >= 25 { 4 } else { 3 },
            "Blackwell rows from 2.25"
        );
        assert_eq!(d.algorithms().len(), if m >= 23 { 7 } else { 6 });
        assert_eq!(d.tuning.tree_correction.ll.len(), 24);
    }
}

#[test]
fn key_values_match_the_reference_tables() {
    let d18 = load("2.18");
    let d21 = load("2.21");
    let d23 = load("2.23");
    let d25 = load("2.25");
    let d26 = load("2.26");
    let d27 = load("2.27");
    let d28 = load("2.28");
    let d30 = load("2.30");
    // §3.3
    assert_eq!(d18.bw.sm90_nvlink, 20.0);
    assert_eq!(d21.bw.sm90_nvlink, 20.6);
    assert_eq!(d18.bw.amd, None);
    assert_eq!(d21.bw.amd, Some(16.0));
    assert_eq!(d23.bw.sm100_nvlink, None);
    assert_eq!(d25.bw.sm100_nvlink, Some(40.0));
    assert_eq!(d27.bw.sm100_nvlink, Some(40.1));
    assert_eq!(
        (d25.bw.srp_qpi, d26.bw.srp_qpi, d26.bw.erp_qpi),
        (None, Some(22.0), Some(40.0))
    );
    assert_eq!(d30.bw, topo_model::BwConstants::default());
    // §1, §5.1
    assert_eq!((load("2.24").max_channels, d25.max_channels), (32, 64));
    assert_eq!((d18.max_nvls_arity, d21.max_nvls_arity), (8, 32));
    // §5.2 speed arrays
    assert_eq!(
        d18.speeds.intra_sm90,
        [60.0, 40.0, 30.0, 24.0, 20.0, 15.0, 12.0, 6.0, 3.0]
    );
    assert_eq!(
        d21.speeds.intra_sm90,
        [
            60.0, 50.0, 40.0, 30.0, 24.0, 20.0, 15.0, 12.0, 11.0, 6.0, 3.0
        ]
    );
    assert_eq!(d21.speeds.inter_sm90[6], 22.0);
    assert_eq!(d18.speeds.inter_sm90.len(), 16);
    assert_eq!(d30.speeds.intra_sm80.len(), 13);
    assert_eq!(d30.speeds.inter_sm80.len(), 19);
    assert_eq!(d27.speeds.intra_sm100.as_ref().unwrap().last(), Some(&18.0));
    assert_eq!(
        d27.speeds.inter_sm100.as_ref().unwrap()[..3],
        [96.0, 48.0, 45.1]
    );
    assert_eq!(
        d30.speeds.inter_sm100.as_ref().unwrap()[..4],
        [96.0, 86.0, 80.0, 48.0]
    );
    assert_eq!(d30.speeds.intra_sm100.as_ref().unwrap()[5], 45.0);
    assert_eq!(
        d23.speeds.for_cc(100, false),
        d23.speeds.intra_sm90.as_slice(),
        "no Blackwell array before 2.25"
    );
    assert_eq!(d30.speeds.for_cc(100, true)[0], 96.0);
    assert_eq!(d30.speeds.for_cc(80, false)[0], 40.0);
    // §7.2
    let t = &d30.tuning;
    assert_eq!(t.base_latency.tree, [6.8, 14.0, 8.4]);
    assert_eq!(t.base_latency.ring, [6.6, 14.0, 8.4]);
    assert_eq!(t.base_latency.pat, Some([8.0, 8.0, 8.0]));
    assert_eq!(t.hw_latency.nvlink.ring, [0.6, 1.9, 3.4]);
    assert_eq!(t.hw_latency.pci.ring, [1.0, 2.5, 5.7]);
    assert_eq!(t.hw_latency.net.nvls_tree, [0.0, 0.0, 20.9]);
    assert_eq!(t.ll_max_bw[3], [282.0, 90.0, 70.0]);
    assert_eq!(t.per_ch_max_tree_bw[2], [38.7, 41.4, 36.0]);
    assert_eq!(t.per_ch_max_tree_ll128_bw[3], [55.6, 31.67, 20.0]);
    assert_eq!(t.per_ch_max_ring_ll128_bw[3], [40.0, 40.0, 40.0]);
    assert_eq!(
        t.per_ch_max_nvls_tree_bw.as_ref().unwrap()[3],
        [0.0, 96.0, 80.0]
    );
    assert_eq!(
        t.nvls_efficiency.as_deref(),
        Some(&[0.0, 0.0, 0.85, 0.74][..])
    );
    assert_eq!(d28.tuning.per_ch_max_ring_ll128_bw[3], [73.4, 34.6, 73.4]);
    assert_eq!(
        d28.tuning.per_ch_max_nvls_tree_bw.as_ref().unwrap()[3][2],
        43.8
    );
    assert_eq!(d27.tuning.hw_latency.net.nvls_tree[2], 14.0);
    assert_eq!(d25.tuning.per_ch_max_tree_bw[3], [77.4, 82.8, 72.0]);
    assert_eq!(t.tree_correction.simple[..4], [0.9, 0.9, 0.9, 0.9]);
    assert_eq!(t.tree_correction.ll[12], 0.4);
    assert_eq!(
        (t.max_threads.simple, t.max_threads.ll128, t.max_threads.max),
        (512, 640, 640)
    );
    // §5.7, §7.7, §11
    assert_eq!(d27.nvls_channels_default(100, 1), 24);
    assert_eq!(d27.nvls_channels_default(100, 2), 32);
    assert_eq!(d27.nvls_channels_default(90, 2), 16);
    assert_eq!(load("2.26").nvls_channels_default(100, 1), 16);
    assert_eq!(
        (
            d21.min_traffic_per_channel,
            load("2.22").min_traffic_per_channel,
            d23.min_traffic_per_channel,
            d30.min_traffic_per_channel
        ),
        (None, Some(512), Some(16384), Some(32768))
    );
    assert_eq!(
        (
            d18.defaults.cumem_enable,
            load("2.19").defaults.cumem_enable
        ),
        (0, -2)
    );
    assert_eq!(
        (d26.defaults.net_gdr_c2c, d27.defaults.net_gdr_c2c),
        (Some(0), Some(1))
    );
    assert_eq!(
        (d27.defaults.pxn_c2c, d28.defaults.pxn_c2c),
        (Some(0), Some(1))
    );
    assert_eq!(
        (d18.buffers.simple_arm, d30.buffers.ll128),
        (Some(1 << 20), 4_915_200)
    );
    // switches
    assert_eq!(d23.rules.algo_proto_grammar, AlgoProtoGrammar::SingleList);
    assert_eq!(
        load("2.24").rules.algo_proto_grammar,
        AlgoProtoGrammar::PerFunction
    );
    assert_eq!(
        load("2.22").rules.p2p_default_level_rule,
        P2pDefaultLevelRule::V2_18
    );
    assert_eq!(d23.rules.p2p_default_level_rule, P2pDefaultLevelRule::V2_23);
    assert_eq!(
        (
            d25.rules.path_renumbering,
            d26.rules.path_renumbering,
            d27.rules.path_renumbering
        ),
        (
            PathRenumbering::V2_18,
            PathRenumbering::V2_26,
            PathRenumbering::V2_27
        )
    );
    assert_eq!(d25.level_names().len(), 8);
    assert!(
        d26.level_names().contains(&PathType::C2c) && !d26.level_names().contains(&PathType::P2c)
    );
    assert_eq!(d30.level_names().len(), 10);
    let nvls_rules: Vec<NvlsBwRule> = ["2.18", "2.21", "2.27", "2.28"]
        .iter()
        .map(|v| load(v).rules.nvls_bw_rule)
        .collect();
    assert_eq!(
        nvls_rules,
        [
            NvlsBwRule::V2_18,
            NvlsBwRule::V2_21,
            NvlsBwRule::V2_27,
            NvlsBwRule::V2_28
        ]
    );
}

/// Leaf paths where two JSON documents differ.
fn diff(a: &Value, b: &Value, path: String, out: &mut Vec<String>) {
    match (a, b) {
        (Value::Object(x), Value::Object(y)) => {
            let mut keys: Vec<&String> = x.keys().chain(y.keys()).collect();
            keys.sort();
            keys.dedup();
            for k in keys {
                let p = if path.is_empty() {
                    k.clone()
                } else {
                    format!("{path}.{k}")
                };
                diff(
                    x.get(k).unwrap_or(&Value::Null),
                    y.get(k).unwrap_or(&Value::Null),
                    p,
                    out,
                );
            }
        }
        (Value::Array(x), Value::Array(y)) => {
            for i in 0..x.len().max(y.len()) {
                let p = format!("{path}[{i}]");
                match (x.get(i), y.get(i)) {
                    (Some(u), Some(v)) => diff(u, v, p, out),
                    _ => out.push(p),
                }
            }
        }
        _ if a != b => out.push(path),
        _ => {}
    }
}

#[test]
fn tuning_tables_2_18_vs_2_30_differ_exactly_where_the_reference_says() {
    let a = serde_json::to_value(&load("2.18").tuning).unwrap();
    let b = serde_json::to_value(&load("2.30").tuning).unwrap();
    let mut got = vec![];
    diff(&a, &b, String::new(), &mut got);
    got.sort();
    let mut want: Vec<String> = [
        // base: [2.18] Tree Simple 0; CollNet 6.8/14.0/0; NVLS, NVLSTree Simple 23; no PAT row
        "base_latency.tree[2]",
        "base_latency.collnet_direct[0]",
        "base_latency.collnet_direct[1]",
        "base_latency.collnet_chain[0]",
        "base_latency.collnet_chain[1]",
        "base_latency.nvls[2]",
        "base_latency.nvls_tree[2]",
        "base_latency.pat",
        // hw: [2.18] Tree Simple PCI 6; CollNetDirect 8/8/10.7; CollNetChain 4.75/8/14;
        // NVLS 0/0/18; NVLSTree 0/0/19; no PAT row
        "hw_latency.nvlink.collnet_direct[2]",
        "hw_latency.nvlink.collnet_chain[2]",
        "hw_latency.nvlink.nvls[2]",
        "hw_latency.nvlink.nvls_tree[2]",
        "hw_latency.nvlink.pat",
        "hw_latency.pci.tree[2]",
        "hw_latency.pci.collnet_direct[2]",
        "hw_latency.pci.collnet_chain[2]",
        "hw_latency.pci.pat",
        "hw_latency.net.collnet_direct[2]",
        "hw_latency.net.collnet_chain[2]",
        "hw_latency.net.nvls_tree[2]",
        "hw_latency.net.pat",
        // llMaxBws: [2.18] Hopper row 87.7/22.5/19.0; Blackwell row from 2.25
        "ll_max_bw[2][0]",
        "ll_max_bw[2][1]",
        "ll_max_bw[2][2]",
        "ll_max_bw[3]",
        "per_ch_max_ring_ll128_bw[3]",
        "per_ch_max_tree_ll128_bw[3]",
        "per_ch_max_tree_bw[3]",
        // 2.28+ tables
        "per_ch_max_nvls_tree_bw",
        "nvls_efficiency",
    ]
    .iter()
    .map(|s| s.to_string())
    .collect();
    want.sort();
    assert_eq!(got, want);
}
