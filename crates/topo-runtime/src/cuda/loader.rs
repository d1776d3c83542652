//! Finding the CUDA libraries at run time, before any cudarc call.
//!
//! cudarc's `dynamic-loading` panics when a library cannot be opened (see
//! `shared/reference/crates.md` §10), so every library is opened here first, by name or path,
//! and a missing one becomes one error line naming what was missing. NVRTC is looked for where
//! users have it: `TOPO_NVRTC`, the CUDA toolkit (`CUDA_HOME`, `CUDA_PATH`, /usr/local/cuda),
//! the Python wheels (`nvidia-cuda-nvrtc-cu12` puts `nvidia/cuda_nvrtc/lib/libnvrtc.so.12`
//! under site-packages, CUDA 13's `nvidia-cuda-nvrtc` `nvidia/cu13/lib/libnvrtc.so.13`), then
//! the loader's own path. NCCL the same way (`TOPO_NCCL`, wheels `nvidia-nccl-cu12/cu13`:
//! `nvidia/nccl/lib/libnccl.so.2`), because cudarc never tries the `libnccl.so.2` SONAME.
use std::path::{Path, PathBuf};

/// The driver library every CUDA program loads (its SONAME; the unversioned name is only in
/// the development package).
pub const LIBCUDA: &str = "libcuda.so.1";

/// Which library, for messages and for the candidate lists.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Lib {
    Nvrtc,
    Nccl,
}

impl Lib {
    fn env(self) -> &'static str {
        match self {
            Lib::Nvrtc => "TOPO_NVRTC",
            Lib::Nccl => "TOPO_NCCL",
        }
    }

    /// File names in the order tried: newest CUDA first, unversioned last.
    fn names(self) -> &'static [&'static str] {
        match self {
            Lib::Nvrtc => &["libnvrtc.so.13", "libnvrtc.so.12", "libnvrtc.so"],
            Lib::Nccl => &["libnccl.so.2", "libnccl.so"],
        }
    }

    /// Directories below a site-packages directory where NVIDIA's wheels put the library.
    fn wheel_dirs(self) -> &'static [&'static str] {
        match self {
            Lib::Nvrtc => &["nvidia/cu13/lib", "nvidia/cuda_nvrtc/lib"],
            Lib::Nccl => &["nvidia/nccl/lib", "nvidia/cu13/lib"],
        }
    }
}

/// What the search may look at: environment variables and the file system (a test passes a
/// fake of both).
pub struct Search<'a> {
    pub var: &'a dyn Fn(&str) -> Option<String>,
    pub exists: &'a dyn Fn(&Path) -> bool,
    /// site-packages directories to look in (from `sys.path` conventions: see [`site_dirs`]).
    pub site: Vec<PathBuf>,
}

/// Where to try to load `lib` from, in order: explicit paths first, bare names (resolved by
/// the dynamic loader through `LD_LIBRARY_PATH` and ld.so.cache) last.
pub fn candidates(lib: Lib, s: &Search) -> Vec<PathBuf> {
    let mut out = Vec::new();
    if let Some(p) = (s.var)(lib.env()).filter(|p| !p.is_empty()) {
        // Named by the user: the only candidate, so a wrong path is an error, not a fallback.
        return vec![PathBuf::from(p)];
    }
    let mut dirs: Vec<PathBuf> = Vec::new();
    if lib == Lib::Nvrtc {
        for v in ["CUDA_HOME", "CUDA_PATH", "CUDA_ROOT"] {
            if let Some(d) = (s.var)(v).filter(|d| !d.is_empty()) {
                dirs.push(Path::new(&d).join("lib64"));
                dirs.push(Path::new(&d).join("lib"));
            }
        }
        dirs.push(PathBuf::from("/usr/local/cuda/lib64"));
    }
    for site in &s.site {
        for w in lib.wheel_dirs() {
            dirs.push(site.join(w));
        }
    }
    for d in &dirs {
        for n in lib.names() {
            let p = d.join(n);
            if (s.exists)(&p) && !out.contains(&p) {
                out.push(p);
            }
        }
    }
    out.extend(lib.names().iter().map(PathBuf::from));
    out
}

/// site-packages directories of the Python environments a user is likely to have: an active
/// virtualenv or conda env, the user's site, and the system's, for python3.8..3.14.
pub fn site_dirs(var: &dyn Fn(&str) -> Option<String>) -> Vec<PathBuf> {
    let mut roots: Vec<PathBuf> = Vec::new();
    for v in ["VIRTUAL_ENV", "CONDA_PREFIX"] {
        if let Some(r) = var(v).filter(|r| !r.is_empty()) {
            roots.push(PathBuf::from(r).join("lib"));
        }
    }
    if let Some(h) = var("HOME") {
        roots.push(Path::new(&h).join(".local/lib"));
    }
    roots.extend(["/usr/local/lib", "/usr/lib", "/opt/conda/lib"].map(PathBuf::from));
    // Debian's and Ubuntu's system Python: one unversioned dist-packages.
    let mut out = vec![PathBuf::from("/usr/lib/python3/dist-packages")];
    for r in roots {
        for minor in (8..=14).rev() {
            for leaf in ["site-packages", "dist-packages"] {
                out.push(r.join(format!("python3.{minor}")).join(leaf));
            }
        }
    }
    if let Some(p) = var("PYTHONPATH") {
        out.extend(p.split(':').filter(|s| !s.is_empty()).map(PathBuf::from));
    }
    out
}

/// The default search: this process's environment and file system.
pub fn search_here(lib: Lib) -> Vec<PathBuf> {
    let var = |k: &str| std::env::var(k).ok();
    let exists = |p: &Path| p.is_file();
    let s = Search {
        var: &var,
        exists: &exists,
        site: site_dirs(&var),
    };
    candidates(lib, &s)
}

/// A library that loaded, and from where (said in reports: "nvrtc: /…/libnvrtc.so.13").
pub struct Loaded {
    pub lib: libloading::Library,
    pub from: PathBuf,
}

/// Open the first candidate that loads; the error names what was tried.
pub fn open(lib: Lib) -> Result<Loaded, String> {
    let cands = search_here(lib);
    let mut last = String::new();
    for c in &cands {
        // SAFETY: opening a shared library runs its initialisers; the NVIDIA libraries'
        // initialisers do not touch our state. No symbol is called here.
        match unsafe { libloading::Library::new(c) } {
            Ok(l) => {
                return Ok(Loaded {
                    lib: l,
                    from: c.clone(),
                });
            }
            Err(e) => last = e.to_string(),
        }
    }
    let name = lib.names()[0];
    let tried: Vec<String> = cands.iter().map(|c| c.display().to_string()).collect();
    Err(if (std::env::var(lib.env())).is_ok_and(|v| !v.is_empty()) {
        format!(
            "{} names {}, which does not load ({last})",
            lib.env(),
            tried.join(", ")
        )
    } else {
        format!("{name} not found (tried {})", tried.join(", "))
    })
}

/// Whether the driver library loads (the probe cudarc needs before any driver call).
pub fn probe_driver() -> Result<(), String> {
    // SAFETY: as in `open`; nothing is called.
    match unsafe { libloading::Library::new(LIBCUDA) } {
        Ok(_) => Ok(()),
        Err(_) => Err(format!("{LIBCUDA} not found")),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn search(vars: &[(&str, &str)], files: &[&str]) -> Vec<PathBuf> {
        let vars: Vec<(String, String)> = vars
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect();
        let var = |k: &str| vars.iter().find(|(n, _)| n == k).map(|(_, v)| v.clone());
        let files: Vec<PathBuf> = files.iter().map(PathBuf::from).collect();
        let exists = |p: &Path| files.iter().any(|f| f == p);
        let s = Search {
            var: &var,
            exists: &exists,
            site: site_dirs(&var),
        };
        candidates(Lib::Nvrtc, &s)
    }

    #[test]
    fn topo_nvrtc_is_the_only_candidate() {
        let c = search(&[("TOPO_NVRTC", "/x/libnvrtc.so.13")], &[]);
        assert_eq!(c, vec![PathBuf::from("/x/libnvrtc.so.13")]);
    }

    #[test]
    fn toolkit_before_wheels_before_loader_path() {
        let c = search(
            &[("CUDA_HOME", "/opt/cuda"), ("VIRTUAL_ENV", "/venv")],
            &[
                "/venv/lib/python3.12/site-packages/nvidia/cuda_nvrtc/lib/libnvrtc.so.12",
                "/opt/cuda/lib64/libnvrtc.so.13",
                "/venv/lib/python3.12/site-packages/nvidia/cu13/lib/libnvrtc.so.13",
            ],
        );
        assert_eq!(c[0], PathBuf::from("/opt/cuda/lib64/libnvrtc.so.13"));
        assert_eq!(
            c[1],
            PathBuf::from("/venv/lib/python3.12/site-packages/nvidia/cu13/lib/libnvrtc.so.13")
        );
        assert_eq!(
            c[2],
            PathBuf::from(
                "/venv/lib/python3.12/site-packages/nvidia/cuda_nvrtc/lib/libnvrtc.so.12"
            )
        );
        assert_eq!(c.last().unwrap(), &PathBuf::from("libnvrtc.so"));
    }

    #[test]
    fn nothing_installed_leaves_the_bare_names() {
        let c = search(&[("HOME", "/home/u")], &[]);
        let names: Vec<_> = c.iter().map(|p| p.display().to_string()).collect();
        assert_eq!(names, ["libnvrtc.so.13", "libnvrtc.so.12", "libnvrtc.so"]);
    }
}
