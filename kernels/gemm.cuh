// gemm.cuh — the matrix-product building blocks every layer kernel composes (no cuBLAS):
// (the multiply of each staged step is fp32 on the SIMT cores, or TF32/BF16 on the tensor cores:
// the precision tag P of gemm_tile, mma.cuh)
//
//   gemm_tile     C[tile] = Σ_k A(m, k) · B(k, n) over one k range, for a tile of 64 columns and 64
//                 rows (TM = 4) or 128 ("tall", TM = 8): 256 threads, each owning a TM×4 block (rows
//                 TM·ty …, columns 4·tx …, t = 16·ty + tx); k steps of 16 staged
//                 through two shared-memory buffers (one barrier per step) with the next step's
//                 operands (or the next two's, DEPTH 2) fetched into registers during the multiply;
//                 operands read 16 bytes at a
//                 time along their contiguous index where the matrix allows (Mat::load4).
//                 Optionally also Σ_k B(k, n) (a bias gradient's column sums, from the same loads).
//
// Built on it: splitk.cuh (K split over several blocks, the epilogue's tile coordinates, column
// sums); rows_matmul.cuh (a few rows held in shared memory, for the fused small-batch kernel).
//
// Limits: tiles are 64 or 128 × 64 with k steps of 16; M, N, K need not be multiples of anything (loads
// are guarded, out-of-range elements read as 0; a matrix whose leading dimension or base is not
// 16-byte aligned is read one float at a time).
#pragma once

#include "mma.cuh"

#define LN_TILE 64  // tile columns; rows: 64 (4 per thread) or 128 ("tall", 8 per thread)
#define LN_TK 16
#define LN_SPAD 4  // shared rows padded by 4 floats: 16-byte aligned, transposing stores spread over banks
#define LN_SLAB (LN_TILE * LN_TILE + LN_TILE)  // floats per split in scratch for a 64-row tile (+ column sums)
#define LN_ROWS_MAX 16

// Floats per split in scratch for a tile of 16·TM rows: the tile, then its 64 column sums.
#define LN_SLAB_OF(TM) (16 * (TM) * LN_TILE + LN_TILE)

// Accessor for a float matrix: Mat<true>(i, j) = p[i·ld + j] (second index contiguous),
// Mat<false>(i, j) = p[j·ld + i] (a transposed view, first index contiguous).
template <bool SECOND_CONTIGUOUS>
struct Mat {
    const float* p;
    int ld;
    static constexpr bool second_contiguous = SECOND_CONTIGUOUS;
    __device__ __forceinline__ float operator()(int i, int j) const {
        return SECOND_CONTIGUOUS ? p[(size_t)i * ld + j] : p[(size_t)j * ld + i];
    }
    // Four consecutive elements along the contiguous index from (i, j): (i, j … j+3) or (i … i+3, j).
    // `avail` of them exist (≤ 0: none); the rest read 0. One 16-byte load where alignment allows
    // (the caller's start index along the contiguous dimension is a multiple of 4).
    __device__ __forceinline__ float4 load4(int i, int j, int avail) const {
        float4 v = make_float4(0.f, 0.f, 0.f, 0.f);
        if (avail <= 0) return v;
        const float* q = SECOND_CONTIGUOUS ? p + (size_t)i * ld + j : p + (size_t)j * ld + i;
        if (avail >= 4 && (ld & 3) == 0 && aligned16(q)) return ld4(q);
        v.x = q[0];
        if (avail > 1) v.y = q[1];
        if (avail > 2) v.z = q[2];
        if (avail > 3) v.w = q[3];
        return v;
    }
};

template <int TM>
struct __align__(16) GemmSmem {
    float a[2][LN_TK][16 * TM + LN_SPAD];  // a[buffer][k][m]
    float b[2][LN_TK][LN_TILE + LN_SPAD];  // b[buffer][k][n]
};

// Where thread t's fetched 4-vectors of one operand lie in a k step of a WIDTH-wide tile side
// (WIDTH·16 elements, WIDTH/64 vectors per thread): along the tile index (m or n) when that is
// the contiguous one — vector e = t + 256·l at k row e / (WIDTH/4), tile index 4·(e % (WIDTH/4)) —
// else along k: tile index e / 4, k rows 4·(e % 4) … +3. Consecutive threads walk the contiguous
// index, so a warp's loads coalesce.
template <int WIDTH, bool ALONG_TILE>
struct FetchSlots {
    static constexpr int N = WIDTH / 64;
    int kk[N], x[N];
    __device__ __forceinline__ FetchSlots() {
        for (int l = 0; l < N; ++l) {
            const int e = threadIdx.x + LN_THREADS * l;
            kk[l] = ALONG_TILE ? e / (WIDTH / 4) : 4 * (e & 3);
            x[l] = ALONG_TILE ? 4 * (e % (WIDTH / 4)) : e >> 2;
        }
    }
};

template <int WIDTH, bool ALONG_TILE>
__device__ __forceinline__ void stage(float (&dst)[LN_TK][WIDTH + LN_SPAD], const FetchSlots<WIDTH, ALONG_TILE>& f,
                                      const float4 (&v)[WIDTH / 64]) {
#pragma unroll
    for (int l = 0; l < WIDTH / 64; ++l) {
        if (ALONG_TILE) {
            st4(&dst[f.kk[l]][f.x[l]], v[l]);
        } else {
            dst[f.kk[l]][f.x[l]] = v[l].x;
            dst[f.kk[l] + 1][f.x[l]] = v[l].y;
            dst[f.kk[l] + 2][f.x[l]] = v[l].z;
            dst[f.kk[l] + 3][f.x[l]] = v[l].w;
        }
    }
}

// The operands' elements of the k step at k0 (zeros outside M, N, k_end).
template <int TM, class A, class B>
__device__ __forceinline__ void gemm_fetch(const A& a, const B& b, int M, int N, int k0, int k_end, int m0, int n0,
                                           const FetchSlots<16 * TM, !A::second_contiguous>& fa,
                                           const FetchSlots<LN_TILE, B::second_contiguous>& fb,
                                           float4 (&ra)[TM / 4], float4 (&rb)[1]) {
#pragma unroll
    for (int l = 0; l < TM / 4; ++l) {
        const int m = m0 + fa.x[l], k = k0 + fa.kk[l];
        ra[l] = A::second_contiguous ? a.load4(m, k, m < M ? min(4, k_end - k) : 0)   // along k
                                     : a.load4(m, k, k < k_end ? min(4, M - m) : 0);  // along m
    }
    const int n = n0 + fb.x[0], k = k0 + fb.kk[0];
    rb[0] = B::second_contiguous ? b.load4(k, n, k < k_end ? min(4, N - n) : 0)   // along n
                                 : b.load4(k, n, n < N ? min(4, k_end - k) : 0);  // along k
}

// The multiply of one staged k step on the SIMT cores: thread t's TM×4 block, in fp32.
template <int TM>
__device__ __forceinline__ void multiply_step(PrecFp32, const GemmSmem<TM>& s, int buf, float (&acc)[TM][4]) {
    const int tx = threadIdx.x & 15, ty = threadIdx.x >> 4;
#pragma unroll
    for (int kk = 0; kk < LN_TK; ++kk) {
        float ai[TM];
#pragma unroll
        for (int v = 0; v < TM / 4; ++v) {
            const float4 x = ld4(&s.a[buf][kk][TM * ty + 4 * v]);
            ai[4 * v] = x.x;
            ai[4 * v + 1] = x.y;
            ai[4 * v + 2] = x.z;
            ai[4 * v + 3] = x.w;
        }
        const float4 bv = ld4(&s.b[buf][kk][4 * tx]);
        const float bj[4] = {bv.x, bv.y, bv.z, bv.w};
#pragma unroll
        for (int i = 0; i < TM; ++i)
#pragma unroll
            for (int j = 0; j < 4; ++j) acc[i][j] += ai[i] * bj[j];
    }
}

// ... or on the tensor cores (mma.cuh; 64-row tiles only): the accumulators hold warp fragments
// until gemm_tile's end.
template <int TM, class P>
__device__ __forceinline__ void multiply_step(P p, const GemmSmem<TM>& s, int buf, float (&acc)[TM][4]) {
    static_assert(TM == 4, "the tensor-core tile product is written for 64-row tiles");
    mma_step(p, s.a[buf], s.b[buf], acc);
}

// One k step of gemm_tile: fetch the step `ahead` steps on into `fetch_*` (its loads then have
// `ahead` steps of multiplies to arrive), multiply the step in shared buffer `buf`, stage the next
// step (held in `next_*`) into the other buffer, which was last read before the previous barrier.
template <int TM, class P, class A, class B>
__device__ __forceinline__ void gemm_step(const A& a, const B& b, int M, int N, int k0, int k_end, int m0, int n0,
                                          int ahead, const FetchSlots<16 * TM, !A::second_contiguous>& fa,
                                          const FetchSlots<LN_TILE, B::second_contiguous>& fb,
                                          float4 (&fetch_a)[TM / 4], float4 (&fetch_b)[1],
                                          const float4 (&next_a)[TM / 4], const float4 (&next_b)[1], int buf,
                                          float (&acc)[TM][4], bool sums, float4& cs, GemmSmem<TM>& s) {
    if (k0 + ahead * LN_TK < k_end)
        gemm_fetch<TM>(a, b, M, N, k0 + ahead * LN_TK, k_end, m0, n0, fa, fb, fetch_a, fetch_b);
    multiply_step(P{}, s, buf, acc);
    if (k0 + LN_TK < k_end) {
        stage(s.a[buf ^ 1], fa, next_a);
        stage(s.b[buf ^ 1], fb, next_b);
        if (sums) add4(cs, next_b[0]);
    }
    __syncthreads();
}

// acc[i][j] = Σ_{k_begin ≤ k < k_end} A(m0 + TM·ty + i, k) · B(k, n0 + 4·tx + j) (t = 16·ty + tx),
// k in increasing order, for a tile of 16·TM rows × 64 columns. With `colsums` (B contiguous along
// n only), thread t < 64 also gets colsum = Σ_k B(k, n0 + t). DEPTH: how many k steps ahead the
// operands are fetched into registers — 1, or 2 where a k step's multiplies are too few to cover a
// load's latency: every ∂W (few blocks per multiprocessor) and, since 2026-12-03, the layer kernels'
// forward and ∂input products (the Mixer's BF16 step −3 % on an H200, bench/results/gpu-mixer-
// 2026-12-03.md "Fourth session"); 2 costs another TM + 4 registers.
// Every thread of the block must call it with the same k range; it ends with a barrier.
template <int TM, int DEPTH, class P = PrecFp32, class A, class B>
__device__ void gemm_tile(const A& a, const B& b, int M, int N, int k_begin, int k_end, int m0, int n0,
                          float (&acc)[TM][4], bool colsums, float& colsum, GemmSmem<TM>& s) {
    static_assert(DEPTH == 1 || DEPTH == 2, "fetch one or two k steps ahead");
    const int t = threadIdx.x;
    for (int i = 0; i < TM; ++i)
        for (int j = 0; j < 4; ++j) acc[i][j] = 0.f;
    colsum = 0.f;
    const FetchSlots<16 * TM, !A::second_contiguous> fa;
    const FetchSlots<LN_TILE, B::second_contiguous> fb;
    float4 ra[TM / 4], rb[1], qa[TM / 4], qb[1], cs = make_float4(0.f, 0.f, 0.f, 0.f);
    const bool sums = colsums && B::second_contiguous;
    if (k_begin < k_end) {
        gemm_fetch<TM>(a, b, M, N, k_begin, k_end, m0, n0, fa, fb, ra, rb);
        stage(s.a[0], fa, ra);
        stage(s.b[0], fb, rb);
        if (sums) add4(cs, rb[0]);
        if (DEPTH == 2 && k_begin + LN_TK < k_end)
            gemm_fetch<TM>(a, b, M, N, k_begin + LN_TK, k_end, m0, n0, fa, fb, qa, qb);
    }
    __syncthreads();
    if (DEPTH == 1) {
        int buf = 0;
        for (int k0 = k_begin; k0 < k_end; k0 += LN_TK, buf ^= 1)
            gemm_step<TM, P>(a, b, M, N, k0, k_end, m0, n0, 1, fa, fb, ra, rb, ra, rb, buf, acc, sums, cs, s);
    } else {  // two register sets take turns (unrolled by two so neither is indexed at run time)
        for (int k0 = k_begin; k0 < k_end; k0 += 2 * LN_TK) {
            gemm_step<TM, P>(a, b, M, N, k0, k_end, m0, n0, 2, fa, fb, ra, rb, qa, qb, 0, acc, sums, cs, s);
            if (k0 + LN_TK >= k_end) break;
            gemm_step<TM, P>(a, b, M, N, k0 + LN_TK, k_end, m0, n0, 2, fa, fb, qa, qb, ra, rb, 1, acc, sums, cs, s);
        }
    }
    if (P::tensor_cores) mma_to_threads(reinterpret_cast<float (&)[4][4]>(acc), &s.a[0][0][0]);
    if (sums) {  // fold the 16 k rows of each column: red[k row][column] in buffer a (≥ 16·64 floats)
        float* red = &s.a[0][0][0];
        st4(red + fb.kk[0] * LN_TILE + fb.x[0], cs);
        __syncthreads();
        if (t < LN_TILE)
            for (int r = 0; r < LN_TK; ++r) colsum += red[r * LN_TILE + t];
        __syncthreads();
    }
}
