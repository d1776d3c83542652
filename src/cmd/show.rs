//! `topo show`: the machine, in the view and format asked for.

use crate::cli::{DataFormat, ShowArgs};
use crate::output::{emit, warn_unused_env};
use crate::progress::Progress;
use crate::util::{Style, escape_document};
use anyhow::Result;

pub fn run(a: &ShowArgs, style: Style) -> Result<()> {
    // show describes hardware and does not apply --env, but a malformed one is still a
    // mistake worth stopping on.
    warn_unused_env("show", &a.source.env_overrides()?, style);
    let progress = Progress::start("topo show: reading the topology");
    let mut spec = a.source.spec()?;
    spec.escape_text = a.format == DataFormat::Text;
    let topo = topo_source::load(&spec)?;
    let style = if a.output.is_some() {
        Style::default()
    } else {
        style
    };
    let text = crate::report::show::render(&topo, a.view, a.format, style)?;
    let text = match a.format {
        DataFormat::Text => escape_document(&text, style.color),
        _ => text.as_str().into(),
    };
    drop(progress);
    emit(a.output.as_ref(), &text)
}
