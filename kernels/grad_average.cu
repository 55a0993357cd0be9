// grad_average.cu — the mean of the ranks' gradients, from the sum an all-reduce leaves in the
// flat gradient buffer (twin: litenet.train.optim.grad_average). Data-parallel training only
// (docs/parallel.md): it runs after the NCCL all-reduce and before grad_norm_sq and the update.
//
//   grad_average:  g ← g · scale  (scale = 1/N for N ranks; ×1 leaves every bit as it is)
//                  and the step's ‖g_t‖² slots of the statistics row set to zero, so grad_norm_sq
//                  measures the averaged gradient (the fused plan has filled them with the
//                  rank's own ‖g_t‖², which the clip rule must not read).
//
// The product is rounded once (__fmul_rn), as NumPy's `grads *= float32(1/N)`, so it matches the
// twin bit for bit. No host synchronisation: the statistics row is found through the step
// counter, like every kernel of a step. The counter is not advanced here (the update does that).
// Launch: 256 threads, any grid (grid-stride).
#include "common.cuh"

extern "C" __global__ void grad_average(float* grads, int n, float scale, int T, const int* ctr, float* stats,
                                        int stat_width) {
    if (blockIdx.x == 0) {
        float* grad_sq = stats + (size_t)step_pos(ctr) * stat_width + LN_STAT_GRAD_SQ;
        for (int t = threadIdx.x; t < T; t += blockDim.x) grad_sq[t] = 0.f;
    }
    for (int i = blockIdx.x * blockDim.x + threadIdx.x; i < n; i += gridDim.x * blockDim.x)
        grads[i] = __fmul_rn(grads[i], scale);
}
