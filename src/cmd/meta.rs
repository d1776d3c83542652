//! `topo completions`, `topo man` and `topo help`: generated from the clap definitions, so they
//! list every subcommand and flag there is.

use crate::cli::{Cli, CompletionsArgs, HelpArgs, ManArgs};
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

/// `topo man`: topo(1), one subcommand's page, or every page into a folder. The top page's
/// SEE ALSO names topo-show(1) and the others, so each of them is a page of its own.
pub fn man(a: &ManArgs) -> Result<()> {
    let pages = man_pages();
    if let Some(dir) = &a.dir {
        return write_pages(dir, &pages);
    }
    let want = match &a.command {
        None => "topo".to_string(),
        Some(c) => format!("topo-{c}"),
    };
    let Some((_, cmd)) = pages.iter().find(|(n, _)| *n == want) else {
        let names: Vec<&str> = pages.iter().skip(1).map(|(n, _)| &n[5..]).collect();
        return Err(error::usage(
            format!(
                "no manual page for '{}'",
                a.command.as_deref().unwrap_or("")
            ),
            format!("pages: {} (or none for topo itself)", names.join(", ")),
        ));
    };
    emit(None, &render(cmd)?)
}

/// (page name, command) for topo and each visible subcommand, topo first.
fn man_pages() -> Vec<(String, clap::Command)> {
    let mut cmd = Cli::command();
    cmd.build();
    let mut out = vec![("topo".to_string(), cmd.clone())];
    for sub in cmd.get_subcommands().filter(|s| !s.is_hide_set()) {
        // `build` set the display name, `topo-show`: the page's title.
        out.push((format!("topo-{}", sub.get_name()), sub.clone()));
    }
    out
}

fn render(cmd: &clap::Command) -> Result<String> {
    let mut buf = Vec::new();
    clap_mangen::Man::new(cmd.clone()).render(&mut buf)?;
    Ok(String::from_utf8_lossy(&buf).into_owned())
}

/// Every page into `dir`, all of them or none (`topo_source::atomic::write_files`): a FIFO
/// or other non-file at one page's name used to stop the writing half way, leaving a mixed
/// set behind (issue 45).
fn write_pages(dir: &std::path::Path, pages: &[(String, clap::Command)]) -> Result<()> {
    if !dir.is_dir() {
        return Err(error::usage(
            format!("--dir {}: not a folder", dir.display()),
            "create the folder first, e.g. mkdir -p man1",
        ));
    }
    let mut files = Vec::with_capacity(pages.len());
    for (name, cmd) in pages {
        files.push((dir.join(format!("{name}.1")), render(cmd)?));
    }
    topo_source::atomic::write_files(&files).map_err(|(at, e)| {
        error::usage(
            format!(
                "--dir {}: cannot write {}: {}; no page was written",
                dir.display(),
                at.display(),
                error::io_reason(&e)
            ),
            format!(
                "remove or rename {} (only regular files are replaced), or pass --dir another folder",
                at.display()
            ),
        )
    })
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
