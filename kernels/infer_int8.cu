// infer_int8.cu — LiteNet's int8 forward, executing the int8 plan exactly as docs/int8-plan.md
// defines it (twin: litenet.runtime.int8_plan.run_plan). Every linear layer L:
//
//   q = clamp(rne(a / s_x), −128, 127)      int8, per tensor (__fdiv_rn, __float2int_rn)
//   acc[b, n] = Σ_k q[b, k] · W_q[n, k]      int32, four products per __dp4a (sm_61+), exact
//   y = float32(acc) · m[n] + bias[n]        m[n] = float32(s_x · s_w[n]), each op rounded once
//
// with GELU, the residual join and LayerNorm in float32 between layers, as in infer_fp32.cu.
// W_q is (N, Kp) int8 packed four to an int (litenet.runtime.cuda_net.pack_int8, K zero-padded to
// Kp = ⌈K/64⌉·64); quantized activations are byte rows of the same padded width, pad bytes zero.
//
// infer_int8_rows — the whole forward in ONE launch for a few images; as infer_fp32_rows (grid ≤
//   SM count, 256 threads, dynamic shared memory IR_ROWS · max(dp, Hp) bytes). Activations between
//   phases stay float32 in global memory; each phase quantizes its input rows into shared memory.
// infer_int8_tiles — one layer as 64×64 tiles; the epilogue writes float y (use_out) and/or the
//   next layer's quantized input (use_q, with that layer's q_scale), so no layer re-quantizes.
// infer_int8_ln_rows — LayerNorm per row (one warp per row) writing h and its quantization, or
//   with head = 1 the quantized row's int8 head logits (dynamic shared memory 8 · stride bytes).
//
// Limits: acc is exact in int32 for any K ≤ 2³¹/(128·127); float32(acc) rounds to nearest even
// (exact below 2²⁴), as NumPy's astype(float32) does. Any d, H, C ≥ 1.
#include "infer_core.cuh"

extern "C" __global__ void infer_int8_rows(
    const unsigned char* pixels, int B, int full, float shift, const int* wq, const float* wf, const int* layout,
    int d, int H, int C, int blocks, float eps, float* h, float* s, float* a, float* logits, int phase_begin,
    int phase_end, unsigned int* sync) {
    LN_DYNAMIC_SMEM(int, xs);
    __shared__ float lut[256];
    __shared__ int qlut[256];
    lut[threadIdx.x] = pixel_value(threadIdx.x, shift);
    qlut[threadIdx.x] = quantize_rn(lut[threadIdx.x], wf[layout[IL_S]]);
    __syncthreads();
    const int dp = pad64(d), Hp = pad64(H), head = 2 * blocks + 1;
    unsigned int target = 0;
    for (int p = phase_begin; p < phase_end; ++p) {
        if (p > phase_begin) grid_barrier(sync, target);
        const int* L = layout + IL_WIDTH * p;
        const int* W = wq + L[IL_W];
        const float* mult = wf + L[IL_M];
        const float* bias = L[IL_B] >= 0 ? wf + L[IL_B] : nullptr;
        const float scale = wf[L[IL_S]];
        for (int r0 = 0; r0 < B; r0 += IR_ROWS) {
            const int rows = min(IR_ROWS, B - r0);
            if (p == 0) {
                const int K = full ? 3072 : 1024;
                rowdot<Int8>(PixelRowsI8{pixels + (size_t)r0 * 3072, full, lut, qlut, scale}, rows, r0, K / 4, W, d,
                             EpiI8{mult, nullptr, 0, nullptr, h, nullptr, dp, 0.f});
                continue;
            }
            const bool fc2 = p % 2 == 0 && p != head;
            const int Kp = fc2 ? Hp : dp;
            __syncthreads();  // the previous group's products are done with xs
            const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31;
            if (warp < rows) {
                unsigned char* x = reinterpret_cast<unsigned char*>(xs) + warp * Kp;
                const size_t row = (size_t)(r0 + warp);
                if (fc2 || p == 1) {  // fc2 quantizes a; the first fc1 the embedding's h (pads: q(0) = 0)
                    const float* src = fc2 ? a + row * Hp : h + row * dp;
                    for (int j = lane; j < Kp; j += 32) x[j] = (unsigned char)quantize_rn(__ldcg(src + j), scale);
                } else {  // the LayerNorm closing the previous block, then this layer's quantizer
                    const int* P = layout + IL_WIDTH * (p - 1);
                    float* hrow = blockIdx.x == 0 && p != head ? h + row * dp : nullptr;
                    ln_row(s + row * dp, wf + P[IL_GAMMA], wf + P[IL_BETA], eps, d, [&](int j, float y) {
                        x[j] = (unsigned char)quantize_rn(y, scale);
                        if (hrow) hrow[j] = y;
                    });
                    for (int j = d + lane; j < Kp; j += 32) x[j] = 0;
                }
            }
            __syncthreads();
            const Rows<int> in{xs, Kp / 4};
            if (p == head)
                rowdot<Int8>(in, rows, r0, Kp / 4, W, C, EpiI8{mult, bias, 0, nullptr, logits, nullptr, C, 0.f});
            else if (fc2)
                rowdot<Int8>(in, rows, r0, Kp / 4, W, d, EpiI8{mult, bias, 0, h, s, nullptr, dp, 0.f});
            else
                rowdot<Int8>(in, rows, r0, Kp / 4, W, H, EpiI8{mult, bias, 1, nullptr, a, nullptr, Hp, 0.f});
        }
    }
    if (phase_end - phase_begin > 1) grid_leave(sync);
}

// embed: 0 = A is the quantized rows x (M, Kw words); 1 = channel-sum images; 2 = full images,
// quantized with in_scale on the way in.
extern "C" __global__ void infer_int8_tiles(
    const unsigned char* pixels, int embed, float shift, float in_scale, const int* x, int M, int Kw, const int* W,
    int N, const float* mult, const float* bias, int use_bias, int gelu, const float* res, int use_res, float* out,
    int use_out, int* q, int use_q, int stride, float q_scale) {
    __shared__ float lut[256];
    __shared__ int qlut[256];
    lut[threadIdx.x] = pixel_value(threadIdx.x, shift);
    qlut[threadIdx.x] = quantize_rn(lut[threadIdx.x], in_scale);
    __syncthreads();
    const EpiI8 epi{mult, use_bias ? bias : nullptr, gelu, use_res ? res : nullptr, use_out ? out : nullptr,
                    use_q ? reinterpret_cast<unsigned char*>(q) : nullptr, stride, q_scale};
    if (embed)
        tile_gemm<Int8>(PixelRowsI8{pixels, embed == 2, lut, qlut, in_scale}, M, Kw, W, N, epi);
    else
        tile_gemm<Int8>(Rows<int>{x, Kw}, M, Kw, W, N, epi);
}

extern "C" __global__ void infer_int8_ln_rows(
    const float* s, int M, int d, int stride, const float* gamma, const float* beta, float eps, float* h, int* q,
    float q_scale, int head, const int* head_w, const float* head_m, const float* head_b, int C, float* logits) {
    LN_DYNAMIC_SMEM(int, rowbuf);
    const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31;
    const int row = blockIdx.x * (LN_THREADS / 32) + warp;
    if (row >= M) return;  // whole warps leave; no block barrier follows
    const float* srow = s + (size_t)row * stride;
    if (!head) {
        float* hrow = h + (size_t)row * stride;
        unsigned char* qrow = reinterpret_cast<unsigned char*>(q) + (size_t)row * stride;
        ln_row(srow, gamma, beta, eps, d, [&](int j, float y) {
            hrow[j] = y;
            qrow[j] = (unsigned char)quantize_rn(y, q_scale);
        });
        return;
    }
    int* xw = rowbuf + warp * (stride / 4);
    unsigned char* x = reinterpret_cast<unsigned char*>(xw);
    ln_row(srow, gamma, beta, eps, d, [&](int j, float y) { x[j] = (unsigned char)quantize_rn(y, q_scale); });
    for (int j = d + lane; j < stride; j += 32) x[j] = 0;
    __syncwarp();
    for (int c = 0; c < C; ++c) {
        int acc = 0;
        for (int w = lane; w < stride / 4; w += 32) acc = __dp4a(xw[w], head_w[(size_t)c * (stride / 4) + w], acc);
        acc = warp_isum(acc);
        if (lane == 0) logits[(size_t)row * C + c] = __fadd_rn(__fmul_rn((float)acc, head_m[c]), head_b[c]);
    }
}
