// sgd.cu — SGD with momentum and weight decay over the flat parameter buffer, the last launch of
// every training step (twins: reference.sgd_momentum_update, and sgd_clip_update in the
// fused-twins section = grad_norm_clip + sgd_momentum_update).
//
//   sgd_momentum_update: g' = g + wd·w;  v ← μ v + g';  w ← w − lr·v     (PyTorch's convention)
//   sgd_clip_update:     the same with g scaled by the clip rule (common.cuh clip_rule) read from
//                        the step's per-tensor ‖g‖², and ‖g‖ and the decision written to the
//                        statistics row — one launch instead of grad_norm_clip + sgd_momentum_update.
//
// lr = lrs[ctr[0]] (the schedule lives on the device). Each operation is rounded separately, in
// NumPy's order (__fmul_rn/__fadd_rn stop the compiler fusing them into FMAs), so the update
// matches the twin bit for bit. After its work the last block to finish advances the step
// counter. Launch: 256 threads, any grid (grid-stride).
#include "common.cuh"

__device__ __forceinline__ void sgd_element(float* w, float* v, float g, float lr, float momentum, float wd) {
    const float vel = __fadd_rn(__fadd_rn(__fmul_rn(*v, momentum), g), __fmul_rn(wd, *w));
    *v = vel;
    *w = __fsub_rn(*w, __fmul_rn(lr, vel));
}

extern "C" __global__ void sgd_momentum_update(float* params, float* velocity, const float* grads, int n,
                                               const float* lrs, int* ctr, float momentum, float weight_decay) {
    const float lr = lrs[step_pos(ctr)];
    for (int i = blockIdx.x * blockDim.x + threadIdx.x; i < n; i += gridDim.x * blockDim.x)
        sgd_element(params + i, velocity + i, grads[i], lr, momentum, weight_decay);
    advance_step_when_last(ctr);
}

extern "C" __global__ void sgd_clip_update(float* params, float* velocity, const float* grads, int n, int T,
                                           const float* lrs, int* ctr, float* stats, int stat_width, float threshold,
                                           float clip_norm, float momentum, float weight_decay) {
    const int pos = step_pos(ctr);
    const float lr = lrs[pos];
    float* row = stats + (size_t)pos * stat_width;
    float scale;
    const float norm = clip_rule(row + LN_STAT_GRAD_SQ, T, threshold, clip_norm, scale);
    if (blockIdx.x == 0 && threadIdx.x == 0) {
        row[LN_STAT_NORM] = norm;
        row[LN_STAT_CLIPPED] = scale != 1.f ? 1.f : 0.f;
    }
    for (int i = blockIdx.x * blockDim.x + threadIdx.x; i < n; i += gridDim.x * blockDim.x)
        sgd_element(params + i, velocity + i, scale == 1.f ? grads[i] : __fmul_rn(grads[i], scale), lr, momentum,
                    weight_decay);
    advance_step_when_last(ctr);
}
