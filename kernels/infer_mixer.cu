// infer_mixer.cu — the Mixer's forward for a few images in ONE launch, float32 (infer_mixer_fp32_rows; twin:
// the NumPy forward, litenet.train.network.forward) and the int8 plan (infer_mixer_int8_rows; twin:
// litenet.runtime.int8_plan.run_plan, docs/int8-plan.md), over litenet.graph's Mixer op list:
//
//   x = patches(img) We + be                                    (tokens of P²·3 values, litenet.ops.patchify)
//   per block i:  x = x + token_fc2(GELU(token_fc1(LN(x))))     (products along the T patches, per channel)
//                 x = x + GELU(LN(x) W1 + b1) W2 + b2           (products along the d channels, per patch)
//   logits = mean_t(LN(x)) Wh + bh
//
// At batch 1 the launch-per-op forward is 53 small kernels, each too small to fill the GPU and most of
// them waiting on the one before; here the whole forward is 3·blocks + 2 phases separated by grid
// barriers, each phase cut into as many units as the grid has blocks:
//
//   embed                 unit = (image, patch): its P²·3 values, then its d outputs and their LayerNorm
//                         statistics (for block 0's token LayerNorm)
//   token  (block i)      unit = (image, CT channels): its channels of all T patches, normalised by the
//                         patches' statistics, then the token MLP — T → Th → T with GELU — entirely in shared
//                         memory, plus the residual. It reads stream X[i % 2] and writes X[(i+1) % 2]: the
//                         other units still read the first while it writes. Where they fit beside its
//                         channels (TW > 0) both products' weights are in shared memory too, requested by
//                         cp.async between the block's arrival at the barrier before and its wait there.
//   channel fc1 (block i) unit = (image, TG patches, HS hidden channels): the LayerNorm of its patches,
//                         then a = GELU(· W1 + b1) for its hidden channels into A (int8: quantized as fc2
//                         takes it, once, where each of the tile's fc2 units would quantize all of it)
//   channel fc2 (block i) unit = (image, TG patches, CS channels): x += A W2 + b2 in place (each element
//                         read and written by one thread); the unit that finishes its TG patches' rows (the
//                         last to arrive at their count) takes their statistics for the next LayerNorm of whole
//                         rows, which every unit of the next phase would otherwise take again
// At a few images each phase is a chain of latencies, not of arithmetic, so a unit keeps its round trips to
// L2 few and overlapped: a channel unit fetches its slice of the weights (fc2 also its rows of A and the
// stream values its residual adds to) into registers with every thread at once before its other work, then
// into shared memory, so each thread's long sum waits on shared memory, not on one L2 round trip after
// another; a warp takes ML_ROWS rows' statistics at once; each output's bias (and multiplier) is fetched
// before its sum. (Where the token weights do not fit, the token unit reads them from L2 as it sums: staging
// them on the phase's critical path measured slower — docs/decisions.md, "The Mixer's forward for a few images
// in one launch"; requested during the barrier's wait they arrive before the phase needs them.)
//   head                  unit = image: its tile into shared memory, LayerNorm of every patch (the statistics
//                         as the last fc2 left them), their mean, the logits; the image's counts back to zero
//
// `layout` (ML_* below, litenet/lowering/fast/mixer_rows.py writes it) holds, per product, a record of
// ML_REC ints — its weights, bias, multipliers, packed row bytes and input scale — and per LayerNorm the
// offsets of γ and β. fp32 reads the flat parameters where they lie (litenet.model.param_layout, weights
// (in, out)); int8 reads the plan packed by litenet.runtime.cuda_mixer_net (weights (out, in) int8 rows,
// multipliers m[n] = s_x·s_w[n], biases, γ, β): each product's float input is quantized as it is staged
// (quantize_rn), the int32 sums are exact, y = float(acc)·m[n] + b[n] rounded as the plan rounds it.
// LayerNorm is ln_row's arithmetic (each operation rounded once, as the int8 plan's). Every dot product is spread
// over S threads (block_dots; fc2's rows_dots) and summed in a fixed order: the same bits on every run; fp32's order
// differs from NumPy's (the tests hold its logits to the fp32 tolerance), int8's sums are exact.
// Launch: grid ≤ the SM count (every block resident: the grid barrier), 256 threads, dynamic shared
// memory mixer_rows_smem() floats (mixer_rows.py). [phase_begin, phase_end) selects phases; one phase a
// launch needs no co-residency (the CPU emulator runs it that way, any grid).
#include "infer_core.cuh"

#define ML_REC 5        // a product's record: weights, bias, multipliers (int8), row bytes (int8), s_x bits (int8)
#define ML_W 0
#define ML_B 1
#define ML_M 2
#define ML_KP 3
#define ML_SX 4
#define ML_EMBED 0                  // the embedding's record
#define ML_BLOCK0 ML_REC            // then per block: token LN (γ, β), token fc1, token fc2, channel LN, fc1, fc2
#define ML_TLN 0
#define ML_TFC1 2
#define ML_TFC2 (2 + ML_REC)
#define ML_CLN (2 + 2 * ML_REC)
#define ML_CFC1 (4 + 2 * ML_REC)
#define ML_CFC2 (4 + 3 * ML_REC)
#define ML_PER_BLOCK (4 + 4 * ML_REC)  // then the final LN (γ, β) and the head's record
#define ML_TG 8         // patches per channel-MLP unit (one warp each for their LayerNorm)
#define ML_ROWS 8       // rows whose LayerNorm statistics one warp computes at once (smem_rows_stats)
#define ML_PREFETCH 16  // values a thread fetches into registers ahead of their use (fetch, put)

// A product's record, read once a phase into registers (read through the pointer at every use, the
// compiler must reload it after each store to shared memory, which it cannot prove apart).
struct Rec {
    int w, b, m, kp;
    float sx, inv_sx;  // (int8) the input's scale and its reciprocal, for quantize_by
};

__device__ __forceinline__ Rec rec(const int* r) {
    const float sx = __int_as_float(r[ML_SX]);
    return Rec{r[ML_W], r[ML_B], r[ML_M], r[ML_KP], sx, __frcp_rn(sx)};
}

// A row's LayerNorm statistics: μ, √(σ² + eps) and its reciprocal (normed() divides by div_rn).
struct Stats {
    float mean, sd, inv_sd;
};

__device__ __forceinline__ Stats stats_of(float mean, float sd) { return Stats{mean, sd, __frcp_rn(sd)}; }

// A product's arithmetic in each precision. r: its record; the input is staged by in() (fp32 as is,
// int8 quantized by the product's s_x), weight(r, k, n, N) reads W[k → n], mul() is one term of the sum;
// ahead(r, n) fetches what output n's epilogue needs (its bias; int8 also its multiplier) and out() turns
// the finished sum into the float the op list computes with it. Both stage into 4-byte slots of shared memory.
template <bool INT8>
struct Products;

template <>
struct Products<false> {
    typedef float Acc;
    const float* F;
    const signed char* W;  // unused
    __device__ __forceinline__ float in(float x, const Rec&) const { return x; }
    __device__ __forceinline__ float weight(const Rec& r, int k, int n, int N) const {  // W (in, out)
        return F[r.w + (size_t)k * N + n];
    }
    __device__ __forceinline__ float mul(float x, float w) const { return x * w; }
    __device__ __forceinline__ float2 ahead(const Rec& r, int n) const { return make_float2(0.f, F[r.b + n]); }
    __device__ __forceinline__ float out(float acc, float2 mb) const { return acc + mb.y; }
    __device__ __forceinline__ float gelu(float u) const { return gelu_value(u); }
    // a product's weights as 4-byte words, to stage whole in shared memory (stage_words), and W[k → n] there
    __device__ __forceinline__ const float* words_of(const Rec& r) const { return F + r.w; }
    __device__ __forceinline__ int words(const Rec&, int K, int N) const { return K * N; }
    __device__ __forceinline__ float staged(const float* s, const Rec&, int k, int n, int N) const {
        return s[k * N + n];
    }
};

template <>
struct Products<true> {
    typedef int Acc;
    const float* F;
    const signed char* W;
    // int8 values travel as the bits of an int in a float slot: one integer multiply a term, no conversions
    __device__ __forceinline__ float in(float x, const Rec& r) const {
        return __int_as_float(quantize_by(x, r.sx, r.inv_sx));
    }
    __device__ __forceinline__ float weight(const Rec& r, int k, int n, int) const {  // W (out, in), rows of KP bytes
        return __int_as_float((int)W[(size_t)r.w * 4 + (size_t)n * r.kp + k]);
    }
    __device__ __forceinline__ int mul(float x, float w) const { return __float_as_int(x) * __float_as_int(w); }
    __device__ __forceinline__ float2 ahead(const Rec& r, int n) const { return make_float2(F[r.m + n], F[r.b + n]); }
    __device__ __forceinline__ float out(int acc, float2 mb) const {
        return __fadd_rn(__fmul_rn((float)acc, mb.x), mb.y);
    }
    __device__ __forceinline__ float gelu(float u) const { return gelu_rn(u); }
    __device__ __forceinline__ const float* words_of(const Rec& r) const {
        return reinterpret_cast<const float*>(W + (size_t)r.w * 4);
    }
    __device__ __forceinline__ int words(const Rec& r, int, int N) const { return N * r.kp / 4; }
    __device__ __forceinline__ float staged(const float* s, const Rec& r, int k, int n, int) const {
        return __int_as_float((int)reinterpret_cast<const signed char*>(s)[n * r.kp + k]);
    }
};

// outs dot products of length K, each by S threads (the largest power of two ≤ 32 with outs·S ≤ the
// block and S ≤ K), partial sums over k ≡ s (mod S) joined by shuffles in a fixed order; emit(o, sum,
// ahead(o)) runs on the group's first thread, ahead(o) (the output's bias, multiplier) fetched before the
// sum so its round trip overlaps the terms'. term(o, k) is the k-th product of output o. Every thread of
// the block must call it (the shuffles take whole warps).
template <class Acc, class Ahead, class Term, class Emit>
__device__ __forceinline__ void block_dots(int outs, int K, const Ahead& ahead, const Term& term, const Emit& emit) {
    int S = 1;
    while (S < 32 && 2 * S * outs <= (int)blockDim.x && 2 * S <= K) S *= 2;
    const int per_pass = blockDim.x / S, s = threadIdx.x % S;
    for (int o0 = 0; o0 < outs; o0 += per_pass) {
        const int o = o0 + threadIdx.x / S;
        const float2 early = o < outs && s == 0 ? ahead(o) : make_float2(0.f, 0.f);
        Acc acc = 0;
        if (o < outs)
#pragma unroll 8
            for (int k = s; k < K; k += S) acc += term(o, k);  // (unrolled: eight terms' loads in flight at once)
        for (int off = S / 2; off > 0; off >>= 1) acc += __shfl_xor_sync(LN_FULL_MASK, acc, off);
        if (o < outs && s == 0) emit(o, acc, early);
    }
}

// out[r][c] = Σ_k X[r·K + k]·W[k·N + c] for r < R ≤ ML_TG and c < N, X and W in shared memory: the channel
// units' products, R patches × N channels. Each thread takes one column's R sums over its slice of k (k ≡ s mod
// S): a weight read serves R terms and a row's value is one broadcast, and each sum is a chain of K/S terms where
// block_dots' one output a thread would chain K/S' ≫ K/S of them. The columns run along the lanes (a warp's
// weight reads are conflict-free), the slices along the rest of the lanes and then the warps; the partial sums
// meet by shuffles within a warp, then across warps in part (ML_TG·blockDim slots), in a fixed order.
// emit(r, c, sum, ahead(c)) once an output; ahead as block_dots'. Every thread of the block must call it.
template <bool INT8, class Ahead, class Emit>
__device__ __forceinline__ void rows_dots(const Products<INT8>& P, const float* X, int R, int K, const float* W, int N,
                                          float* part, const Ahead& ahead, const Emit& emit) {
    typedef typename Products<INT8>::Acc Acc;
    const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31, warps = blockDim.x >> 5;
    int np = 1;  // lanes a group of columns spans
    while (np < 32 && np < N) np *= 2;
    const int ls = 32 / np, groups = (N + np - 1) / np;  // slices along the lanes; column groups
    const int wg = max(1, warps / groups), S = ls * wg;  // warps a column group; slices
    const int per = (warps / wg) * np;                   // columns a pass
    const int g = warp / wg, sw = warp % wg, s = lane / np + ls * sw;
    Acc* sums = reinterpret_cast<Acc*>(part);            // (wg, ML_TG, per) each warp's partial sums
    for (int c0 = 0; c0 < N; c0 += per) {
        const int cols = min(per, N - c0), c = c0 + g * np + lane % np;
        const bool live = g * np + lane % np < cols;
        const float2 early = (int)threadIdx.x < R * cols ? ahead(c0 + threadIdx.x % cols) : make_float2(0.f, 0.f);
        Acc acc[ML_TG];
#pragma unroll
        for (int r = 0; r < ML_TG; ++r) acc[r] = 0;
        if (live)
#pragma unroll 4
            for (int k = s; k < K; k += S) {
                const float w = W[k * N + c];
#pragma unroll
                for (int r = 0; r < ML_TG; ++r)
                    if (r < R) acc[r] += P.mul(X[r * K + k], w);
            }
        for (int off = np; off < 32; off <<= 1)
#pragma unroll
            for (int r = 0; r < ML_TG; ++r) acc[r] += __shfl_xor_sync(LN_FULL_MASK, acc[r], off);
        if (live && lane < np)
#pragma unroll
            for (int r = 0; r < ML_TG; ++r)
                if (r < R) sums[(sw * ML_TG + r) * per + c - c0] = acc[r];
        __syncthreads();
        for (int o = threadIdx.x; o < R * cols; o += blockDim.x) {
            const int r = o / cols, j = o % cols;
            Acc total = sums[r * per + j];
            for (int w = 1; w < wg; ++w) total += sums[(w * ML_TG + r) * per + j];
            emit(r, c0 + j, total, o == (int)threadIdx.x ? early : ahead(c0 + j));
        }
        __syncthreads();  // sums is reused by the next pass
    }
}

// The statistics of up to ML_ROWS rows held in shared memory (row(r) for r < rows), by one warp, in ln_row's
// arithmetic (the same bits): Stats into st[r]; normed() then gives y_j = (s_j − μ)/√(σ² + eps)·γ_j + β_j
// as ln_row emits it. The rows' sums are interleaved, so their loads, shuffles and divisions overlap where a
// row at a time would wait on each in turn; each row's terms are summed in ln_row's order.
template <class Row>
__device__ __forceinline__ void smem_rows_stats(const Row& row, int rows, int d, float eps, Stats (&st)[ML_ROWS]) {
    const int lane = threadIdx.x & 31;
    float sum[ML_ROWS], sq[ML_ROWS], mean[ML_ROWS];
#pragma unroll
    for (int r = 0; r < ML_ROWS; ++r) sum[r] = sq[r] = 0.f;
    for (int j = lane; j < d; j += 32)
#pragma unroll
        for (int r = 0; r < ML_ROWS; ++r)
            if (r < rows) sum[r] = __fadd_rn(sum[r], row(r)[j]);
#pragma unroll
    for (int o = 16; o > 0; o >>= 1)
#pragma unroll
        for (int r = 0; r < ML_ROWS; ++r) sum[r] += __shfl_xor_sync(LN_FULL_MASK, sum[r], o);
#pragma unroll
    for (int r = 0; r < ML_ROWS; ++r) mean[r] = __fdiv_rn(sum[r], (float)d);
    for (int j = lane; j < d; j += 32)
#pragma unroll
        for (int r = 0; r < ML_ROWS; ++r)
            if (r < rows) {
                const float c = __fsub_rn(row(r)[j], mean[r]);
                sq[r] = __fadd_rn(sq[r], __fmul_rn(c, c));
            }
#pragma unroll
    for (int o = 16; o > 0; o >>= 1)
#pragma unroll
        for (int r = 0; r < ML_ROWS; ++r) sq[r] += __shfl_xor_sync(LN_FULL_MASK, sq[r], o);
#pragma unroll
    for (int r = 0; r < ML_ROWS; ++r) {
        const float sd = sqrtf(__fadd_rn(__fdiv_rn(sq[r], (float)d), eps));
        st[r] = stats_of(mean[r], sd);
    }
}

// How many of the rows t0, t0 + warps, … (below T) one smem_rows_stats call of a warp takes.
__device__ __forceinline__ int rows_from(int t0, int warps, int T) {
    return min(ML_ROWS, (T - t0 + warps - 1) / warps);
}

// Each row of an image's (T, d) tile in shared memory with its LayerNorm statistics: each(t, st) on every
// lane of the row's warp, a warp's rows in increasing t, ML_ROWS of them a smem_rows_stats call.
template <class Each>
__device__ __forceinline__ void tile_rows_stats(const float* tile, int T, int d, float eps, const Each& each) {
    const int warp = threadIdx.x >> 5, warps = blockDim.x >> 5;
    for (int t0 = warp; t0 < T; t0 += warps * ML_ROWS) {
        const int rows = rows_from(t0, warps, T);
        Stats st[ML_ROWS];
        smem_rows_stats([&](int r) { return tile + (t0 + r * warps) * d; }, rows, d, eps, st);
#pragma unroll
        for (int r = 0; r < ML_ROWS; ++r)
            if (r < rows) each(t0 + r * warps, st[r]);
    }
}

// A slice of n values fetched into registers, ML_PREFETCH a thread (element e by thread e % blockDim.x), so
// their round trip to L2 overlaps the work between fetch() and put(); put() stores map(v) for each at dst[e],
// fetching the rest (elements past ML_PREFETCH·blockDim.x) as it stores them.
template <class Get>
__device__ __forceinline__ void fetch(float (&v)[ML_PREFETCH], int n, const Get& get) {
#pragma unroll
    for (int i = 0; i < ML_PREFETCH; ++i) {
        const int e = threadIdx.x + i * blockDim.x;
        v[i] = e < n ? get(e) : 0.f;
    }
}

template <class Get, class Map>
__device__ __forceinline__ void put(const float (&v)[ML_PREFETCH], float* dst, int n, const Get& get, const Map& map) {
#pragma unroll
    for (int i = 0; i < ML_PREFETCH; ++i) {
        const int e = threadIdx.x + i * blockDim.x;
        if (e < n) dst[e] = map(v[i]);
    }
    for (int e = threadIdx.x + ML_PREFETCH * blockDim.x; e < n; e += blockDim.x) dst[e] = map(get(e));
}

__device__ __forceinline__ float normed(float v, const Stats& st, float gamma, float beta) {
    return __fadd_rn(__fmul_rn(div_rn(__fsub_rn(v, st.mean), st.sd, st.inv_sd), gamma), beta);
}

// A patch's statistics as the phase before left them (written by other blocks of this launch: read past L1).
__device__ __forceinline__ Stats stats_at(const float* stats, size_t row) {
    return stats_of(__ldcg(stats + 2 * row), __ldcg(stats + 2 * row + 1));
}

__device__ __forceinline__ void put_stats(float* stats, size_t row, const Stats& st) {
    stats[2 * row] = st.mean;
    stats[2 * row + 1] = st.sd;
}

// A unit's arrival at its tile's count of finished units: the count before it. Thread 0 calls it after a
// __syncthreads: it releases the block's writes and acquires those of the units before it (as grid_barrier).
__device__ __forceinline__ unsigned int arrive(unsigned int* count) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 700 && !defined(LITENET_EMULATOR)
    unsigned int before;
    asm volatile("atom.acq_rel.gpu.global.add.u32 %0, [%1], 1;" : "=r"(before) : "l"(count) : "memory");
    return before;
#else
    __threadfence();
    const unsigned int before = atomicAdd(count, 1u);
    __threadfence();
    return before;
#endif
}

// An image's (T, d) tile of the stream into shared memory, every thread's loads in flight at once
// (read past L1: other blocks wrote it in this launch).
__device__ __forceinline__ void stage_tile(float* tile, const float* img, int n) {
    if (n % 4 == 0 && aligned16(img)) {  // (the dynamic shared memory is 16-byte aligned)
#pragma unroll 8
        for (int e = 4 * threadIdx.x; e < n; e += 4 * blockDim.x) st4(tile + e, ld4cg(img + e));
        return;
    }
#pragma unroll 8
    for (int e = threadIdx.x; e < n; e += blockDim.x) tile[e] = __ldcg(img + e);
}

// Phase timing (bench/mixer_phase_times.py compiles the kernel with LITENET_PHASE_TIMES): each block's
// globaltimer as it starts and as it finishes each phase, at ml_phase_times[(phase·grid + block)·2 + {0, 1}].
// Without the macro the marks are nothing.
#ifdef LITENET_PHASE_TIMES
#define ML_PHASE_TIMES_MAX (2 * 64 * 1024)
__device__ unsigned long long ml_phase_times[ML_PHASE_TIMES_MAX];
__device__ __forceinline__ void phase_mark(int p, int end) {
    __syncthreads();  // (the whole block's work)
    unsigned long long now;
    asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(now));
    const int at = (p * gridDim.x + blockIdx.x) * 2 + end;
    if (threadIdx.x == 0 && at < ML_PHASE_TIMES_MAX) ml_phase_times[at] = now;
}
#else
__device__ __forceinline__ void phase_mark(int, int) {}
#endif

// n 4-byte words into shared memory at dst: by cp.async on sm_80+, so the block need not wait for them
// until staged_wait(); else (Pascal, the CPU emulator) an ordinary copy.
__device__ __forceinline__ void stage_words(float* dst, const float* src, int n) {
    for (int e = threadIdx.x; e < n; e += blockDim.x) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 800 && !defined(LITENET_EMULATOR)
        const unsigned int to = (unsigned int)__cvta_generic_to_shared(dst + e);
        asm volatile("cp.async.ca.shared.global [%0], [%1], 4;\n" ::"r"(to), "l"(src + e) : "memory");
#else
        dst[e] = src[e];
#endif
    }
}

__device__ __forceinline__ void staged_wait() {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 800 && !defined(LITENET_EMULATOR)
    asm volatile("cp.async.wait_all;\n" ::: "memory");
#endif
    __syncthreads();
}

// Block i's token MLP weights (both products) into shared memory past the token unit's columns, where TW > 0
// (mixer_rows.py: they fit beside CT channels). Every block with a token unit stages them: between its arrival at
// the grid barrier before the phase and its wait there, so they arrive while it waits, or, where the token phase
// is the launch's first, as it begins.
// Where the token weights lie in shared memory: past the token unit's columns, normalised columns and hidden values.
__device__ __forceinline__ float* token_weights_at(float* sm, int T, int Th, int CT) {
    return sm + (2 * T + Th) * CT;
}

template <bool INT8>
__device__ __forceinline__ void stage_token_weights(const Products<INT8>& P, const int* L, float* sm, int T, int Th,
                                                    int CT) {
    const Rec r1 = rec(L + ML_TFC1), r2 = rec(L + ML_TFC2);
    float* w1 = token_weights_at(sm, T, Th, CT);
    stage_words(w1, P.words_of(r1), P.words(r1, T, Th));
    stage_words(w1 + P.words(r1, T, Th), P.words_of(r2), P.words(r2, Th, T));
}

template <bool INT8>
__device__ __forceinline__ void mixer_rows(
    const unsigned char* pixels, int B, int patch, float shift, float scale, const Products<INT8> P,
    const int* layout, int T, int d, int Th, int Hc, int blocks, int C, float eps, int CT, int HS, int CS, int TW,
    float* x0, float* x1, float* a, float* stats, unsigned int* counts, float* logits, int phase_begin, int phase_end,
    unsigned int* sync) {
    typedef typename Products<INT8>::Acc Acc;
    LN_DYNAMIC_SMEM(float, sm);
    const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31, warps = blockDim.x >> 5;
    const int side = 32 / patch, per_patch = patch * patch * 3;
    const int tiles = (T + ML_TG - 1) / ML_TG, head = 1 + 3 * blocks;
    const float* F = P.F;
    float* X[2] = {x0, x1};
    unsigned int target = 0;
    for (int p = phase_begin; p < phase_end; ++p) {
        const int i = (p - 1) / 3, part = (p - 1) % 3;
        const int* L = layout + ML_BLOCK0 + ML_PER_BLOCK * i;
        const bool token = p < head && part == 0, staged = token && TW > 0 && blockIdx.x < B * ((d + CT - 1) / CT);
        if (p > phase_begin) {
            phase_mark(p - 1, 1);
            grid_arrive(sync, target);  // (the block is done with shared memory: its __syncthreads)
            if (staged) stage_token_weights(P, L, sm, T, Th, CT);  // in flight while the block waits
            grid_wait(sync, target);
        } else if (staged) {
            stage_token_weights(P, L, sm, T, Th, CT);
        }
        phase_mark(p, 0);
        if (p == 0) {  // embed: one patch a unit
            const Rec r = rec(layout + ML_EMBED);
            for (int u = blockIdx.x; u < B * T; u += gridDim.x) {
                const int b = u / T, t = u % T;
                __syncthreads();  // the previous unit is done with sm
                for (int e = threadIdx.x; e < per_patch; e += blockDim.x) {
                    const int k = e % 3, px = (e / 3) % patch, py = e / (3 * patch);
                    const int y = (t / side) * patch + py, xx = (t % side) * patch + px;
                    const float v = (float)pixels[(size_t)b * 3072 + (y * 32 + xx) * 3 + k];
                    sm[e] = P.in(__fmul_rn(__fsub_rn(__fdiv_rn(v, 255.f), shift), scale), r);
                }
                __syncthreads();
                float* out = X[0] + (size_t)u * d;
                float* row = sm + per_patch;  // (d) the patch's row, for its statistics
                block_dots<Acc>(d, per_patch, [&](int o) { return P.ahead(r, o); },
                                [&](int o, int k) { return P.mul(sm[k], P.weight(r, k, o, d)); },
                                [&](int o, Acc acc, float2 mb) { out[o] = row[o] = P.out(acc, mb); });
                __syncthreads();
                if (warp == 0) {  // the row is whole here: its statistics for block 0's token LayerNorm
                    Stats st[ML_ROWS];
                    smem_rows_stats([&](int) { return row; }, 1, d, eps, st);
                    if (lane == 0) put_stats(stats, u, st[0]);
                }
            }
        } else if (p == head) {  // final LayerNorm, mean over the patches, the head
            const int* ln = layout + ML_BLOCK0 + ML_PER_BLOCK * blocks;
            const Rec r = rec(ln + 2);
            const float* x = X[blocks % 2];
            float* tile = sm;                // (T, d) the image's stream
            float* sums = tile + T * d;      // (warps, d) each warp's sum of its normalised rows
            float* pool = sums + warps * d;  // (d) their mean, staged for the head
            float* rows = pool + d;          // (T, 2) the patches' statistics (the last channel fc2 took them)
            for (int b = blockIdx.x; b < B; b += gridDim.x) {
                __syncthreads();
                stage_tile(tile, x + (size_t)b * T * d, T * d);
                for (int e = threadIdx.x; e < 2 * T; e += blockDim.x) rows[e] = __ldcg(stats + (size_t)b * T * 2 + e);
                for (int j = lane; j < d; j += 32) sums[warp * d + j] = 0.f;
                for (int e = threadIdx.x; e < tiles; e += blockDim.x) counts[b * tiles + e] = 0;  // (the last reader)
                __syncthreads();
                for (int t = warp; t < T; t += warps) {  // a warp's rows in increasing t
                    const Stats st = stats_of(rows[2 * t], rows[2 * t + 1]);
                    for (int j = lane; j < d; j += 32)
                        sums[warp * d + j] += normed(tile[t * d + j], st, F[ln[0] + j], F[ln[1] + j]);
                }
                __syncthreads();
                for (int j = threadIdx.x; j < d; j += blockDim.x) {
                    float s = 0.f;
                    for (int w = 0; w < warps; ++w) s += sums[w * d + j];
                    pool[j] = P.in(s / (float)T, r);
                }
                __syncthreads();
                block_dots<Acc>(C, d, [&](int o) { return P.ahead(r, o); },
                                [&](int o, int k) { return P.mul(pool[k], P.weight(r, k, o, C)); },
                                [&](int o, Acc acc, float2 mb) { logits[(size_t)b * C + o] = P.out(acc, mb); });
            }
        } else if (part == 0) {  // token MLP: CT channels of one image a unit
            const Rec r1 = rec(L + ML_TFC1), r2 = rec(L + ML_TFC2);
            const float* xin = X[i % 2];
            float* xout = X[(i + 1) % 2];
            float* cols = sm;             // (T, CT) its channels of the stream
            float* nrm = cols + T * CT;   // (T, CT) the same normalised, staged for the first product
            float* hid = nrm + T * CT;    // (Th, CT) its GELU, staged for the second
            const float* w1 = token_weights_at(sm, T, Th, CT);  // (TW > 0) as stage_token_weights left them
            const float* w2 = w1 + P.words(r1, T, Th);
            const float *g = F + L[ML_TLN], *be = F + L[ML_TLN + 1];
            const int groups = (d + CT - 1) / CT;
            if (staged) staged_wait();
            for (int u = blockIdx.x; u < B * groups; u += gridDim.x) {
                const int b = u / groups, c0 = (u % groups) * CT, cn = min(CT, d - c0);
                const float* img = xin + (size_t)b * T * d;
                __syncthreads();
                // its channels of every patch, normalised by the patches' statistics (the phase before took them)
                for (int e = threadIdx.x; e < T * cn; e += blockDim.x) {
                    const int t = e / cn, j = e % cn;
                    const float v = __ldcg(img + (size_t)t * d + c0 + j);
                    cols[t * CT + j] = v;
                    nrm[t * CT + j] = P.in(normed(v, stats_at(stats, (size_t)b * T + t), g[c0 + j], be[c0 + j]), r1);
                }
                __syncthreads();
                const auto weight1 = [&](int k, int n) {
                    return TW > 0 ? P.staged(w1, r1, k, n, Th) : P.weight(r1, k, n, Th);
                };
                const auto weight2 = [&](int k, int n) {
                    return TW > 0 ? P.staged(w2, r2, k, n, T) : P.weight(r2, k, n, T);
                };
                block_dots<Acc>(Th * cn, T, [&](int o) { return P.ahead(r1, o / cn); },
                                [&](int o, int k) { return P.mul(nrm[k * CT + o % cn], weight1(k, o / cn)); },
                                [&](int o, Acc acc, float2 mb) {
                                    hid[(o / cn) * CT + o % cn] = P.in(P.gelu(P.out(acc, mb)), r2);
                                });
                __syncthreads();
                float* out = xout + (size_t)b * T * d;
                block_dots<Acc>(T * cn, Th, [&](int o) { return P.ahead(r2, o / cn); },
                                [&](int o, int k) { return P.mul(hid[k * CT + o % cn], weight2(k, o / cn)); },
                                [&](int o, Acc acc, float2 mb) {
                                    const int t = o / cn, j = o % cn;
                                    out[(size_t)t * d + c0 + j] = __fadd_rn(cols[t * CT + j], P.out(acc, mb));
                                });
            }
        } else if (part == 1) {  // channel fc1 + GELU: TG patches × HS hidden channels a unit
            const Rec r = rec(L + ML_CFC1), r2 = rec(L + ML_CFC2);
            const float* x = X[(i + 1) % 2];
            const int hgroups = (Hc + HS - 1) / HS;
            for (int u = blockIdx.x; u < B * tiles * hgroups; u += gridDim.x) {
                const int b = u / (tiles * hgroups), t0 = (u / hgroups) % tiles * ML_TG, n0 = (u % hgroups) * HS;
                const int tn = min(ML_TG, T - t0), hn = min(HS, Hc - n0);
                float* ws = sm + ML_TG * d;  // (d, hn): the weights' slice, fetched by all threads at once
                const auto get = [&](int e) { return P.weight(r, e / hn, n0 + e % hn, Hc); };
                float v[ML_PREFETCH];
                fetch(v, d * hn, get);  // (in flight during the LayerNorm)
                __syncthreads();
                if (warp < tn)  // one warp a patch: its normalised row into sm
                    ln_row(x + ((size_t)b * T + t0 + warp) * d, F + L[ML_CLN], F + L[ML_CLN + 1], eps, d,
                           [&](int j, float y) { sm[warp * d + j] = P.in(y, r); });
                put(v, ws, d * hn, get, [](float w) { return w; });
                __syncthreads();
                float* out = a + ((size_t)b * T + t0) * Hc + n0;  // (quantized as fc2 takes it, int8)
                block_dots<Acc>(tn * hn, d, [&](int o) { return P.ahead(r, n0 + o % hn); },
                                [&](int o, int k) { return P.mul(sm[(o / hn) * d + k], ws[k * hn + o % hn]); },
                                [&](int o, Acc acc, float2 mb) {
                                    out[(size_t)(o / hn) * Hc + o % hn] = P.in(P.gelu(P.out(acc, mb)), r2);
                                });
            }
        } else {  // channel fc2 + residual: TG patches × CS channels a unit, in place
            const Rec r = rec(L + ML_CFC2);
            float* x = X[(i + 1) % 2];
            const int cgroups = (d + CS - 1) / CS;
            for (int u = blockIdx.x; u < B * tiles * cgroups; u += gridDim.x) {
                const int b = u / (tiles * cgroups), t0 = (u / cgroups) % tiles * ML_TG, c0 = (u % cgroups) * CS;
                const int tn = min(ML_TG, T - t0), cn = min(CS, d - c0);
                const float* arows = a + ((size_t)b * T + t0) * Hc;
                float* out = x + ((size_t)b * T + t0) * d + c0;
                float* ws = sm + ML_TG * Hc;  // (Hc, cn): the weights' slice
                float* res = ws + Hc * CS;    // (tn, cn): the stream's values the residual adds to
                float* part = res + ML_TG * CS;  // rows_dots' partial sums
                // (written by other blocks of this launch: read past L1; all three fetched at once)
                const auto get_a = [&](int e) { return __ldcg(arows + e); };
                const auto get_w = [&](int e) { return P.weight(r, e / cn, c0 + e % cn, d); };
                const auto get_r = [&](int e) { return __ldcg(out + (size_t)(e / cn) * d + e % cn); };
                const auto same = [](float v) { return v; };
                float va[ML_PREFETCH], vw[ML_PREFETCH], vr[ML_PREFETCH];
                fetch(va, tn * Hc, get_a);
                fetch(vw, Hc * cn, get_w);
                fetch(vr, tn * cn, get_r);
                __syncthreads();
                put(va, sm, tn * Hc, get_a, same);  // (fc1 stored A as this product takes it)
                put(vw, ws, Hc * cn, get_w, same);
                put(vr, res, tn * cn, get_r, same);
                __syncthreads();
                rows_dots(P, sm, tn, Hc, ws, cn, part, [&](int c) { return P.ahead(r, c0 + c); },
                          [&](int t, int c, Acc acc, float2 mb) {
                              out[(size_t)t * d + c] = __fadd_rn(res[t * cn + c], P.out(acc, mb));
                          });
                // the unit that finishes the tile's rows takes their statistics, for the next LayerNorm of whole
                // rows (the next block's token unit, the head), where every unit of that phase would take them
                int* last = reinterpret_cast<int*>(part);  // (rows_dots is done with it)
                if (threadIdx.x == 0)
                    *last = arrive(counts + b * tiles + t0 / ML_TG) == (unsigned int)((i + 1) * cgroups - 1);
                __syncthreads();
                if (*last) {
                    float* rows = x + ((size_t)b * T + t0) * d;
                    stage_tile(sm, rows, tn * d);
                    __syncthreads();
                    tile_rows_stats(sm, tn, d, eps, [&](int t, const Stats& st) {
                        if (lane == 0) put_stats(stats, (size_t)b * T + t0 + t, st);
                    });
                }
            }
        }
    }
    phase_mark(phase_end - 1, 1);
    if (phase_end - phase_begin > 1) grid_leave(sync);
}

// fp32: F = the flat parameters.
extern "C" __global__ void infer_mixer_fp32_rows(
    const unsigned char* pixels, int B, int patch, float shift, float scale, const float* params, const int* layout,
    int T, int d, int Th, int Hc, int blocks, int C, float eps, int CT, int HS, int CS, int TW, float* x0, float* x1,
    float* a, float* stats, unsigned int* counts, float* logits, int phase_begin, int phase_end, unsigned int* sync) {
    const Products<false> P{params, nullptr};
    mixer_rows<false>(pixels, B, patch, shift, scale, P, layout, T, d, Th, Hc, blocks, C, eps, CT, HS, CS, TW, x0, x1,
                      a, stats, counts, logits, phase_begin, phase_end, sync);
}

// int8: F = the plan's floats (multipliers, biases, γ, β), words = its packed int8 weights.
extern "C" __global__ void infer_mixer_int8_rows(
    const unsigned char* pixels, int B, int patch, float shift, float scale, const float* floats, const int* words,
    const int* layout, int T, int d, int Th, int Hc, int blocks, int C, float eps, int CT, int HS, int CS, int TW,
    float* x0, float* x1, float* a, float* stats, unsigned int* counts, float* logits, int phase_begin, int phase_end,
    unsigned int* sync) {
    const Products<true> P{floats, reinterpret_cast<const signed char*>(words)};
    mixer_rows<true>(pixels, B, patch, shift, scale, P, layout, T, d, Th, Hc, blocks, C, eps, CT, HS, CS, TW, x0, x1,
                     a, stats, counts, logits, phase_begin, phase_end, sync);
}
