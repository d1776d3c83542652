//! Finds the NCCL library a job on this machine would load, and asks it its version
//! (`ncclGetVersion`), so `topo plan` models the NCCL actually installed.

use serde::Serialize;
use std::ffi::c_int;

#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct DetectedNccl {
    /// `major.minor.patch`.
    pub version: String,
    /// The library name that loaded.
    pub library: String,
}

/// Why no NCCL could be asked: what was tried and the last loader error.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error("no NCCL library could be loaded (tried {tried}): {last}")]
pub struct NotFound {
    pub tried: String,
    pub last: String,
}

/// Library names tried in order: the runtime SONAME shipped by NVIDIA's packages and pip wheels
/// first, then the development symlink.
const CANDIDATES: [&str; 2] = ["libnccl.so.2", "libnccl.so"];

/// Decodes `ncclGetVersion`'s integer: `major*10000 + minor*100 + patch` since 2.9,
/// `major*1000 + minor*100 + patch` before.
pub fn decode_version(code: i32) -> String {
    if code >= 10000 {
        format!("{}.{}.{}", code / 10000, (code % 10000) / 100, code % 100)
    } else {
        format!("{}.{}.{}", code / 1000, (code % 1000) / 100, code % 100)
    }
}

/// Loads NCCL with dlopen and reads its version. The error says what was tried.
pub fn detect() -> Result<DetectedNccl, NotFound> {
    let mut last = String::new();
    for name in CANDIDATES {
        // SAFETY: loading NCCL runs only its static initialisers, which do not touch the GPU;
        // the symbol's signature is NCCL's public `ncclResult_t ncclGetVersion(int*)`.
        let lib = match unsafe { libloading::Library::new(name) } {
            Ok(l) => l,
            Err(e) => {
                last = e.to_string();
                continue;
            }
        };
        // SAFETY: the type matches NCCL's public `ncclResult_t ncclGetVersion(int*)`, and the
        // symbol does not outlive `lib`.
        let f: libloading::Symbol<unsafe extern "C" fn(*mut c_int) -> c_int> =
            match unsafe { lib.get(b"ncclGetVersion\0") } {
                Ok(f) => f,
                Err(e) => {
                    last = format!("{name}: {e}");
                    continue;
                }
            };
        let mut code: c_int = 0;
        // SAFETY: `code` is a valid, writable int for the duration of the call.
        let rc = unsafe { f(&mut code) };
        if rc != 0 || code <= 0 {
            last = format!("{name}: ncclGetVersion failed with code {rc}");
            continue;
        }
        return Ok(DetectedNccl {
            version: decode_version(code),
            library: name.to_string(),
        });
    }
    Err(NotFound {
        tried: CANDIDATES.join(", "),
        last,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn decodes_both_encodings() {
        assert_eq!(decode_version(22105), "2.21.5");
        assert_eq!(decode_version(22809), "2.28.9");
        assert_eq!(decode_version(23007), "2.30.7");
        assert_eq!(decode_version(2804), "2.8.4");
    }
}
