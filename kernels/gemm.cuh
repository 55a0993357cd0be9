// gemm.cuh — the matrix-product building blocks every layer kernel composes (no cuBLAS):
//
//   gemm_tile     C[64×64 tile] = Σ_k A(m, k) · B(k, n) over one k range, 256 threads, 4×4 outputs
//                 per thread; A and B are accessor functors, so the same loop reads float
//                 matrices in either orientation, a row of ones (bias gradients) or uint8 pixels.
//   splitk_fixup  K split over several blocks: each writes its partial tile to scratch, the last
//                 to finish sums the partials in split order (deterministic) and runs the
//                 epilogue; its counter returns to zero for the next launch.
//   colsum_tile   out[n] = Σ_k f(k, n) for a 64-column tile (bias and LayerNorm parameter grads).
//   rows_matmul   out[r, n] = Σ_k in[r, k] · W(k, n) for a few rows held in shared memory (the fused
//                 small-batch kernel; W read straight from L2/L1, 16 loads in flight per thread).
//
// Limits: tiles are 64×64 with k steps of 16; M, N, K need not be multiples of anything (loads
// are guarded, out-of-range elements read as 0). rows_matmul holds at most 16 rows per thread,
// and its input rows are padded to a multiple of 16 floats.
#pragma once

#define LN_TILE 64
#define LN_TK 16
#define LN_ROWS_MAX 16

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
};

// Appends a row of ones to an accessor (A(rows, k) = 1), so that [Xᵀ; 1ᵀ]·∂Y yields ∂W and, in its
// last row, ∂b = Σ_b ∂Y in the same product.
template <class Inner>
struct OnesRow {
    Inner inner;
    int rows;
    static constexpr bool second_contiguous = Inner::second_contiguous;
    __device__ __forceinline__ float operator()(int i, int j) const { return i < rows ? inner(i, j) : 1.f; }
};

// s(x)ᵀ as an A operand: A(i, b) = pixels(b, i) (consecutive i are consecutive bytes of one image).
struct PixelsT {
    Pixels px;
    static constexpr bool second_contiguous = false;
    __device__ __forceinline__ float operator()(int i, int b) const { return px(b, i); }
};

// s(x) as an A operand: A(b, i) = pixels(b, i).
struct PixelsRows {
    Pixels px;
    static constexpr bool second_contiguous = true;
    __device__ __forceinline__ float operator()(int b, int i) const { return px(b, i); }
};

struct GemmSmem {
    float a[LN_TK][LN_TILE + 1];  // a[k][m]; +1 spreads the transposing stores over the banks
    float b[LN_TK][LN_TILE + 1];  // b[k][n]
};

// Thread t owns rows m0 + t/16 + 16i and columns n0 + t%16 + 16j, i, j < 4 (strided, so the
// shared-memory reads of a warp hit distinct banks and its global stores are 64-byte runs).
template <class A, class B>
__device__ __forceinline__ void gemm_fetch(const A& a, const B& b, int M, int N, int k0, int k_end, int m0, int n0,
                                           float (&ra)[4], float (&rb)[4]) {
    // Each thread fetches 4 of the 16×64 elements of each tile; consecutive threads walk the
    // operand's contiguous index so global reads coalesce.
    const int t = threadIdx.x;
    for (int l = 0; l < 4; ++l) {
        const int e = t + l * LN_THREADS;
        const int kk = A::second_contiguous ? e % LN_TK : e / LN_TILE;
        const int mm = A::second_contiguous ? e / LN_TK : e % LN_TILE;
        const int m = m0 + mm, k = k0 + kk;
        ra[l] = (m < M && k < k_end) ? a(m, k) : 0.f;
    }
    for (int l = 0; l < 4; ++l) {
        const int e = t + l * LN_THREADS;
        const int kk = B::second_contiguous ? e / LN_TILE : e % LN_TK;
        const int nn = B::second_contiguous ? e % LN_TILE : e / LN_TK;
        const int n = n0 + nn, k = k0 + kk;
        rb[l] = (n < N && k < k_end) ? b(k, n) : 0.f;
    }
}

// Thread t owns rows m0 + t/16 + 16i and columns n0 + t%16 + 16j, i, j < 4 (strided, so the
// shared-memory reads of a warp hit distinct banks and its global stores are 64-byte runs).
// The next k step's elements are fetched into registers while this one is multiplied, so global
// latency overlaps the arithmetic.
template <class A, class B>
__device__ void gemm_tile(const A& a, const B& b, int M, int N, int k_begin, int k_end, int m0, int n0,
                          float (&acc)[4][4], GemmSmem& s) {
    const int t = threadIdx.x, tx = t & 15, ty = t >> 4;
    for (int i = 0; i < 4; ++i)
        for (int j = 0; j < 4; ++j) acc[i][j] = 0.f;
    float ra[4], rb[4];
    if (k_begin < k_end) gemm_fetch(a, b, M, N, k_begin, k_end, m0, n0, ra, rb);
    for (int k0 = k_begin; k0 < k_end; k0 += LN_TK) {
        for (int l = 0; l < 4; ++l) {
            const int e = t + l * LN_THREADS;
            s.a[A::second_contiguous ? e % LN_TK : e / LN_TILE][A::second_contiguous ? e / LN_TK : e % LN_TILE] = ra[l];
            s.b[B::second_contiguous ? e / LN_TILE : e % LN_TK][B::second_contiguous ? e % LN_TILE : e / LN_TK] = rb[l];
        }
        __syncthreads();
        if (k0 + LN_TK < k_end) gemm_fetch(a, b, M, N, k0 + LN_TK, k_end, m0, n0, ra, rb);
        for (int kk = 0; kk < LN_TK; ++kk) {
            float av[4], bv[4];
            for (int i = 0; i < 4; ++i) av[i] = s.a[kk][ty + 16 * i];
            for (int j = 0; j < 4; ++j) bv[j] = s.b[kk][tx + 16 * j];
            for (int i = 0; i < 4; ++i)
                for (int j = 0; j < 4; ++j) acc[i][j] += av[i] * bv[j];
        }
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

// Split-K: returns true in exactly one block of the `splits` that share `counter` — the last to
// finish — with v[] holding the totals summed in split order. `slot[i]` places v[i] in a slab of
// `slab` floats; inactive threads hold nothing. Every thread of the block must call it.
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
    if (active)
        for (int i = 0; i < COUNT; ++i) {
            float total = 0.f;
            for (int sp = 0; sp < splits; ++sp) total += __ldcg(partials + (size_t)sp * slab + slot[i]);
            v[i] = total;
        }
    if (threadIdx.x == 0) *counter = 0u;
    return true;
}

// One 64×64 output tile of C = A·B with K split `splits` ways; true in the block holding the
// finished tile, whose thread owns acc[i][j] = C[m0 + t/16 + 16i][n0 + t%16 + 16j].
template <class A, class B>
__device__ bool gemm_splitk(const A& a, const B& b, int M, int N, int K, int m0, int n0, int split, int splits,
                            float* partials, unsigned int* counter, float (&acc)[4][4], GemmSmem& s) {
    int k_begin, k_end;
    split_range(K, split, splits, k_begin, k_end);
    gemm_tile(a, b, M, N, k_begin, k_end, m0, n0, acc, s);
    float v[16];
    int slot[16];
    const int tx = threadIdx.x & 15, ty = threadIdx.x >> 4;
    for (int i = 0; i < 4; ++i)
        for (int j = 0; j < 4; ++j) {
            v[i * 4 + j] = acc[i][j];
            slot[i * 4 + j] = (ty + 16 * i) * LN_TILE + tx + 16 * j;
        }
    const bool done = splitk_fixup(v, slot, true, LN_TILE * LN_TILE, split, splits, partials, counter);
    for (int i = 0; i < 4; ++i)
        for (int j = 0; j < 4; ++j) acc[i][j] = v[i * 4 + j];
    return done;
}

// out = Σ_{k in this split} f(k, n) for n = n0 + t (t < 64): 4 lanes of 64 columns walk the rows,
// then fold. Returns true in the block holding the finished sums (thread t < 64 owns column n0+t).
template <class F>
__device__ bool colsum_splitk(const F& f, int N, int K, int n0, int split, int splits, float* partials,
                              unsigned int* counter, float& out) {
    __shared__ float fold[LN_THREADS];
    int k_begin, k_end;
    split_range(K, split, splits, k_begin, k_end);
    const int col = threadIdx.x & 63, lane = threadIdx.x >> 6, n = n0 + col;
    float acc = 0.f;
    if (n < N)
        for (int k = k_begin + lane; k < k_end; k += LN_THREADS / 64) acc += f(k, n);
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
// `scratch` (256 floats of shared memory). Each thread issues 16 weight loads at a time, so L2
// latency is paid once per 16 k, not once per k. `in` rows are read 4 floats at a time up to a
// multiple of 16: ldi must be a multiple of 16, `in` 16-byte aligned and its padding zero.
// Ends with a barrier, so `out` is ready for every thread.
#define LN_KCHUNK 16
__device__ void rows_matmul(const float* in, int ldi, int R, const float* W, int K, int N, bool transposed,
                            const float* bias, float* out, int ldo, float* scratch) {
    const int ncols = min((N + 31) & ~31, (int)blockDim.x);
    const int groups = blockDim.x / ncols;
    const int row_groups = min(groups, R), k_groups = groups / row_groups;
    const int col = threadIdx.x % ncols, g = threadIdx.x / ncols;
    const int rg = g % row_groups, kg = g / row_groups;
    const bool working = g < row_groups * k_groups;
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
#pragma unroll
                for (int q = 0; q < LN_KCHUNK; ++q) {
                    const int k = k0 + q;
                    w[q] = k < k_end ? (transposed ? W[(size_t)n * K + k] : W[(size_t)k * N + n]) : 0.f;
                }
#pragma unroll
                for (int q = 0; q < LN_KCHUNK; q += 4)
                    for (int i = 0; i < LN_ROWS_MAX; ++i) {
                        const int r = rg + i * row_groups;
                        if (r < R) {
                            const float4 x = *reinterpret_cast<const float4*>(in + r * ldi + k0 + q);
                            acc[i] += ((x.x * w[q] + x.y * w[q + 1]) + x.z * w[q + 2]) + x.w * w[q + 3];
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
