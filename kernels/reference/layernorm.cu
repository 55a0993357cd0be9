// layernorm.cu — LayerNorm over the last axis (the d features of each row) and its gradients
// (twins: litenet.ops.layernorm_forward, litenet.ops.layernorm_backward).
//
//   layernorm_rows_reference:            μ = mean(s),  rstd = 1/√(mean((s − μ)²) + eps)       (a thread per row)
//   layernorm_forward_reference:         n = (s − μ) · rstd,  y = γ n + β                      (a thread per element)
//   layernorm_backward_rows_reference:   m₁ = mean(∂y γ),  m₂ = mean(∂y γ n)                   (a thread per row)
//   layernorm_backward_input_reference:  ∂s = rstd (∂y γ − m₁ − n m₂)                           (a thread per element)
//   layernorm_backward_params_reference: ∂γ = Σ_rows ∂y n,  ∂β = Σ_rows ∂y                      (a thread per feature)
//
// Every row of s (rows, d) is normalised alone (a Mixer tensor (T, B, d) is T·B rows). The forward
// keeps n and rstd for the backward, as the NumPy reference's cache does; μ and (m₁, m₂) live only
// between the two launches of a pass. Launch: 256 threads, any grid (grid-stride).

extern "C" __global__ void layernorm_rows_reference(const float* s, float* mean, float* rstd, int rows, int d,
                                                    float eps) {
    for (int r = blockIdx.x * blockDim.x + threadIdx.x; r < rows; r += gridDim.x * blockDim.x) {
        const float* row = s + (size_t)r * d;
        float sum = 0.f;
        for (int i = 0; i < d; ++i) sum += row[i];
        const float mu = sum / (float)d;
        float squares = 0.f;
        for (int i = 0; i < d; ++i) squares += (row[i] - mu) * (row[i] - mu);
        mean[r] = mu;
        rstd[r] = 1.f / sqrtf(squares / (float)d + eps);
    }
}

extern "C" __global__ void layernorm_forward_reference(const float* s, const float* mean, const float* rstd,
                                                       const float* gamma, const float* beta, float* nrm, float* y,
                                                       int rows, int d) {
    const size_t total = (size_t)rows * d;
    for (size_t e = blockIdx.x * (size_t)blockDim.x + threadIdx.x; e < total; e += (size_t)gridDim.x * blockDim.x) {
        const size_t r = e / d;
        const int i = (int)(e % d);
        const float n = (s[e] - mean[r]) * rstd[r];
        nrm[e] = n;
        y[e] = gamma[i] * n + beta[i];
    }
}

extern "C" __global__ void layernorm_backward_rows_reference(const float* dy, const float* nrm, const float* gamma,
                                                             float* means, int rows, int d) {
    for (int r = blockIdx.x * blockDim.x + threadIdx.x; r < rows; r += gridDim.x * blockDim.x) {
        float m1 = 0.f, m2 = 0.f;
        for (int i = 0; i < d; ++i) {
            const float dn = dy[(size_t)r * d + i] * gamma[i];
            m1 += dn;
            m2 += dn * nrm[(size_t)r * d + i];
        }
        means[2 * (size_t)r] = m1 / (float)d;
        means[2 * (size_t)r + 1] = m2 / (float)d;
    }
}

extern "C" __global__ void layernorm_backward_input_reference(const float* dy, const float* nrm, const float* rstd,
                                                              const float* gamma, const float* means, float* ds,
                                                              int rows, int d) {
    const size_t total = (size_t)rows * d;
    for (size_t e = blockIdx.x * (size_t)blockDim.x + threadIdx.x; e < total; e += (size_t)gridDim.x * blockDim.x) {
        const size_t r = e / d;
        const int i = (int)(e % d);
        ds[e] = rstd[r] * (dy[e] * gamma[i] - means[2 * r] - nrm[e] * means[2 * r + 1]);
    }
}

extern "C" __global__ void layernorm_backward_params_reference(const float* dy, const float* nrm, float* dgamma,
                                                               float* dbeta, int rows, int d) {
    for (int i = blockIdx.x * blockDim.x + threadIdx.x; i < d; i += gridDim.x * blockDim.x) {
        float g = 0.f, b = 0.f;
        for (size_t r = 0; r < (size_t)rows; ++r) {
            g += dy[r * d + i] * nrm[r * d + i];
            b += dy[r * d + i];
        }
        dgamma[i] = g;
        dbeta[i] = b;
    }
}
