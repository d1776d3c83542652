//! The catalogue's entries. Sources are NCCL's (github.com/NVIDIA/nccl); the versions are those
//! whose logs or sources show the message (the public threads cited beside each).

use super::types::{Cause, Level, Nodes, Signature};
use crate::Severity;
use topo_model::message::Code;

/// Every signature, WARNs first; each code appears once.
pub static CATALOGUE: &[Signature] = &[
    // NVLS buffers are multicast objects bound to every GPU through the NVSwitches
    // (src/transport/nvls.cc, 2.17+): NVIDIA/nccl#1338, #1488, #1788, #1029, pytorch#150852.
    Signature {
        code: Code::NvlsSetupFailed,
        source: "src/transport/nvls.cc",
        level: Level::Warn,
        message: "Cuda failure %d '%s' (or: Cuda failure '%s')",
        all: &["nvls.cc", "NCCL WARN"],
        any: &["Cuda failure", "failed"],
        versions: "2.17-2.30",
        meaning: "NCCL could not create or bind the NVLink SHARP (NVLS) multicast buffers at init, so init fails",
        causes: &[
            Cause {
                id: "multicast-state",
                tells: "CUDA error 401 ('the operation cannot be performed in the present state') from the multicast calls",
                applies: |c| c.matched("401") || c.matched("present state"),
                severity: Severity::Error,
                title: "NVLS setup failed (CUDA 401 on the multicast object): the NVSwitch fabric is not in a state that allows multicast (fabric manager not running or not finished, or restarted under running GPUs)",
                fix: "check `nvidia-smi -q | grep -A2 -i fabric` says Completed on every GPU and `systemctl status nvidia-fabricmanager` (same version as the driver); after a fabric manager restart reset the GPUs (`nvidia-smi -r`) or reboot; NCCL_NVLS_ENABLE=0 works around it at a price: without NVLS an 8-GPU H100/H200 allreduce peaks near 370 GB/s instead of about 480",
                not_for: "machines without NVSwitch never set NVLS up and cannot print it",
            },
            Cause {
                id: "multicast-unavailable-in-container",
                tells: "'NVLS multicast support is not available' or CUDA 'initialization error' beside it, in a pod or container",
                applies: |c| {
                    c.logged("NVLS multicast support is not available")
                        || c.matched("initialization error")
                },
                severity: Severity::Error,
                title: "NVLS setup failed: multicast is not usable where the job runs (a container or pod without the fabric's multicast, or one whose GPUs see another fabric state), and NCCL stops at init",
                fix: "run with NCCL_NVLS_ENABLE=0 in such containers (without NVLS an 8-GPU H100/H200 allreduce peaks near 370 GB/s instead of about 480), or give the pod all GPUs of the node with the fabric manager running on the host (`nvidia-smi -q | grep -A2 -i fabric`: Completed)",
                not_for: "machines without NVSwitch",
            },
            Cause {
                id: "nccl-2.26-bug",
                tells: "'invalid argument' on NCCL 2.26.0-2.26.4 (pytorch#150852: fixed in 2.26.5)",
                applies: |c| {
                    c.matched("invalid argument")
                        && c.minor_patch().is_some_and(|(m, p)| m == 26 && p < 5)
                },
                severity: Severity::Error,
                title: "NVLS buffer setup failed with 'invalid argument' on NCCL 2.26 before 2.26.5, whose NVLS allocation has this fault (pytorch#150852), or after a fabric manager restart without a GPU reset",
                fix: "upgrade NCCL to 2.26.5 or newer; if it stays, reset the GPUs after any fabric manager restart (`nvidia-smi -r` or reboot); NCCL_NVLS_ENABLE=0 works around it at a price: without NVLS an 8-GPU H100/H200 allreduce peaks near 370 GB/s instead of about 480",
                not_for: "machines without NVSwitch",
            },
            Cause {
                id: "fm-restarted",
                tells: "'invalid argument' from the NVLS buffer calls on any other version (NVIDIA/nccl#1338, #1488)",
                applies: |c| c.matched("invalid argument"),
                severity: Severity::Error,
                title: "NVLS buffer setup failed ('invalid argument' from CUDA's multicast calls): the GPUs and the NVSwitch fabric disagree, typically after the fabric manager was stopped or restarted without resetting the GPUs",
                fix: "reset the GPUs whenever the fabric manager is restarted (`nvidia-smi -r` with no process on them, or reboot; fabric manager guide, 'GPU reset'), keep the fabric manager and driver versions equal; NCCL_NVLS_ENABLE=0 works around it at a price: without NVLS an 8-GPU H100/H200 allreduce peaks near 370 GB/s instead of about 480",
                not_for: "machines without NVSwitch",
            },
            Cause {
                id: "nvls-out-of-memory",
                tells: "'out of memory' from the NVLS buffer allocation: NVLS buffers take GPU memory per channel",
                applies: |c| c.matched("out of memory"),
                severity: Severity::Error,
                title: "NVLS buffer setup ran out of GPU memory: NCCL's NVLS buffers (per channel and communicator) do not fit beside the application's memory",
                fix: "create communicators before the framework fills the GPU, or lower NVLS's share (NCCL_NVLS_NCHANNELS, NCCL_NVLS_CHUNKSIZE); NCCL_NVLS_ENABLE=0 frees it at a price: without NVLS an 8-GPU H100/H200 allreduce peaks near 370 GB/s instead of about 480",
                not_for: "machines without NVSwitch",
            },
            Cause {
                id: "other-cuda-failure",
                tells: "any other CUDA error from the NVLS calls",
                applies: |_| true,
                severity: Severity::Error,
                title: "NVLS setup failed in a CUDA multicast call: the GPUs, the driver and the NVSwitch fabric manager do not agree on multicast, and NCCL stops at init",
                fix: "check the fabric manager (`nvidia-smi -q | grep -A2 -i fabric` says Completed; same version as the driver) and reset the GPUs after any fabric manager restart; NCCL_NVLS_ENABLE=0 works around it at a price: without NVLS an 8-GPU H100/H200 allreduce peaks near 370 GB/s instead of about 480",
                not_for: "machines without NVSwitch",
            },
        ],
    },
    // SHM segments live in /dev/shm; Docker gives a container 64 MB (NVIDIA/nccl#290,
    // dmlc/xgboost#5963).
    Signature {
        code: Code::ShmExhausted,
        source: "src/include/shm.h (2.4-2.11), src/misc/shmutils.cc (2.12+)",
        level: Level::Warn,
        message: "Call to posix_fallocate failed : No space left on device / Error while creating shared memory segment %s (size %zu) / Error: failed to extend %s to %ld bytes, error: %s (%d)",
        all: &["NCCL WARN"],
        any: &[
            "posix_fallocate",
            "No space left on device",
            "Error while creating shared memory segment",
            "failed to extend",
            "could not create shared memory",
        ],
        versions: "2.4-2.30",
        meaning: "NCCL could not size a shared-memory segment in /dev/shm for the SHM transport or its proxy buffers",
        causes: &[Cause {
            id: "devshm-full",
            tells: "posix_fallocate fails with ENOSPC: /dev/shm is smaller than the segments (Docker's default is 64 MB)",
            applies: |_| true,
            severity: Severity::Error,
            title: "/dev/shm is too small: NCCL's shared-memory segments do not fit (posix_fallocate: No space left on device), so the SHM connection fails",
            fix: "give the container more shared memory: `docker run --shm-size=1g` (or `--ipc=host`); in Kubernetes mount an emptyDir with `medium: Memory` at /dev/shm; NCCL_SHM_DISABLE=1 avoids SHM but sends the same traffic through slower paths",
            not_for: "nothing to change on the GPUs or NCCL's variables: the segment size follows the buffers",
        }],
    },
    Signature {
        code: Code::ShmAttachFailed,
        source: "src/misc/shmutils.cc",
        level: Level::Warn,
        message: "Error while attaching to shared memory segment %s (size %zu) / Call to open failed: %s",
        all: &["NCCL WARN"],
        any: &[
            "Error while attaching to shared memory segment",
            "shmutils.cc",
        ],
        versions: "2.12-2.30",
        meaning: "a rank could not open the shared-memory segment its peer created in /dev/shm",
        causes: &[Cause {
            id: "devshm-not-shared",
            tells: "the peer's /dev/shm/nccl-* file does not exist for this process: the ranks do not share one /dev/shm (separate containers or IPC namespaces), or it was removed under them",
            applies: |_| true,
            severity: Severity::Error,
            title: "a rank cannot open its peer's shared-memory segment in /dev/shm: the ranks do not share one /dev/shm (other containers or IPC namespaces) or the segment was removed, so the SHM connection fails",
            fix: "run the ranks of a node in one container or with a shared IPC namespace (`--ipc=host`, or a common /dev/shm volume), keep /dev/shm from being cleaned while jobs run (systemd-logind RemoveIPC=no for service users); NCCL_SHM_DISABLE=1 avoids SHM; where the GPUs have NVLink, find why P2P is off instead (SHM should not be used there)",
            not_for: "",
        }],
    },
    // WSL2 exposes no PCI tree in /sys: NVIDIA/nccl#442, #573 (sjeaugey: NCCL cannot find the
    // GPU's PCI path; try NCCL 2.10+ on WSL).
    Signature {
        code: Code::PciSysfsMissing,
        source: "src/graph/xml.cc",
        level: Level::Warn,
        message: "Could not find real path of %s",
        all: &["NCCL WARN", "Could not find real path of"],
        any: &[],
        versions: "2.7-2.30",
        meaning: "topology detection cannot resolve the GPU's PCI device under /sys, so init stops",
        causes: &[
            Cause {
                id: "wsl-old-nccl",
                tells: "a /sys/class/pci_bus path on NCCL before 2.10: WSL2 (no PCI sysfs) on a version without WSL support",
                applies: |c| c.minor_patch().is_some_and(|(m, _)| m < 10),
                severity: Severity::Error,
                title: "NCCL cannot find the GPU's PCI device in /sys (WSL2 or a container without the PCI sysfs tree): this NCCL version needs it, so topology detection and init fail",
                fix: "on WSL2 use NCCL 2.10 or newer (it runs without the PCI sysfs tree); in a container mount the host's /sys (Docker does by default); on a single GPU a framework's non-NCCL backend also avoids it",
                not_for: "",
            },
            Cause {
                id: "no-pci-sysfs",
                tells: "any other version: the path is missing where NCCL runs",
                applies: |_| true,
                severity: Severity::Error,
                title: "NCCL cannot find the GPU's PCI device in /sys (WSL2, or a container or sandbox without the host's PCI sysfs tree), so topology detection and init fail",
                fix: "make /sys/class/pci_bus and /sys/devices visible where NCCL runs (mount the host's /sys), or give NCCL a topology file (NCCL_TOPO_FILE) on platforms that have no PCI tree",
                not_for: "",
            },
        ],
    },
    // init.cc creates a CUDA memory pool (cudaMemPoolCreate) for each communicator:
    // meta-pytorch/torchtune#2556 (init.cc:416), NVIDIA/nccl#2101 (vGPU with UVM off).
    Signature {
        code: Code::CudaMempoolUnsupported,
        source: "src/init.cc",
        level: Level::Warn,
        message: "Cuda failure 'operation not supported' (cudaMemPoolCreate)",
        all: &["NCCL WARN", "init.cc", "operation not supported"],
        any: &[],
        versions: "2.23-2.30",
        meaning: "CUDA refused a feature NCCL's init needs: the memory pool NCCL creates per communicator (cudaMemPoolCreate) is not supported by the GPU, driver or virtualisation layer",
        causes: &[Cause {
            id: "platform-without-mempools",
            tells: "the CUDA call at init, not a transport: vGPU without unified memory, very old GPUs, or an interposed libcuda",
            applies: |_| true,
            severity: Severity::Error,
            title: "NCCL init fails: CUDA says 'operation not supported' for a feature NCCL's init needs, the memory pool it creates per communicator (cudaMemPoolCreate, 2.23 and later) first among them: the platform (a vGPU without unified memory, an old GPU, a CUDA interposer) lacks it",
            fix: "on VMware vGPU enable unified memory for the VM's vGPU profile (`pciPassthru0.cfg.enable_uvm = 1`); otherwise use a GPU, driver or host where `cudaMemPoolCreate` works (a bare-metal or passthrough GPU), or an NCCL version older than the memory pool (before 2.23); NCCL_P2P_DISABLE and NCCL_CUMEM_ENABLE do not change it",
            not_for: "transport variables (P2P, SHM, CUMEM) do not reach this call",
        }],
    },
    // P2P/IPC opens the peer's cudaIpcMemHandle (src/transport/p2p.cc): ray_lightning#24.
    Signature {
        code: Code::CudaIpcUnsupported,
        source: "src/transport/p2p.cc",
        level: Level::Warn,
        message: "failed to open CUDA IPC handle : %d %s",
        all: &["NCCL WARN", "failed to open CUDA IPC handle"],
        any: &[],
        versions: "2.4-2.30",
        meaning: "NCCL chose P2P between two GPUs, but CUDA refused to map the peer's memory",
        causes: &[Cause {
            id: "peer-access-unsupported",
            tells: "CUDA error 217 'peer access is not supported between these two devices' (also other codes)",
            applies: |_| true,
            severity: Severity::Error,
            title: "NCCL picked P2P between the GPUs but CUDA refuses peer access between them ('peer access is not supported'): P2P is not really available (consumer GPUs, the IOMMU or ACS, a VM)",
            fix: "set NCCL_P2P_DISABLE=1 so NCCL uses shared memory; on data-centre GPUs check the IOMMU (`iommu=pt`) and ACS on the PCIe switches (`topo diagnose` on the machine); in a VM the hypervisor decides peer access, so ask for P2P-capable passthrough rather than moving cards",
            not_for: "inside a VM nothing on the guest moves hardware",
        }],
    },
    Signature {
        code: Code::IbDeviceOpenFailed,
        source: "src/transport/net_ib.cc, src/misc/ibvwrap.cc",
        level: Level::Warn,
        message: "NET/IB : Unable to open device %s / Call to ibv_open_device failed",
        all: &["NCCL WARN"],
        any: &["Unable to open device", "ibv_open_device"],
        versions: "2.4-2.30",
        meaning: "the verbs library lists an RDMA device that this process cannot open",
        causes: &[Cause {
            id: "device-not-in-container",
            tells: "the device is listed but its /dev/infiniband/uverbs* node is missing or not permitted (containers), or the driver is down",
            applies: |_| true,
            severity: Severity::Error,
            title: "NCCL cannot open an RDMA device the verbs library lists: in a container /dev/infiniband is missing or not permitted, so NCCL drops the device (and may fall back to sockets)",
            fix: "pass the devices into the container (`--device=/dev/infiniband`, or the RDMA device plugin in Kubernetes) with `--cap-add=IPC_LOCK` and an unlimited memlock (`ulimit -l unlimited`); on the host check `ibv_devinfo` and the mlx5 driver",
            not_for: "",
        }],
    },
    // The bootstrap and IB out-of-band sockets use the interface's address family:
    // NVIDIA/nccl#224 (and #210: IPv6/IPv4 mismatch or no IP interface).
    Signature {
        code: Code::SocketFamilyError,
        source: "src/include/socket.h (2.4-2.11), src/misc/socket.cc (2.12+)",
        level: Level::Warn,
        message: "Net : Socket creation failed : %s",
        all: &["NCCL WARN", "Socket creation failed"],
        any: &[],
        versions: "2.4-2.30",
        meaning: "NCCL could not open a TCP socket on the address it chose (bootstrap or the IB out-of-band connection)",
        causes: &[Cause {
            id: "address-family",
            tells: "'Address family not supported by protocol': the address is IPv6 (or IPv4) where the host has that family disabled, or the interface has no address of it",
            applies: |_| true,
            severity: Severity::Error,
            title: "NCCL cannot open a socket in the interface's address family ('Address family not supported'): the chosen interface's address is IPv6 (or IPv4) where that family is off, so connection setup fails",
            fix: "pick an interface with an IPv4 address on every node (NCCL_SOCKET_IFNAME=<iface>) and force the family with NCCL_SOCKET_FAMILY=AF_INET (or AF_INET6 where only IPv6 exists); the IB transport's out-of-band socket uses the same interface",
            not_for: "",
        }],
    },
    Signature {
        code: Code::SharedMemExceeded,
        source: "src/enqueue.cc",
        level: Level::Warn,
        message: "cudaArch %d ncclMaxSharedMem %d exceeds device/fn maxSharedMem %zu",
        all: &["NCCL WARN", "ncclMaxSharedMem", "exceeds"],
        any: &[],
        versions: "2.12-2.30",
        meaning: "NCCL's kernels need more shared memory per block than this GPU allows",
        causes: &[Cause {
            id: "build-for-other-arch",
            tells: "the cudaArch in the line against the GPU: an NCCL build whose kernels target another architecture, or a GPU older than the build supports",
            applies: |_| true,
            severity: Severity::Error,
            title: "NCCL's kernels need more shared memory than the GPU gives (ncclMaxSharedMem exceeds the device's limit): the NCCL build does not match this GPU's architecture",
            fix: "use an NCCL built for this GPU's compute capability (the framework's bundled NCCL or NVIDIA's packages for the CUDA version), and a driver that supports it",
            not_for: "",
        }],
    },
    // The CUDA driver runs code built for its CUDA version or older (NVIDIA/nccl#955:
    // cudaDriverVersion 11000 under NCCL 2.14.3+cuda11.7).
    Signature {
        code: Code::DriverOlderThanCuda,
        source: "src/init.cc",
        level: Level::Any,
        message: "cudaDriverVersion %d (against NCCL version %s+cuda%d.%d); WARN Cuda failure 'CUDA driver version is insufficient for CUDA runtime version'",
        all: &[],
        any: &[
            "cudaDriverVersion",
            "driver version is insufficient",
            "not supported in the installed CUDA driver",
        ],
        versions: "2.9-2.30",
        meaning: "the CUDA version the driver supports, beside the CUDA NCCL was built for",
        causes: &[Cause {
            id: "driver-too-old",
            tells: "cudaDriverVersion below the +cudaX.Y of the version line",
            applies: |c| {
                c.matched("insufficient")
                    || c.matched("installed CUDA driver")
                    || matches!((c.log.cuda_driver_version, c.log.cuda_build), (Some(d), Some(b)) if d < b)
            },
            severity: Severity::Error,
            title: "the GPU driver is older than the CUDA NCCL was built for (cudaDriverVersion below the version line's +cuda): CUDA calls fail with 'API call is not supported in the installed CUDA driver'",
            fix: "install a driver that supports the CUDA NCCL was built for (`nvidia-smi` shows the highest CUDA version it supports), or use an NCCL and framework build for the driver's CUDA version; in a container the host's driver counts, not the image's",
            not_for: "the driver cannot be upgraded inside a container",
        }],
    },
    // The bootstrap finds no interface matching NCCL_SOCKET_IFNAME (src/bootstrap.cc).
    Signature {
        code: Code::SocketInterfaceMissing,
        source: "src/bootstrap.cc, src/misc/socket.cc",
        level: Level::Warn,
        message: "Bootstrap : no socket interface found / NET/Socket : no interface found",
        all: &["NCCL WARN"],
        any: &[
            "no socket interface found",
            "no interface found",
            "No usable listening interface",
        ],
        versions: "2.4-2.30",
        meaning: "NCCL found no network interface to bootstrap on: none matches NCCL_SOCKET_IFNAME, or none is up",
        causes: &[Cause {
            id: "ifname-matches-nothing",
            tells: "the interface named (or NCCL's default order) does not exist where this rank runs",
            applies: |_| true,
            severity: Severity::Error,
            title: "NCCL finds no network interface to start on: NCCL_SOCKET_IFNAME names none that exists and is up here (interface names differ between hosts and containers), so init fails",
            fix: "list the interfaces where the rank runs (`ip -br addr`) and set NCCL_SOCKET_IFNAME to one with an address on every node (a prefix like `eth` matches eth0, eth1; `^docker,lo` excludes), or unset it",
            not_for: "",
        }],
    },
    // A peer's socket closed or refused (src/misc/socket.cc): the other side died or cannot
    // reach this one.
    Signature {
        code: Code::PeerConnectionLost,
        source: "src/misc/socket.cc (2.12+), src/include/socket.h (before)",
        level: Level::Warn,
        message: "socketProgress: Connection closed by remote peer / Connection refused / Connection reset by peer",
        all: &["NCCL WARN"],
        any: &[
            "Connection closed by remote peer",
            "Connection refused",
            "Connection reset by peer",
            "Connection timed out",
        ],
        versions: "2.4-2.30",
        meaning: "a socket to another rank was closed, reset or refused: that rank exited, or the two cannot reach each other",
        causes: &[Cause {
            id: "peer-gone-or-unreachable",
            tells: "the first failure is usually elsewhere: the peer's own log shows why it exited; a refusal at init means the interface or a firewall",
            applies: |_| true,
            severity: Severity::Error,
            title: "a connection to another rank was closed or refused: that rank died first (its own log has the cause) or the ranks cannot reach each other on the interface NCCL chose",
            fix: "read the first error across all ranks' logs (the rank that exited first); at init check NCCL_SOCKET_IFNAME names an interface every node can reach and that no firewall blocks the ports between nodes",
            not_for: "",
        }],
    },
    Signature {
        code: Code::CudaOutOfMemory,
        source: "src/include/alloc.h, src/init.cc, src/transport/*.cc",
        level: Level::Warn,
        message: "Cuda failure 'out of memory' / Failed to CUDA calloc %ld bytes",
        all: &["NCCL WARN"],
        any: &[
            "out of memory",
            "Failed to CUDA calloc",
            "CUDA_ERROR_OUT_OF_MEMORY",
        ],
        versions: "2.4-2.30",
        meaning: "NCCL could not allocate GPU memory for its buffers",
        causes: &[Cause {
            id: "gpu-memory-full",
            tells: "the application holds the GPU memory (a framework's caching allocator) or another process shares the GPU",
            applies: |_| true,
            severity: Severity::Error,
            title: "NCCL cannot allocate its GPU buffers (out of memory): the application or another process holds the GPU's memory",
            fix: "create the communicator before the framework fills the GPU (or lower its memory fraction), check `nvidia-smi` for other processes on the GPU, and reduce NCCL's buffers if needed (NCCL_BUFFSIZE, fewer channels with NCCL_MAX_NCHANNELS)",
            not_for: "",
        }],
    },
    // IB work completions with an error (src/transport/net_ib.cc): the fabric dropped the
    // transfer after the NIC's retries.
    Signature {
        code: Code::IbCompletionError,
        source: "src/transport/net_ib.cc",
        level: Level::Warn,
        message: "NET/IB : Got completion from peer %s with status=%d opcode=%d len=%d vendor err %d",
        all: &["NCCL WARN"],
        any: &["Got completion from peer", "Got completion with error"],
        versions: "2.4-2.30",
        meaning: "an RDMA transfer failed after the NIC's retries (status 12: transport retry counter exceeded)",
        causes: &[Cause {
            id: "fabric-error",
            tells: "the status: 12 (retry exceeded) means the peer or the path was unreachable for the retry window; 5 (flushed) follows another failure",
            applies: |_| true,
            severity: Severity::Error,
            title: "an InfiniBand/RoCE transfer failed after the NIC's retries (completion with error): a link, cable or switch problem, a peer that died, or RoCE without lossless settings",
            fix: "check the ports on both hosts (`ibstat`, `ibdiagnet`, link flaps in `dmesg`), the peer's own log, and on RoCE the PFC/ECN settings and NCCL_IB_GID_INDEX; NCCL_IB_TIMEOUT=22 widens the retry window while the fabric is investigated",
            not_for: "",
        }],
    },
    Signature {
        code: Code::IbVerbsMissing,
        source: "src/misc/ibvwrap.cc",
        level: Level::Warn,
        message: "Failed to open libibverbs.so[.1]",
        all: &["NCCL WARN", "libibverbs"],
        any: &[],
        versions: "2.4-2.30",
        meaning: "the verbs library is not installed, so NCCL's IB transport is off and NCCL uses TCP sockets between nodes",
        causes: &[
            Cause {
                id: "rdma-hardware-unused",
                tells: "several nodes, or sockets over IPoIB interfaces (ib*): RDMA hardware is there but not used",
                applies: |c| c.nodes == Nodes::Many || c.logged("]ib"),
                severity: Severity::Warning,
                title: "libibverbs is missing, so NCCL cannot use InfiniBand/RoCE: traffic between nodes goes over TCP sockets (here on the IPoIB interfaces) instead of RDMA",
                fix: "install rdma-core (libibverbs1 and the provider, e.g. libmlx5) in the image or host, and in containers pass /dev/infiniband; NCCL then logs `NET/IB : Using [0]mlx5_...`; traffic inside a node (NVLink, PCIe) is not affected",
                not_for: "",
            },
            Cause {
                id: "single-node",
                tells: "one node or no sign of RDMA hardware: nothing needs IB",
                applies: |_| true,
                severity: Severity::Info,
                title: "libibverbs is not installed, so NCCL's IB transport is off: harmless unless the job spans nodes with InfiniBand/RoCE (a one-node job does not use the network)",
                fix: "nothing for a one-node job; for jobs across nodes with RDMA NICs install rdma-core (libibverbs1, libmlx5)",
                not_for: "",
            },
        ],
    },
    Signature {
        code: Code::IbNoDevice,
        source: "src/transport/net_ib.cc (or the net plugin)",
        level: Level::Info,
        message: "NET/IB : No device found.",
        all: &["NET/IB : No device found"],
        any: &[],
        versions: "2.4-2.30",
        meaning: "the IB transport found no usable RDMA device, so NCCL uses TCP sockets between nodes",
        causes: &[
            Cause {
                id: "ib-hca-filter",
                tells: "NCCL_IB_HCA set by the environment: the filter names no device present here",
                applies: |c| c.log.env.contains_key("NCCL_IB_HCA"),
                severity: Severity::Warning,
                title: "no RDMA device matches NCCL_IB_HCA, so NCCL finds no IB device and falls back to TCP sockets (NET/Socket)",
                fix: "set NCCL_IB_HCA to devices `ibv_devices` lists on every node (`mlx5_0,mlx5_1`; `=mlx5_0` for an exact name; `^mlx5_4` to exclude), or unset it",
                not_for: "",
            },
            Cause {
                id: "plugin-without-devices",
                tells: "an RDMA net plugin loaded (IBext, the NCCL RDMA plugin) or several nodes, and then no device: the job expects RDMA",
                applies: |c| {
                    c.nodes == Nodes::Many
                        || c.logged("P2P plugin IB")
                        || c.logged("Loaded net plugin NCCL RDMA")
                },
                severity: Severity::Warning,
                title: "the IB transport finds no RDMA device, so NCCL falls back to TCP sockets (NET/Socket) across every interface it finds: in a container /dev/infiniband (or the verbs provider) is missing",
                fix: "pass the RDMA devices in (`--device=/dev/infiniband --cap-add=IPC_LOCK`, or the RDMA device plugin in Kubernetes) and install the verbs provider (libmlx5); pin NCCL_SOCKET_IFNAME to the data interface meanwhile, not a bridge like virbr0 or docker0",
                not_for: "",
            },
            Cause {
                id: "single-node",
                tells: "no sign of a multi-node job: nothing needs IB",
                applies: |_| true,
                severity: Severity::Info,
                title: "no InfiniBand/RoCE device found (NET/IB : No device found): harmless on one node, where NCCL does not use the network",
                fix: "nothing for a one-node job; across nodes with RDMA NICs pass /dev/infiniband into the container and install the verbs provider",
                not_for: "",
            },
        ],
    },
    // The bootstrap and socket transport bind the interface NCCL_SOCKET_IFNAME names, or the
    // first it finds (src/misc/socket.cc, src/transport/net_socket.cc): NVIDIA/nccl#1053, #300.
    Signature {
        code: Code::SocketOnLoopback,
        source: "src/bootstrap.cc, src/transport/net_socket.cc",
        level: Level::Info,
        message: "Bootstrap : Using lo:127.0.0.1<0> / NET/Socket : Using [0]lo:127.0.0.1<0>",
        all: &["lo:127."],
        any: &["Using", "OOB"],
        versions: "2.4-2.30",
        meaning: "NCCL's sockets are on the loopback interface, which reaches only this host",
        causes: &[
            Cause {
                id: "multi-node",
                tells: "several nodes: ranks elsewhere cannot reach 127.0.0.1",
                applies: |c| c.nodes == Nodes::Many,
                severity: Severity::Error,
                title: "NCCL's sockets are bound to the loopback interface (lo, 127.0.0.1) in a job across nodes: other nodes cannot reach it, so bootstrap or the socket transport hangs or fails",
                fix: "set NCCL_SOCKET_IFNAME to the interface that carries the node's routable address (`ip -br addr`); where that address sits on lo (BGP unnumbered), name the routed interface and give NCCL that address",
                not_for: "",
            },
            Cause {
                id: "network-intended",
                tells: "node count unknown, but IB switched off by the environment (or used) while sockets run on lo: the job is set up for a network",
                applies: |c| {
                    c.nodes == Nodes::Unknown
                        && (c.env_is("NCCL_IB_DISABLE", "1")
                            || c.log.connections.iter().any(|x| x.transport.is_net()))
                },
                severity: Severity::Warning,
                title: "NCCL's network is TCP on the loopback interface (lo, 127.0.0.1) with IB switched off: that works only when every rank is on this host; ranks on other nodes cannot reach it",
                fix: "for a job across nodes set NCCL_SOCKET_IFNAME to the interface with the node's routable address (where that address sits on lo, name the routed interface), and unset NCCL_IB_DISABLE where the nodes have RDMA NICs",
                not_for: "",
            },
            Cause {
                id: "one-node",
                tells: "one node, or nothing suggests more: loopback is enough",
                applies: |_| true,
                severity: Severity::Info,
                title: "NCCL's sockets use the loopback interface (lo, 127.0.0.1): fine when every rank is on this host, as here as far as the log shows",
                fix: "nothing for a one-node job; a job across nodes needs NCCL_SOCKET_IFNAME set to a routable interface",
                not_for: "",
            },
        ],
    },
];
