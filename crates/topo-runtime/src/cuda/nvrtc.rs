//! NVRTC, bound by hand through libloading: cudarc's NVRTC loader only tries the library
//! names of the CUDA major it was built for (libnvrtc.so.12 and older with `cuda-12080`), so a
//! CUDA 13 toolkit or wheel would be missed, and it panics instead of returning an error.
//! Ten functions are needed; their C signatures are NVRTC's stable API (nvrtc.h, CUDA 11-13).
use std::ffi::{CStr, CString, c_char, c_int, c_void};
use std::path::PathBuf;

use super::loader::{self, Lib};

type Prog = *mut c_void;
type Res = c_int;

/// A loaded NVRTC and where it came from.
pub struct Nvrtc {
    lib: libloading::Library,
    /// The file that loaded (said in reports and test output).
    pub from: PathBuf,
    /// `nvrtcVersion`: (major, minor).
    pub version: (i32, i32),
}

/// What one compilation produced.
pub struct Compiled {
    /// CUBIN for a real architecture (`sm_XY`), PTX for a virtual one (`compute_XY`).
    pub image: Vec<u8>,
    pub log: String,
}

impl Nvrtc {
    /// Find and open NVRTC (see [`loader`] for where it looks).
    pub fn load() -> Result<Nvrtc, String> {
        let l = loader::open(Lib::Nvrtc)?;
        let mut n = Nvrtc {
            lib: l.lib,
            from: l.from,
            version: (0, 0),
        };
        let (mut major, mut minor) = (0, 0);
        // SAFETY: nvrtcVersion(int*, int*) writes two ints.
        let r = unsafe {
            let f =
                n.sym::<unsafe extern "C" fn(*mut c_int, *mut c_int) -> Res>(b"nvrtcVersion\0")?;
            f(&mut major, &mut minor)
        };
        if r != 0 {
            return Err(format!("nvrtcVersion failed ({r})"));
        }
        n.version = (major, minor);
        Ok(n)
    }

    /// # Safety
    /// `T` must be the symbol's real type.
    unsafe fn sym<T: Copy>(&self, name: &[u8]) -> Result<T, String> {
        // SAFETY: the caller names the right type.
        unsafe { self.lib.get::<T>(name) }.map(|s| *s).map_err(|e| {
            format!(
                "{} lacks {}: {e}",
                self.from.display(),
                String::from_utf8_lossy(&name[..name.len() - 1])
            )
        })
    }

    fn err(&self, r: Res) -> String {
        // SAFETY: nvrtcGetErrorString returns a static C string for any code.
        unsafe {
            match self.sym::<unsafe extern "C" fn(Res) -> *const c_char>(b"nvrtcGetErrorString\0") {
                Ok(f) => {
                    let p = f(r);
                    if p.is_null() {
                        format!("nvrtc error {r}")
                    } else {
                        CStr::from_ptr(p).to_string_lossy().into_owned()
                    }
                }
                Err(_) => format!("nvrtc error {r}"),
            }
        }
    }

    /// Compile `src` for `arch` (`sm_90` gives CUBIN, `compute_90` PTX) with `opts`.
    pub fn compile(
        &self,
        src: &str,
        name: &str,
        arch: &str,
        opts: &[&str],
    ) -> Result<Compiled, String> {
        let csrc = CString::new(src).map_err(|_| "kernel source has a NUL byte".to_string())?;
        let cname = CString::new(name).map_err(|_| "kernel name has a NUL byte".to_string())?;
        let mut all: Vec<CString> =
            vec![CString::new(format!("--gpu-architecture={arch}")).unwrap_or_default()];
        all.extend(opts.iter().filter_map(|o| CString::new(*o).ok()));
        let ptrs: Vec<*const c_char> = all.iter().map(|c| c.as_ptr()).collect();
        type Create = unsafe extern "C" fn(
            *mut Prog,
            *const c_char,
            *const c_char,
            c_int,
            *const *const c_char,
            *const *const c_char,
        ) -> Res;
        type Compile = unsafe extern "C" fn(Prog, c_int, *const *const c_char) -> Res;
        type Size = unsafe extern "C" fn(Prog, *mut usize) -> Res;
        type Get = unsafe extern "C" fn(Prog, *mut c_char) -> Res;
        type Destroy = unsafe extern "C" fn(*mut Prog) -> Res;
        let real = arch.starts_with("sm_");
        // SAFETY: each symbol has the type nvrtc.h gives it; the program handle lives until
        // nvrtcDestroyProgram below; buffers are sized from the matching *Size call.
        unsafe {
            let create: Create = self.sym(b"nvrtcCreateProgram\0")?;
            let compile: Compile = self.sym(b"nvrtcCompileProgram\0")?;
            let log_size: Size = self.sym(b"nvrtcGetProgramLogSize\0")?;
            let get_log: Get = self.sym(b"nvrtcGetProgramLog\0")?;
            let (img_size, get_img): (Size, Get) = if real {
                (
                    self.sym(b"nvrtcGetCUBINSize\0")?,
                    self.sym(b"nvrtcGetCUBIN\0")?,
                )
            } else {
                (self.sym(b"nvrtcGetPTXSize\0")?, self.sym(b"nvrtcGetPTX\0")?)
            };
            let destroy: Destroy = self.sym(b"nvrtcDestroyProgram\0")?;
            let mut prog: Prog = std::ptr::null_mut();
            let r = create(
                &mut prog,
                csrc.as_ptr(),
                cname.as_ptr(),
                0,
                std::ptr::null(),
                std::ptr::null(),
            );
            if r != 0 {
                return Err(format!("nvrtcCreateProgram: {}", self.err(r)));
            }
            let rc = compile(prog, ptrs.len() as c_int, ptrs.as_ptr());
            let mut n = 0usize;
            let mut log = String::new();
            if log_size(prog, &mut n) == 0 && n > 1 {
                let mut buf = vec![0u8; n];
                if get_log(prog, buf.as_mut_ptr().cast()) == 0 {
                    log = String::from_utf8_lossy(&buf[..n - 1]).trim().to_string();
                }
            }
            let out = if rc != 0 {
                Err(format!("{name} for {arch}: {}\n{log}", self.err(rc)))
            } else {
                let mut n = 0usize;
                let r = img_size(prog, &mut n);
                if r != 0 {
                    Err(format!("{name} for {arch}: image size: {}", self.err(r)))
                } else {
                    let mut image = vec![0u8; n];
                    let r = get_img(prog, image.as_mut_ptr().cast());
                    if r != 0 {
                        Err(format!("{name} for {arch}: image: {}", self.err(r)))
                    } else {
                        if !real && image.last() == Some(&0) {
                            image.pop();
                        }
                        Ok(Compiled { image, log })
                    }
                }
            };
            destroy(&mut prog);
            out
        }
    }

    /// The real architectures this NVRTC compiles for (`nvrtcGetSupportedArchs`, 11.2+).
    pub fn supported_archs(&self) -> Vec<i32> {
        type Num = unsafe extern "C" fn(*mut c_int) -> Res;
        type List = unsafe extern "C" fn(*mut c_int) -> Res;
        // SAFETY: the list is sized from nvrtcGetNumSupportedArchs.
        unsafe {
            let (Ok(num), Ok(list)) = (
                self.sym::<Num>(b"nvrtcGetNumSupportedArchs\0"),
                self.sym::<List>(b"nvrtcGetSupportedArchs\0"),
            ) else {
                return Vec::new();
            };
            let mut n = 0;
            if num(&mut n) != 0 || !(0..=256).contains(&n) {
                return Vec::new();
            }
            let mut v = vec![0; n as usize];
            if list(v.as_mut_ptr()) != 0 {
                return Vec::new();
            }
            v
        }
    }
}
