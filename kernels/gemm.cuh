// gemm.cuh — the matrix-product building blocks every layer kernel composes (no cuBLAS):
//
//   gemm_tile     C[tile] = Σ_k A(m, k) · B(k, n) over one k range, for a tile of 64 columns and 64
//                 rows (TM = 4) or 128 ("tall", TM = 8): 256 threads, each owning a TM×4 block (rows
//                 TM·ty …, columns 4·tx …, t = 16·ty + tx) at the end; k steps of 16, staged in
//                 shared memory, one barrier per step; in k order. Two paths by precision tag P:
//     fp32        gemm_tile_registers: on the SIMT cores (sm_61 on); the next step's operands (or the
//                 next two's, DEPTH 2) fetched into registers during the multiply, 16 bytes at a
//                 time along their contiguous index where the matrix allows (Mat::load4), and
//                 staged through two buffers.
//     TF32, BF16  gemm_tile_pipelined (64-row tiles, sm_80 on): on the tensor cores (mma.cuh);
//                 LN_STAGES buffers filled by cp.async three steps ahead of the multiply.
//   Either path optionally also sums Σ_k B(k, n) (a bias gradient, from the staged values).
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

// Floats per split in scratch for a tile of 16·TM rows: the tile, then its 64 column sums (row 16·TM).
#define LN_SLAB_ROWS(TM) (16 * (TM))
#define LN_SLAB_OF(TM) (LN_SLAB_ROWS(TM) * LN_TILE + LN_TILE)

// q[0 … avail − 1] one float at a time (any alignment), zeros after (avail ≤ 4).
__device__ __forceinline__ float4 load_partial4(const float* q, int avail) {
    float4 v = make_float4(0.f, 0.f, 0.f, 0.f);
    if (avail > 0) v.x = q[0];
    if (avail > 1) v.y = q[1];
    if (avail > 2) v.z = q[2];
    if (avail > 3) v.w = q[3];
    return v;
}

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
        if (avail <= 0) return make_float4(0.f, 0.f, 0.f, 0.f);
        const float* q = SECOND_CONTIGUOUS ? p + (size_t)i * ld + j : p + (size_t)j * ld + i;
        if (avail >= 4 && (ld & 3) == 0 && aligned16(q)) return ld4(q);
        return load_partial4(q, avail);
    }
};

// Shared memory of the register path (fp32): two buffers of a k step each.
template <int TM>
struct __align__(16) GemmSmem {
    float a[2][LN_TK][16 * TM + LN_SPAD];  // a[buffer][k][m]
    float b[2][LN_TK][LN_TILE + LN_SPAD];  // b[buffer][k][n]
};

// Shared memory of the tensor-core pipeline (gemm_tile_pipelined): LN_STAGES k steps, each A then B,
// each operand in either layout of mma.cuh's Staged (≤ 16 · 68 floats). Twice the register path's
// (35 against 17 KiB), so only the tensor-core kernels declare it: on a GTX 1060 (96 KiB a
// multiprocessor) the fp32 kernels would fall from 3 blocks per multiprocessor to 2.
#define LN_STAGES 4
#define LN_STAGED_OPERAND (LN_TK * (LN_TILE + LN_SPAD))
#define LN_STAGE (2 * LN_STAGED_OPERAND)

struct __align__(16) PipelineSmem {
    float stages[LN_STAGES][LN_STAGE];
};

// The shared memory a tile product of precision P needs: TileSmem<TM, P>.
template <int TM, bool TENSOR_CORES>
struct TileSmemOf {
    typedef GemmSmem<TM> type;
};
template <int TM>
struct TileSmemOf<TM, true> {
    typedef PipelineSmem type;
};
template <int TM, class P>
using TileSmem = typename TileSmemOf<TM, P::tensor_cores>::type;

// Where thread t's fetched 4-vectors of one operand lie in a k step of TK (16, or 8 in gemm_wide.cuh's
// fp32 tile) of a WIDTH-wide tile side (WIDTH·TK elements, N = WIDTH·TK / 1024 vectors per thread):
// along the tile index (m or n) when that is the contiguous one — vector e = t + 256·l at k row
// e / (WIDTH/4), tile index 4·(e % (WIDTH/4)) — else along k: tile index e / (TK/4), k rows
// 4·(e % (TK/4)) … +3. Consecutive threads walk the contiguous index, so a warp's loads coalesce.
template <int WIDTH, bool ALONG_TILE, int TK = LN_TK>
struct FetchSlots {
    static constexpr int N = WIDTH * TK / (4 * LN_THREADS);
    int kk[N], x[N];
    __device__ __forceinline__ FetchSlots() {
        for (int l = 0; l < N; ++l) {
            const int e = threadIdx.x + LN_THREADS * l;
            // along k, steps of 16 as shifts and steps of 8 as divisions: each the code its tile is timed with
            kk[l] = ALONG_TILE ? e / (WIDTH / 4) : TK == 16 ? 4 * (e & 3) : 4 * (e % (TK / 4));
            x[l] = ALONG_TILE ? 4 * (e % (WIDTH / 4)) : TK == 16 ? e >> 2 : e / (TK / 4);
        }
    }
};

template <int WIDTH, bool ALONG_TILE, int TK>
__device__ __forceinline__ void stage(float (&dst)[TK][WIDTH + LN_SPAD], const FetchSlots<WIDTH, ALONG_TILE, TK>& f,
                                      const float4 (&v)[FetchSlots<WIDTH, ALONG_TILE, TK>::N]) {
#pragma unroll
    for (int l = 0; l < f.N; ++l) {
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

// One operand's 4-vectors of the k step at k0 at thread t's FetchSlots: X(k, i) for i0 ≤ i < i0 +
// WIDTH, zeros past k_end and I. Memory: X(k, i) = p[i·ld + k] when K_CONTIGUOUS, else p[k·ld + i].
template <int WIDTH, bool K_CONTIGUOUS, int TK = LN_TK>
__device__ __forceinline__ void fetch_operand(const float* p, int ld, int I, int i0, int k0, int k_end,
                                              const FetchSlots<WIDTH, !K_CONTIGUOUS, TK>& f,
                                              float4 (&v)[FetchSlots<WIDTH, !K_CONTIGUOUS, TK>::N]) {
    const Mat<true> rows{p, ld};  // rows(r, c … c+3): K_CONTIGUOUS r = i, c = k; else r = k, c = i
#pragma unroll
    for (int l = 0; l < f.N; ++l) {
        const int i = i0 + f.x[l], k = k0 + f.kk[l];
        v[l] = K_CONTIGUOUS ? rows.load4(i, k, i < I ? min(4, k_end - k) : 0)
                            : rows.load4(k, i, k < k_end ? min(4, I - i) : 0);
    }
}

// The operands' elements of the k step at k0 (zeros outside M, N, k_end): A(m, k) is X(k, m), B(k, n)
// is X(k, n).
template <int TM, class A, class B>
__device__ __forceinline__ void gemm_fetch(const A& a, const B& b, int M, int N, int k0, int k_end, int m0, int n0,
                                           const FetchSlots<16 * TM, !A::second_contiguous>& fa,
                                           const FetchSlots<LN_TILE, B::second_contiguous>& fb,
                                           float4 (&ra)[TM / 4], float4 (&rb)[1]) {
    fetch_operand<16 * TM, A::second_contiguous>(a.p, a.ld, M, m0, k0, k_end, fa, ra);
    fetch_operand<LN_TILE, !B::second_contiguous>(b.p, b.ld, N, n0, k0, k_end, fb, rb);
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

// The column sums' last step: thread t holds cs, the B values it staged summed over its k steps —
// B contiguous along n (ALONG_N): k row kk, columns n0 + x … x+3; along k: k rows kk … kk+3 (kk a
// multiple of 4) of column n0 + x. They are folded through `red` (≥ 16·64 floats of shared memory
// no thread still reads) into colsum of thread t < 64 (column n0 + t), in a fixed order.
template <bool ALONG_N>
__device__ __forceinline__ void fold_colsums(float4 cs, int kk, int x, float* red, float& colsum) {
    if (ALONG_N) st4(red + kk * LN_TILE + x, cs);
    else red[(kk >> 2) * LN_TILE + x] = (cs.x + cs.y) + (cs.z + cs.w);
    __syncthreads();
    if ((int)threadIdx.x < LN_TILE)
        for (int r = 0; r < (ALONG_N ? LN_TK : LN_TK / 4); ++r) colsum += red[r * LN_TILE + threadIdx.x];
    __syncthreads();
}

// acc[i][j] = Σ_{k_begin ≤ k < k_end} A(m0 + TM·ty + i, k) · B(k, n0 + 4·tx + j) (t = 16·ty + tx),
// k in increasing order, for a tile of 16·TM rows × 64 columns. With `colsums`, thread t < 64 also
// gets colsum = Σ_k B(k, n0 + t) (a bias gradient: ∂y's column sums in a channel ∂W, its row sums
// in a token ∂W, where B is ∂yᵀ). DEPTH: how many k steps ahead the
// operands are fetched into registers — 1, or 2 where a k step's multiplies are too few to cover a
// load's latency: every ∂W (few blocks per multiprocessor) and the layer kernels' forward and ∂input
// products (docs/decisions.md, "GEMM tiles"); 2 costs another TM + 4 registers.
// Every thread of the block must call it with the same k range; it ends with a barrier.
template <int TM, int DEPTH, class P, class A, class B>
__device__ void gemm_tile_registers(const A& a, const B& b, int M, int N, int k_begin, int k_end, int m0, int n0,
                                    float (&acc)[TM][4], bool colsums, float& colsum, GemmSmem<TM>& s) {
    static_assert(DEPTH == 1 || DEPTH == 2, "fetch one or two k steps ahead");
    static_assert(!P::tensor_cores, "the tensor-core precisions take gemm_tile_pipelined");
    for (int i = 0; i < TM; ++i)
        for (int j = 0; j < 4; ++j) acc[i][j] = 0.f;
    colsum = 0.f;
    const FetchSlots<16 * TM, !A::second_contiguous> fa;
    const FetchSlots<LN_TILE, B::second_contiguous> fb;
    float4 ra[TM / 4], rb[1], qa[TM / 4], qb[1], cs = make_float4(0.f, 0.f, 0.f, 0.f);
    if (k_begin < k_end) {
        gemm_fetch<TM>(a, b, M, N, k_begin, k_end, m0, n0, fa, fb, ra, rb);
        stage(s.a[0], fa, ra);
        stage(s.b[0], fb, rb);
        if (colsums) add4(cs, rb[0]);
        if (DEPTH == 2 && k_begin + LN_TK < k_end)
            gemm_fetch<TM>(a, b, M, N, k_begin + LN_TK, k_end, m0, n0, fa, fb, qa, qb);
    }
    __syncthreads();
    if (DEPTH == 1) {
        int buf = 0;
        for (int k0 = k_begin; k0 < k_end; k0 += LN_TK, buf ^= 1)
            gemm_step<TM, P>(a, b, M, N, k0, k_end, m0, n0, 1, fa, fb, ra, rb, ra, rb, buf, acc, colsums, cs, s);
    } else {  // two register sets take turns (unrolled by two so neither is indexed at run time)
        for (int k0 = k_begin; k0 < k_end; k0 += 2 * LN_TK) {
            gemm_step<TM, P>(a, b, M, N, k0, k_end, m0, n0, 2, fa, fb, ra, rb, qa, qb, 0, acc, colsums, cs, s);
            if (k0 + LN_TK >= k_end) break;
            gemm_step<TM, P>(a, b, M, N, k0 + LN_TK, k_end, m0, n0, 2, fa, fb, qa, qb, ra, rb, 1, acc, colsums, cs, s);
        }
    }
    if (colsums) fold_colsums<B::second_contiguous>(cs, fb.kk[0], fb.x[0], &s.a[0][0][0], colsum);
}

// ---------------------------------------------------------------------------------------------
// The tensor-core tile product as a pipeline (sm_80+): each k step's operands are copied from
// global to shared memory by cp.async, 16 bytes a thread per operand, LN_STAGES − 1 steps ahead of
// the multiply — no registers hold them on the way (the register path above holds one or two steps
// in 8–16 registers, and each step waits for loads issued one step earlier, which leaves the Mixer's
// products latency-bound; docs/decisions.md, "Tensor-core products"). The same k steps,
// the same staged values and the same mma order as gemm_tile_registers: the same sums, bit for bit.
// The copies are cp.async where both operands are 16-byte aligned with leading dimensions a multiple
// of 4, else element by element (the same pipeline, synchronous). An operand contiguous along k is
// staged [i][k] (mma.cuh's Staged), else [k][i].

// 16 bytes of shared memory at dst ← `bytes` (0–16) from src, the rest zero: by cp.async on sm_80+
// when `async` (src 16-byte aligned; not read when bytes = 0), else an ordinary copy (an unaligned
// operand; Pascal; the CPU emulator).
__device__ __forceinline__ void copy16_async(float* dst, const float* src, int bytes, bool async) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 800 && !defined(LITENET_EMULATOR)
    if (async) {
        const unsigned int d = (unsigned int)__cvta_generic_to_shared(dst);
        asm volatile("cp.async.cg.shared.global [%0], [%1], 16, %2;\n" ::"r"(d), "l"(src), "r"(bytes));
        return;
    }
#endif
    st4(dst, load_partial4(src, bytes / 4));
}

__device__ __forceinline__ void async_commit() {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 800 && !defined(LITENET_EMULATOR)
    asm volatile("cp.async.commit_group;\n" ::);
#endif
}

// Waits until at most N of this thread's committed groups are still in flight.
template <int N>
__device__ __forceinline__ void async_wait() {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 800 && !defined(LITENET_EMULATOR)
    asm volatile("cp.async.wait_group %0;\n" ::"n"(N));
#endif
}

// The 16-byte chunk of a staged k step thread t copies (stage_async) and, for the column sums, reads
// back: X(k … k+3, i) when K_CONTIGUOUS, else X(k, i … i+3); one chunk per thread (256 = 64 · 16 / 4),
// consecutive threads along the contiguous index.
template <bool K_CONTIGUOUS>
__device__ __forceinline__ void staged_chunk(int& k, int& i) {
    const int e = threadIdx.x;
    i = K_CONTIGUOUS ? e >> 2 : 4 * (e & 15);
    k = K_CONTIGUOUS ? 4 * (e & 3) : e >> 4;
}

// One operand's k step at k0 into a stage: X(k, i) for k0 ≤ k < k0 + 16, i0 ≤ i < i0 + 64 (zeros
// past k_end and I). Memory: X(k, i) = p[i·ld + k] (K_CONTIGUOUS) or p[k·ld + i].
template <bool K_CONTIGUOUS>
__device__ __forceinline__ void stage_async(const float* p, int ld, int I, int i0, int k0, int k_end, float* dst,
                                            bool async) {
    int k, i;
    staged_chunk<K_CONTIGUOUS>(k, i);
    const int bytes = K_CONTIGUOUS ? (i0 + i < I ? 4 * max(0, min(4, k_end - (k0 + k))) : 0)
                                   : (k0 + k < k_end ? 4 * max(0, min(4, I - (i0 + i))) : 0);
    const float* src = K_CONTIGUOUS ? p + (size_t)(i0 + i) * ld + (k0 + k) : p + (size_t)(k0 + k) * ld + (i0 + i);
    copy16_async(dst + Staged<K_CONTIGUOUS, LN_TILE + LN_SPAD>::offset(k, i), bytes > 0 ? src : p, bytes, async);
}

// Mat<SA> A(m, k) is contiguous along k when SA; Mat<SB> B(k, n) along k when !SB.
template <bool SA, bool SB>
__device__ __forceinline__ void stage_step_async(const Mat<SA>& a, const Mat<SB>& b, int M, int N, int k0, int k_end,
                                                 int m0, int n0, float* stage, bool async) {
    stage_async<SA>(a.p, a.ld, M, m0, k0, k_end, stage, async);
    stage_async<!SB>(b.p, b.ld, N, n0, k0, k_end, stage + LN_STAGED_OPERAND, async);
}

template <class P, bool SA, bool SB>
__device__ void gemm_tile_pipelined(const Mat<SA>& a, const Mat<SB>& b, int M, int N, int k_begin, int k_end, int m0,
                                    int n0, float (&acc)[4][4], bool colsums, float& colsum, PipelineSmem& s) {
    typedef Staged<SA, LN_TILE + LN_SPAD> ViewA;
    typedef Staged<!SB, LN_TILE + LN_SPAD> ViewB;
    // 16-byte copies need both operands 16-byte aligned, rows too (else element by element)
    const bool async = (a.ld & 3) == 0 && aligned16(a.p) && (b.ld & 3) == 0 && aligned16(b.p);
    for (int i = 0; i < 4; ++i)
        for (int j = 0; j < 4; ++j) acc[i][j] = 0.f;
    colsum = 0.f;
    // Column sums of B: thread t adds the 16 bytes it staged (its staged_chunk: 4 columns of k row
    // kk, or 4 k rows from kk of column x), read back from where its copy landed.
    int kk, x;
    staged_chunk<!SB>(kk, x);
    float4 cs = make_float4(0.f, 0.f, 0.f, 0.f);
    const int steps = k_begin < k_end ? (k_end - k_begin + LN_TK - 1) / LN_TK : 0;
#pragma unroll
    for (int i = 0; i < LN_STAGES - 1; ++i) {
        if (i < steps) stage_step_async(a, b, M, N, k_begin + i * LN_TK, k_end, m0, n0, s.stages[i], async);
        async_commit();  // one group per step, empty past the end: the wait below counts steps
    }
    for (int i = 0; i < steps; ++i) {
        async_wait<LN_STAGES - 2>();  // this thread's copies of step i have landed ...
        __syncthreads();              // ... everyone's have, and every warp is done with step i − 1
        const int ahead = i + LN_STAGES - 1;
        if (ahead < steps) stage_step_async(a, b, M, N, k_begin + ahead * LN_TK, k_end, m0, n0, s.stages[ahead % LN_STAGES],
                             async);
        async_commit();
        const float* stage = s.stages[i % LN_STAGES];
        if (colsums) add4(cs, ld4(stage + LN_STAGED_OPERAND + ViewB::offset(kk, x)));
        mma_step(P{}, ViewA{stage}, ViewB{stage + LN_STAGED_OPERAND}, acc);
    }
    async_wait<0>();  // (only empty groups are left)
    mma_to_threads(acc, &s.stages[0][0]);  // its first barrier: every warp is done with the stages
    if (colsums) fold_colsums<SB>(cs, kk, x, &s.stages[0][0], colsum);
}

// Which path a tile product takes: the pipeline for the tensor-core precisions, the register path
// for fp32 (on the SIMT cores, from Pascal on).
template <bool TENSOR_CORES>
struct TilePath {
    template <int TM, int DEPTH, class P, class A, class B>
    __device__ static void run(const A& a, const B& b, int M, int N, int k_begin, int k_end, int m0, int n0,
                               float (&acc)[TM][4], bool colsums, float& colsum, GemmSmem<TM>& s) {
        gemm_tile_registers<TM, DEPTH, P>(a, b, M, N, k_begin, k_end, m0, n0, acc, colsums, colsum, s);
    }
};

template <>
struct TilePath<true> {
    template <int TM, int DEPTH, class P, bool SA, bool SB>
    __device__ static void run(const Mat<SA>& a, const Mat<SB>& b, int M, int N, int k_begin, int k_end, int m0,
                               int n0, float (&acc)[4][4], bool colsums, float& colsum, PipelineSmem& s) {
        gemm_tile_pipelined<P>(a, b, M, N, k_begin, k_end, m0, n0, acc, colsums, colsum, s);
    }
};

// acc[i][j] = Σ_{k_begin ≤ k < k_end} A(m0 + TM·ty + i, k) · B(k, n0 + 4·tx + j), as
// gemm_tile_registers defines it, by whichever path suits the precision and the operands.
template <int TM, int DEPTH, class P = PrecFp32, class A, class B>
__device__ void gemm_tile(const A& a, const B& b, int M, int N, int k_begin, int k_end, int m0, int n0,
                          float (&acc)[TM][4], bool colsums, float& colsum, TileSmem<TM, P>& s) {
    TilePath<P::tensor_cores>::template run<TM, DEPTH, P>(a, b, M, N, k_begin, k_end, m0, n0, acc, colsums, colsum, s);
}
