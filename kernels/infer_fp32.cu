// infer_fp32.cu — LiteNet's float32 forward for inference (twin: litenet.runtime.cuda_net.forward_fp32,
// the same function as litenet.train.network.forward):
//
//   r = rows(x/255 − shift)  (full: 3072 values; channel-sum: R+G+B per pixel, 1024)
//   h = r We;  per block i: a = GELU(h W1 + b1); s = h + (a W2 + b2); h = LayerNorm(s)
//   logits = h Wc + bc
//
// Weights are (out, in) row-major with in padded to a multiple of 64
// (litenet.runtime.cuda_net.pack_fp32); every activation row has the padded width, pad columns zero.
// Two ways to run it, chosen by the host:
//
// infer_fp32_rows — the whole forward in ONE launch for a few images (B ≤ a few dozen): phases
//   separated by a grid barrier, each phase spreading its output channels over the grid (rowdot),
//   the images in groups of IR_ROWS. Launch: grid ≤ SM count (all blocks resident), 256 threads,
//   dynamic shared memory IR_ROWS · max(dp, Hp) floats. [phase_begin, phase_end) selects phases;
//   one phase per launch needs no co-residency (the emulator runs it that way, any grid).
// infer_fp32_tiles — one linear layer for many images as 64×64 tiles (grid = ⌈M/64⌉·⌈N/64⌉):
//   embed (A from the images) or x rows; bias, GELU and residual in the epilogue.
// infer_fp32_ln_rows — LayerNorm of each row (one warp per row, grid = ⌈M/8⌉), writing h, or with
//   head = 1 the head's logits from the normalised row (dynamic shared memory 8 · stride floats).
//
// Limits: M rows < 2³¹/stride; any d, H, C ≥ 1 (shared memory bounds the fused kernel's widths).
#include "infer_core.cuh"

extern "C" __global__ void infer_fp32_rows(
    const unsigned char* pixels, int B, int full, float shift, const float* wts, const int* layout, int d, int H,
    int C, int blocks, float eps, float* h, float* s, float* a, float* logits, int phase_begin, int phase_end,
    unsigned int* sync) {
    LN_DYNAMIC_SMEM(float, xs);
    __shared__ float lut[256];
    lut[threadIdx.x] = pixel_value(threadIdx.x, shift);
    __syncthreads();
    const int dp = pad64(d), Hp = pad64(H), head = 2 * blocks + 1;
    unsigned int target = 0;
    for (int p = phase_begin; p < phase_end; ++p) {
        if (p > phase_begin) grid_barrier(sync, target);
        const int* L = layout + IL_WIDTH * p;
        const float* W = wts + L[IL_W];
        const float* bias = L[IL_B] >= 0 ? wts + L[IL_B] : nullptr;
        for (int r0 = 0; r0 < B; r0 += IR_ROWS) {
            const int rows = min(IR_ROWS, B - r0);
            if (p == 0) {
                const int K = full ? 3072 : 1024;
                rowdot<Fp32>(PixelRowsF32{pixels + (size_t)r0 * 3072, full, lut}, rows, r0, K, W, d,
                             EpiF32{nullptr, 0, nullptr, h, dp});
                continue;
            }
            const bool fc2 = p % 2 == 0 && p != head;
            const int Kp = fc2 ? Hp : dp;
            __syncthreads();  // the previous group's products are done with xs
            const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31;
            if (warp < rows) {
                float* x = xs + warp * Kp;
                const size_t row = (size_t)(r0 + warp);
                if (fc2 || p == 1) {  // fc2 reads a; the first fc1 reads the embedding's h
                    const float* src = fc2 ? a + row * Hp : h + row * dp;
                    for (int j = lane; j < Kp; j += 32) x[j] = __ldcg(src + j);
                } else {  // the LayerNorm closing the previous block (its γ, β sit with its fc2)
                    const int* P = layout + IL_WIDTH * (p - 1);
                    float* hrow = blockIdx.x == 0 && p != head ? h + row * dp : nullptr;  // the next residual
                    ln_row(s + row * dp, wts + P[IL_GAMMA], wts + P[IL_BETA], eps, d, [&](int j, float y) {
                        x[j] = y;
                        if (hrow) hrow[j] = y;
                    });
                    for (int j = d + lane; j < Kp; j += 32) x[j] = 0.f;
                }
            }
            __syncthreads();
            const Rows<float> in{xs, Kp};
            if (p == head)
                rowdot<Fp32>(in, rows, r0, Kp, W, C, EpiF32{bias, 0, nullptr, logits, C});
            else if (fc2)
                rowdot<Fp32>(in, rows, r0, Kp, W, d, EpiF32{bias, 0, h, s, dp});
            else
                rowdot<Fp32>(in, rows, r0, Kp, W, H, EpiF32{bias, 1, nullptr, a, Hp});
        }
    }
    if (phase_end - phase_begin > 1) grid_leave(sync);
}

// embed: 0 = A is x (M, Kw); 1 = channel-sum images; 2 = full images.
extern "C" __global__ void infer_fp32_tiles(
    const unsigned char* pixels, int embed, float shift, const float* x, int M, int Kw, const float* W, int N,
    const float* bias, int use_bias, int gelu, const float* res, int use_res, float* out, int stride) {
    __shared__ float lut[256];
    lut[threadIdx.x] = pixel_value(threadIdx.x, shift);
    __syncthreads();
    const EpiF32 epi{use_bias ? bias : nullptr, gelu, use_res ? res : nullptr, out, stride};
    if (embed)
        tile_gemm<Fp32>(PixelRowsF32{pixels, embed == 2, lut}, M, Kw, W, N, epi);
    else
        tile_gemm<Fp32>(Rows<float>{x, Kw}, M, Kw, W, N, epi);
}

extern "C" __global__ void infer_fp32_ln_rows(
    const float* s, int M, int d, int stride, const float* gamma, const float* beta, float eps, float* h, int head,
    const float* head_w, const float* head_b, int C, float* logits) {
    LN_DYNAMIC_SMEM(float, rowbuf);
    const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31;
    const int row = blockIdx.x * (LN_THREADS / 32) + warp;
    if (row >= M) return;  // whole warps leave; no block barrier follows
    const float* srow = s + (size_t)row * stride;
    if (!head) {
        float* hrow = h + (size_t)row * stride;
        ln_row(srow, gamma, beta, eps, d, [&](int j, float y) { hrow[j] = y; });
        return;
    }
    float* x = rowbuf + warp * stride;
    ln_row(srow, gamma, beta, eps, d, [&](int j, float y) { x[j] = y; });
    __syncwarp();
    for (int c = 0; c < C; ++c) {
        float acc = 0.f;
        for (int j = lane; j < d; j += 32) acc = x[j] * head_w[(size_t)c * stride + j] + acc;
        acc = warp_sum(acc);
        if (lane == 0) logits[(size_t)row * C + c] = __fadd_rn(acc, head_b[c]);
    }
}
