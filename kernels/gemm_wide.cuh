// gemm_wide.cuh — the tile product of large products in wide tiles (gemm.cuh's are 64 or 128 rows
// × 64): 256 × 128 in fp32 on the SIMT cores (sm_61 on), 128 × 128 in BF16 on the tensor cores (sm_80
// on); chosen per product by geometry.Gemm.wide (large M·N·K).
//
// Why: at litenet-base's widths 1024–2048 the 64-row tiles' products are bound by what each output
// costs in shared-memory reads and global loads; a wider tile halves it (docs/decisions.md, "Wide
// tiles"):
//   fp32  thread t (t = 16·ty + tx) owns rows 8·ty … +7 and 128 + 8·ty … +7, columns 4·tx … +3 and
//         64 + 4·tx … +3: 128 multiply-adds per k against six 16-byte shared reads (the tall tile: 32
//         against three), as cuBLAS's SIMT kernels (128 outputs a thread, 256 × 128 or 128 × 128
//         tiles). k steps of 8 (two buffers of 16 KiB and 8 KiB), operands staged [k][i] as gemm.cuh's
//         register path stages them; about 220–248 registers, so one block a multiprocessor.
//   BF16  gemm.cuh's tensor-core path stages fp32 operands and rounds each fragment as a warp reads
//         it; its 64 × 64 tile gives a warp 32 × 16 outputs — per k16, 4 mma against 12 eight-byte
//         shared reads and 12 conversions: shared memory, not the tensor cores, sets its pace. Here
//         the operands come as BF16 copies in memory (Mat16: bf16_copy.cu, or the epilogue of the
//         kernel that produced them; plans.py BF16_COPIES), which halves the bytes read and drops the
//         conversions (docs/decisions.md, "BF16 copies"), and warp w (8 warps
//         as 2 rows × 4 columns) owns rows 64·(w/4) … +63, columns 32·(w%4) … +31: 4 × 4 mma tiles of
//         16 × 8 (mma.cuh's m16n8k16 fragments) — per k16, 16 mma against 24 four-byte shared reads
//         that meet no bank twice, and no conversions. k steps of 32. A staged operand X(k, i) (i = m
//         for A, n for B) is words of two BF16 (k even in the low half), by its layout in memory:
//           contiguous along k  words [i][k/2], rows of 20 words (16 + 4 padding; 8-byte stores)
//           contiguous along i  words [k/2][i], rows of 136 words (128 + 8; 16-byte stores)
//   BF16 on Hopper (sm_90a): WideWgmma, the same staging into wgmma.cuh's core matrices and two
//         asynchronous warpgroup products (m64n128k16) a k step, so the tensor cores work while the
//         threads stage (docs/decisions.md, "wgmma").
// All: two shared buffers, the next k step fetched into registers while the current one multiplies
// (as gemm.cuh's fp32 path); the BF16 tiles keep two steps in flight (wide_tile's DEPTH 2: their steps
// are half the registers of fp32's) and run the k loop unrolled by two. The fp32 tile runs a step an
// iteration: its loop body is 1271 instructions (20 KiB), and unrolled by two it stalls on instruction
// fetch. BF16 stages through registers, not by a cp.async pipeline of fp32 steps rounded as the
// fragments are read (gemm.cuh's way): that pipeline is slower both at two blocks a multiprocessor
// (128 registers, with spills) and at one (docs/decisions.md, "Wide tiles").
// Then each 128 × 64 part of the tile (4 in fp32's, 2 in BF16's), in gemm.cuh's tall SIMT layout
// (thread t owns acc[i][j] = C[8·ty + i][4·tx + j]; the BF16 tile gets there through shared memory),
// is stored as a tall tile's split-K partial (splitk.cuh's slabs, LN_SLAB_OF(8), of part parts·tile +
// q), the block arrives once for the whole tile, and the last block sums each part's slabs and runs
// the tall tile's epilogue on it.
//
// Rounding and order: fp32 sums in k order as the other fp32 tiles; BF16 multiplies the same values
// as the 64-row path (each operand rounded to nearest even once, by whoever made the copy) and
// sums the same k16 chunks in k order. The BF16 tiles' column sums (∂b) add the BF16 values of ∂y.
// Limits: any M, N, K (guarded loads read 0 outside); column sums only where B is contiguous along n
// (the ∂W products': elsewhere none are asked for).
#pragma once

#include "bf16_copy.cuh"
#include "splitk.cuh"
#include "wgmma.cuh"

#define LN_WIDE 128                   // tile columns, and the BF16 tiles' rows
#define LN_WIDE_ROWS_FP32 256         // the fp32 tile's rows
#define LN_WIDE_TK_FP32 8             // the fp32 tile's k step
#define LN_WIDE_ROW_K 20              // BF16: words per row of a k-contiguous staged operand ([i][k/2])
#define LN_WIDE_ROW_I 136             // BF16: words per row of an i-contiguous one ([k/2][i])
#define LN_WIDE_OPERAND (LN_WIDE * LN_WIDE_ROW_K)  // BF16: words per staged operand (≥ 16 · 136)
// Blocks a multiprocessor each version is compiled for (__launch_bounds__), from ptxas (sm_90): fp32
// needs 220–248 registers (128 accumulators, two k's of 24 fragment values — one of them the held
// last k —, 12 of the next step), so one; BF16 needs about 210 (64 accumulators, 32 floats of the
// next step, 24 fragment words) and spills hundreds of bytes at 128, so one; WideWgmma (sm_90a) has no
// fragment registers and fits 128 (12–52 bytes spilled, in the split-K fixup and epilogues), so two.
#define LN_WIDE_BLOCKS_FP32 1
#ifdef LN_WGMMA
#define LN_WIDE_BLOCKS_BF16 2  // WideWgmma: no fragment registers
#else
#define LN_WIDE_BLOCKS_BF16 1
#endif
// WideWgmma's staged operands (wgmma.cuh's core matrices): X(i, k) of rows i < 128, k < 32 at byte
// (k / 8) · LBO + (i / 8) · SBO + (i % 8) · 16 + (k % 8) · 2, stored 8 bytes (4 values along k) at a
// time. The padding spreads a half-warp's stores over the banks: SBO = 128 + 16 puts an operand
// contiguous along i (rows 4·t + j, t < 16) at most twice on a bank; LBO = 16 · SBO + 32 puts one
// contiguous along k (2 rows × 8 threads, k = 4·t') once.
#define LN_WG_SBO 144
#define LN_WG_LBO (16 * LN_WG_SBO + 32)
#define LN_WG_OPERAND (LN_WG_LBO)  // words per staged operand: 4 core columns (k32) of LBO bytes

struct __align__(16) WideSmem {
    union {
        unsigned int bf16[2][2][LN_WIDE_OPERAND];       // WideBf16's staged steps [buffer][A, B][word]
        unsigned int wgmma[2][2][LN_WG_OPERAND];        // WideWgmma's
        struct {
            float a[2][LN_WIDE_TK_FP32][LN_WIDE_ROWS_FP32 + LN_SPAD];  // WideFp32's A [buffer][k][m]
            float b[2][LN_WIDE_TK_FP32][LN_WIDE + LN_SPAD];            // and B [buffer][k][n]
        } fp32;
        float half_out[LN_WIDE][LN_TILE + LN_SPAD];     // one 128 × 64 half of a BF16 tile, in the epilogue
        float fold[LN_THREADS / 32][LN_WIDE];           // the warps' column sums, folded
    };
    float colsums[LN_WIDE];  // Σ_k B(k, n0 + c), c < 128
};

// ---------------------------------------------------------------------------------------------
// fp32 on the SIMT cores.

struct WideFp32 {
    static constexpr int TK = LN_WIDE_TK_FP32, DEPTH = 1;  // k per step; steps in flight (wide_tile)
    static constexpr int ROWS = LN_WIDE_ROWS_FP32;           // tile rows (columns: LN_WIDE)
    template <int WIDTH>
    struct Step {  // a k step of one operand (WIDTH = ROWS for A, LN_WIDE for B) in flight
        float4 v[FetchSlots<WIDTH, true, TK>::N];
    };
    typedef Step<ROWS> StepA;
    typedef Step<LN_WIDE> StepB;
    float acc[16][8];  // rows 8·ty + i (i < 8), 128 + 8·ty + i − 8; columns 4·tx + j (j < 4), 64 + 4·tx + j − 4
    float held_a[16], held_b[8];  // the last k of the step before, multiplied after the barrier (multiply)

    __device__ __forceinline__ static void staged() {}  // the multiply is synchronous: nothing to order
    __device__ __forceinline__ void settle() {}
    __device__ __forceinline__ void finish() { multiply_held(); }

    __device__ __forceinline__ void zero() {
        for (int i = 0; i < 16; ++i) {
            held_a[i] = 0.f;
            for (int j = 0; j < 8; ++j) acc[i][j] = 0.f;
        }
        for (int j = 0; j < 8; ++j) held_b[j] = 0.f;
    }

    // X(k, i) for k0 ≤ k < k0 + TK, i0 ≤ i < i0 + WIDTH (zeros past k_end and I) into thread t's
    // registers at gemm.cuh's FetchSlots (memory: X(k, i) = p[i·ld + k] when K_CONTIGUOUS, else
    // p[k·ld + i]).
    // Inside the operand and aligned (every step of litenet-base's products): plain 16-byte loads, so
    // the guards' checks and element paths run only at ragged edges. Checked each step, not once for
    // the whole loop: with the branch in the loop ptxas issues the loads at the top of the step, where
    // a loop specialised to plain loads has them sunk to just before their stores, each step waiting
    // out a global load (slower still than steps copied by cp.async; docs/decisions.md, "Wide tiles").
    template <bool K_CONTIGUOUS, int WIDTH>
    __device__ __forceinline__ static void fetch(const float* p, int ld, int I, int i0, int k0, int k_end,
                                                 Step<WIDTH>& r) {
        const FetchSlots<WIDTH, !K_CONTIGUOUS, TK> f;
        if (i0 + WIDTH <= I && k0 + TK <= k_end && ld % 4 == 0 && aligned16(p)) {
#pragma unroll
            for (int l = 0; l < f.N; ++l) {
                const int i = i0 + f.x[l], k = k0 + f.kk[l];
                r.v[l] = ld4(p + (K_CONTIGUOUS ? (size_t)i * ld + k : (size_t)k * ld + i));
            }
        } else {
            fetch_operand<WIDTH, K_CONTIGUOUS, TK>(p, ld, I, i0, k0, k_end, f, r.v);
        }
    }
    template <bool K_CONTIGUOUS>
    __device__ __forceinline__ static void stage(WideSmem& s, int buf, int, const StepA& r) {
        ::stage(s.fp32.a[buf], FetchSlots<ROWS, !K_CONTIGUOUS, TK>(), r.v);
    }
    template <bool K_CONTIGUOUS>
    __device__ __forceinline__ static void stage(WideSmem& s, int buf, int, const StepB& r) {
        ::stage(s.fp32.b[buf], FetchSlots<LN_WIDE, !K_CONTIGUOUS, TK>(), r.v);
    }
    // Fetched contiguous along i: the thread's 4 columns are the same in every vector.
    __device__ __forceinline__ static void add_column_sums(float4& cs, const StepB& r) {
        for (int l = 0; l < FetchSlots<LN_WIDE, true, TK>::N; ++l) add4(cs, r.v[l]);
    }
    // Step buf's k in order, its last one's fragments held: their multiply-adds open the next step,
    // after the barrier, while that step's first shared reads are in flight (as CUTLASS's pipelined
    // main loops read the next stage's first fragments before the last k's multiply-adds). Sums stay
    // in k order. Level to slightly faster (docs/decisions.md, "Wide tiles").
    template <bool KA, bool KB>
    __device__ __forceinline__ void multiply(const WideSmem& s, int buf) {
        multiply_held();
#pragma unroll
        for (int kk = 0; kk < TK - 1; ++kk) {
            float a[16], b[8];
            read_fragments(s, buf, kk, a, b);
            multiply_add(a, b);
        }
        read_fragments(s, buf, TK - 1, held_a, held_b);
    }
    __device__ __forceinline__ void multiply_held() { multiply_add(held_a, held_b); }
    // Thread t's 16 values of A and 8 of B at k row kk of buffer buf: six 16-byte shared reads.
    __device__ __forceinline__ static void read_fragments(const WideSmem& s, int buf, int kk, float (&a)[16],
                                                          float (&b)[8]) {
        const int tx = threadIdx.x & 15, ty = threadIdx.x >> 4;
        const float* sa = s.fp32.a[buf][kk];
        const float* sb = s.fp32.b[buf][kk];
        const float4 a0 = ld4(sa + 8 * ty), a1 = ld4(sa + 8 * ty + 4);
        const float4 a2 = ld4(sa + LN_WIDE + 8 * ty), a3 = ld4(sa + LN_WIDE + 8 * ty + 4);
        const float4 b0 = ld4(sb + 4 * tx), b1 = ld4(sb + LN_TILE + 4 * tx);
        const float4 av[4] = {a0, a1, a2, a3}, bv[2] = {b0, b1};
#pragma unroll
        for (int v = 0; v < 4; ++v) {
            a[4 * v] = av[v].x, a[4 * v + 1] = av[v].y, a[4 * v + 2] = av[v].z, a[4 * v + 3] = av[v].w;
        }
#pragma unroll
        for (int v = 0; v < 2; ++v) {
            b[4 * v] = bv[v].x, b[4 * v + 1] = bv[v].y, b[4 * v + 2] = bv[v].z, b[4 * v + 3] = bv[v].w;
        }
    }
    // Odd rows walk the columns backwards (CUTLASS's serpentine order), so consecutive multiply-adds
    // share an operand at every row's turn as well as within the row; the row-by-row order stalls on
    // dispatch (docs/decisions.md, "Wide tiles").
    __device__ __forceinline__ void multiply_add(const float (&a)[16], const float (&b)[8]) {
#pragma unroll
        for (int i = 0; i < 16; ++i)
#pragma unroll
            for (int j = 0; j < 8; ++j) {
                const int jj = i % 2 ? 7 - j : j;
                acc[i][jj] += a[i] * b[jj];
            }
    }
    // Part q of the tile (rows 128·(q / 2) … +127, columns 64·(q % 2) … +63): thread t's out[i][j] =
    // C[128·(q / 2) + 8·ty + i][64·(q % 2) + 4·tx + j] (the tall layout).
    __device__ __forceinline__ void part(int q, float (&out)[8][4], WideSmem&) const {
        for (int i = 0; i < 8; ++i)
            for (int j = 0; j < 4; ++j) out[i][j] = acc[8 * (q / 2) + i][4 * (q % 2) + j];
    }
};

// ---------------------------------------------------------------------------------------------
// BF16 on the tensor cores.

// Where X(k, i)'s word (k/2 = kw) lies in a staged operand.
template <bool K_CONTIGUOUS>
__device__ __forceinline__ int wide_word(int kw, int i) {
    return K_CONTIGUOUS ? i * LN_WIDE_ROW_K + kw : kw * LN_WIDE_ROW_I + i;
}

__device__ __forceinline__ float word_bits(unsigned int w) { return __int_as_float((int)w); }

// A BF16 operand in memory (its bits as unsigned short; litenet/lowering/fast/mlp_shape.py makes these copies
// with bf16_copy.cu): gemm.cuh's Mat, read 4 or 8 values along the contiguous index at a time.
template <bool SECOND_CONTIGUOUS>
struct Mat16 {
    const unsigned short* p;
    int ld;
    static constexpr bool second_contiguous = SECOND_CONTIGUOUS;
    // Values (r, c … c + N − 1) of the rows view p[r·ld + c] (N = 8 or 4) as N/2 words w[0 …] (c even in
    // the low half); `avail` of them exist (≤ 0: none), the rest read 0. One 16- or 8-byte load where
    // alignment allows.
    template <int N>
    __device__ __forceinline__ void load_row(int r, int c, int avail, unsigned int* w) const {
        const unsigned short* q = p + (size_t)r * ld + c;
        if (avail >= N && ld % N == 0 && reinterpret_cast<size_t>(q) % (2 * N) == 0) {
            load_words<N>(q, w);
            return;
        }
#pragma unroll
        for (int e = 0; e < N / 2; ++e) w[e] = 0u;
#pragma unroll
        for (int e = 0; e < N; ++e)  // unrolled, so w stays in registers
            if (e < avail) w[e / 2] |= (unsigned int)q[e] << (16 * (e & 1));
    }
    // N values at q (2·N-byte aligned) as N/2 words: one 16- or 8-byte load.
    template <int N>
    __device__ __forceinline__ static void load_words(const unsigned short* q, unsigned int* w) {
        if (N == 8) {
            const uint4 v = *reinterpret_cast<const uint4*>(q);
            w[0] = v.x, w[1] = v.y, w[2] = v.z, w[3] = v.w;
        } else {
            const uint2 v = *reinterpret_cast<const uint2*>(q);
            w[0] = v.x, w[1] = v.y;
        }
    }
};

// Both BF16 tiles' fetch of X(k, i) for k0 ≤ k < k0 + 32, i0 ≤ i < i0 + 128 (zeros past k_end and I)
// from a BF16 operand, e = t + 256·l:
//   K_CONTIGUOUS  along_k(l) (l < 2): row i0 + e / 4, k = k0 + 8·(e % 4) … +7 (4 threads a row's 64 bytes)
//   else          along_i(l, ·) (l < 4): k row k0 + 4·warp + l, columns i0 + 4·lane … +3 (a warp reads a
//                 row's 256 bytes; the same 4 columns in every row, as the column sums need)
struct Bf16Step {
    unsigned int w[8];  // along_k(l)[j] = w[4·l + j], along_i(l)[j] = w[2·l + j]
    __device__ __forceinline__ const unsigned int* along_k(int l) const { return w + 4 * l; }
    __device__ __forceinline__ unsigned int along_i(int l, int j) const { return w[2 * l + j]; }

    template <bool K_CONTIGUOUS>
    __device__ __forceinline__ void fetch(const unsigned short* p, int ld, int I, int i0, int k0, int k_end) {
        const Mat16<true> rows{p, ld};  // rows(r, c …): K_CONTIGUOUS r = i, c = k; else r = k, c = i
        const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
        // Inside the operand and aligned (every step of litenet-base's products): plain vector loads. The
        // guarded path's checks and index arithmetic cost more issue slots than the loads themselves
        // (docs/decisions.md, "BF16 copies").
        const bool inside =
            i0 + LN_WIDE <= I && k0 + 32 <= k_end && ld % 8 == 0 && reinterpret_cast<size_t>(p) % 16 == 0;
#pragma unroll
        for (int l = 0; l < (K_CONTIGUOUS ? 2 : 4); ++l) {
            if (K_CONTIGUOUS) {
                const int e = threadIdx.x + LN_THREADS * l, i = i0 + e / 4, k = k0 + 8 * (e % 4);
                if (inside) {
                    Mat16<true>::load_words<8>(p + (size_t)i * ld + k, w + 4 * l);
                } else {
                    rows.template load_row<8>(i, k, i < I ? min(8, k_end - k) : 0, w + 4 * l);
                }
            } else {
                const int k = k0 + 4 * warp + l, i = i0 + 4 * lane;
                if (inside) {
                    Mat16<true>::load_words<4>(p + (size_t)k * ld + i, w + 2 * l);
                } else {
                    rows.template load_row<4>(k, i, k < k_end ? min(4, I - i) : 0, w + 2 * l);
                }
            }
        }
    }
    // Fetched contiguous along i: the word of column 4·lane + c holding k rows 2·j and 2·j + 1 (j < 2)
    // of the thread's four — halves of two fetched words, interleaved.
    __device__ __forceinline__ unsigned int pair_along_k(int c, int j) const {
        return __byte_perm(along_i(2 * j, c / 2), along_i(2 * j + 1, c / 2), c % 2 ? 0x7632 : 0x5410);
    }
    // Σ over the thread's 4 k rows of its 4 columns (fetched contiguous along i), in fp32.
    __device__ __forceinline__ void add_column_sums(float4& cs) const {
#pragma unroll
        for (int l = 0; l < 4; ++l) {
            cs.x += bf16_value(along_i(l, 0), 0);
            cs.y += bf16_value(along_i(l, 0), 1);
            cs.z += bf16_value(along_i(l, 1), 0);
            cs.w += bf16_value(along_i(l, 1), 1);
        }
    }
};

// What both BF16 tiles share: k steps of 32, fetched from BF16 operands as Bf16Step.
struct Bf16Operands {
    static constexpr int TK = 32, DEPTH = 2;  // k per step; steps in flight (wide_tile)
    static constexpr int ROWS = LN_WIDE;      // tile rows (and columns)
    typedef Bf16Step Step;
    typedef Step StepA, StepB;
    template <bool K_CONTIGUOUS>
    __device__ __forceinline__ static void fetch(const unsigned short* p, int ld, int I, int i0, int k0, int k_end,
                                                 Step& r) {
        r.fetch<K_CONTIGUOUS>(p, ld, I, i0, k0, k_end);
    }
    __device__ __forceinline__ static void add_column_sums(float4& cs, const Step& r) { r.add_column_sums(cs); }
};

// One m16n8 accumulator fragment f (mma.cuh's C layout: rows r, r + 8, columns c, c + 1) into the
// shared half tile.
__device__ __forceinline__ void put_fragment(WideSmem& s, int r, int c, const float* f) {
    s.half_out[r][c] = f[0];
    s.half_out[r][c + 1] = f[1];
    s.half_out[r + 8][c] = f[2];
    s.half_out[r + 8][c + 1] = f[3];
}

// The shared half tile into thread t's out[i][j] = half[8·ty + i][4·tx + j] (the tall SIMT layout).
__device__ __forceinline__ void read_half_tile(const WideSmem& s, float (&out)[8][4]) {
    const int tx = threadIdx.x & 15, ty = threadIdx.x >> 4;
    for (int i = 0; i < 8; ++i) {
        const float4 v = ld4(&s.half_out[8 * ty + i][4 * tx]);
        out[i][0] = v.x;
        out[i][1] = v.y;
        out[i][2] = v.z;
        out[i][3] = v.w;
    }
}

struct WideBf16 : Bf16Operands {
    float acc[4][4][4];  // [mi][ni]: warp w's mma tile at rows 64·(w/4) + 16·mi, columns 32·(w%4) + 8·ni

    __device__ __forceinline__ static void staged() {}
    __device__ __forceinline__ void settle() {}
    __device__ __forceinline__ void finish() {}

    __device__ __forceinline__ void zero() {
        for (int mi = 0; mi < 4; ++mi)
            for (int ni = 0; ni < 4; ++ni)
                for (int j = 0; j < 4; ++j) acc[mi][ni][j] = 0.f;
    }

    // The fetched step into a staged operand, 16 bytes a store: contiguous along k a row's 8 values as
    // they came; contiguous along i, for each pair of the thread's k rows, its 4 columns' words.
    template <bool K_CONTIGUOUS>
    __device__ __forceinline__ static void stage(WideSmem& s, int buf, int operand, const Step& r) {
        unsigned int* dst = s.bf16[buf][operand];
        const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
#pragma unroll
        for (int l = 0; l < 2; ++l) {
            if (K_CONTIGUOUS) {
                const int e = threadIdx.x + LN_THREADS * l;
                const unsigned int* w = r.along_k(l);
                st4(reinterpret_cast<float*>(dst + wide_word<true>(4 * (e % 4), e / 4)),
                    make_float4(word_bits(w[0]), word_bits(w[1]), word_bits(w[2]), word_bits(w[3])));
            } else {  // k rows 4·warp + 2·l and the next
                st4(reinterpret_cast<float*>(dst + wide_word<false>(2 * warp + l, 4 * lane)),
                    make_float4(word_bits(r.pair_along_k(0, l)), word_bits(r.pair_along_k(1, l)),
                                word_bits(r.pair_along_k(2, l)), word_bits(r.pair_along_k(3, l))));
            }
        }
    }
    // One staged k step of 32 (two k16) into the warp's 4 × 4 mma tiles, fragments read as whole words.
    template <bool KA, bool KB>
    __device__ __forceinline__ void multiply(const WideSmem& s, int buf) {
        const unsigned int *sa = s.bf16[buf][0], *sb = s.bf16[buf][1];
        const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5, g = lane >> 2, q = lane & 3;
        const int r0 = 64 * (warp >> 2), c0 = 32 * (warp & 3);
#pragma unroll
        for (int h = 0; h < 2; ++h) {
            const int kw = 8 * h + q;
            unsigned int a[4][4], b[4][2];
#pragma unroll
            for (int mi = 0; mi < 4; ++mi) {
                const int r = r0 + 16 * mi + g;
                a[mi][0] = sa[wide_word<KA>(kw, r)];
                a[mi][1] = sa[wide_word<KA>(kw, r + 8)];
                a[mi][2] = sa[wide_word<KA>(kw + 4, r)];
                a[mi][3] = sa[wide_word<KA>(kw + 4, r + 8)];
            }
#pragma unroll
            for (int ni = 0; ni < 4; ++ni) {
                const int c = c0 + 8 * ni + g;
                b[ni][0] = sb[wide_word<KB>(kw, c)];
                b[ni][1] = sb[wide_word<KB>(kw + 4, c)];
            }
#pragma unroll
            for (int mi = 0; mi < 4; ++mi)
#pragma unroll
                for (int ni = 0; ni < 4; ++ni) mma_bf16(acc[mi][ni], a[mi], b[ni]);
        }
    }
    // Part h of the tile (columns 64·h … +63) from the warps' fragments into thread t's out[i][j] =
    // C[8·ty + i][64·h + 4·tx + j], through shared memory. Every thread must call it; it starts with a
    // barrier.
    __device__ __forceinline__ void part(int h, float (&out)[8][4], WideSmem& s) const {
        const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5, g = lane >> 2, q = lane & 3;
        const int r0 = 64 * (warp >> 2), c0 = 32 * (warp & 3) - LN_TILE * h;
        __syncthreads();  // every warp is done with the staged operands, the fold or the other half
        if (c0 >= 0 && c0 < LN_TILE) {  // the two warp columns of this half
#pragma unroll
            for (int mi = 0; mi < 4; ++mi)
#pragma unroll
                for (int ni = 0; ni < 4; ++ni) put_fragment(s, r0 + 16 * mi + g, c0 + 8 * ni + 2 * q, acc[mi][ni]);
        }
        __syncthreads();
        read_half_tile(s, out);
    }
};

// ---------------------------------------------------------------------------------------------
// BF16 on Hopper's warpgroup product (wgmma.cuh; sm_90a). Staged as WideBf16 (rounded once, two
// buffers, the next step in registers), but in wgmma's K-major core matrices (LN_WG_*), and each of
// the two warpgroups (warps 0–3, 4–7) multiplies rows 64·g … +63 by all 128 columns with two
// asynchronous m64n128k16 a step: the threads stage the next step while the tensor cores work, and
// no fragment is read by a thread.
#ifdef LN_WGMMA
struct WideWgmma : Bf16Operands {
    float acc[64];  // warp w's rows 16·w + g, + 8, columns 8·j + 2·q, + 1 (wgmma.cuh's fragment)

    __device__ __forceinline__ void zero() {
        for (int i = 0; i < 64; ++i) acc[i] = 0.f;
    }
    __device__ __forceinline__ static int offset(int i, int k) {  // byte of X(i, k) in a staged operand
        return (k >> 3) * LN_WG_LBO + (i >> 3) * LN_WG_SBO + (i & 7) * 16 + (k & 7) * 2;
    }

    // The fetched step into a staged operand: contiguous along k, a row's 8 values (one core-matrix row,
    // 16 bytes) a store; contiguous along i, each of the thread's 4 columns' 4 k values (8 bytes).
    template <bool K_CONTIGUOUS>
    __device__ __forceinline__ static void stage(WideSmem& s, int buf, int operand, const Step& r) {
        char* dst = reinterpret_cast<char*>(s.wgmma[buf][operand]);
        const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
        if (K_CONTIGUOUS) {
#pragma unroll
            for (int l = 0; l < 2; ++l) {
                const int e = threadIdx.x + LN_THREADS * l;
                const unsigned int* w = r.along_k(l);
                st4(reinterpret_cast<float*>(dst + offset(e / 4, 8 * (e % 4))),
                    make_float4(word_bits(w[0]), word_bits(w[1]), word_bits(w[2]), word_bits(w[3])));
            }
        } else {  // column 4·lane + c of the k rows 4·warp … +3
#pragma unroll
            for (int c = 0; c < 4; ++c) {
                float* q = reinterpret_cast<float*>(dst + offset(4 * lane + c, 4 * warp));
                LN_CHECK_ALIGN(q, 8);
                *reinterpret_cast<float2*>(q) =
                    make_float2(word_bits(r.pair_along_k(c, 0)), word_bits(r.pair_along_k(c, 1)));
            }
        }
    }
    // The staged stores, ordered before the tensor cores' reads (the barrier after this follows).
    __device__ __forceinline__ static void staged() { fence_shared_to_async(); }

    // Issue the step's two k16 products (asynchronous: settle() waits for them).
    template <bool KA, bool KB>
    __device__ __forceinline__ void multiply(const WideSmem& s, int buf) {
        const char* a = reinterpret_cast<const char*>(s.wgmma[buf][0]) + 8 * (threadIdx.x >> 7) * LN_WG_SBO;
        const char* b = reinterpret_cast<const char*>(s.wgmma[buf][1]);
        wgmma_fence();
#pragma unroll
        for (int h = 0; h < 2; ++h)
            wgmma_bf16_m64n128k16(acc, wgmma_descriptor(a + 2 * h * LN_WG_LBO, LN_WG_LBO, LN_WG_SBO),
                                  wgmma_descriptor(b + 2 * h * LN_WG_LBO, LN_WG_LBO, LN_WG_SBO));
        wgmma_commit();
    }
    __device__ __forceinline__ void settle() {
        wgmma_wait_all();
        wgmma_fence_operands(acc);
    }
    __device__ __forceinline__ void finish() {}

    // Part h (columns 64·h … +63) into thread t's out[i][j] = C[8·ty + i][64·h + 4·tx + j], through shared
    // memory (as WideBf16). Every thread must call it; it starts with a barrier.
    __device__ __forceinline__ void part(int h, float (&out)[8][4], WideSmem& s) const {
        const int lane = threadIdx.x & 31, r = 16 * (threadIdx.x >> 5) + (lane >> 2), q = lane & 3;
        __syncthreads();
#pragma unroll
        for (int j = 0; j < 8; ++j) put_fragment(s, r, 8 * j + 2 * q, acc + 4 * (8 * h + j));
        __syncthreads();
        read_half_tile(s, out);
    }
};
#endif  // LN_WGMMA

template <class P>
struct WideOf;  // fp32 and BF16 only (geometry.Gemm.plan refuses TF32)
template <>
struct WideOf<PrecFp32> {
    typedef WideFp32 type;
};
template <>
struct WideOf<PrecBf16> {
#ifdef LN_WGMMA
    typedef WideWgmma type;  // Hopper
#else
    typedef WideBf16 type;
#endif
};

// ---------------------------------------------------------------------------------------------
// The k loop, split-K and the epilogue, for both.

// tile.acc = Σ_{k_begin ≤ k < k_end} A(m, k) · B(k, n) over the T::ROWS × 128 tile at (m0, n0) (A and B
// gemm.cuh's Mat of fp32 for WideFp32, Mat16 of BF16 for the BF16 tiles); with `colsums`, cs is this
// thread's share of B's column sums in fp32 (B contiguous along n: every fetch gives a thread the same
// 4 columns in every row). Ends with a barrier.
template <class T, class MA, class MB>
__device__ void wide_tile(T& tile, const MA& a, const MB& b, int M, int N, int k_begin, int k_end, int m0, int n0,
                          bool colsums, float4& cs, WideSmem& s) {
    constexpr bool SA = MA::second_contiguous, SB = MB::second_contiguous;
    tile.zero();
    cs = make_float4(0.f, 0.f, 0.f, 0.f);
    typedef typename T::StepA StepA;
    typedef typename T::StepB StepB;
    auto fetch = [&](int k0, StepA& ra, StepB& rb) {
        T::template fetch<SA>(a.p, a.ld, M, m0, k0, k_end, ra);
        T::template fetch<!SB>(b.p, b.ld, N, n0, k0, k_end, rb);
    };
    auto stage = [&](int buf, const StepA& ra, const StepB& rb) {
        T::template stage<SA>(s, buf, 0, ra);
        T::template stage<!SB>(s, buf, 1, rb);
        if (SB && colsums) T::add_column_sums(cs, rb);
    };
    // T::DEPTH k steps in flight in registers. DEPTH 2: step t + 2 is fetched while step t multiplies
    // and step t + 1 (fetched during step t − 1) is staged, so a load has two steps' time to arrive;
    // the two register sets swap roles every step (the loop body is written twice so each stays in
    // registers). DEPTH 1 (fp32, whose steps take twice the registers): one set (a0, b0), fetched and
    // staged within a step, a step an iteration.
    StepA a0, a1;
    StepB b0, b1;
    if (k_begin < k_end) {
        fetch(k_begin, a0, b0);
        stage(0, a0, b0);
        if (T::DEPTH == 2 && k_begin + T::TK < k_end) fetch(k_begin + T::TK, a1, b1);
    }
    T::staged();
    __syncthreads();
    // Step k0 from shared buffer `buf`: (fa, fb) takes step k0 + DEPTH·TK; (na, nb) holds step k0 + TK,
    // staged into the other buffer.
    auto step = [&](int k0, int buf, StepA& fa, StepB& fb, const StepA& na, const StepB& nb) {
        if (k0 + T::DEPTH * T::TK < k_end) fetch(k0 + T::DEPTH * T::TK, fa, fb);  // in flight during the multiply
        tile.template multiply<SA, !SB>(s, buf);
        if (k0 + T::TK < k_end) stage(buf ^ 1, na, nb);  // last read before the previous barrier
        T::staged();
        tile.settle();
        __syncthreads();
    };
    if (T::DEPTH == 1) {  // one register set: a step an iteration (the fp32 tile's body is 20 KiB of code)
        for (int k0 = k_begin, buf = 0; k0 < k_end; k0 += T::TK, buf ^= 1) step(k0, buf, a0, b0, a0, b0);
    } else {
        for (int k0 = k_begin; k0 < k_end; k0 += 2 * T::TK) {
            step(k0, 0, a0, b0, a1, b1);
            if (k0 + T::TK < k_end) step(k0 + T::TK, 1, a1, b1, a0, b0);
        }
    }
    tile.finish();
}

// A product operand's view: gemm.cuh's Mat over fp32 (WideFp32), Mat16 over BF16 (the BF16 tiles).
template <bool S>
__device__ __forceinline__ Mat<S> operand_view(const float* p, int ld) {
    return Mat<S>{p, ld};
}
template <bool S>
__device__ __forceinline__ Mat16<S> operand_view(const unsigned short* p, int ld) {
    return Mat16<S>{p, ld};
}

// Block x of a launch over ⌈M / ROWS⌉ · ⌈N / 128⌉ tiles (n fastest), each split `splits` ways.
template <int ROWS>
struct WideCoords {
    int m0, n0, tile, split;
    __device__ WideCoords(int splits, int N) {
        const int tiles_n = (N + LN_WIDE - 1) / LN_WIDE;
        tile = blockIdx.x / splits;
        split = blockIdx.x % splits;
        m0 = (tile / tiles_n) * ROWS;
        n0 = (tile % tiles_n) * LN_WIDE;
    }
};

// One block's share of a wide product: tile.acc over its K range (split `wc.split` of `splits`) and, in the
// first tile row with `first_row_sums`, B's column sums folded into s.colsums (true then).
template <class Tile, class MA, class MB>
__device__ bool wide_block(Tile& tile, const WideCoords<Tile::ROWS>& wc, const MA& a, const MB& b, int M, int N, int K,
                           int splits, bool first_row_sums, WideSmem& s) {
    const bool colsums = first_row_sums && wc.m0 == 0;
    int k_begin, k_end;
    split_range(K, wc.split, splits, k_begin, k_end);
    float4 cs;
    wide_tile(tile, a, b, M, N, k_begin, k_end, wc.m0, wc.n0, colsums, cs, s);
    if (colsums) {  // warp w's threads hold 4 columns each of k rows w, w + 8, …: fold in warp order
        st4(&s.fold[threadIdx.x >> 5][4 * (threadIdx.x & 31)], cs);
        __syncthreads();
        if ((int)threadIdx.x < LN_WIDE) {
            float total = 0.f;
            for (int w = 0; w < LN_THREADS / 32; ++w) total += s.fold[w][threadIdx.x];
            s.colsums[threadIdx.x] = total;
        }
        __syncthreads();
    }
    return colsums;
}

// Whether this thread holds part q's column sums: where the tile has them (`colsums`), only the parts in
// its first 128 rows, threads t < 64 (one column each).
__device__ __forceinline__ bool part_colsums(bool colsums, int q) {
    return colsums && q / 2 == 0 && threadIdx.x < LN_TILE;
}

// The block's partial of each 128 × 64 part q of its tile into slab wc.split of that part's slabs (part
// PARTS·tile + q: `splits` slabs of LN_SLAB_OF(8) floats each, splitk.cuh's tall layout), with part q's
// column sums (thread t < 64: column 64·(q % 2) + t's) where the tile has them, in its first 128 rows.
template <class Tile>
__device__ void store_wide_partials(Tile& tile, const WideCoords<Tile::ROWS>& wc, int splits, float* scratch,
                                    bool colsums, WideSmem& s) {
    constexpr int PARTS = 2 * Tile::ROWS / LN_WIDE;
#pragma unroll
    for (int q = 0; q < PARTS; ++q) {  // unrolled: the fp32 tile's accumulators are indexed by q
        float part[8][4];
        tile.part(q, part, s);
        const bool col = part_colsums(colsums, q);
        store_slab<8>(scratch + ((size_t)(PARTS * wc.tile + q) * splits + wc.split) * LN_SLAB_OF(8), part, col,
                      col ? s.colsums[LN_TILE * (q % 2) + threadIdx.x] : 0.f);
    }
}

// C = A·B in tiles of precision P — fp32 256 × 128, BF16 128 × 128 — with K split `splits` ways, then
// `epilogue(TileAt<8> at, acc[8][4], colsum)` on each 128 × 64 part of a tile in the block that ends
// holding it (the tall tile's contract; thread t < 64's colsum is column at.n0 + t's when
// `first_row_sums` and the part is in the first 128 rows: a bias gradient). With p = the parts a tile
// (4 for fp32, 2 for BF16): scratch ≥ p · tiles · splits · LN_SLAB_OF(8) floats when splits > 1;
// counters ≥ tiles · LN_TILE_COUNTERS zeroed (geometry.Gemm.fixup_tiles gives p times that);
// splits ≤ LN_GROUP (geometry.SPLITS_MAX).
template <class P, class MA, class MB, class Epilogue>
__device__ void gemm_wide(const MA& a, const MB& b, int M, int N, int K, int splits, float* scratch,
                          unsigned int* counters, bool first_row_sums, const Epilogue& epilogue) {
    typedef typename WideOf<P>::type Tile;
    constexpr int PARTS = 2 * Tile::ROWS / LN_WIDE;
    __shared__ WideSmem s;
    LN_SHARED_WINDOW(&s);
    const WideCoords<Tile::ROWS> wc(splits, N);
    Tile tile;
    const bool colsums = wide_block(tile, wc, a, b, M, N, K, splits, first_row_sums, s);
    // K split: every part's partial is stored, then the block arrives once for the whole tile (one
    // fence and one counter, where the tall tile's fixup on each part would take four, whose fences and
    // store throttling cost a four-split product a tenth of its time), and the last of the tile's
    // blocks sums each part's slabs in split order (tile_fixup's order, one level: splits ≤ LN_GROUP;
    // docs/decisions.md, "Wide tiles").
    if (splits > 1) {
        store_wide_partials(tile, wc, splits, scratch, colsums, s);
        if (!arrive_last(tile_counters(counters, wc.tile), splits)) return;
    }
#pragma unroll
    for (int q = 0; q < PARTS; ++q) {
        float part[8][4], colsum = 0.f;
        const bool col = part_colsums(colsums, q);
        if (splits > 1) {
            sum_slabs<8>(part, colsum, col, scratch + (size_t)(PARTS * wc.tile + q) * splits * LN_SLAB_OF(8), 0, 1,
                         splits);
        } else {
            tile.part(q, part, s);
            colsum = col ? s.colsums[LN_TILE * (q % 2) + threadIdx.x] : 0.f;
        }
        epilogue(TileAt<8>(wc.m0 + LN_WIDE * (q / 2), wc.n0 + LN_TILE * (q % 2)), part, colsum);
    }
}

// The same product's partials only: every block stores its parts' slabs (store_wide_partials; scratch ≥
// p · tiles · splits · LN_SLAB_OF(8) floats, any splits) and is done, no counters. A second launch sums
// them in split order, spread over the whole GPU (linear.cu's linear_backward_weight_sum_wide), where
// gemm_wide's last block reads all of its tile's slabs alone (docs/decisions.md, "Split-K").
template <class P, class MA, class MB>
__device__ void gemm_wide_partials(const MA& a, const MB& b, int M, int N, int K, int splits, float* scratch,
                                   bool first_row_sums) {
    typedef typename WideOf<P>::type Tile;
    __shared__ WideSmem s;
    LN_SHARED_WINDOW(&s);
    const WideCoords<Tile::ROWS> wc(splits, N);
    Tile tile;
    const bool colsums = wide_block(tile, wc, a, b, M, N, K, splits, first_row_sums, s);
    store_wide_partials(tile, wc, splits, scratch, colsums, s);
}
