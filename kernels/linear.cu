// linear.cu — the linear layer y = x W + b (fc1, fc2, the head) and its three gradients
// (twins: litenet.ops.linear_forward, litenet.ops.linear_backward, and
// fused_twins.linear_gelu_forward (tests/cuda), which fuses GELU into the forward's epilogue).
//
//   linear_forward:          y[b, o] = Σ_i x[b, i] W[i, o] + bias[o]          x: (B, n_in), W: (n_in, n_out)
//   linear_gelu_forward:     u = x W + b and a = GELU(u), both written (the backward needs u)
//   linear_backward_input:   ∂x[b, i] = Σ_o ∂y[b, o] W[i, o]                  (∂y Wᵀ)
//   linear_backward_weight:  ∂W[i, o] = Σ_b x[b, i] ∂y[b, o],  ∂b[o] = Σ_b ∂y[b, o]
//                            — one product xᵀ·∂y; the blocks of the first tile row also sum ∂y's
//                            columns from the loads they already make (gemm.cuh colsums) for ∂b.
//
// Two versions of each, chosen per product in litenet/lowering/fast/geometry.py (Gemm.tall): tiles of
// 64 rows × 64 columns (the plain names), or 128 × 64 (the `_tall` names: 8 rows per thread, fewer
// shared-memory reads and L2 bytes per multiply-add; for products with many rows).
//
// The Mixer's channel products (litenet/lowering/fast/products.py) add, on 64-row tiles:
//   linear_residual_forward:      y = r + x W + b (a residual branch joining the stream; y may not alias x)
//   linear_backward_input_gelu:   ∂u = (∂a Wᵀ) · GELU'(u): the product's gradient through the GELU
//                                 that produced its input a = GELU(u) (u kept from the forward)
// and every 64-row product in three precisions (mma.cuh): the plain names in fp32, `_tf32` and
// `_bf16` on the tensor cores (sm_80+), fp32 accumulation, fp32 in memory.
//
// litenet-base's large products add `_wide` (fp32) and `_wide_bf16` versions of the four plain
// products: wide tiles, 256 × 128 in fp32, 128 × 128 in BF16 (gemm_wide.cuh; the BF16 ones read BF16
// copies of their operands, plans.py
// BF16_COPIES) with the tall tiles' epilogues; geometry.Gemm.wide chooses them. In BF16 the GELU
// forward also writes a's copy, and `linear_backward_input_gelu_wide_bf16` (∂u = ∂a Wᵀ · GELU'(u)
// and ∂u's copy) replaces fc2's ∂input, gelu_backward and a copy.
//
// A wide BF16 ∂W may also run as two launches (the Mixer's channel ∂W: few tiles, K split many ways):
//   linear_backward_weight_partials_wide_bf16  every block stores its split's partial tiles and ∂b
//                                              column sums to scratch (gemm_wide_partials), no counters
//   linear_backward_weight_sum_wide            ∂W, ∂b: each output the sum of its partials in split
//                                              order, one thread an output: the values gemm_wide's
//                                              fixup gives, bit for bit, without one block reading
//                                              every partial of its tile alone
//
// Launch: 256 threads; grid = tiles_m · tiles_n · splits with tiles over the output ((B, n_out),
// (B, n_in) or (n_in, n_out)) and the reduction split `splits` ways (block x: tile x / splits,
// split x % splits). scratch ≥ tiles·splits·LN_SLAB_OF(TM) floats when splits > 1 (TM = 4, or 8 for
// _tall); counters ≥ tiles·LN_TILE_COUNTERS zeroed unsigned ints, left zeroed. The _wide versions:
// tiles of 256 × 128 (fp32) or 128 × 128 (BF16), scratch and counters for four or two times as many
// (each 128 × 64 part is summed apart; geometry.Gemm.fixup_tiles).
// Limits: none on the sizes beyond int indexing.
#include "common.cuh"
#include "gemm_wide.cuh"
#include "splitk.cuh"

// The forward's epilogue on thread t's TM×4 block of a finished tile: + bias (+ residual), then GELU
// (with `a16`, also GELU's BF16 copy).
template <int TM, bool GELU>
__device__ __forceinline__ void forward_epilogue(const TileAt<TM>& tc, const float (&acc)[TM][4], const float* bias,
                                                 float* u, float* a, int B, int n_out, const float* residual,
                                                 unsigned short* a16 = nullptr) {
    float b[4];
    for (int j = 0; j < 4; ++j) b[j] = tc.n(j) < n_out ? bias[tc.n(j)] : 0.f;
    for (int i = 0; i < TM; ++i) {
        if (tc.m(i) >= B) continue;
        float v[4], g[4];
        for (int j = 0; j < 4; ++j) {
            v[j] = acc[i][j] + b[j];
            if (residual != nullptr && tc.n(j) < n_out) v[j] += residual[(size_t)tc.m(i) * n_out + tc.n(j)];
            g[j] = GELU ? gelu_value(v[j]) : 0.f;
        }
        if (u != nullptr) store_row4(u, n_out, tc.m(i), tc.n(0), n_out, v);
        if (GELU && a != nullptr) store_row4(a, n_out, tc.m(i), tc.n(0), n_out, g);
        if (GELU && a16 != nullptr) store_row4_bf16(a16, n_out, tc.m(i), tc.n(0), n_out, g);
    }
}

// ∂x's epilogue; with `u`, times GELU'(u) (the gradient reaches the GELU's input); with `dx16`, also
// its BF16 copy.
template <int TM>
__device__ __forceinline__ void backward_input_epilogue(const TileAt<TM>& tc, float (&acc)[TM][4], float* dx, int B,
                                                        int n_in, const float* u, unsigned short* dx16 = nullptr) {
    for (int i = 0; i < TM; ++i) {
        if (tc.m(i) >= B) continue;
        if (u != nullptr)
            for (int j = 0; j < 4; ++j)
                if (tc.n(j) < n_in) acc[i][j] *= gelu_slope(u[(size_t)tc.m(i) * n_in + tc.n(j)]);
        if (dx != nullptr) store_row4(dx, n_in, tc.m(i), tc.n(0), n_in, acc[i]);
        if (dx16 != nullptr) store_row4_bf16(dx16, n_in, tc.m(i), tc.n(0), n_in, acc[i]);
    }
}

// ∂W's epilogue, and ∂b from the column sums of the first tile row.
template <int TM>
__device__ __forceinline__ void backward_weight_epilogue(const TileAt<TM>& tc, const float (&acc)[TM][4],
                                                         float db_sum, float* dW, float* db, int n_in, int n_out) {
    for (int i = 0; i < TM; ++i)
        if (tc.m(i) < n_in) store_row4(dW, n_out, tc.m(i), tc.n(0), n_out, acc[i]);
    if (tc.m0 == 0 && threadIdx.x < LN_TILE && tc.n0 + (int)threadIdx.x < n_out) db[tc.n0 + threadIdx.x] = db_sum;
}

// GELU or not, a residual or not, and the precision, selected here once for every forward kernel.
template <int TM, bool GELU, class P = PrecFp32>
__device__ void linear_forward_body(const float* x, const float* W, const float* bias, float* u, float* a, int B,
                                    int n_in, int n_out, int splits, float* scratch, unsigned int* counters,
                                    const float* residual = nullptr) {
    __shared__ TileSmem<TM, P> smem;
    const TileCoords<TM> tc(splits, n_out);
    float acc[TM][4], unused;
    if (!gemm_splitk<TM, 2, P>(Mat<true>{x, n_in}, Mat<true>{W, n_out}, B, n_out, n_in, tc.m0, tc.n0, tc.split, splits,
                               scratch + (size_t)tc.tile * splits * LN_SLAB_OF(TM), tile_counters(counters, tc.tile), acc, false,
                               unused, smem))
        return;
    forward_epilogue<TM, GELU>(tc, acc, bias, u, a, B, n_out, residual);
}

// ∂x = ∂y Wᵀ; with `u`, times GELU'(u).
template <int TM, class P = PrecFp32>
__device__ void linear_backward_input_body(const float* dy, const float* W, float* dx, int B, int n_in, int n_out,
                                           int splits, float* scratch, unsigned int* counters,
                                           const float* u = nullptr) {
    __shared__ TileSmem<TM, P> smem;
    const TileCoords<TM> tc(splits, n_in);
    float acc[TM][4], unused;
    // B operand (k = o, n = i) is W[i, o]: W read as a transposed view.
    if (!gemm_splitk<TM, 2, P>(Mat<true>{dy, n_out}, Mat<false>{W, n_out}, B, n_in, n_out, tc.m0, tc.n0, tc.split,
                               splits, scratch + (size_t)tc.tile * splits * LN_SLAB_OF(TM), tile_counters(counters, tc.tile), acc,
                               false, unused, smem))
        return;
    backward_input_epilogue<TM>(tc, acc, dx, B, n_in, u);
}

template <int TM, class P = PrecFp32>
__device__ void linear_backward_weight_body(const float* x, const float* dy, float* dW, float* db, int B, int n_in,
                                            int n_out, int splits, float* scratch, unsigned int* counters) {
    __shared__ TileSmem<TM, P> smem;
    const TileCoords<TM> tc(splits, n_out);
    const bool bias_row = tc.m0 == 0;  // the first tile row also sums ∂y's columns: ∂b
    float acc[TM][4], db_sum;
    // A(i, b) = x[b, i]: x read as a transposed view. A sum over the batch with few blocks per
    // multiprocessor: fetch two k steps ahead (64-row tiles; the tall ones would lose occupancy).
    if (!gemm_splitk<TM, TM == 4 ? 2 : 1, P>(Mat<false>{x, n_in}, Mat<true>{dy, n_out}, n_in, n_out, B, tc.m0, tc.n0,
                                          tc.split, splits, scratch + (size_t)tc.tile * splits * LN_SLAB_OF(TM),
                                          tile_counters(counters, tc.tile), acc, bias_row, db_sum, smem))
        return;
    backward_weight_epilogue<TM>(tc, acc, db_sum, dW, db, n_in, n_out);
}

// The same three products in wide tiles (gemm_wide.cuh), with the tall tiles' epilogues.
template <class P, bool GELU, class E>
__device__ void linear_forward_wide_body(const E* x, const E* W, const float* bias, float* u, float* a, int B, int n_in,
                                         int n_out, int splits, float* scratch, unsigned int* counters,
                                         unsigned short* a16 = nullptr, const float* residual = nullptr) {
    gemm_wide<P>(operand_view<true>(x, n_in), operand_view<true>(W, n_out), B, n_out, n_in, splits, scratch, counters,
                 false,
                 [&](const TileAt<8>& tc, float (&acc)[8][4], float) {
                     forward_epilogue<8, GELU>(tc, acc, bias, u, a, B, n_out, residual, a16);
                 });
}

template <class P, class E>
__device__ void linear_backward_input_wide_body(const E* dy, const E* W, float* dx, int B, int n_in, int n_out,
                                                int splits, float* scratch, unsigned int* counters,
                                                const float* u = nullptr, unsigned short* dx16 = nullptr) {
    gemm_wide<P>(operand_view<true>(dy, n_out), operand_view<false>(W, n_out), B, n_in, n_out, splits, scratch, counters,
                 false,
                 [&](const TileAt<8>& tc, float (&acc)[8][4], float) {
                     backward_input_epilogue<8>(tc, acc, dx, B, n_in, u, dx16);
                 });
}

template <class P, class E>
__device__ void linear_backward_weight_wide_body(const E* x, const E* dy, float* dW, float* db, int B, int n_in,
                                                 int n_out, int splits, float* scratch, unsigned int* counters) {
    gemm_wide<P>(operand_view<false>(x, n_in), operand_view<true>(dy, n_out), n_in, n_out, B, splits, scratch, counters,
                 true,
                 [&](const TileAt<8>& tc, float (&acc)[8][4], float db_sum) {
                     backward_weight_epilogue<8>(tc, acc, db_sum, dW, db, n_in, n_out);
                 });
}

extern "C" __global__ void linear_forward(const float* x, const float* W, const float* bias, float* y, int B, int n_in,
                                          int n_out, int splits, float* scratch, unsigned int* counters) {
    linear_forward_body<4, false>(x, W, bias, y, 0, B, n_in, n_out, splits, scratch, counters);
}

extern "C" __global__ void linear_forward_tall(const float* x, const float* W, const float* bias, float* y, int B,
                                               int n_in, int n_out, int splits, float* scratch,
                                               unsigned int* counters) {
    linear_forward_body<8, false>(x, W, bias, y, 0, B, n_in, n_out, splits, scratch, counters);
}

extern "C" __global__ void linear_gelu_forward(const float* x, const float* W, const float* bias, float* u, float* a,
                                               int B, int n_in, int n_out, int splits, float* scratch,
                                               unsigned int* counters) {
    linear_forward_body<4, true>(x, W, bias, u, a, B, n_in, n_out, splits, scratch, counters);
}

extern "C" __global__ void linear_gelu_forward_tall(const float* x, const float* W, const float* bias, float* u,
                                                    float* a, int B, int n_in, int n_out, int splits, float* scratch,
                                                    unsigned int* counters) {
    linear_forward_body<8, true>(x, W, bias, u, a, B, n_in, n_out, splits, scratch, counters);
}

extern "C" __global__ void linear_backward_input(const float* dy, const float* W, float* dx, int B, int n_in, int n_out,
                                                 int splits, float* scratch, unsigned int* counters) {
    linear_backward_input_body<4>(dy, W, dx, B, n_in, n_out, splits, scratch, counters);
}

extern "C" __global__ void linear_backward_input_tall(const float* dy, const float* W, float* dx, int B, int n_in,
                                                      int n_out, int splits, float* scratch, unsigned int* counters) {
    linear_backward_input_body<8>(dy, W, dx, B, n_in, n_out, splits, scratch, counters);
}

extern "C" __global__ void linear_backward_weight(const float* x, const float* dy, float* dW, float* db, int B,
                                                  int n_in, int n_out, int splits, float* scratch,
                                                  unsigned int* counters) {
    linear_backward_weight_body<4>(x, dy, dW, db, B, n_in, n_out, splits, scratch, counters);
}

extern "C" __global__ void linear_backward_weight_tall(const float* x, const float* dy, float* dW, float* db, int B,
                                                       int n_in, int n_out, int splits, float* scratch,
                                                       unsigned int* counters) {
    linear_backward_weight_body<8>(x, dy, dW, db, B, n_in, n_out, splits, scratch, counters);
}

// --- The Mixer's additions (64-row tiles), and each 64-row product on the tensor cores ---------

extern "C" __global__ void linear_residual_forward(const float* x, const float* W, const float* bias, const float* r,
                                                   float* y, int B, int n_in, int n_out, int splits, float* scratch,
                                                   unsigned int* counters) {
    linear_forward_body<4, false>(x, W, bias, y, 0, B, n_in, n_out, splits, scratch, counters, r);
}

extern "C" __global__ void linear_backward_input_gelu(const float* dy, const float* W, const float* u, float* du,
                                                      int B, int n_in, int n_out, int splits, float* scratch,
                                                      unsigned int* counters) {
    linear_backward_input_body<4>(dy, W, du, B, n_in, n_out, splits, scratch, counters, u);
}

extern "C" __global__ void __launch_bounds__(LN_THREADS, LN_MMA_BLOCKS)
linear_forward_tf32(const float* x, const float* W, const float* bias, float* y, int B, int n_in, int n_out, int splits,
                    float* scratch, unsigned int* counters) {
    linear_forward_body<4, false, PrecTf32>(x, W, bias, y, 0, B, n_in, n_out, splits, scratch, counters);
}

extern "C" __global__ void __launch_bounds__(LN_THREADS, LN_MMA_BLOCKS)
linear_gelu_forward_tf32(const float* x, const float* W, const float* bias, float* u, float* a, int B, int n_in,
                         int n_out, int splits, float* scratch, unsigned int* counters) {
    linear_forward_body<4, true, PrecTf32>(x, W, bias, u, a, B, n_in, n_out, splits, scratch, counters);
}

extern "C" __global__ void __launch_bounds__(LN_THREADS, LN_MMA_BLOCKS)
linear_residual_forward_tf32(const float* x, const float* W, const float* bias, const float* r, float* y, int B,
                             int n_in, int n_out, int splits, float* scratch, unsigned int* counters) {
    linear_forward_body<4, false, PrecTf32>(x, W, bias, y, 0, B, n_in, n_out, splits, scratch, counters, r);
}

extern "C" __global__ void __launch_bounds__(LN_THREADS, LN_MMA_BLOCKS)
linear_backward_input_tf32(const float* dy, const float* W, float* dx, int B, int n_in, int n_out, int splits,
                           float* scratch, unsigned int* counters) {
    linear_backward_input_body<4, PrecTf32>(dy, W, dx, B, n_in, n_out, splits, scratch, counters);
}

extern "C" __global__ void __launch_bounds__(LN_THREADS, LN_MMA_BLOCKS)
linear_backward_input_gelu_tf32(const float* dy, const float* W, const float* u, float* du, int B, int n_in, int n_out,
                                int splits, float* scratch, unsigned int* counters) {
    linear_backward_input_body<4, PrecTf32>(dy, W, du, B, n_in, n_out, splits, scratch, counters, u);
}

extern "C" __global__ void __launch_bounds__(LN_THREADS, LN_MMA_BLOCKS)
linear_backward_weight_tf32(const float* x, const float* dy, float* dW, float* db, int B, int n_in, int n_out,
                            int splits, float* scratch, unsigned int* counters) {
    linear_backward_weight_body<4, PrecTf32>(x, dy, dW, db, B, n_in, n_out, splits, scratch, counters);
}

extern "C" __global__ void __launch_bounds__(LN_THREADS, LN_MMA_BLOCKS)
linear_forward_bf16(const float* x, const float* W, const float* bias, float* y, int B, int n_in, int n_out, int splits,
                    float* scratch, unsigned int* counters) {
    linear_forward_body<4, false, PrecBf16>(x, W, bias, y, 0, B, n_in, n_out, splits, scratch, counters);
}

extern "C" __global__ void __launch_bounds__(LN_THREADS, LN_MMA_BLOCKS)
linear_gelu_forward_bf16(const float* x, const float* W, const float* bias, float* u, float* a, int B, int n_in,
                         int n_out, int splits, float* scratch, unsigned int* counters) {
    linear_forward_body<4, true, PrecBf16>(x, W, bias, u, a, B, n_in, n_out, splits, scratch, counters);
}

extern "C" __global__ void __launch_bounds__(LN_THREADS, LN_MMA_BLOCKS)
linear_residual_forward_bf16(const float* x, const float* W, const float* bias, const float* r, float* y, int B,
                             int n_in, int n_out, int splits, float* scratch, unsigned int* counters) {
    linear_forward_body<4, false, PrecBf16>(x, W, bias, y, 0, B, n_in, n_out, splits, scratch, counters, r);
}

extern "C" __global__ void __launch_bounds__(LN_THREADS, LN_MMA_BLOCKS)
linear_backward_input_bf16(const float* dy, const float* W, float* dx, int B, int n_in, int n_out, int splits,
                           float* scratch, unsigned int* counters) {
    linear_backward_input_body<4, PrecBf16>(dy, W, dx, B, n_in, n_out, splits, scratch, counters);
}

extern "C" __global__ void __launch_bounds__(LN_THREADS, LN_MMA_BLOCKS)
linear_backward_input_gelu_bf16(const float* dy, const float* W, const float* u, float* du, int B, int n_in, int n_out,
                                int splits, float* scratch, unsigned int* counters) {
    linear_backward_input_body<4, PrecBf16>(dy, W, du, B, n_in, n_out, splits, scratch, counters, u);
}

extern "C" __global__ void __launch_bounds__(LN_THREADS, LN_MMA_BLOCKS)
linear_backward_weight_bf16(const float* x, const float* dy, float* dW, float* db, int B, int n_in, int n_out,
                            int splits, float* scratch, unsigned int* counters) {
    linear_backward_weight_body<4, PrecBf16>(x, dy, dW, db, B, n_in, n_out, splits, scratch, counters);
}

// --- wide tiles (gemm_wide.cuh; geometry.Gemm.wide): litenet-base's large products, fp32 and BF16 ------

extern "C" __global__ void __launch_bounds__(LN_THREADS, LN_WIDE_BLOCKS_FP32)
linear_forward_wide(const float* x, const float* W, const float* bias, float* y, int B, int n_in, int n_out,
                  int splits, float* scratch, unsigned int* counters) {
    linear_forward_wide_body<PrecFp32, false>(x, W, bias, y, 0, B, n_in, n_out, splits, scratch, counters);
}

extern "C" __global__ void __launch_bounds__(LN_THREADS, LN_WIDE_BLOCKS_FP32)
linear_gelu_forward_wide(const float* x, const float* W, const float* bias, float* u, float* a, int B, int n_in,
                       int n_out, int splits, float* scratch, unsigned int* counters) {
    linear_forward_wide_body<PrecFp32, true>(x, W, bias, u, a, B, n_in, n_out, splits, scratch, counters);
}

extern "C" __global__ void __launch_bounds__(LN_THREADS, LN_WIDE_BLOCKS_FP32)
linear_backward_input_wide(const float* dy, const float* W, float* dx, int B, int n_in, int n_out, int splits,
                         float* scratch, unsigned int* counters) {
    linear_backward_input_wide_body<PrecFp32>(dy, W, dx, B, n_in, n_out, splits, scratch, counters);
}

extern "C" __global__ void __launch_bounds__(LN_THREADS, LN_WIDE_BLOCKS_FP32)
linear_backward_weight_wide(const float* x, const float* dy, float* dW, float* db, int B, int n_in, int n_out,
                          int splits, float* scratch, unsigned int* counters) {
    linear_backward_weight_wide_body<PrecFp32>(x, dy, dW, db, B, n_in, n_out, splits, scratch, counters);
}

extern "C" __global__ void __launch_bounds__(LN_THREADS, LN_WIDE_BLOCKS_BF16)
linear_forward_wide_bf16(const unsigned short* x, const unsigned short* W, const float* bias, float* y, int B, int n_in,
                         int n_out, int splits, float* scratch, unsigned int* counters) {
    linear_forward_wide_body<PrecBf16, false>(x, W, bias, y, 0, B, n_in, n_out, splits, scratch, counters);
}

// y = r + x W + b: the Mixer's channel fc2 with the residual's join in the epilogue (lowering/fast/tokens.py).
extern "C" __global__ void __launch_bounds__(LN_THREADS, LN_WIDE_BLOCKS_BF16)
linear_residual_forward_wide_bf16(const unsigned short* x, const unsigned short* W, const float* bias, const float* r,
                                  float* y, int B, int n_in, int n_out, int splits, float* scratch,
                                  unsigned int* counters) {
    linear_forward_wide_body<PrecBf16, false>(x, W, bias, y, 0, B, n_in, n_out, splits, scratch, counters, nullptr, r);
}

// Also writes GELU's BF16 copy a16, which fc2's wide BF16 products read (plans.py BF16_COPIES "A16").
extern "C" __global__ void __launch_bounds__(LN_THREADS, LN_WIDE_BLOCKS_BF16)
linear_gelu_forward_wide_bf16(const unsigned short* x, const unsigned short* W, const float* bias, float* u, float* a,
                              unsigned short* a16, int B, int n_in, int n_out, int splits, float* scratch,
                              unsigned int* counters) {
    linear_forward_wide_body<PrecBf16, true>(x, W, bias, u, a, B, n_in, n_out, splits, scratch, counters, a16);
}

extern "C" __global__ void __launch_bounds__(LN_THREADS, LN_WIDE_BLOCKS_BF16)
linear_backward_input_wide_bf16(const unsigned short* dy, const unsigned short* W, float* dx, int B, int n_in, int n_out,
                                int splits, float* scratch, unsigned int* counters) {
    linear_backward_input_wide_body<PrecBf16>(dy, W, dx, B, n_in, n_out, splits, scratch, counters);
}

// ∂u = (∂a Wᵀ) · GELU'(u) and its BF16 copy du16, which fc1's wide BF16 backward products read: fc2's
// ∂input, the GELU's backward and the copy in one launch (plans.py): two passes over the hidden layer
// fewer (docs/decisions.md, "BF16 copies").
// The two GELU products again where nothing reads their fp32 output, only its BF16 copy (the Mixer's
// channel MLP: a is read by fc2's forward and ∂W, ∂u by fc1's ∂input and ∂W, all wide BF16 products;
// tokens.drop_unread): 16 MiB a launch fewer written at batch 128.
extern "C" __global__ void __launch_bounds__(LN_THREADS, LN_WIDE_BLOCKS_BF16)
linear_gelu_forward_to_copy_wide_bf16(const unsigned short* x, const unsigned short* W, const float* bias, float* u,
                                      unsigned short* a16, int B, int n_in, int n_out, int splits, float* scratch,
                                      unsigned int* counters) {
    linear_forward_wide_body<PrecBf16, true>(x, W, bias, u, nullptr, B, n_in, n_out, splits, scratch, counters, a16);
}

// A forward pass with no backward after it (evaluation) reads neither u nor a: only the copy is written.
extern "C" __global__ void __launch_bounds__(LN_THREADS, LN_WIDE_BLOCKS_BF16)
linear_gelu_forward_copy_only_wide_bf16(const unsigned short* x, const unsigned short* W, const float* bias,
                                        unsigned short* a16, int B, int n_in, int n_out, int splits, float* scratch,
                                        unsigned int* counters) {
    linear_forward_wide_body<PrecBf16, true>(x, W, bias, nullptr, nullptr, B, n_in, n_out, splits, scratch, counters,
                                             a16);
}

extern "C" __global__ void __launch_bounds__(LN_THREADS, LN_WIDE_BLOCKS_BF16)
linear_backward_input_gelu_to_copy_wide_bf16(const unsigned short* dy, const unsigned short* W, const float* u,
                                             unsigned short* du16, int B, int n_in, int n_out, int splits,
                                             float* scratch, unsigned int* counters) {
    linear_backward_input_wide_body<PrecBf16>(dy, W, nullptr, B, n_in, n_out, splits, scratch, counters, u, du16);
}

extern "C" __global__ void __launch_bounds__(LN_THREADS, LN_WIDE_BLOCKS_BF16)
linear_backward_input_gelu_wide_bf16(const unsigned short* dy, const unsigned short* W, const float* u, float* du,
                                     unsigned short* du16, int B, int n_in, int n_out, int splits, float* scratch,
                                     unsigned int* counters) {
    linear_backward_input_wide_body<PrecBf16>(dy, W, du, B, n_in, n_out, splits, scratch, counters, u, du16);
}

extern "C" __global__ void __launch_bounds__(LN_THREADS, LN_WIDE_BLOCKS_BF16)
linear_backward_weight_wide_bf16(const unsigned short* x, const unsigned short* dy, float* dW, float* db, int B,
                                 int n_in, int n_out, int splits, float* scratch, unsigned int* counters) {
    linear_backward_weight_wide_body<PrecBf16>(x, dy, dW, db, B, n_in, n_out, splits, scratch, counters);
}

extern "C" __global__ void __launch_bounds__(LN_THREADS, LN_WIDE_BLOCKS_BF16)
linear_backward_weight_partials_wide_bf16(const unsigned short* x, const unsigned short* dy, int B, int n_in,
                                          int n_out, int splits, float* scratch) {
    gemm_wide_partials<PrecBf16>(operand_view<false>(x, n_in), operand_view<true>(dy, n_out), n_in, n_out, B, splits,
                                 scratch, true);
}

// ∂W (n_in × n_out) and ∂b from linear_backward_weight_partials_wide_bf16's scratch: element (i, o) is row
// i % 128, column o % 64 of part 2·tile + (o % 128) / 64 (BF16's 128 × 128 tiles, two 128 × 64 parts),
// ∂b[o] that part's column sum in the first tile row; each summed over the splits in split order, as
// sum_slabs adds them. Grid: any (the threads stride over the n_in · n_out + n_out outputs).
extern "C" __global__ void linear_backward_weight_sum_wide(const float* scratch, float* dW, float* db, int n_in,
                                                           int n_out, int splits) {
    const int tiles_n = (n_out + LN_WIDE - 1) / LN_WIDE, outputs = n_in * n_out + n_out;
    for (int e = blockIdx.x * blockDim.x + threadIdx.x; e < outputs; e += gridDim.x * blockDim.x) {
        const bool bias = e >= n_in * n_out;
        const int i = bias ? 0 : e / n_out, o = bias ? e - n_in * n_out : e % n_out;
        const int part = 2 * ((i / LN_WIDE) * tiles_n + o / LN_WIDE) + (o % LN_WIDE) / LN_TILE;
        const float* p = scratch + (size_t)part * splits * LN_SLAB_OF(8) + (bias ? LN_SLAB_ROWS(8) : i % LN_WIDE) * LN_TILE +
                         o % LN_TILE;
        float total = 0.f;
#pragma unroll 8
        for (int split = 0; split < splits; ++split) total += __ldcg(p + (size_t)split * LN_SLAB_OF(8));
        if (bias)
            db[o] = total;
        else
            dW[e] = total;
    }
}
