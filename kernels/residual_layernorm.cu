// residual_layernorm.cu — the residual join and LayerNorm over the d features
// (twins: litenet.ops.residual_layernorm_forward, litenet.ops.residual_layernorm_backward, and
// fused_twins.residual_join (tests/cuda) for the two paths meeting on the way back).
//
//   residual_layernorm_forward:  s = x + v; n = (s − μ)·rstd; y = γ n + β      (writes y, n, rstd)
//   layernorm_forward:           the same with s = x (the Mixer's LayerNorms; twin
//                                litenet.ops.layernorm_forward)
//   residual_layernorm_backward: ∂s = rstd (∂n − mean(∂n) − n·mean(∂n n)), ∂n = ∂y γ;
//                                ∂γ = Σ_b ∂y n,  ∂β = Σ_b ∂y
//   residual_join:               ∂x = ∂s + ∂x_main, and adds ‖∂s‖², ‖∂x_main‖², ⟨∂s, ∂x_main⟩ to
//                                the step's statistics row (stats + ctr[0]·stat_width + slot).
//   layernorm_backward_join:     the two in one (the Mixer): ∂x = skip + ∂s of the LayerNorm
//                                backward, ∂s never stored, and the join's sums with ∂s as ∂x_main.
//
// Launch (256 threads): forward, one warp per row, grid = ⌈B/8⌉. Backward, grid = ⌈B/8⌉ row
// blocks (∂s) followed by tiles·splits column-sum blocks for [∂γ | ∂β] (2d columns in 64-wide
// tiles, batch split `splits` ways; scratch ≥ tiles·splits·64 floats, counters ≥ tiles·LN_TILE_COUNTERS zeroed).
// layernorm_backward_join: the same with any number of row blocks (grid-stride over the rows, 8 at a
// time: fewer blocks, fewer of the statistics' atomicAdds). residual_join: any grid (grid-stride;
// 16-byte accesses where n is a multiple of 4 and the bases aligned). Limits: none beyond int
// indexing; y may alias x, and dx skip.
//
// `…_with_copy` versions of residual_layernorm_forward, residual_layernorm_backward and residual_join (the
// MLP), layernorm_forward and layernorm_backward_join (the Mixer) also write their output's BF16 copy (y16,
// ds16, dx16: bf16_copy.cuh) for the wide BF16 products that read it next (lowering/fast/mlp_shape.py
// COPIES, lowering/fast/tokens.py fuse_copies), each thread or warp re-reading what it just wrote.
#include "bf16_copy.cuh"
#include "common.cuh"
#include "splitk.cuh"
#include "rowops.cuh"

__device__ void residual_layernorm_forward_rows(const float* x, const float* v, const float* gamma, const float* beta,
                                                float* y, float* nrm, float* rstd, int B, int d, float eps,
                                                unsigned short* y16) {
    const int row = blockIdx.x * (LN_THREADS / 32) + (threadIdx.x >> 5), lane = threadIdx.x & 31;
    if (row >= B) return;  // whole warps leave together; no block barrier follows
    const size_t o = (size_t)row * d;
    const float r = layernorm_row_forward(x + o, v + o, gamma, beta, eps, d, nrm + o, y + o);
    if (lane == 0) rstd[row] = r;
    if (y16 != nullptr) {
        __syncwarp();  // the row's y, written by the warp's lanes, seen by all of them
        copy_bf16(y + o, y16 + o, d, lane, 32);
    }
}

extern "C" __global__ void residual_layernorm_forward(const float* x, const float* v, const float* gamma,
                                                      const float* beta, float* y, float* nrm, float* rstd, int B,
                                                      int d, float eps) {
    residual_layernorm_forward_rows(x, v, gamma, beta, y, nrm, rstd, B, d, eps, nullptr);
}

extern "C" __global__ void residual_layernorm_forward_with_copy(const float* x, const float* v, const float* gamma,
                                                                const float* beta, float* y, unsigned short* y16,
                                                                float* nrm, float* rstd, int B, int d, float eps) {
    residual_layernorm_forward_rows(x, v, gamma, beta, y, nrm, rstd, B, d, eps, y16);
}

// The Mixer's LayerNorm in front of each MLP, with no residual in it (litenet.ops.layernorm_forward);
// its backward is residual_layernorm_backward's (the same ∂s, ∂γ, ∂β).
__device__ void layernorm_forward_rows(const float* x, const float* gamma, const float* beta, float* y,
                                       unsigned short* y16, float* nrm, float* rstd, int B, int d, float eps) {
    const int row = blockIdx.x * (LN_THREADS / 32) + (threadIdx.x >> 5), lane = threadIdx.x & 31;
    if (row >= B) return;
    const size_t o = (size_t)row * d;
    const float r = layernorm_row_forward<false>(x + o, nullptr, gamma, beta, eps, d, nrm + o, y + o);
    if (lane == 0) rstd[row] = r;
    if (y16 != nullptr) {
        __syncwarp();  // the row's y, written by the warp's lanes, seen by all of them
        copy_bf16(y + o, y16 + o, d, lane, 32);
    }
}

extern "C" __global__ void layernorm_forward(const float* x, const float* gamma, const float* beta, float* y,
                                             float* nrm, float* rstd, int B, int d, float eps) {
    layernorm_forward_rows(x, gamma, beta, y, nullptr, nrm, rstd, B, d, eps);
}

extern "C" __global__ void layernorm_forward_with_copy(const float* x, const float* gamma, const float* beta, float* y,
                                                       unsigned short* y16, float* nrm, float* rstd, int B, int d,
                                                       float eps) {
    layernorm_forward_rows(x, gamma, beta, y, y16, nrm, rstd, B, d, eps);
}

// ∂γ (columns < d) and ∂β (columns ≥ d) as one column sum over the batch.
struct LayerNormParamGrad {
    const float* dy;
    const float* nrm;
    int d;
    __device__ float operator()(int b, int n) const {
        return n < d ? dy[(size_t)b * d + n] * nrm[(size_t)b * d + n] : dy[(size_t)b * d + n - d];
    }
};

// The column-sum blocks of a LayerNorm backward: block `job` of tiles·splits sums ∂γ (columns < d)
// and ∂β (columns ≥ d) of one 64-wide tile over its share of the B rows.
__device__ void layernorm_param_grads(const float* dy, const float* nrm, float* dgamma, float* dbeta, int B, int d,
                                      int job, int splits, float* scratch, unsigned int* counters) {
    const int tile = job / splits, split = job % splits;
    float v;
    if (!colsum_splitk(LayerNormParamGrad{dy, nrm, d}, 2 * d, B, tile * 64, split, splits,
                       scratch + (size_t)tile * splits * 64, tile_counters(counters, tile), v))
        return;
    const int n = tile * 64 + threadIdx.x;
    if (threadIdx.x < 64 && n < 2 * d) {
        if (n < d) dgamma[n] = v;
        else dbeta[n - d] = v;
    }
}

__device__ void residual_layernorm_backward_blocks(const float* dy, const float* nrm, const float* rstd,
                                                   const float* gamma, float* ds, unsigned short* ds16, float* dgamma,
                                                   float* dbeta, int B, int d, int row_blocks, int splits,
                                                   float* scratch, unsigned int* counters) {
    if ((int)blockIdx.x < row_blocks) {
        const int row = blockIdx.x * (LN_THREADS / 32) + (threadIdx.x >> 5);
        if (row >= B) return;
        const size_t o = (size_t)row * d;
        layernorm_row_backward(dy + o, nrm + o, rstd[row], gamma, d, ds + o);
        if (ds16 != nullptr) {
            __syncwarp();
            copy_bf16(ds + o, ds16 + o, d, threadIdx.x & 31, 32);
        }
        return;
    }
    layernorm_param_grads(dy, nrm, dgamma, dbeta, B, d, blockIdx.x - row_blocks, splits, scratch, counters);
}

extern "C" __global__ void residual_layernorm_backward(const float* dy, const float* nrm, const float* rstd,
                                                       const float* gamma, float* ds, float* dgamma, float* dbeta,
                                                       int B, int d, int row_blocks, int splits, float* scratch,
                                                       unsigned int* counters) {
    residual_layernorm_backward_blocks(dy, nrm, rstd, gamma, ds, nullptr, dgamma, dbeta, B, d, row_blocks, splits,
                                       scratch, counters);
}

extern "C" __global__ void residual_layernorm_backward_with_copy(const float* dy, const float* nrm, const float* rstd,
                                                                 const float* gamma, float* ds, unsigned short* ds16,
                                                                 float* dgamma, float* dbeta, int B, int d,
                                                                 int row_blocks, int splits, float* scratch,
                                                                 unsigned int* counters) {
    residual_layernorm_backward_blocks(dy, nrm, rstd, gamma, ds, ds16, dgamma, dbeta, B, d, row_blocks, splits,
                                       scratch, counters);
}

// Thread 0 adds a join's block totals ‖∂s‖², ‖∂x_main‖², ⟨∂s, ∂x_main⟩ to the step's statistics row.
__device__ __forceinline__ void add_join_sums(const float (&sums)[3], const int* ctr, float* stats, int stat_width,
                                              int slot) {
    if (threadIdx.x != 0) return;
    float* row = stats + (size_t)step_pos(ctr) * stat_width + slot;
    for (int i = 0; i < 3; ++i) atomicAdd(row + i, sums[i]);
}

// The Mixer's LayerNorm backward with the residual join after it: no ∂s buffer, no second pass.
template <int V>
__device__ void join_rows(const float* dy, const float* nrm, const float* rstd, const float* gamma, const float* skip,
                          float* dx, unsigned short* dx16, int B, int d, int row_blocks, float (&sums)[3]) {
    for (int row = blockIdx.x * (LN_THREADS / 32) + (threadIdx.x >> 5); row < B; row += row_blocks * (LN_THREADS / 32)) {
        const size_t o = (size_t)row * d;
        layernorm_row_backward_join<V>(dy + o, nrm + o, rstd[row], gamma, d, skip + o, dx + o, sums);
        if (dx16 != nullptr) {
            __syncwarp();
            copy_bf16(dx + o, dx16 + o, d, threadIdx.x & 31, 32);
        }
    }
}

__device__ void layernorm_backward_join_blocks(const float* dy, const float* nrm, const float* rstd,
                                               const float* gamma, const float* skip, float* dx, unsigned short* dx16,
                                               float* dgamma, float* dbeta, int B, int d, int row_blocks, int splits,
                                               float* scratch, unsigned int* counters, const int* ctr, float* stats,
                                               int stat_width, int slot) {
    if ((int)blockIdx.x < row_blocks) {
        __shared__ float red[3 * 32];
        float sums[3] = {0.f, 0.f, 0.f};
        if (row_vec4(d, dy, nrm, gamma, skip, dx))
            join_rows<4>(dy, nrm, rstd, gamma, skip, dx, dx16, B, d, row_blocks, sums);
        else
            join_rows<1>(dy, nrm, rstd, gamma, skip, dx, dx16, B, d, row_blocks, sums);
        block_sums<3>(sums, red);
        add_join_sums(sums, ctr, stats, stat_width, slot);
        return;
    }
    layernorm_param_grads(dy, nrm, dgamma, dbeta, B, d, blockIdx.x - row_blocks, splits, scratch, counters);
}

extern "C" __global__ void layernorm_backward_join(const float* dy, const float* nrm, const float* rstd,
                                                   const float* gamma, const float* skip, float* dx, float* dgamma,
                                                   float* dbeta, int B, int d, int row_blocks, int splits,
                                                   float* scratch, unsigned int* counters, const int* ctr,
                                                   float* stats, int stat_width, int slot) {
    layernorm_backward_join_blocks(dy, nrm, rstd, gamma, skip, dx, nullptr, dgamma, dbeta, B, d, row_blocks, splits,
                                   scratch, counters, ctr, stats, stat_width, slot);
}

extern "C" __global__ void layernorm_backward_join_with_copy(const float* dy, const float* nrm, const float* rstd,
                                                             const float* gamma, const float* skip, float* dx,
                                                             unsigned short* dx16, float* dgamma, float* dbeta, int B,
                                                             int d, int row_blocks, int splits, float* scratch,
                                                             unsigned int* counters, const int* ctr, float* stats,
                                                             int stat_width, int slot) {
    layernorm_backward_join_blocks(dy, nrm, rstd, gamma, skip, dx, dx16, dgamma, dbeta, B, d, row_blocks, splits,
                                   scratch, counters, ctr, stats, stat_width, slot);
}

// residual_join's loop over V elements at a time (rowops.cuh's join_v), grid-stride; with dx16, each
// thread also rounds the V values it just wrote.
template <int V>
__device__ void join_elements(const float* ds, const float* dx_main, float* dx, int n, float (&sums)[3],
                              unsigned short* dx16) {
    const int step = gridDim.x * blockDim.x;
    for (int i = V * (blockIdx.x * blockDim.x + threadIdx.x); i < n; i += V * step) {
        join_v<V>(loadv<V>(ds + i), loadv<V>(dx_main + i), dx + i, sums);
        if (dx16 != nullptr)
            for (int e = 0; e < V; ++e) dx16[i + e] = bf16_bits(dx[i + e]);
    }
}

__device__ void residual_join_all(const float* ds, const float* dx_main, float* dx, unsigned short* dx16, int n,
                                  const int* ctr, float* stats, int stat_width, int slot) {
    __shared__ float scratch[32];
    float sums[3] = {0.f, 0.f, 0.f};
    if (row_vec4(n, ds, dx_main, dx, nullptr)) join_elements<4>(ds, dx_main, dx, n, sums, dx16);
    else join_elements<1>(ds, dx_main, dx, n, sums, dx16);
    const float totals[3] = {block_sum(sums[0], scratch), block_sum(sums[1], scratch), block_sum(sums[2], scratch)};
    add_join_sums(totals, ctr, stats, stat_width, slot);
}

extern "C" __global__ void residual_join(const float* ds, const float* dx_main, float* dx, int n, const int* ctr,
                                         float* stats, int stat_width, int slot) {
    residual_join_all(ds, dx_main, dx, nullptr, n, ctr, stats, stat_width, slot);
}

extern "C" __global__ void residual_join_with_copy(const float* ds, const float* dx_main, float* dx,
                                                   unsigned short* dx16, int n, const int* ctr, float* stats,
                                                   int stat_width, int slot) {
    residual_join_all(ds, dx_main, dx, dx16, n, ctr, stats, stat_width, slot);
}
