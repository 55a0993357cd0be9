// optimizers.cu — the step's end: every parameter tensor's ‖g‖², the clip rule, SGD with momentum
// or AdamW, and the step counter (twins: litenet.train.optim.grad_norm_clip,
// litenet.train.optim.sgd_momentum_update, litenet.train.optim.adamw_update).
//
//   grad_norm_sq_reference:  stats[first + t] = Σ g² over parameter tensor t (offsets[t] … offsets[t+1])
//   clip rule (both updates): n = √(Σ_t stats[first + t]); g ← g · clip_norm / n when n > threshold;
//                             n and the decision go to the statistics row (slots 1 and 2)
//   sgd_update_reference:    v ← μ v + g + wd_i w;  w ← w − lr v
//   adamw_update_reference:  w ← w − lr wd_i w;  m ← β₁ m + (1 − β₁) g;  v ← β₂ v + (1 − β₂) g²;
//                            w ← w − (lr / (1 − β₁ᵗ)) m / (√v / √(1 − β₂ᵗ) + eps)
//   step_advance_reference:  ctr[0] += 1, the step's last launch (the next step reads the next row
//                            of the schedule: that is what lets one CUDA graph replay every step)
//
// lr = lrs[s], t = steps[s] (AdamW's 1-based update count), s = ctr[0]; wd_i = decay[i] (0 on biases
// and LayerNorm's γ, β under decay = "weights"). One thread per tensor (grad_norm_sq) or per
// parameter (the updates). Launch: 256 threads, any grid.

#define STAT_NORM 1
#define STAT_CLIPPED 2

__device__ float clip_scale(const float* row, int first, int T, float threshold, float clip_norm, float* norm) {
    float sum = 0.f;
    for (int t = 0; t < T; ++t) sum += row[first + t];
    *norm = sqrtf(sum);
    return *norm > threshold ? clip_norm / *norm : 1.f;
}

extern "C" __global__ void grad_norm_sq_reference(const float* grads, const int* offsets, int T, const int* ctr,
                                                  float* stats, int stat_width, int first) {
    for (int t = blockIdx.x * blockDim.x + threadIdx.x; t < T; t += gridDim.x * blockDim.x) {
        double sum = 0.0;  // one thread adds a whole tensor (3 M terms for litenet-base's widest): see residual.cu
        for (int i = offsets[t]; i < offsets[t + 1]; ++i) sum += grads[i] * grads[i];
        stats[(size_t)ctr[0] * stat_width + first + t] = (float)sum;
    }
}

extern "C" __global__ void sgd_update_reference(float* params, float* velocity, const float* grads, const float* decay,
                                                const float* lrs, const int* ctr, float* stats, int stat_width,
                                                int first, int n, int T, float momentum, float threshold,
                                                float clip_norm) {
    float* row = stats + (size_t)ctr[0] * stat_width;
    float norm;
    const float scale = clip_scale(row, first, T, threshold, clip_norm, &norm), lr = lrs[ctr[0]];
    for (int i = blockIdx.x * blockDim.x + threadIdx.x; i < n; i += gridDim.x * blockDim.x) {
        const float v = momentum * velocity[i] + grads[i] * scale + decay[i] * params[i];
        velocity[i] = v;
        params[i] -= lr * v;
    }
    if (blockIdx.x == 0 && threadIdx.x == 0) {
        row[STAT_NORM] = norm;
        row[STAT_CLIPPED] = scale != 1.f ? 1.f : 0.f;
    }
}

extern "C" __global__ void adamw_update_reference(float* params, float* m, float* v, const float* grads,
                                                  const float* decay, const float* lrs, const int* steps,
                                                  const int* ctr, float* stats, int stat_width, int first, int n,
                                                  int T, float beta1, float beta2, float eps, float threshold,
                                                  float clip_norm) {
    float* row = stats + (size_t)ctr[0] * stat_width;
    float norm;
    const float scale = clip_scale(row, first, T, threshold, clip_norm, &norm), lr = lrs[ctr[0]];
    const float t = (float)steps[ctr[0]];
    const float step_size = lr / (1.f - powf(beta1, t)), root2 = sqrtf(1.f - powf(beta2, t));
    for (int i = blockIdx.x * blockDim.x + threadIdx.x; i < n; i += gridDim.x * blockDim.x) {
        const float g = grads[i] * scale;
        const float mi = beta1 * m[i] + (1.f - beta1) * g, vi = beta2 * v[i] + (1.f - beta2) * g * g;
        m[i] = mi;
        v[i] = vi;
        params[i] = params[i] * (1.f - lr * decay[i]) - step_size * (mi / (sqrtf(vi) / root2 + eps));
    }
    if (blockIdx.x == 0 && threadIdx.x == 0) {
        row[STAT_NORM] = norm;
        row[STAT_CLIPPED] = scale != 1.f ? 1.f : 0.f;
    }
}

extern "C" __global__ void step_advance_reference(int* ctr) {
    if (blockIdx.x == 0 && threadIdx.x == 0) ctr[0] += 1;
}
