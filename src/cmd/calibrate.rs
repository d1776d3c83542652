//! `topo calibrate`: fits this host's latency and bandwidths (alpha; beta in cache and from
//! memory, with the knee between) for in-process copies, single-copy shared memory (copy and
//! reduce kernels), shared-memory FIFOs and TCP loopback, and caches the fit per host so
//! `topo verify` can predict without measuring again.

use crate::cli::{CalibrateArgs, VerifyFormat};
use crate::error;
use crate::output::{emit, warn};
use crate::util::{Style, parse_size};
use anyhow::Result;
use std::fmt::Write as _;
use std::path::PathBuf;
use topo_runtime::calibrate::{CalibrateRequest, HostModel, LinkMode, SCHEMA, calibrate};
use topo_runtime::launch::ProcessSpec;

pub fn run(a: &CalibrateArgs, style: Style) -> Result<()> {
    let max = parse_size(&a.max_bytes)
        .map_err(|e| error::usage(format!("-e: {e}"), "a size like nccl-tests' -e: 64M"))?;
    let model = measure(max as usize, a.iters.max(1), a.repeats.max(1))?;
    save(&model, style);
    let text = match a.format {
        VerifyFormat::Json => crate::report::doc::json(&model)?,
        VerifyFormat::Text => render(&model, style.width),
    };
    emit(None, &text)
}

/// The cached model of this host, or a fresh measurement (saved for next time).
pub fn cached_or_measure(style: Style) -> Result<HostModel> {
    if let Some(m) = load() {
        return Ok(m);
    }
    warn(
        style,
        "calibrating this host once for predictions (topo calibrate; cached per host)",
    );
    let d = CalibrateRequest::default();
    let m = measure(d.max_bytes, d.iters, d.repeats)?;
    save(&m, style);
    Ok(m)
}

fn measure(max_bytes: usize, iters: usize, repeats: usize) -> Result<HostModel> {
    Ok(calibrate(&CalibrateRequest {
        max_bytes,
        iters,
        repeats,
        processes: Some(worker_spec()?),
        tcp: true,
    })?)
}

/// How a rank process is started: this executable's hidden `worker` subcommand.
pub(crate) fn worker_spec() -> Result<ProcessSpec> {
    let program = std::env::current_exe()
        .map_err(|e| anyhow::anyhow!("cannot find topo's own executable: {e}"))?;
    Ok(ProcessSpec {
        program,
        args: vec!["worker".into()],
        envs: vec![],
    })
}

/// `$XDG_CACHE_HOME/topo/calibration-<host>.json`, else under `~/.cache`.
fn cache_path() -> Option<PathBuf> {
    let base = std::env::var_os("XDG_CACHE_HOME")
        .filter(|v| !v.is_empty())
        .map(PathBuf::from)
        .or_else(|| std::env::var_os("HOME").map(|h| PathBuf::from(h).join(".cache")))?;
    let host = std::fs::read_to_string("/proc/sys/kernel/hostname")
        .map(|h| h.trim().to_string())
        .unwrap_or_default();
    let host: String = host
        .chars()
        .filter(|c| c.is_ascii_alphanumeric() || matches!(c, '-' | '.' | '_'))
        .take(64)
        .collect();
    Some(base.join("topo").join(format!("calibration-{host}.json")))
}

/// A cached model that reads back whole; anything else is measured again.
fn load() -> Option<HostModel> {
    let path = cache_path()?;
    let cap = topo_source::read::Cap {
        bytes: 1 << 20,
        what: "a calibration cache",
    };
    let bytes = topo_source::read::file(&path, cap).ok()?;
    let m: HostModel = serde_json::from_slice(&bytes).ok()?;
    (m.schema == SCHEMA).then_some(m)
}

/// Saving is a convenience: a read-only home only costs a measurement next time.
fn save(m: &HostModel, style: Style) {
    let Some(path) = cache_path() else { return };
    let Ok(text) = serde_json::to_string_pretty(m) else {
        return;
    };
    let written = path
        .parent()
        .map(std::fs::create_dir_all)
        .transpose()
        .and_then(|_| {
            topo_source::atomic::write_file(&path, |w| {
                std::io::Write::write_all(w, text.as_bytes())
            })
        });
    if let Err(e) = written {
        warn(
            style,
            &format!(
                "cannot cache the calibration in {}: {}",
                path.display(),
                error::io_reason(&e)
            ),
        );
    }
}

/// A value's serde name (`shm-direct`, `threads`).
fn name(v: impl serde::Serialize) -> String {
    serde_json::to_value(v)
        .ok()
        .and_then(|v| v.as_str().map(str::to_string))
        .unwrap_or_default()
}

/// Which placements of the two ranks' CPUs calibration saw enough of for fits of their own.
fn placement_note(m: &HostModel) -> String {
    let mut per_mode = Vec::new();
    for mode in [LinkMode::Threads, LinkMode::Processes] {
        if !m.links.iter().any(|l| l.mode == mode) {
            continue;
        }
        let seen: std::collections::BTreeSet<&str> = m
            .links
            .iter()
            .filter(|l| l.mode == mode)
            .filter_map(|l| l.placement.map(|p| p.name()))
            .collect();
        let seen: Vec<&str> = seen.into_iter().collect();
        per_mode.push(format!(
            "{} {}",
            name(mode),
            if seen.is_empty() {
                "none".to_string()
            } else {
                seen.join(" and ")
            }
        ));
    }
    format!(
        "near, far: fits of the points measured with the ranks' CPUs sharing a cache (near) or not (far), under the fit of every point; placements fitted: {}; verify prices a size by the fit of the placement it probes, else by the fit of every point",
        per_mode.join(", ")
    )
}

/// The fitted links as a table of 80 columns (names over units, as nccl-tests heads its
/// columns), the footnotes wrapped under `#` to `width`.
fn render(m: &HostModel, width: usize) -> String {
    let mut out = String::new();
    let _ = writeln!(
        out,
        "#{:<18} {:<9} {:>8}  {:>10}  {:>9}  {:>6}  {:>9}",
        "", "", "alpha", "beta cache", "beta mem", "knee", "worst err"
    );
    let _ = writeln!(
        out,
        "#{:<18} {:<9} {:>8}  {:>10}  {:>9}  {:>6}  {:>9}",
        " link", "mode", "(us)", "(GB/s)", "(GB/s)", "(MiB)", ">= 1 MiB"
    );
    for l in &m.links {
        // A placement's own fit sits under the pooled fit of its link, named by placement.
        let link = match l.placement {
            Some(p) => format!("  {}", p.name()),
            None => name(l.link),
        };
        let _ = writeln!(
            out,
            "  {:<17} {:<9} {:>8.2}  {:>10.2}  {:>9.2}  {:>6.1}  {:>8.1}%",
            link,
            name(l.mode),
            l.alpha_us,
            l.beta_gbps,
            l.beta_mem_gbps,
            l.knee_bytes / (1 << 20) as f64,
            l.max_rel_err_1mb * 100.0
        );
    }
    let note = format!(
        "GB/s of bytes one worker reads plus writes; knee: footprint of all ranks' buffers (sysfs last-level cache: {}); {} CPUs",
        m.cache_bytes.map_or("unknown".to_string(), |c| format!(
            "{:.1} MiB",
            c / (1 << 20) as f64
        )),
        m.cpus
    );
    for line in crate::report::fit::wrap_prefixed("# ", "#   ", &note, width) {
        let _ = writeln!(out, "{line}");
    }
    for line in crate::report::fit::wrap_prefixed("# ", "#   ", &placement_note(m), width) {
        let _ = writeln!(out, "{line}");
    }
    if let Some(p) = cache_path() {
        let _ = writeln!(out, "# cached in {}", p.display());
    }
    out
}
