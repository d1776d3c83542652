// topo's CUDA kernels: NCCL's generic primitive (receive, combine with a local input, write a
// local output, send on) run over FIFOs in peer memory, for the Simple, LL and LL128
// protocols. Compiled at run time with NVRTC (no headers: NVRTC ships none in the Python
// wheels), one instantiation per (operator, type).
//
// One launch runs a rank's whole schedule for one collective call: one CTA per channel walks
// that channel's steps in order (the steps come from topo-runtime's `schedule`, packed by
// `cuda::pack`). A connection (sender -> receiver, channel) is a ring of `nslots` slots in
// the RECEIVER's memory (the sender writes remotely, the receiver reads locally) plus a head
// counter in the SENDER's memory (the receiver returns credit remotely, the sender polls
// locally); NCCL places P2P buffers the same way (src/transport/p2p.cc, 2.19+: the receiver
// allocates, the sender writes). Pieces on a connection are numbered from 0 for the life of
// the buffers, so the numbers (and LL/LL128 flags) carry over between launches.
//
// Protocols (NCCL's src/device/prims_{simple,ll,ll128}.h, 2.19-2.23, for what each signals):
//   Simple: slot = data; the sender stores the data, fences (system scope: the FIFO may be
//           pinned host memory), then bumps the receiver's tail counter.
//   LL:     16-byte lines {data0, flag, data1, flag}: 8 data bytes, each 4 bytes paired with
//           the flag in one 8-byte word, so a flag seen means its data is there. No fence.
//   LL128:  128-byte lines: 120 data bytes + an 8-byte flag, 8 threads per line. The sender
//           stores the data, fences once per round of lines, then stores each line's last 16 bytes
//           (8 data + flag). NCCL relies on NVLink delivering a warp's 128-byte store whole
//           and skips the fence; the fence here keeps this correct over PCIe and host memory.
// Every wait is bounded: it checks the shared abort word and a deadline (%globaltimer), and
// on failure records (code, channel, step) in `status` and sets the abort word.

typedef unsigned char u8;
typedef unsigned short u16;
typedef unsigned int u32;
typedef int i32;
typedef unsigned long long u64;
typedef long long i64;

#define TOPO_THREADS 512
#define TOPO_NONE 0xffffffffffffffffull
#define TOPO_FINISH 1u

#define TOPO_OK 0u
#define TOPO_ERR_TIMEOUT 1u
#define TOPO_ERR_ABORTED 2u

// Must match `cuda::pack::DevStep` (40 bytes).
struct DevStep {
    u64 count;    // elements
    u64 in_off;   // bytes from the rank's base, or TOPO_NONE
    u64 out_off;  // bytes from the rank's base, or TOPO_NONE
    i32 recv_from;  // peer or -1
    i32 send_to;    // peer or -1
    u32 flags;
    u32 pad;
};

// Must match `cuda::pack::DevConn` (24 bytes). One per (peer, channel), in each direction.
struct DevConn {
    u8* fifo;   // recv: this rank's FIFO from the peer; send: the peer's FIFO from this rank
    u64* tail;  // Simple: recv: local tail; send: the peer's tail (remote)
    u64* head;  // recv: the sender's head (remote); send: local head
};

// Must match `cuda::pack::DevArgs` (104 bytes).
struct DevArgs {
    const DevStep* steps;
    const u32* chan_start;  // nch + 1 entries
    u8* base;               // this rank's buffers
    const DevConn* recv;    // [peer * nch + chan]
    const DevConn* send;    // [peer * nch + chan]
    u64* recv_seq;          // [peer * nch + chan] pieces received, over the life of the FIFOs
    u64* send_seq;          // [peer * nch + chan] pieces sent
    u32* status;            // [code, channel, step]
    u32* abort;             // shared by all ranks of the job
    u64 timeout_ns;
    u32 nch;
    u32 nranks;
    u32 proto;        // 0 Simple, 1 LL, 2 LL128
    u32 nslots;
    u32 slot_bytes;   // FIFO bytes per slot (lines included)
    u32 piece_bytes;  // data bytes per slot
};

// ---------------------------------------------------------------- element types

__device__ __forceinline__ float h2f(u16 h) {
    float f;
    asm("cvt.f32.f16 %0, %1;" : "=f"(f) : "h"(h));
    return f;
}
__device__ __forceinline__ u16 f2h(float f) {
    u16 h;
    asm("cvt.rn.f16.f32 %0, %1;" : "=h"(h) : "f"(f));
    return h;
}
__device__ __forceinline__ float b2f(u16 b) { return __uint_as_float(((u32)b) << 16); }
__device__ __forceinline__ u16 f2b(float f) {
    // Round to nearest even, NaN kept quiet (what the host's `half::bf16::from_f32` does).
    u32 x = __float_as_uint(f);
    if ((x & 0x7fffffffu) > 0x7f800000u) return (u16)((x >> 16) | 0x40u);
    u32 r = 0x7fffu + ((x >> 16) & 1u);
    return (u16)((x + r) >> 16);
}

// S: storage, C: compute type. Integers wrap (the host's wrapping_add/wrapping_mul).
struct TF32 { typedef float S; typedef float C;
    static __device__ __forceinline__ C ld(S s) { return s; }
    static __device__ __forceinline__ S st(C c) { return c; } };
struct TF64 { typedef double S; typedef double C;
    static __device__ __forceinline__ C ld(S s) { return s; }
    static __device__ __forceinline__ S st(C c) { return c; } };
struct TF16 { typedef u16 S; typedef float C;
    static __device__ __forceinline__ C ld(S s) { return h2f(s); }
    static __device__ __forceinline__ S st(C c) { return f2h(c); } };
struct TBF16 { typedef u16 S; typedef float C;
    static __device__ __forceinline__ C ld(S s) { return b2f(s); }
    static __device__ __forceinline__ S st(C c) { return f2b(c); } };
struct TI32 { typedef i32 S; typedef i32 C;
    static __device__ __forceinline__ C ld(S s) { return s; }
    static __device__ __forceinline__ S st(C c) { return c; } };
struct TI64 { typedef i64 S; typedef i64 C;
    static __device__ __forceinline__ C ld(S s) { return s; }
    static __device__ __forceinline__ S st(C c) { return c; } };
struct TU8 { typedef u8 S; typedef u32 C;
    static __device__ __forceinline__ C ld(S s) { return s; }
    static __device__ __forceinline__ S st(C c) { return (u8)c; } };

template <typename C> __device__ __forceinline__ C wadd(C a, C b) { return a + b; }
template <> __device__ __forceinline__ i32 wadd<i32>(i32 a, i32 b) { return (i32)((u32)a + (u32)b); }
template <> __device__ __forceinline__ i64 wadd<i64>(i64 a, i64 b) { return (i64)((u64)a + (u64)b); }
template <typename C> __device__ __forceinline__ C wmul(C a, C b) { return a * b; }
template <> __device__ __forceinline__ i32 wmul<i32>(i32 a, i32 b) { return (i32)((u32)a * (u32)b); }
template <> __device__ __forceinline__ i64 wmul<i64>(i64 a, i64 b) { return (i64)((u64)a * (u64)b); }

struct OpSum { template <typename C> static __device__ __forceinline__ C f(C a, C b) { return wadd(a, b); } enum { AVG = 0 }; };
struct OpProd { template <typename C> static __device__ __forceinline__ C f(C a, C b) { return wmul(a, b); } enum { AVG = 0 }; };
struct OpMin { template <typename C> static __device__ __forceinline__ C f(C a, C b) { return b < a ? b : a; } enum { AVG = 0 }; };
struct OpMax { template <typename C> static __device__ __forceinline__ C f(C a, C b) { return a < b ? b : a; } enum { AVG = 0 }; };
struct OpAvg { template <typename C> static __device__ __forceinline__ C f(C a, C b) { return wadd(a, b); } enum { AVG = 1 }; };

// ---------------------------------------------------------------- memory helpers

__device__ __forceinline__ uint4 ld_volatile16(const void* p) {
    uint4 v;
    asm volatile("ld.volatile.v4.u32 {%0,%1,%2,%3}, [%4];"
                 : "=r"(v.x), "=r"(v.y), "=r"(v.z), "=r"(v.w) : "l"(p) : "memory");
    return v;
}
__device__ __forceinline__ void st_volatile16(void* p, uint4 v) {
    asm volatile("st.volatile.v4.u32 [%0], {%1,%2,%3,%4};"
                 :: "l"(p), "r"(v.x), "r"(v.y), "r"(v.z), "r"(v.w) : "memory");
}
__device__ __forceinline__ u64 ld_volatile64(const u64* p) {
    u64 v;
    asm volatile("ld.volatile.u64 %0, [%1];" : "=l"(v) : "l"(p) : "memory");
    return v;
}
__device__ __forceinline__ void st_volatile64(u64* p, u64 v) {
    asm volatile("st.volatile.u64 [%0], %1;" :: "l"(p), "l"(v) : "memory");
}
__device__ __forceinline__ u64 now_ns() {
    u64 t;
    asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t));
    return t;
}

// `n` bytes (a multiple of the element size, at most 16) from `p`: one 16-byte load when
// aligned and whole, element by element otherwise.
template <typename T>
__device__ __forceinline__ uint4 load_bytes(const u8* p, int n) {
    if (n == 16 && (((u64)p) & 15) == 0) return *(const uint4*)p;
    union { uint4 v; typename T::S e[16 / sizeof(typename T::S)]; } u;
    u.v = make_uint4(0, 0, 0, 0);
    const typename T::S* q = (const typename T::S*)p;
    for (int k = 0; k < n / (int)sizeof(typename T::S); k++) u.e[k] = q[k];
    return u.v;
}
template <typename T>
__device__ __forceinline__ void store_bytes(u8* p, uint4 v, int n) {
    if (n == 16 && (((u64)p) & 15) == 0) { *(uint4*)p = v; return; }
    union { uint4 v; typename T::S e[16 / sizeof(typename T::S)]; } u;
    u.v = v;
    typename T::S* q = (typename T::S*)p;
    for (int k = 0; k < n / (int)sizeof(typename T::S); k++) q[k] = u.e[k];
}

// v = recv (op) input, then the post-op (AVG divides by nranks) when finishing.
template <typename T, typename Op>
__device__ __forceinline__ uint4 combine(uint4 r, bool have_r, uint4 in, bool have_in, int n,
                                         bool fin, u32 nranks) {
    typedef typename T::S S;
    union U { uint4 v; S e[16 / sizeof(S)]; };
    U a, b, o;
    a.v = r;
    b.v = in;
    o.v = have_r ? r : in;
    int m = n / (int)sizeof(S);
    for (int k = 0; k < m; k++) {
        typename T::C c;
        if (have_r && have_in) c = Op::f(T::ld(a.e[k]), T::ld(b.e[k]));
        else c = T::ld(o.e[k]);
        // The host rounds the finished sum to the storage type before dividing (f16, bf16)
        // and wraps integers (u8 computes in u32): do the same.
        if (Op::AVG && fin) c = T::ld(T::st(c)) / (typename T::C)nranks;
        o.e[k] = T::st(c);
    }
    return o.v;
}

// ---------------------------------------------------------------- waits

struct Ctx {
    const DevArgs* a;
    u32 chan;
    u32 step;
    u64 deadline;
};

// Record the first failure and tell every rank to stop.
__device__ void fail(const Ctx& x, u32 code) {
    if (atomicCAS(&x.a->status[0], TOPO_OK, code) == TOPO_OK) {
        x.a->status[1] = x.chan;
        x.a->status[2] = x.step;
    }
    atomicExch(x.a->abort, 1u);
}

// Whether to give up waiting: another rank aborted, or the deadline passed.
__device__ __forceinline__ bool give_up(const Ctx& x, u32 spins) {
    if ((spins & 1023) != 1023) return false;
    if (*(volatile u32*)x.a->abort) { fail(x, TOPO_ERR_ABORTED); return true; }
    if (now_ns() > x.deadline) { fail(x, TOPO_ERR_TIMEOUT); return true; }
    return false;
}

// Thread 0 waits until `*p >= want`; every thread learns whether it failed.
__device__ bool wait_counter_ge(const Ctx& x, const u64* p, u64 want) {
    __shared__ int bad;
    if (threadIdx.x == 0) {
        bad = 0;
        u32 spins = 0;
        while (ld_volatile64(p) < want) {
            if (give_up(x, ++spins)) { bad = 1; break; }
        }
        __threadfence();
    }
    __syncthreads();
    return bad == 0;
}

// ---------------------------------------------------------------- one piece per protocol

struct Piece {
    const u8* in;   // input bytes or null
    u8* out;        // output bytes or null
    const u8* src;  // received slot or null
    u8* dst;        // slot at the peer or null
    int len;        // data bytes
    bool fin;
    u64 flag;       // LL / LL128 flag value of the received piece (recv) ...
    u64 sflag;      // ... and of the sent piece
};

// Each thread keeps SIMPLE_UNROLL 16-byte loads in flight before it combines and stores:
// the volatile loads are ordered, so one load per iteration would wait out the memory
// latency once per 16 bytes (measured on an H200, 2026-12-04: ~5 GB/s per channel).
#define SIMPLE_UNROLL 4
template <typename T, typename Op>
__device__ void piece_simple(const Ctx& x, const Piece& p) {
    int chunks = (p.len + 15) / 16;
    int stride = blockDim.x;
    for (int c0 = threadIdx.x; c0 < chunks; c0 += SIMPLE_UNROLL * stride) {
        uint4 r[SIMPLE_UNROLL], in[SIMPLE_UNROLL];
        int n[SIMPLE_UNROLL];
#pragma unroll
        for (int u = 0; u < SIMPLE_UNROLL; u++) {
            int c = c0 + u * stride;
            n[u] = c < chunks ? (p.len - c * 16 < 16 ? p.len - c * 16 : 16) : 0;
            // Volatile: the slot held an older piece, which may still sit in this SM's L1.
            r[u] = (p.src && n[u] > 0) ? ld_volatile16(p.src + c * 16) : make_uint4(0, 0, 0, 0);
        }
#pragma unroll
        for (int u = 0; u < SIMPLE_UNROLL; u++) {
            int c = c0 + u * stride;
            in[u] = (p.in && n[u] > 0) ? load_bytes<T>(p.in + c * 16, n[u]) : make_uint4(0, 0, 0, 0);
        }
#pragma unroll
        for (int u = 0; u < SIMPLE_UNROLL; u++) {
            if (n[u] == 0) continue;
            int c = c0 + u * stride;
            uint4 v = combine<T, Op>(r[u], p.src != 0, in[u], p.in != 0, n[u], p.fin, x.a->nranks);
            if (p.out) store_bytes<T>(p.out + c * 16, v, n[u]);
            if (p.dst) *(uint4*)(p.dst + c * 16) = v;
        }
    }
    if (p.dst) __threadfence_system();
}

// LL: line l carries data bytes [8l, 8l+8).
template <typename T, typename Op>
__device__ bool piece_ll(const Ctx& x, const Piece& p) {
    int lines = (p.len + 7) / 8;
    u32 f = (u32)p.flag, sf = (u32)p.sflag;
    bool ok = true;
    for (int l = threadIdx.x; l < lines; l += blockDim.x) {
        int n = p.len - l * 8 < 8 ? p.len - l * 8 : 8;
        uint4 r = make_uint4(0, 0, 0, 0);
        if (p.src) {
            u32 spins = 0;
            uint4 line = ld_volatile16(p.src + l * 16);
            while (line.y != f || line.w != f) {
                if (give_up(x, ++spins)) { ok = false; break; }
                line = ld_volatile16(p.src + l * 16);
            }
            if (!ok) break;
            r = make_uint4(line.x, line.z, 0, 0);
        }
        uint4 in = p.in ? load_bytes<T>(p.in + l * 8, n) : make_uint4(0, 0, 0, 0);
        uint4 v = combine<T, Op>(r, p.src != 0, in, p.in != 0, n, p.fin, x.a->nranks);
        if (p.out) store_bytes<T>(p.out + l * 8, v, n);
        if (p.dst) st_volatile16(p.dst + l * 16, make_uint4(v.x, sf, v.y, sf));
    }
    return ok;
}

// LL128: line l carries data bytes [120l, 120l+120); thread j of a group of 8 holds bytes
// [16j, 16j+16) of the line, the 8th holds 8 data bytes and the flag.
template <typename T, typename Op>
__device__ bool piece_ll128(const Ctx& x, const Piece& p) {
    int lines = (p.len + 119) / 120;
    int lane = threadIdx.x & 31, j = lane & 7;
    int group = threadIdx.x >> 3, groups = blockDim.x >> 3;
    int rounds = (lines + groups - 1) / groups;
    bool ok = true;
    for (int k = 0; k < rounds; k++) {
        int l = k * groups + group;
        bool valid = l < lines;
        int off = l * 120 + j * 16;  // data byte of this thread
        int want = j == 7 ? 8 : 16;
        int n = valid ? (p.len - off < want ? p.len - off : want) : 0;
        if (n < 0) n = 0;
        uint4 r = make_uint4(0, 0, 0, 0);
        if (p.src && valid) {
            const u8* line = p.src + l * 128;
            if (j == 7) {
                u32 spins = 0;
                while (ld_volatile64((const u64*)(line + 120)) != p.flag) {
                    if (give_up(x, ++spins)) { ok = false; break; }
                }
                __threadfence();  // acquire: the group's data loads come after the flag
            }
        }
        // The flag thread's wait orders the group's reads after the sender's fence.
        if (__any_sync(0xffffffffu, !ok)) { ok = false; break; }
        __syncwarp();
        if (p.src && valid) r = ld_volatile16(p.src + l * 128 + j * 16);
        uint4 in = (p.in && n > 0) ? load_bytes<T>(p.in + off, n) : make_uint4(0, 0, 0, 0);
        uint4 v = combine<T, Op>(r, p.src != 0, in, p.in != 0, n, p.fin, x.a->nranks);
        if (p.out && n > 0) store_bytes<T>(p.out + off, v, n);
        if (p.dst && valid && j < 7) st_volatile16(p.dst + l * 128 + j * 16, v);
        if (p.dst) {
            __threadfence_system();
            __syncwarp();
            if (valid && j == 7) {
                u64 fl = p.sflag;
                st_volatile16(p.dst + l * 128 + 112,
                              make_uint4(v.x, v.y, (u32)fl, (u32)(fl >> 32)));
            }
        }
    }
    return ok;
}

// ---------------------------------------------------------------- the schedule walker

template <typename T, typename Op>
__device__ void run_steps(const DevArgs& a) {
    Ctx x;
    x.a = &a;
    x.chan = blockIdx.x;
    x.deadline = now_ns() + a.timeout_ns;
    u32 first = a.chan_start[x.chan], last = a.chan_start[x.chan + 1];
    const u64 es = sizeof(typename T::S);
    __shared__ int bad;
    for (u32 s = first; s < last; s++) {
        x.step = s;
        DevStep st = a.steps[s];
        u64 bytes = st.count * es;
        int ri = st.recv_from >= 0 ? st.recv_from * a.nch + x.chan : -1;
        int si = st.send_to >= 0 ? st.send_to * a.nch + x.chan : -1;
        for (u64 done = 0; done < bytes; done += a.piece_bytes) {
            int len = (int)(bytes - done < a.piece_bytes ? bytes - done : a.piece_bytes);
            u64 rseq = ri >= 0 ? a.recv_seq[ri] : 0, sseq = si >= 0 ? a.send_seq[si] : 0;
            Piece p;
            p.len = len;
            p.fin = (st.flags & TOPO_FINISH) != 0;
            p.in = st.in_off != TOPO_NONE ? a.base + st.in_off + done : 0;
            p.out = st.out_off != TOPO_NONE ? a.base + st.out_off + done : 0;
            p.src = ri >= 0 ? a.recv[ri].fifo + (rseq % a.nslots) * a.slot_bytes : 0;
            p.dst = si >= 0 ? a.send[si].fifo + (sseq % a.nslots) * a.slot_bytes : 0;
            p.flag = rseq + 1;
            p.sflag = sseq + 1;
            // Credit: the slot being overwritten was consumed (its head moved past it).
            if (si >= 0 && sseq >= a.nslots &&
                !wait_counter_ge(x, a.send[si].head, sseq - a.nslots + 1)) return;
            if (a.proto == 0 && ri >= 0 && !wait_counter_ge(x, a.recv[ri].tail, rseq + 1)) return;
            bool ok = true;
            if (a.proto == 0) piece_simple<T, Op>(x, p);
            else if (a.proto == 1) ok = piece_ll<T, Op>(x, p);
            else ok = piece_ll128<T, Op>(x, p);
            if (threadIdx.x == 0) bad = 0;
            __syncthreads();
            if (!ok) bad = 1;
            __syncthreads();
            if (bad) return;
            if (threadIdx.x == 0) {
                if (si >= 0) {
                    if (a.proto == 0) st_volatile64(a.send[si].tail, sseq + 1);
                    a.send_seq[si] = sseq + 1;
                }
                if (ri >= 0) {
                    st_volatile64(a.recv[ri].head, rseq + 1);
                    a.recv_seq[ri] = rseq + 1;
                }
            }
            __syncthreads();
        }
    }
}

// At least TOPO_MIN_CTAS CTAs per SM: ranks that share a GPU spin-wait on each other, so
// every rank's CTAs must be resident at once (the runtime checks the occupancy).
#define TOPO_MIN_CTAS 2
#define TOPO_KERNEL(OPN, OP, TN, T)                                                   \
    extern "C" __global__ void __launch_bounds__(TOPO_THREADS, TOPO_MIN_CTAS)          \
        topo_prim_##OPN##_##TN(DevArgs a) { run_steps<T, OP>(a); }
#define TOPO_TYPES(OPN, OP)                                                           \
    TOPO_KERNEL(OPN, OP, f32, TF32) TOPO_KERNEL(OPN, OP, f16, TF16)                   \
    TOPO_KERNEL(OPN, OP, bf16, TBF16) TOPO_KERNEL(OPN, OP, f64, TF64)                 \
    TOPO_KERNEL(OPN, OP, i32, TI32) TOPO_KERNEL(OPN, OP, i64, TI64)                   \
    TOPO_KERNEL(OPN, OP, u8, TU8)
// A run needs one (operator, type): the runtime defines TOPO_ONE_KERNEL and those four
// names, so NVRTC compiles one primitive instead of 35 (ptxas is most of the time).
// `##` pastes its operands unexpanded, so the defines go through one more macro first:
// without it the entry point would be named topo_prim_TOPO_OPN_TOPO_TN.
#define TOPO_KERNEL_EXPANDED(OPN, OP, TN, T) TOPO_KERNEL(OPN, OP, TN, T)
#if defined(TOPO_ONE_KERNEL)
TOPO_KERNEL_EXPANDED(TOPO_OPN, TOPO_OP, TOPO_TN, TOPO_T)
#else
TOPO_TYPES(sum, OpSum)
TOPO_TYPES(prod, OpProd)
TOPO_TYPES(min, OpMin)
TOPO_TYPES(max, OpMax)
TOPO_TYPES(avg, OpAvg)
#endif

// ---------------------------------------------------------------- copy and check

// The device-to-device copy ceiling's kernel: 16-byte loads and stores, grid-stride.
extern "C" __global__ void __launch_bounds__(TOPO_THREADS)
    topo_copy(uint4* dst, const uint4* src, u64 n16) {
    for (u64 i = blockIdx.x * (u64)blockDim.x + threadIdx.x; i < n16;
         i += (u64)gridDim.x * blockDim.x)
        dst[i] = src[i];
}

// #wrong on the device: elements of `es` bytes where `got` differs from `want`.
extern "C" __global__ void __launch_bounds__(TOPO_THREADS)
    topo_count_wrong(const u8* got, const u8* want, u64 count, u32 es, u64* wrong) {
    u64 bad = 0;
    for (u64 i = blockIdx.x * (u64)blockDim.x + threadIdx.x; i < count;
         i += (u64)gridDim.x * blockDim.x) {
        bool diff = false;
        for (u32 b = 0; b < es; b++) diff |= got[i * es + b] != want[i * es + b];
        bad += diff;
    }
    for (int o = 16; o > 0; o >>= 1) bad += __shfl_down_sync(0xffffffffu, bad, o);
    if ((threadIdx.x & 31) == 0 && bad) atomicAdd(wrong, bad);
}
