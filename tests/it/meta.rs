//! Completions, the man page and `topo help`, all generated from the clap definitions.

use crate::util::topo;

fn ok(args: &[&str]) -> String {
    let out = topo().args(args).output().unwrap();
    assert!(out.status.success(), "{args:?}: {out:?}");
    String::from_utf8(out.stdout).unwrap()
}

const COMMANDS: [&str; 4] = ["show", "plan", "xml", "snapshot"];

#[test]
fn help_works_for_every_command_and_for_itself() {
    assert!(ok(&["help", "--help"]).contains("Usage: topo help"));
    assert!(ok(&["help"]).contains("Usage: topo [OPTIONS] <COMMAND>"));
    for c in COMMANDS {
        assert_eq!(ok(&["help", c]), ok(&[c, "-h"]), "{c}");
    }
    let out = topo().args(["help", "bogus"]).output().unwrap();
    assert_eq!(out.status.code(), Some(2));
    let err = String::from_utf8(out.stderr).unwrap();
    assert!(
        err.starts_with("error: unknown command 'bogus'\nhint: commands: show,"),
        "{err}"
    );
}

#[test]
fn completions_name_every_command() {
    for shell in ["bash", "zsh", "fish"] {
        let text = ok(&["completions", shell]);
        for c in COMMANDS {
            assert!(text.contains(c), "{shell} completion lacks {c}");
        }
        assert!(text.contains("nccl-version"), "{shell}");
    }
}

#[test]
fn man_page_is_roff_with_every_command() {
    let text = ok(&["man"]);
    assert!(text.contains(".TH topo 1"));
    for c in COMMANDS {
        assert!(text.contains(&format!("topo\\-{c}")), "man lacks {c}");
    }
}

#[test]
fn man_has_a_page_per_command_that_the_top_page_names() {
    for c in COMMANDS {
        let page = ok(&["man", c]);
        assert!(page.contains(&format!(".TH topo-{c} 1")), "{c}: {page}");
    }
    let out = topo().args(["man", "bogus"]).output().unwrap();
    assert_eq!(out.status.code(), Some(2));
    let err = String::from_utf8(out.stderr).unwrap();
    assert!(
        err.starts_with("error: no manual page for 'bogus'\nhint: pages: show,"),
        "{err}"
    );
    let dir = tempfile::tempdir().unwrap();
    ok(&["man", "--dir", dir.path().to_str().unwrap()]);
    for c in COMMANDS {
        let page = std::fs::read_to_string(dir.path().join(format!("topo-{c}.1"))).unwrap();
        assert_eq!(page, ok(&["man", c]), "{c}");
    }
    assert_eq!(
        std::fs::read_to_string(dir.path().join("topo.1")).unwrap(),
        ok(&["man"])
    );
    assert!(!dir.path().join("topo-worker.1").exists());
}

#[test]
fn bash_completes_profile_names_for_profile() {
    let text = ok(&["completions", "bash"]);
    // The --profile case of `topo plan` offers the built-in names, not file names.
    let at = text.find("--profile)").expect("a --profile case");
    let case = &text[at..at + text[at..].find(";;").unwrap()];
    for name in ["dgx-h100", "hgx-h200", "pcie-8x-l40s"] {
        assert!(case.contains(name), "{case}");
    }
    assert!(!case.contains("compgen -f"), "{case}");
}

#[test]
fn help_describes_what_the_flags_take() {
    let flat = |t: String| t.split_whitespace().collect::<Vec<_>>().join(" ");
    let show = flat(ok(&["show", "--help"]));
    for want in [
        "nvidia-smi topo -m",
        "NCCL_DEBUG=INFO log",
        "What to show",
        "Write to this file",
    ] {
        assert!(show.contains(want), "show --help lacks {want:?}");
    }
    let plan = flat(ok(&["plan", "--help"]));
    assert!(
        plan.contains("alltoall and sendrecv have no NCCL cost model"),
        "{plan}"
    );
    assert!(
        !plan.contains("reduce, alltoall, sendrecv, or all"),
        "{plan}"
    );
}
