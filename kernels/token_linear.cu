// token_linear.cu — the Mixer's product across the patches and its gradients (twins:
// litenet.ops.token_linear_forward, litenet.ops.token_linear_backward). Activations are tokens-major, so a tensor
// (T, B, d) is the matrix X (T, N) with N = B·d, and the product is one matrix product with no
// transposed copy: W is read through a transposed view where the formula wants Wᵀ.
//
//   token_linear_gelu_forward:         u = Wᵀ X + b (b per output patch), a = GELU(u)   W: (T, T')
//   token_linear_residual_forward:     y = r + Wᵀ X + b  (the branch joins the residual stream)
//   token_linear_backward_input:       ∂X = W ∂Y
//   token_linear_backward_input_gelu:  ∂U = (W ∂Y) · GELU'(u)  (through the GELU before the product)
//   token_linear_backward_weight:      ∂W = X ∂Yᵀ, ∂b[j] = Σ_n ∂Y[j, n]  (sums over all N = B·d
//                                      columns: split-K; ∂b from the staged ∂Y, as linear.cu's ∂b)
//   token_linear_backward_weight_partials, then token_linear_backward_weight_sum: the same ∂W, ∂b in two
//                                      launches — every split's partial tile stored, then each output
//                                      summed in the one launch's order by threads across the GPU, where
//                                      the one launch has a tile's last blocks read its hundreds of
//                                      partials alone (the same bits)
//
// Each product in three precisions (mma.cuh): the plain names fp32 on the SIMT cores, `_tf32` and
// `_bf16` on the tensor cores (sm_80+). Launch: 256 threads; products: grid = tiles_m · tiles_n ·
// splits over the output (64 × 64 tiles), scratch ≥ tiles·splits·LN_SLAB_OF(4) floats when
// splits > 1, counters ≥ tiles·LN_TILE_COUNTERS zeroed (left zeroed). Limits: int indexing.
#include "common.cuh"
#include "splitk.cuh"

template <bool GELU, class P>
__device__ void token_forward_body(const float* x, const float* W, const float* bias, const float* r, float* u,
                                   float* a, int T, int T_out, int N, int splits, float* scratch,
                                   unsigned int* counters) {
    __shared__ TileSmem<4, P> smem;
    const TileCoords<4> tc(splits, N);
    float acc[4][4], unused;
    // A(j, t) = W[t, j]: W (T, T') read as a transposed view.
    if (!gemm_splitk<4, 2, P>(Mat<false>{W, T_out}, Mat<true>{x, N}, T_out, N, T, tc.m0, tc.n0, tc.split, splits,
                              scratch + (size_t)tc.tile * splits * LN_SLAB_OF(4), tile_counters(counters, tc.tile), acc, false,
                              unused, smem))
        return;
    for (int i = 0; i < 4; ++i) {
        const int j = tc.m(i);
        if (j >= T_out) continue;
        float v[4], g[4];
        for (int q = 0; q < 4; ++q) {
            v[q] = acc[i][q] + bias[j];
            if (r != nullptr && tc.n(q) < N) v[q] += r[(size_t)j * N + tc.n(q)];
            g[q] = GELU ? gelu_value(v[q]) : 0.f;
        }
        store_row4(u, N, j, tc.n(0), N, v);
        if (GELU) store_row4(a, N, j, tc.n(0), N, g);
    }
}

template <class P>
__device__ void token_backward_input_body(const float* dy, const float* W, const float* u, float* dx, int T,
                                          int T_out, int N, int splits, float* scratch, unsigned int* counters) {
    __shared__ TileSmem<4, P> smem;
    const TileCoords<4> tc(splits, N);
    float acc[4][4], unused;
    if (!gemm_splitk<4, 2, P>(Mat<true>{W, T_out}, Mat<true>{dy, N}, T, N, T_out, tc.m0, tc.n0, tc.split, splits,
                              scratch + (size_t)tc.tile * splits * LN_SLAB_OF(4), tile_counters(counters, tc.tile), acc, false,
                              unused, smem))
        return;
    for (int i = 0; i < 4; ++i) {
        const int t = tc.m(i);
        if (t >= T) continue;
        if (u != nullptr)
            for (int q = 0; q < 4; ++q)
                if (tc.n(q) < N) acc[i][q] *= gelu_slope(u[(size_t)t * N + tc.n(q)]);
        store_row4(dx, N, t, tc.n(0), N, acc[i]);
    }
}

template <class P>
__device__ void token_backward_weight_body(const float* x, const float* dy, float* dW, float* db, int T, int T_out,
                                           int N, int splits, float* scratch, unsigned int* counters) {
    __shared__ TileSmem<4, P> smem;
    const TileCoords<4> tc(splits, T_out);
    const bool bias_row = tc.m0 == 0;  // the first tile row also sums B's columns: ∂b[j] = Σ_n ∂Y[j, n]
    float acc[4][4], db_sum;
    // B(n, j) = ∂Y[j, n]: ∂Y read as a transposed view; a long sum over few blocks: fetch two steps ahead.
    if (!gemm_splitk<4, 2, P>(Mat<true>{x, N}, Mat<false>{dy, N}, T, T_out, N, tc.m0, tc.n0, tc.split, splits,
                              scratch + (size_t)tc.tile * splits * LN_SLAB_OF(4), tile_counters(counters, tc.tile), acc,
                              bias_row, db_sum, smem))
        return;
    for (int i = 0; i < 4; ++i)
        if (tc.m(i) < T) store_row4(dW, T_out, tc.m(i), tc.n(0), T_out, acc[i]);
    if (bias_row && threadIdx.x < LN_TILE && tc.n0 + (int)threadIdx.x < T_out) db[tc.n0 + threadIdx.x] = db_sum;
}

template <class P>
__device__ void token_backward_weight_partials_body(const float* x, const float* dy, int T, int T_out, int N,
                                                    int splits, float* scratch) {
    __shared__ TileSmem<4, P> smem;
    const TileCoords<4> tc(splits, T_out);
    gemm_partial<4, 2, P>(Mat<true>{x, N}, Mat<false>{dy, N}, T, T_out, N, tc.m0, tc.n0, tc.split, splits,
                          scratch + (size_t)tc.tile * splits * LN_SLAB_OF(4), tc.m0 == 0, smem);
}

extern "C" __global__ void token_linear_gelu_forward(const float* x, const float* W, const float* bias, float* u,
                                                     float* a, int T, int T_out, int N, int splits, float* scratch,
                                                     unsigned int* counters) {
    token_forward_body<true, PrecFp32>(x, W, bias, nullptr, u, a, T, T_out, N, splits, scratch, counters);
}

extern "C" __global__ void token_linear_residual_forward(const float* x, const float* W, const float* bias,
                                                         const float* r, float* y, int T, int T_out, int N, int splits,
                                                         float* scratch, unsigned int* counters) {
    token_forward_body<false, PrecFp32>(x, W, bias, r, y, nullptr, T, T_out, N, splits, scratch, counters);
}

extern "C" __global__ void token_linear_backward_input(const float* dy, const float* W, float* dx, int T, int T_out,
                                                       int N, int splits, float* scratch, unsigned int* counters) {
    token_backward_input_body<PrecFp32>(dy, W, nullptr, dx, T, T_out, N, splits, scratch, counters);
}

extern "C" __global__ void token_linear_backward_input_gelu(const float* dy, const float* W, const float* u, float* du,
                                                            int T, int T_out, int N, int splits, float* scratch,
                                                            unsigned int* counters) {
    token_backward_input_body<PrecFp32>(dy, W, u, du, T, T_out, N, splits, scratch, counters);
}

extern "C" __global__ void token_linear_backward_weight(const float* x, const float* dy, float* dW, float* db, int T,
                                                        int T_out, int N, int splits, float* scratch,
                                                        unsigned int* counters) {
    token_backward_weight_body<PrecFp32>(x, dy, dW, db, T, T_out, N, splits, scratch, counters);
}

extern "C" __global__ void token_linear_backward_weight_partials(const float* x, const float* dy, int T, int T_out,
                                                                 int N, int splits, float* scratch) {
    token_backward_weight_partials_body<PrecFp32>(x, dy, T, T_out, N, splits, scratch);
}

// ∂W (T × T') and ∂b from token_linear_backward_weight_partials' scratch (each 64 × 64 tile's `splits` slabs
// of LN_SLAB_OF(4) floats: the tile, then its column sums, kept for the first tile row's ∂b). Each output is
// summed as tile_fixup sums it: groups of LN_GROUP consecutive splits (split_groups, group_end) in split
// order, then the groups' totals in group order. Block: 16 slab entries × 16 lanes; lane l sums groups l
// and l + 16, the lane-0 threads add the group totals. Grid: ⌈tiles · LN_SLAB_OF(4) / 16⌉; splits ≤
// LN_GROUP · LN_MAX_GROUPS.
extern "C" __global__ void token_linear_backward_weight_sum(const float* scratch, float* dW, float* db, int T, int T_out,
                                                            int splits) {
    constexpr int ENTRIES = 16, LANES = LN_THREADS / ENTRIES, SLAB = LN_SLAB_OF(4);
    __shared__ float group_total[LN_MAX_GROUPS][ENTRIES];
    const int tiles_n = (T_out + LN_TILE - 1) / LN_TILE, tiles = ((T + LN_TILE - 1) / LN_TILE) * tiles_n;
    const int e = blockIdx.x * ENTRIES + threadIdx.x % ENTRIES, lane = threadIdx.x / ENTRIES;
    const int groups = split_groups(splits), tile = e / SLAB, r = e % SLAB;
    const float* slabs = scratch + (size_t)tile * splits * SLAB + r;
    if (tile < tiles)
        for (int g = lane; g < groups; g += LANES) {
            float total = 0.f;
            const int last = group_end(g, splits);
#pragma unroll 8
            for (int split = g * LN_GROUP; split < last; ++split) total += __ldcg(slabs + (size_t)split * SLAB);
            group_total[g][threadIdx.x % ENTRIES] = total;
        }
    __syncthreads();
    if (lane != 0 || tile >= tiles) return;
    float total = group_total[0][threadIdx.x];
    if (groups > 1) {  // tile_fixup's second level starts from zero too
        total = 0.f;
        for (int g = 0; g < groups; ++g) total += group_total[g][threadIdx.x];
    }
    const int m0 = (tile / tiles_n) * LN_TILE, n0 = (tile % tiles_n) * LN_TILE;
    if (r < LN_TILE * LN_TILE) {
        const int i = m0 + r / LN_TILE, j = n0 + r % LN_TILE;
        if (i < T && j < T_out) dW[(size_t)i * T_out + j] = total;
    } else if (m0 == 0 && n0 + r - LN_TILE * LN_TILE < T_out) {
        db[n0 + r - LN_TILE * LN_TILE] = total;
    }
}

extern "C" __global__ void __launch_bounds__(LN_THREADS, LN_MMA_BLOCKS)
token_linear_gelu_forward_tf32(const float* x, const float* W, const float* bias, float* u, float* a, int T, int T_out,
                               int N, int splits, float* scratch, unsigned int* counters) {
    token_forward_body<true, PrecTf32>(x, W, bias, nullptr, u, a, T, T_out, N, splits, scratch, counters);
}

extern "C" __global__ void __launch_bounds__(LN_THREADS, LN_MMA_BLOCKS)
token_linear_residual_forward_tf32(const float* x, const float* W, const float* bias, const float* r, float* y, int T,
                                   int T_out, int N, int splits, float* scratch, unsigned int* counters) {
    token_forward_body<false, PrecTf32>(x, W, bias, r, y, nullptr, T, T_out, N, splits, scratch, counters);
}

extern "C" __global__ void __launch_bounds__(LN_THREADS, LN_MMA_BLOCKS)
token_linear_backward_input_tf32(const float* dy, const float* W, float* dx, int T, int T_out, int N, int splits,
                                 float* scratch, unsigned int* counters) {
    token_backward_input_body<PrecTf32>(dy, W, nullptr, dx, T, T_out, N, splits, scratch, counters);
}

extern "C" __global__ void __launch_bounds__(LN_THREADS, LN_MMA_BLOCKS)
token_linear_backward_input_gelu_tf32(const float* dy, const float* W, const float* u, float* du, int T, int T_out,
                                      int N, int splits, float* scratch, unsigned int* counters) {
    token_backward_input_body<PrecTf32>(dy, W, u, du, T, T_out, N, splits, scratch, counters);
}

extern "C" __global__ void __launch_bounds__(LN_THREADS, LN_MMA_BLOCKS)
token_linear_backward_weight_tf32(const float* x, const float* dy, float* dW, float* db, int T, int T_out, int N,
                                  int splits, float* scratch, unsigned int* counters) {
    token_backward_weight_body<PrecTf32>(x, dy, dW, db, T, T_out, N, splits, scratch, counters);
}

extern "C" __global__ void __launch_bounds__(LN_THREADS, LN_MMA_BLOCKS)
token_linear_backward_weight_partials_tf32(const float* x, const float* dy, int T, int T_out, int N, int splits,
                                           float* scratch) {
    token_backward_weight_partials_body<PrecTf32>(x, dy, T, T_out, N, splits, scratch);
}

extern "C" __global__ void __launch_bounds__(LN_THREADS, LN_MMA_BLOCKS)
token_linear_gelu_forward_bf16(const float* x, const float* W, const float* bias, float* u, float* a, int T, int T_out,
                               int N, int splits, float* scratch, unsigned int* counters) {
    token_forward_body<true, PrecBf16>(x, W, bias, nullptr, u, a, T, T_out, N, splits, scratch, counters);
}

extern "C" __global__ void __launch_bounds__(LN_THREADS, LN_MMA_BLOCKS)
token_linear_residual_forward_bf16(const float* x, const float* W, const float* bias, const float* r, float* y, int T,
                                   int T_out, int N, int splits, float* scratch, unsigned int* counters) {
    token_forward_body<false, PrecBf16>(x, W, bias, r, y, nullptr, T, T_out, N, splits, scratch, counters);
}

extern "C" __global__ void __launch_bounds__(LN_THREADS, LN_MMA_BLOCKS)
token_linear_backward_input_bf16(const float* dy, const float* W, float* dx, int T, int T_out, int N, int splits,
                                 float* scratch, unsigned int* counters) {
    token_backward_input_body<PrecBf16>(dy, W, nullptr, dx, T, T_out, N, splits, scratch, counters);
}

extern "C" __global__ void __launch_bounds__(LN_THREADS, LN_MMA_BLOCKS)
token_linear_backward_input_gelu_bf16(const float* dy, const float* W, const float* u, float* du, int T, int T_out,
                                      int N, int splits, float* scratch, unsigned int* counters) {
    token_backward_input_body<PrecBf16>(dy, W, u, du, T, T_out, N, splits, scratch, counters);
}

extern "C" __global__ void __launch_bounds__(LN_THREADS, LN_MMA_BLOCKS)
token_linear_backward_weight_bf16(const float* x, const float* dy, float* dW, float* db, int T, int T_out, int N,
                                  int splits, float* scratch, unsigned int* counters) {
    token_backward_weight_body<PrecBf16>(x, dy, dW, db, T, T_out, N, splits, scratch, counters);
}

extern "C" __global__ void __launch_bounds__(LN_THREADS, LN_MMA_BLOCKS)
token_linear_backward_weight_partials_bf16(const float* x, const float* dy, int T, int T_out, int N, int splits,
                                           float* scratch) {
    token_backward_weight_partials_body<PrecBf16>(x, dy, T, T_out, N, splits, scratch);
}
