// gemm.cuh — the matrix-product building blocks every layer kernel composes (no cuBLAS):
//
//   gemm_tile     C[tile] = Σ_k A(m, k) · B(k, n) over one k range, for a tile of 64 columns and 64
//                 rows (TM = 4) or 128 ("tall", TM = 8): 256 threads, each owning a TM×4 block (rows
//                 TM·ty …, columns 4·tx …, t = 16·ty + tx); k steps of 16 staged
//                 through two shared-memory buffers (one barrier per step) with the next step's
//                 operands (or the next two's, DEPTH 2) fetched into registers during the multiply;
//                 operands read 16 bytes at a
//                 time along their contiguous index where the matrix allows (Mat::load4).
//                 Optionally also Σ_k B(k, n) (a bias gradient's column sums, from the same loads).
//   gemm_splitk   K split over several blocks: each writes its partial tile (+ column sums) to
//                 scratch, the last to finish sums the partials in split order (deterministic),
//                 four splits' loads in flight at a time, and runs the epilogue; its counter
//                 returns to zero for the next launch.
//   colsum_splitk out[n] = Σ_k f(k, n) for a 64-column tile (LayerNorm parameter gradients).
//   rows_matmul   out[r, n] = Σ_k in[r, k] · W(k, n) for a few rows held in shared memory (the fused
//                 small-batch kernel; W read straight from L2/L1, 64 loads in flight per thread).
//
// Limits: tiles are 64 or 128 × 64 with k steps of 16; M, N, K need not be multiples of anything (loads
// are guarded, out-of-range elements read as 0; a matrix whose leading dimension or base is not
// 16-byte aligned is read one float at a time). rows_matmul holds at most 16 rows per thread,
// and its input rows are padded to a multiple of 16 floats (zeros).
#pragma once

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

// One k step of gemm_tile: fetch the step `ahead` steps on into `fetch_*` (its loads then have
// `ahead` steps of multiplies to arrive), multiply the step in shared buffer `buf`, stage the next
// step (held in `next_*`) into the other buffer, which was last read before the previous barrier.
template <int TM, class A, class B>
__device__ __forceinline__ void gemm_step(const A& a, const B& b, int M, int N, int k0, int k_end, int m0, int n0,
                                          int ahead, const FetchSlots<16 * TM, !A::second_contiguous>& fa,
                                          const FetchSlots<LN_TILE, B::second_contiguous>& fb,
                                          float4 (&fetch_a)[TM / 4], float4 (&fetch_b)[1],
                                          const float4 (&next_a)[TM / 4], const float4 (&next_b)[1], int buf,
                                          float (&acc)[TM][4], bool sums, float4& cs, GemmSmem<TM>& s) {
    const int tx = threadIdx.x & 15, ty = threadIdx.x >> 4;
    if (k0 + ahead * LN_TK < k_end)
        gemm_fetch<TM>(a, b, M, N, k0 + ahead * LN_TK, k_end, m0, n0, fa, fb, fetch_a, fetch_b);
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
// operands are fetched into registers — 1, or 2 for products whose few blocks per multiprocessor
// leave load latency exposed (a reduction over the batch: ∂W); 2 costs another TM + 4 registers.
// Every thread of the block must call it with the same k range; it ends with a barrier.
template <int TM, int DEPTH, class A, class B>
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
            gemm_step<TM>(a, b, M, N, k0, k_end, m0, n0, 1, fa, fb, ra, rb, ra, rb, buf, acc, sums, cs, s);
    } else {  // two register sets take turns (unrolled by two so neither is indexed at run time)
        for (int k0 = k_begin; k0 < k_end; k0 += 2 * LN_TK) {
            gemm_step<TM>(a, b, M, N, k0, k_end, m0, n0, 2, fa, fb, ra, rb, qa, qb, 0, acc, sums, cs, s);
            if (k0 + LN_TK >= k_end) break;
            gemm_step<TM>(a, b, M, N, k0 + LN_TK, k_end, m0, n0, 2, fa, fb, qa, qb, ra, rb, 1, acc, sums, cs, s);
        }
    }
    if (sums) {  // fold the 16 k rows of each column: red[k row][column] in buffer a (≥ 16·64 floats)
        float* red = &s.a[0][0][0];
        st4(red + fb.kk[0] * LN_TILE + fb.x[0], cs);
        __syncthreads();
        if (t < LN_TILE)
            for (int r = 0; r < LN_TK; ++r) colsum += red[r * LN_TILE + t];
        __syncthreads();
    }
}

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
template <int TM, int DEPTH = 1, class A, class B>
__device__ bool gemm_splitk(const A& a, const B& b, int M, int N, int K, int m0, int n0, int split, int splits,
                            float* partials, unsigned int* counter, float (&acc)[TM][4], bool colsums, float& colsum,
                            GemmSmem<TM>& s) {
    int k_begin, k_end;
    split_range(K, split, splits, k_begin, k_end);
    gemm_tile<TM, DEPTH>(a, b, M, N, k_begin, k_end, m0, n0, acc, colsums, colsum, s);
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

// ---------------------------------------------------------------------------------------------
// Rows held in shared memory times a weight matrix read from global memory (the fused kernel).
// out[r·ldo + n] = Σ_k in[r·ldi + k] · W(k, n) (+ bias[n]) for r < R ≤ 16, n < N, with
// W(k, n) = W[k·N + n] ("x W", the forward) or, when transposed, W[n·K + k] ("∂y Wᵀ").
// Threads are (group, column). A narrow N leaves several groups: they take different rows and,
// when there are fewer rows than groups, different k ranges, whose partial sums meet in
// `scratch` (256 floats of shared memory). Each thread issues 64 weight loads at a time (16-byte
// loads along a row in the transposed case), so L2 latency is paid once per 64 k: the fused
// kernel's chain of dependent phases is what bounds a small batch (H200, 2026-12-02). `in` rows
// are read 4 floats at a time up to a multiple of 16: ldi must be a multiple of 16, `in` 16-byte
// aligned and its padding zero.
// Ends with a barrier, so `out` is ready for every thread. Not inlined: one copy serves the six
// call sites of the fused kernel, whose registers would otherwise spill.
#define LN_KCHUNK 64
__device__ __noinline__ void rows_matmul(const float* in, int ldi, int R, const float* W, int K, int N, bool transposed,
                            const float* bias, float* out, int ldo, float* scratch) {
    const int ncols = min((N + 31) & ~31, (int)blockDim.x);
    const int groups = blockDim.x / ncols;
    const int row_groups = min(groups, R), k_groups = groups / row_groups;
    const int col = threadIdx.x % ncols, g = threadIdx.x / ncols;
    const int rg = g % row_groups, kg = g / row_groups;
    const bool working = g < row_groups * k_groups;
    const bool vec_rows = (K & 3) == 0 && aligned16(W);  // transposed rows start 16-byte aligned
    const int kchunk = ((K + k_groups - 1) / k_groups + LN_KCHUNK - 1) & ~(LN_KCHUNK - 1);
    const int k_begin = min(K, kg * kchunk), k_end = min(K, k_begin + kchunk);
    for (int n0 = 0; n0 < N; n0 += ncols) {  // the same trip count for every thread: barriers inside
        const int n = n0 + col;
        const bool active = working && n < N;
        float acc[LN_ROWS_MAX];
        for (int i = 0; i < LN_ROWS_MAX; ++i) acc[i] = 0.f;
        if (active) {
            for (int k0 = k_begin; k0 < k_end; k0 += LN_KCHUNK) {
                float w[LN_KCHUNK];
                if (transposed && vec_rows) {  // one weight row: 16-byte loads
                    const float* q = W + (size_t)n * K + k0;
#pragma unroll
                    for (int v = 0; v < LN_KCHUNK / 4; ++v) {
                        const int k = k0 + 4 * v;
                        float4 x = make_float4(0.f, 0.f, 0.f, 0.f);
                        if (k + 3 < k_end) {
                            x = ld4(q + 4 * v);
                        } else if (k < k_end) {
                            x.x = q[4 * v];
                            if (k + 1 < k_end) x.y = q[4 * v + 1];
                            if (k + 2 < k_end) x.z = q[4 * v + 2];
                        }
                        w[4 * v] = x.x;
                        w[4 * v + 1] = x.y;
                        w[4 * v + 2] = x.z;
                        w[4 * v + 3] = x.w;
                    }
                } else {
#pragma unroll
                    for (int q = 0; q < LN_KCHUNK; ++q) {
                        const int k = k0 + q;
                        w[q] = k < k_end ? (transposed ? W[(size_t)n * K + k] : W[(size_t)k * N + n]) : 0.f;
                    }
                }
#pragma unroll
                for (int q16 = 0; q16 < LN_KCHUNK; q16 += 16) {
                    if (k0 + q16 >= k_end) break;  // rows are padded to 16 floats: stay inside the row
#pragma unroll
                    for (int q = q16; q < q16 + 16; q += 4)
                        for (int i = 0; i < LN_ROWS_MAX; ++i) {
                            const int r = rg + i * row_groups;
                            if (r < R) {
                                const float4 x = *reinterpret_cast<const float4*>(in + r * ldi + k0 + q);
                                acc[i] += ((x.x * w[q] + x.y * w[q + 1]) + x.z * w[q + 2]) + x.w * w[q + 3];
                            }
                        }
                }
            }
        }
        const float b = (active && bias) ? bias[n] : 0.f;
        if (k_groups == 1) {
            if (active)
                for (int i = 0; i < LN_ROWS_MAX; ++i) {
                    const int r = rg + i * row_groups;
                    if (r < R) out[r * ldo + n] = acc[i] + b;
                }
        } else {  // fewer rows than groups: row_groups == R, one row per thread
            if (active) scratch[(kg * R + rg) * ncols + col] = acc[0];
            __syncthreads();
            if (active && kg == 0) {
                float total = 0.f;
                for (int j = 0; j < k_groups; ++j) total += scratch[(j * R + rg) * ncols + col];
                out[rg * ldo + n] = total + b;
            }
            __syncthreads();  // scratch is free for the next columns
        }
    }
    __syncthreads();
}
