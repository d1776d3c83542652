use super::*;
use crate::version::VersionData;

fn data(v: &str) -> VersionData {
    VersionData::for_version(v).unwrap().1
}

fn env(pairs: &[(&str, &str)], v: &str) -> Result<EnvPolicy> {
    let vars: Vec<(String, String)> = pairs
        .iter()
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .collect();
    EnvPolicy::from_env(&vars, &data(v))
}

fn err(pairs: &[(&str, &str)], v: &str) -> String {
    env(pairs, v).unwrap_err().message
}

const F: [Collective; 5] = Collective::TUNED;

#[test]
fn empty_environment_is_all_defaults() {
    let p = env(&[("PATH", "/bin"), ("NCCL_DEBUG", "INFO")], "2.30").unwrap();
    assert_eq!(p.enable, EnableMatrix::default());
    assert!(
        p.effects().is_empty(),
        "unrelated variables are not recorded"
    );
    assert_eq!(p.p2p_level, None);
    let d = data("2.30");
    assert_eq!(p.cumem_enable_or(&d), -2);
    assert_eq!(p.cumem_enable_or(&data("2.18")), 0);
    assert!(p.pxn_c2c_or(&d));
    assert!(!p.pxn_c2c_or(&data("2.27")));
    assert!(p.net_gdr_c2c_or(&data("2.27")));
    assert!(!p.net_gdr_c2c_or(&data("2.26")));
    assert_eq!(p.pat_enable_or(&d), 2);
    assert_eq!(p.pat_enable_or(&data("2.21")), 0);
}

#[test]
fn later_pairs_override_earlier_ones() {
    let p = env(
        &[("NCCL_P2P_LEVEL", "SYS"), ("NCCL_P2P_LEVEL", "NVL")],
        "2.30",
    )
    .unwrap();
    assert_eq!(p.p2p_level, Some(PathType::Nvl));
    assert_eq!(p.effects().len(), 1);
    assert_eq!(p.effects()[0].value, "NVL");
}

#[test]
fn p2p_levels_by_name_and_legacy_number() {
    let cases: &[(&str, &str, PathType)] = &[
        ("2.30", "NVL", PathType::Nvl),
        ("2.30", "PXB", PathType::Pxb),
        ("2.30", "P2C", PathType::P2c),
        ("2.26", "C2C", PathType::C2c),
        ("2.18", "PHB", PathType::Phb),
        ("2.30", "0", PathType::Loc),
        ("2.30", "1", PathType::Pix),
        ("2.30", "2", PathType::Pxb),
        ("2.30", "3", PathType::Phb),
        ("2.30", "4", PathType::Sys),
        ("2.30", "5", PathType::Sys),
        ("2.30", "9", PathType::Sys),
    ];
    for (v, val, want) in cases {
        let p = env(&[("NCCL_P2P_LEVEL", val)], v).unwrap();
        assert_eq!(p.p2p_level, Some(*want), "{v} {val}");
    }
    // names are case-sensitive; P2C does not exist before 2.27, C2C before 2.26; NET is above SYS
    for (v, val) in [
        ("2.30", "pxb"),
        ("2.26", "P2C"),
        ("2.21", "C2C"),
        ("2.30", "NET"),
        ("2.30", ""),
    ] {
        let e = err(&[("NCCL_P2P_LEVEL", val)], v);
        assert!(e.contains("bad NCCL_P2P_LEVEL"), "{e}");
        assert!(e.contains("case-sensitive"), "{e}");
    }
    let e = err(&[("NCCL_P2P_LEVEL", "pxb")], "2.21");
    assert!(e.contains("LOC, NVL, NVB, PIX, PXB, PXN, PHB, SYS"), "{e}");
}

#[test]
fn p2p_disable_wins_over_level() {
    let mut p = env(
        &[("NCCL_P2P_DISABLE", "1"), ("NCCL_P2P_LEVEL", "SYS")],
        "2.30",
    )
    .unwrap();
    assert!(p.p2p_disable);
    assert_eq!(p.p2p_level, Some(PathType::Loc));
    p.note_effect("NCCL_P2P_DISABLE", "P2P off between all GPU pairs");
    p.note_effect("NCCL_P2P_DISABLE", "P2P off between all GPU pairs");
    let fx = p.effects();
    assert_eq!(fx[0].name, "NCCL_P2P_DISABLE");
    assert_eq!(
        fx[0].effect.as_deref(),
        Some("P2P off between all GPU pairs")
    );
    assert_eq!(fx[1].name, "NCCL_P2P_LEVEL");
    assert!(
        fx[1]
            .effect
            .as_deref()
            .unwrap()
            .contains("NCCL_P2P_DISABLE=1 takes precedence")
    );
    let p = env(&[("NCCL_P2P_DISABLE", "0")], "2.30").unwrap();
    assert_eq!(p.p2p_level, None);
    assert!(
        err(&[("NCCL_P2P_DISABLE", "yes")], "2.30")
            .contains("bad NCCL_P2P_DISABLE='yes': expected 0 or 1")
    );
}

#[test]
fn numeric_variables_and_their_errors() {
    let p = env(
        &[
            ("NCCL_MIN_NCHANNELS", "4"),
            ("NCCL_MAX_NRINGS", "8"),
            ("NCCL_NTHREADS", "256"),
            ("NCCL_THREAD_THRESHOLDS", "8 8 64 64 8 64"),
            ("NCCL_NET_OVERHEAD", "2000"),
            ("NCCL_BUFFSIZE", "0x800000"),
            ("NCCL_CROSS_NIC", "0"),
            ("NCCL_NVLS_ENABLE", "0"),
            ("NCCL_CUMEM_ENABLE", "-2"),
        ],
        "2.30",
    )
    .unwrap();
    assert_eq!(p.min_nchannels, Some(4));
    assert_eq!(
        p.max_nchannels,
        Some(8),
        "legacy NRINGS used when NCHANNELS unset"
    );
    assert_eq!(p.nthreads, Some(256));
    assert_eq!(p.thread_thresholds, Some([8, 8, 64, 64, 8, 64]));
    assert_eq!(p.net_overhead, Some(2000));
    assert_eq!(p.buffsize, Some(8 << 20));
    assert_eq!(p.cross_nic, Some(0));
    assert_eq!(p.nvls_enable, Some(0));
    let p = env(&[("NCCL_THREAD_THRESHOLDS", "16 16")], "2.30").unwrap();
    assert_eq!(p.thread_thresholds, Some([16, 16, -2, -2, -2, -2]));
    let p = env(
        &[("NCCL_MAX_NCHANNELS", "4"), ("NCCL_MAX_NRINGS", "8")],
        "2.30",
    )
    .unwrap();
    assert_eq!(p.max_nchannels, Some(4));
    assert!(
        p.effects()[1]
            .effect
            .as_deref()
            .unwrap()
            .contains("NCCL_MAX_NCHANNELS is set")
    );

    let cases: &[(&str, &str, &str)] = &[
        ("NCCL_CROSS_NIC", "3", "expected 0, 1 or 2"),
        ("NCCL_MAX_NCHANNELS", "0", "a channel count 1-64"),
        ("NCCL_MIN_NCHANNELS", "four", "a channel count 1-64"),
        ("NCCL_NTHREADS", "lots", "multiple of 32"),
        ("NCCL_THREAD_THRESHOLDS", "8 x", "up to six integers"),
        (
            "NCCL_THREAD_THRESHOLDS",
            "1 2 3 4 5 6 7",
            "up to six integers",
        ),
        ("NCCL_BUFFSIZE", "-1", "a positive number of bytes"),
        ("NCCL_NET_OVERHEAD", "-5", "non-negative"),
        ("NCCL_CUMEM_ENABLE", "2", "0, 1 or -2"),
        ("NCCL_PAT_ENABLE", "3", "0, 1 or 2"),
        ("NCCL_NET", " ", "a network name"),
        ("NCCL_NET_GDR_LEVEL", "phb", "bad NCCL_NET_GDR_LEVEL"),
    ];
    for (k, v, want) in cases {
        let e = err(&[(k, v)], "2.30");
        assert!(e.contains(k) && e.contains(want), "{k}={v}: {e}");
    }
}

#[test]
fn variables_a_version_does_not_read_are_marked() {
    let p = env(&[("NCCL_PXN_C2C", "1"), ("NCCL_PAT_ENABLE", "1")], "2.21").unwrap();
    assert_eq!(p.pxn_c2c, None);
    assert_eq!(p.pat_enable, None);
    let fx = p.effects();
    assert!(
        fx.iter()
            .all(|e| e.effect.as_deref().unwrap().contains("does not read it")),
        "{fx:?}"
    );
    let p = env(&[("NCCL_PXN_C2C", "0")], "2.28").unwrap();
    assert_eq!(p.pxn_c2c, Some(false));
    assert_eq!(p.effects()[0].effect, None);
}

#[test]
fn cuda_visible_devices_stops_at_the_first_invalid_entry() {
    let p = env(&[("CUDA_VISIBLE_DEVICES", "0,1,GPU-1234,x,3")], "2.30").unwrap();
    assert_eq!(
        p.cuda_visible_devices.as_deref().unwrap(),
        ["0", "1", "GPU-1234"]
    );
    assert!(p.effects()[0].effect.as_deref().unwrap().contains("'x'"));
    let p = env(&[("CUDA_VISIBLE_DEVICES", "")], "2.30").unwrap();
    assert_eq!(p.cuda_visible_devices.as_deref().unwrap().len(), 0);
}

#[test]
fn algo_grammar_2_24_and_later() {
    let d = data("2.30");
    // (value, function, algorithm, expected enable)
    type Check = (Collective, Algorithm, u8);
    let cases: &[(&str, &[Check])] = &[
        (
            "ring",
            &[
                (Collective::AllReduce, Algorithm::Ring, 1),
                (Collective::AllReduce, Algorithm::Tree, 0),
                (Collective::Broadcast, Algorithm::Ring, 1),
            ],
        ),
        (
            "RING,tree",
            &[
                (Collective::AllGather, Algorithm::Tree, 1),
                (Collective::AllGather, Algorithm::Nvls, 0),
            ],
        ),
        (
            "^nvls,nvlstree",
            &[
                (Collective::AllReduce, Algorithm::Nvls, 0),
                (Collective::AllReduce, Algorithm::NvlsTree, 0),
                (Collective::AllReduce, Algorithm::Ring, 1),
            ],
        ),
        (
            "ring,collnetdirect;allreduce:tree,collnetdirect;broadcast:ring",
            &[
                (Collective::AllReduce, Algorithm::Tree, 1),
                (Collective::AllReduce, Algorithm::Ring, 0),
                (Collective::AllReduce, Algorithm::CollnetDirect, 1),
                (Collective::Reduce, Algorithm::Ring, 1),
                (Collective::Reduce, Algorithm::CollnetDirect, 1),
                (Collective::Broadcast, Algorithm::CollnetDirect, 0),
            ],
        ),
        (
            "allreduce:^ring",
            &[
                (Collective::AllReduce, Algorithm::Ring, 0),
                (Collective::AllReduce, Algorithm::Tree, 1),
                (Collective::AllGather, Algorithm::Ring, 1),
            ],
        ),
        (
            "ring;;allgather:pat",
            &[
                (Collective::AllGather, Algorithm::Pat, 1),
                (Collective::AllGather, Algorithm::Ring, 0),
            ],
        ),
    ];
    for (v, checks) in cases {
        let vars = vec![("NCCL_ALGO".to_string(), v.to_string())];
        let p = EnvPolicy::from_env(&vars, &d).unwrap_or_else(|e| panic!("{v}: {e:#}"));
        for (f, a, want) in *checks {
            assert_eq!(p.enable.algo(*f, *a), *want, "{v}: {f:?} {a:?}");
        }
    }
    let errors: &[(&str, &str)] = &[
        ("ring,foo", "unknown name 'foo'"),
        ("allreduce:ring;tree", "needs a function prefix"),
        (";tree", "needs a function prefix"),
        ("sendrecv:ring", "unknown function 'sendrecv'"),
        (" ring", "unknown name ' ring'"),
    ];
    for (v, want) in errors {
        let e = err(&[("NCCL_ALGO", v)], "2.24");
        assert!(e.contains(want), "{v}: {e}");
    }
}

#[test]
fn proto_grammar_per_function() {
    let p = env(&[("NCCL_PROTO", "^LL128;allreduce:LL128")], "2.30").unwrap();
    for f in F {
        let want = if f == Collective::AllReduce {
            [0, 1, 0]
        } else {
            [1, 0, 1]
        };
        for (i, pr) in Protocol::ALL.iter().enumerate() {
            assert_eq!(p.enable.proto(f, *pr), want[i], "{f:?} {pr:?}");
        }
    }
    let p = env(&[("NCCL_PROTO", "simple")], "2.30").unwrap();
    assert_eq!(p.enable.proto(Collective::AllReduce, Protocol::Ll128), 0);
    assert_eq!(p.enable.proto(Collective::AllReduce, Protocol::Simple), 1);
    let e = err(&[("NCCL_PROTO", "LL,LL256")], "2.30");
    assert!(
        e.contains("unknown name 'LL256'") && e.contains("NCCL_PROTO"),
        "{e}"
    );
}

#[test]
fn algo_grammar_up_to_2_23_is_one_list_and_ignores_unknown_names() {
    let p = env(&[("NCCL_ALGO", "Tree,bogus")], "2.23").unwrap();
    for f in F {
        assert_eq!(p.enable.algo(f, Algorithm::Tree), 1);
        assert_eq!(p.enable.algo(f, Algorithm::Ring), 0);
    }
    assert_eq!(p.ignored_tokens, vec!["NCCL_ALGO: 'bogus'".to_string()]);
    assert!(
        p.effects()[0]
            .effect
            .as_deref()
            .unwrap()
            .contains("ignores unknown name 'bogus'")
    );
    // a per-function entry is just an unknown token there
    let p = env(&[("NCCL_ALGO", "allreduce:tree")], "2.23").unwrap();
    assert_eq!(p.enable.algo(Collective::AllReduce, Algorithm::Tree), 0);
    assert_eq!(p.enable.algo(Collective::AllReduce, Algorithm::Ring), 0);
    let p = env(&[("NCCL_PROTO", "^LL128")], "2.18").unwrap();
    assert_eq!(p.enable.proto(Collective::Broadcast, Protocol::Ll128), 0);
    assert_eq!(p.enable.proto(Collective::Broadcast, Protocol::Ll), 1);
    // PAT does not exist in 2.21: ignored
    let p = env(&[("NCCL_ALGO", "ring,pat")], "2.21").unwrap();
    assert_eq!(p.ignored_tokens.len(), 1);
}

#[test]
fn ib_hca_prefix_exclude_exact_and_port_forms() {
    // prefix match (matchIf with matchExact false compares strlen(ref) characters)
    let h = HcaFilter::parse("mlx5_1");
    assert!(h.keeps("mlx5_1", 1));
    assert!(h.keeps("mlx5_10", 1));
    assert!(!h.keeps("mlx5_0", 1));
    // exact
    let h = HcaFilter::parse("=mlx5_1");
    assert!(h.keeps("mlx5_1", 1));
    assert!(!h.keeps("mlx5_10", 1));
    // exclude, with exact after it
    let h = HcaFilter::parse("^=mlx5_1");
    assert!(!h.keeps("mlx5_1", 1));
    assert!(h.keeps("mlx5_10", 1));
    let h = HcaFilter::parse("^mlx5_1");
    assert!(!h.keeps("mlx5_10", 1));
    assert!(h.keeps("mlx5_2", 1));
    // port suffixes: only that port; a list of several
    let h = HcaFilter::parse("mlx5_0:1,mlx5_3:2");
    assert_eq!(
        h.entries,
        vec![("mlx5_0".to_string(), 1), ("mlx5_3".to_string(), 2)]
    );
    assert!(h.keeps("mlx5_0", 1));
    assert!(!h.keeps("mlx5_0", 2));
    assert!(h.keeps("mlx5_3", 2));
    assert!(!h.keeps("mlx5_3", 1));
    // an empty list matches everything (and `^` alone then excludes everything)
    assert!(HcaFilter::parse("").keeps("mlx5_0", 1));
    assert!(!HcaFilter::parse("^").keeps("mlx5_0", 1));
    let p = env(&[("NCCL_IB_HCA", "^mlx5_0")], "2.28").unwrap();
    assert!(p.ib_hca.as_ref().unwrap().exclude);
}
