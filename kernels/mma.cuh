// mma.cuh — the tile product's multiply on tensor cores: the one place LiteNet uses mma.sync.
//
// gemm.cuh stages each k step of 16 into shared memory as a[k][m] and b[k][n] and multiplies it in
// one of three precisions, a tag chosen per kernel at compile time:
//
//   PrecFp32  every multiply-add in fp32 on the SIMT cores (thread t owns a 4×4 block); sm_61 on.
//   PrecTf32  A, B rounded to TF32 (10-bit mantissa, cvt.rna), mma.sync m16n8k8, fp32 accumulate.
//   PrecBf16  A, B rounded to BF16 (7-bit mantissa, round to nearest even), mma.sync m16n8k16,
//             fp32 accumulate. Both need sm_80 (Ampere) or newer; operands stay fp32 in memory.
//
// On tensor cores the block's 8 warps split the 64×64 tile: warp w owns rows 32·(w/4) … +31 and
// columns 16·(w%4) … +15, i.e. 2 × 2 mma tiles of 16 × 8, with the fragments (PTX ISA, "Matrix
// Fragments for mma.m16n8k8 / m16n8k16", g = lane/4, q = lane%4) read from the staged operands:
//   TF32 k8:  a = A[g][q], A[g+8][q], A[g][q+4], A[g+8][q+4];   b = B[q][g], B[q+4][g]
//   BF16 k16: a = A[g][2q,2q+1], A[g+8][2q,2q+1], A[g][2q+8,+9], A[g+8][2q+8,+9] (pairs, low k low)
//             b = B[2q,2q+1][g], B[2q+8,+9][g]
//   both:     c = C[g][2q], C[g][2q+1], C[g+8][2q], C[g+8][2q+1]
// The 16 accumulators of a thread then hold its warp's fragments, not the SIMT 4×4 block; after
// the last k step mma_to_threads moves them through shared memory into the SIMT layout, so every
// epilogue (bias, GELU, residual, split-K, column sums) is the same for all three precisions.
//
// The CPU emulator (tests/cuda/emulator) runs the same fragment code with an mma made of warp
// shuffles: one lane's sums in k order, in fp32, of the products of the rounded operands (exact in
// fp32); the tensor core's internal order differs only in the last bits (the tests' tolerance).
#pragma once

// Blocks of 256 threads a multiprocessor the TF32/BF16 product kernels are compiled for
// (__launch_bounds__): ≤ 64 registers a thread (ptxas sm_90: 64, at most 20 bytes spilled; 64–80
// without), so 4 blocks and their 4 × 35 KiB of pipeline stages share a multiprocessor instead of 3 —
// a Mixer K = 512 product's 512 tiles in one wave of an H200's 528 slots, not 1.3 of 396
// (docs/decisions.md, "Tensor-core products").
#define LN_MMA_BLOCKS 4

struct PrecFp32 {
    static constexpr bool tensor_cores = false;
};
struct PrecTf32 {
    static constexpr bool tensor_cores = true;
};
struct PrecBf16 {
    static constexpr bool tensor_cores = true;
};

// fp32 → TF32 (round to nearest, ties away from zero), kept in a 32-bit register.
__device__ __forceinline__ unsigned int to_tf32(float x) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 800
    unsigned int r;
    asm("cvt.rna.tf32.f32 %0, %1;" : "=r"(r) : "f"(x));
    return r;
#else
    return ((unsigned int)__float_as_int(x) + 0x1000u) & 0xffffe000u;
#endif
}

// Two fp32 → two BF16 (round to nearest even) in one register: `lo` in the low half.
__device__ __forceinline__ unsigned int to_bf16x2(float lo, float hi) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 800
    unsigned int r;
    asm("cvt.rn.bf16x2.f32 %0, %1, %2;" : "=r"(r) : "f"(hi), "f"(lo));
    return r;
#else
    auto rne = [](float x) {
        const unsigned int b = (unsigned int)__float_as_int(x);
        return (b + 0x7fffu + ((b >> 16) & 1u)) >> 16;
    };
    return rne(lo) | (rne(hi) << 16);
#endif
}

__device__ __forceinline__ float tf32_value(unsigned int r) { return __int_as_float((int)r); }
__device__ __forceinline__ float bf16_value(unsigned int r, int half) {
    return __int_as_float((int)(half ? (r & 0xffff0000u) : (r << 16)));
}

// d += A·B for one 16×8 tile: TF32, k = 8.
__device__ __forceinline__ void mma_tf32(float (&d)[4], const unsigned int (&a)[4], const unsigned int (&b)[2]) {
#if defined(LITENET_EMULATOR)
    const int lane = threadIdx.x & 31, g = lane >> 2, q = lane & 3;
    float arow[2][8], bcol[2][8];  // A[g + 8h][k], B[k][2q + j]
    for (int kk = 0; kk < 4; ++kk)
        for (int r = 0; r < 4; ++r) {
            const float v = tf32_value(__shfl_sync(LN_FULL_MASK, a[r], g * 4 + kk));
            arow[r & 1][kk + 4 * (r >> 1)] = v;
        }
    for (int j = 0; j < 2; ++j)
        for (int kk = 0; kk < 4; ++kk)
            for (int r = 0; r < 2; ++r) bcol[j][kk + 4 * r] = tf32_value(__shfl_sync(LN_FULL_MASK, b[r], (2 * q + j) * 4 + kk));
    for (int i = 0; i < 4; ++i) {
        float s = d[i];
        for (int k = 0; k < 8; ++k) s += arow[i >> 1][k] * bcol[i & 1][k];
        d[i] = s;
    }
#elif defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 800
    asm volatile("mma.sync.aligned.m16n8k8.row.col.f32.tf32.tf32.f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, "
                 "{%0,%1,%2,%3};"
                 : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])
                 : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b[0]), "r"(b[1]));
#else
    __trap();  // tensor cores need sm_80; the host never picks TF32 below that
#endif
}

// d += A·B for one 16×8 tile: BF16, k = 16.
__device__ __forceinline__ void mma_bf16(float (&d)[4], const unsigned int (&a)[4], const unsigned int (&b)[2]) {
#if defined(LITENET_EMULATOR)
    const int lane = threadIdx.x & 31, g = lane >> 2, q = lane & 3;
    float arow[2][16], bcol[2][16];
    for (int kk = 0; kk < 4; ++kk)
        for (int r = 0; r < 4; ++r) {
            const unsigned int v = __shfl_sync(LN_FULL_MASK, a[r], g * 4 + kk);
            for (int h = 0; h < 2; ++h) arow[r & 1][2 * kk + h + 8 * (r >> 1)] = bf16_value(v, h);
        }
    for (int j = 0; j < 2; ++j)
        for (int kk = 0; kk < 4; ++kk)
            for (int r = 0; r < 2; ++r) {
                const unsigned int v = __shfl_sync(LN_FULL_MASK, b[r], (2 * q + j) * 4 + kk);
                for (int h = 0; h < 2; ++h) bcol[j][2 * kk + h + 8 * r] = bf16_value(v, h);
            }
    for (int i = 0; i < 4; ++i) {
        float s = d[i];
        for (int k = 0; k < 16; ++k) s += arow[i >> 1][k] * bcol[i & 1][k];
        d[i] = s;
    }
#elif defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 800
    asm volatile("mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, "
                 "{%0,%1,%2,%3};"
                 : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])
                 : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b[0]), "r"(b[1]));
#else
    __trap();
#endif
}

// A staged k step of 16 of one operand, seen as X(k, i) (i = m for A, n for B), in one of two
// shared-memory layouts: [k][i] with rows of W floats (K_CONTIGUOUS false: the operand is contiguous
// along i in memory), or [i][k] with rows of 16 (K_CONTIGUOUS: contiguous along k, copied 16 bytes at
// a time) whose 16-byte chunks are swizzled, chunk c of row i at c ^ ((i & 2) | ((i >> 2) & 1)): then
// BF16's pair reads (8 bytes at rows g, k 2q, 2q+1) hit every bank once per half-warp and TF32's
// (4 bytes at rows g, k q) once per warp, with no padding.
template <bool K_CONTIGUOUS, int W>
struct Staged {
    const float* p;
    __device__ __forceinline__ static int offset(int k, int i) {
        return K_CONTIGUOUS ? i * 16 + (((k >> 2) ^ (i & 2) ^ ((i >> 2) & 1)) << 2) + (k & 3) : k * W + i;
    }
    __device__ __forceinline__ float operator()(int k, int i) const { return p[offset(k, i)]; }
    // X(k, i) and X(k + 1, i), k even: one 8-byte read where they are adjacent.
    __device__ __forceinline__ float2 pair(int k, int i) const {
        if (K_CONTIGUOUS) return *reinterpret_cast<const float2*>(p + offset(k, i));
        return make_float2(p[offset(k, i)], p[offset(k + 1, i)]);
    }
};

// One staged k step of 16 (views A(k, m), B(k, n)) into the warp's 2×2 tiles; acc[2·mi + ni][·]
// holds tile (mi, ni).
template <class VA, class VB>
__device__ __forceinline__ void mma_step(PrecTf32, const VA& sa, const VB& sb, float (&acc)[4][4]) {
    const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5, g = lane >> 2, q = lane & 3;
    const int r0 = 32 * (warp >> 2), c0 = 16 * (warp & 3);
#pragma unroll
    for (int kk = 0; kk < 16; kk += 8) {
        unsigned int a[2][4], b[2][2];
#pragma unroll
        for (int mi = 0; mi < 2; ++mi) {
            const int r = r0 + 16 * mi + g;
            a[mi][0] = to_tf32(sa(kk + q, r));
            a[mi][1] = to_tf32(sa(kk + q, r + 8));
            a[mi][2] = to_tf32(sa(kk + q + 4, r));
            a[mi][3] = to_tf32(sa(kk + q + 4, r + 8));
        }
#pragma unroll
        for (int ni = 0; ni < 2; ++ni) {
            const int c = c0 + 8 * ni + g;
            b[ni][0] = to_tf32(sb(kk + q, c));
            b[ni][1] = to_tf32(sb(kk + q + 4, c));
        }
#pragma unroll
        for (int mi = 0; mi < 2; ++mi)
#pragma unroll
            for (int ni = 0; ni < 2; ++ni) mma_tf32(acc[2 * mi + ni], a[mi], b[ni]);
    }
}

template <class VA, class VB>
__device__ __forceinline__ void mma_step(PrecBf16, const VA& sa, const VB& sb, float (&acc)[4][4]) {
    const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5, g = lane >> 2, q = lane & 3;
    const int r0 = 32 * (warp >> 2), c0 = 16 * (warp & 3);
    unsigned int a[2][4], b[2][2];
    auto bf16_pair = [](float2 v) { return to_bf16x2(v.x, v.y); };
#pragma unroll
    for (int mi = 0; mi < 2; ++mi) {
        const int r = r0 + 16 * mi + g;
        a[mi][0] = bf16_pair(sa.pair(2 * q, r));
        a[mi][1] = bf16_pair(sa.pair(2 * q, r + 8));
        a[mi][2] = bf16_pair(sa.pair(2 * q + 8, r));
        a[mi][3] = bf16_pair(sa.pair(2 * q + 8, r + 8));
    }
#pragma unroll
    for (int ni = 0; ni < 2; ++ni) {
        const int c = c0 + 8 * ni + g;
        b[ni][0] = bf16_pair(sb.pair(2 * q, c));
        b[ni][1] = bf16_pair(sb.pair(2 * q + 8, c));
    }
#pragma unroll
    for (int mi = 0; mi < 2; ++mi)
#pragma unroll
        for (int ni = 0; ni < 2; ++ni) mma_bf16(acc[2 * mi + ni], a[mi], b[ni]);
}

// The warp-fragment accumulators → the SIMT layout acc[i][j] = C[4·ty + i][4·tx + j] (t = 16·ty + tx),
// through `tile` (≥ 64·68 floats of shared memory no thread still reads). Every thread must call it.
__device__ __forceinline__ void mma_to_threads(float (&acc)[4][4], float* tile) {
    const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5, g = lane >> 2, q = lane & 3;
    const int r0 = 32 * (warp >> 2), c0 = 16 * (warp & 3), W = 68;
    __syncthreads();
    for (int mi = 0; mi < 2; ++mi)
        for (int ni = 0; ni < 2; ++ni) {
            const float* f = acc[2 * mi + ni];
            const int r = r0 + 16 * mi + g, c = c0 + 8 * ni + 2 * q;
            tile[r * W + c] = f[0];
            tile[r * W + c + 1] = f[1];
            tile[(r + 8) * W + c] = f[2];
            tile[(r + 8) * W + c + 1] = f[3];
        }
    __syncthreads();
    const int tx = threadIdx.x & 15, ty = threadIdx.x >> 4;
    for (int i = 0; i < 4; ++i)
        for (int j = 0; j < 4; ++j) acc[i][j] = tile[(4 * ty + i) * W + 4 * tx + j];
    __syncthreads();
}
