// token_linear.cu — a product over the first axis (the Mixer's patches), the same for every image
// and channel, and its gradients (twins: litenet.ops.token_linear_forward,
// litenet.ops.token_linear_backward). One thread per output element.
//
//   token_linear_forward_reference:          y[j, c]  = Σ_t W[t, j] x[t, c] + b[j]
//   token_linear_backward_input_reference:   ∂x[t, c] = Σ_j W[t, j] ∂y[j, c]        (W ∂y)
//   token_linear_backward_weight_reference:  ∂W[t, j] = Σ_c x[t, c] ∂y[j, c]        (x ∂yᵀ)
//   token_linear_backward_bias_reference:    ∂b[j]    = Σ_c ∂y[j, c]
//
// x (T, N) and y (T_out, N) are tokens-major activations (T, B, d) seen as N = B·d columns; W is
// (T, T_out). Launch: 256 threads, any grid (grid-stride over the outputs).

extern "C" __global__ void token_linear_forward_reference(const float* x, const float* W, const float* bias, float* y,
                                                          int T, int T_out, int N) {
    const size_t total = (size_t)T_out * N;
    for (size_t e = blockIdx.x * (size_t)blockDim.x + threadIdx.x; e < total; e += (size_t)gridDim.x * blockDim.x) {
        const int j = (int)(e / N);
        const size_t c = e % N;
        float acc = 0.f;
        for (int t = 0; t < T; ++t) acc += W[(size_t)t * T_out + j] * x[(size_t)t * N + c];
        y[e] = acc + bias[j];
    }
}

extern "C" __global__ void token_linear_backward_input_reference(const float* dy, const float* W, float* dx, int T,
                                                                 int T_out, int N) {
    const size_t total = (size_t)T * N;
    for (size_t e = blockIdx.x * (size_t)blockDim.x + threadIdx.x; e < total; e += (size_t)gridDim.x * blockDim.x) {
        const int t = (int)(e / N);
        const size_t c = e % N;
        float acc = 0.f;
        for (int j = 0; j < T_out; ++j) acc += W[(size_t)t * T_out + j] * dy[(size_t)j * N + c];
        dx[e] = acc;
    }
}

extern "C" __global__ void token_linear_backward_weight_reference(const float* x, const float* dy, float* dW, int T,
                                                                  int T_out, int N) {
    const size_t total = (size_t)T * T_out;
    for (size_t e = blockIdx.x * (size_t)blockDim.x + threadIdx.x; e < total; e += (size_t)gridDim.x * blockDim.x) {
        const int t = (int)(e / T_out), j = (int)(e % T_out);
        float acc = 0.f;
        for (size_t c = 0; c < (size_t)N; ++c) acc += x[(size_t)t * N + c] * dy[(size_t)j * N + c];
        dW[e] = acc;
    }
}

extern "C" __global__ void token_linear_backward_bias_reference(const float* dy, float* db, int T_out, int N) {
    for (int j = blockIdx.x * blockDim.x + threadIdx.x; j < T_out; j += gridDim.x * blockDim.x) {
        float acc = 0.f;
        for (size_t c = 0; c < (size_t)N; ++c) acc += dy[(size_t)j * N + c];
        db[j] = acc;
    }
}
