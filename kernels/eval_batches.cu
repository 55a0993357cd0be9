// eval_batches.cu — evaluation over a split kept on the GPU: the trainer's test and training-accuracy
// images go up once, and each replay of one captured graph (take, the forward pass, put, advance)
// scores the split's next batch, so a split costs one upload, ⌈n / B⌉ replays and one download rather
// than a host round trip per batch (twin: the batches of litenet.train.gpu_backend.GpuBackend.logits,
// each the forward of litenet.forward.logits; the wrapping: litenet.lowering.evaluation.over_split).
//
//   split_batch_take:  images[b] = split[s·B + b] where s·B + b < n, else zeros (the last batch's padding)
//   split_logits_put:  out[s·B + b] = logits[b] where s·B + b < n
//   with s = ctr[0], the batch now in the forward pass, and n = ctr[1], the split's image count (set with
//   the upload, so one graph serves every split that fits the buffers). step_advance_reference moves s on.
//
// One thread per output byte or value. Launch: 256 threads, any grid.

extern "C" __global__ void split_batch_take(const unsigned char* split, const int* ctr, unsigned char* images, int B) {
    const size_t first = (size_t)ctr[0] * B * 3072, end = (size_t)ctr[1] * 3072, total = (size_t)B * 3072;
    for (size_t e = blockIdx.x * (size_t)blockDim.x + threadIdx.x; e < total; e += (size_t)gridDim.x * blockDim.x)
        images[e] = first + e < end ? split[first + e] : (unsigned char)0;
}

extern "C" __global__ void split_logits_put(const float* logits, const int* ctr, float* out, int B, int C) {
    const size_t first = (size_t)ctr[0] * B, n = (size_t)ctr[1], total = (size_t)B * C;
    for (size_t e = blockIdx.x * (size_t)blockDim.x + threadIdx.x; e < total; e += (size_t)gridDim.x * blockDim.x)
        if (first + e / C < n) out[first * C + e] = logits[e];
}
