// adamw.cu — AdamW over the flat parameter buffer, fused with the clip rule (twins:
// litenet.train.optim.adamw_update after litenet.train.optim.grad_norm_clip).
//
//   adamw_update:  with s = the clip rule's scale from this step's ‖g_t‖² (grad_norm.cu), g ← s·g;
//                  w ← w − lr·wd_i·w;  m ← β₁ m + (1 − β₁) g;  v ← β₂ v + (1 − β₂) g²;
//                  w ← w − (lr / (1 − β₁ᵗ)) · m / (√v / √(1 − β₂ᵗ) + eps)
//                  lr = lrs[ctr[0]] and t = steps[ctr[0]] (the 1-based update count) from the
//                  schedule; wd_i = decay[i] (0 for biases and LayerNorm's γ, β under decay =
//                  "weights"). Writes ‖g‖ and the clip decision to the statistics row, and is a
//                  step's last kernel: its last block advances the step counter.
//
// Launch: 256 threads, grid-stride (any grid). Limits: n < 2³¹.
#include "common.cuh"

extern "C" __global__ void adamw_update(float* params, float* m, float* v, const float* grads, const float* decay,
                                        const float* lrs, const int* steps, int* ctr, float* stats, int stat_width,
                                        int n, int T, float beta1, float beta2, float eps, float threshold,
                                        float clip_norm) {
    const int pos = step_pos(ctr);
    float* row = stats + (size_t)pos * stat_width;
    float scale;
    const float norm = clip_rule(row + LN_STAT_GRAD_SQ, T, threshold, clip_norm, scale);
    if (blockIdx.x == 0 && threadIdx.x == 0) {
        row[LN_STAT_NORM] = norm;
        row[LN_STAT_CLIPPED] = scale != 1.f ? 1.f : 0.f;
    }
    const float lr = lrs[pos];
    const int t = steps[pos];
    const float step_size = lr / (1.f - powf(beta1, (float)t)), root2 = sqrtf(1.f - powf(beta2, (float)t));
    for (int i = blockIdx.x * blockDim.x + threadIdx.x; i < n; i += gridDim.x * blockDim.x) {
        const float g = grads[i] * scale;
        float w = params[i] * (1.f - lr * decay[i]);
        const float mi = beta1 * m[i] + (1.f - beta1) * g, vi = beta2 * v[i] + (1.f - beta2) * (g * g);
        m[i] = mi;
        v[i] = vi;
        params[i] = w - step_size * (mi / (sqrtf(vi) / root2 + eps));
    }
    advance_step_when_last(ctr);
}
