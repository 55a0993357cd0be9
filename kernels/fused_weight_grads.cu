// fused_weight_grads.cu — every parameter gradient of a step in one launch, from what
// fused_rows.cu saved (twin: reference.fused_weight_grads, composed from embed_backward,
// linear_backward and residual_layernorm_backward). A host-built job table gives each block one
// output tile of one product; ‖g‖² of each tensor is added to the step's statistics row on the
// way, so the optimiser needs no separate norm pass.
//
//   job kind 0  ∂We          = s(x)ᵀ ∂h0                 (Kin × d, sums over the batch)
//   job kind 1  [∂W1; ∂b1]   = [X_iᵀ; 1ᵀ] ∂u_i            (d+1 × H)
//   job kind 2  [∂W2; ∂b2]   = [A_iᵀ; 1ᵀ] ∂s_i            (H+1 × d)
//   job kind 3  [∂Wc; ∂bc]   = [X_Lᵀ; 1ᵀ] ∂z              (d+1 × C)
//   job kind 4  [∂γ_i | ∂β_i] = Σ_b [∂y_i ⊙ n_i | ∂y_i]   (2d column sums)
//
// jobs: 10 ints per block: kind, layer, tile_m, tile_n, split, splits, tile id (its counter),
// scratch offset (floats), tensor index (param_layout order; the bias is tensor + 1), unused.
// Launch: 256 threads, one block per job. scratch/counters as in gemm.cuh's split-K (counters
// zeroed, left zeroed). Limits: as gemm.cuh; the batch comes from (batches, ctr) like embed.cu.
#include "common.cuh"
#include "gemm.cuh"

#define JOB_EMBED 0
#define JOB_FC1 1
#define JOB_FC2 2
#define JOB_HEAD 3
#define JOB_LAYERNORM 4

struct LayerNormParams {  // [∂γ | ∂β] as one column sum (as in residual_layernorm.cu)
    const float* dy;
    const float* nrm;
    int d;
    __device__ float operator()(int b, int n) const {
        return n < d ? dy[(size_t)b * d + n] * nrm[(size_t)b * d + n] : dy[(size_t)b * d + n - d];
    }
};

extern "C" __global__ void fused_weight_grads(const int* jobs, float* grads, const int* layout, const float* X,
                                              const float* A, const float* DU, const float* DS, const float* DY,
                                              const float* NRM, const float* DZ, const float* DH0,
                                              const unsigned char* images, const int* batches,
                                              const unsigned char* flips, const int* ctr, int full, float shift,
                                              float* scratch, unsigned int* counters, float* stats, int stat_width,
                                              int B, int Kin, int d, int H, int C, int blocks) {
    __shared__ GemmSmem smem;
    __shared__ float red[32];
    const int* job = jobs + blockIdx.x * 10;
    const int kind = job[0], layer = job[1], m0 = job[2] * LN_TILE, n0 = job[3] * LN_TILE, split = job[4],
              splits = job[5], tensor = job[8];
    float* partials = scratch + job[7];
    unsigned int* counter = counters + job[6];
    const int pos = step_pos(ctr);
    float* grad_sq = stats + (size_t)pos * stat_width + LN_STAT_GRAD_SQ;

    if (kind == JOB_LAYERNORM) {
        float v;
        const size_t o = (size_t)layer * B * d;
        if (!colsum_splitk(LayerNormParams{DY + o, NRM + o, d}, 2 * d, B, n0, split, splits, partials, counter, v))
            return;
        const int n = n0 + threadIdx.x;
        float sq_gamma = 0.f, sq_beta = 0.f;
        if (threadIdx.x < 64 && n < 2 * d) {
            if (n < d) {
                grads[layout[tensor] + n] = v;
                sq_gamma = v * v;
            } else {
                grads[layout[tensor + 1] + n - d] = v;
                sq_beta = v * v;
            }
        }
        sq_gamma = block_sum(sq_gamma, red);
        sq_beta = block_sum(sq_beta, red);
        if (threadIdx.x == 0) {
            atomicAdd(grad_sq + tensor, sq_gamma);
            atomicAdd(grad_sq + tensor + 1, sq_beta);
        }
        return;
    }

    float acc[4][4];
    int M, N, weight_rows;
    bool done;
    if (kind == JOB_EMBED) {
        const Pixels px = {images, batches + (size_t)pos * B, flips ? flips + (size_t)pos * B : 0, full, shift};
        M = Kin, N = d, weight_rows = Kin;
        done = gemm_splitk(PixelsT{px}, Mat<true>{DH0, d}, M, N, B, m0, n0, split, splits, partials, counter, acc, smem);
    } else if (kind == JOB_FC1) {
        const OnesRow<Mat<false> > xt = {Mat<false>{X + (size_t)layer * B * d, d}, d};
        M = d + 1, N = H, weight_rows = d;
        done = gemm_splitk(xt, Mat<true>{DU + (size_t)layer * B * H, H}, M, N, B, m0, n0, split, splits, partials,
                           counter, acc, smem);
    } else if (kind == JOB_FC2) {
        const OnesRow<Mat<false> > at = {Mat<false>{A + (size_t)layer * B * H, H}, H};
        M = H + 1, N = d, weight_rows = H;
        done = gemm_splitk(at, Mat<true>{DS + (size_t)layer * B * d, d}, M, N, B, m0, n0, split, splits, partials,
                           counter, acc, smem);
    } else {  // JOB_HEAD
        const OnesRow<Mat<false> > yt = {Mat<false>{X + (size_t)blocks * B * d, d}, d};
        M = d + 1, N = C, weight_rows = d;
        done = gemm_splitk(yt, Mat<true>{DZ, C}, M, N, B, m0, n0, split, splits, partials, counter, acc, smem);
    }
    if (!done) return;

    float* W = grads + layout[tensor];
    float* bias = kind == JOB_EMBED ? 0 : grads + layout[tensor + 1];
    const int tx = threadIdx.x & 15, ty = threadIdx.x >> 4;
    float sq_w = 0.f, sq_b = 0.f;
    for (int i = 0; i < 4; ++i)
        for (int j = 0; j < 4; ++j) {
            const int m = m0 + ty + 16 * i, n = n0 + tx + 16 * j;
            if (m >= M || n >= N) continue;
            const float v = acc[i][j];
            if (m < weight_rows) {
                W[(size_t)m * N + n] = v;
                sq_w += v * v;
            } else {
                bias[n] = v;
                sq_b += v * v;
            }
        }
    sq_w = block_sum(sq_w, red);
    sq_b = block_sum(sq_b, red);
    if (threadIdx.x == 0) {
        atomicAdd(grad_sq + tensor, sq_w);
        if (bias) atomicAdd(grad_sq + tensor + 1, sq_b);
    }
}
