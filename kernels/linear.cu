// linear.cu — the linear layer y = x W + b (fc1, fc2, the head) and its three gradients
// (twins: reference.linear_forward, reference.linear_backward, and linear_gelu_forward in the
// "Twins of fused CUDA kernels" section, which fuses GELU into the forward's epilogue).
//
//   linear_forward:          y[b, o] = Σ_i x[b, i] W[i, o] + bias[o]          x: (B, n_in), W: (n_in, n_out)
//   linear_gelu_forward:     u = x W + b and a = GELU(u), both written (the backward needs u)
//   linear_backward_input:   ∂x[b, i] = Σ_o ∂y[b, o] W[i, o]                  (∂y Wᵀ)
//   linear_backward_weight:  ∂W[i, o] = Σ_b x[b, i] ∂y[b, o],  ∂b[o] = Σ_b ∂y[b, o]
//                            — one product [xᵀ; 1ᵀ]·∂y whose extra row of ones yields ∂b.
//
// Launch: 256 threads; grid = tiles_m · tiles_n · splits with 64×64 tiles over the output
// ((B, n_out), (B, n_in) or (n_in + 1, n_out)) and the reduction split `splits` ways (block x: tile
// x / splits, split x % splits). scratch ≥ tiles·splits·4096 floats when splits > 1; counters ≥
// tiles zeroed unsigned ints, left zeroed. Limits: none on the sizes beyond int indexing.
#include "common.cuh"
#include "gemm.cuh"

struct TileCoords {
    int tile, split, m0, n0, tx, ty;
    __device__ TileCoords(int splits, int N) {
        tile = blockIdx.x / splits;
        split = blockIdx.x % splits;
        const int tiles_n = (N + LN_TILE - 1) / LN_TILE;
        m0 = (tile / tiles_n) * LN_TILE;
        n0 = (tile % tiles_n) * LN_TILE;
        tx = threadIdx.x & 15;
        ty = threadIdx.x >> 4;
    }
    __device__ int m(int i) const { return m0 + ty + 16 * i; }
    __device__ int n(int j) const { return n0 + tx + 16 * j; }
};

// GELU or not, selected here once for both forward kernels.
template <bool GELU>
__device__ void linear_forward_body(const float* x, const float* W, const float* bias, float* u, float* a, int B,
                                    int n_in, int n_out, int splits, float* scratch, unsigned int* counters) {
    __shared__ GemmSmem smem;
    const TileCoords tc(splits, n_out);
    float acc[4][4];
    if (!gemm_splitk(Mat<true>{x, n_in}, Mat<true>{W, n_out}, B, n_out, n_in, tc.m0, tc.n0, tc.split, splits,
                     scratch + (size_t)tc.tile * splits * LN_TILE * LN_TILE, counters + tc.tile, acc, smem))
        return;
    for (int i = 0; i < 4; ++i)
        for (int j = 0; j < 4; ++j) {
            const int m = tc.m(i), n = tc.n(j);
            if (m < B && n < n_out) {
                const float v = acc[i][j] + bias[n];
                u[(size_t)m * n_out + n] = v;
                if (GELU) a[(size_t)m * n_out + n] = gelu_value(v);
            }
        }
}

extern "C" __global__ void linear_forward(const float* x, const float* W, const float* bias, float* y, int B, int n_in,
                                          int n_out, int splits, float* scratch, unsigned int* counters) {
    linear_forward_body<false>(x, W, bias, y, 0, B, n_in, n_out, splits, scratch, counters);
}

extern "C" __global__ void linear_gelu_forward(const float* x, const float* W, const float* bias, float* u, float* a,
                                               int B, int n_in, int n_out, int splits, float* scratch,
                                               unsigned int* counters) {
    linear_forward_body<true>(x, W, bias, u, a, B, n_in, n_out, splits, scratch, counters);
}

extern "C" __global__ void linear_backward_input(const float* dy, const float* W, float* dx, int B, int n_in, int n_out,
                                                 int splits, float* scratch, unsigned int* counters) {
    __shared__ GemmSmem smem;
    const TileCoords tc(splits, n_in);
    float acc[4][4];
    // B operand (k = o, n = i) is W[i, o]: W read as a transposed view.
    if (!gemm_splitk(Mat<true>{dy, n_out}, Mat<false>{W, n_out}, B, n_in, n_out, tc.m0, tc.n0, tc.split, splits,
                     scratch + (size_t)tc.tile * splits * LN_TILE * LN_TILE, counters + tc.tile, acc, smem))
        return;
    for (int i = 0; i < 4; ++i)
        for (int j = 0; j < 4; ++j) {
            const int m = tc.m(i), n = tc.n(j);
            if (m < B && n < n_in) dx[(size_t)m * n_in + n] = acc[i][j];
        }
}

extern "C" __global__ void linear_backward_weight(const float* x, const float* dy, float* dW, float* db, int B,
                                                  int n_in, int n_out, int splits, float* scratch,
                                                  unsigned int* counters) {
    __shared__ GemmSmem smem;
    const TileCoords tc(splits, n_out);
    float acc[4][4];
    const OnesRow<Mat<false> > xt = {Mat<false>{x, n_in}, n_in};  // A(i, b) = x[b, i]; row n_in is ones
    if (!gemm_splitk(xt, Mat<true>{dy, n_out}, n_in + 1, n_out, B, tc.m0, tc.n0, tc.split, splits,
                     scratch + (size_t)tc.tile * splits * LN_TILE * LN_TILE, counters + tc.tile, acc, smem))
        return;
    for (int i = 0; i < 4; ++i)
        for (int j = 0; j < 4; ++j) {
            const int m = tc.m(i), n = tc.n(j);
            if (n >= n_out) continue;
            if (m < n_in) dW[(size_t)m * n_out + n] = acc[i][j];
            else if (m == n_in) db[n] = acc[i][j];
        }
}
