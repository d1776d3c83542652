//! The CUDA kernels: sources embedded from `kernels/*.cu`, their entry-point names, and the
//! on-disk cache of compiled images keyed by (architecture, driver, NVRTC, source hash).
use std::path::{Path, PathBuf};

use crate::types::{DataType, Reduction};

use super::nvrtc::Nvrtc;

/// Every kernel source, with the name NVRTC reports in its diagnostics.
pub const SOURCES: &[(&str, &str)] = &[(
    "collective.cu",
    include_str!("../../../../kernels/collective.cu"),
)];

/// Options for every compilation: no headers are needed (the sources declare their own
/// types), C++17, and line info so compute-sanitizer can name lines.
pub const OPTIONS: &[&str] = &["--std=c++17", "-lineinfo"];

/// Threads per CTA (`TOPO_THREADS` in the source).
pub const THREADS: u32 = 512;

/// Warp groups per channel CTA (`TOPO_GROUPS`): the pieces of a connection in flight at once
/// (at most `pack::SLOTS`).
pub const GROUPS: u32 = 4;

/// CTAs of a primitive one SM must hold at once (`TOPO_MIN_CTAS`, the launch bounds): ranks
/// that share a GPU spin-wait on each other, so every rank's CTAs must be resident together.
pub const MIN_CTAS: u32 = 2;

/// Stack frame allowed to AVG's primitives: the IEEE division of its finishing step (and
/// f64's, i64's) is a subroutine, and the call keeps one live register in an 8-byte frame
/// outside the copy loop (one STL at entry, one LDL per step: sm_80 and sm_90, NVRTC 12.9).
pub const AVG_FRAME: u32 = 8;

/// What cuobjdump must find in each hot kernel's image (`sass::check`): the primitives keep
/// everything in registers (AVG's within `AVG_FRAME`), copy in 128-bit accesses (Simple) and
/// fit `MIN_CTAS` CTAs per SM; the copy kernel of the copy ceiling keeps the first two. The
/// check kernel runs once per size and is not held to them.
pub fn hot_rules(kernel: &str) -> Option<super::sass::Rules> {
    use super::sass::Rules;
    if kernel.starts_with("topo_prim_") {
        let frame = if kernel.starts_with("topo_prim_avg_") {
            AVG_FRAME
        } else {
            0
        };
        Some(Rules {
            max_stack: Some(frame),
            vector_128: true,
            resident: Some((THREADS, MIN_CTAS)),
        })
    } else if kernel == "topo_copy" {
        Some(Rules {
            max_stack: Some(0),
            vector_128: true,
            resident: None,
        })
    } else {
        None
    }
}

/// The kernel name's part for a type.
pub fn type_tag(dt: DataType) -> &'static str {
    match dt {
        DataType::F32 => "f32",
        DataType::F16 => "f16",
        DataType::Bf16 => "bf16",
        DataType::F64 => "f64",
        DataType::I32 => "i32",
        DataType::I64 => "i64",
        DataType::U8 => "u8",
    }
}

/// The kernel name's part for an operator.
pub fn op_tag(op: Reduction) -> &'static str {
    match op {
        Reduction::Sum => "sum",
        Reduction::Prod => "prod",
        Reduction::Min => "min",
        Reduction::Max => "max",
        Reduction::Avg => "avg",
    }
}

/// The primitive kernel for `op` over `dt` (copy-only collectives use `sum`: with no input
/// and a received value, or the reverse, the operator is never applied).
pub fn prim_kernel(op: Reduction, dt: DataType) -> String {
    format!("topo_prim_{}_{}", op_tag(op), type_tag(dt))
}

/// The defines that make the source instantiate only `op` over `dt` (plus the copy and the
/// check kernels).
pub fn one_kernel_defines(op: Reduction, dt: DataType) -> Vec<String> {
    let op_struct = match op {
        Reduction::Sum => "OpSum",
        Reduction::Prod => "OpProd",
        Reduction::Min => "OpMin",
        Reduction::Max => "OpMax",
        Reduction::Avg => "OpAvg",
    };
    let ty_struct = match dt {
        DataType::F32 => "TF32",
        DataType::F16 => "TF16",
        DataType::Bf16 => "TBF16",
        DataType::F64 => "TF64",
        DataType::I32 => "TI32",
        DataType::I64 => "TI64",
        DataType::U8 => "TU8",
    };
    vec![
        "-DTOPO_ONE_KERNEL".into(),
        format!("-DTOPO_OPN={}", op_tag(op)),
        format!("-DTOPO_OP={op_struct}"),
        format!("-DTOPO_TN={}", type_tag(dt)),
        format!("-DTOPO_T={ty_struct}"),
    ]
}

/// Every entry point the sources define: 35 primitives, the copy and the check.
pub fn all_kernels() -> Vec<String> {
    let mut v = Vec::new();
    for op in [
        Reduction::Sum,
        Reduction::Prod,
        Reduction::Min,
        Reduction::Max,
        Reduction::Avg,
    ] {
        for dt in DataType::ALL {
            v.push(prim_kernel(op, dt));
        }
    }
    v.push("topo_copy".into());
    v.push("topo_count_wrong".into());
    v
}

/// FNV-1a over the sources and options: changes when either does.
pub fn source_hash() -> u64 {
    let mut h: u64 = 0xcbf2_9ce4_8422_2325;
    for (name, src) in SOURCES {
        for b in name.bytes().chain(src.bytes()).chain([0u8]) {
            h = (h ^ b as u64).wrapping_mul(0x0100_0000_01b3);
        }
    }
    for o in OPTIONS {
        for b in o.bytes().chain([0u8]) {
            h = (h ^ b as u64).wrapping_mul(0x0100_0000_01b3);
        }
    }
    h
}

/// What a cached image depends on.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct CacheKey {
    /// `sm_XY` as XY.
    pub arch: i32,
    /// `cuDriverGetVersion` (12080 for 12.8).
    pub driver: i32,
    /// NVRTC (major, minor): a newer NVRTC may emit a different image.
    pub nvrtc: (i32, i32),
    pub source: u64,
    /// The one primitive compiled in.
    pub op: Reduction,
    pub dtype: DataType,
}

impl CacheKey {
    /// The file name of the cached CUBIN.
    pub fn file_name(&self) -> String {
        format!(
            "collective-{}-{}-sm{}-drv{}-nvrtc{}.{}-{:016x}.cubin",
            op_tag(self.op),
            type_tag(self.dtype),
            self.arch,
            self.driver,
            self.nvrtc.0,
            self.nvrtc.1,
            self.source
        )
    }
}

/// `$XDG_CACHE_HOME/topo/kernels`, else `~/.cache/topo/kernels`.
pub fn cache_dir(var: &dyn Fn(&str) -> Option<String>) -> Option<PathBuf> {
    if let Some(x) = var("XDG_CACHE_HOME").filter(|x| x.starts_with('/')) {
        return Some(Path::new(&x).join("topo/kernels"));
    }
    var("HOME")
        .filter(|h| !h.is_empty())
        .map(|h| Path::new(&h).join(".cache/topo/kernels"))
}

/// The largest CUBIN accepted from the cache (the real one is a few MiB).
const MAX_CUBIN: u64 = 256 << 20;

/// A CUBIN for `key`: from the cache when present, else compiled and stored (atomically: a
/// temporary file renamed into place, never following a link at the destination).
pub fn cubin(nvrtc: &Nvrtc, key: &CacheKey, dir: Option<&Path>) -> Result<(Vec<u8>, bool), String> {
    if let Some(d) = dir {
        let p = d.join(key.file_name());
        if let Ok(m) = std::fs::symlink_metadata(&p)
            && m.is_file()
            && m.len() <= MAX_CUBIN
            && let Ok(b) = std::fs::read(&p)
            && b.starts_with(b"\x7fELF")
        {
            return Ok((b, true));
        }
    }
    let arch = format!("sm_{}", key.arch);
    let (name, src) = SOURCES[0];
    let defines = one_kernel_defines(key.op, key.dtype);
    let mut opts: Vec<&str> = OPTIONS.to_vec();
    opts.extend(defines.iter().map(String::as_str));
    let c = nvrtc.compile(src, name, &arch, &opts)?;
    if let Some(d) = dir {
        // Best effort: a read-only home still runs, it only compiles every time.
        let _ = store(d, &key.file_name(), &c.image);
    }
    Ok((c.image, false))
}

fn store(dir: &Path, name: &str, bytes: &[u8]) -> std::io::Result<()> {
    use std::io::Write;
    std::fs::create_dir_all(dir)?;
    let tmp = dir.join(format!(".{name}.{}", std::process::id()));
    let mut f = std::fs::OpenOptions::new()
        .write(true)
        .create_new(true)
        .open(&tmp)?;
    f.write_all(bytes)?;
    f.sync_all()?;
    std::fs::rename(&tmp, dir.join(name))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_entry_point_is_in_the_source() {
        let src = SOURCES[0].1;
        // The primitives come from TOPO_TYPES(op, ..) x TOPO_KERNEL(.., type, ..).
        for op in ["sum", "prod", "min", "max", "avg"] {
            assert!(src.contains(&format!("TOPO_TYPES({op},")), "{op}");
        }
        for t in ["f32", "f16", "bf16", "f64", "i32", "i64", "u8"] {
            assert!(src.contains(&format!("OP, {t}, ")), "{t}");
        }
        assert!(src.contains("topo_copy("));
        assert!(src.contains("topo_count_wrong("));
        assert_eq!(all_kernels().len(), 37);
        assert!(src.contains(&format!("#define TOPO_THREADS {THREADS}\n")));
        assert!(src.contains(&format!("#define TOPO_MIN_CTAS {MIN_CTAS}\n")));
        assert_eq!(
            prim_kernel(Reduction::Avg, DataType::Bf16),
            "topo_prim_avg_bf16"
        );
    }

    #[test]
    fn cache_key_names_everything_it_depends_on() {
        let k = CacheKey {
            arch: 90,
            driver: 13000,
            nvrtc: (13, 0),
            source: 0xabc,
            op: Reduction::Sum,
            dtype: DataType::Bf16,
        };
        assert_eq!(
            k.file_name(),
            "collective-sum-bf16-sm90-drv13000-nvrtc13.0-0000000000000abc.cubin"
        );
        assert_ne!(
            k.file_name(),
            CacheKey {
                op: Reduction::Max,
                ..k
            }
            .file_name()
        );
        let other = CacheKey { arch: 100, ..k };
        assert_ne!(k.file_name(), other.file_name());
        assert_ne!(source_hash(), 0);
    }

    /// The CI check that needs no GPU: every kernel compiles through NVRTC to PTX for the
    /// data-centre architectures (every primitive, copy and check defined), and ptxas
    /// accepts the one-primitive build that a run loads, as CUBIN, on each of them.
    #[test]
    fn kernels_compile_through_nvrtc_for_sm80_sm90_sm100() {
        let nvrtc = match Nvrtc::load() {
            Ok(n) => n,
            Err(e) => {
                eprintln!("skipped: no NVRTC here ({e}); set TOPO_NVRTC to libnvrtc.so.12 or .13");
                return;
            }
        };
        eprintln!(
            "nvrtc {}.{} from {}",
            nvrtc.version.0,
            nvrtc.version.1,
            nvrtc.from.display()
        );
        let supported = nvrtc.supported_archs();
        let (name, src) = SOURCES[0];
        for arch in [80, 90, 100] {
            if !supported.is_empty() && !supported.contains(&arch) {
                eprintln!("skipped sm_{arch}: this NVRTC compiles for {supported:?}");
                continue;
            }
            let t = std::time::Instant::now();
            let ptx = nvrtc
                .compile(src, name, &format!("compute_{arch}"), OPTIONS)
                .unwrap_or_else(|e| panic!("compute_{arch}: {e}"));
            let text = String::from_utf8_lossy(&ptx.image);
            assert!(text.contains(&format!(".target sm_{arch}")));
            for k in all_kernels() {
                assert!(
                    text.contains(&format!(".entry {k}(")),
                    "{k} missing for compute_{arch}"
                );
            }
            let ptx_s = t.elapsed().as_secs_f64();
            let t = std::time::Instant::now();
            let key = CacheKey {
                arch,
                driver: 0,
                nvrtc: nvrtc.version,
                source: source_hash(),
                op: Reduction::Avg,
                dtype: DataType::Bf16,
            };
            let (cubin, _) = cubin(&nvrtc, &key, None).unwrap_or_else(|e| panic!("sm_{arch}: {e}"));
            assert!(cubin.starts_with(b"\x7fELF"), "sm_{arch}: not a CUBIN");
            // The name the runtime asks cuModuleGetFunction for must be in the image.
            let entry = prim_kernel(Reduction::Avg, DataType::Bf16);
            assert!(
                cubin
                    .windows(entry.len() + 1)
                    .any(|w| w[..entry.len()] == *entry.as_bytes() && w[entry.len()] == 0),
                "sm_{arch}: the CUBIN has no entry point {entry}"
            );
            eprintln!(
                "sm_{arch}: PTX of all {} kernels in {ptx_s:.1} s; CUBIN of avg/bf16 ({} bytes) in {:.1} s",
                all_kernels().len(),
                cubin.len(),
                t.elapsed().as_secs_f64()
            );
        }
    }

    /// A kernel that must fail the local-memory rule: a large array indexed by a value the
    /// compiler cannot know lives in local memory whatever the register budget.
    const SPILLED: &str = r#"
extern "C" __global__ void __launch_bounds__(512, 2) topo_prim_spilled(float* out, const int* idx) {
    float a[256];
    for (int i = 0; i < 256; i++) a[i] = out[i * blockDim.x + threadIdx.x];
    out[threadIdx.x] = a[idx[threadIdx.x] & 255];
}
"#;

    /// The cuobjdump checks of issue 47 (no GPU needed): every hot kernel (35 primitives and
    /// the copy) compiled by NVRTC for sm_80/90/100 keeps `hot_rules`; a deliberately
    /// spilled kernel compiled through the same NVRTC fails them, named.
    #[test]
    fn kernels_pass_the_cuobjdump_checks() {
        use super::super::sass::{self, Cuobjdump};
        let nvrtc = match Nvrtc::load() {
            Ok(n) => n,
            Err(e) => {
                eprintln!("skipped: no NVRTC here ({e}); set TOPO_NVRTC to libnvrtc.so.12 or .13");
                return;
            }
        };
        let dump = match Cuobjdump::find(&|k| std::env::var(k).ok()) {
            Ok(d) => d,
            Err(e) => {
                eprintln!(
                    "skipped: {e} (set TOPO_CUOBJDUMP to the cuobjdump of NVIDIA's wheel nvidia-cuda-cuobjdump, with nvdisasm beside it)"
                );
                return;
            }
        };
        eprintln!("cuobjdump {}", dump.path.display());
        let dir = std::env::temp_dir().join(format!("topo-sass-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let listings = |image: &[u8], tag: &str| {
            let f = dir.join(format!("{tag}.cubin"));
            std::fs::write(&f, image).unwrap();
            let u = dump.run("-res-usage", &f).unwrap_or_else(|e| panic!("{e}"));
            let s = dump.run("-sass", &f).unwrap_or_else(|e| panic!("{e}"));
            (sass::parse_res_usage(&u), sass::parse_sass(&s))
        };
        let supported = nvrtc.supported_archs();
        let mut failures = Vec::new();
        for arch in [80u32, 90, 100] {
            if !supported.is_empty() && !supported.contains(&(arch as i32)) {
                eprintln!("skipped sm_{arch}: this NVRTC compiles for {supported:?}");
                continue;
            }
            // Every primitive at once: the image of the whole source holds the same code as
            // the one-primitive images a run loads (each entry point is compiled alone).
            let t = std::time::Instant::now();
            let (name, src) = SOURCES[0];
            let c = nvrtc
                .compile(src, name, &format!("sm_{arch}"), OPTIONS)
                .unwrap_or_else(|e| panic!("sm_{arch}: {e}"));
            let (usage, code) = listings(&c.image, &format!("all-sm{arch}"));
            let mut worst = (0, String::new());
            for k in all_kernels() {
                let Some(rules) = hot_rules(&k) else { continue };
                let bad = sass::check(arch, &k, &usage, &code, rules);
                if let Some(u) = usage.get(&k)
                    && u.reg > worst.0
                {
                    worst = (u.reg, k.clone());
                }
                failures.extend(bad);
            }
            eprintln!(
                "sm_{arch}: {} kernels checked in {:.1} s; most registers: {} ({})",
                all_kernels().len() - 1,
                t.elapsed().as_secs_f64(),
                worst.0,
                worst.1
            );
            // The same path must catch a spill.
            let c = nvrtc
                .compile(SPILLED, "spilled.cu", &format!("sm_{arch}"), OPTIONS)
                .unwrap_or_else(|e| panic!("{e}"));
            let (usage, code) = listings(&c.image, &format!("spilled-sm{arch}"));
            let k = "topo_prim_spilled";
            let bad = sass::check(arch, k, &usage, &code, hot_rules(k).unwrap());
            assert!(
                bad.iter()
                    .any(|b| b.starts_with(&format!("{k} on sm_{arch}: uses local memory"))),
                "the spilled kernel passed on sm_{arch}: {bad:?}"
            );
            eprintln!(
                "the spilled kernel fails on sm_{arch} as it must: {}",
                bad[0]
            );
        }
        let _ = std::fs::remove_dir_all(&dir);
        assert!(
            failures.is_empty(),
            "cuobjdump checks failed:\n{}",
            failures.join("\n")
        );
    }

    #[test]
    fn the_cache_stores_and_finds_a_cubin() {
        let Ok(nvrtc) = Nvrtc::load() else {
            eprintln!("skipped: no NVRTC here");
            return;
        };
        let dir = std::env::temp_dir().join(format!("topo-kcache-{}", std::process::id()));
        let key = CacheKey {
            arch: 90,
            driver: 0,
            nvrtc: nvrtc.version,
            source: source_hash(),
            op: Reduction::Sum,
            dtype: DataType::U8,
        };
        let (a, cached) = cubin(&nvrtc, &key, Some(&dir)).unwrap();
        assert!(!cached);
        let (b, cached) = cubin(&nvrtc, &key, Some(&dir)).unwrap();
        assert!(cached);
        assert_eq!(a, b);
        let _ = std::fs::remove_dir_all(&dir);
    }

    #[test]
    fn cache_dir_follows_xdg_then_home() {
        let v = |k: &str| match k {
            "XDG_CACHE_HOME" => Some("/x/cache".to_string()),
            "HOME" => Some("/home/u".to_string()),
            _ => None,
        };
        assert_eq!(cache_dir(&v), Some(PathBuf::from("/x/cache/topo/kernels")));
        let h = |k: &str| (k == "HOME").then(|| "/home/u".to_string());
        assert_eq!(
            cache_dir(&h),
            Some(PathBuf::from("/home/u/.cache/topo/kernels"))
        );
        assert_eq!(cache_dir(&|_| None), None);
    }
}
