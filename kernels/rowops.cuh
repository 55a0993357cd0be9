// rowops.cuh — the per-image pieces that both the one-op kernels (residual_layernorm.cu, loss.cu)
// and the fused small-batch kernel (fused_rows.cu) run, written once so the two cannot drift:
// LayerNorm of one row by one warp, forward and backward, and the loss of one row by one thread.
#pragma once

// One warp: s = x + v; n = (s − μ)·rstd; y = γ n + β over the d features (ops.
// residual_layernorm_forward; RESIDUAL false: s = x, ops.layernorm_forward, v unused). Writes n
// and y (y may alias x: each lane reads x[j] before it writes y[j]); returns rstd = 1/√(σ² + eps).
// σ² is the biased variance, as LayerNorm defines it.
template <bool RESIDUAL = true>
__device__ float layernorm_row_forward(const float* x, const float* v, const float* gamma, const float* beta,
                                       float eps, int d, float* nrm, float* y) {
    const int lane = threadIdx.x & 31;
    auto s = [&](int j) { return RESIDUAL ? x[j] + v[j] : x[j]; };
    float sum = 0.f;
    for (int j = lane; j < d; j += 32) sum += s(j);
    const float mean = warp_sum(sum) / (float)d;
    float sq = 0.f;
    for (int j = lane; j < d; j += 32) {
        const float c = s(j) - mean;
        sq += c * c;
    }
    const float rstd = 1.f / sqrtf(warp_sum(sq) / (float)d + eps);
    for (int j = lane; j < d; j += 32) {
        const float n = (s(j) - mean) * rstd;
        nrm[j] = n;
        y[j] = gamma[j] * n + beta[j];
    }
    return rstd;
}

// One warp: ∂n = ∂y γ;  ∂s = rstd (∂n − mean(∂n) − n · mean(∂n n))  (reference.
// residual_layernorm_backward). ds may alias dy (lane-owned elements, read before written).
__device__ void layernorm_row_backward(const float* dy, const float* nrm, float rstd, const float* gamma, int d,
                                       float* ds) {
    const int lane = threadIdx.x & 31;
    float m1 = 0.f, m2 = 0.f;
    for (int j = lane; j < d; j += 32) {
        const float dn = dy[j] * gamma[j];
        m1 += dn;
        m2 += dn * nrm[j];
    }
    m1 = warp_sum(m1) / (float)d;
    m2 = warp_sum(m2) / (float)d;
    for (int j = lane; j < d; j += 32) ds[j] = rstd * ((dy[j] * gamma[j] - m1) - nrm[j] * m2);
}

// One thread, one row of logits: the margin loss max(0, m − z_y + z_r) with r the first arg-max
// among j ≠ y (reference.rival_class). When dz is given, writes the subgradient −1/B at y and
// +1/B at r where the hinge is active (dz may alias z: every read happens before the writes).
__device__ float margin_row(const float* z, int C, int y, float margin, int batch, float* dz) {
    int rival = -1;
    float best = 0.f;
    for (int j = 0; j < C; ++j)
        if (j != y && (rival < 0 || z[j] > best)) {  // strict '>' keeps the first index on ties
            best = z[j];
            rival = j;
        }
    if (rival < 0) rival = y;  // one class: nothing to push down
    const float hinge = (margin - z[y]) + z[rival];
    const bool active = hinge > 0.f;
    if (dz) {
        const float w = active ? 1.f / (float)batch : 0.f;
        for (int j = 0; j < C; ++j) dz[j] = 0.f;
        dz[y] -= w;
        dz[rival] += w;
    }
    return active ? hinge : 0.f;
}

// One thread, one row: cross-entropy logsumexp(z) − z_y; ∂z = (softmax(z) − onehot(y)) / B.
__device__ float cross_entropy_row(const float* z, int C, int y, int batch, float* dz) {
    float zmax = z[0];
    for (int j = 1; j < C; ++j) zmax = fmaxf(zmax, z[j]);
    float total = 0.f;
    for (int j = 0; j < C; ++j) total += expf(z[j] - zmax);
    const float loss = (logf(total) + zmax) - z[y];
    if (dz)
        for (int j = 0; j < C; ++j) dz[j] = (expf(z[j] - zmax) / total - (j == y ? 1.f : 0.f)) / (float)batch;
    return loss;
}

// One thread, one row: cross-entropy against the smoothed target q = (1 − ε) onehot(y) + ε / C,
// ℓ = (1 − ε)(logsumexp(z) − z_y) + ε (logsumexp(z) − mean(z)); ∂z = (softmax(z) − q) / B
// (ops.cross_entropy_forward / _backward with smoothing ε).
__device__ float cross_entropy_smoothed_row(const float* z, int C, int y, float eps, int batch, float* dz) {
    float zmax = z[0], zsum = 0.f;
    for (int j = 1; j < C; ++j) zmax = fmaxf(zmax, z[j]);
    float total = 0.f;
    for (int j = 0; j < C; ++j) {
        total += expf(z[j] - zmax);
        zsum += z[j];
    }
    const float lse = logf(total) + zmax;
    const float loss = (1.f - eps) * (lse - z[y]) + eps * (lse - zsum / (float)C);
    if (dz)
        for (int j = 0; j < C; ++j)
            dz[j] = (expf(z[j] - zmax) / total - (eps / (float)C + (j == y ? 1.f - eps : 0.f))) / (float)batch;
    return loss;
}
