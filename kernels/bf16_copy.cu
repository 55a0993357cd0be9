// bf16_copy.cu — the BF16 copy of an fp32 buffer (twin: fused_twins.bf16_copy (tests/cuda)), for the
// wide BF16 products (gemm_wide.cuh), which read their operands as BF16; in training,
// litenet.train.check_kernels holds the products that read the copies to their fp32 reference calls.
//
//   bf16_copy:  y[i] = x[i] rounded to BF16 (to nearest, ties to even), its 16 bits
//
// Why a copy: the wide products read each operand once per tile row or column — at litenet-base's
// width 2048 and batch 1024 a product reads its fp32 operands 16–32 times over from L2, and those
// bytes, not the tensor cores, set their pace (docs/decisions.md, "BF16 copies").
// Rounding once into a BF16 copy halves those bytes for the cost of one pass over the buffer; a
// product that staged fp32 operands would round the same values to the same BF16, so the copy
// changes nothing in what it computes. litenet/lowering/fast/mlp_shape.py says which buffers get copies and when; where the
// kernel producing a buffer can write its copy as it goes (bf16_copy.cuh), it does, and this launch
// is left for the rest.
// Launch: 256 threads, any grid (grid-stride); four values a thread at a time where x and y allow.
#include "bf16_copy.cuh"

extern "C" __global__ void bf16_copy(const float* x, unsigned short* y, int n) {
    copy_bf16(x, y, n, blockIdx.x * blockDim.x + threadIdx.x, gridDim.x * blockDim.x);
}
