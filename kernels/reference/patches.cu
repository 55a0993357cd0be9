// patches.cu — the Mixer's input: uint8 images cut into P×P patches, tokens-major (twins:
// litenet.ops.patchify of litenet.ops.pixels_to_float, and litenet.ops.patchify_backward).
//
//   patches_forward_reference:   p[t, b, (py·P + px)·3 + k] = (x[b, gy·P + py, gx·P + px, k]/255 − shift)·scale,
//                                t = gy·G + gx, G = 32/P patches a side
//   patches_backward_reference:  ∂x[b, y, x, k] = ∂p[t, b, (py·P + px)·3 + k] · scale  (each pixel is in one patch)
//
// One thread per output element. Launch: 256 threads, any grid.

__device__ size_t patch_index(int b, int y, int x, int k, int B, int patch) {
    const int grid = 32 / patch, t = (y / patch) * grid + x / patch;
    const int inner = ((y % patch) * patch + x % patch) * 3 + k;
    return ((size_t)t * B + b) * (patch * patch * 3) + inner;
}

extern "C" __global__ void patches_forward_reference(const unsigned char* images, float* out, int B, int patch,
                                                     float shift, float scale) {
    const size_t total = (size_t)B * 3072;
    for (size_t e = blockIdx.x * (size_t)blockDim.x + threadIdx.x; e < total; e += (size_t)gridDim.x * blockDim.x) {
        const int b = (int)(e / 3072), y = (int)(e % 3072) / 96, x = (int)(e % 96) / 3, k = (int)(e % 3);
        out[patch_index(b, y, x, k, B, patch)] = ((float)images[e] / 255.f - shift) * scale;
    }
}

extern "C" __global__ void patches_backward_reference(const float* dpatches, float* dimages, int B, int patch,
                                                      float scale) {
    const size_t total = (size_t)B * 3072;
    for (size_t e = blockIdx.x * (size_t)blockDim.x + threadIdx.x; e < total; e += (size_t)gridDim.x * blockDim.x) {
        const int b = (int)(e / 3072), y = (int)(e % 3072) / 96, x = (int)(e % 96) / 3, k = (int)(e % 3);
        dimages[e] = dpatches[patch_index(b, y, x, k, B, patch)] * scale;
    }
}
