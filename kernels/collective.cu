// topo's CUDA kernels: NCCL's generic primitive (receive, combine with a local input, write a
// local output, send on) run over FIFOs in peer memory, for the Simple, LL and LL128
// protocols. Compiled at run time with NVRTC (no headers: NVRTC ships none in the Python
// wheels), one instantiation per (operator, type).
//
// One launch runs a rank's whole schedule for one collective call: one CTA per channel walks
// that channel's steps in order (the steps come from topo-runtime's `schedule`, packed by
// `cuda::pack`). A connection (sender -> receiver, channel) is a ring of `nslots` slots in
// the RECEIVER's memory (the sender writes remotely, the receiver reads locally), one tail
// flag per slot beside it, and one head flag per slot in the SENDER's memory (the receiver
// returns credit remotely, the sender polls locally); NCCL places P2P buffers the same way
// (src/transport/p2p.cc, 2.19+: the receiver allocates, the sender writes). Pieces on a
// connection are numbered from 0 for the life of the buffers, so the numbers (and the flags,
// piece + 1) carry over between launches.
//
// Pipelining (issue 47): a channel's CTA is TOPO_GROUPS warp groups; a step's pieces go round
// the groups (piece k to group k % TOPO_GROUPS), each group waits, copies and posts its own
// pieces with its own named barrier, so up to TOPO_GROUPS pieces of a connection are in flight
// at once. NCCL splits a block into groups with their own barriers the same way
// (src/device/prims_simple.h, 2.23-2.28: barrier_sync(15 - group, nthreads)); its Simple
// protocol keeps one step counter per connection because its slices post in order, where
// here the groups finish out of order, hence a flag per slot. All groups meet at the end of
// every step (a later step may read what an earlier one wrote), and there the piece counters
// move on by the step's pieces.
//
// Fences: a flag is stored after a fence of the scope the transport needs (`fence_release`):
// the GPU's when every rank of the job is on this GPU and the FIFOs are device memory, the
// system's otherwise (another GPU over P2P, pinned host memory); `sys_fence` in the launch
// arguments says which. NCCL always fences at system scope (prims_simple.h, 2.23-2.28:
// fence_acq_rel_sys before st_relaxed_sys_global of the step).
//
// Protocols (NCCL's src/device/prims_{simple,ll,ll128}.h, 2.19-2.28, for what each signals):
//   Simple: slot = data, copied in 16-byte vectors (NCCL's reduceCopyPacks over BytePack<16>,
//           src/device/common_kernel.h, 2.19-2.28); the group meets, one thread fences and
//           stores the slot's tail flag.
//   LL:     16-byte lines {data0, flag, data1, flag}: 8 data bytes, each 4 bytes paired with
//           the flag in one 8-byte word, so a flag seen means its data is there. No fence.
//   LL128:  128-byte lines: 120 data bytes + an 8-byte flag, 8 threads per line. The sender
//           stores the data, fences once per round of lines, then stores each line's last 16 bytes
//           (8 data + flag). NCCL relies on NVLink delivering a warp's 128-byte store whole
//           and skips the fence (prims_ll128.h, 2.19-2.28); the fence here, of the transport's
//           scope, keeps this correct over PCIe and host memory.
// Every wait is bounded: it checks the shared abort word and a deadline (%globaltimer), and
// on failure records (code, channel, step) in `status` and sets the abort word.

typedef unsigned char u8;
typedef unsigned short u16;
typedef unsigned int u32;
typedef int i32;
typedef unsigned long long u64;
typedef long long i64;

#define TOPO_THREADS 512
// Warp groups per channel CTA, each with TOPO_GROUP_THREADS threads and named barrier g + 1
// (barrier 0 is __syncthreads'). Must divide TOPO_THREADS into whole warps and be at most
// `nslots` (cuda::pack::GROUPS, SLOTS).
#define TOPO_GROUPS 4
#define TOPO_GROUP_THREADS (TOPO_THREADS / TOPO_GROUPS)
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
    u64* tail;  // Simple, `nslots` flags: recv: local; send: the peer's (remote)
    u64* head;  // `nslots` flags: recv: the sender's (remote); send: local
};

// Must match `cuda::pack::DevArgs` (112 bytes).
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
    u32 sys_fence;    // 1: flags need system-scope fences (another GPU, host memory)
    u32 pad;
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

__device__ __forceinline__ void st_volatile16(void* p, uint4 v) {
    asm volatile("st.volatile.v4.u32 [%0], {%1,%2,%3,%4};"
                 :: "l"(p), "r"(v.x), "r"(v.y), "r"(v.z), "r"(v.w) : "memory");
}
// The FIFO's data: volatile so a slot reused by a later piece is not read from a stale L1
// line (NCCL's ld_volatile_global, src/device/op128.h, 2.19-2.28), in the global state space
// so the load is one LDG.E.128 (cuobjdump checks it).
__device__ __forceinline__ uint4 ld_volatile_global16(const void* p) {
    uint4 v;
    asm volatile("ld.volatile.global.v4.u32 {%0,%1,%2,%3}, [%4];"
                 : "=r"(v.x), "=r"(v.y), "=r"(v.z), "=r"(v.w) : "l"(p) : "memory");
    return v;
}
__device__ __forceinline__ void st_global16(void* p, uint4 v) {
    asm volatile("st.global.v4.u32 [%0], {%1,%2,%3,%4};"
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
// A fence of the scope the transport needs: GPU scope between ranks of this GPU, system
// scope when a peer is another GPU or the FIFO is host memory.
__device__ __forceinline__ void fence_scoped(u32 sys) {
    if (sys) __threadfence_system();
    else __threadfence();
}
// The named barrier of warp group g (TOPO_GROUP_THREADS threads) with an OR over `v`: the
// group meets and learns whether any thread failed (NCCL's barrier_red_or, 2.23-2.28).
__device__ __forceinline__ bool group_any(u32 g, bool v) {
    u32 r;
    asm volatile("{ .reg .pred p, q;\n"
                 "  setp.ne.u32 p, %1, 0;\n"
                 "  bar.red.or.pred q, %2, %3, p;\n"
                 "  selp.u32 %0, 1, 0, q; }"
                 : "=r"(r) : "r"((u32)v), "r"(g + 1), "r"(TOPO_GROUP_THREADS) : "memory");
    return r != 0;
}
__device__ __forceinline__ u64 now_ns() {
    u64 t;
    asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t));
    return t;
}

// `n` bytes (a multiple of the element size, at most 16) from `p`: one 16-byte load when
// aligned and whole, element by element otherwise. The element loops run to a constant
// bound, fully unrolled, so the union stays in registers (a loop to `n` indexes it
// dynamically, which puts it in local memory: cuobjdump checks there is none).
template <typename T>
__device__ __forceinline__ uint4 load_bytes(const u8* p, int n) {
    if (n == 16 && (((u64)p) & 15) == 0) return *(const uint4*)p;
    typedef typename T::S S;
    union { uint4 v; S e[16 / sizeof(S)]; } u;
    u.v = make_uint4(0, 0, 0, 0);
    const S* q = (const S*)p;
#pragma unroll
    for (int k = 0; k < (int)(16 / sizeof(S)); k++)
        if (k * (int)sizeof(S) < n) u.e[k] = q[k];
    return u.v;
}
template <typename T>
__device__ __forceinline__ void store_bytes(u8* p, uint4 v, int n) {
    if (n == 16 && (((u64)p) & 15) == 0) { *(uint4*)p = v; return; }
    typedef typename T::S S;
    union { uint4 v; S e[16 / sizeof(S)]; } u;
    u.v = v;
    S* q = (S*)p;
#pragma unroll
    for (int k = 0; k < (int)(16 / sizeof(S)); k++)
        if (k * (int)sizeof(S) < n) q[k] = u.e[k];
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
#pragma unroll
    for (int k = 0; k < (int)(16 / sizeof(S)); k++) {
        if (k >= m) break;
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
    u32 g;     // warp group
    u32 gtid;  // thread within the group
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

// The group's thread 0 waits until the flag `*p >= want`, then fences (acquire) so the
// group's loads after the barrier see what the flag published; every thread of the group
// learns whether it failed (the barrier's OR).
__device__ bool wait_flag_ge(const Ctx& x, const u64* p, u64 want) {
    bool bad = false;
    if (x.gtid == 0) {
        u32 spins = 0;
        while (ld_volatile64(p) < want) {
            if (give_up(x, ++spins)) { bad = true; break; }
        }
        fence_scoped(x.a->sys_fence);
    }
    return !group_any(x.g, bad);
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

// Simple over one group: each thread keeps SIMPLE_UNROLL 16-byte loads in flight before it
// combines and stores (one load at a time waits out the memory latency once per 16 bytes:
// ~5 GB/s per channel on an H200, 2026-12-04). Whole 16-byte vectors when every pointer is
// 16-byte aligned (the FIFO's always are; a buffer's are unless a step starts mid-vector),
// element by element otherwise. 4-byte types keep 4 in flight; 1-, 2- and 8-byte types 2
// (a combine unpacking 8 or 16 elements per vector, or 64-bit arithmetic, at 4 vectors
// spills past the 64 registers that 2 CTAs of 512 threads leave: cuobjdump's check found
// 8-72 bytes of stack); AVG's finishing step 1 (`piece_simple`).
template <typename T, typename Op, int SIMPLE_UNROLL, bool DIV>
__device__ void simple_loop(const Ctx& x, const Piece& p) {
    int chunks = (p.len + 15) / 16;
    const int stride = TOPO_GROUP_THREADS;
    bool vec = ((((u64)p.in) | ((u64)p.out) | ((u64)p.src) | ((u64)p.dst)) & 15) == 0;
    for (int c0 = x.gtid; c0 < chunks; c0 += SIMPLE_UNROLL * stride) {
        uint4 r[SIMPLE_UNROLL], in[SIMPLE_UNROLL];
        int n[SIMPLE_UNROLL];
#pragma unroll
        for (int u = 0; u < SIMPLE_UNROLL; u++) {
            int c = c0 + u * stride;
            n[u] = c < chunks ? (p.len - c * 16 < 16 ? p.len - c * 16 : 16) : 0;
            r[u] = (p.src && n[u] > 0) ? ld_volatile_global16(p.src + c * 16) : make_uint4(0, 0, 0, 0);
        }
#pragma unroll
        for (int u = 0; u < SIMPLE_UNROLL; u++) {
            int c = c0 + u * stride;
            if (!p.in || n[u] == 0) in[u] = make_uint4(0, 0, 0, 0);
            else if (vec && n[u] == 16) in[u] = *(const uint4*)(p.in + c * 16);
            else in[u] = load_bytes<T>(p.in + c * 16, n[u]);
        }
#pragma unroll
        for (int u = 0; u < SIMPLE_UNROLL; u++) {
            if (n[u] == 0) continue;
            int c = c0 + u * stride;
            uint4 v = combine<T, Op>(r[u], p.src != 0, in[u], p.in != 0, n[u], DIV, x.a->nranks);
            if (p.out) {
                if (vec && n[u] == 16) *(uint4*)(p.out + c * 16) = v;
                else store_bytes<T>(p.out + c * 16, v, n[u]);
            }
            if (p.dst) st_global16(p.dst + c * 16, v);
        }
    }
}

// AVG's finishing division runs one vector at a time: its slow path (a subroutine for
// float and 64-bit integer division) beside several vectors in flight spills.
template <typename T, typename Op>
__device__ void piece_simple(const Ctx& x, const Piece& p) {
    if (Op::AVG && p.fin) simple_loop<T, Op, 1, true>(x, p);
    else if (sizeof(typename T::S) == 4) simple_loop<T, Op, 4, false>(x, p);
    else simple_loop<T, Op, 2, false>(x, p);
}

// LL: line l carries data bytes [8l, 8l+8).
template <typename T, typename Op>
__device__ bool piece_ll(const Ctx& x, const Piece& p) {
    int lines = (p.len + 7) / 8;
    u32 f = (u32)p.flag, sf = (u32)p.sflag;
    bool ok = true;
    for (int l = x.gtid; l < lines; l += TOPO_GROUP_THREADS) {
        int n = p.len - l * 8 < 8 ? p.len - l * 8 : 8;
        uint4 r = make_uint4(0, 0, 0, 0);
        if (p.src) {
            u32 spins = 0;
            uint4 line = ld_volatile_global16(p.src + l * 16);
            while (line.y != f || line.w != f) {
                if (give_up(x, ++spins)) { ok = false; break; }
                line = ld_volatile_global16(p.src + l * 16);
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

// LL128: line l carries data bytes [120l, 120l+120); thread j of a team of 8 holds bytes
// [16j, 16j+16) of the line, the 8th holds 8 data bytes and the flag word (NCCL's layout:
// NCCL_LL128_LINEELEMS 16 u64 per line, the last one the flag, prims_ll128.h 2.19-2.28).
template <typename T, typename Op>
__device__ bool piece_ll128(const Ctx& x, const Piece& p) {
    int lines = (p.len + 119) / 120;
    int j = x.gtid & 7;
    int team = x.gtid >> 3, teams = TOPO_GROUP_THREADS >> 3;
    int rounds = (lines + teams - 1) / teams;
    bool ok = true;
    for (int k = 0; k < rounds; k++) {
        int l = k * teams + team;
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
                fence_scoped(x.a->sys_fence);  // acquire: the team's loads come after the flag
            }
        }
        // The flag thread's wait orders the team's reads after the sender's fence.
        if (__any_sync(0xffffffffu, !ok)) { ok = false; break; }
        __syncwarp();
        if (p.src && valid) r = ld_volatile_global16(p.src + l * 128 + j * 16);
        uint4 in = (p.in && n > 0) ? load_bytes<T>(p.in + off, n) : make_uint4(0, 0, 0, 0);
        uint4 v = combine<T, Op>(r, p.src != 0, in, p.in != 0, n, p.fin, x.a->nranks);
        if (p.out && n > 0) store_bytes<T>(p.out + off, v, n);
        if (p.dst && valid && j < 7) st_volatile16(p.dst + l * 128 + j * 16, v);
        if (p.dst) {
            fence_scoped(x.a->sys_fence);
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

// Piece `k` of a step on group x.g: wait for credit and data, copy, post. Returns false on
// a failure the whole group agrees on.
template <typename T, typename Op>
__device__ bool one_piece(const Ctx& x, const DevStep& st, int ri, int si, u64 rbase, u64 sbase,
                          u64 k) {
    const DevArgs& a = *x.a;
    u64 bytes = st.count * sizeof(typename T::S);
    u64 done = k * a.piece_bytes;
    u64 rseq = rbase + k, sseq = sbase + k;
    // nslots is a power of two (cuda::pack::SLOTS): a mask, not a 64-bit remainder, whose
    // subroutine call costs a stack frame (cuobjdump's check).
    u32 rslot = (u32)rseq & (a.nslots - 1), sslot = (u32)sseq & (a.nslots - 1);
    Piece p;
    p.len = (int)(bytes - done < a.piece_bytes ? bytes - done : a.piece_bytes);
    p.fin = (st.flags & TOPO_FINISH) != 0;
    p.in = st.in_off != TOPO_NONE ? a.base + st.in_off + done : 0;
    p.out = st.out_off != TOPO_NONE ? a.base + st.out_off + done : 0;
    p.src = ri >= 0 ? a.recv[ri].fifo + (u64)rslot * a.slot_bytes : 0;
    p.dst = si >= 0 ? a.send[si].fifo + (u64)sslot * a.slot_bytes : 0;
    p.flag = rseq + 1;
    p.sflag = sseq + 1;
    // Credit: the piece that last used this slot (sseq - nslots) was consumed.
    if (si >= 0 && sseq >= a.nslots &&
        !wait_flag_ge(x, a.send[si].head + sslot, sseq - a.nslots + 1)) return false;
    if (a.proto == 0 && ri >= 0 && !wait_flag_ge(x, a.recv[ri].tail + rslot, rseq + 1))
        return false;
    bool ok = true;
    if (a.proto == 0) piece_simple<T, Op>(x, p);
    else if (a.proto == 1) ok = piece_ll<T, Op>(x, p);
    else ok = piece_ll128<T, Op>(x, p);
    // The group's copies are done (and, for a receive, its loads returned) before one thread
    // posts: the barrier orders them, the fence publishes them at the transport's scope.
    if (group_any(x.g, !ok)) return false;
    if (x.gtid == 0) {
        if (si >= 0 && a.proto == 0) {
            fence_scoped(a.sys_fence);
            st_volatile64(a.send[si].tail + sslot, sseq + 1);
        }
        if (ri >= 0) st_volatile64(a.recv[ri].head + rslot, rseq + 1);
    }
    return true;
}

template <typename T, typename Op>
__device__ void run_steps(const DevArgs& a) {
    Ctx x;
    x.a = &a;
    x.chan = blockIdx.x;
    x.deadline = now_ns() + a.timeout_ns;
    x.g = threadIdx.x / TOPO_GROUP_THREADS;
    x.gtid = threadIdx.x % TOPO_GROUP_THREADS;
    const u64 es = sizeof(typename T::S);
    // The step range is read where it is used, not kept: a register held across the loop
    // is the one 2-byte AVG spilled at 64 registers (cuobjdump's check).
    for (u32 s = a.chan_start[x.chan]; s < *(volatile const u32*)&a.chan_start[x.chan + 1]; s++) {
        x.step = s;
        DevStep st = a.steps[s];
        u64 pieces = (st.count * es + a.piece_bytes - 1) / a.piece_bytes;
        int ri = st.recv_from >= 0 ? (int)(st.recv_from * a.nch + x.chan) : -1;
        int si = st.send_to >= 0 ? (int)(st.send_to * a.nch + x.chan) : -1;
        u64 rbase = ri >= 0 ? a.recv_seq[ri] : 0, sbase = si >= 0 ? a.send_seq[si] : 0;
        bool bad = false;
        for (u64 k = x.g; k < pieces && !bad; k += TOPO_GROUPS)
            bad = !one_piece<T, Op>(x, st, ri, si, rbase, sbase, k);
        // Every group is done with this step (or one failed and set the abort word, which
        // ends the others' waits) before the counters move and the next step starts.
        if (__syncthreads_or(bad)) return;
        if (threadIdx.x == 0) {
            if (si >= 0) a.send_seq[si] = sbase + pieces;
            if (ri >= 0) a.recv_seq[ri] = rbase + pieces;
        }
        __syncthreads();
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
