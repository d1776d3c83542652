//! The checks on a compiled kernel image that need no GPU (issue 47 item 3): cuobjdump's
//! `-res-usage` and `-sass` listings of an NVRTC-built CUBIN, read here, and the rules the
//! hot kernels must keep: no local memory (a spill or a dynamically indexed array turns every
//! access into an off-chip round trip), 128-bit global loads and stores where the Simple
//! protocol copies, and few enough registers for `MIN_CTAS` CTAs of `THREADS` threads on one
//! SM (ranks that share a GPU wait on each other inside their kernels, so all their CTAs must
//! be resident at once).
//!
//! The parsing is pure and tested on text; running cuobjdump (`Cuobjdump`) is the only I/O.
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::Command;

/// Registers of one SM on sm_80, sm_90 and sm_100 (the CUDA programming guide's table of
/// compute capabilities: 64 K 32-bit registers per SM for 8.x, 9.0 and 10.0).
pub const REGS_PER_SM: u32 = 65_536;

/// One function's line of `cuobjdump -res-usage`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Usage {
    pub reg: u32,
    /// Bytes of stack frame per thread (local memory the compiler placed arrays or spills in).
    pub stack: u32,
    /// Bytes of declared local memory per thread.
    pub local: u32,
}

/// Every function of a `-res-usage` listing with its usage. Lines it does not know are
/// skipped: the listing's other fields change between CUDA releases.
pub fn parse_res_usage(text: &str) -> BTreeMap<String, Usage> {
    let mut out = BTreeMap::new();
    let mut current: Option<String> = None;
    for line in text.lines().map(str::trim) {
        if let Some(name) = line.strip_prefix("Function ") {
            current = Some(name.trim_end_matches(':').trim().to_string());
            continue;
        }
        let Some(name) = current.take() else { continue };
        let mut u = Usage::default();
        for field in line.split_whitespace() {
            let Some((k, v)) = field.split_once(':') else {
                continue;
            };
            let v = v.parse::<u32>().unwrap_or(0);
            match k {
                "REG" => u.reg = v,
                "STACK" => u.stack = v,
                "LOCAL" => u.local = v,
                _ => {}
            }
        }
        out.insert(name, u);
    }
    out
}

/// Every function of a `-sass` listing with its instructions' opcodes (the mnemonic with its
/// modifiers, `LDG.E.128.STRONG.SYS`; a predicate such as `@P0` dropped).
pub fn parse_sass(text: &str) -> BTreeMap<String, Vec<String>> {
    let mut out: BTreeMap<String, Vec<String>> = BTreeMap::new();
    let mut current: Option<String> = None;
    for line in text.lines().map(str::trim) {
        if let Some(name) = line.strip_prefix("Function : ") {
            let name = name.trim().to_string();
            out.entry(name.clone()).or_default();
            current = Some(name);
            continue;
        }
        let (Some(name), Some(rest)) = (current.as_ref(), line.strip_prefix("/*")) else {
            continue;
        };
        // `/*0460*/  STL [R1+0x30], RZ ;  /* 0x.. */`: the address, then the instruction.
        let Some((_, ins)) = rest.split_once("*/") else {
            continue;
        };
        let mut words = ins.split_whitespace().skip_while(|w| w.starts_with('@'));
        if let Some(op) = words.next().filter(|w| !w.starts_with("/*")) {
            let op = op.trim_end_matches(';');
            if let Some(v) = out.get_mut(name) {
                v.push(op.to_string());
            }
        }
    }
    out
}

/// What a kernel must keep.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Rules {
    /// At most this many bytes of stack frame, no declared local memory, and LDL/STL only
    /// within that frame (`Some(0)`: none at all). `None`: not checked.
    pub max_stack: Option<u32>,
    /// At least one 128-bit global load (`LDG.E.128*`) and store (`STG.E.128*`).
    pub vector_128: bool,
    /// Registers per thread at most `REGS_PER_SM / (threads * ctas)`: `(threads, ctas)`.
    pub resident: Option<(u32, u32)>,
}

/// The broken rules of `kernel` on `arch`, one line each naming both.
pub fn check(
    arch: u32,
    kernel: &str,
    usage: &BTreeMap<String, Usage>,
    sass: &BTreeMap<String, Vec<String>>,
    rules: Rules,
) -> Vec<String> {
    let at = format!("{kernel} on sm_{arch}");
    let (Some(u), Some(ops)) = (usage.get(kernel), sass.get(kernel)) else {
        return vec![format!("{at}: not in cuobjdump's listing")];
    };
    let mut bad = Vec::new();
    if let Some(max) = rules.max_stack {
        let spills = ops
            .iter()
            .filter(|o| o.starts_with("LDL") || o.starts_with("STL"))
            .count();
        if u.stack > max || u.local > 0 || (max == 0 && spills > 0) {
            bad.push(format!(
                "{at}: uses local memory (stack {} B, local {} B, {spills} LDL/STL instructions): a spill or a dynamically indexed array",
                u.stack, u.local
            ));
        }
    }
    if rules.vector_128 {
        for want in ["LDG.E.128", "STG.E.128"] {
            if !ops.iter().any(|o| o.starts_with(want)) {
                bad.push(format!("{at}: no 128-bit global access ({want})"));
            }
        }
    }
    if let Some((threads, ctas)) = rules.resident {
        let budget = REGS_PER_SM / (threads * ctas);
        if u.reg > budget {
            bad.push(format!(
                "{at}: {} registers per thread, over the {budget} that {ctas} CTAs of {threads} threads per SM allow",
                u.reg
            ));
        }
    }
    bad
}

/// A cuobjdump to run: `TOPO_CUOBJDUMP`, else one on PATH. Its own folder goes first on the
/// child's PATH: `-sass` runs nvdisasm, which NVIDIA's wheels install beside it.
pub struct Cuobjdump {
    pub path: PathBuf,
}

impl Cuobjdump {
    pub fn find(var: &dyn Fn(&str) -> Option<String>) -> Result<Cuobjdump, String> {
        if let Some(p) = var("TOPO_CUOBJDUMP").filter(|p| !p.is_empty()) {
            let p = PathBuf::from(p);
            return if p.is_file() {
                Ok(Cuobjdump { path: p })
            } else {
                Err(format!("TOPO_CUOBJDUMP={} is not a file", p.display()))
            };
        }
        var("PATH")
            .unwrap_or_default()
            .split(':')
            .map(|d| Path::new(d).join("cuobjdump"))
            .find(|p| p.is_file())
            .map(|path| Cuobjdump { path })
            .ok_or_else(|| "no cuobjdump on PATH and TOPO_CUOBJDUMP unset".to_string())
    }

    /// `cuobjdump <flag> <cubin>`'s standard output.
    pub fn run(&self, flag: &str, cubin: &Path) -> Result<String, String> {
        let mut cmd = Command::new(&self.path);
        if let Some(dir) = self.path.parent() {
            let old = std::env::var("PATH").unwrap_or_default();
            cmd.env("PATH", format!("{}:{old}", dir.display()));
        }
        let out = cmd
            .arg(flag)
            .arg(cubin)
            .output()
            .map_err(|e| format!("{}: {e}", self.path.display()))?;
        if !out.status.success() {
            return Err(format!(
                "cuobjdump {flag} {}: {}",
                cubin.display(),
                String::from_utf8_lossy(&out.stderr).trim()
            ));
        }
        Ok(String::from_utf8_lossy(&out.stdout).into_owned())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const USAGE: &str = "
Resource usage:
 Common:
  GLOBAL:1 CONSTANT[4]:8
 Function topo_copy:
  REG:14 STACK:0 SHARED:0 LOCAL:0 CONSTANT[0]:552 TEXTURE:0 SURFACE:0 SAMPLER:0
 Function topo_prim_sum_f32:
  REG:64 STACK:64 SHARED:1032 LOCAL:0 CONSTANT[0]:632 TEXTURE:0 SURFACE:0 SAMPLER:0
";

    const SASS: &str = "
	code for sm_90
		Function : topo_copy
	.headerflags	@\"EF_CUDA_SM90\"
        /*0000*/                   LDC R1, c[0x0][0x28] ;     /* 0x00000a00ff017b82 */
                                                              /* 0x000e220000000800 */
        /*0010*/              @!P0 LDG.E.128 R4, desc[UR4][R2.64] ;  /* 0x0 */
        /*0020*/                   STG.E.128 desc[UR4][R6.64], R4 ;  /* 0x0 */
		Function : topo_prim_sum_f32
        /*0460*/                   STL [R1+0x30], RZ ;        /* 0x000030ff01007387 */
        /*0470*/                   LD.E.128.STRONG.SYS R4, [R2.64] ;  /* 0x0 */
";

    #[test]
    fn listings_are_read_per_function() {
        let u = parse_res_usage(USAGE);
        assert_eq!(
            u["topo_prim_sum_f32"],
            Usage {
                reg: 64,
                stack: 64,
                local: 0
            }
        );
        assert_eq!(u["topo_copy"].reg, 14);
        assert!(!u.contains_key("Common:"));
        let s = parse_sass(SASS);
        assert_eq!(s["topo_copy"], ["LDC", "LDG.E.128", "STG.E.128"]);
        assert_eq!(s["topo_prim_sum_f32"], ["STL", "LD.E.128.STRONG.SYS"]);
    }

    #[test]
    fn each_broken_rule_names_the_kernel_and_the_arch() {
        let (u, s) = (parse_res_usage(USAGE), parse_sass(SASS));
        let all = Rules {
            max_stack: Some(0),
            vector_128: true,
            resident: Some((512, 2)),
        };
        assert!(check(90, "topo_copy", &u, &s, all).is_empty());
        let bad = check(90, "topo_prim_sum_f32", &u, &s, all);
        assert_eq!(bad.len(), 3, "{bad:?}");
        assert!(
            bad.iter()
                .all(|b| b.starts_with("topo_prim_sum_f32 on sm_90: "))
        );
        assert!(bad[0].contains("stack 64 B") && bad[0].contains("1 LDL/STL"));
        assert!(bad[1].contains("LDG.E.128") && bad[2].contains("STG.E.128"));
        // 64 registers fit 2 CTAs of 512 threads exactly; 3 CTAs would not.
        let three = Rules {
            max_stack: None,
            vector_128: false,
            resident: Some((512, 3)),
        };
        let bad = check(80, "topo_prim_sum_f32", &u, &s, three);
        assert_eq!(bad.len(), 1);
        assert!(bad[0].contains("64 registers") && bad[0].contains("over the 42"));
        // A frame allowed up to its size passes; one byte less fails.
        let frame = |max| Rules {
            max_stack: Some(max),
            vector_128: false,
            resident: None,
        };
        assert!(check(90, "topo_prim_sum_f32", &u, &s, frame(64)).is_empty());
        assert_eq!(check(90, "topo_prim_sum_f32", &u, &s, frame(63)).len(), 1);
        let missing = check(100, "topo_nope", &u, &s, all);
        assert_eq!(missing, ["topo_nope on sm_100: not in cuobjdump's listing"]);
    }

    #[test]
    fn cuobjdump_comes_from_the_variable_then_path() {
        let none = Cuobjdump::find(&|_| None).err().unwrap();
        assert!(none.contains("TOPO_CUOBJDUMP"), "{none}");
        let e = Cuobjdump::find(&|k| (k == "TOPO_CUOBJDUMP").then(|| "/nonexistent/x".into()))
            .err()
            .unwrap();
        assert!(e.contains("/nonexistent/x is not a file"), "{e}");
    }
}
