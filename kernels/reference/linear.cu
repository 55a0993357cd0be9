// linear.cu — a product over the last axis, y = x W + b, and its gradients (twins:
// litenet.ops.linear_forward, litenet.ops.linear_backward). The reference tier: one thread per output
// element, each a plain loop over its sum — the kernel a student reads before the tiled and wide ones
// (kernels/linear.cu, docs/linear-ladder.md).
//
//   linear_forward_reference:          y[r, n]  = Σ_k x[r, k] W[k, n] + b[n]     (b only if has_bias)
//   linear_backward_input_reference:   ∂x[r, k] = Σ_n ∂y[r, n] W[k, n]            (∂y Wᵀ)
//   linear_backward_weight_reference:  ∂W[k, n] = Σ_r x[r, k] ∂y[r, n]            (xᵀ ∂y)
//   linear_backward_bias_reference:    ∂b[n]    = Σ_r ∂y[r, n]
//
// x (rows, n_in), W (n_in, n_out), y (rows, n_out), all row-major; every leading axis of an
// activation is a row (a Mixer tensor (T, B, d) is T·B rows). Sums run in index order.
// Launch: 256 threads, any grid (grid-stride over the outputs).

extern "C" __global__ void linear_forward_reference(const float* x, const float* W, const float* bias, float* y,
                                                    int rows, int n_in, int n_out, int has_bias) {
    const size_t total = (size_t)rows * n_out;
    for (size_t e = blockIdx.x * (size_t)blockDim.x + threadIdx.x; e < total; e += (size_t)gridDim.x * blockDim.x) {
        const size_t r = e / n_out;
        const int n = (int)(e % n_out);
        float acc = 0.f;
        for (int k = 0; k < n_in; ++k) acc += x[r * n_in + k] * W[(size_t)k * n_out + n];
        y[e] = has_bias ? acc + bias[n] : acc;
    }
}

extern "C" __global__ void linear_backward_input_reference(const float* dy, const float* W, float* dx, int rows,
                                                           int n_in, int n_out) {
    const size_t total = (size_t)rows * n_in;
    for (size_t e = blockIdx.x * (size_t)blockDim.x + threadIdx.x; e < total; e += (size_t)gridDim.x * blockDim.x) {
        const size_t r = e / n_in;
        const int k = (int)(e % n_in);
        float acc = 0.f;
        for (int n = 0; n < n_out; ++n) acc += dy[r * n_out + n] * W[(size_t)k * n_out + n];
        dx[e] = acc;
    }
}

extern "C" __global__ void linear_backward_weight_reference(const float* x, const float* dy, float* dW, int rows,
                                                            int n_in, int n_out) {
    const size_t total = (size_t)n_in * n_out;
    for (size_t e = blockIdx.x * (size_t)blockDim.x + threadIdx.x; e < total; e += (size_t)gridDim.x * blockDim.x) {
        const int k = (int)(e / n_out), n = (int)(e % n_out);
        float acc = 0.f;
        for (int r = 0; r < rows; ++r) acc += x[(size_t)r * n_in + k] * dy[(size_t)r * n_out + n];
        dW[e] = acc;
    }
}

extern "C" __global__ void linear_backward_bias_reference(const float* dy, float* db, int rows, int n_out) {
    for (int n = blockIdx.x * blockDim.x + threadIdx.x; n < n_out; n += gridDim.x * blockDim.x) {
        float acc = 0.f;
        for (int r = 0; r < rows; ++r) acc += dy[(size_t)r * n_out + n];
        db[n] = acc;
    }
}
