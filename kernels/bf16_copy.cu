// bf16_copy.cu — the BF16 copy of an fp32 buffer (twin: reference.bf16_copy), for the wide BF16
// products (gemm_wide.cuh), which read their operands as BF16.
//
//   bf16_copy:  y[i] = x[i] rounded to BF16 (to nearest, ties to even), its 16 bits
//
// Why a copy: the wide products read each operand once per tile row or column — at litenet-base's
// width 2048 and batch 1024 a product reads its fp32 operands 16–32 times over from L2, at about
// 5 TB/s on an H200, and that set their pace, not the tensor cores (bench/results/gpu-mixer-2026-12-04.md).
// Rounding once into a BF16 copy halves those bytes for the cost of one pass over the buffer; the
// products rounded the same values to the same BF16 as they staged them before, so nothing changes
// in what they compute. litenet/train/cuda/plans.py says which buffers get copies and when.
// Launch: 256 threads, any grid (grid-stride); four values a thread at a time where x and y allow.
#include "common.cuh"
#include "mma.cuh"

extern "C" __global__ void bf16_copy(const float* x, unsigned short* y, int n) {
    const int stride = gridDim.x * blockDim.x, first = blockIdx.x * blockDim.x + threadIdx.x;
    const int n4 = aligned16(x) && reinterpret_cast<size_t>(y) % 8 == 0 ? n / 4 : 0;
    for (int i = first; i < n4; i += stride) {
        const float4 v = ld4(x + 4 * i);
        uint2 w;
        w.x = to_bf16x2(v.x, v.y);
        w.y = to_bf16x2(v.z, v.w);
        *reinterpret_cast<uint2*>(y + 4 * i) = w;
    }
    for (int i = 4 * n4 + first; i < n; i += stride) y[i] = (unsigned short)(to_bf16x2(x[i], 0.f) & 0xffffu);
}
