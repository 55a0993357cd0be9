// patches_infer.cu — the Mixer's input at inference: uint8 NHWC images cut into P×P patches,
// tokens-major (twin: litenet.ops.patchify; its int8 output: litenet.runtime.int8_plan.quantize of
// that, the embedding's quantized input). With G = 32/P patches a side, t = gy·G + gx:
//
//   x[t·B + b, (py·P + px)·3 + k] = (img[b, gy·P + py, gx·P + px, k] / 255 − shift) · scale
//   out (use_out): float rows of P²·3 values (the fp32 embedding's input)
//   q   (use_q):   int8 rows of q_stride bytes, q = clamp(rne(x / q_scale), −128, 127); the pad
//                  bytes past P²·3 are never written (the buffer is zeroed once: they stay 0)
//
// Each operation is rounded once in litenet.ops.patchify's order (x/255, − shift, · scale: the _rn
// intrinsics keep NVRTC from contracting them), so x and q are NumPy's bit for bit. Unlike
// patches.cu (training: batch indices, crops, flips, cutout) this reads the batch as it lies.
// Launch: 256 threads, grid-stride over T·B·P²·3 values (any grid). q_stride is a multiple of 4.
#include "infer_words.cuh"

extern "C" __global__ void patches_infer(const unsigned char* images, int B, int patch, float shift, float scale,
                                         float* out, int use_out, int* q, int use_q, int q_stride, float q_scale) {
    const int grid = 32 / patch, per_patch = patch * patch * 3, T = grid * grid;
    const size_t total = (size_t)T * B * per_patch;
    unsigned char* qb = reinterpret_cast<unsigned char*>(q);
    for (size_t e = blockIdx.x * (size_t)blockDim.x + threadIdx.x; e < total; e += (size_t)gridDim.x * blockDim.x) {
        const int inner = (int)(e % per_patch);
        const size_t row = e / per_patch;  // t·B + b
        const int b = (int)(row % B), t = (int)(row / B);
        const int k = inner % 3, px = (inner / 3) % patch, py = inner / (3 * patch);
        const int y = (t / grid) * patch + py, x = (t % grid) * patch + px;
        const float v = (float)images[(size_t)b * 3072 + (y * 32 + x) * 3 + k];
        const float value = __fmul_rn(__fsub_rn(__fdiv_rn(v, 255.f), shift), scale);
        if (use_out) out[e] = value;
        if (use_q) qb[row * q_stride + inner] = (unsigned char)quantize_rn(value, q_scale);
    }
}
