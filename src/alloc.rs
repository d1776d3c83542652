//! The allocator: mimalloc instead of glibc's malloc.
//!
//! topo's large documents are millions of small allocations (labels, vectors, map entries);
//! at 32,768 GPUs glibc's malloc and free took a third of `topo show`. mimalloc is built
//! without transparent huge pages (`no_thp`): with THP on `madvise`, as on most kernels,
//! faulting in its huge pages compacted memory in the kernel and cost `topo show` up to a
//! second of system time, varying from run to run.
//!
//! Freed pages go back to the kernel at once ([`configure`]): by default mimalloc keeps them
//! a while, which raised the peak memory of a 32,768-GPU plan from 372 to 451 MiB for a few
//! hundredths of a second saved.

#[global_allocator]
static ALLOC: mimalloc::MiMalloc = mimalloc::MiMalloc;

/// `mi_option_purge_delay` in mimalloc.h of the C library that libmimalloc-sys 0.1.49
/// builds (mimalloc v3): the Rust bindings name the option after it (checked in the tests)
/// but not this one.
const PURGE_DELAY: libmimalloc_sys::mi_option_t = 15;

/// Sets the allocator's options; call first thing in `main`.
pub fn configure() {
    // SAFETY: mi_option_set only stores a value in mimalloc's option table; any thread may
    // call it at any time, and the value is read on the next purge.
    unsafe { libmimalloc_sys::mi_option_set(PURGE_DELAY, 0) };
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_purge_delay_option_comes_before_its_named_neighbour() {
        assert_eq!(libmimalloc_sys::mi_option_use_numa_nodes, PURGE_DELAY + 1);
        configure();
        // SAFETY: reads mimalloc's option table.
        assert_eq!(unsafe { libmimalloc_sys::mi_option_get(PURGE_DELAY) }, 0);
    }
}
