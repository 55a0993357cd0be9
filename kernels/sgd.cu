// sgd.cu — SGD with momentum and weight decay over the flat parameter buffer, the last launch of
// every training step (twins: litenet.train.optim.sgd_momentum_update, and
// fused_twins.sgd_clip_update (tests/cuda) = grad_norm_clip + sgd_momentum_update).
//
//   sgd_momentum_update: g' = g + wd·w;  v ← μ v + g';  w ← w − lr·v     (PyTorch's convention)
//   sgd_clip_update:     the same with g scaled by the clip rule (common.cuh clip_rule) read from
//                        the step's per-tensor ‖g‖², and ‖g‖ and the decision written to the
//                        statistics row — one launch instead of grad_norm_clip + sgd_momentum_update.
//
// sgd_clip_update also writes the updated parameters' BF16 copy (the first n16 of them: n, or 0 for
// none) where the step's wide BF16 products read one (plans.py BF16_COPIES "P16"): rounding them here,
// while they pass through registers anyway, saves a pass over the parameters each step
// (docs/decisions.md, "BF16 copies").
//
// lr = lrs[ctr[0]] (the schedule lives on the device). Each operation is rounded separately, in
// NumPy's order (__fmul_rn/__fadd_rn stop the compiler fusing them into FMAs), so the update
// matches the twin bit for bit. Four elements per thread at a time (16-byte loads and stores
// where the three buffers are aligned), so a grid of ⌈n / 1024⌉ blocks covers the buffer in one
// pass. After its work the last block to finish advances the step counter.
// Launch: 256 threads, any grid (grid-stride).
#include "bf16_copy.cuh"

__device__ __forceinline__ void sgd_element(float* w, float* v, float g, float lr, float momentum, float wd) {
    const float vel = __fadd_rn(__fadd_rn(__fmul_rn(*v, momentum), g), __fmul_rn(wd, *w));
    *v = vel;
    *w = __fsub_rn(*w, __fmul_rn(lr, vel));
}

// The update of all n elements; g scaled by `scale` unless it is 1 (the unclipped step reads g as is);
// the first n16 new values also into params16 in BF16.
__device__ __forceinline__ void sgd_all(float* params, float* velocity, const float* grads, int n, float lr,
                                        float momentum, float wd, float scale, unsigned short* params16 = nullptr,
                                        int n16 = 0) {
    const int stride = gridDim.x * blockDim.x, first = blockIdx.x * blockDim.x + threadIdx.x;
    const bool vec = aligned16(params) && aligned16(velocity) && aligned16(grads) &&
                     reinterpret_cast<size_t>(params16) % 8 == 0;
    const int n4 = vec ? n / 4 : 0;
    for (int i = first; i < n4; i += stride) {
        const float4 w4 = ld4(params + 4 * i), v4 = ld4(velocity + 4 * i), g4 = ld4(grads + 4 * i);
        float w[4] = {w4.x, w4.y, w4.z, w4.w}, v[4] = {v4.x, v4.y, v4.z, v4.w};
        const float g[4] = {g4.x, g4.y, g4.z, g4.w};
#pragma unroll
        for (int e = 0; e < 4; ++e)
            sgd_element(&w[e], &v[e], scale == 1.f ? g[e] : __fmul_rn(g[e], scale), lr, momentum, wd);
        st4(params + 4 * i, make_float4(w[0], w[1], w[2], w[3]));
        st4(velocity + 4 * i, make_float4(v[0], v[1], v[2], v[3]));
        if (4 * i < n16) store4_bf16(params16 + 4 * i, w[0], w[1], w[2], w[3]);  // 8-byte aligned (vec)
    }
    for (int i = 4 * n4 + first; i < n; i += stride) {
        sgd_element(params + i, velocity + i, scale == 1.f ? grads[i] : __fmul_rn(grads[i], scale), lr, momentum, wd);
        if (i < n16) params16[i] = bf16_bits(params[i]);
    }
}

extern "C" __global__ void sgd_momentum_update(float* params, float* velocity, const float* grads, int n,
                                               const float* lrs, int* ctr, float momentum, float weight_decay) {
    const float lr = lrs[step_pos(ctr)];
    sgd_all(params, velocity, grads, n, lr, momentum, weight_decay, 1.f);
    advance_step_when_last(ctr);
}

extern "C" __global__ void sgd_clip_update(float* params, float* velocity, const float* grads, int n, int T,
                                           const float* lrs, int* ctr, float* stats, int stat_width, float threshold,
                                           float clip_norm, float momentum, float weight_decay,
                                           unsigned short* params16, int n16) {
    const int pos = step_pos(ctr);
    const float lr = lrs[pos];
    float* row = stats + (size_t)pos * stat_width;
    float scale;
    const float norm = clip_rule(row + LN_STAT_GRAD_SQ, T, threshold, clip_norm, scale);
    if (blockIdx.x == 0 && threadIdx.x == 0) {
        row[LN_STAT_NORM] = norm;
        row[LN_STAT_CLIPPED] = scale != 1.f ? 1.f : 0.f;
    }
    sgd_all(params, velocity, grads, n, lr, momentum, weight_decay, scale, params16, n16);
    advance_step_when_last(ctr);
}
