// mean_tokens.cu — the Mixer's pooling: the mean over the T patches (twins:
// litenet.ops.mean_tokens_forward, litenet.ops.mean_tokens_backward). x is tokens-major (T, B·d).
//
//   mean_tokens_forward:   y[i] = (Σ_t x[t, i]) / T   over i < N = B·d, summed in t order
//   mean_tokens_backward:  ∂x[t, i] = ∂y[i] / T
//
// Launch: 256 threads, grid-stride (any grid).
#include "common.cuh"

extern "C" __global__ void mean_tokens_forward(const float* x, float* y, int T, int N) {
    for (int i = blockIdx.x * blockDim.x + threadIdx.x; i < N; i += gridDim.x * blockDim.x) {
        float s = 0.f;
        for (int t = 0; t < T; ++t) s += x[(size_t)t * N + i];
        y[i] = s / (float)T;
    }
}

extern "C" __global__ void mean_tokens_backward(const float* dy, float* dx, int T, int N) {
    const size_t total = (size_t)T * N;
    for (size_t e = blockIdx.x * (size_t)blockDim.x + threadIdx.x; e < total; e += (size_t)gridDim.x * blockDim.x)
        dx[e] = dy[e % N] / (float)T;
}
