// gelu.cu — GELU in its tanh form, elementwise (twins: litenet.ops.gelu_forward, litenet.ops.gelu_backward).
//
//   gelu_forward_reference:   a  = ½ u (1 + t),   t = tanh(c (u + 0.044715 u³)),  c = √(2/π)
//   gelu_backward_reference:  ∂u = ∂a · [½ (1 + t) + ½ u (1 − t²) c (1 + 3·0.044715 u²)]
//
// The exact derivative of the tanh form (not of the erf GELU). One thread per element.
// Launch: 256 threads, any grid.

#define GELU_C 0.7978845608028654f  // √(2/π)
#define GELU_K 0.044715f

extern "C" __global__ void gelu_forward_reference(const float* u, float* a, int n) {
    for (int i = blockIdx.x * blockDim.x + threadIdx.x; i < n; i += gridDim.x * blockDim.x) {
        const float x = u[i], t = tanhf(GELU_C * (x + GELU_K * x * x * x));
        a[i] = 0.5f * x * (1.f + t);
    }
}

extern "C" __global__ void gelu_backward_reference(const float* da, const float* u, float* du, int n) {
    for (int i = blockIdx.x * blockDim.x + threadIdx.x; i < n; i += gridDim.x * blockDim.x) {
        const float x = u[i], t = tanhf(GELU_C * (x + GELU_K * x * x * x));
        const float dt_du = (1.f - t * t) * GELU_C * (1.f + 3.f * GELU_K * x * x);
        du[i] = da[i] * (0.5f * (1.f + t) + 0.5f * x * dt_du);
    }
}
