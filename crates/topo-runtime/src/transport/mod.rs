//! Transports: how bytes get from one rank to another, behind one trait.
//!
//! Built: [`shm::ShmTransport`] over memory every rank maps, either an anonymous mapping
//! shared by threads ([`TransportKind::InProcess`]) or a memfd shared by processes on one host
//! ([`TransportKind::Shm`]); and [`tcp::TcpTransport`] between hosts
//! ([`TransportKind::Tcp`], several sockets per peer like NCCL's NET/Socket).
//!
//! Seams left for the CUDA backend and InfiniBand: the variants below marked *not built* name
//! where they plug in. A CUDA transport implements the same trait with device memory as
//! storage (`storage`/`peer_storage` return device pointers mapped through P2P, IPC handles or
//! cuMem fds passed like the memfd here), and its kernels replace `kernels`; a verbs
//! transport loads `libibverbs.so.1` at run time and implements `send`/`recv` with RDMA writes
//! into registered FIFOs.
use std::time::Duration;

use crate::error::Result;
use crate::types::Protocol;

pub mod shm;
pub mod tcp;

/// Which transport a rank uses.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum TransportKind {
    /// Threads in one process, sharing an anonymous mapping.
    InProcess,
    /// Processes on one host, sharing a memfd passed over a Unix socket.
    Shm,
    /// Sockets between hosts (or over loopback).
    Tcp,
    /// CUDA peer-to-peer in one process (cuCtxEnablePeerAccess, direct pointers).
    CudaP2p,
    /// CUDA IPC handles (cuIpcGetMemHandle) between processes (NCCL P2P/IPC).
    CudaIpc,
    /// cuMem VMM allocations exported as POSIX fds between processes (NCCL P2P/CUMEM).
    CudaCuMem,
    /// Not built: InfiniBand verbs, loaded at run time.
    IbVerbs,
}

impl TransportKind {
    /// The name used in reports.
    pub fn name(self) -> &'static str {
        match self {
            TransportKind::InProcess => "in-process",
            TransportKind::Shm => "shm",
            TransportKind::Tcp => "tcp",
            TransportKind::CudaP2p => "cuda-p2p",
            TransportKind::CudaIpc => "cuda-ipc",
            TransportKind::CudaCuMem => "cuda-cumem",
            TransportKind::IbVerbs => "ib-verbs",
        }
    }
}

/// Default time a rank waits for a peer before giving up.
pub const DEFAULT_TIMEOUT: Duration = Duration::from_secs(30);

/// What every transport offers the executor.
pub trait Transport: Send {
    /// Which transport this is.
    fn kind(&self) -> TransportKind;
    /// This rank.
    fn rank(&self) -> usize;
    /// Ranks in the job.
    fn nranks(&self) -> usize;
    /// Largest message one `send` may carry under `proto` (a multiple of 64 bytes).
    fn piece_bytes(&self, proto: Protocol) -> usize;
    /// Bytes a (peer, channel) connection buffers; a step moves at most half of it.
    fn fifo_bytes(&self, proto: Protocol) -> usize;
    /// Send one message to `peer` on `chan`.
    fn send(&mut self, peer: usize, chan: usize, proto: Protocol, data: &[u8]) -> Result<()>;
    /// Receive one message of exactly `out.len()` bytes from `peer` on `chan`.
    fn recv(&mut self, peer: usize, chan: usize, proto: Protocol, out: &mut [u8]) -> Result<()>;
    /// Every rank arrives before any leaves.
    fn barrier(&mut self) -> Result<()>;
    /// This rank's buffer storage: base pointer (4096-byte aligned) and length in bytes.
    fn storage(&mut self) -> (*mut u8, usize);
    /// Bytes of storage every rank has (the same for all ranks).
    fn peer_storage_len(&self) -> usize;
    /// Another rank's storage base, when this rank can load and store it directly (single copy).
    fn peer_storage(&self, rank: usize) -> Option<*mut u8>;
    /// Tell the other ranks that the job failed because of `rank` (they stop waiting).
    fn abort(&self, rank: usize);
    /// This rank has finished its part successfully: its exit is not a loss.
    fn close(&mut self) {}
    /// Share `units` pieces of work among the ranks that call this together (dynamically:
    /// whoever runs takes the next unit, so a descheduled rank does not hold the others up),
    /// calling `work(unit)` for the units this rank takes; returns when every unit is done,
    /// by any rank, with its results visible. `Ok(false)`: not supported by this transport.
    fn shared_work(&mut self, units: u64, work: &mut dyn FnMut(u64)) -> Result<bool> {
        let _ = (units, work);
        Ok(false)
    }
}
