//! NVML (loaded at run time) for GPUs, NVLink and P2P status.
