// infer_mixer.cu — the Mixer's float32 forward for a few images in ONE launch (twin: the NumPy forward,
// litenet.train.network.forward, over litenet.graph's Mixer op list):
//
//   x = patches(img) We + be                                    (tokens of P²·3 values, litenet.ops.patchify)
//   per block i:  x = x + token_fc2(GELU(token_fc1(LN(x))))     (products along the T patches, per channel)
//                 x = x + GELU(LN(x) W1 + b1) W2 + b2           (products along the d channels, per patch)
//   logits = mean_t(LN(x)) Wh + bh
//
// At batch 1 the launch-per-op forward is 53 small kernels, each too small to fill the GPU and most of
// them waiting on the one before; here the whole forward is 3·blocks + 2 phases separated by grid
// barriers, each phase cut into as many units as the grid has blocks:
//
//   embed                 unit = (image, patch): its P²·3 values, then its d outputs
//   token  (block i)      unit = (image, CT channels): LayerNorm statistics of all T patches of the image
//                         (every unit recomputes them: the rows are 4·d bytes in L2), then for its channels
//                         the token MLP — T → Th → T with GELU — entirely in shared memory, plus the
//                         residual. It reads stream X[i % 2] and writes X[(i+1) % 2]: the other units
//                         still read whole rows of the first while it writes.
//   channel fc1 (block i) unit = (image, TG patches, HS hidden channels): the LayerNorm of its patches,
//                         then a = GELU(· W1 + b1) for its hidden channels into A
//   channel fc2 (block i) unit = (image, TG patches, CS channels): x += A W2 + b2 in place (each element
//                         read and written by one thread)
//   head                  unit = image: LayerNorm of every patch, their mean, the logits
//
// The flat parameters are read where they lie (litenet.model.param_layout, weights (in, out)); `layout`
// holds each tensor's offset in them (ML_* below, litenet/lowering/fast/mixer_rows.py writes it).
// Every dot product is spread over S threads (block_dots) and summed in a fixed order: the same bits on
// every run, a different summation order from NumPy's (the tests hold the logits to the fp32 tolerance).
// Launch: grid ≤ the SM count (every block resident: the grid barrier), 256 threads, dynamic shared
// memory mixer_rows_smem() floats (mixer_rows.py). [phase_begin, phase_end) selects phases; one phase a
// launch needs no co-residency (the CPU emulator runs it that way, any grid).
#include "infer_core.cuh"

#define ML_EMBED_W 0
#define ML_EMBED_B 1
#define ML_BLOCK0 2     // then 12 offsets a block, in this order:
#define ML_TLN_G 0
#define ML_TLN_B 1
#define ML_TFC1_W 2     // (T, Th)
#define ML_TFC1_B 3
#define ML_TFC2_W 4     // (Th, T)
#define ML_TFC2_B 5
#define ML_CLN_G 6
#define ML_CLN_B 7
#define ML_CFC1_W 8     // (d, Hc)
#define ML_CFC1_B 9
#define ML_CFC2_W 10    // (Hc, d)
#define ML_CFC2_B 11
#define ML_PER_BLOCK 12
#define ML_TG 8         // patches per channel-MLP unit (one warp each for their LayerNorm)

// outs dot products of length K, each by S threads (the largest power of two ≤ 32 with outs·S ≤ the
// block and S ≤ K), partial sums over k ≡ s (mod S) joined by shuffles in a fixed order; emit(o, sum)
// runs on the group's first thread. term(o, k) is the k-th product of output o. Every thread of the
// block must call it (the shuffles take whole warps).
template <class Term, class Emit>
__device__ __forceinline__ void block_dots(int outs, int K, const Term& term, const Emit& emit) {
    int S = 1;
    while (S < 32 && 2 * S * outs <= (int)blockDim.x && 2 * S <= K) S *= 2;
    const int per_pass = blockDim.x / S, s = threadIdx.x % S;
    for (int o0 = 0; o0 < outs; o0 += per_pass) {
        const int o = o0 + threadIdx.x / S;
        float acc = 0.f;
        if (o < outs)
            for (int k = s; k < K; k += S) acc += term(o, k);
        for (int off = S / 2; off > 0; off >>= 1) acc += __shfl_xor_sync(LN_FULL_MASK, acc, off);
        if (o < outs && s == 0) emit(o, acc);
    }
}

// mean and 1/√(σ² + eps) of a row of d values (two passes, as litenet.ops.layernorm_forward), by one warp.
__device__ __forceinline__ float2 row_stats(const float* row, int d, float eps) {
    const int lane = threadIdx.x & 31;
    float sum = 0.f;
    for (int j = lane; j < d; j += 32) sum += __ldcg(row + j);
    const float mean = warp_sum(sum) / (float)d;
    float sq = 0.f;
    for (int j = lane; j < d; j += 32) {
        const float c = __ldcg(row + j) - mean;
        sq += c * c;
    }
    const float var = warp_sum(sq) / (float)d;
    return make_float2(mean, 1.f / sqrtf(var + eps));
}

__device__ __forceinline__ float normed(float v, float2 st, float gamma, float beta) {
    return (v - st.x) * st.y * gamma + beta;
}

extern "C" __global__ void infer_mixer_fp32_rows(
    const unsigned char* pixels, int B, int patch, float shift, float scale, const float* params, const int* layout,
    int T, int d, int Th, int Hc, int blocks, int C, float eps, int CT, int HS, int CS, float* x0, float* x1,
    float* a, float* logits, int phase_begin, int phase_end, unsigned int* sync) {
    LN_DYNAMIC_SMEM(float, sm);
    const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31, warps = blockDim.x >> 5;
    const int side = 32 / patch, per_patch = patch * patch * 3;
    const int tiles = (T + ML_TG - 1) / ML_TG, head = 1 + 3 * blocks;
    float* X[2] = {x0, x1};
    unsigned int target = 0;
    for (int p = phase_begin; p < phase_end; ++p) {
        if (p > phase_begin) grid_barrier(sync, target);
        const int i = (p - 1) / 3, part = (p - 1) % 3;
        const int* L = layout + ML_BLOCK0 + ML_PER_BLOCK * i;
        if (p == 0) {  // embed: one patch a unit
            const float* We = params + layout[ML_EMBED_W];
            const float* be = params + layout[ML_EMBED_B];
            for (int u = blockIdx.x; u < B * T; u += gridDim.x) {
                const int b = u / T, t = u % T;
                __syncthreads();  // the previous unit is done with sm
                for (int e = threadIdx.x; e < per_patch; e += blockDim.x) {
                    const int k = e % 3, px = (e / 3) % patch, py = e / (3 * patch);
                    const int y = (t / side) * patch + py, xx = (t % side) * patch + px;
                    const float v = (float)pixels[(size_t)b * 3072 + (y * 32 + xx) * 3 + k];
                    sm[e] = __fmul_rn(__fsub_rn(__fdiv_rn(v, 255.f), shift), scale);
                }
                __syncthreads();
                float* out = X[0] + (size_t)u * d;
                block_dots(d, per_patch, [&](int o, int k) { return sm[k] * We[(size_t)k * d + o]; },
                           [&](int o, float acc) { out[o] = acc + be[o]; });
            }
        } else if (p == head) {  // final LayerNorm, mean over the patches, the head
            const float* g = params + layout[ML_BLOCK0 + ML_PER_BLOCK * blocks];
            const float* be = params + layout[ML_BLOCK0 + ML_PER_BLOCK * blocks + 1];
            const float* Wh = params + layout[ML_BLOCK0 + ML_PER_BLOCK * blocks + 2];
            const float* bh = params + layout[ML_BLOCK0 + ML_PER_BLOCK * blocks + 3];
            const float* x = X[blocks % 2];
            float* pool = sm + warps * d;
            for (int b = blockIdx.x; b < B; b += gridDim.x) {
                __syncthreads();
                for (int j = lane; j < d; j += 32) sm[warp * d + j] = 0.f;
                for (int t = warp; t < T; t += warps) {  // each warp sums its patches' normalised rows
                    const float* row = x + ((size_t)b * T + t) * d;
                    const float2 st = row_stats(row, d, eps);
                    for (int j = lane; j < d; j += 32) sm[warp * d + j] += normed(__ldcg(row + j), st, g[j], be[j]);
                }
                __syncthreads();
                for (int j = threadIdx.x; j < d; j += blockDim.x) {
                    float s = 0.f;
                    for (int w = 0; w < warps; ++w) s += sm[w * d + j];
                    pool[j] = s / (float)T;
                }
                __syncthreads();
                block_dots(C, d, [&](int o, int k) { return pool[k] * Wh[(size_t)k * C + o]; },
                           [&](int o, float acc) { logits[(size_t)b * C + o] = acc + bh[o]; });
            }
        } else if (part == 0) {  // token MLP: CT channels of one image a unit
            const float *g = params + L[ML_TLN_G], *be = params + L[ML_TLN_B];
            const float *W1 = params + L[ML_TFC1_W], *b1 = params + L[ML_TFC1_B];
            const float *W2 = params + L[ML_TFC2_W], *b2 = params + L[ML_TFC2_B];
            const float* xin = X[i % 2];
            float* xout = X[(i + 1) % 2];
            float2* st = reinterpret_cast<float2*>(sm);  // T statistics
            float* nrm = sm + 2 * T;                     // (T, CT) normalised columns
            float* hid = nrm + T * CT;                   // (Th, CT) GELU of the first product
            const int groups = (d + CT - 1) / CT;
            for (int u = blockIdx.x; u < B * groups; u += gridDim.x) {
                const int b = u / groups, c0 = (u % groups) * CT, cn = min(CT, d - c0);
                const float* img = xin + (size_t)b * T * d;
                __syncthreads();
                for (int t = warp; t < T; t += warps) {
                    const float2 s = row_stats(img + (size_t)t * d, d, eps);
                    if (lane == 0) st[t] = s;
                }
                __syncthreads();
                for (int e = threadIdx.x; e < T * cn; e += blockDim.x) {
                    const int t = e / cn, j = e % cn;
                    nrm[t * CT + j] = normed(__ldcg(img + (size_t)t * d + c0 + j), st[t], g[c0 + j], be[c0 + j]);
                }
                __syncthreads();
                block_dots(Th * cn, T, [&](int o, int k) { return nrm[k * CT + o % cn] * W1[(size_t)k * Th + o / cn]; },
                           [&](int o, float acc) { hid[(o / cn) * CT + o % cn] = gelu_value(acc + b1[o / cn]); });
                __syncthreads();
                float* out = xout + (size_t)b * T * d;
                block_dots(T * cn, Th, [&](int o, int k) { return hid[k * CT + o % cn] * W2[(size_t)k * T + o / cn]; },
                           [&](int o, float acc) {
                               const size_t at = (size_t)(o / cn) * d + c0 + o % cn;
                               out[at] = __ldcg(img + at) + (acc + b2[o / cn]);
                           });
            }
        } else if (part == 1) {  // channel fc1 + GELU: TG patches × HS hidden channels a unit
            const float *g = params + L[ML_CLN_G], *be = params + L[ML_CLN_B];
            const float *W1 = params + L[ML_CFC1_W], *b1 = params + L[ML_CFC1_B];
            const float* x = X[(i + 1) % 2];
            const int hgroups = (Hc + HS - 1) / HS;
            for (int u = blockIdx.x; u < B * tiles * hgroups; u += gridDim.x) {
                const int b = u / (tiles * hgroups), t0 = (u / hgroups) % tiles * ML_TG, n0 = (u % hgroups) * HS;
                const int tn = min(ML_TG, T - t0), hn = min(HS, Hc - n0);
                __syncthreads();
                if (warp < tn) {  // one warp a patch: its normalised row into sm
                    const float* row = x + ((size_t)b * T + t0 + warp) * d;
                    const float2 st = row_stats(row, d, eps);
                    for (int j = lane; j < d; j += 32) sm[warp * d + j] = normed(__ldcg(row + j), st, g[j], be[j]);
                }
                __syncthreads();
                float* out = a + ((size_t)b * T + t0) * Hc + n0;
                block_dots(tn * hn, d, [&](int o, int k) { return sm[(o / hn) * d + k] * W1[(size_t)k * Hc + n0 + o % hn]; },
                           [&](int o, float acc) { out[(size_t)(o / hn) * Hc + o % hn] = gelu_value(acc + b1[n0 + o % hn]); });
            }
        } else {  // channel fc2 + residual: TG patches × CS channels a unit, in place
            const float *W2 = params + L[ML_CFC2_W], *b2 = params + L[ML_CFC2_B];
            float* x = X[(i + 1) % 2];
            const int cgroups = (d + CS - 1) / CS;
            for (int u = blockIdx.x; u < B * tiles * cgroups; u += gridDim.x) {
                const int b = u / (tiles * cgroups), t0 = (u / cgroups) % tiles * ML_TG, c0 = (u % cgroups) * CS;
                const int tn = min(ML_TG, T - t0), cn = min(CS, d - c0);
                const float* arows = a + ((size_t)b * T + t0) * Hc;
                __syncthreads();
                for (int e = threadIdx.x; e < tn * Hc; e += blockDim.x) sm[e] = __ldcg(arows + e);
                __syncthreads();
                float* out = x + ((size_t)b * T + t0) * d + c0;
                block_dots(tn * cn, Hc, [&](int o, int k) { return sm[(o / cn) * Hc + k] * W2[(size_t)k * d + c0 + o % cn]; },
                           [&](int o, float acc) {
                               const size_t at = (size_t)(o / cn) * d + o % cn;
                               out[at] = __ldcg(out + at) + (acc + b2[c0 + o % cn]);  // written by another block
                           });
            }
        }
    }
    if (phase_end - phase_begin > 1) grid_leave(sync);
}
