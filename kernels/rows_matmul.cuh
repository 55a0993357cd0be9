// rows_matmul.cuh — out[r, n] = Σ_k in[r, k] · W(k, n) for a few rows held in shared memory: the
// fused small-batch kernel's products (W read straight from L2/L1, 64 loads in flight per thread).
// Limits: at most LN_ROWS_MAX (16) rows per thread; input rows padded to a multiple of 16 floats (zeros).
#pragma once

#include "gemm.cuh"

// Rows held in shared memory times a weight matrix read from global memory (the fused kernel).
// out[r·ldo + n] = Σ_k in[r·ldi + k] · W(k, n) (+ bias[n]) for r < R ≤ 16, n < N, with
// W(k, n) = W[k·N + n] ("x W", the forward) or, when transposed, W[n·K + k] ("∂y Wᵀ").
// Threads are (group, column). A narrow N leaves several groups: they take different rows and,
// when there are fewer rows than groups, different k ranges, whose partial sums meet in
// `scratch` (256 floats of shared memory). Each thread issues 64 weight loads at a time (16-byte
// loads along a row in the transposed case), so L2 latency is paid once per 64 k: the fused
// kernel's chain of dependent phases is what bounds a small batch (docs/decisions.md, "Embedding and
// the small-batch plan"). `in` rows
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
