// bf16_copy.cuh — fp32 values rounded to BF16 (to nearest, ties to even; their 16 bits as unsigned
// short) into the copies the wide BF16 products read (plans.py BF16_COPIES): by bf16_copy.cu's kernel,
// and by the kernels that produce such an operand, as they write it (their `_with_copy` versions, the
// wide products' epilogues), which saves a pass over the buffer and a launch.
#pragma once

#include "common.cuh"
#include "mma.cuh"

__device__ __forceinline__ unsigned short bf16_bits(float x) { return (unsigned short)(to_bf16x2(x, 0.f) & 0xffffu); }

// q[0 … 3] = BF16(a, b, c, d) in one 8-byte store (q 8-byte aligned).
__device__ __forceinline__ void store4_bf16(unsigned short* q, float a, float b, float c, float d) {
    uint2 w;
    w.x = to_bf16x2(a, b);
    w.y = to_bf16x2(c, d);
    *reinterpret_cast<uint2*>(q) = w;
}

// y[i] = BF16(x[i]) for i = first, first + stride, … < n, in vectors of 4 (i = 4·(first + j·stride) …)
// where x and y allow: the same elements a thread of a grid-stride loop in vectors of 4 owns.
__device__ __forceinline__ void copy_bf16(const float* x, unsigned short* y, int n, int first, int stride) {
    const int n4 = aligned16(x) && reinterpret_cast<size_t>(y) % 8 == 0 ? n / 4 : 0;
    for (int i = first; i < n4; i += stride) {
        const float4 v = ld4(x + 4 * i);
        store4_bf16(y + 4 * i, v.x, v.y, v.z, v.w);
    }
    for (int i = 4 * n4 + first; i < n; i += stride) y[i] = bf16_bits(x[i]);
}

// store_row4 (splitk.cuh) into a BF16 copy: an epilogue's 4 values, 8 bytes where alignment allows.
__device__ __forceinline__ void store_row4_bf16(unsigned short* out, int ld, int m, int n, int N, const float (&v)[4]) {
    unsigned short* q = out + (size_t)m * ld + n;
    if (n + 3 < N && (ld & 3) == 0 && reinterpret_cast<size_t>(q) % 8 == 0) {
        store4_bf16(q, v[0], v[1], v[2], v[3]);
        return;
    }
    for (int j = 0; j < 4; ++j)
        if (n + j < N) q[j] = bf16_bits(v[j]);
}
