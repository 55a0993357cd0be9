// gelu.cu — GELU, tanh form, elementwise (twins: litenet.ops.gelu_forward, litenet.ops.gelu_backward).
//
//   gelu_forward:   a = ½ u (1 + tanh(c (u + 0.044715 u³))),  c = √(2/π)
//   gelu_backward:  ∂u = ∂a · [½ (1 + t) + ½ u (1 − t²) c (1 + 3·0.044715 u²)],  t as above
//
// Launch: 256 threads, any grid (grid-stride loop over n elements). ∂u may alias ∂a (in place).
// The math lives in common.cuh (gelu_value, gelu_slope) because linear.cu and fused_rows.cu fuse it.
#include "common.cuh"

extern "C" __global__ void gelu_forward(const float* u, float* a, int n) {
    for (int i = blockIdx.x * blockDim.x + threadIdx.x; i < n; i += gridDim.x * blockDim.x) a[i] = gelu_value(u[i]);
}

extern "C" __global__ void gelu_backward(const float* da, const float* u, float* du, int n) {
    for (int i = blockIdx.x * blockDim.x + threadIdx.x; i < n; i += gridDim.x * blockDim.x)
        du[i] = da[i] * gelu_slope(u[i]);
}
