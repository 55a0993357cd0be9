// splitk.cuh — gemm_tile (gemm.cuh) with K split over several blocks, and what the layer
// kernels' epilogues need around it:
//
//   gemm_splitk   K split over several blocks: each writes its partial tile (+ column sums) to
//                 scratch, the last to finish sums the partials in split order (deterministic),
//                 four splits' loads in flight at a time, and runs the epilogue; its counter
//                 returns to zero for the next launch.
//   TileCoords    which tile and split a block owns; store_row4 writes a thread's 4 columns.
//   colsum_splitk out[n] = Σ_k f(k, n) for a 64-column tile (LayerNorm parameter gradients).
#pragma once

#include "gemm.cuh"

// The k range of split `split` of `splits`: whole k steps, the last split possibly shorter.
__device__ __forceinline__ void split_range(int K, int split, int splits, int& k_begin, int& k_end) {
    const int steps = (K + LN_TK - 1) / LN_TK;
    const int per = (steps + splits - 1) / splits;
    k_begin = min(K, split * per * LN_TK);
    k_end = min(K, (split + 1) * per * LN_TK);
}

// Split-K: each split stores its partial sums; returns true in exactly one block of the `splits`
// that share `counter` — the last to finish — with the totals summed in split order. Arrival is
// counted after a fence, so the partials are in L2 before the last block reads them (with __ldcg,
// past its own L1). Every thread of the block must call these.

// One value per active thread (`slot` in a slab of `slab` floats); used for column sums.
template <int COUNT>
__device__ bool splitk_fixup(float (&v)[COUNT], const int (&slot)[COUNT], bool active, int slab, int split,
                             int splits, float* partials, unsigned int* counter) {
    __shared__ int is_last;
    if (splits == 1) return true;
    float* mine = partials + (size_t)split * slab;
    if (active)
        for (int i = 0; i < COUNT; ++i) mine[slot[i]] = v[i];
    __threadfence();  // partials reach L2 before the counter says so
    __syncthreads();
    if (threadIdx.x == 0) is_last = atomicAdd(counter, 1u) == (unsigned int)(splits - 1);
    __syncthreads();
    if (!is_last) return false;
    __threadfence();
    if (active) {
        float total[COUNT];
        for (int i = 0; i < COUNT; ++i) total[i] = 0.f;
        int sp = 0;
        for (; sp + 4 <= splits; sp += 4) {  // 4·COUNT loads in flight, added in split order
            float x[4][COUNT];
#pragma unroll
            for (int q = 0; q < 4; ++q)
                for (int i = 0; i < COUNT; ++i) x[q][i] = __ldcg(partials + (size_t)(sp + q) * slab + slot[i]);
#pragma unroll
            for (int q = 0; q < 4; ++q)
                for (int i = 0; i < COUNT; ++i) total[i] += x[q][i];
        }
        for (; sp < splits; ++sp)
            for (int i = 0; i < COUNT; ++i) total[i] += __ldcg(partials + (size_t)sp * slab + slot[i]);
        for (int i = 0; i < COUNT; ++i) v[i] = total[i];
    }
    if (threadIdx.x == 0) *counter = 0u;
    return true;
}

// A tile (thread t's TM×4 block, 16-byte stores and loads) and its column sums. Slab:
// LN_SLAB_OF(TM) floats per split, 16-byte aligned (partials must be).
template <int TM>
__device__ bool tile_fixup(float (&acc)[TM][4], bool colsums, float& colsum, int split, int splits, float* partials,
                           unsigned int* counter) {
    __shared__ int is_last;
    if (splits == 1) return true;
    const int t = threadIdx.x, tx = t & 15, ty = t >> 4, slab = LN_SLAB_OF(TM), cols = 16 * TM * LN_TILE;
    float* mine = partials + (size_t)split * slab;
    for (int i = 0; i < TM; ++i)
        st4(mine + (TM * ty + i) * LN_TILE + 4 * tx, make_float4(acc[i][0], acc[i][1], acc[i][2], acc[i][3]));
    if (colsums && t < LN_TILE) mine[cols + t] = colsum;
    __threadfence();
    __syncthreads();
    if (t == 0) is_last = atomicAdd(counter, 1u) == (unsigned int)(splits - 1);
    __syncthreads();
    if (!is_last) return false;
    __threadfence();
    constexpr int U = TM == 4 ? 4 : 2;  // splits read at a time: 16 vector loads in flight
    float4 total[TM];
    for (int i = 0; i < TM; ++i) total[i] = make_float4(0.f, 0.f, 0.f, 0.f);
    float ctotal = 0.f;
    const bool mine_col = colsums && t < LN_TILE;
    int sp = 0;
    for (; sp + U <= splits; sp += U) {  // added in split order
        float4 x[U][TM];
        float c[U];
#pragma unroll
        for (int q = 0; q < U; ++q) {
            const float* p = partials + (size_t)(sp + q) * slab;
#pragma unroll
            for (int i = 0; i < TM; ++i) x[q][i] = ld4cg(p + (TM * ty + i) * LN_TILE + 4 * tx);
            c[q] = mine_col ? __ldcg(p + cols + t) : 0.f;
        }
#pragma unroll
        for (int q = 0; q < U; ++q) {
#pragma unroll
            for (int i = 0; i < TM; ++i) add4(total[i], x[q][i]);
            ctotal += c[q];
        }
    }
    for (; sp < splits; ++sp) {
        const float* p = partials + (size_t)sp * slab;
        for (int i = 0; i < TM; ++i) add4(total[i], ld4cg(p + (TM * ty + i) * LN_TILE + 4 * tx));
        if (mine_col) ctotal += __ldcg(p + cols + t);
    }
    for (int i = 0; i < TM; ++i) {
        acc[i][0] = total[i].x;
        acc[i][1] = total[i].y;
        acc[i][2] = total[i].z;
        acc[i][3] = total[i].w;
    }
    colsum = ctotal;
    if (t == 0) *counter = 0u;
    return true;
}

// One output tile (16·TM rows × 64 columns) of C = A·B with K split `splits` ways; true in the
// block holding the finished tile, whose thread owns acc[i][j] = C[m0 + TM·ty + i][n0 + 4·tx + j]
// (t = 16·ty + tx) and, with `colsums`, thread t < 64 colsum = Σ_k B(k, n0 + t).
// partials: splits · LN_SLAB_OF(TM) floats.
template <int TM, int DEPTH = 1, class P = PrecFp32, class A, class B>
__device__ bool gemm_splitk(const A& a, const B& b, int M, int N, int K, int m0, int n0, int split, int splits,
                            float* partials, unsigned int* counter, float (&acc)[TM][4], bool colsums, float& colsum,
                            GemmSmem<TM>& s) {
    int k_begin, k_end;
    split_range(K, split, splits, k_begin, k_end);
    gemm_tile<TM, DEPTH, P>(a, b, M, N, k_begin, k_end, m0, n0, acc, colsums, colsum, s);
    return tile_fixup<TM>(acc, colsums, colsum, split, splits, partials, counter);
}

// The epilogue's view of thread t's TM×4 block of the tile at (m0, n0): row(i) = m0 + TM·ty + i,
// col(j) = n0 + 4·tx + j.
template <int TM>
struct TileAt {
    int m0, n0, tx, ty;
    __device__ TileAt(int m0_, int n0_) : m0(m0_), n0(n0_), tx(threadIdx.x & 15), ty(threadIdx.x >> 4) {}
    __device__ int m(int i) const { return m0 + TM * ty + i; }
    __device__ int n(int j) const { return n0 + 4 * tx + j; }
};

// Block x of a launch over tiles_m · tiles_n tiles (n fastest), each split `splits` ways.
template <int TM>
struct TileCoords : TileAt<TM> {
    int tile, split;
    __device__ TileCoords(int splits, int N)
        : TileAt<TM>(((blockIdx.x / splits) / ((N + LN_TILE - 1) / LN_TILE)) * 16 * TM,
                     ((blockIdx.x / splits) % ((N + LN_TILE - 1) / LN_TILE)) * LN_TILE),
          tile(blockIdx.x / splits), split(blockIdx.x % splits) {}
};

// out[m·ld + n … n+3] = v[0 … 3] for the columns < N: one 16-byte store where aligned.
__device__ __forceinline__ void store_row4(float* out, int ld, int m, int n, int N, const float (&v)[4]) {
    float* q = out + (size_t)m * ld + n;
    if (n + 3 < N && (ld & 3) == 0 && aligned16(q)) {
        st4(q, make_float4(v[0], v[1], v[2], v[3]));
        return;
    }
    for (int j = 0; j < 4; ++j)
        if (n + j < N) q[j] = v[j];
}

// out = Σ_{k in this split} f(k, n) for n = n0 + t (t < 64): 4 lanes of 64 columns walk the rows
// (8 loads in flight each, added in row order), then fold. Returns true in the block holding the
// finished sums (thread t < 64 owns column n0+t). partials: splits · 64 floats.
template <class F>
__device__ bool colsum_splitk(const F& f, int N, int K, int n0, int split, int splits, float* partials,
                              unsigned int* counter, float& out) {
    __shared__ float fold[LN_THREADS];
    int k_begin, k_end;
    split_range(K, split, splits, k_begin, k_end);
    const int lanes = LN_THREADS / 64, col = threadIdx.x & 63, lane = threadIdx.x >> 6, n = n0 + col;
    float acc = 0.f;
    if (n < N) {
        int k = k_begin + lane;
        for (; k + 7 * lanes < k_end; k += 8 * lanes) {
            float x[8];
#pragma unroll
            for (int q = 0; q < 8; ++q) x[q] = f(k + q * lanes, n);
#pragma unroll
            for (int q = 0; q < 8; ++q) acc += x[q];
        }
        for (; k < k_end; k += lanes) acc += f(k, n);
    }
    fold[threadIdx.x] = acc;
    __syncthreads();
    float v[1] = {0.f};
    const int slot[1] = {col};
    if (threadIdx.x < 64) v[0] = ((fold[col] + fold[col + 64]) + fold[col + 128]) + fold[col + 192];
    __syncthreads();  // fold[] is free again
    const bool done = splitk_fixup(v, slot, threadIdx.x < 64, LN_TILE, split, splits, partials, counter);
    out = v[0];
    return done;
}
