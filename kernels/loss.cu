// loss.cu — the classifier's losses on the logits z (B, C), mean over the batch
// (twins: litenet.ops.margin_loss_forward, litenet.ops.margin_loss_backward,
// litenet.ops.cross_entropy_forward, litenet.ops.cross_entropy_backward).
//
//   margin_loss_forward:    ℓ_b = max(0, m − z[b, y_b] + z[b, r_b]),  r_b = first argmax_{j≠y_b} z[b, j]
//   margin_loss_backward:   ∂z[b, y_b] = −1/B, ∂z[b, r_b] = +1/B where the hinge is active, else 0
//   cross_entropy_forward:  ℓ_b = logsumexp(z_b) − z[b, y_b]
//   cross_entropy_backward: ∂z = (softmax(z) − onehot(y)) / B
//   cross_entropy_smoothed: the forward and backward in one launch, against the smoothed target
//                           q = (1 − ε) onehot(y) + ε/C (twins: litenet.ops.cross_entropy_forward,
//                           litenet.ops.cross_entropy_backward with smoothing ε; the Mixer's loss).
//                           dz may alias z. With `mix`, image b's one-hot target is shared with its
//                           CutMix partner's label by the box's area (mixes[(ctr[0]·B + b)·5 + …] =
//                           partner, top, left, bottom, right; partner −1: none; twin:
//                           litenet.train.augment.mixed_targets).
//
// The labels are those of the batch: labels[batches[ctr[0]·B + b]] (uint8 per image). The
// forwards write ℓ (B,) and add mean(ℓ) to the step's statistics row (stats + ctr[0]·stat_width,
// slot 0). Launch: 256 threads, one thread per image, grid = ⌈B/256⌉.
// Limits: C ≥ 2 for the margin loss. The per-row math is shared with fused_rows.cu (rowops.cuh).
#include "common.cuh"
#include "rowops.cuh"

__device__ __forceinline__ int batch_label(const unsigned char* labels, const int* batches, const int* ctr, int B, int b) {
    return labels[batches[(size_t)step_pos(ctr) * B + b]];
}

// Adds the block's share of mean(ℓ) to the statistics row.
__device__ __forceinline__ void add_mean_loss(float loss, int B, const int* ctr, float* stats, int stat_width) {
    __shared__ float scratch[32];
    const float total = block_sum(loss, scratch);
    if (threadIdx.x == 0) atomicAdd(stats + (size_t)step_pos(ctr) * stat_width, total / (float)B);
}

extern "C" __global__ void margin_loss_forward(const float* z, const unsigned char* labels, const int* batches,
                                               const int* ctr, float* per_sample, float* stats, int stat_width, int B,
                                               int C, float margin) {
    const int b = blockIdx.x * blockDim.x + threadIdx.x;
    float loss = 0.f;
    if (b < B) {
        loss = margin_row(z + (size_t)b * C, C, batch_label(labels, batches, ctr, B, b), margin, B, 0);
        per_sample[b] = loss;
    }
    add_mean_loss(loss, B, ctr, stats, stat_width);
}

extern "C" __global__ void margin_loss_backward(const float* z, const unsigned char* labels, const int* batches,
                                                const int* ctr, float* dz, int B, int C, float margin) {
    const int b = blockIdx.x * blockDim.x + threadIdx.x;
    if (b < B) margin_row(z + (size_t)b * C, C, batch_label(labels, batches, ctr, B, b), margin, B, dz + (size_t)b * C);
}

extern "C" __global__ void cross_entropy_forward(const float* z, const unsigned char* labels, const int* batches,
                                                 const int* ctr, float* per_sample, float* stats, int stat_width,
                                                 int B, int C) {
    const int b = blockIdx.x * blockDim.x + threadIdx.x;
    float loss = 0.f;
    if (b < B) {
        loss = cross_entropy_row(z + (size_t)b * C, C, batch_label(labels, batches, ctr, B, b), B, 0);
        per_sample[b] = loss;
    }
    add_mean_loss(loss, B, ctr, stats, stat_width);
}

extern "C" __global__ void cross_entropy_backward(const float* z, const unsigned char* labels, const int* batches,
                                                  const int* ctr, float* dz, int B, int C) {
    const int b = blockIdx.x * blockDim.x + threadIdx.x;
    if (b < B) cross_entropy_row(z + (size_t)b * C, C, batch_label(labels, batches, ctr, B, b), B, dz + (size_t)b * C);
}

extern "C" __global__ void cross_entropy_smoothed(const float* z, const unsigned char* labels, const int* batches,
                                                  const int* mixes, const int* ctr, float* dz, float* stats,
                                                  int stat_width, int B, int C, float eps, int mix) {
    const int b = blockIdx.x * blockDim.x + threadIdx.x;
    float loss = 0.f;
    if (b < B) {
        const int y = batch_label(labels, batches, ctr, B, b);
        int y2 = y;
        float share = 0.f;
        if (mix) {  // CutMix: the partner's label weighs the box's share of the image (exact in fp32)
            const int* m = mixes + ((size_t)step_pos(ctr) * B + b) * 5;
            if (m[0] >= 0) {
                y2 = batch_label(labels, batches, ctr, B, m[0]);
                share = (float)((m[3] - m[1]) * (m[4] - m[2])) / 1024.f;
            }
        }
        loss = cross_entropy_smoothed_row(z + (size_t)b * C, C, y, y2, share, eps, B, dz + (size_t)b * C);
    }
    add_mean_loss(loss, B, ctr, stats, stat_width);
}
