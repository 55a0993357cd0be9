// token_linear_int8.cu — the Mixer's int8 product across the patches, as the int8 plan defines it
// (twin: litenet.runtime.int8_plan.Plan.product for a token_linear op; docs/int8-plan.md, "Linear
// layer"):
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
// and W_q (T_out, Kw words, row j = output patch j's inputs, zero-padded) is staged in shared memory
// as int4s the whole warp reads at once: one broadcast per four dp4a. Kw = ⌈T/16⌉·4 words, and
// the output's token words are written for ⌈T_out/16⌉·16 patches, those past T_out as zeros.
//
// Launch: 256 threads; grid = ⌈N/256⌉ · ⌈T_out/16⌉ (block x: column block x / chunks, outputs
// 16·(x % chunks) …). Each thread holds 16 int32 sums of one column. The k words go in chunks of 16
// (64 patches: the Mixer's whole sum in one): the block first stages its 16 rows of the chunk's W in
// shared memory, then each thread issues all 16 of its x loads at once and runs the chunk's 256
// dp4a out of registers and broadcast shared reads — at a batch of 1 the kernel is two round trips
// to memory, where loading W inside the dp4a loop would make it a chain of them (docs/decisions.md,
// "int8 runtime"). Limits: N < 2³¹; exact for any T (|acc| ≤ T·128·127).
#include "infer_words.cuh"

#define TL_OUTS 16  // output patches per block: 16 accumulators per thread, 4 output words
#define TL_KW 16    // words of k per chunk (64 patches)

extern "C" __global__ void token_linear_int8(const int* x, const int* W, int Kw, int T_out, int N, const float* mult,
                                             const float* bias, int gelu, float* res, int use_res, int* q, int use_q,
                                             float q_scale) {
    __shared__ int4 ws[TL_OUTS][TL_KW / 4];
    const int chunks = (T_out + TL_OUTS - 1) / TL_OUTS;
    const int j0 = (blockIdx.x % chunks) * TL_OUTS;
    const int n = (blockIdx.x / chunks) * LN_THREADS + threadIdx.x;
    const bool live = n < N;  // a thread past N still helps stage W (no early return before a barrier)
    const int jn = min(TL_OUTS, T_out - j0);  // the rows of W this block reads (the rest would be past its end)
    int acc[TL_OUTS];
#pragma unroll
    for (int i = 0; i < TL_OUTS; ++i) acc[i] = 0;
    for (int c0 = 0; c0 < Kw; c0 += TL_KW) {
        const int cw = min(TL_KW, Kw - c0);  // words in this chunk, a multiple of 4 (as Kw)
        __syncthreads();                     // the previous chunk's products are done with ws
        if (threadIdx.x < TL_OUTS * TL_KW / 4) {
            const int i = threadIdx.x / (TL_KW / 4), v = threadIdx.x % (TL_KW / 4);
            int wv[4] = {0, 0, 0, 0};
            if (i < jn && 4 * v < cw) {
                LN_CHECK_ALIGN(W + (size_t)(j0 + i) * Kw + c0 + 4 * v, 16);
                load4(W + (size_t)(j0 + i) * Kw + c0 + 4 * v, wv);
            }
            ws[i][v] = make_int4(wv[0], wv[1], wv[2], wv[3]);
        }
        __syncthreads();
        if (!live) continue;
        int xv[TL_KW];
#pragma unroll
        for (int k = 0; k < TL_KW; ++k) xv[k] = k < cw ? x[(size_t)(c0 + k) * N + n] : 0;
#pragma unroll
        for (int i = 0; i < TL_OUTS; ++i)
#pragma unroll
            for (int v = 0; v < TL_KW / 4; ++v) {
                const int4 w = ws[i][v];
                acc[i] = __dp4a(xv[4 * v + 3], w.w,
                                __dp4a(xv[4 * v + 2], w.z, __dp4a(xv[4 * v + 1], w.y, __dp4a(xv[4 * v], w.x, acc[i]))));
            }
    }
    if (!live) return;
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
