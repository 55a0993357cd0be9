// common.cuh — device helpers shared by every LiteNet kernel: reductions, GELU's math, 16-byte
// vector access, the uint8 image reader and the step counter. Included textually by the loader
// (NVRTC), by nvcc in the compile test and by g++ in the CPU emulator (tests/cuda/emulator), so it
// uses only the subset of CUDA that the emulator defines: __syncthreads, __shfl_xor_sync,
// atomicAdd, __threadfence, __ldcg, float4, static __shared__ arrays and LN_DYNAMIC_SMEM. Nothing
// here needs more than sm_61 (GTX 1060).
#pragma once

#ifndef LITENET_EMULATOR
// Dynamic shared memory; the emulator defines its own version of this macro.
#define LN_DYNAMIC_SMEM(T, name) extern __shared__ __align__(16) T name[]
// Where wgmma.cuh's shared addresses start: the GPU's shared window needs no naming; the emulator's
// version of this macro takes the staged tile's address.
#define LN_SHARED_WINDOW(p)
#endif

#define LN_THREADS 256  // every kernel is launched with 256-thread blocks
#define LN_FULL_MASK 0xffffffffu

#ifndef LN_CHECK_ALIGN
// The emulator defines this to abort on a misaligned vector access (a GPU faults on one, a CPU
// does not); on the GPU it costs nothing.
#define LN_CHECK_ALIGN(p, bytes)
#endif

// ---------------------------------------------------------------------------------------------
// 16-byte access. Callers check alignment (address % 16 == 0) before choosing these.

__device__ __forceinline__ bool aligned16(const void* p) { return (reinterpret_cast<size_t>(p) & 15) == 0; }

__device__ __forceinline__ float4 ld4(const float* p) {
    LN_CHECK_ALIGN(p, 16);
    return *reinterpret_cast<const float4*>(p);
}

// Bypasses L1: for data other blocks of the same launch wrote (split-K partials).
__device__ __forceinline__ float4 ld4cg(const float* p) {
    LN_CHECK_ALIGN(p, 16);
    return __ldcg(reinterpret_cast<const float4*>(p));
}

__device__ __forceinline__ void st4(float* p, float4 v) {
    LN_CHECK_ALIGN(p, 16);
    *reinterpret_cast<float4*>(p) = v;
}

__device__ __forceinline__ void add4(float4& a, const float4 b) {
    a.x += b.x;
    a.y += b.y;
    a.z += b.z;
    a.w += b.w;
}

__device__ __forceinline__ float ln_inf() { return __int_as_float(0x7f800000); }

// ---------------------------------------------------------------------------------------------
// Reductions. Every lane of a warp must call the warp versions; every thread of the block must
// call block_sum (it holds two barriers). `scratch` is 32 floats of shared memory.

__device__ __forceinline__ float warp_sum(float v) {
    for (int o = 16; o > 0; o >>= 1) v += __shfl_xor_sync(LN_FULL_MASK, v, o);
    return v;
}

__device__ __forceinline__ float warp_max(float v) {
    for (int o = 16; o > 0; o >>= 1) v = fmaxf(v, __shfl_xor_sync(LN_FULL_MASK, v, o));
    return v;
}

__device__ __forceinline__ float block_sum(float v, float* scratch) {
    const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5, warps = (blockDim.x + 31) >> 5;
    v = warp_sum(v);
    __syncthreads();  // a previous call may still be reading scratch[0]
    if (lane == 0) scratch[warp] = v;
    __syncthreads();
    if (warp == 0) {
        float t = lane < warps ? scratch[lane] : 0.f;
        t = warp_sum(t);
        if (lane == 0) scratch[0] = t;
    }
    __syncthreads();
    return scratch[0];
}

// Block-wide sums of N values at once, every thread getting the totals: one pair of barriers for
// all N. Each warp folds the per-warp sums itself (the same order in every warp), so no third
// barrier is needed to broadcast. scratch: 32·N floats. Every thread of the block must call it.
template <int N>
__device__ __forceinline__ void block_sums(float (&v)[N], float* scratch) {
    const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5, warps = (blockDim.x + 31) >> 5;
    for (int i = 0; i < N; ++i) v[i] = warp_sum(v[i]);
    __syncthreads();  // a previous call may still be reading scratch
    if (lane == 0)
        for (int i = 0; i < N; ++i) scratch[i * 32 + warp] = v[i];
    __syncthreads();
    for (int i = 0; i < N; ++i) v[i] = warp_sum(lane < warps ? scratch[i * 32 + lane] : 0.f);
}

// ---------------------------------------------------------------------------------------------
// GELU, tanh form (litenet.ops.gelu_forward, litenet.ops.gelu_backward).

#define LN_GELU_C 0.7978845608028654f  // √(2/π)
#define LN_GELU_K 0.044715f

__device__ __forceinline__ float gelu_value(float u) {
    const float t = tanhf(LN_GELU_C * (u + LN_GELU_K * u * u * u));
    return 0.5f * u * (1.f + t);
}

// ∂a/∂u of the tanh form, exactly (not the erf GELU's derivative).
__device__ __forceinline__ float gelu_slope(float u) {
    const float t = tanhf(LN_GELU_C * (u + LN_GELU_K * u * u * u));
    const float dt_du = (1.f - t * t) * LN_GELU_C * (1.f + 3.f * LN_GELU_K * u * u);
    return 0.5f * (1.f + t) + 0.5f * u * dt_du;
}

// ---------------------------------------------------------------------------------------------
// The step counter. ctr[0] is the step's position in the uploaded schedule (batch indices,
// flips, learning rates) and in the statistics ring; the last kernel of a step advances it, so
// one captured CUDA graph replays for every step. ctr[1] counts finished blocks of that kernel.

__device__ __forceinline__ int step_pos(const int* ctr) { return ctr[0]; }

// Called by every block of the step's last kernel, after its work: the last block to finish
// advances the step. Every block read ctr[0] before arriving here, so the increment races nothing.
__device__ __forceinline__ void advance_step_when_last(int* ctr) {
    __shared__ int last;
    __syncthreads();
    if (threadIdx.x == 0) {
        __threadfence();
        last = atomicAdd(&ctr[1], 1) == (int)gridDim.x - 1;
        if (last) {
            ctr[1] = 0;
            ctr[0] = ctr[0] + 1;
        }
    }
    __syncthreads();
}

// The seed's clip rule from this step's per-tensor ‖g‖² (T floats): returns ‖g‖ and sets `scale` to
// clip_norm/‖g‖ when ‖g‖ > threshold, else 1. Every thread sums in the same order, so every block
// of a launch takes the same decision without talking to the others (and the host never waits).
__device__ __forceinline__ float clip_rule(const float* grad_sq, int T, float threshold, float clip_norm, float& scale) {
    float total = 0.f;
    for (int t = 0; t < T; ++t) total += grad_sq[t];
    const float norm = sqrtf(total);
    scale = norm > threshold ? clip_norm / norm : 1.f;
    return norm;
}

// The statistics row of a step (litenet/lowering/stats.py keeps the same numbers; tests/cuda/test_kernel_args.py holds them equal).
#define LN_STAT_LOSS 0
#define LN_STAT_NORM 1
#define LN_STAT_CLIPPED 2
#define LN_STAT_GRAD_SQ 3  // then T tensors' ‖g‖², then 3 path sums per block

// ---------------------------------------------------------------------------------------------
// The embedding's input rows s(x), read straight from the uint8 NHWC training set
// (litenet.ops.embed_inputs): x = pixel / 255 (an IEEE division, as NumPy's) minus `shift`; "channel-sum" has
// 1024 values per image ((R + G) + B of pixel i), "full" 3072 (pixel-major, colour-minor). A
// flipped image is read mirrored left-right: column c of a 32-wide row becomes 31 − c.
//
// The unit of work is a quad: 4 consecutive pixels p … p+3 (p a multiple of 4, so inside one
// row), read as three aligned 32-bit words (12 bytes). Mirrored, the quad's source is the quad
// starting at column 28 − c, read backwards. Needs each image 4-byte aligned (images is; 3072 is).

struct PixelQuads {
    const unsigned char* images;  // (N, 32, 32, 3)
    const int* index;             // (B,) rows of `images` in this batch
    const unsigned char* flip;    // (B,) 0/1 per image, or null
    int full;                     // 0: channel-sum, 1: full
    float shift;

    __device__ __forceinline__ int inputs() const { return full ? 3072 : 1024; }

    // s(b, ·) of pixels p … p+3 into out[0 … 3] (channel-sum) or out[0 … 11] (full).
    __device__ __forceinline__ void quad(int b, int p, float (&out)[12]) const {
        const unsigned char* img = images + (size_t)index[b] * 3072;
        const bool mirrored = flip != 0 && flip[b] != 0;
        const int src = mirrored ? ((p & ~31) | (28 - (p & 31))) : p;
        const unsigned int* words = reinterpret_cast<const unsigned int*>(img + src * 3);
        LN_CHECK_ALIGN(words, 4);
        const unsigned int w[3] = {words[0], words[1], words[2]};
#pragma unroll
        for (int e = 0; e < 4; ++e) {
            const int q = mirrored ? 3 - e : e;  // source pixel of output pixel e
            float v[3];
#pragma unroll
            for (int c = 0; c < 3; ++c) {
                const int byte = 3 * q + c;
                v[c] = (float)((w[byte >> 2] >> (8 * (byte & 3))) & 0xffu) / 255.f - shift;
            }
            if (full) {
                out[3 * e] = v[0];
                out[3 * e + 1] = v[1];
                out[3 * e + 2] = v[2];
            } else {
                out[e] = (v[0] + v[1]) + v[2];
            }
        }
    }

    // Writes s(b, ·) of quad p into a row of inputs() floats (16-byte aligned).
    __device__ __forceinline__ void quad_to(int b, int p, float* row) const {
        float v[12];
        quad(b, p, v);
        store_quad(p, v, row);
    }

    // Stores what quad(·, p, v) computed into a row of inputs() floats (16-byte aligned).
    __device__ __forceinline__ void store_quad(int p, const float (&v)[12], float* row) const {
        if (full) {
            st4(row + 3 * p, make_float4(v[0], v[1], v[2], v[3]));
            st4(row + 3 * p + 4, make_float4(v[4], v[5], v[6], v[7]));
            st4(row + 3 * p + 8, make_float4(v[8], v[9], v[10], v[11]));
        } else {
            st4(row + p, make_float4(v[0], v[1], v[2], v[3]));
        }
    }
};
