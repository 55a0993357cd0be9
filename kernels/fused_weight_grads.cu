// fused_weight_grads.cu — every parameter gradient of a step in one launch, from what
// fused_rows.cu saved (twin: fused_twins.fused_weight_grads (tests/cuda), composed from
// litenet.ops.embed_backward, litenet.ops.linear_backward and litenet.ops.residual_layernorm_backward). A host-built job table gives each block one
// output tile of one product; ‖g‖² of each tensor is added to the step's statistics row on the
// way, so the optimiser needs no separate norm pass.
//
//   job kind 0  ∂We         = Sᵀ ∂h0                    (Kin × d, sums over the batch; S = s(x) rows)
//   job kind 1  ∂W1, ∂b1     = X_iᵀ ∂u_i,  Σ_b ∂u_i      (d × H)
//   job kind 2  ∂W2, ∂b2     = A_iᵀ ∂s_i,  Σ_b ∂s_i      (H × d)
//   job kind 3  ∂Wc, ∂bc     = X_Lᵀ ∂z,    Σ_b ∂z        (d × C)
//   job kind 4  [∂γ_i | ∂β_i] = Σ_b [∂y_i ⊙ n_i | ∂y_i]   (2d column sums)
// A bias is the column sums of the product's right operand: the tiles of the first tile row
// compute them from the loads they already make (gemm.cuh colsums).
//
// jobs: 10 ints per block: kind, layer, tile_m, tile_n, split, splits, tile id (its counter),
// scratch offset (floats, a multiple of 4), tensor index (param_layout order; the bias is
// tensor + 1), unused. Launch: 256 threads, one block per job. scratch/counters as in splitk.cuh's
// split-K (LN_SLAB floats per split of a product, 64 per split of a column sum; counters zeroed,
// left zeroed). Limits: as gemm.cuh; S (B × Kin, written by embed_forward_rows or embed_inputs)
// 16-byte aligned.
#include "common.cuh"
#include "splitk.cuh"

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
                                              const float* NRM, const float* DZ, const float* DH0, const float* S,
                                              const int* ctr, float* scratch, unsigned int* counters, float* stats,
                                              int stat_width, int B, int Kin, int d, int H, int C, int blocks) {
    __shared__ GemmSmem<4> smem;
    __shared__ float red[64];
    const int* job = jobs + blockIdx.x * 10;
    const int kind = job[0], layer = job[1], m0 = job[2] * LN_TILE, n0 = job[3] * LN_TILE, split = job[4],
              splits = job[5], tensor = job[8];
    float* partials = scratch + job[7];
    unsigned int* counter = tile_counters(counters, job[6]);
    float* grad_sq = stats + (size_t)step_pos(ctr) * stat_width + LN_STAT_GRAD_SQ;

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
        float sq[2] = {sq_gamma, sq_beta};
        block_sums(sq, red);
        if (threadIdx.x == 0) {
            atomicAdd(grad_sq + tensor, sq[0]);
            atomicAdd(grad_sq + tensor + 1, sq[1]);
        }
        return;
    }

    float acc[4][4], bias_sum;  // 64×64 tiles (TM = 4), fetched two k steps ahead (sums over the batch)
    int M, N;
    bool done;
    const bool bias_row = kind != JOB_EMBED && m0 == 0;
    if (kind == JOB_EMBED) {  // A(i, b) = S[b, i]
        M = Kin, N = d;
        done = gemm_splitk<4, 2>(Mat<false>{S, Kin}, Mat<true>{DH0, d}, M, N, B, m0, n0, split, splits, partials,
                                 counter, acc, false, bias_sum, smem);
    } else if (kind == JOB_FC1) {  // A(i, b) = X_i[b, i]
        M = d, N = H;
        done = gemm_splitk<4, 2>(Mat<false>{X + (size_t)layer * B * d, d}, Mat<true>{DU + (size_t)layer * B * H, H}, M,
                                 N, B, m0, n0, split, splits, partials, counter, acc, bias_row, bias_sum, smem);
    } else if (kind == JOB_FC2) {
        M = H, N = d;
        done = gemm_splitk<4, 2>(Mat<false>{A + (size_t)layer * B * H, H}, Mat<true>{DS + (size_t)layer * B * d, d}, M,
                                 N, B, m0, n0, split, splits, partials, counter, acc, bias_row, bias_sum, smem);
    } else {  // JOB_HEAD
        M = d, N = C;
        done = gemm_splitk<4, 2>(Mat<false>{X + (size_t)blocks * B * d, d}, Mat<true>{DZ, C}, M, N, B, m0, n0, split,
                                 splits, partials, counter, acc, bias_row, bias_sum, smem);
    }
    if (!done) return;

    float* W = grads + layout[tensor];
    const TileAt<4> tc(m0, n0);
    float sq_w = 0.f, sq_b = 0.f;
    for (int i = 0; i < 4; ++i) {
        if (tc.m(i) >= M) continue;
        store_row4(W, N, tc.m(i), tc.n(0), N, acc[i]);
        for (int j = 0; j < 4; ++j)
            if (tc.n(j) < N) sq_w += acc[i][j] * acc[i][j];
    }
    if (bias_row && threadIdx.x < LN_TILE && n0 + (int)threadIdx.x < N) {
        grads[layout[tensor + 1] + n0 + threadIdx.x] = bias_sum;
        sq_b = bias_sum * bias_sum;
    }
    float sq[2] = {sq_w, sq_b};
    block_sums(sq, red);
    if (threadIdx.x == 0) {
        atomicAdd(grad_sq + tensor, sq[0]);
        if (bias_row) atomicAdd(grad_sq + tensor + 1, sq[1]);
    }
}
