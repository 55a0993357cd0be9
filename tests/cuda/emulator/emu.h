// emu.h — runs LiteNet's CUDA kernels on the CPU, for tests on machines without a GPU.
//
// Blocks run one after another; the threads of a block are fibers (ucontext) switched only at
// barriers, so __shared__ can be `static` and atomics need no locking. __syncthreads waits for
// every live thread of the block, warp shuffles for every live lane of the warp (through a slot
// per lane); a barrier that can never be met (divergent __syncthreads) aborts with a message.
// Dynamic shared memory is filled with NaN before each block, so reads of unwritten shared
// memory poison the result. Vector accesses are checked for the alignment a GPU needs.
// Only the CUDA subset LiteNet's kernels use is defined.
#pragma once
#define LITENET_EMULATOR 1

#include <cmath>
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <limits>
#include <type_traits>
#include <utility>
#include <vector>
#include <ucontext.h>

struct dim3 {
    unsigned int x, y, z;
};
struct float4 {
    float x, y, z, w;
};
inline float4 make_float4(float x, float y, float z, float w) { return float4{x, y, z, w}; }
struct float2 {
    float x, y;
};
inline float2 make_float2(float x, float y) { return float2{x, y}; }
struct uint4 {
    unsigned int x, y, z, w;
};
struct uint2 {
    unsigned int x, y;
};

namespace emu {
enum State { RUN, WAIT_BLOCK, WAIT_WARP, DONE };
struct Fiber {
    ucontext_t ctx;
    dim3 tid;
    int state, warp, lane;
};
constexpr size_t kStack = 128 * 1024;
inline dim3 block_idx, block_dim, grid_dim;
inline Fiber* cur = nullptr;
inline std::vector<Fiber> fibers;
inline std::vector<char> stacks;
inline ucontext_t scheduler;
inline const char* shared_window = nullptr;  // where wgmma.cuh's shared addresses start (LN_SHARED_WINDOW)
inline std::function<void()> body;
inline std::vector<float4> dynamic_smem;
inline float shuffle_slots[32][32];
inline int shuffle_ints[32][32];

inline void wait(State s) {
    cur->state = s;
    swapcontext(&cur->ctx, &scheduler);
}

inline void entry(int i) {
    body();
    fibers[i].state = DONE;
    swapcontext(&fibers[i].ctx, &scheduler);
}

inline void run_block(int n) {
    for (int i = 0; i < n; ++i) {
        Fiber& f = fibers[i];
        f.state = RUN;
        f.tid = dim3{i % block_dim.x, (i / block_dim.x) % block_dim.y, i / (block_dim.x * block_dim.y)};
        f.warp = i / 32;
        f.lane = i % 32;
        getcontext(&f.ctx);
        f.ctx.uc_stack.ss_sp = stacks.data() + (size_t)i * kStack;
        f.ctx.uc_stack.ss_size = kStack;
        f.ctx.uc_link = nullptr;
        makecontext(&f.ctx, (void (*)())entry, 1, i);
    }
    const int warps = (n + 31) / 32;
    for (;;) {
        for (int i = 0; i < n; ++i)
            if (fibers[i].state == RUN) {
                cur = &fibers[i];
                swapcontext(&scheduler, &fibers[i].ctx);
            }
        int alive = 0, at_block = 0;
        for (int i = 0; i < n; ++i) {
            alive += fibers[i].state != DONE;
            at_block += fibers[i].state == WAIT_BLOCK;
        }
        if (alive == 0) return;
        bool released = false;
        for (int w = 0; w < warps; ++w) {
            int live = 0, waiting = 0;
            for (int i = w * 32; i < n && i < (w + 1) * 32; ++i) {
                live += fibers[i].state != DONE;
                waiting += fibers[i].state == WAIT_WARP;
            }
            if (live > 0 && waiting == live) {
                for (int i = w * 32; i < n && i < (w + 1) * 32; ++i)
                    if (fibers[i].state == WAIT_WARP) fibers[i].state = RUN;
                released = true;
            }
        }
        if (!released && at_block == alive) {
            for (int i = 0; i < n; ++i)
                if (fibers[i].state == WAIT_BLOCK) fibers[i].state = RUN;
            released = true;
        }
        if (!released) {
            std::fprintf(stderr, "emu: deadlock in block (%u,%u,%u): %d threads live, %d at __syncthreads, "
                         "the rest at a warp shuffle (divergent barrier?)\n", block_idx.x, block_idx.y, block_idx.z,
                         alive, at_block);
            std::abort();
        }
    }
}

inline void run_grid(const unsigned* dims, size_t smem_bytes) {
    grid_dim = dim3{dims[0], dims[1], dims[2]};
    block_dim = dim3{dims[3], dims[4], dims[5]};
    const int n = (int)(block_dim.x * block_dim.y * block_dim.z);
    if (n < 1 || n > 1024) {
        std::fprintf(stderr, "emu: bad block size %d\n", n);
        std::abort();
    }
    if ((int)fibers.size() < n) {
        fibers.resize(n);
        stacks.resize((size_t)n * kStack);
    }
    dynamic_smem.resize(smem_bytes / sizeof(float4) + 1);
    for (unsigned z = 0; z < grid_dim.z; ++z)
        for (unsigned y = 0; y < grid_dim.y; ++y)
            for (unsigned x = 0; x < grid_dim.x; ++x) {
                block_idx = dim3{x, y, z};
                const float nan = std::numeric_limits<float>::quiet_NaN();
                for (auto& v : dynamic_smem) v = float4{nan, nan, nan, nan};
                run_block(n);
            }
}

template <typename... A, std::size_t... I>
void call(void (*f)(A...), void** args, std::index_sequence<I...>) {
    f(*static_cast<std::remove_cv_t<std::remove_reference_t<A>>*>(args[I])...);
}

template <typename... A>
void launch(void (*f)(A...), const unsigned* dims, size_t smem_bytes, void** args) {
    body = [f, args] { call(f, args, std::index_sequence_for<A...>{}); };
    run_grid(dims, smem_bytes);
}
}  // namespace emu

#define threadIdx (emu::cur->tid)
#define blockIdx (emu::block_idx)
#define blockDim (emu::block_dim)
#define gridDim (emu::grid_dim)
#define __global__
#define __device__
#define __host__
#define __forceinline__ inline
#define __noinline__
#define __shared__ static
#define __align__(n) alignas(n)
#define __launch_bounds__(...)
#define LN_SHARED_WINDOW(p) (emu::shared_window = reinterpret_cast<const char*>(p))
#define LN_DYNAMIC_SMEM(T, name) T* name = reinterpret_cast<T*>(emu::dynamic_smem.data())
// A GPU faults on a misaligned vector access where a CPU carries on: catch it here.
#define LN_CHECK_ALIGN(p, bytes) emu::check_align(p, bytes, __FILE__, __LINE__)
namespace emu {
inline void check_align(const void* p, size_t bytes, const char* file, int line) {
    if (reinterpret_cast<uintptr_t>(p) % bytes != 0) {
        std::fprintf(stderr, "emu: %zu-byte access at %p is misaligned (%s:%d)\n", bytes, p, file, line);
        std::abort();
    }
}
}  // namespace emu

inline void __syncthreads() { emu::wait(emu::WAIT_BLOCK); }
inline void __syncwarp(unsigned = 0xffffffffu) { emu::wait(emu::WAIT_WARP); }
inline void __threadfence() {}

inline float __shfl_xor_sync(unsigned, float v, int mask) {
    const int w = emu::cur->warp, l = emu::cur->lane;
    emu::shuffle_slots[w][l] = v;
    emu::wait(emu::WAIT_WARP);
    const float r = emu::shuffle_slots[w][l ^ mask];
    emu::wait(emu::WAIT_WARP);  // nobody overwrites a slot before every lane has read
    return r;
}
inline int __shfl_xor_sync(unsigned, int v, int mask) {
    const int w = emu::cur->warp, l = emu::cur->lane;
    emu::shuffle_ints[w][l] = v;
    emu::wait(emu::WAIT_WARP);
    const int r = emu::shuffle_ints[w][l ^ mask];
    emu::wait(emu::WAIT_WARP);
    return r;
}

inline unsigned int __shfl_sync(unsigned, unsigned int v, int src) {
    const int w = emu::cur->warp, l = emu::cur->lane;
    emu::shuffle_ints[w][l] = (int)v;
    emu::wait(emu::WAIT_WARP);
    const unsigned int r = (unsigned int)emu::shuffle_ints[w][src & 31];
    emu::wait(emu::WAIT_WARP);
    return r;
}

inline float atomicAdd(float* p, float v) { const float o = *p; *p = o + v; return o; }
inline int atomicAdd(int* p, int v) { const int o = *p; *p = o + v; return o; }
inline unsigned int atomicAdd(unsigned int* p, unsigned int v) { const unsigned o = *p; *p = o + v; return o; }
inline float __ldcg(const float* p) { return *p; }
inline float4 __ldcg(const float4* p) { return *p; }
// Byte n of the result is byte (s >> 4n) & 7 of the eight bytes y:x (x's first).
inline unsigned int __byte_perm(unsigned int x, unsigned int y, unsigned int s) {
    const unsigned long long xy = (unsigned long long)y << 32 | x;
    unsigned int r = 0;
    for (int n = 0; n < 4; ++n) r |= (unsigned int)((xy >> (8 * ((s >> (4 * n)) & 7))) & 0xff) << (8 * n);
    return r;
}
inline float __int_as_float(int i) { float f; std::memcpy(&f, &i, 4); return f; }
inline int __float_as_int(float f) { int i; std::memcpy(&i, &f, 4); return i; }
inline float __fmul_rn(float a, float b) { return a * b; }
inline float __fadd_rn(float a, float b) { return a + b; }
inline float __fsub_rn(float a, float b) { return a - b; }
inline float rsqrtf(float x) { return 1.f / std::sqrt(x); }
inline int min(int a, int b) { return a < b ? a : b; }
inline int max(int a, int b) { return a > b ? a : b; }
