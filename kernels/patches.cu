// patches.cu — the Mixer's input: the step's images gathered from the uint8 training set on the
// GPU, augmented, cut into P×P patches, tokens-major (twins: litenet.ops.patchify of the images that
// litenet.train.augment.apply gives).
//
//   patches_gather:  out[t, b, (py·P + px)·3 + k] = (x[b, y, x', k] / 255 − shift)·scale, where image b of the
//                    step is images[batches[ctr[0]·B + b]] and (y, x') is pixel (py, px) of patch t in
//                    the crop, mirrored when flips[b] (a crop, then a flip, as torchvision's order):
//                      c = gx·P + px, or 31 − (gx·P + px) when flipped;
//                      y = reflect(gy·P + py + oy − pad),  x' = reflect(c + ox − pad);  reflect(i) mirrors about the edge pixel
//                    (−1 → 1, 32 → 30), as np.pad and PyTorch's "reflect" do. crops[(ctr[0]·B + b)·2 + {0,1}]
//                    = (oy, ox) in 0 … 2·pad; with pad = 0 the offsets are 0 (no crop).
//                    Cutout (cut > 0), after the crop and the flip: pixel (Y, X) of the augmented image
//                    (Y = gy·P + py, X = gx·P + px) reads the grey `fill` instead when
//                    cy − ⌊cut/2⌋ ≤ Y < cy − ⌊cut/2⌋ + cut and the same for X around cx, with
//                    (cy, cx) = cutouts[(ctr[0]·B + b)·2 + {0,1}] (twin: litenet.train.augment.cutout_square).
//                    CutMix (mix ≠ 0), last: with mixes[(ctr[0]·B + b)·5 + …] = (partner, top, left,
//                    bottom, right), partner ≥ 0, pixel (Y, X) in the box (top ≤ Y < bottom, left ≤ X <
//                    right) is pixel (Y, X) of image `partner` of the step, augmented by its own draws
//                    (twin: litenet.train.augment.mix_boxes).
//
// The data set stays on the GPU as uint8 and the augmentation is fused into this read: no padded or
// flipped copy is made. Launch: 256 threads, grid-stride over T·B·P²·3 outputs (any grid).
#include "common.cuh"

__device__ __forceinline__ int reflect32(int i) {
    i = i < 0 ? -i : i;
    return i > 31 ? 62 - i : i;
}

extern "C" __global__ void patches_gather(const unsigned char* images, const int* batches, const unsigned char* flips,
                                          const signed char* crops, const signed char* cutouts, const int* mixes,
                                          const int* ctr, float* out, int B, int patch, int pad, int cut, int mix,
                                          int fill, float shift, float scale) {
    const int grid = 32 / patch, per_patch = patch * patch * 3, T = grid * grid;
    const size_t total = (size_t)T * B * per_patch, base = (size_t)step_pos(ctr) * B;
    for (size_t e = blockIdx.x * (size_t)blockDim.x + threadIdx.x; e < total; e += (size_t)gridDim.x * blockDim.x) {
        const int inner = (int)(e % per_patch), b = (int)((e / per_patch) % B), t = (int)(e / ((size_t)per_patch * B));
        const int k = inner % 3, px = (inner / 3) % patch, py = inner / (3 * patch);
        int y = (t / grid) * patch + py, x = (t % grid) * patch + px;
        // The image whose augmented pixel (y, x) this is: b, or its CutMix partner inside the box
        // (which then brings its own crop, flip and cutout).
        size_t src = base + b;
        if (mix) {
            const int* m = mixes + (base + b) * 5;
            if (m[0] >= 0 && y >= m[1] && y < m[3] && x >= m[2] && x < m[4]) src = base + m[0];
        }
        bool cut_out = false;
        if (cut > 0) {  // in the augmented image's own coordinates, so before the crop and flip maps below
            const int top = cutouts[src * 2] - cut / 2, left = cutouts[src * 2 + 1] - cut / 2;
            cut_out = y >= top && y < top + cut && x >= left && x < left + cut;
        }
        if (flips[src]) x = 31 - x;  // the crop is mirrored: column x of it is column 31 − x of the unmirrored crop
        if (pad > 0) {
            y = reflect32(y + crops[src * 2] - pad);
            x = reflect32(x + crops[src * 2 + 1] - pad);
        }
        const int v = cut_out ? fill : images[(size_t)batches[src] * 3072 + (y * 32 + x) * 3 + k];
        out[e] = ((float)v / 255.f - shift) * scale;
    }
}
