// infer_words.cuh — the inference kernels' data types and the ends of every product, written once
// over a "word" type (infer_core.cuh says why): the tile and row-group sizes, the int8 rounding
// helpers (pixel_value, quantize_rn, gelu_rn: one IEEE-rounded operation each), Fp32 and Int8
// words, the input readers (rows in memory, or embedding rows straight from uint8 images) and the
// epilogues (bias, GELU, residual, the next layer's quantizer).
#pragma once
#include "common.cuh"

#define IR_ROWS 8    // rows a rowdot pass carries in registers (the small-batch kernel's row group)
#define IT_TILE 64   // tile_gemm: 64 rows × 64 outputs per block, 4 × 4 per thread
#define IT_BK 16     // tile_gemm: words per k step (16 floats, or 64 int8)

__device__ __forceinline__ float pixel_value(int p, float shift) {  // x = p/255 − shift, two roundings
    return __fsub_rn(__fdiv_rn((float)p, 255.f), shift);
}

__device__ __forceinline__ int quantize_rn(float x, float scale) {  // clamp(rne(x / s), −128, 127)
    return min(max(__float2int_rn(__fdiv_rn(x, scale)), -128), 127);
}

// a / b rounded once, the same bits as __fdiv_rn(a, b), given y = __frcp_rn(b) (1/b rounded once): the rounded
// product and one correction from its exact remainder (Markstein's theorem; for normal a and b, as the quotients
// here are). Where many values share a divisor, its reciprocal is taken once and each division is three
// full-rate operations instead of __fdiv_rn's reciprocal, refinement and range check.
__device__ __forceinline__ float div_rn(float a, float b, float y) {
    const float q = __fmul_rn(a, y);
    return __fmaf_rn(__fmaf_rn(-b, q, a), y, q);
}

__device__ __forceinline__ int quantize_by(float x, float scale, float inv_scale) {  // quantize_rn, 1/s given
    return min(max(__float2int_rn(div_rn(x, scale, inv_scale)), -128), 127);
}

__device__ __forceinline__ int pack4(int q0, int q1, int q2, int q3) {
    return (q0 & 255) | ((q1 & 255) << 8) | ((q2 & 255) << 16) | ((q3 & 255) << 24);
}

// ½u(1 + tanh(c(u + k·u³))) with each product and sum rounded once, as litenet.ops.gelu_forward
// computes it in float32 (the int8 plan's GELU).
__device__ __forceinline__ float gelu_rn(float u) {
    const float u3 = __fmul_rn(__fmul_rn(u, u), u);
    const float t = tanhf(__fmul_rn(LN_GELU_C, __fadd_rn(u, __fmul_rn(LN_GELU_K, u3))));
    return __fmul_rn(__fmul_rn(0.5f, u), __fadd_rn(1.f, t));
}

__device__ __forceinline__ int warp_isum(int v) {
    for (int o = 16; o > 0; o >>= 1) v += __shfl_xor_sync(LN_FULL_MASK, v, o);
    return v;
}

struct Fp32 {
    typedef float Word;
    typedef float Acc;
    static __device__ __forceinline__ float dot(float acc, float a, float b) { return a * b + acc; }
    static __device__ __forceinline__ float reduce(float v) { return warp_sum(v); }
};

struct Int8 {
    typedef int Word;
    typedef int Acc;
    static __device__ __forceinline__ int dot(int acc, int a, int b) { return __dp4a(a, b, acc); }
    static __device__ __forceinline__ int reduce(int v) { return warp_isum(v); }
};

__device__ __forceinline__ void load4(const float* p, float v[4]) {
    const float4 t = *reinterpret_cast<const float4*>(p);
    v[0] = t.x, v[1] = t.y, v[2] = t.z, v[3] = t.w;
}

__device__ __forceinline__ void load4(const int* p, int v[4]) {
    const int4 t = *reinterpret_cast<const int4*>(p);
    v[0] = t.x, v[1] = t.y, v[2] = t.z, v[3] = t.w;
}

__device__ __forceinline__ unsigned int byte_of(const unsigned int* w, int i) { return (w[i >> 2] >> (8 * (i & 3))) & 255u; }

// ---------------------------------------------------------------------------------------------
// Input readers: vec(row, v, out) gives words 4v … 4v+3 of a row.

template <class Word>
struct Rows {  // rows in shared memory, or in global memory written before this launch
    const Word* x;
    int Kw;  // words per row
    __device__ __forceinline__ void vec(int r, int v, Word out[4]) const { load4(x + (size_t)r * Kw + 4 * v, out); }
};

// The embedding's rows straight from uint8 NHWC images (docs/int8-plan.md "Embedding rows"):
// full: r[3i + k] = x[i, k] (the image's bytes in order); channel-sum: r[i] = (x[i,0] + x[i,1]) + x[i,2];
// with x = lut[p] = p/255 − shift. The Int8 version quantizes each r with the embedding's scale
// (full: through qlut, the same quantization tabulated per byte value).
struct PixelRowsF32 {
    const unsigned char* px;
    int full;
    const float* lut;
    __device__ __forceinline__ void vec(int r, int v, float out[4]) const {
        const unsigned char* img = px + (size_t)r * 3072;
        if (full) {
            const unsigned int w = *reinterpret_cast<const unsigned int*>(img + 4 * v);
#pragma unroll
            for (int i = 0; i < 4; ++i) out[i] = lut[(w >> (8 * i)) & 255u];
            return;
        }
        const unsigned int* w = reinterpret_cast<const unsigned int*>(img + 12 * v);
        unsigned int b[3] = {w[0], w[1], w[2]};
#pragma unroll
        for (int i = 0; i < 4; ++i)
            out[i] = __fadd_rn(__fadd_rn(lut[byte_of(b, 3 * i)], lut[byte_of(b, 3 * i + 1)]), lut[byte_of(b, 3 * i + 2)]);
    }
};

struct PixelRowsI8 {
    const unsigned char* px;
    int full;
    const float* lut;
    const int* qlut;
    float scale;
    __device__ __forceinline__ void vec(int r, int v, int out[4]) const {
        const unsigned char* img = px + (size_t)r * 3072;
        if (full) {
            const unsigned int* w = reinterpret_cast<const unsigned int*>(img + 16 * v);
#pragma unroll
            for (int i = 0; i < 4; ++i) {
                const unsigned int x = w[i];
                out[i] = pack4(qlut[x & 255u], qlut[(x >> 8) & 255u], qlut[(x >> 16) & 255u], qlut[x >> 24]);
            }
            return;
        }
        const unsigned int* w = reinterpret_cast<const unsigned int*>(img + 48 * v);
#pragma unroll
        for (int i = 0; i < 4; ++i) {  // pixels 4i … 4i+3 of this vector: bytes 12i … 12i+11
            unsigned int b[3] = {w[3 * i], w[3 * i + 1], w[3 * i + 2]};
            int q[4];
#pragma unroll
            for (int j = 0; j < 4; ++j) {
                const float sum = __fadd_rn(__fadd_rn(lut[byte_of(b, 3 * j)], lut[byte_of(b, 3 * j + 1)]),
                                            lut[byte_of(b, 3 * j + 2)]);
                q[j] = quantize_rn(sum, scale);
            }
            out[i] = pack4(q[0], q[1], q[2], q[3]);
        }
    }
};

// ---------------------------------------------------------------------------------------------
// Epilogues: out[b, n] from the dot product of row b with output channel n.

struct EpiF32 {  // y = acc (+ bias[n]), GELU, then s = res[b, n] + y
    const float* bias;
    int gelu;
    const float* res;
    float* out;
    int stride;  // of res and out
    __device__ __forceinline__ void operator()(int b, int n, float acc) const {
        float y = bias ? __fadd_rn(acc, bias[n]) : acc;
        if (gelu) y = gelu_rn(y);
        if (res) y = __fadd_rn(__ldcg(res + (size_t)b * stride + n), y);
        out[(size_t)b * stride + n] = y;
    }
};

struct EpiI8 {  // y = float(acc)·m[n] (+ bias[n]), GELU, s = res + y; writes y and/or q = quantize(y, q_scale)
    const float* mult;
    const float* bias;
    int gelu;
    const float* res;
    float* out;
    unsigned char* q;
    int stride;  // of res, out (floats) and q (bytes)
    float q_scale;
    __device__ __forceinline__ void operator()(int b, int n, int acc) const {
        float y = __fmul_rn((float)acc, mult[n]);
        if (bias) y = __fadd_rn(y, bias[n]);
        if (gelu) y = gelu_rn(y);
        if (res) y = __fadd_rn(__ldcg(res + (size_t)b * stride + n), y);
        if (out) out[(size_t)b * stride + n] = y;
        if (q) q[(size_t)b * stride + n] = (unsigned char)quantize_rn(y, q_scale);
    }
};
