//! `topo show`: the machine, in the view and format asked for.

use crate::cli::{DataFormat, ShowArgs};
use crate::output::{emit, emit_with, warn_unused_env};
use crate::progress::Progress;
use crate::request::{Hosts, Request};
use crate::util::{Style, escape_document};
use anyhow::Result;
use clap::ValueEnum;

pub fn run(a: &ShowArgs, style: Style) -> Result<()> {
    // show describes hardware and does not apply --env, but a malformed one is still a
    // mistake worth stopping on.
    let req = Request::build(&a.source, Hosts::One)?;
    warn_unused_env("show", &req.env, style);
    if a.source.wants_profile_list() {
        let json = a.format == DataFormat::Json;
        return emit(a.output.as_ref(), &crate::cli::profile_listing(json));
    }
    let progress = Progress::start("topo show: reading the topology");
    if a.compact && a.view != crate::cli::ShowView::Matrix {
        return Err(crate::error::usage(
            "--compact applies to --view matrix only",
            "add --view matrix, or drop --compact",
        ));
    }
    if a.format == DataFormat::Svg && a.view != crate::cli::ShowView::Summary {
        let view = a.view.to_possible_value();
        return Err(crate::error::usage(
            format!(
                "--view {} has no SVG form: --format svg draws the whole machine",
                view.as_ref().map_or("", |v| v.get_name())
            ),
            "leave --view out with --format svg",
        ));
    }
    let mut topo = req.load(a.format == DataFormat::Text, false)?.topo;
    if a.each_host {
        topo.forget_copies();
    }
    let style = if a.output.is_some() {
        crate::util::file_style()
    } else {
        style
    };
    let view = a.view.into();
    let text = match a.format {
        DataFormat::Json => {
            let write = topo_report::show::json_writer(&topo, view);
            drop(progress);
            let written = emit_with(a.output.as_ref(), write);
            crate::util::release_at_exit(topo);
            return written;
        }
        DataFormat::Text => {
            let text = topo_report::show::text(&topo, view, style, a.compact);
            drop(progress);
            return emit(a.output.as_ref(), &escape_document(&text, style.color));
        }
        DataFormat::Yaml => topo_report::show::yaml(&topo, view)?,
        DataFormat::Svg => topo_report::show::svg(&topo),
    };
    drop(progress);
    emit(a.output.as_ref(), &text)
}
