// losses.cu — the classifier's losses on the logits z (B, C), mean over the batch (twins:
// litenet.ops.margin_loss_forward / _backward, litenet.ops.cross_entropy_forward / _backward).
//
//   margin_loss_forward_reference:    ℓ_b = max(0, m − z[b, y_b] + z[b, r_b]),  r_b = first argmax_{j≠y_b} z[b, j]
//   margin_loss_backward_reference:   ∂z[b, y_b] = −1/B and ∂z[b, r_b] = +1/B where the hinge is active, else 0
//   cross_entropy_forward_reference:  ℓ_b = (1 − ε) [(1 − s_b)(lse_b − z[b, y_b]) + s_b (lse_b − z[b, p_b])]
//                                           + ε (lse_b − mean_j z[b, j]),   lse_b = log Σ_j exp z[b, j]
//   cross_entropy_backward_reference: ∂z[b, j] = (softmax(z_b)_j − q[b, j]) / B,
//                                     q = (1 − ε)[(1 − s_b) onehot(y_b) + s_b onehot(p_b)] + ε / C
//   loss_mean_reference:              the statistics row's loss = mean_b ℓ_b
//
// ε is label smoothing, p_b and s_b the CutMix partner's label and share (p_b = y_b, s_b = 0
// without one: images.cu labels_gather_reference). One thread per image (per element for the
// backwards; one thread for the mean). Launch: 256 threads, any grid.

__device__ int rival(const float* z, int C, int y) {  // first argmax over j ≠ y
    int best = y == 0 ? 1 : 0;
    for (int j = 0; j < C; ++j)
        if (j != y && z[j] > z[best]) best = j;
    return best;
}

__device__ float log_sum_exp(const float* z, int C) {
    float top = z[0];
    for (int j = 1; j < C; ++j) top = fmaxf(top, z[j]);
    float sum = 0.f;
    for (int j = 0; j < C; ++j) sum += expf(z[j] - top);
    return logf(sum) + top;
}

extern "C" __global__ void margin_loss_forward_reference(const float* z, const int* labels, float* per_sample, int B,
                                                         int C, float margin) {
    for (int b = blockIdx.x * blockDim.x + threadIdx.x; b < B; b += gridDim.x * blockDim.x) {
        const float* row = z + (size_t)b * C;
        const int y = labels[b];
        per_sample[b] = fmaxf(0.f, margin - row[y] + row[rival(row, C, y)]);
    }
}

extern "C" __global__ void margin_loss_backward_reference(const float* z, const int* labels, float* dz, int B, int C,
                                                          float margin) {
    const size_t total = (size_t)B * C;
    for (size_t e = blockIdx.x * (size_t)blockDim.x + threadIdx.x; e < total; e += (size_t)gridDim.x * blockDim.x) {
        const int b = (int)(e / C), j = (int)(e % C);
        const float* row = z + (size_t)b * C;
        const int y = labels[b], r = rival(row, C, y);
        const bool active = margin - row[y] + row[r] > 0.f;
        dz[e] = !active ? 0.f : j == y ? -1.f / (float)B : j == r ? 1.f / (float)B : 0.f;
    }
}

extern "C" __global__ void cross_entropy_forward_reference(const float* z, const int* labels, const int* partners,
                                                           const float* shares, float* per_sample, int B, int C,
                                                           float smoothing) {
    for (int b = blockIdx.x * blockDim.x + threadIdx.x; b < B; b += gridDim.x * blockDim.x) {
        const float* row = z + (size_t)b * C;
        const float lse = log_sum_exp(row, C), s = shares[b];
        float mean = 0.f;
        for (int j = 0; j < C; ++j) mean += row[j];
        mean /= (float)C;
        const float hard = (1.f - s) * (lse - row[labels[b]]) + s * (lse - row[partners[b]]);
        per_sample[b] = (1.f - smoothing) * hard + smoothing * (lse - mean);
    }
}

extern "C" __global__ void cross_entropy_backward_reference(const float* z, const int* labels, const int* partners,
                                                            const float* shares, float* dz, int B, int C,
                                                            float smoothing) {
    const size_t total = (size_t)B * C;
    for (size_t e = blockIdx.x * (size_t)blockDim.x + threadIdx.x; e < total; e += (size_t)gridDim.x * blockDim.x) {
        const int b = (int)(e / C), j = (int)(e % C);
        const float* row = z + (size_t)b * C;
        const float p = expf(row[j] - log_sum_exp(row, C)), s = shares[b];
        const float onehot = (j == labels[b] ? 1.f - s : 0.f) + (j == partners[b] ? s : 0.f);
        dz[e] = (p - ((1.f - smoothing) * onehot + smoothing / (float)C)) / (float)B;
    }
}

extern "C" __global__ void loss_mean_reference(const float* per_sample, int B, const int* ctr, float* stats,
                                               int stat_width) {
    if (blockIdx.x != 0 || threadIdx.x != 0) return;
    float sum = 0.f;
    for (int b = 0; b < B; ++b) sum += per_sample[b];
    stats[(size_t)ctr[0] * stat_width] = sum / (float)B;
}
