// embed.cu — the embedding projection and its weight gradient, with the input rows s(x) read
// from the uint8 NHWC images once per step (twins: litenet.ops.embed_inputs, litenet.ops.embed_forward,
// litenet.ops.embed_backward without ∂x).
//
//   embed_inputs:        S[b, i] = s(b, i)                           (B × Kin floats)
//   embed_forward:       h0[b, n] = Σ_i S[b, i] · We[i, n]            (B × Kin) · (Kin × d)
//   embed_forward_rows:  the same h0 from the images, a few images per block, and S on the way
//   embed_backward:      ∂We[i, n] = Σ_b S[b, i] · ∂h0[b, n]          (Kin × B) · (B × d)
//
// s(b, i) = Σ_colours (pixel/255 − shift) for "channel-sum" (Kin = 1024) or one colour value for
// "full" (Kin = 3072, pixel-major colour-minor); a set flip flag mirrors the image left-right
// (common.cuh PixelQuads). The batch is (schedule row, device step counter): index = batches +
// ctr[0]·B, flips likewise (flips may be null), so one captured graph serves every step.
//
// The tile products embed_forward and embed_backward also come in `_tf32` and `_bf16` versions (64-row
// tiles; mma.cuh: operands rounded to TF32 / BF16 on the tensor cores, fp32 accumulation, fp32 in
// memory), chosen by the step's precision (geometry.Gemm.kernel); embed_forward_rows is fp32 only.
// At large widths both take `_wide` (fp32, 256 × 128 tiles) and `_wide_bf16` (128 × 128) versions
// (gemm_wide.cuh).
//
// Two versions of the forward, chosen in litenet/lowering/fast/geometry.py (choose_embed):
//   "tiles" embed_inputs then embed_forward — output tiles over S (gemm.cuh); large batches.
//   "rows"  embed_forward_rows alone — per block `rows` images: their s rows go to shared memory
//           (and to S, for ∂We), then each thread accumulates 4 columns of those rows over a k
//           range, reading We 16 bytes at a time straight from L2 (We is read once per block, so
//           this is for small batches and a small We); `parts` blocks share the columns of a row
//           block. No split-K: the k ranges meet in shared memory, summed in a fixed order.
//
// Launch (256 threads): embed_inputs grid = B (one image per block, 4 pixels per thread; any grid
// works). embed_forward / embed_backward: grid = tiles_m · tiles_n · splits blocks over output
// tiles of 64 rows (the `_tall` versions: 128; geometry.Gemm.tall chooses) × 64 columns (tiles_m
// over the output's rows: B forward, Kin backward), block x on tile x / splits, split x % splits;
// scratch ≥ tiles·splits·LN_SLAB_OF(TM) floats (unused when splits = 1); counters ≥ tiles·LN_TILE_COUNTERS zeroed
// unsigned ints, left zeroed. embed_forward_rows: grid = ⌈B / rows⌉ · parts, dynamic shared
// memory rows·Kin·4 bytes.
// Limits: 32×32×3 images, 4-byte aligned; index values < the dataset's length (not checked here);
// S 16-byte aligned; rows ≤ 8; ⌈d / parts⌉ ≤ 1024.
#include "common.cuh"
#include "gemm_wide.cuh"
#include "splitk.cuh"

#define LN_EMBED_ROWS_MAX 8

__device__ __forceinline__ PixelQuads batch_pixels(const unsigned char* images, const int* batches,
                                                   const unsigned char* flips, const int* ctr, int full, float shift,
                                                   int B) {
    const int pos = step_pos(ctr);
    const PixelQuads px = {images, batches + (size_t)pos * B, flips ? flips + (size_t)pos * B : 0, full, shift};
    return px;
}

// One image per block, 4 pixels per thread: four images per block with every load issued first
// leave fewer threads in flight (72 registers) and are slower (docs/decisions.md, "Embedding and the
// small-batch plan").
__device__ void embed_images(const unsigned char* images, const int* batches, const unsigned char* flips,
                             const int* ctr, int full, float shift, float* S, unsigned short* S16, int B) {
    const PixelQuads px = batch_pixels(images, batches, flips, ctr, full, shift, B);
    for (int b = blockIdx.x; b < B; b += gridDim.x) {
        float* row = S + (size_t)b * px.inputs();
        for (int p = 4 * threadIdx.x; p < 1024; p += 4 * blockDim.x) px.quad_to(b, p, row);
        if (S16 != nullptr) {  // the row's BF16 copy, for the wide BF16 products (bf16_copy.cuh)
            __syncthreads();
            copy_bf16(row, S16 + (size_t)b * px.inputs(), px.inputs(), threadIdx.x, blockDim.x);
        }
    }
}

extern "C" __global__ void embed_inputs(const unsigned char* images, const int* batches, const unsigned char* flips,
                                        const int* ctr, int full, float shift, float* S, int B) {
    embed_images(images, batches, flips, ctr, full, shift, S, nullptr, B);
}

// Also writes s(x)'s BF16 copy S16, which the embedding's wide BF16 products read (plans.py BF16_COPIES).
extern "C" __global__ void embed_inputs_with_copy(const unsigned char* images, const int* batches,
                                                  const unsigned char* flips, const int* ctr, int full, float shift,
                                                  float* S, unsigned short* S16, int B) {
    embed_images(images, batches, flips, ctr, full, shift, S, S16, B);
}

template <int TM, class P = PrecFp32>
__device__ void embed_forward_body(const float* S, const float* W, float* out, int B, int Kin, int d, int splits,
                                   float* scratch, unsigned int* counters) {
    __shared__ TileSmem<TM, P> smem;
    const TileCoords<TM> tc(splits, d);
    float acc[TM][4], unused;
    if (!gemm_splitk<TM, 1, P>(Mat<true>{S, Kin}, Mat<true>{W, d}, B, d, Kin, tc.m0, tc.n0, tc.split, splits,
                               scratch + (size_t)tc.tile * splits * LN_SLAB_OF(TM), tile_counters(counters, tc.tile), acc, false,
                               unused, smem))
        return;
    for (int i = 0; i < TM; ++i)
        if (tc.m(i) < B) store_row4(out, d, tc.m(i), tc.n(0), d, acc[i]);
}

template <int TM, class P = PrecFp32>
__device__ void embed_backward_body(const float* S, const float* dH, float* dW, int B, int Kin, int d, int splits,
                                    float* scratch, unsigned int* counters) {
    __shared__ TileSmem<TM, P> smem;
    const TileCoords<TM> tc(splits, d);
    float acc[TM][4], unused;
    // A(i, b) = S[b, i]: S read as a transposed view (contiguous along i). Fetched one k step
    // ahead: two (as linear_backward_weight) would cost the registers that keep litenet-base's
    // 384-block ∂We at batch 4096 in one wave.
    if (!gemm_splitk<TM, 1, P>(Mat<false>{S, Kin}, Mat<true>{dH, d}, Kin, d, B, tc.m0, tc.n0, tc.split, splits,
                               scratch + (size_t)tc.tile * splits * LN_SLAB_OF(TM), tile_counters(counters, tc.tile), acc, false,
                               unused, smem))
        return;
    for (int i = 0; i < TM; ++i)
        if (tc.m(i) < Kin) store_row4(dW, d, tc.m(i), tc.n(0), d, acc[i]);
}

extern "C" __global__ void embed_forward(const float* S, const float* W, float* out, int B, int Kin, int d,
                                         int splits, float* scratch, unsigned int* counters) {
    embed_forward_body<4>(S, W, out, B, Kin, d, splits, scratch, counters);
}

extern "C" __global__ void embed_forward_tall(const float* S, const float* W, float* out, int B, int Kin, int d,
                                              int splits, float* scratch, unsigned int* counters) {
    embed_forward_body<8>(S, W, out, B, Kin, d, splits, scratch, counters);
}

extern "C" __global__ void embed_backward(const float* S, const float* dH, float* dW, int B, int Kin, int d,
                                          int splits, float* scratch, unsigned int* counters) {
    embed_backward_body<4>(S, dH, dW, B, Kin, d, splits, scratch, counters);
}

extern "C" __global__ void embed_backward_tall(const float* S, const float* dH, float* dW, int B, int Kin, int d,
                                               int splits, float* scratch, unsigned int* counters) {
    embed_backward_body<8>(S, dH, dW, B, Kin, d, splits, scratch, counters);
}

// On the tensor cores (sm_80+; 64-row tiles only, as every _tf32 / _bf16 product).
extern "C" __global__ void embed_forward_tf32(const float* S, const float* W, float* out, int B, int Kin, int d,
                                              int splits, float* scratch, unsigned int* counters) {
    embed_forward_body<4, PrecTf32>(S, W, out, B, Kin, d, splits, scratch, counters);
}

extern "C" __global__ void embed_forward_bf16(const float* S, const float* W, float* out, int B, int Kin, int d,
                                              int splits, float* scratch, unsigned int* counters) {
    embed_forward_body<4, PrecBf16>(S, W, out, B, Kin, d, splits, scratch, counters);
}

extern "C" __global__ void embed_backward_tf32(const float* S, const float* dH, float* dW, int B, int Kin, int d,
                                               int splits, float* scratch, unsigned int* counters) {
    embed_backward_body<4, PrecTf32>(S, dH, dW, B, Kin, d, splits, scratch, counters);
}

extern "C" __global__ void embed_backward_bf16(const float* S, const float* dH, float* dW, int B, int Kin, int d,
                                               int splits, float* scratch, unsigned int* counters) {
    embed_backward_body<4, PrecBf16>(S, dH, dW, B, Kin, d, splits, scratch, counters);
}

// Wide tiles (gemm_wide.cuh; geometry.Gemm.wide): litenet-base's embedding at large widths.
template <class P, class E>
__device__ void embed_forward_wide_body(const E* S, const E* W, float* out, int B, int Kin, int d, int splits,
                                        float* scratch, unsigned int* counters, unsigned short* out16 = nullptr) {
    gemm_wide<P>(operand_view<true>(S, Kin), operand_view<true>(W, d), B, d, Kin, splits, scratch, counters, false,
                 [&](const TileAt<8>& tc, float (&acc)[8][4], float) {
                     for (int i = 0; i < 8; ++i) {
                         if (tc.m(i) >= B) continue;
                         store_row4(out, d, tc.m(i), tc.n(0), d, acc[i]);
                         if (out16 != nullptr) store_row4_bf16(out16, d, tc.m(i), tc.n(0), d, acc[i]);
                     }
                 });
}

template <class P, class E>
__device__ void embed_backward_wide_body(const E* S, const E* dH, float* dW, int B, int Kin, int d, int splits,
                                         float* scratch, unsigned int* counters) {
    gemm_wide<P>(operand_view<false>(S, Kin), operand_view<true>(dH, d), Kin, d, B, splits, scratch, counters, false,
                 [&](const TileAt<8>& tc, float (&acc)[8][4], float) {
                     for (int i = 0; i < 8; ++i)
                         if (tc.m(i) < Kin) store_row4(dW, d, tc.m(i), tc.n(0), d, acc[i]);
                 });
}

extern "C" __global__ void __launch_bounds__(LN_THREADS, LN_WIDE_BLOCKS_FP32)
embed_forward_wide(const float* S, const float* W, float* out, int B, int Kin, int d, int splits, float* scratch,
                   unsigned int* counters) {
    embed_forward_wide_body<PrecFp32>(S, W, out, B, Kin, d, splits, scratch, counters);
}

extern "C" __global__ void __launch_bounds__(LN_THREADS, LN_WIDE_BLOCKS_FP32)
embed_backward_wide(const float* S, const float* dH, float* dW, int B, int Kin, int d, int splits, float* scratch,
                    unsigned int* counters) {
    embed_backward_wide_body<PrecFp32>(S, dH, dW, B, Kin, d, splits, scratch, counters);
}

// Also writes h0's BF16 copy out16 (X16[0]: fc1's wide BF16 products read it; plans.py BF16_COPIES).
extern "C" __global__ void __launch_bounds__(LN_THREADS, LN_WIDE_BLOCKS_BF16)
embed_forward_wide_bf16(const unsigned short* S, const unsigned short* W, float* out, unsigned short* out16, int B,
                        int Kin, int d, int splits, float* scratch, unsigned int* counters) {
    embed_forward_wide_body<PrecBf16>(S, W, out, B, Kin, d, splits, scratch, counters, out16);
}

extern "C" __global__ void __launch_bounds__(LN_THREADS, LN_WIDE_BLOCKS_BF16)
embed_backward_wide_bf16(const unsigned short* S, const unsigned short* dH, float* dW, int B, int Kin, int d,
                         int splits, float* scratch, unsigned int* counters) {
    embed_backward_wide_body<PrecBf16>(S, dH, dW, B, Kin, d, splits, scratch, counters);
}

extern "C" __global__ void embed_forward_rows(const unsigned char* images, const int* batches,
                                              const unsigned char* flips, const int* ctr, int full, float shift,
                                              const float* W, float* out, float* S, int B, int Kin, int d, int rows,
                                              int parts) {
    LN_DYNAMIC_SMEM(float, srow);  // rows × Kin: the block's s rows, then the k ranges' partial sums
    const PixelQuads px = batch_pixels(images, batches, flips, ctr, full, shift, B);
    const int t = threadIdx.x, part = blockIdx.x % parts, row0 = (blockIdx.x / parts) * rows;
    const int R = min(rows, B - row0);
    for (int r = 0; r < R; ++r)
        for (int p = 4 * t; p < 1024; p += 4 * blockDim.x) {
            px.quad_to(row0 + r, p, srow + r * Kin);
            if (part == 0) px.quad_to(row0 + r, p, S + (size_t)(row0 + r) * Kin);
        }
    __syncthreads();

    // Columns [c_begin, c_end) in quads of 4; the threads left over after one per quad split k.
    const int width = ((d + parts - 1) / parts + 3) & ~3, c_begin = part * width, c_end = min(d, c_begin + width);
    const int quads = width / 4, groups = blockDim.x / quads;
    const int quad = t % quads, g = t / quads, c = c_begin + 4 * quad;
    const int kchunk = ((Kin + groups - 1) / groups + 7) & ~7;
    const int k_begin = min(Kin, g * kchunk), k_end = g < groups ? min(Kin, k_begin + kchunk) : k_begin;
    const int have = min(4, c_end - c);  // columns of this thread's quad that exist
    const bool vec = have == 4 && (d & 3) == 0 && aligned16(W + c);
    float acc[LN_EMBED_ROWS_MAX][4];
    for (int r = 0; r < LN_EMBED_ROWS_MAX; ++r)
        for (int j = 0; j < 4; ++j) acc[r][j] = 0.f;
    if (have > 0)
        for (int k0 = k_begin; k0 < k_end; k0 += 8) {  // Kin is a multiple of 8: whole steps
            float4 w[8];
#pragma unroll
            for (int q = 0; q < 8; ++q) {
                const float* wp = W + (size_t)(k0 + q) * d + c;
                if (vec) {
                    w[q] = ld4(wp);
                } else {
                    w[q] = make_float4(wp[0], have > 1 ? wp[1] : 0.f, have > 2 ? wp[2] : 0.f, have > 3 ? wp[3] : 0.f);
                }
            }
#pragma unroll
            for (int r = 0; r < LN_EMBED_ROWS_MAX; ++r)
                if (r < R)
#pragma unroll
                    for (int q = 0; q < 8; ++q) {
                        const float s = srow[r * Kin + k0 + q];
                        acc[r][0] += s * w[q].x;
                        acc[r][1] += s * w[q].y;
                        acc[r][2] += s * w[q].z;
                        acc[r][3] += s * w[q].w;
                    }
        }
    __syncthreads();  // the s rows are read: their space holds the partial sums now
    float* red = srow;  // red[(g·R + r)·width + column], groups·R·width ≤ R·Kin (groups·width ≤ 1024)
    if (g < groups && have > 0)
#pragma unroll
        for (int r = 0; r < LN_EMBED_ROWS_MAX; ++r)
            if (r < R)
#pragma unroll
                for (int j = 0; j < 4; ++j) red[(g * R + r) * width + 4 * quad + j] = acc[r][j];
    __syncthreads();
    for (int e = t; e < R * width; e += blockDim.x) {
        const int r = e / width, col = e % width;
        if (c_begin + col >= c_end) continue;
        float total = 0.f;
        for (int j = 0; j < groups; ++j) total += red[(j * R + r) * width + col];
        out[(size_t)(row0 + r) * d + c_begin + col] = total;
    }
}
