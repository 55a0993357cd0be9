// rowops.cuh — the per-image pieces that both the one-op kernels (residual_layernorm.cu, loss.cu)
// and the fused small-batch kernel (fused_rows.cu) run, written once so the two cannot drift:
// LayerNorm of one row by one warp, forward and backward, and the loss of one row by one thread.
#pragma once

// A row's elements V at a time (V = 4: one 16-byte access; V = 1: one float), as a float4 whose
// first V components hold them: a warp reads each row in whole 128- or 512-byte lines. The row
// kernels take V = 4 when d is a multiple of 4 and every row they touch starts 16-byte aligned
// (row_vec4): one float at a time, a warp's reads of the Mixer's 128-wide rows leave a LayerNorm
// launch far from the memory bandwidth (docs/decisions.md, "Mixer fusions and row kernels").
template <int V>
__device__ __forceinline__ float4 loadv(const float* p) {
    return V == 4 ? ld4(p) : make_float4(p[0], 0.f, 0.f, 0.f);
}
template <int V>
__device__ __forceinline__ void storev(float* p, float4 v) {
    if (V == 4) st4(p, v);
    else p[0] = v.x;
}
template <int V>
__device__ __forceinline__ float sumv(float4 v) {  // the V held components, in index order
    return V == 4 ? ((v.x + v.y) + v.z) + v.w : v.x;
}

// Whether rows of d floats at these bases (nullptr: unused) can be read 16 bytes at a time.
__device__ __forceinline__ bool row_vec4(int d, const void* a, const void* b, const void* c, const void* e,
                                         const void* f = nullptr, const void* g = nullptr) {
    auto ok = [](const void* p) { return p == nullptr || aligned16(p); };
    return (d & 3) == 0 && ok(a) && ok(b) && ok(c) && ok(e) && ok(f) && ok(g);
}

template <bool RESIDUAL, int V>
__device__ float layernorm_row_forward_v(const float* x, const float* v, const float* gamma, const float* beta,
                                         float eps, int d, float* nrm, float* y) {
    const int lane = threadIdx.x & 31;
    auto s = [&](int j) {
        float4 a = loadv<V>(x + j);
        if (RESIDUAL) add4(a, loadv<V>(v + j));
        return a;
    };
    float sum = 0.f;
    for (int j = V * lane; j < d; j += 32 * V) sum += sumv<V>(s(j));
    const float mean = warp_sum(sum) / (float)d;
    float sq = 0.f;
    for (int j = V * lane; j < d; j += 32 * V) {
        const float4 a = s(j);
        const float4 c = make_float4(a.x - mean, a.y - mean, a.z - mean, a.w - mean);
        sq += sumv<V>(make_float4(c.x * c.x, c.y * c.y, c.z * c.z, c.w * c.w));
    }
    const float rstd = 1.f / sqrtf(warp_sum(sq) / (float)d + eps);
    for (int j = V * lane; j < d; j += 32 * V) {
        const float4 a = s(j), g = loadv<V>(gamma + j), b = loadv<V>(beta + j);
        const float4 n = make_float4((a.x - mean) * rstd, (a.y - mean) * rstd, (a.z - mean) * rstd, (a.w - mean) * rstd);
        storev<V>(nrm + j, n);
        storev<V>(y + j, make_float4(g.x * n.x + b.x, g.y * n.y + b.y, g.z * n.z + b.z, g.w * n.w + b.w));
    }
    return rstd;
}

// One warp: s = x + v; n = (s − μ)·rstd; y = γ n + β over the d features
// (litenet.ops.residual_layernorm_forward; RESIDUAL false: s = x, litenet.ops.layernorm_forward, v
// unused). Writes n
// and y (y may alias x: each lane reads x[j] before it writes y[j]); returns rstd = 1/√(σ² + eps).
// σ² is the biased variance, as LayerNorm defines it.
template <bool RESIDUAL = true>
__device__ float layernorm_row_forward(const float* x, const float* v, const float* gamma, const float* beta,
                                       float eps, int d, float* nrm, float* y) {
    if (row_vec4(d, x, RESIDUAL ? v : nullptr, nrm, y, gamma, beta))
        return layernorm_row_forward_v<RESIDUAL, 4>(x, v, gamma, beta, eps, d, nrm, y);
    return layernorm_row_forward_v<RESIDUAL, 1>(x, v, gamma, beta, eps, d, nrm, y);
}

// STORE(j, v): v holds ∂s[j … j+V−1] (its first V components).
template <int V, class Store>
__device__ void layernorm_row_backward_v(const float* dy, const float* nrm, float rstd, const float* gamma, int d,
                                         const Store& store) {
    const int lane = threadIdx.x & 31;
    float m1 = 0.f, m2 = 0.f;
    for (int j = V * lane; j < d; j += 32 * V) {
        const float4 g = loadv<V>(dy + j), w = loadv<V>(gamma + j), n = loadv<V>(nrm + j);
        const float4 dn = make_float4(g.x * w.x, g.y * w.y, g.z * w.z, g.w * w.w);
        m1 += sumv<V>(dn);
        m2 += sumv<V>(make_float4(dn.x * n.x, dn.y * n.y, dn.z * n.z, dn.w * n.w));
    }
    m1 = warp_sum(m1) / (float)d;
    m2 = warp_sum(m2) / (float)d;
    for (int j = V * lane; j < d; j += 32 * V) {
        const float4 g = loadv<V>(dy + j), w = loadv<V>(gamma + j), n = loadv<V>(nrm + j);
        store(j, make_float4(rstd * ((g.x * w.x - m1) - n.x * m2), rstd * ((g.y * w.y - m1) - n.y * m2),
                             rstd * ((g.z * w.z - m1) - n.z * m2), rstd * ((g.w * w.w - m1) - n.w * m2)));
    }
}

// One warp: ∂n = ∂y γ;  ∂s = rstd (∂n − mean(∂n) − n · mean(∂n n))
// (litenet.ops.residual_layernorm_backward). ds may alias dy (lane-owned elements, read before
// written).
__device__ void layernorm_row_backward(const float* dy, const float* nrm, float rstd, const float* gamma, int d,
                                       float* ds) {
    if (row_vec4(d, dy, nrm, gamma, ds))
        layernorm_row_backward_v<4>(dy, nrm, rstd, gamma, d, [&](int j, float4 v) { storev<4>(ds + j, v); });
    else
        layernorm_row_backward_v<1>(dy, nrm, rstd, gamma, d, [&](int j, float4 v) { storev<1>(ds + j, v); });
}

// A residual join of V elements (fused_twins.residual_join (tests/cuda)): dx = s + m, the identity path's gradient s
// and the branch's m, with ‖s‖², ‖m‖², ⟨s, m⟩ added to sums[0 … 2].
template <int V>
__device__ __forceinline__ void join_v(float4 s, float4 m, float* dx, float (&sums)[3]) {
    sums[0] += sumv<V>(make_float4(s.x * s.x, s.y * s.y, s.z * s.z, s.w * s.w));
    sums[1] += sumv<V>(make_float4(m.x * m.x, m.y * m.y, m.z * m.z, m.w * m.w));
    sums[2] += sumv<V>(make_float4(s.x * m.x, s.y * m.y, s.z * m.z, s.w * m.w));
    storev<V>(dx, make_float4(s.x + m.x, s.y + m.y, s.z + m.z, s.w + m.w));
}

// One warp: the row's ∂s (as layernorm_row_backward) joined with the identity path's gradient:
// ∂x = skip + ∂s, ∂s never stored; adds the lane's share of the join's sums ‖skip‖², ‖∂s‖²,
// ⟨skip, ∂s⟩ to sums[0 … 2]. dx may alias skip.
template <int V>
__device__ void layernorm_row_backward_join(const float* dy, const float* nrm, float rstd, const float* gamma, int d,
                                            const float* skip, float* dx, float (&sums)[3]) {
    layernorm_row_backward_v<V>(dy, nrm, rstd, gamma, d,
                                [&](int j, float4 g) { join_v<V>(loadv<V>(skip + j), g, dx + j, sums); });
}

// One thread, one row of logits: the margin loss max(0, m − z_y + z_r) with r the first arg-max
// among j ≠ y (litenet.ops.rival_class). When dz is given, writes the subgradient −1/B at y and
// +1/B at r where the hinge is active (dz may alias z: every read happens before the writes).
__device__ float margin_row(const float* z, int C, int y, float margin, int batch, float* dz) {
    int rival = -1;
    float best = 0.f;
    for (int j = 0; j < C; ++j)
        if (j != y && (rival < 0 || z[j] > best)) {  // strict '>' keeps the first index on ties
            best = z[j];
            rival = j;
        }
    if (rival < 0) rival = y;  // one class: nothing to push down
    const float hinge = (margin - z[y]) + z[rival];
    const bool active = hinge > 0.f;
    if (dz) {
        const float w = active ? 1.f / (float)batch : 0.f;
        for (int j = 0; j < C; ++j) dz[j] = 0.f;
        dz[y] -= w;
        dz[rival] += w;
    }
    return active ? hinge : 0.f;
}

// One thread, one row: cross-entropy logsumexp(z) − z_y; ∂z = (softmax(z) − onehot(y)) / B.
__device__ float cross_entropy_row(const float* z, int C, int y, int batch, float* dz) {
    float zmax = z[0];
    for (int j = 1; j < C; ++j) zmax = fmaxf(zmax, z[j]);
    float total = 0.f;
    for (int j = 0; j < C; ++j) total += expf(z[j] - zmax);
    const float loss = (logf(total) + zmax) - z[y];
    if (dz)
        for (int j = 0; j < C; ++j) dz[j] = (expf(z[j] - zmax) / total - (j == y ? 1.f : 0.f)) / (float)batch;
    return loss;
}

// One thread, one row: cross-entropy against the smoothed target q = (1 − ε) t + ε / C with
// t = (1 − s) onehot(y) + s onehot(y2) (CutMix's mixed target; s = 0: onehot(y)),
// ℓ = (1 − ε)[(1 − s)(logsumexp(z) − z_y) + s (logsumexp(z) − z_y2)] + ε (logsumexp(z) − mean(z));
// ∂z = (softmax(z) − q) / B (litenet.ops.cross_entropy_forward / litenet.ops.cross_entropy_backward
// with smoothing ε and mix (y2, s)).
__device__ float cross_entropy_smoothed_row(const float* z, int C, int y, int y2, float s, float eps, int batch,
                                            float* dz) {
    float zmax = z[0], zsum = 0.f;
    for (int j = 1; j < C; ++j) zmax = fmaxf(zmax, z[j]);
    float total = 0.f;
    for (int j = 0; j < C; ++j) {
        total += expf(z[j] - zmax);
        zsum += z[j];
    }
    const float lse = logf(total) + zmax;
    const float own = (1.f - s) * (lse - z[y]) + s * (lse - z[y2]);
    const float loss = (1.f - eps) * own + eps * (lse - zsum / (float)C);
    if (dz)
        for (int j = 0; j < C; ++j) {
            const float target = (j == y ? 1.f - s : 0.f) + (j == y2 ? s : 0.f);
            dz[j] = (expf(z[j] - zmax) / total - (eps / (float)C + (1.f - eps) * target)) / (float)batch;
        }
    return loss;
}
