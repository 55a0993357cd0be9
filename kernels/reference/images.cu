// images.cu — the reference tier's input step: a training batch gathered from the data set on the
// GPU and augmented, as uint8 images, with its labels (twins: litenet.train.augment.apply,
// augment.mixed_targets).
//
//   images_gather_reference:  out[b] = image batches[s·B + b] of the data set, cropped at
//       crops[s·B + b] = (oy, ox) from its copy reflect-padded by `pad` (pad 0: no crop), mirrored
//       left-right where flips[s·B + b], with the cut × cut square centred at cutouts[s·B + b]
//       filled with the grey `fill` (cut 0: none), then, with `mix`, the box of mixes[s·B + b] =
//       (partner, top, left, bottom, right) taken from image `partner` of the batch as those steps
//       left it (partner −1: none).   s = ctr[0], the step's row of the schedule.
//   labels_gather_reference:  labels[b] = the data set's label of image b; partners[b] and shares[b]
//       = its CutMix partner's label and the box's area / 32² (its own label and 0 without one).
//
// One thread per output byte (per image for the labels). Launch: 256 threads, any grid.

__device__ int reflect_index(int i) {  // mirrors about the edge pixel: −1 → 1, 32 → 30 (np.pad's "reflect")
    i = i < 0 ? -i : i;
    return i > 31 ? 62 - i : i;
}

// The pixel value (row y, column x, colour k) of the step's image `slot` after crop, flip and cutout.
__device__ int augmented_pixel(const unsigned char* dataset, const int* batches, const unsigned char* flips,
                               const signed char* crops, const signed char* cutouts, size_t slot, int y, int x,
                               int k, int pad, int cut, int fill) {
    if (cut > 0) {
        const int top = cutouts[slot * 2] - cut / 2, left = cutouts[slot * 2 + 1] - cut / 2;
        if (y >= top && y < top + cut && x >= left && x < left + cut) return fill;
    }
    if (flips[slot]) x = 31 - x;
    if (pad > 0) {
        y = reflect_index(y + crops[slot * 2] - pad);
        x = reflect_index(x + crops[slot * 2 + 1] - pad);
    }
    return dataset[(size_t)batches[slot] * 3072 + (y * 32 + x) * 3 + k];
}

extern "C" __global__ void images_gather_reference(const unsigned char* dataset, const int* batches,
                                                   const unsigned char* flips, const signed char* crops,
                                                   const signed char* cutouts, const int* mixes, const int* ctr,
                                                   unsigned char* out, int B, int pad, int cut, int mix, int fill) {
    const size_t first = (size_t)ctr[0] * B, total = (size_t)B * 3072;
    for (size_t e = blockIdx.x * (size_t)blockDim.x + threadIdx.x; e < total; e += (size_t)gridDim.x * blockDim.x) {
        const int b = (int)(e / 3072), pixel = (int)(e % 3072) / 3, k = (int)(e % 3);
        const int y = pixel / 32, x = pixel % 32;
        size_t slot = first + b;
        if (mix) {
            const int* m = mixes + slot * 5;
            if (m[0] >= 0 && y >= m[1] && y < m[3] && x >= m[2] && x < m[4]) slot = first + m[0];
        }
        out[e] = (unsigned char)augmented_pixel(dataset, batches, flips, crops, cutouts, slot, y, x, k, pad, cut, fill);
    }
}

extern "C" __global__ void labels_gather_reference(const unsigned char* dataset_labels, const int* batches,
                                                   const int* mixes, const int* ctr, int* labels, int* partners,
                                                   float* shares, int B, int mix) {
    const size_t first = (size_t)ctr[0] * B;
    for (int b = blockIdx.x * blockDim.x + threadIdx.x; b < B; b += gridDim.x * blockDim.x) {
        const int own = dataset_labels[batches[first + b]];
        labels[b] = own;
        partners[b] = own;
        shares[b] = 0.f;
        if (mix) {
            const int* m = mixes + (first + b) * 5;
            if (m[0] >= 0) {
                partners[b] = dataset_labels[batches[first + m[0]]];
                shares[b] = (float)((m[3] - m[1]) * (m[4] - m[2])) / 1024.f;
            }
        }
    }
}
