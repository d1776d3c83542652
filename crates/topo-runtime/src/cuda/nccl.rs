//! NCCL opened at run time for `topo verify --compare nccl`: the same collectives on the same
//! sizes, one rank per GPU in this process (`ncclCommInitAll`, as nccl-tests `-g N` does).
//! Bound by hand because cudarc never tries `libnccl.so.2`, the SONAME of NVIDIA's packages
//! and of the `nvidia-nccl-cu12/cu13` wheels. The enum values are NCCL's (nccl.h, 2.19-2.30).
use std::ffi::{CStr, c_char, c_int, c_void};
use std::path::PathBuf;

use super::loader::{self, Lib};
use crate::error::{Result, RuntimeError};
use crate::types::{Collective, DataType, Reduction};

type Comm = *mut c_void;
type Stream = *mut c_void;
type Res = c_int;

/// A loaded libnccl.
pub struct Nccl {
    lib: libloading::Library,
    pub from: PathBuf,
    /// `ncclGetVersion`: 22703 for 2.27.3.
    pub version: i32,
}

/// `ncclDataType_t`.
pub fn nccl_dtype(dt: DataType) -> c_int {
    match dt {
        DataType::U8 => 1,
        DataType::I32 => 2,
        DataType::I64 => 4,
        DataType::F16 => 6,
        DataType::F32 => 7,
        DataType::F64 => 8,
        DataType::Bf16 => 9,
    }
}

/// `ncclRedOp_t` (ncclAvg since 2.10).
pub fn nccl_op(op: Reduction) -> c_int {
    match op {
        Reduction::Sum => 0,
        Reduction::Prod => 1,
        Reduction::Max => 2,
        Reduction::Min => 3,
        Reduction::Avg => 4,
    }
}

/// "2.27.3" from 22703 (and 2.8-style 2803).
pub fn version_string(v: i32) -> String {
    if v >= 10000 {
        format!("{}.{}.{}", v / 10000, (v / 100) % 100, v % 100)
    } else {
        format!("{}.{}.{}", v / 1000, (v / 100) % 10, v % 100)
    }
}

/// The collectives NCCL has a call for here (AlltoAll and SendRecv are grouped send/recv
/// in nccl-tests; not compared).
pub fn comparable(c: Collective) -> bool {
    matches!(
        c,
        Collective::AllReduce
            | Collective::AllGather
            | Collective::ReduceScatter
            | Collective::Broadcast
            | Collective::Reduce
    )
}

impl Nccl {
    pub fn load() -> std::result::Result<Nccl, String> {
        let l = loader::open(Lib::Nccl)?;
        let mut n = Nccl {
            lib: l.lib,
            from: l.from,
            version: 0,
        };
        let mut v = 0;
        // SAFETY: ncclGetVersion(int*).
        let r = unsafe {
            let f = n
                .sym::<unsafe extern "C" fn(*mut c_int) -> Res>(b"ncclGetVersion\0")
                .map_err(|e| e.to_string())?;
            f(&mut v)
        };
        if r != 0 {
            return Err(format!("ncclGetVersion failed ({r})"));
        }
        n.version = v;
        Ok(n)
    }

    /// # Safety
    /// `T` is the symbol's real type.
    unsafe fn sym<T: Copy>(&self, name: &[u8]) -> Result<T> {
        // SAFETY: the caller names the right type.
        unsafe { self.lib.get::<T>(name) }.map(|s| *s).map_err(|e| {
            RuntimeError::Device(format!(
                "{} lacks {}: {e}",
                self.from.display(),
                String::from_utf8_lossy(&name[..name.len() - 1])
            ))
        })
    }

    fn check(&self, r: Res, what: &str) -> Result<()> {
        if r == 0 {
            return Ok(());
        }
        // SAFETY: ncclGetErrorString returns a static string for any code.
        let msg = unsafe {
            self.sym::<unsafe extern "C" fn(Res) -> *const c_char>(b"ncclGetErrorString\0")
                .ok()
                .map(|f| f(r))
                .filter(|p| !p.is_null())
                .map(|p| CStr::from_ptr(p).to_string_lossy().into_owned())
        };
        Err(RuntimeError::Device(format!(
            "{what}: {}",
            msg.unwrap_or_else(|| format!("error {r}"))
        )))
    }

    /// One communicator per device of `devs`, in this process.
    pub fn init_all(&self, devs: &[i32]) -> Result<Vec<Comm>> {
        let mut comms = vec![std::ptr::null_mut(); devs.len()];
        // SAFETY: ncclCommInitAll(ncclComm_t*, int, const int*) fills `devs.len()` comms.
        let r = unsafe {
            let f = self.sym::<unsafe extern "C" fn(*mut Comm, c_int, *const c_int) -> Res>(
                b"ncclCommInitAll\0",
            )?;
            f(comms.as_mut_ptr(), devs.len() as c_int, devs.as_ptr())
        };
        self.check(r, "ncclCommInitAll")?;
        Ok(comms)
    }

    pub fn destroy(&self, comms: &[Comm]) {
        // SAFETY: each comm came from init_all and is destroyed once.
        unsafe {
            if let Ok(f) = self.sym::<unsafe extern "C" fn(Comm) -> Res>(b"ncclCommDestroy\0") {
                for &c in comms {
                    f(c);
                }
            }
        }
    }

    /// Enqueue one collective for every rank (inside one group), each on its stream.
    /// `count` is nccl-tests' per-rank element count for `coll`.
    #[allow(clippy::too_many_arguments)]
    pub fn enqueue(
        &self,
        coll: Collective,
        comms: &[Comm],
        streams: &[Stream],
        send: &[u64],
        recv: &[u64],
        count: usize,
        dt: DataType,
        op: Reduction,
        root: usize,
    ) -> Result<()> {
        type Group = unsafe extern "C" fn() -> Res;
        type AllReduce = unsafe extern "C" fn(
            *const c_void,
            *mut c_void,
            usize,
            c_int,
            c_int,
            Comm,
            Stream,
        ) -> Res;
        type AllGather =
            unsafe extern "C" fn(*const c_void, *mut c_void, usize, c_int, Comm, Stream) -> Res;
        type Bcast = unsafe extern "C" fn(
            *const c_void,
            *mut c_void,
            usize,
            c_int,
            c_int,
            Comm,
            Stream,
        ) -> Res;
        type Reduce = unsafe extern "C" fn(
            *const c_void,
            *mut c_void,
            usize,
            c_int,
            c_int,
            c_int,
            Comm,
            Stream,
        ) -> Res;
        let (d, o) = (nccl_dtype(dt), nccl_op(op));
        // SAFETY: the symbols have nccl.h's types; the buffers are device allocations of at
        // least the sizes nccl-tests uses for `count`, on the comm's device; NCCL only enqueues.
        unsafe {
            let start: Group = self.sym(b"ncclGroupStart\0")?;
            let end: Group = self.sym(b"ncclGroupEnd\0")?;
            self.check(start(), "ncclGroupStart")?;
            let mut first_err = Ok(());
            for i in 0..comms.len() {
                let (s, r) = (send[i] as *const c_void, recv[i] as *mut c_void);
                let res = match coll {
                    Collective::AllReduce => self.sym::<AllReduce>(b"ncclAllReduce\0")?(
                        s, r, count, d, o, comms[i], streams[i],
                    ),
                    Collective::AllGather => self.sym::<AllGather>(b"ncclAllGather\0")?(
                        s, r, count, d, comms[i], streams[i],
                    ),
                    Collective::ReduceScatter => self.sym::<AllReduce>(b"ncclReduceScatter\0")?(
                        s, r, count, d, o, comms[i], streams[i],
                    ),
                    Collective::Broadcast => self.sym::<Bcast>(b"ncclBroadcast\0")?(
                        s,
                        r,
                        count,
                        d,
                        root as c_int,
                        comms[i],
                        streams[i],
                    ),
                    Collective::Reduce => self.sym::<Reduce>(b"ncclReduce\0")?(
                        s,
                        r,
                        count,
                        d,
                        o,
                        root as c_int,
                        comms[i],
                        streams[i],
                    ),
                    _ => {
                        return Err(RuntimeError::Unsupported(format!(
                            "--compare nccl: {} is not compared",
                            coll.cli_name()
                        )));
                    }
                };
                if first_err.is_ok() {
                    first_err = self.check(res, coll.cli_name());
                }
            }
            let e = self.check(end(), "ncclGroupEnd");
            first_err.and(e)
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn nccl_enums_and_versions() {
        assert_eq!(nccl_dtype(DataType::F32), 7);
        assert_eq!(nccl_dtype(DataType::Bf16), 9);
        assert_eq!(nccl_op(Reduction::Min), 3);
        assert_eq!(nccl_op(Reduction::Avg), 4);
        assert_eq!(version_string(22703), "2.27.3");
        assert_eq!(version_string(2803), "2.8.3");
        assert!(comparable(Collective::ReduceScatter));
        assert!(!comparable(Collective::AllToAll));
    }
}
