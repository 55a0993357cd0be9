// mean_tokens.cu — the Mixer's pooling, the mean over the T patches (twins:
// litenet.ops.mean_tokens_forward, litenet.ops.mean_tokens_backward). x is tokens-major (T, N), N = B·d.
//
//   mean_tokens_forward_reference:   y[c] = (Σ_t x[t, c]) / T
//   mean_tokens_backward_reference:  ∂x[t, c] = ∂y[c] / T
//
// One thread per output element. Launch: 256 threads, any grid.

extern "C" __global__ void mean_tokens_forward_reference(const float* x, float* y, int T, int N) {
    for (int c = blockIdx.x * blockDim.x + threadIdx.x; c < N; c += gridDim.x * blockDim.x) {
        float sum = 0.f;
        for (int t = 0; t < T; ++t) sum += x[(size_t)t * N + c];
        y[c] = sum / (float)T;
    }
}

extern "C" __global__ void mean_tokens_backward_reference(const float* dy, float* dx, int T, int N) {
    const size_t total = (size_t)T * N;
    for (size_t e = blockIdx.x * (size_t)blockDim.x + threadIdx.x; e < total; e += (size_t)gridDim.x * blockDim.x)
        dx[e] = dy[e % N] / (float)T;
}
