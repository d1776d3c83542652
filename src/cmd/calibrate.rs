//! `topo calibrate`: fits this host's latency and bandwidths (alpha; beta in cache and from
//! memory, with the knee between) for in-process copies, single-copy shared memory (copy and
//! reduce kernels), shared-memory FIFOs and TCP loopback, and caches the fit per host so
//! `topo verify` can predict without measuring again.

use crate::cli::{CalibrateArgs, CalibrateFormat};
use crate::error;
use crate::output::{emit, warn};
use crate::util::{Style, parse_size};
use anyhow::Result;
use std::fmt::Write as _;
use std::path::{Path, PathBuf};
use topo_runtime::calibrate::{
    CalibrateRequest, HostModel, HostModelExt, LinkMode, SCHEMA, calibrate,
};
use topo_runtime::launch::ProcessSpec;

pub fn run(a: &CalibrateArgs, style: Style) -> Result<()> {
    let max = parse_size(&a.max_bytes)
        .map_err(|e| error::usage(format!("-e: {e}"), "a size like nccl-tests' -e: 64M"))?;
    let max = usize::try_from(max)
        .ok()
        .filter(|&m| m <= topo_runtime::verify::MAX_BUFFER_BYTES)
        .ok_or_else(|| {
            let cap = crate::util::human_size(topo_runtime::verify::MAX_BUFFER_BYTES as u64);
            error::usage(
                format!("-e {}: more than {cap} per buffer", a.max_bytes),
                format!("pass -e {cap} or less"),
            )
        })?;
    let model = measure(max, a.iters.max(1), a.repeats.max(1))?;
    save(&model, style);
    let text = match a.format {
        CalibrateFormat::Json => topo_report::doc::json(&model)?,
        CalibrateFormat::Text => render(&model, style.width),
    };
    emit(None, &text)
}

/// The cached model of this host, or a fresh measurement (saved for next time).
pub fn cached_or_measure(style: Style) -> Result<HostModel> {
    match cache_path().as_deref().map(load) {
        Some(Ok(Some(m))) => return Ok(m),
        Some(Err(why)) => warn(style, &why),
        _ => {}
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
    let host: String = crate::util::host_name()
        .chars()
        .filter(|c| c.is_ascii_alphanumeric() || matches!(c, '-' | '.' | '_'))
        .take(64)
        .collect();
    Some(base.join("topo").join(format!("calibration-{host}.json")))
}

/// The calibration cache is the user's, but anything may sit at its path: it is opened
/// without following a link and without blocking (a FIFO would hang the open or the read),
/// its type checked on the open descriptor, its size capped, and its figures checked.
const CACHE_CAP: topo_source::read::Cap = topo_source::read::Cap {
    bytes: 1 << 20,
    what: "a calibration cache",
};

/// The cached model at `path`: `Ok(None)` when there is none (or of another schema: an
/// older topo's), `Err` with a warning line when one is there but unusable.
fn load(path: &Path) -> std::result::Result<Option<HostModel>, String> {
    use topo_source::read::{ReadError, file_nofollow};
    let refused = |why: String| {
        format!(
            "ignoring the calibration cache {}: {why}; measuring again",
            path.display()
        )
    };
    let bytes = match file_nofollow(path, CACHE_CAP) {
        Ok(b) => b,
        Err(e) if e.is_not_found() => return Ok(None),
        Err(ReadError::TooManyLinks) => return Err(refused("a symbolic link".into())),
        Err(e) => return Err(refused(e.to_string())),
    };
    let v: serde_json::Value =
        serde_json::from_slice(&bytes).map_err(|e| refused(format!("not a calibration: {e}")))?;
    // An older topo's cache (another schema, other fields) is replaced without a word.
    if v.get("schema").and_then(|s| s.as_str()) != Some(SCHEMA) {
        return Ok(None);
    }
    let m: HostModel =
        serde_json::from_value(v).map_err(|e| refused(format!("not a calibration: {e}")))?;
    m.check().map_err(refused)?;
    Ok(Some(m))
}

/// Saving is a convenience: a read-only home only costs a measurement next time.
fn save(m: &HostModel, style: Style) {
    let Some(path) = cache_path() else { return };
    let Ok(text) = serde_json::to_string_pretty(m) else {
        return;
    };
    // Only a regular file is replaced: the atomic writer appends to a FIFO or device (an
    // `-o /dev/stdout` is one), which would block or write where the cache is not.
    if let Ok(md) = std::fs::symlink_metadata(&path)
        && !md.file_type().is_file()
    {
        warn(
            style,
            &format!(
                "not caching the calibration in {}: it is {}, not a regular file; remove it",
                path.display(),
                kind_name(md.file_type())
            ),
        );
        return;
    }
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

fn kind_name(t: std::fs::FileType) -> &'static str {
    use std::os::unix::fs::FileTypeExt;
    if t.is_symlink() {
        "a symbolic link"
    } else if t.is_dir() {
        "a folder"
    } else if t.is_fifo() {
        "a fifo"
    } else if t.is_socket() {
        "a socket"
    } else {
        "a device"
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
    for line in topo_report::fit::wrap_prefixed("# ", "#   ", &note, width) {
        let _ = writeln!(out, "{line}");
    }
    for line in topo_report::fit::wrap_prefixed("# ", "#   ", &placement_note(m), width) {
        let _ = writeln!(out, "{line}");
    }
    if let Some(p) = cache_path() {
        let _ = writeln!(out, "# cached in {}", p.display());
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn cache_json(alpha_us: &str, beta_gbps: &str) -> String {
        format!(
            r#"{{"schema":"{SCHEMA}","cpus":2,"cache_bytes":null,"measured_at":0,"links":[
            {{"link":"copy","mode":"any","alpha_us":{alpha_us},"beta_gbps":{beta_gbps},
              "beta_mem_gbps":23.8,"knee_bytes":2e7,"moved_per_byte":2.0,
              "footprint_per_byte":2.0,"points":[[8,0.02]],"max_rel_err_1mb":0.2}}]}}"#
        )
    }

    #[test]
    fn a_sound_cache_loads_and_a_missing_one_is_none() {
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("c.json");
        assert_eq!(load(&p), Ok(None));
        std::fs::write(&p, cache_json("0.02", "94.1")).unwrap();
        assert!(load(&p).unwrap().is_some());
        std::fs::write(&p, r#"{"schema":"topo.calibrate/v2"}"#).unwrap();
        assert_eq!(
            load(&p),
            Ok(None),
            "an older topo's cache is measured again"
        );
    }

    #[test]
    fn absurd_or_damaged_caches_are_ignored_with_their_path() {
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("c.json");
        for (text, why) in [
            (cache_json("-1000699", "94.1"), "alpha_us"),
            (cache_json("0.02", "5.7e294"), "beta_gbps"),
            (cache_json("0.02", "0"), "beta_gbps"),
            ("{not json".to_string(), "not a calibration"),
            ("x".repeat((1 << 20) + 1), "larger than"),
        ] {
            std::fs::write(&p, &text).unwrap();
            let e = load(&p).unwrap_err();
            assert!(
                e.contains(&p.display().to_string()) && e.contains(why),
                "{e}"
            );
        }
    }

    #[test]
    fn a_fifo_or_link_at_the_cache_path_is_refused_without_blocking() {
        let dir = tempfile::tempdir().unwrap();
        let fifo = dir.path().join("fifo.json");
        let made = std::process::Command::new("mkfifo").arg(&fifo).status();
        assert!(made.unwrap().success());
        // Opening a FIFO without O_NONBLOCK blocks until a writer comes: this would hang.
        let e = load(&fifo).unwrap_err();
        assert!(e.contains("fifo"), "{e}");
        let good = dir.path().join("good.json");
        std::fs::write(&good, cache_json("0.02", "94.1")).unwrap();
        let link = dir.path().join("link.json");
        std::os::unix::fs::symlink(&good, &link).unwrap();
        let e = load(&link).unwrap_err();
        assert!(e.contains("symbolic link"), "{e}");
        let e = load(Path::new("/dev/null")).unwrap_err();
        assert!(e.contains("device"), "{e}");
    }
}
