// fused_rows.cu — the small-batch fast path: for a few images per block, everything that is per
// image in one launch — every residual block's forward, the head, the loss, and the whole
// backward down to ∂h0 — with the rows held in shared memory and the weights read from L2/L1.
// What the weight gradients need is written out for fused_weight_grads.cu; the launches between
// ops (about 16 per step for one block) disappear. Twin: fused_twins.fused_rows (tests/cuda), composed from
// litenet.ops.linear_forward, litenet.ops.gelu_forward, litenet.ops.residual_layernorm_forward, the loss,
// and their backwards.
//
//   per block i:  u = x W1 + b1;  a = GELU(u);  v = a W2 + b2;  y = LN(x + v)      (x ← y)
//   head, loss:   z = y Wc + bc;  ℓ, ∂z (margin or cross-entropy; mean ℓ added to stats[0])
//   backward:     ∂y = ∂z Wcᵀ; per block i, last first: ∂s = LN'(∂y); ∂a = ∂s W2ᵀ;
//                 ∂u = ∂a·GELU'(u); ∂x_main = ∂u W1ᵀ; ∂y ← ∂s + ∂x_main (path sums to stats)
//
// Buffers (row b of the batch; "(L, B, w)" is stacked per block):
//   X (L+1, B, d)  X[0] = h0 (embed_forward's output), X[i+1] = block i's output
//   U (L, B, H)    u, overwritten in place by ∂u on the way back
//   A (L, B, H)    GELU(u);  NRM (L, B, d), RSTD (L, B): the LayerNorm's n and rstd
//   DY, DS (L, B, d): ∂y and ∂s at each block;  Z (B, C): logits, overwritten by ∂z;  DH0 (B, d)
// params/layout: the flat parameter buffer and the offsets of its tensors in param_layout order.
//
// Latency is what bounds it (one image per block at a batch of 64): the parameter offsets are
// staged in shared memory and the row's label fetched at the start, so no phase waits on a chain
// of dependent loads; weights stream 64 loads per thread at a time (rows_matmul.cuh); u is
// fetched for GELU' before the product it waits behind; the path sums share one reduction.
//
// Launch: 256 threads, grid = ⌈B / rows⌉, rows ≤ 16 images per block, dynamic shared memory
// 4·(rows·(4·d16 + h16 + c16) + 32 + 256) bytes, w16 = w rounded up to a multiple of 16 (rows_matmul.cuh),
// plus 256 bytes static. Limits: rows ≤ 16 (LN_ROWS_MAX); blocks ≤ 10 (LN_LAYOUT_MAX offsets);
// shared memory must fit (the host picks rows); C ≥ 2.
#include "common.cuh"
#include "rows_matmul.cuh"
#include "rowops.cuh"

#define LN_LAYOUT_MAX 64  // parameter offsets staged in shared memory: 6·blocks + 4 ≤ 64
#define LN_U_EARLY 4      // elements of u per thread fetched ahead of the ∂a product (R·H ≤ 1024)

extern "C" __global__ void fused_rows(const float* params, const int* layout, float* X, float* U, float* A, float* NRM,
                                      float* RSTD, float* DY, float* DS, float* Z, float* DH0,
                                      const unsigned char* labels, const int* batches, const int* ctr, float* stats,
                                      int stat_width, int path_slot, int B, int d, int H, int C, int blocks, int rows,
                                      int loss_kind, float margin, float eps) {
    LN_DYNAMIC_SMEM(float, smem);
    __shared__ int lay[LN_LAYOUT_MAX];
    const int d4 = (d + 15) & ~15, h4 = (H + 15) & ~15, c4 = (C + 15) & ~15;  // row strides
    const int row0 = blockIdx.x * rows, R = min(rows, B - row0);
    const int tid = threadIdx.x, lane = tid & 31, warp = tid >> 5, warps = blockDim.x >> 5;
    float* sx = smem;           // block input x, then y
    float* sa = sx + rows * d4;  // u / a, then ∂a / ∂u
    float* sv = sa + rows * h4;  // v, then ∂x_main
    float* sg = sv + rows * d4;  // ∂y flowing down
    float* sd = sg + rows * d4;  // ∂s
    float* sz = sd + rows * d4;  // z, then ∂z
    float* red = sz + rows * c4;  // 32 floats for block_sum
    float* part = red + 32;        // 256 floats for rows_matmul's split-k partial sums
    const int total = rows * (4 * d4 + h4 + c4);
    // Padding columns must read as zero: rows_matmul reads rows 16 floats at a time.
    for (int e = tid; e < total; e += blockDim.x) smem[e] = 0.f;
    for (int e = tid; e < 6 * blocks + 4; e += blockDim.x) lay[e] = layout[e];
    // This thread's row's label, fetched now so the loss does not wait on batches → labels.
    const int pos = step_pos(ctr);
    const int label = tid < R ? labels[batches[(size_t)pos * B + row0 + tid]] : 0;
    __syncthreads();
    for (int e = tid; e < R * d; e += blockDim.x) sx[(e / d) * d4 + e % d] = X[(size_t)row0 * d + e];
    __syncthreads();

    for (int i = 0; i < blocks; ++i) {
        const float* W1 = params + lay[1 + 6 * i];
        const float* b1 = params + lay[2 + 6 * i];
        const float* W2 = params + lay[3 + 6 * i];
        const float* b2 = params + lay[4 + 6 * i];
        const float* gamma = params + lay[5 + 6 * i];
        const float* beta = params + lay[6 + 6 * i];
        rows_matmul(sx, d4, R, W1, d, H, false, b1, sa, h4, part);
        for (int e = tid; e < R * H; e += blockDim.x) {
            const int r = e / H, h = e % H;
            const size_t g = ((size_t)i * B + row0) * H + e;
            const float u = sa[r * h4 + h], a = gelu_value(u);
            U[g] = u;
            A[g] = a;
            sa[r * h4 + h] = a;
        }
        __syncthreads();
        rows_matmul(sa, h4, R, W2, H, d, false, b2, sv, d4, part);
        for (int r = warp; r < R; r += warps) {
            const size_t g = (size_t)i * B + row0 + r;
            const float rs = layernorm_row_forward(sx + r * d4, sv + r * d4, gamma, beta, eps, d, NRM + g * d, sx + r * d4);
            if (lane == 0) RSTD[g] = rs;
        }
        __syncthreads();
        for (int e = tid; e < R * d; e += blockDim.x)
            X[((size_t)(i + 1) * B + row0) * d + e] = sx[(e / d) * d4 + e % d];
    }

    const float* Wc = params + lay[1 + 6 * blocks];
    const float* bc = params + lay[2 + 6 * blocks];
    rows_matmul(sx, d4, R, Wc, d, C, false, bc, sz, c4, part);
    float* row_stats = stats + (size_t)pos * stat_width;
    float loss = 0.f;
    if (tid < R) {
        const int b = row0 + tid;
        float* z = sz + tid * c4;
        loss = loss_kind == 0 ? margin_row(z, C, label, margin, B, z) : cross_entropy_row(z, C, label, B, z);
        for (int j = 0; j < C; ++j) Z[(size_t)b * C + j] = z[j];
    }
    loss = block_sum(loss, red);  // also the barrier that publishes ∂z in sz
    if (tid == 0) atomicAdd(row_stats + LN_STAT_LOSS, loss / (float)B);

    rows_matmul(sz, c4, R, Wc, C, d, true, 0, sg, d4, part);  // ∂y = ∂z Wcᵀ
    for (int i = blocks - 1; i >= 0; --i) {
        const float* W1 = params + lay[1 + 6 * i];
        const float* W2 = params + lay[3 + 6 * i];
        const float* gamma = params + lay[5 + 6 * i];
        for (int r = warp; r < R; r += warps) {
            const size_t g = (size_t)i * B + row0 + r;
            for (int j = lane; j < d; j += 32) DY[g * d + j] = sg[r * d4 + j];
            layernorm_row_backward(sg + r * d4, NRM + g * d, RSTD[g], gamma, d, sd + r * d4);
            __syncwarp();  // a lane may have written the elements (16-byte groups) another lane copies here
            for (int j = lane; j < d; j += 32) DS[g * d + j] = sd[r * d4 + j];
        }
        __syncthreads();
        float* Ui = U + ((size_t)i * B + row0) * H;  // this block's rows of u, then ∂u
        float u_early[LN_U_EARLY];  // u for GELU', fetched while the product runs
#pragma unroll
        for (int j = 0; j < LN_U_EARLY; ++j) {
            const int e = tid + j * blockDim.x;
            u_early[j] = e < R * H ? Ui[e] : 0.f;
        }
        rows_matmul(sd, d4, R, W2, d, H, true, 0, sa, h4, part);  // ∂a = ∂s W2ᵀ
#pragma unroll
        for (int j = 0; j < LN_U_EARLY; ++j) {
            const int e = tid + j * blockDim.x;
            if (e < R * H) {
                const int r = e / H, h = e % H;
                const float du = sa[r * h4 + h] * gelu_slope(u_early[j]);
                sa[r * h4 + h] = du;
                Ui[e] = du;
            }
        }
        for (int e = tid + LN_U_EARLY * blockDim.x; e < R * H; e += blockDim.x) {
            const int r = e / H, h = e % H;
            const float du = sa[r * h4 + h] * gelu_slope(Ui[e]);
            sa[r * h4 + h] = du;
            Ui[e] = du;
        }
        __syncthreads();
        rows_matmul(sa, h4, R, W1, H, d, true, 0, sv, d4, part);  // ∂x_main = ∂u W1ᵀ
        float ss = 0.f, mm = 0.f, sm = 0.f;
        for (int e = tid; e < R * d; e += blockDim.x) {
            const int k = (e / d) * d4 + e % d;
            const float s = sd[k], m = sv[k];
            ss += s * s;
            mm += m * m;
            sm += s * m;
            sg[k] = s + m;  // identity path + main path
        }
        float sums[3] = {ss, mm, sm};
        block_sums(sums, part);  // part (256 floats) is free between products
        if (tid == 0) {
            float* path = row_stats + path_slot + 3 * i;
            atomicAdd(path + 0, sums[0]);
            atomicAdd(path + 1, sums[1]);
            atomicAdd(path + 2, sums[2]);
        }
    }
    for (int e = tid; e < R * d; e += blockDim.x) DH0[(size_t)row0 * d + e] = sg[(e / d) * d4 + e % d];
}
