// wgmma.cuh — Hopper's warpgroup product (wgmma.mma_async, sm_90a only): the one place LiteNet uses it.
//
// mma.sync (mma.cuh) is a warp's product of 16 × 8 × 16 from registers; with it the wide BF16 tile
// keeps the tensor pipe less than a fifth busy (docs/decisions.md, "wgmma"): each k16 costs a warp 24
// shared reads and 16 instructions, and one block of 8 warps a multiprocessor cannot hide their
// latency. wgmma is one asynchronous instruction for 4 warps (a warpgroup, warps 4g … 4g+3)
// that reads both operands straight from shared memory and keeps going while the threads stage the
// next k step. What it needs:
//
//   Operands in shared memory as BF16 "core matrices" of 8 rows × 16 bytes (8 values along k), each
//   core matrix's rows contiguous (128 bytes), both operands K-major (A as M × K, B as N × K): the
//   value X(i, k) of operand rows i at byte
//       (i / 8) · SBO + (k / 8) · LBO + (i % 8) · 16 + (k % 8) · 2
//   from the operand's start. A descriptor (64 bits) names start, LBO and SBO in 16-byte units and
//   no swizzle (PTX ISA, "Matrix Descriptor Format"; no-swizzle K-major canonical layout).
//   Ordering (PTX ISA, "Asynchronous Warpgroup Level Matrix Multiply-Accumulate"): shared memory
//   written by ordinary stores is seen by wgmma only after fence.proxy.async and a barrier;
//   wgmma.fence before the first wgmma that touches the accumulators; commit_group after issuing;
//   wait_group 0 before the accumulators or the operands' buffer are touched again.
//   Accumulators of m64nNk16 (f32): warp w of the warpgroup owns rows 16·w + g and 16·w + g + 8
//   (g = lane / 4, q = lane % 4); d[4·j + 0, 1] = C[16w + g][8j + 2q, +1], d[4·j + 2, 3] = C[16w + g
//   + 8][8j + 2q, +1] — mma.cuh's m16n8 C fragment, once per 8 columns.
//
// The CPU emulator (tests/cuda/emulator, built with LITENET_EMULATE_WGMMA) runs the same staging and
// descriptors with a wgmma that decodes the descriptors and reads shared memory by the layout above:
// one thread's sums in k order, in fp32, of the exact products of the BF16 values (mma.cuh's rule).
#pragma once

#include "mma.cuh"

#if defined(__CUDA_ARCH_FEAT_SM90_ALL) || defined(LITENET_EMULATE_WGMMA)
#define LN_WGMMA 1  // this compilation has wgmma: sm_90a (litenet/gpu/device.py asks for it on an sm_90 GPU)
#endif

#ifdef LN_WGMMA

#define LN_WGMMA_N 128  // columns of one wgmma (m64n128k16): the wide tile's width

// Byte address of p in the block's shared-memory window (the emulator's window is the staged tile,
// LN_SHARED_WINDOW).
__device__ __forceinline__ unsigned int shared_address(const void* p) {
#if defined(LITENET_EMULATOR)
    return (unsigned int)(reinterpret_cast<const char*>(p) - emu::shared_window);
#else
    return (unsigned int)__cvta_generic_to_shared(p);
#endif
}

// The descriptor of a K-major, unswizzled operand starting at `start` (16-byte aligned).
__device__ __forceinline__ unsigned long long wgmma_descriptor(const void* start, unsigned int lbo, unsigned int sbo) {
    return (unsigned long long)((shared_address(start) >> 4) & 0x3FFFu) |
           ((unsigned long long)((lbo >> 4) & 0x3FFFu) << 16) | ((unsigned long long)((sbo >> 4) & 0x3FFFu) << 32);
}

#if defined(LITENET_EMULATOR)

__device__ __forceinline__ void wgmma_fence() {}
__device__ __forceinline__ void wgmma_commit() {}
__device__ __forceinline__ void wgmma_wait_all() {}
__device__ __forceinline__ void fence_shared_to_async() {}
__device__ __forceinline__ void wgmma_fence_operands(float (&)[64]) {}

// BF16 value (k, i) of the operand a descriptor names.
inline float wgmma_operand(unsigned long long desc, int i, int k) {
    const unsigned int start = (unsigned int)(desc & 0x3FFFu) << 4, lbo = (unsigned int)((desc >> 16) & 0x3FFFu) << 4,
                       sbo = (unsigned int)((desc >> 32) & 0x3FFFu) << 4;
    const unsigned int byte = start + (i / 8) * sbo + (k / 8) * lbo + (i % 8) * 16 + (k % 8) * 2;
    unsigned short bits;
    std::memcpy(&bits, emu::shared_window + byte, 2);
    return __int_as_float((int)((unsigned int)bits << 16));
}

// d += A · Bᵀ for the warpgroup's 64 × 128 × 16 (A: 64 rows × k16, B: 128 rows × k16, both K-major).
__device__ __forceinline__ void wgmma_bf16_m64n128k16(float (&d)[64], unsigned long long desc_a,
                                                      unsigned long long desc_b) {
    const int lane = threadIdx.x & 31, w = (threadIdx.x >> 5) & 3, g = lane >> 2, q = lane & 3;
    for (int j = 0; j < LN_WGMMA_N / 8; ++j)
        for (int e = 0; e < 4; ++e) {
            const int r = 16 * w + g + 8 * (e >> 1), c = 8 * j + 2 * q + (e & 1);
            float s = d[4 * j + e];
            for (int k = 0; k < 16; ++k) s += wgmma_operand(desc_a, r, k) * wgmma_operand(desc_b, c, k);
            d[4 * j + e] = s;
        }
}

#else

__device__ __forceinline__ void wgmma_fence() { asm volatile("wgmma.fence.sync.aligned;\n" ::: "memory"); }
__device__ __forceinline__ void wgmma_commit() { asm volatile("wgmma.commit_group.sync.aligned;\n" ::: "memory"); }
__device__ __forceinline__ void wgmma_wait_all() { asm volatile("wgmma.wait_group.sync.aligned 0;\n" ::: "memory"); }
// The compiler must not move the accumulators across an asynchronous wgmma (it sees only the asm
// statement that issues it): pin every register at this point.
__device__ __forceinline__ void wgmma_fence_operands(float (&d)[64]) {
#pragma unroll
    for (int i = 0; i < 64; ++i) asm volatile("" : "+f"(d[i])::"memory");
}
// Ordinary shared stores → visible to wgmma's (async proxy) reads after the next barrier.
__device__ __forceinline__ void fence_shared_to_async() {
    asm volatile("fence.proxy.async.shared::cta;\n" ::: "memory");
}

#define LN_F8(i) "+f"(d[i]), "+f"(d[i + 1]), "+f"(d[i + 2]), "+f"(d[i + 3]), "+f"(d[i + 4]), "+f"(d[i + 5]), \
                 "+f"(d[i + 6]), "+f"(d[i + 7])

// d += A · Bᵀ for the warpgroup's 64 × 128 × 16 (scale-d 1: accumulate; A and B neither negated nor transposed).
__device__ __forceinline__ void wgmma_bf16_m64n128k16(float (&d)[64], unsigned long long desc_a,
                                                      unsigned long long desc_b) {
    asm volatile(
        "{\n.reg .pred p;\nsetp.ne.b32 p, %66, 0;\n"
        "wgmma.mma_async.sync.aligned.m64n128k16.f32.bf16.bf16 {"
        "%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15, "
        "%16, %17, %18, %19, %20, %21, %22, %23, %24, %25, %26, %27, %28, %29, %30, %31, "
        "%32, %33, %34, %35, %36, %37, %38, %39, %40, %41, %42, %43, %44, %45, %46, %47, "
        "%48, %49, %50, %51, %52, %53, %54, %55, %56, %57, %58, %59, %60, %61, %62, %63"
        "}, %64, %65, p, 1, 1, 0, 0;\n}\n"
        : LN_F8(0), LN_F8(8), LN_F8(16), LN_F8(24), LN_F8(32), LN_F8(40), LN_F8(48), LN_F8(56)
        : "l"(desc_a), "l"(desc_b), "r"(1));
}
#undef LN_F8

#endif  // LITENET_EMULATOR
#endif  // LN_WGMMA
