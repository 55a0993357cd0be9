// layernorm_int8.cu — the Mixer's LayerNorm in front of a product, written straight as that
// product's int8 input (twin: litenet.runtime.int8_plan.quantize(litenet.ops.layernorm_forward(x, γ,
// β, eps), s_x)):
//
//   y = (x − μ) / √(σ² + eps) · γ + β  over the d features of each of the R = T·B rows of x (T, B, d)
//   q = clamp(rne(y / q_scale), −128, 127)
//
// The product decides the layout of q (int8, in an int buffer):
//   tokens = 0  rows: byte r·q_stride + c (a channel product's rows; infer_int8_tiles reads them)
//   tokens = B  token words: byte ((t/4)·N + b·d + c)·4 + t%4 with N = B·d, r = t·B + b — the four
//               consecutive patches t of one column (b, c) in one int, the k operand of dp4a in
//               token_linear_int8.cu, whose sum runs over the patches
// Pad bytes (columns ≥ d, patches ≥ T) are never written: the buffer is zeroed once and they stay 0.
// LayerNorm is infer_core.cuh's ln_row (one warp per row, each operation rounded once); NumPy's
// mean sums in another order, so y may differ from the twin's by a few ulp and q, where y / q_scale
// lies within that of a .5 step, by one (the tests bound both).
// Launch: 256 threads (8 rows per block), grid = ⌈R/8⌉.
#include "infer_core.cuh"

extern "C" __global__ void layernorm_quantize(const float* x, int R, int d, const float* gamma, const float* beta,
                                              float eps, int* q, float q_scale, int tokens, int q_stride) {
    const int warp = threadIdx.x >> 5, row = blockIdx.x * (LN_THREADS / 32) + warp;
    if (row >= R) return;  // whole warps leave; no block barrier follows
    unsigned char* qb = reinterpret_cast<unsigned char*>(q);
    if (tokens == 0) {
        unsigned char* qrow = qb + (size_t)row * q_stride;
        ln_row(x + (size_t)row * d, gamma, beta, eps, d, [&](int c, float y) { qrow[c] = (unsigned char)quantize_rn(y, q_scale); });
        return;
    }
    const int t = row / tokens, b = row % tokens;
    const size_t N = (size_t)tokens * d;
    unsigned char* qcol = qb + ((size_t)(t / 4) * N + (size_t)b * d) * 4 + t % 4;
    ln_row(x + (size_t)row * d, gamma, beta, eps, d, [&](int c, float y) { qcol[4 * c] = (unsigned char)quantize_rn(y, q_scale); });
}
