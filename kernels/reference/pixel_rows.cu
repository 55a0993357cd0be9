// pixel_rows.cu — the MLP's input rows from uint8 images (twins: litenet.ops.embed_inputs of
// litenet.ops.pixels_to_float, and litenet.ops.embed_inputs_backward).
//
//   pixel_rows_forward_reference:   full:        s[b, i·3 + k] = x[b, i, k]/255 − shift
//                                   channel sum: s[b, i] = Σ_k (x[b, i, k]/255 − shift)
//   pixel_rows_backward_reference:  ∂x[b, i, k] = ∂s[b, i·3 + k] (full) or ∂s[b, i] (channel sum)
//
// x is (B, 32, 32, 3) NHWC, i the pixel (row·32 + column), k the colour. One thread per output
// element. Launch: 256 threads, any grid.

extern "C" __global__ void pixel_rows_forward_reference(const unsigned char* images, float* rows, int B, int full,
                                                        float shift) {
    const int width = full ? 3072 : 1024;
    const size_t total = (size_t)B * width;
    for (size_t e = blockIdx.x * (size_t)blockDim.x + threadIdx.x; e < total; e += (size_t)gridDim.x * blockDim.x) {
        const size_t b = e / width;
        const int j = (int)(e % width);
        if (full) {
            rows[e] = (float)images[b * 3072 + j] / 255.f - shift;
        } else {
            const unsigned char* pixel = images + b * 3072 + j * 3;
            rows[e] = ((float)pixel[0] / 255.f - shift) + ((float)pixel[1] / 255.f - shift) +
                      ((float)pixel[2] / 255.f - shift);
        }
    }
}

extern "C" __global__ void pixel_rows_backward_reference(const float* drows, float* dimages, int B, int full) {
    const size_t total = (size_t)B * 3072;
    for (size_t e = blockIdx.x * (size_t)blockDim.x + threadIdx.x; e < total; e += (size_t)gridDim.x * blockDim.x)
        dimages[e] = full ? drows[e] : drows[e / 3];
}
