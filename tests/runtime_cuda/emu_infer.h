// emu_infer.h — the CUDA intrinsics the inference kernels (kernels/infer_*.cu) use beyond what
// tests/cuda/emulator/emu.h defines, for the CPU emulator. Included right after emu.h.
#pragma once
#include <climits>

struct int4 {
    int x, y, z, w;
};
inline int4 make_int4(int x, int y, int z, int w) { return int4{x, y, z, w}; }

// Σ of the four signed-byte products, added to c (CUDA's __dp4a on two ints).
inline int __dp4a(int a, int b, int c) {
    for (int i = 0; i < 4; ++i) c += (int)(signed char)(a >> (8 * i)) * (int)(signed char)(b >> (8 * i));
    return c;
}

// x86-64 float division is IEEE round-to-nearest (SSE), as __fdiv_rn.
inline float __fdiv_rn(float a, float b) { return a / b; }
inline float __frcp_rn(float b) { return 1.f / b; }
inline float __fmaf_rn(float a, float b, float c) { return std::fmaf(a, b, c); }

// Round half to even (the default rounding mode), saturating as the GPU does; NaN → 0.
inline int __float2int_rn(float x) {
    if (x != x) return 0;
    if (x >= 2147483648.f) return INT_MAX;
    if (x < -2147483648.f) return INT_MIN;
    return (int)std::nearbyint(x);
}
