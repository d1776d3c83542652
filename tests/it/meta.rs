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
