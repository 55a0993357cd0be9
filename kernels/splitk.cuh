// splitk.cuh — gemm_tile (gemm.cuh) with K split over several blocks, and what the layer
// kernels' epilogues need around it:
//
//   gemm_splitk   K split over several blocks: each writes its partial tile (+ column sums) to
//                 scratch, the last to finish sums the partials in a fixed order (deterministic;
//                 in two levels past LN_GROUP splits, tile_fixup), three (TM 4) or two (TM 8)
//                 splits' loads in flight at a time, and runs the epilogue; its counters return to
//                 zero for the next launch.
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

// A tile's split-K sum in two levels. With more than LN_GROUP splits, the last block to finish of
// each group of LN_GROUP consecutive splits sums that group's partials (in split order) into the
// group's first slab, and the last group to finish sums the groups' totals (in group order): the
// result is deterministic, and no block reads more than max(LN_GROUP, groups) slabs. With one level
// the one block reading every slab costs a many-split product (the Mixer's token ∂W: one 64 × 64
// tile, 264 splits, 4.3 MiB read by one block) several times its multiply-adds (docs/decisions.md,
// "Split-K").
#define LN_GROUP 16
#define LN_MAX_GROUPS 31                      // so at most 16 · 31 = 496 splits
#define LN_TILE_COUNTERS (1 + LN_MAX_GROUPS)  // a tile's counters: the tile's, then one per group

// The groups of a tile's `splits`: how many, and group g's splits, g · LN_GROUP up to group_end (its
// members). tile_fixup and token_linear.cu's token_linear_backward_weight_sum sum in this grouping.
__device__ __forceinline__ int split_groups(int splits) { return (splits + LN_GROUP - 1) / LN_GROUP; }
__device__ __forceinline__ int group_end(int group, int splits) { return min(splits, (group + 1) * LN_GROUP); }
__device__ __forceinline__ int group_members(int group, int splits) { return min(LN_GROUP, splits - group * LN_GROUP); }

// The counters of tile `tile` of a launch (counters ≥ tiles · LN_TILE_COUNTERS, zeroed).
__device__ __forceinline__ unsigned int* tile_counters(unsigned int* counters, int tile) {
    return counters + (size_t)tile * LN_TILE_COUNTERS;
}

// Counts this block's arrival at `counter`, after its stores; true in the block that arrives last
// of `arrivals`, which resets the counter and may then read what the others stored (past its own
// L1: __ldcg). Every thread of the block must call it.
__device__ __forceinline__ bool arrive_last(unsigned int* counter, int arrivals) {
    __shared__ int is_last;
    __threadfence();  // this block's stores reach L2 before the counter says so
    __syncthreads();
    if (threadIdx.x == 0) {
        is_last = atomicAdd(counter, 1u) == (unsigned int)(arrivals - 1);
        if (is_last) *counter = 0u;  // every arrival is in: left at zero for the next launch
    }
    __syncthreads();
    if (!is_last) return false;
    __threadfence();
    return true;
}

// Split-K of column sums: one value per active thread (`slot` in a slab of `slab` floats); true in
// exactly one block of the `splits` that share `counter` — the last to finish — with the totals
// summed in split order (the slabs are 64 floats: one level is enough).
template <int COUNT>
__device__ bool splitk_fixup(float (&v)[COUNT], const int (&slot)[COUNT], bool active, int slab, int split,
                             int splits, float* partials, unsigned int* counter) {
    if (splits == 1) return true;
    float* mine = partials + (size_t)split * slab;
    if (active)
        for (int i = 0; i < COUNT; ++i) mine[slot[i]] = v[i];
    if (!arrive_last(counter, splits)) return false;
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
    return true;
}

// Thread t's TM×4 block of a tile (and, t < 64 with `col`, its column sum) into slab `slab_p`.
template <int TM>
__device__ __forceinline__ void store_slab(float* slab_p, const float (&acc)[TM][4], bool col, float colsum) {
    const int t = threadIdx.x, tx = t & 15, ty = t >> 4;
    for (int i = 0; i < TM; ++i)
        st4(slab_p + (TM * ty + i) * LN_TILE + 4 * tx, make_float4(acc[i][0], acc[i][1], acc[i][2], acc[i][3]));
    if (col) slab_p[16 * TM * LN_TILE + t] = colsum;
}

// acc (and colsum) = the sum of slabs first, first + stride, … (`count` of them), added in that order.
template <int TM>
__device__ void sum_slabs(float (&acc)[TM][4], float& colsum, bool col, const float* partials, int first, int stride,
                          int count) {
    const int t = threadIdx.x, tx = t & 15, ty = t >> 4, slab = LN_SLAB_OF(TM), cols = 16 * TM * LN_TILE;
    // Slabs read at a time: 12 (TM 4) or 16 (TM 8) vector loads in flight. 4 at TM 4 would hold 64
    // floats and take the ∂W kernels from 80 to 84–86 registers (ptxas, sm_90): 2 blocks per
    // multiprocessor instead of 3. The sum is the same either way: slabs are added one after another,
    // in order.
    constexpr int U = TM == 4 ? 3 : 2;
    float4 total[TM];
    for (int i = 0; i < TM; ++i) total[i] = make_float4(0.f, 0.f, 0.f, 0.f);
    float ctotal = 0.f;
    int q0 = 0;
    for (; q0 + U <= count; q0 += U) {
        float4 x[U][TM];
        float c[U];
#pragma unroll
        for (int q = 0; q < U; ++q) {
            const float* p = partials + (size_t)(first + (q0 + q) * stride) * slab;
#pragma unroll
            for (int i = 0; i < TM; ++i) x[q][i] = ld4cg(p + (TM * ty + i) * LN_TILE + 4 * tx);
            c[q] = col ? __ldcg(p + cols + t) : 0.f;
        }
#pragma unroll
        for (int q = 0; q < U; ++q) {
#pragma unroll
            for (int i = 0; i < TM; ++i) add4(total[i], x[q][i]);
            ctotal += c[q];
        }
    }
    for (; q0 < count; ++q0) {
        const float* p = partials + (size_t)(first + q0 * stride) * slab;
        for (int i = 0; i < TM; ++i) add4(total[i], ld4cg(p + (TM * ty + i) * LN_TILE + 4 * tx));
        if (col) ctotal += __ldcg(p + cols + t);
    }
    for (int i = 0; i < TM; ++i) {
        acc[i][0] = total[i].x;
        acc[i][1] = total[i].y;
        acc[i][2] = total[i].z;
        acc[i][3] = total[i].w;
    }
    colsum = ctotal;
}

// A tile (thread t's TM×4 block) and its column sums, split `splits` ≤ LN_GROUP · LN_MAX_GROUPS
// ways; true in the one block that ends holding the totals. Slab: LN_SLAB_OF(TM) floats per
// split, 16-byte aligned (partials must be); counters: the tile's (tile_counters).
template <int TM>
__device__ bool tile_fixup(float (&acc)[TM][4], bool colsums, float& colsum, int split, int splits, float* partials,
                           unsigned int* counters) {
    if (splits == 1) return true;
    const bool col = colsums && threadIdx.x < LN_TILE;
    const int slab = LN_SLAB_OF(TM), group = split / LN_GROUP, first = group * LN_GROUP;
    const int groups = split_groups(splits), members = group_members(group, splits);
    store_slab<TM>(partials + (size_t)split * slab, acc, col, colsum);
    // One group: its counter is the tile's, and its sum the total.
    if (!arrive_last(groups == 1 ? counters : counters + 1 + group, members)) return false;
    sum_slabs<TM>(acc, colsum, col, partials, first, 1, members);
    if (groups == 1) return true;
    // Into the group's first slab: each thread rewrites only the values it has just read itself.
    store_slab<TM>(partials + (size_t)first * slab, acc, col, colsum);
    if (!arrive_last(counters, groups)) return false;
    sum_slabs<TM>(acc, colsum, col, partials, 0, LN_GROUP, groups);
    return true;
}

// One output tile (16·TM rows × 64 columns) of C = A·B with K split `splits` ways; true in the
// block holding the finished tile, whose thread owns acc[i][j] = C[m0 + TM·ty + i][n0 + 4·tx + j]
// (t = 16·ty + tx) and, with `colsums`, thread t < 64 colsum = Σ_k B(k, n0 + t).
// partials: splits · LN_SLAB_OF(TM) floats; counters: the tile's (tile_counters).
template <int TM, int DEPTH = 1, class P = PrecFp32, class A, class B>
__device__ bool gemm_splitk(const A& a, const B& b, int M, int N, int K, int m0, int n0, int split, int splits,
                            float* partials, unsigned int* counters, float (&acc)[TM][4], bool colsums, float& colsum,
                            TileSmem<TM, P>& s) {
    int k_begin, k_end;
    split_range(K, split, splits, k_begin, k_end);
    gemm_tile<TM, DEPTH, P>(a, b, M, N, k_begin, k_end, m0, n0, acc, colsums, colsum, s);
    return tile_fixup<TM>(acc, colsums, colsum, split, splits, partials, counters);
}

// The same block's partial only: its tile over split `split`'s K range (and B's column sums with `colsums`)
// into slab `split` of `partials` (the tile's splits · LN_SLAB_OF(TM) floats), no counters and no fix-up: a
// second launch sums the slabs in tile_fixup's order (token_linear.cu's token_linear_backward_weight_sum).
template <int TM, int DEPTH = 1, class P = PrecFp32, class A, class B>
__device__ void gemm_partial(const A& a, const B& b, int M, int N, int K, int m0, int n0, int split, int splits,
                             float* partials, bool colsums, TileSmem<TM, P>& s) {
    int k_begin, k_end;
    split_range(K, split, splits, k_begin, k_end);
    float acc[TM][4], colsum;
    gemm_tile<TM, DEPTH, P>(a, b, M, N, k_begin, k_end, m0, n0, acc, colsums, colsum, s);
    store_slab<TM>(partials + (size_t)split * LN_SLAB_OF(TM), acc, colsums && threadIdx.x < LN_TILE, colsum);
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
