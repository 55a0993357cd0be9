// token_linear_int8.cu — the Mixer's int8 product across the patches, as the int8 plan defines it
// (twin: int8_plan.Plan.product for a token_linear op; docs/int8-plan.md, "Linear layer"):
//
//   acc[j, n] = Σ_t W_q[j, t] · q[t, n]      int32, exact; n = b·d + c runs over N = B·d columns
//   y[j, n]   = float32(acc) · m[j] + bias[j]   m[j] = float32(s_x · s_w[j]), each op rounded once
//   then either (gelu)  the next token product's input: clamp(rne(GELU(y) / q_scale), −128, 127)
//   or          (res)   the residual join in place: res[j·N + n] = res[j·N + n] + y
//
// Layouts. dp4a multiplies four int8 of one word by four of another, so the four k values it sums
// must share a word. The sum runs over the patches t, and a column n of the (T, N) input has its
// patches N apart; so the input is stored as token words: word (t/4)·N + n holds q[t … t+3, n]
// (layernorm_int8.cu writes it so, and this kernel's gelu output is written the same way for the
// next product). Then a thread that owns column n reads its words coalesced with its neighbours',
// and W_q (T_out, Kw words, row j = output patch j's inputs, zero-padded) is read as whole int4s —
// the same address for the whole warp, one broadcast load per four dp4a. Kw = ⌈T/16⌉·4 words, and
// the output's token words are written for ⌈T_out/16⌉·16 patches, those past T_out as zeros.
//
// Launch: 256 threads; grid = ⌈N/256⌉ · ⌈T_out/16⌉ (block x: column block x / chunks, outputs
// 16·(x % chunks) …). Each thread holds 16 int32 sums of one column. Limits: N < 2³¹; exact for
// any T (|acc| ≤ T·128·127).
#include "infer_words.cuh"

#define TL_OUTS 16  // output patches per block: 16 accumulators per thread, 4 output words

extern "C" __global__ void token_linear_int8(const int* x, const int* W, int Kw, int T_out, int N, const float* mult,
                                             const float* bias, int gelu, float* res, int use_res, int* q, int use_q,
                                             float q_scale) {
    const int chunks = (T_out + TL_OUTS - 1) / TL_OUTS;
    const int j0 = (blockIdx.x % chunks) * TL_OUTS;
    const int n = (blockIdx.x / chunks) * LN_THREADS + threadIdx.x;
    if (n >= N) return;  // no barrier in this kernel
    int acc[TL_OUTS];
#pragma unroll
    for (int i = 0; i < TL_OUTS; ++i) acc[i] = 0;
    const int jn = min(TL_OUTS, T_out - j0);  // the rows of W this block reads (the rest would be past its end)
    for (int k = 0; k < Kw; k += 4) {
        int xv[4];
#pragma unroll
        for (int i = 0; i < 4; ++i) xv[i] = x[(size_t)(k + i) * N + n];
#pragma unroll
        for (int i = 0; i < TL_OUTS; ++i)
            if (i < jn) {
                int wv[4];
                LN_CHECK_ALIGN(W + (size_t)(j0 + i) * Kw + k, 16);
                load4(W + (size_t)(j0 + i) * Kw + k, wv);
                acc[i] = __dp4a(xv[3], wv[3], __dp4a(xv[2], wv[2], __dp4a(xv[1], wv[1], __dp4a(xv[0], wv[0], acc[i]))));
            }
    }
    int qv[TL_OUTS];
#pragma unroll
    for (int i = 0; i < TL_OUTS; ++i) {
        qv[i] = 0;
        if (i >= jn) continue;
        const int j = j0 + i;
        const float y = __fadd_rn(__fmul_rn((float)acc[i], mult[j]), bias[j]);
        if (use_res) {
            float* r = res + (size_t)j * N + n;
            *r = __fadd_rn(*r, y);
        }
        if (use_q) qv[i] = quantize_rn(gelu ? gelu_rn(y) : y, q_scale);
    }
    if (use_q)
#pragma unroll
        for (int w = 0; w < TL_OUTS / 4; ++w)
            q[(size_t)(j0 / 4 + w) * N + n] = pack4(qv[4 * w], qv[4 * w + 1], qv[4 * w + 2], qv[4 * w + 3]);
}
