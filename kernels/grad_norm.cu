// grad_norm.cu — the global gradient norm and the seed's clip rule, decided on the device
// (twin: litenet.train.optim.grad_norm_clip, split in two launches here).
//
//   grad_norm_sq:   grad_sq[t] += Σ_{i in tensor t} g_i²  for the T tensors of the flat gradient
//                   (offsets: T+1 ints, param_layout order), into the step's statistics row
//                   (stats + ctr[0]·stat_width + LN_STAT_GRAD_SQ, zero before the step).
//   grad_norm_clip: ‖g‖ = √Σ_t grad_sq[t]; when ‖g‖ > threshold, g ← g · clip_norm/‖g‖ (in place);
//                   writes ‖g‖ and the decision (0/1) to the statistics row.
//
// No host synchronisation: the decision is a value in device memory that every block reads.
// Launch: 256 threads; grad_norm_sq grid = ⌈n / 4096⌉ (one chunk per block, which may straddle
// tensors); grad_norm_clip any grid (grid-stride). sgd.cu's sgd_clip_update fuses the second
// launch into the update (the choice between the two is made in litenet/lowering/fast/step.py).
#include "common.cuh"

#define LN_NORM_CHUNK 4096

extern "C" __global__ void grad_norm_sq(const float* grads, const int* offsets, int T, const int* ctr, float* stats,
                                        int stat_width) {
    __shared__ float scratch[32];
    const int begin = blockIdx.x * LN_NORM_CHUNK, end = min(begin + LN_NORM_CHUNK, offsets[T]);
    float* grad_sq = stats + (size_t)step_pos(ctr) * stat_width + LN_STAT_GRAD_SQ;
    for (int t = 0; t < T; ++t) {
        const int lo = max(begin, offsets[t]), hi = min(end, offsets[t + 1]);
        if (lo >= hi) continue;  // the same for the whole block
        // [a, b): the part of [lo, hi) read 16 bytes at a time (all four loads of a thread in flight at
        // once; one float at a time leaves most of the DRAM bandwidth unused: docs/decisions.md,
        // "Update and norm kernels").
        int a = min(hi, (lo + 3) & ~3), b = max(a, hi & ~3);
        if (!aligned16(grads)) a = b = hi;
        float s = 0.f;
        for (int i = lo + threadIdx.x; i < a; i += blockDim.x) s += grads[i] * grads[i];
        for (int i = b + threadIdx.x; i < hi; i += blockDim.x) s += grads[i] * grads[i];
#pragma unroll 4
        for (int i = a + 4 * threadIdx.x; i < b; i += 4 * blockDim.x) {
            const float4 v = ld4(grads + i);
            s += v.x * v.x + v.y * v.y + v.z * v.z + v.w * v.w;
        }
        s = block_sum(s, scratch);
        if (threadIdx.x == 0) atomicAdd(grad_sq + t, s);
    }
}

extern "C" __global__ void grad_norm_clip(float* grads, int n, int T, const int* ctr, float* stats, int stat_width,
                                          float threshold, float clip_norm) {
    float* row = stats + (size_t)step_pos(ctr) * stat_width;
    float scale;
    const float norm = clip_rule(row + LN_STAT_GRAD_SQ, T, threshold, clip_norm, scale);
    if (blockIdx.x == 0 && threadIdx.x == 0) {
        row[LN_STAT_NORM] = norm;
        row[LN_STAT_CLIPPED] = scale != 1.f ? 1.f : 0.f;
    }
    if (scale == 1.f) return;
    for (int i = blockIdx.x * blockDim.x + threadIdx.x; i < n; i += gridDim.x * blockDim.x) grads[i] *= scale;
}
