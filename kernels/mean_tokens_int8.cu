// mean_tokens_int8.cu — the Mixer's pooling written straight as the int8 head's input (twin:
// litenet.runtime.int8_plan.quantize(litenet.ops.mean_tokens_forward(x), s_x)):
//
//   y[b, c] = (Σ_t x[t, b, c]) / T   summed in t order, as mean_tokens_forward (mean_tokens.cu) and
//                                     NumPy's mean over axis 0 do, so y is the twin's bit for bit
//   q[b·q_stride + c] = clamp(rne(y / q_scale), −128, 127)   int8 rows for infer_int8_tiles
//
// x is tokens-major (T, B·d); pad bytes (c ≥ d) are never written (zeroed once, they stay 0).
// Launch: 256 threads, grid-stride over B·d (any grid).
#include "infer_words.cuh"

extern "C" __global__ void mean_tokens_quantize(const float* x, int T, int B, int d, int* q, int q_stride,
                                                float q_scale) {
    const int N = B * d;
    unsigned char* qb = reinterpret_cast<unsigned char*>(q);
    for (int i = blockIdx.x * blockDim.x + threadIdx.x; i < N; i += gridDim.x * blockDim.x) {
        float s = 0.f;
        for (int t = 0; t < T; ++t) s = __fadd_rn(s, x[(size_t)t * N + i]);
        qb[(size_t)(i / d) * q_stride + i % d] = (unsigned char)quantize_rn(__fdiv_rn(s, (float)T), q_scale);
    }
}
