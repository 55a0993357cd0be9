// residual.cu — the residual join and the sum of a tensor's gradient parts (twins: the "residual"
// step of litenet.forward, and litenet.train.network.backward's sum of the parts and path_sums).
//
//   residual_forward_reference:  y = x + branch                     (the identity path joins the branch)
//   gradient_sum_reference:      ∂x = ∂a + ∂b                       (a tensor read by two ops: its gradient
//                                                                    is the sum of what each sends back)
//   path_sums_reference:         stats[slot + 0..2] = ‖∂s‖², ‖∂m‖², ⟨∂s, ∂m⟩ over the batch, where a
//                                residual's input meets: ∂s from the identity path, ∂m from the branch
//                                (the training monitor's path shares); s = ctr[0], the step's row.
//
// The residual's backward needs no kernel: ∂y reaches both summands unchanged. One thread per
// element (per sum for path_sums, which are 3 values). Launch: 256 threads, any grid. A path sum adds the
// whole batch's terms in one thread (about a million at litenet-mixer's size), so it adds in double: in
// float32 each late term is rounded against a large running sum, and the sum drifts ~0.2 % from NumPy's.

extern "C" __global__ void residual_forward_reference(const float* x, const float* branch, float* y, int n) {
    for (int i = blockIdx.x * blockDim.x + threadIdx.x; i < n; i += gridDim.x * blockDim.x) y[i] = x[i] + branch[i];
}

extern "C" __global__ void gradient_sum_reference(const float* a, const float* b, float* out, int n) {
    for (int i = blockIdx.x * blockDim.x + threadIdx.x; i < n; i += gridDim.x * blockDim.x) out[i] = a[i] + b[i];
}

extern "C" __global__ void path_sums_reference(const float* ds, const float* dm, int n, const int* ctr, float* stats,
                                               int stat_width, int slot) {
    const int which = blockIdx.x * blockDim.x + threadIdx.x;
    if (which >= 3) return;
    double acc = 0.0;
    for (int i = 0; i < n; ++i) acc += which == 0 ? ds[i] * ds[i] : which == 1 ? dm[i] * dm[i] : ds[i] * dm[i];
    stats[(size_t)ctr[0] * stat_width + slot + which] = (float)acc;
}
