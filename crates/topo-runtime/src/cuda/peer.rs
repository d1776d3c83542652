//! How ranks reach each other's memory (NCCL's src/transport/p2p.cc and shm.cc, 2.19+, for
//! which mechanism is used when):
//!
//! * one process, one thread per GPU: peer access (`cuCtxEnablePeerAccess`) and direct
//!   pointers (P2P/direct); ranks on the same GPU (`--ranks-per-gpu`) need nothing;
//! * several processes: a cuMem VMM allocation (`cuMemCreate` with a POSIX-fd handle type)
//!   exported as a file descriptor, passed over a Unix socket (SCM_RIGHTS, the launcher's own
//!   `send_fd`), imported, mapped and made accessible on the peer (P2P/CUMEM); legacy IPC
//!   handles (`cuIpcGetMemHandle` on `cuMemAlloc` memory) where VMM is not supported (P2P/IPC);
//! * peers that cannot reach each other: the FIFOs in pinned, device-mapped host memory
//!   (SHM), so a user sees what the fallback costs.
//!
//! Every raw driver call is checked; allocations free themselves on drop.
use cudarc::driver::sys::{self, CUresult};

use crate::error::{Result, RuntimeError};
use crate::transport::TransportKind;

fn check(r: CUresult, what: &str) -> Result<()> {
    if r == CUresult::CUDA_SUCCESS {
        Ok(())
    } else {
        Err(RuntimeError::Device(format!("{what}: {r:?}")))
    }
}

/// How a pair of ranks reaches each other, from what the driver says about their GPUs.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct PairCaps {
    pub same_gpu: bool,
    /// `cuDeviceCanAccessPeer` both ways.
    pub peer_access: bool,
    /// `CU_DEVICE_ATTRIBUTE_VIRTUAL_MEMORY_MANAGEMENT_SUPPORTED` and POSIX-fd handles on both.
    pub vmm: bool,
}

/// The transport a pair uses: NCCL's order (P2P with cuMem, then legacy IPC, then SHM), with
/// `TOPO_CUDA_TRANSPORT=shm` (`force_shm`) to measure the fallback on a box that has P2P.
pub fn choose(caps: PairCaps, multi_process: bool, force_shm: bool) -> TransportKind {
    if force_shm {
        return TransportKind::Shm;
    }
    if !(caps.same_gpu || caps.peer_access) {
        return TransportKind::Shm;
    }
    if !multi_process {
        TransportKind::CudaP2p
    } else if caps.vmm {
        TransportKind::CudaCuMem
    } else {
        TransportKind::CudaIpc
    }
}

/// NCCL's name of a transport in its `Channel 00 : 0[0] -> 1[1] via P2P/CUMEM` lines
/// (src/transport/p2p.cc and shm.cc, 2.19+).
pub fn nccl_name(kind: TransportKind) -> &'static str {
    match kind {
        TransportKind::CudaP2p => "P2P/direct pointer",
        TransportKind::CudaCuMem => "P2P/CUMEM",
        TransportKind::CudaIpc => "P2P/IPC",
        TransportKind::Shm => "SHM",
        other => other.name(),
    }
}

/// One line saying how every pair of ranks is connected (rank r on GPU r / rpg), NCCL-style:
/// `0[0] <-> 1[0] via P2P/CUMEM, ...`; long lists end with how many more pairs there are.
pub fn pairs_note(nranks: usize, rpg: usize, kind: TransportKind) -> String {
    const SHOWN: usize = 32;
    let rpg = rpg.max(1);
    let mut parts = Vec::new();
    let mut total = 0;
    for a in 0..nranks {
        for b in a + 1..nranks {
            total += 1;
            if parts.len() < SHOWN {
                parts.push(format!("{a}[{}] <-> {b}[{}]", a / rpg, b / rpg));
            }
        }
    }
    let more = if total > SHOWN {
        format!(" and {} more pairs", total - SHOWN)
    } else {
        String::new()
    };
    format!(
        "connections (rank[gpu]): {}{more} via {}",
        parts.join(", "),
        nccl_name(kind)
    )
}

/// The transport of a multi-process job, with `TOPO_CUDA_TRANSPORT=ipc` (`force_ipc`) to use
/// legacy IPC handles where cuMem works (NCCL's `NCCL_CUMEM_ENABLE=0`).
pub fn choose_processes(pairs: &[PairCaps], force_shm: bool, force_ipc: bool) -> TransportKind {
    match choose_job(pairs, true, force_shm) {
        TransportKind::CudaCuMem if force_ipc => TransportKind::CudaIpc,
        k => k,
    }
}

/// The transport of a whole job: the weakest pair's (one kind for every connection keeps the
/// arena layout uniform; a mixed box reports SHM).
pub fn choose_job(pairs: &[PairCaps], multi_process: bool, force_shm: bool) -> TransportKind {
    let kinds: Vec<TransportKind> = pairs
        .iter()
        .map(|&c| choose(c, multi_process, force_shm))
        .collect();
    if kinds.contains(&TransportKind::Shm) {
        TransportKind::Shm
    } else {
        kinds.first().copied().unwrap_or(TransportKind::CudaP2p)
    }
}

/// What the driver says about GPUs `a` and `b` (ordinals).
pub fn pair_caps(a: usize, b: usize) -> Result<PairCaps> {
    if a == b {
        return Ok(PairCaps {
            same_gpu: true,
            peer_access: true,
            vmm: vmm_supported(a)?,
        });
    }
    let (mut ab, mut ba) = (0, 0);
    // SAFETY: writes one int each; the ordinals come from cuDeviceGetCount.
    unsafe {
        check(
            sys::cuDeviceCanAccessPeer(&mut ab, a as i32, b as i32),
            "cuDeviceCanAccessPeer",
        )?;
        check(
            sys::cuDeviceCanAccessPeer(&mut ba, b as i32, a as i32),
            "cuDeviceCanAccessPeer",
        )?;
    }
    Ok(PairCaps {
        same_gpu: false,
        peer_access: ab == 1 && ba == 1,
        vmm: vmm_supported(a)? && vmm_supported(b)?,
    })
}

fn vmm_supported(dev: usize) -> Result<bool> {
    use sys::CUdevice_attribute as A;
    let get = |attr| -> Result<i32> {
        let mut v = 0;
        // SAFETY: writes one int.
        let r = unsafe { sys::cuDeviceGetAttribute(&mut v, attr, dev as i32) };
        check(r, "cuDeviceGetAttribute")?;
        Ok(v)
    };
    Ok(
        get(A::CU_DEVICE_ATTRIBUTE_VIRTUAL_MEMORY_MANAGEMENT_SUPPORTED)? == 1
            && get(A::CU_DEVICE_ATTRIBUTE_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR_SUPPORTED)? == 1,
    )
}

/// Let the current context (`from`'s) load and store `to`'s memory.
pub fn enable_peer_access(to: &cudarc::driver::CudaContext) -> Result<()> {
    // SAFETY: `to` is a live context; the calling thread has bound `from`.
    let r = unsafe { sys::cuCtxEnablePeerAccess(to.cu_ctx(), 0) };
    if r == CUresult::CUDA_ERROR_PEER_ACCESS_ALREADY_ENABLED {
        return Ok(());
    }
    check(r, "cuCtxEnablePeerAccess")
}

/// Device memory from `cuMemAlloc` (not the stream-ordered pool, which IPC cannot export).
pub struct DevMem {
    pub ptr: u64,
    pub bytes: usize,
}

impl DevMem {
    /// `bytes` zeroed bytes on the current context's device.
    pub fn zeroed(bytes: usize) -> Result<DevMem> {
        let bytes = bytes.max(256);
        let mut ptr = 0;
        // SAFETY: cuMemAlloc_v2 writes the pointer; cuMemsetD8 then touches exactly `bytes`.
        unsafe {
            check(sys::cuMemAlloc_v2(&mut ptr, bytes), "cuMemAlloc")?;
            let m = DevMem { ptr, bytes };
            check(sys::cuMemsetD8_v2(ptr, 0, bytes), "cuMemsetD8")?;
            Ok(m)
        }
    }
}

impl Drop for DevMem {
    fn drop(&mut self) {
        // SAFETY: allocated by cuMemAlloc_v2 and freed once.
        unsafe {
            sys::cuMemFree_v2(self.ptr);
        }
    }
}

/// Pinned host memory mapped into every context (portable, device-mapped): the SHM
/// transport's FIFOs. With unified addressing the host pointer is the device pointer.
pub struct HostMem {
    pub host: *mut u8,
    pub ptr: u64,
    pub bytes: usize,
}

// SAFETY: the allocation is plain memory owned by this value; it may move between threads.
unsafe impl Send for HostMem {}
// SAFETY: shared access goes through raw pointers only (the kernels and counters).
unsafe impl Sync for HostMem {}

impl HostMem {
    /// `bytes` zeroed bytes of pinned host memory.
    pub fn zeroed(bytes: usize) -> Result<HostMem> {
        let bytes = bytes.max(256);
        let mut p: *mut std::ffi::c_void = std::ptr::null_mut();
        // SAFETY: cuMemHostAlloc writes the pointer to `bytes` bytes, which are zeroed here;
        // the device pointer query follows on the same allocation.
        unsafe {
            check(
                sys::cuMemHostAlloc(
                    &mut p,
                    bytes,
                    sys::CU_MEMHOSTALLOC_PORTABLE | sys::CU_MEMHOSTALLOC_DEVICEMAP,
                ),
                "cuMemHostAlloc",
            )?;
            let mut m = HostMem {
                host: p.cast(),
                ptr: 0,
                bytes,
            };
            std::ptr::write_bytes(m.host, 0, bytes);
            check(
                sys::cuMemHostGetDevicePointer_v2(&mut m.ptr, p, 0),
                "cuMemHostGetDevicePointer",
            )?;
            Ok(m)
        }
    }
}

impl Drop for HostMem {
    fn drop(&mut self) {
        // SAFETY: allocated by cuMemHostAlloc and freed once.
        unsafe {
            sys::cuMemFreeHost(self.host.cast());
        }
    }
}

/// Either kind of communication memory.
pub enum CommMem {
    Device(DevMem),
    Host(HostMem),
}

impl CommMem {
    pub fn ptr(&self) -> u64 {
        match self {
            CommMem::Device(d) => d.ptr,
            CommMem::Host(h) => h.ptr,
        }
    }
}

/// Allocation properties for a pinned device allocation exportable as a POSIX fd.
fn vmm_prop(dev: usize) -> sys::CUmemAllocationProp {
    // SAFETY: the struct is plain data; all-zero is a valid start (NCCL memsets it too).
    let mut p: sys::CUmemAllocationProp = unsafe { std::mem::zeroed() };
    p.type_ = sys::CUmemAllocationType::CU_MEM_ALLOCATION_TYPE_PINNED;
    p.requestedHandleTypes =
        sys::CUmemAllocationHandleType::CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR;
    p.location.type_ = sys::CUmemLocationType::CU_MEM_LOCATION_TYPE_DEVICE;
    p.location.id = dev as i32;
    p
}

fn access_desc(dev: usize) -> sys::CUmemAccessDesc {
    // SAFETY: plain data, filled below.
    let mut d: sys::CUmemAccessDesc = unsafe { std::mem::zeroed() };
    d.location.type_ = sys::CUmemLocationType::CU_MEM_LOCATION_TYPE_DEVICE;
    d.location.id = dev as i32;
    d.flags = sys::CUmemAccess_flags::CU_MEM_ACCESS_FLAGS_PROT_READWRITE;
    d
}

/// Round `bytes` up to the allocation granularity.
pub fn round_to(bytes: usize, granularity: usize) -> usize {
    bytes.div_ceil(granularity.max(1)) * granularity.max(1)
}

/// A cuMem VMM allocation mapped in this process (made here, or imported from a peer's fd).
pub struct Vmm {
    handle: sys::CUmemGenericAllocationHandle,
    pub ptr: u64,
    pub bytes: usize,
}

impl Vmm {
    /// A new allocation of at least `bytes` on device `dev`, mapped read-write for `dev`.
    pub fn create(dev: usize, bytes: usize) -> Result<Vmm> {
        let prop = vmm_prop(dev);
        let mut gran = 0usize;
        // SAFETY: each call writes its out-parameter; on failure the partial state is
        // released by `map`'s error path or by Drop.
        unsafe {
            check(
                sys::cuMemGetAllocationGranularity(
                    &mut gran,
                    &prop,
                    sys::CUmemAllocationGranularity_flags::CU_MEM_ALLOC_GRANULARITY_RECOMMENDED,
                ),
                "cuMemGetAllocationGranularity",
            )?;
            let bytes = round_to(bytes, gran);
            let mut handle = 0;
            check(
                sys::cuMemCreate(&mut handle, bytes, &prop, 0),
                "cuMemCreate",
            )?;
            let v = Self::map(handle, bytes, dev, gran)?;
            // The FIFO flags and counters must start at zero (cuMemCreate does not clear).
            check(sys::cuMemsetD8_v2(v.ptr, 0, v.bytes), "cuMemsetD8")?;
            Ok(v)
        }
    }

    /// Map `handle` (owned from here on) into a fresh address range, accessible from `dev`.
    ///
    /// # Safety
    /// `handle` is a live allocation handle of `bytes` bytes.
    unsafe fn map(
        handle: sys::CUmemGenericAllocationHandle,
        bytes: usize,
        dev: usize,
        align: usize,
    ) -> Result<Vmm> {
        let mut ptr = 0;
        // SAFETY: the caller guarantees the handle; every step is undone on failure.
        unsafe {
            if let Err(e) = check(
                sys::cuMemAddressReserve(&mut ptr, bytes, align, 0, 0),
                "cuMemAddressReserve",
            ) {
                sys::cuMemRelease(handle);
                return Err(e);
            }
            if let Err(e) = check(sys::cuMemMap(ptr, bytes, 0, handle, 0), "cuMemMap") {
                sys::cuMemAddressFree(ptr, bytes);
                sys::cuMemRelease(handle);
                return Err(e);
            }
            let v = Vmm { handle, ptr, bytes };
            let d = access_desc(dev);
            check(sys::cuMemSetAccess(ptr, bytes, &d, 1), "cuMemSetAccess")?;
            Ok(v)
        }
    }

    /// Export as a POSIX file descriptor (to pass over a Unix socket with SCM_RIGHTS).
    pub fn export_fd(&self) -> Result<std::os::fd::OwnedFd> {
        use std::os::fd::FromRawFd;
        let mut fd: i32 = -1;
        // SAFETY: with the POSIX-fd handle type the driver writes an int file descriptor,
        // which this process then owns.
        unsafe {
            check(
                sys::cuMemExportToShareableHandle(
                    (&mut fd as *mut i32).cast(),
                    self.handle,
                    sys::CUmemAllocationHandleType::CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR,
                    0,
                ),
                "cuMemExportToShareableHandle",
            )?;
            if fd < 0 {
                return Err(RuntimeError::Device(
                    "cuMemExportToShareableHandle gave no fd".into(),
                ));
            }
            Ok(std::os::fd::OwnedFd::from_raw_fd(fd))
        }
    }

    /// Import a peer's allocation from its fd and map it for `dev` here.
    pub fn import(fd: &std::os::fd::OwnedFd, bytes: usize, dev: usize) -> Result<Vmm> {
        use std::os::fd::AsRawFd;
        let mut handle = 0;
        // SAFETY: the driver reads the fd (passed by value in the pointer argument, as the
        // CUDA documentation specifies for POSIX fds) and returns a new handle.
        unsafe {
            check(
                sys::cuMemImportFromShareableHandle(
                    &mut handle,
                    fd.as_raw_fd() as usize as *mut std::ffi::c_void,
                    sys::CUmemAllocationHandleType::CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR,
                ),
                "cuMemImportFromShareableHandle",
            )?;
            Self::map(handle, bytes, dev, 0)
        }
    }
}

impl Drop for Vmm {
    fn drop(&mut self) {
        // SAFETY: mapped by `map`; undone once, in reverse order.
        unsafe {
            sys::cuMemUnmap(self.ptr, self.bytes);
            sys::cuMemAddressFree(self.ptr, self.bytes);
            sys::cuMemRelease(self.handle);
        }
    }
}

/// A legacy IPC handle of a `cuMemAlloc` buffer (64 opaque bytes to send to a peer).
pub fn ipc_handle(mem: &DevMem) -> Result<[u8; 64]> {
    // SAFETY: plain data out-parameter.
    let mut h: sys::CUipcMemHandle = unsafe { std::mem::zeroed() };
    // SAFETY: `mem` is a live cuMemAlloc allocation.
    let r = unsafe { sys::cuIpcGetMemHandle(&mut h, mem.ptr) };
    check(r, "cuIpcGetMemHandle")?;
    Ok(h.reserved.map(|c| c as u8))
}

/// A peer's buffer opened from its IPC handle; closed on drop.
pub struct IpcMapped {
    pub ptr: u64,
}

impl IpcMapped {
    pub fn open(handle: &[u8; 64]) -> Result<IpcMapped> {
        // SAFETY: plain data.
        let mut h: sys::CUipcMemHandle = unsafe { std::mem::zeroed() };
        for (d, s) in h.reserved.iter_mut().zip(handle) {
            *d = *s as std::ffi::c_char;
        }
        let mut ptr = 0;
        let flags = sys::CUipcMem_flags::CU_IPC_MEM_LAZY_ENABLE_PEER_ACCESS as u32;
        // SAFETY: the driver validates the handle; it writes the mapped pointer.
        let r = unsafe { sys::cuIpcOpenMemHandle_v2(&mut ptr, h, flags) };
        check(r, "cuIpcOpenMemHandle")?;
        Ok(IpcMapped { ptr })
    }
}

impl Drop for IpcMapped {
    fn drop(&mut self) {
        // SAFETY: opened by cuIpcOpenMemHandle and closed once.
        unsafe {
            sys::cuIpcCloseMemHandle(self.ptr);
        }
    }
}

/// Pinned host memory shared between processes (the SHM fallback of a process job): a memfd
/// like the host backend's arena (mode 0600, no name in any file system, so nothing is left
/// to unlink after a crash), mapped shared, registered with the driver as device-mapped.
pub struct ShmSeg {
    host: *mut u8,
    pub ptr: u64,
    pub bytes: usize,
}

// SAFETY: the mapping is plain memory owned by this value; access goes through raw pointers.
unsafe impl Send for ShmSeg {}
// SAFETY: as above.
unsafe impl Sync for ShmSeg {}

impl ShmSeg {
    /// A new zeroed segment of at least `bytes`, and its fd to pass to the peers.
    pub fn create(bytes: usize, job: &str) -> Result<(ShmSeg, std::os::fd::OwnedFd)> {
        let fd = shm_memfd(bytes, job)?;
        let seg = Self::map(&fd, round_to(bytes, 4096))?;
        Ok((seg, fd))
    }

    /// Map a peer's segment of exactly `bytes` and register it with the current context.
    pub fn map(fd: &std::os::fd::OwnedFd, bytes: usize) -> Result<ShmSeg> {
        let host = map_shared(fd, bytes)?;
        let mut seg = ShmSeg {
            host,
            ptr: 0,
            bytes: 0,
        };
        let flags = sys::CU_MEMHOSTREGISTER_PORTABLE | sys::CU_MEMHOSTREGISTER_DEVICEMAP;
        // SAFETY: `host` is a live shared mapping of `bytes`; registered once, unregistered
        // by Drop (which sees bytes == 0 and only unmaps if registration fails).
        unsafe {
            let r = sys::cuMemHostRegister_v2(host.cast(), bytes, flags);
            if r != CUresult::CUDA_SUCCESS {
                rustix::mm::munmap(host.cast(), bytes).ok();
                seg.host = std::ptr::null_mut();
                return Err(RuntimeError::Device(format!("cuMemHostRegister: {r:?}")));
            }
            seg.bytes = bytes;
            check(
                sys::cuMemHostGetDevicePointer_v2(&mut seg.ptr, host.cast(), 0),
                "cuMemHostGetDevicePointer",
            )?;
        }
        Ok(seg)
    }
}

impl Drop for ShmSeg {
    fn drop(&mut self) {
        if self.host.is_null() {
            return;
        }
        // SAFETY: registered and mapped by `map`, each undone once.
        unsafe {
            sys::cuMemHostUnregister(self.host.cast());
            rustix::mm::munmap(self.host.cast(), self.bytes).ok();
        }
    }
}

/// A zero-filled memfd of `bytes` rounded to pages, mode 0600 (as the host arena's).
pub fn shm_memfd(bytes: usize, job: &str) -> Result<std::os::fd::OwnedFd> {
    use rustix::fs::{MemfdFlags, Mode, fchmod, ftruncate, memfd_create};
    let fd = memfd_create(format!("topo-cuda-{job}"), MemfdFlags::CLOEXEC)
        .map_err(|e| RuntimeError::io("memfd_create", e))?;
    fchmod(&fd, Mode::from_raw_mode(0o600))
        .map_err(|e| RuntimeError::io("fchmod memfd 0600", e))?;
    ftruncate(&fd, round_to(bytes, 4096) as u64)
        .map_err(|e| RuntimeError::io(format!("size memfd to {bytes} bytes"), e))?;
    Ok(fd)
}

/// Map a segment a peer passed, refusing one whose size is not the announced `bytes`.
pub fn map_shared(fd: &std::os::fd::OwnedFd, bytes: usize) -> Result<*mut u8> {
    use rustix::mm::{MapFlags, ProtFlags, mmap};
    let st = rustix::fs::fstat(fd).map_err(|e| RuntimeError::io("stat shared segment", e))?;
    if st.st_size as u64 != bytes as u64 || bytes == 0 {
        return Err(RuntimeError::Rendezvous(format!(
            "a peer's shared segment has {} bytes, {bytes} were announced",
            st.st_size
        )));
    }
    // SAFETY: a fresh shared mapping of the whole file, whose size was just checked; the
    // file is private to this job (memfd, mode 0600).
    let p = unsafe {
        mmap(
            std::ptr::null_mut(),
            bytes,
            ProtFlags::READ | ProtFlags::WRITE,
            MapFlags::SHARED,
            fd,
            0,
        )
    }
    .map_err(|e| RuntimeError::io("map shared segment", e))?;
    Ok(p.cast())
}

/// Pass a cuMem fd to a peer process (the launcher's SCM_RIGHTS helper).
pub fn send_vmm_fd(sock: &std::os::unix::net::UnixStream, fd: &std::os::fd::OwnedFd) -> Result<()> {
    crate::launch::send_fd(sock, fd)
}

/// Receive a peer's cuMem fd.
pub fn recv_vmm_fd(sock: &std::os::unix::net::UnixStream) -> Result<std::os::fd::OwnedFd> {
    crate::launch::recv_fd(sock)
}

#[cfg(test)]
mod tests {
    use super::*;

    const P2P: PairCaps = PairCaps {
        same_gpu: false,
        peer_access: true,
        vmm: true,
    };

    #[test]
    fn nccl_order_cumem_then_ipc_then_shm() {
        assert_eq!(choose(P2P, false, false), TransportKind::CudaP2p);
        assert_eq!(choose(P2P, true, false), TransportKind::CudaCuMem);
        assert_eq!(
            choose(PairCaps { vmm: false, ..P2P }, true, false),
            TransportKind::CudaIpc
        );
        assert_eq!(
            choose(
                PairCaps {
                    peer_access: false,
                    ..P2P
                },
                false,
                false
            ),
            TransportKind::Shm
        );
        assert_eq!(choose(P2P, false, true), TransportKind::Shm);
        // Ranks on one GPU reach each other without peer access.
        let same = PairCaps {
            same_gpu: true,
            peer_access: false,
            vmm: false,
        };
        assert_eq!(choose(same, false, false), TransportKind::CudaP2p);
        let mixed = [
            P2P,
            PairCaps {
                peer_access: false,
                ..P2P
            },
        ];
        assert_eq!(choose_job(&mixed, false, false), TransportKind::Shm);
        assert_eq!(
            choose_job(&[P2P, P2P], true, false),
            TransportKind::CudaCuMem
        );
    }

    #[test]
    fn process_jobs_pick_cumem_unless_told_ipc_or_unreachable() {
        assert_eq!(
            choose_processes(&[P2P], false, false),
            TransportKind::CudaCuMem
        );
        assert_eq!(
            choose_processes(&[P2P], false, true),
            TransportKind::CudaIpc
        );
        let no_vmm = PairCaps { vmm: false, ..P2P };
        assert_eq!(
            choose_processes(&[no_vmm], false, false),
            TransportKind::CudaIpc
        );
        let far = PairCaps {
            peer_access: false,
            ..P2P
        };
        assert_eq!(
            choose_processes(&[P2P, far], false, true),
            TransportKind::Shm
        );
        assert_eq!(choose_processes(&[P2P], true, false), TransportKind::Shm);
        // Two processes on one GPU: cuMem when the GPU has it, else IPC.
        let same = PairCaps {
            same_gpu: true,
            peer_access: false,
            vmm: true,
        };
        assert_eq!(
            choose_processes(&[same], false, false),
            TransportKind::CudaCuMem
        );
        assert_eq!(
            choose_processes(&[PairCaps { vmm: false, ..same }], false, false),
            TransportKind::CudaIpc
        );
    }

    #[test]
    fn every_pair_is_named_with_nccls_transport_name() {
        let s = pairs_note(3, 2, TransportKind::CudaCuMem);
        assert_eq!(
            s,
            "connections (rank[gpu]): 0[0] <-> 1[0], 0[0] <-> 2[1], 1[0] <-> 2[1] via P2P/CUMEM"
        );
        assert!(pairs_note(2, 1, TransportKind::CudaIpc).ends_with("via P2P/IPC"));
        assert!(pairs_note(2, 1, TransportKind::Shm).ends_with("via SHM"));
        assert!(pairs_note(2, 1, TransportKind::CudaP2p).ends_with("via P2P/direct pointer"));
        assert!(pairs_note(16, 1, TransportKind::Shm).contains("and 88 more pairs"));
    }

    #[test]
    fn a_shared_segment_of_the_wrong_size_is_refused() {
        let fd = shm_memfd(5000, "test").unwrap();
        let st = rustix::fs::fstat(&fd).unwrap();
        assert_eq!(st.st_size, 8192);
        assert_eq!(st.st_mode & 0o777, 0o600);
        let e = map_shared(&fd, 4096).unwrap_err().to_string();
        assert!(e.contains("8192 bytes, 4096 were announced"), "{e}");
        let p = map_shared(&fd, 8192).unwrap();
        // SAFETY: the mapping just made, 8192 bytes; zero-filled by the kernel.
        unsafe {
            assert_eq!(*p.add(8191), 0);
            rustix::mm::munmap(p.cast(), 8192).unwrap();
        }
    }

    #[test]
    fn sizes_round_up_to_the_granularity() {
        assert_eq!(round_to(1, 2 << 20), 2 << 20);
        assert_eq!(round_to(2 << 20, 2 << 20), 2 << 20);
        assert_eq!(round_to((2 << 20) + 1, 2 << 20), 4 << 20);
        assert_eq!(round_to(5, 0), 5);
    }

    #[test]
    fn a_file_descriptor_crosses_a_unix_socket() {
        // The cuMem path passes the driver's fd exactly like this; a memfd stands in.
        use std::io::{Read, Seek, Write};
        let (a, b) = std::os::unix::net::UnixStream::pair().unwrap();
        let fd = rustix::fs::memfd_create("topo-test", rustix::fs::MemfdFlags::CLOEXEC).unwrap();
        let mut f = std::fs::File::from(fd);
        f.write_all(b"cumem").unwrap();
        send_vmm_fd(&a, &f.try_clone().unwrap().into()).unwrap();
        let got = recv_vmm_fd(&b).unwrap();
        let mut g = std::fs::File::from(got);
        g.rewind().unwrap();
        let mut s = String::new();
        g.read_to_string(&mut s).unwrap();
        assert_eq!(s, "cumem");
    }
}
