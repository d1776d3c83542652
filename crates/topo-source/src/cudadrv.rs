//! The CUDA driver (libcuda.so.1, opened at run time) for what NVML does not say: per GPU,
//! whether cuMem VMM, POSIX-fd and fabric handles, multicast and unified addressing are
//! supported. NCCL asks the same attributes before choosing P2P/CUMEM over P2P/IPC
//! (`ncclCuMemEnable`, src/misc/cudawrap.cc) and before building NVLS channels
//! (`ncclNvlsInit`, src/transport/nvls.cc; NCCL 2.28).
//!
//! The answer rides in NVML's report (`nvml.json`, per GPU `cuda`), matched to NVML's GPUs
//! by PCI bus id, so a snapshot replays it; [`crate::nvml::apply`] turns it into the model.
use std::ffi::{c_char, c_int, c_uint};

use topo_model::{BusId, CudaAttrs};

/// `CUdevice_attribute` numbers (cuda.h, stable across CUDA 12 and 13).
const UNIFIED_ADDRESSING: c_int = 41;
const VMM: c_int = 102;
const POSIX_FD: c_int = 103;
const GDR_WITH_VMM: c_int = 110;
const FABRIC: c_int = 128;
const MULTICAST: c_int = 132;

type Init = unsafe extern "C" fn(c_uint) -> c_int;
type GetInt = unsafe extern "C" fn(*mut c_int) -> c_int;
type DeviceGet = unsafe extern "C" fn(*mut c_int, c_int) -> c_int;
type Attribute = unsafe extern "C" fn(*mut c_int, c_int, c_int) -> c_int;
type BusIdFn = unsafe extern "C" fn(*mut c_char, c_int, c_int) -> c_int;

/// One GPU as the driver sees it: its PCI bus id and attributes.
#[derive(Clone, Debug, PartialEq)]
pub struct CudaGpu {
    pub busid: BusId,
    pub attrs: CudaAttrs,
}

/// Ask the driver about every GPU it shows. `Err` is one phrase saying why not.
pub fn query() -> Result<Vec<CudaGpu>, String> {
    // SAFETY: opening the system's CUDA driver library runs its initialisers, as every CUDA
    // program does; nothing else is loaded.
    let lib = unsafe { libloading::Library::new("libcuda.so.1") }
        .map_err(|_| "CUDA driver not found (libcuda.so.1 could not be loaded)".to_string())?;
    let sym = |name: &[u8]| {
        let shown = String::from_utf8_lossy(&name[..name.len() - 1]).into_owned();
        move |e: libloading::Error| format!("CUDA driver too old: {shown} missing ({e})")
    };
    // SAFETY: the symbols have the C signatures of cuda.h written above; they are called
    // only while `lib` is alive.
    unsafe {
        let init: libloading::Symbol<Init> = lib.get(b"cuInit\0").map_err(sym(b"cuInit\0"))?;
        let count: libloading::Symbol<GetInt> = lib
            .get(b"cuDeviceGetCount\0")
            .map_err(sym(b"cuDeviceGetCount\0"))?;
        let get: libloading::Symbol<DeviceGet> =
            lib.get(b"cuDeviceGet\0").map_err(sym(b"cuDeviceGet\0"))?;
        let attr: libloading::Symbol<Attribute> = lib
            .get(b"cuDeviceGetAttribute\0")
            .map_err(sym(b"cuDeviceGetAttribute\0"))?;
        let bus: libloading::Symbol<BusIdFn> = lib
            .get(b"cuDeviceGetPCIBusId\0")
            .map_err(sym(b"cuDeviceGetPCIBusId\0"))?;
        let r = init(0);
        if r != 0 {
            return Err(format!("CUDA driver found but cuInit failed (error {r})"));
        }
        let mut n = 0;
        if count(&mut n) != 0 {
            return Err("CUDA driver: cuDeviceGetCount failed".into());
        }
        let mut out = Vec::new();
        for ord in 0..n.clamp(0, 1024) {
            let mut dev = 0;
            if get(&mut dev, ord) != 0 {
                continue;
            }
            let mut buf = [0 as c_char; 64];
            if bus(buf.as_mut_ptr(), buf.len() as c_int, dev) != 0 {
                continue;
            }
            let text = std::ffi::CStr::from_ptr(buf.as_ptr()).to_string_lossy();
            let Ok(busid) = BusId::parse(&text) else {
                continue;
            };
            let ask = |a: c_int| {
                let mut v = 0;
                (attr(&mut v, a, dev) == 0).then_some(v != 0)
            };
            out.push(CudaGpu {
                busid,
                attrs: CudaAttrs {
                    ordinal: ord as u32,
                    vmm: ask(VMM),
                    posix_fd: ask(POSIX_FD),
                    fabric_handle: ask(FABRIC),
                    multicast: ask(MULTICAST),
                    unified_addressing: ask(UNIFIED_ADDRESSING),
                    gdr_with_vmm: ask(GDR_WITH_VMM),
                },
            });
        }
        Ok(out)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn without_a_driver_the_reason_is_one_phrase() {
        // On a machine with a driver this asks it, which must not fail either.
        match query() {
            Ok(gpus) => eprintln!("a CUDA driver is present: {} GPU(s)", gpus.len()),
            Err(e) => assert!(e.starts_with("CUDA driver"), "{e}"),
        }
    }
}
