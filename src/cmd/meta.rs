//! `topo completions`, `topo man` and `topo help`: generated from the clap definitions, so they
//! list every subcommand and flag there is.

use crate::cli::{Cli, CompletionsArgs, HelpArgs};
use crate::error;
use crate::output::emit;
use anyhow::Result;
use clap::CommandFactory;

pub fn completions(a: &CompletionsArgs) -> Result<()> {
    let mut cmd = Cli::command();
    let mut buf = Vec::new();
    clap_complete::generate(a.shell, &mut cmd, "topo", &mut buf);
    emit(None, &String::from_utf8_lossy(&buf))
}

pub fn man() -> Result<()> {
    let mut buf = Vec::new();
    clap_mangen::Man::new(Cli::command()).render(&mut buf)?;
    emit(None, &String::from_utf8_lossy(&buf))
}

/// Long help of `topo` or of the subcommand path given (`topo help plan`).
pub fn help(a: &HelpArgs) -> Result<()> {
    let mut cmd = Cli::command();
    cmd.build();
    let mut at = &mut cmd;
    for name in &a.command {
        let names: Vec<String> = at
            .get_subcommands()
            .map(|c| c.get_name().to_string())
            .collect();
        at = match at.find_subcommand_mut(name) {
            Some(c) => c,
            None => {
                return Err(error::usage(
                    format!("unknown command '{name}'"),
                    format!("commands: {}", names.join(", ")),
                ));
            }
        };
    }
    emit(None, &at.render_help().to_string())
}
