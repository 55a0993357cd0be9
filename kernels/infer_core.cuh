// infer_core.cuh — the pieces both inference kernels (infer_fp32.cu, infer_int8.cu) are made of,
// written once over a "word" type so that fp32 and int8 cannot drift apart:
//
//   Fp32: a word is one float, dot(acc, a, b) = acc + a·b.
//   Int8: a word is four int8 packed in an int, dot(acc, a, b) = __dp4a(a, b, acc) (sm_61+), int32 acc.
//
// Layouts (litenet/runtime/cuda_net.py packs them): every weight matrix is (N, Kp) row-major — out
// channel n's inputs contiguous, K zero-padded to Kp = ⌈K/64⌉·64 — and every activation row has
// the same padded width, its pad columns zero; so a 16-byte vector (4 words) never straddles a
// row end and no loop has a tail. Int8 rounding follows docs/int8-plan.md exactly: every float
// operation on the path to a quantizer is one IEEE-rounded operation (the _rn intrinsics, so
// NVRTC cannot contract them into FMAs), quantization divides (__fdiv_rn, or div_rn: the same bits) and rounds
// half to even.
//
// Pieces: rowdot (a few rows × all outputs: one warp group per output, the small-batch kernel),
// tile_gemm (64×64 output tiles, the large-batch kernel), ln_row (LayerNorm of one row by one
// warp) and a grid barrier here; the words, the image readers and the epilogues in
// infer_words.cuh. Everything uses 256-thread blocks.
#pragma once
#include "infer_words.cuh"

// ---------------------------------------------------------------------------------------------
// rowdot: out[r0 + r, n] = epi(Σ_k x[r, k] W[n, k]) for r < rows ≤ IR_ROWS and every n < N.
// G warps share one output (each takes every G-th vector of k; partial sums meet in shared memory
// in a fixed order), 8/G outputs per block pass, passes spread over the grid. G is the largest of
// 8, 4, 2, 1 that keeps every lane busy and the passes within one per block: batch-1 latency is
// the longest chain of dependent loads, so the k loop is split as far as the grid allows.
// Every thread of the block must call it (it holds barriers).

template <class T, class Load, class Epi>
__device__ __forceinline__ void rowdot(const Load& x, int rows, int r0, int Kw, const typename T::Word* W, int N, const Epi& epi) {
    typedef typename T::Word Word;
    typedef typename T::Acc Acc;
    __shared__ Acc part[8][IR_ROWS];
    const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31, V = Kw / 4;
    int G = 8;
    while (G > 1 && ((N * G + 7) / 8 > (int)gridDim.x || V < 32 * G)) G >>= 1;
    const int per = 8 / G, passes = (N + per - 1) / per, g = warp % G;
    for (int pass = blockIdx.x; pass < passes; pass += gridDim.x) {
        const int n = pass * per + warp / G;
        Acc acc[IR_ROWS];
#pragma unroll
        for (int r = 0; r < IR_ROWS; ++r) acc[r] = 0;
        if (n < N) {
            const Word* w = W + (size_t)n * Kw;
#pragma unroll 4  // several weight loads in flight: at batch 1 this loop is a chain of L2 round trips
            for (int v = g * 32 + lane; v < V; v += 32 * G) {
                Word wv[4], xv[4];
                load4(w + 4 * v, wv);
#pragma unroll
                for (int r = 0; r < IR_ROWS; ++r)
                    if (r < rows) {
                        x.vec(r, v, xv);
                        acc[r] = T::dot(T::dot(T::dot(T::dot(acc[r], xv[0], wv[0]), xv[1], wv[1]), xv[2], wv[2]), xv[3], wv[3]);
                    }
            }
        }
#pragma unroll
        for (int r = 0; r < IR_ROWS; ++r) acc[r] = T::reduce(acc[r]);
        if (G > 1) {
            if (lane == 0) {
#pragma unroll
                for (int r = 0; r < IR_ROWS; ++r) part[warp][r] = acc[r];
            }
            __syncthreads();
            if (g == 0 && lane < rows && n < N) {
                Acc total = part[warp][lane];
                for (int j = 1; j < G; ++j) total += part[warp + j][lane];
                epi(r0 + lane, n, total);
            }
            __syncthreads();  // part is reused by the next pass
        } else if (n < N) {
#pragma unroll
            for (int r = 0; r < IR_ROWS; ++r)
                if (r == lane && r < rows) epi(r0 + r, n, acc[r]);
        }
    }
}

// ---------------------------------------------------------------------------------------------
// tile_gemm: one 64 × 64 tile of out[m, n] = epi(Σ_k A[m, k] W[n, k]) per block (blockIdx.x =
// tile row · tiles_n + tile column), k in steps of IT_BK words through shared memory, the next
// step's global loads in flight during the current step's products. Kw must be a multiple of IT_BK.

template <class Word>
struct __align__(16) TileSmem {
    Word a[IT_BK][IT_TILE + 4];  // a[k][row]: a thread's 4 rows of one k are one 16-byte load
    Word w[IT_BK][IT_TILE + 4];
};

template <class T, class Load, class Epi>
__device__ void tile_gemm(const Load& A, int M, int Kw, const typename T::Word* W, int N, const Epi& epi) {
    typedef typename T::Word Word;
    typedef typename T::Acc Acc;
    __shared__ TileSmem<Word> sm;
    const int tiles_n = (N + IT_TILE - 1) / IT_TILE;
    const int m0 = (blockIdx.x / tiles_n) * IT_TILE, n0 = (blockIdx.x % tiles_n) * IT_TILE;
    const int t = threadIdx.x, lr = t >> 2, lv = t & 3;    // loads: row lr, vector lv of the step
    const int tm = (t >> 4) * 4, tn = (t & 15) * 4;        // products: rows tm…tm+3, outputs tn…tn+3
    const bool a_ok = m0 + lr < M, w_ok = n0 + lr < N;
    const Word* wrow = W + (size_t)(w_ok ? n0 + lr : 0) * Kw;
    Acc acc[4][4];
#pragma unroll
    for (int i = 0; i < 4; ++i)
#pragma unroll
        for (int j = 0; j < 4; ++j) acc[i][j] = 0;
    Word ra[4] = {0, 0, 0, 0}, rw[4] = {0, 0, 0, 0};
    if (a_ok) A.vec(m0 + lr, lv, ra);
    if (w_ok) load4(wrow + 4 * lv, rw);
    for (int k0 = 0; k0 < Kw; k0 += IT_BK) {
        __syncthreads();  // the previous step's products are done with sm
#pragma unroll
        for (int i = 0; i < 4; ++i) {
            sm.a[4 * lv + i][lr] = ra[i];
            sm.w[4 * lv + i][lr] = rw[i];
        }
        __syncthreads();
        if (k0 + IT_BK < Kw) {
            const int v = (k0 + IT_BK) / 4 + lv;
            if (a_ok) A.vec(m0 + lr, v, ra);
            if (w_ok) load4(wrow + 4 * v, rw);
        }
#pragma unroll
        for (int kk = 0; kk < IT_BK; ++kk) {
            Word a[4], b[4];
            load4(&sm.a[kk][tm], a);
            load4(&sm.w[kk][tn], b);
#pragma unroll
            for (int i = 0; i < 4; ++i)
#pragma unroll
                for (int j = 0; j < 4; ++j) acc[i][j] = T::dot(acc[i][j], a[i], b[j]);
        }
    }
#pragma unroll
    for (int i = 0; i < 4; ++i)
#pragma unroll
        for (int j = 0; j < 4; ++j)
            if (m0 + tm + i < M && n0 + tn + j < N) epi(m0 + tm + i, n0 + tn + j, acc[i][j]);
}

// ---------------------------------------------------------------------------------------------
// LayerNorm of one row by one warp (litenet.ops.layernorm_forward, the int8 plan's): μ = Σs/d, σ² = Σ(s − μ)²/d (biased),
// y_j = (s_j − μ)/√(σ² + eps)·γ_j + β_j, each operation rounded once (the divisions by div_rn, the same bits);
// emit(j, y_j) for j < d.
// s may have been written by another block of this launch: it is read past L1 (__ldcg), once:
// the first LN_REG·32 values stay in registers (one round trip to L2 instead of three at batch 1).
#define LN_REG 16

template <class Emit>
__device__ __forceinline__ void ln_row(const float* s, const float* gamma, const float* beta, float eps, int d,
                                       const Emit& emit) {
    const int lane = threadIdx.x & 31;
    float v[LN_REG];
#pragma unroll
    for (int i = 0; i < LN_REG; ++i) v[i] = lane + 32 * i < d ? __ldcg(s + lane + 32 * i) : 0.f;
    float sum = 0.f;
#pragma unroll
    for (int i = 0; i < LN_REG; ++i)
        if (lane + 32 * i < d) sum = __fadd_rn(sum, v[i]);
    for (int j = lane + 32 * LN_REG; j < d; j += 32) sum = __fadd_rn(sum, __ldcg(s + j));
    const float mean = __fdiv_rn(warp_sum(sum), (float)d);
    float sq = 0.f;
#pragma unroll
    for (int i = 0; i < LN_REG; ++i)
        if (lane + 32 * i < d) {
            const float c = __fsub_rn(v[i], mean);
            sq = __fadd_rn(sq, __fmul_rn(c, c));
        }
    for (int j = lane + 32 * LN_REG; j < d; j += 32) {
        const float c = __fsub_rn(__ldcg(s + j), mean);
        sq = __fadd_rn(sq, __fmul_rn(c, c));
    }
    const float sd = sqrtf(__fadd_rn(__fdiv_rn(warp_sum(sq), (float)d), eps)), inv_sd = __frcp_rn(sd);
#pragma unroll
    for (int i = 0; i < LN_REG; ++i) {
        const int j = lane + 32 * i;
        if (j < d) emit(j, __fadd_rn(__fmul_rn(div_rn(__fsub_rn(v[i], mean), sd, inv_sd), gamma[j]), beta[j]));
    }
    for (int j = lane + 32 * LN_REG; j < d; j += 32)
        emit(j, __fadd_rn(__fmul_rn(div_rn(__fsub_rn(__ldcg(s + j), mean), sd, inv_sd), gamma[j]), beta[j]));
}

// ---------------------------------------------------------------------------------------------
// Grid barrier for the one-launch forward. Every block of the launch must be resident at once:
// the host launches at most one block per SM (and 256 threads with this kernel's registers and
// shared memory always fit one). sync[0] counts arrivals (barrier i completes at (i+1)·grid),
// sync[1] departures; the last block out sets both back to zero for the next launch or replay.
// grid_barrier is grid_arrive then grid_wait: between the two a block may start work that needs nothing
// from the others (the Mixer's next token weights into shared memory), hidden by the wait.

__device__ __forceinline__ void grid_arrive(unsigned int* sync, unsigned int& target) {
    target += gridDim.x;
    __syncthreads();
    if (threadIdx.x == 0) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 700 && !defined(LITENET_EMULATOR)
        // sm_70 on: the arrival releases this block's writes and the polling acquires everyone's (as
        // cooperative groups' grid sync does), where a full fence each side costs more
        asm volatile("red.release.gpu.add.u32 [%0], 1;" ::"l"(sync) : "memory");
#else
        __threadfence();  // this block's writes are visible before its arrival is
        atomicAdd(sync, 1u);
#endif
    }
}

__device__ __forceinline__ void grid_wait(unsigned int* sync, unsigned int target) {
    if (threadIdx.x == 0) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 700 && !defined(LITENET_EMULATOR)
        unsigned int arrived;
        do {
            asm volatile("ld.acquire.gpu.u32 %0, [%1];" : "=r"(arrived) : "l"(sync) : "memory");
        } while (arrived < target);
#else
        while (*(volatile unsigned int*)sync < target) {
        }
        __threadfence();
#endif
    }
    __syncthreads();
}

__device__ __forceinline__ void grid_barrier(unsigned int* sync, unsigned int& target) {
    grid_arrive(sync, target);
    grid_wait(sync, target);
}

__device__ __forceinline__ void grid_leave(unsigned int* sync) {
    // Every block is past its last barrier once it gets here, so nobody still reads sync[0].
    if (threadIdx.x == 0 && atomicAdd(sync + 1, 1u) == gridDim.x - 1) {
        sync[0] = 0;
        sync[1] = 0;
    }
}

// The phases of the one-launch forward: 0 embed, 1 + 2i block i's fc1 (+GELU), 2 + 2i its fc2
// (+residual), 2·blocks + 1 the head. layout[6·p …] = offsets of phase p's tensors (cuda_net.py).
#define IL_W 0      // weights (N, Kp) in the word arena
#define IL_B 1      // bias (−1: none), float arena
#define IL_M 2      // int8: multipliers s_x·s_w[n]
#define IL_S 3      // int8: the input's scale s_x
#define IL_GAMMA 4  // fc2 phases: the LayerNorm that follows the block
#define IL_BETA 5
#define IL_WIDTH 6

__device__ __forceinline__ int pad64(int k) { return (k + 63) & ~63; }
