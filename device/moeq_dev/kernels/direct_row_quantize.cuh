#pragma once
// A direct tile that makes its own A rows (Cfg::kQuantizesRows, an FP8 per-token layer at the smallest M): each real
// row of the block, GEMM2's the activation of GEMM1's gate_up row (moe/quantize_common.cuh ActivationSource) and a
// self-routed GEMM1's the caller's row of x (PlainRowsSource), is quantized to FP8 per token exactly as the
// quantizer kernels do (moe/quantize_fp8_token.cuh: the same amax of magnitude bits, scale, reciprocal and rounding),
// kept in shared memory as the codes' 16-bit values, its scale in the block's row scales. The K loop then reads its
// token fragments from there.
// Why: at the smallest M the FP8 step ran GEMM1's quantizer in the routing's launch, which kept GEMM1 from starting
// before the routing (self-routed, as the bf16 step's does).
// PERF: session 68 (H100, bench/results/2026-12-07-h100-s68-rows-quantized.md), a warp a row: the self-routed GEMM1's
// rows -1.0 to -2.8 us a step at Qwen3-30B-A3B M = 1; GEMM2's rows (no activation-quantize kernel between the GEMMs)
// +0.4 to +4.2 us at M = 1-16. Session 69 (H100, bench/results/2026-12-07-h100-s69-small-m-split.md), every thread on
// every row (BlockRowsWalk): GEMM1 12.8 us under ncu at M = 1 against 14.9, the step -1.4 us; GEMM2's rows -0.6 /
// -0.2 us at M = 1 / 2 (kQuantizingGemm2MaxRows). Each CTA of a block's N tiles redoes its rows' work.
// NOTE: NVRTC-safe: no standard headers.
#include "moeq_dev/moe/quantize_fp8_token.cuh"

namespace moeq_dev {

// A staged row's length: K rounded up to whole 64-k tiles (zeros past K, so the K loop reads them unpredicated), plus
// 8 elements so that the 8 rows a quarter-warp's token loads touch start 16 bytes apart in the banks. Mirrored by the
// host (gemm_staged_rows_bytes); K % 8 == 0 (16-byte vectors), which the host checks.
__device__ __forceinline__ int staged_row_stride(int K) { return (K + 63) / 64 * 64 + 8; }

// Rows of a 16-bit buffer (row stride in elements) as they are: the source of a self-routed GEMM1's rows.
// NOTE: a cached load, not load_half_vec's streaming one: every CTA of the block's N tiles reads the same rows.
struct PlainRowsSource {
  const unsigned short* in;
  long long row_stride;
  template <int kVec>
  __device__ __forceinline__ HalfVec<kVec> fetch(long long row, long long col) const {
    static_assert(kVec == 8, "16-byte vectors");
    HalfVec<kVec> v;
    v.raw = __ldg(reinterpret_cast<const uint4*>(in + row * row_stride + col));
    return v;
  }
  template <int kVec>
  __device__ __forceinline__ HalfVec<kVec> from_inputs(const HalfVec<kVec>& v) const {
    return v;
  }
};

// Where the block's real rows are, and a thread's walk over their vectors in the order (row, vector): a CTA's threads
// share every row's vectors, so that one real row (the smallest M) takes all warps, not one.
template <int kBlockM>
struct BlockRowsWalk {
  static_assert(kBlockM <= 32, "a bit per block row");
  unsigned real_rows;  // bit r: block row r is real (row_src[r] >= 0)
  int vecs;            // 16-byte vectors a row
  struct Cursor {
    int r, v;  // block row (kBlockM: past the last real row) and vector
  };
  __device__ __forceinline__ int next_row(int r) const {
    const unsigned above = real_rows & ~((2u << r) - 1u);
    return above ? __ffs(above) - 1 : kBlockM;
  }
  __device__ __forceinline__ Cursor advance(Cursor c, int step) const {
    c.v += step;
    while (c.r < kBlockM && c.v >= vecs) {
      c.v -= vecs;
      c.r = next_row(c.r);
    }
    return c;
  }
  // The thread's first vector: the walk's `tid`-th.
  __device__ __forceinline__ Cursor first(int tid) const {
    return advance(Cursor{real_rows ? __ffs(real_rows) - 1 : kBlockM, 0}, tid);
  }
};

// Block rows of `row_src` (-1: padding, scale 1, nothing staged): staged[r * stride + k] the 16-bit value of the row's
// e4m3 code at k (0 past K), row_scales[r] its scale. Every thread of the CTA (kWarps warps) calls it; the caller
// syncs the CTA after.
// PERF: the CTA's threads share each row's vectors (BlockRowsWalk) instead of a warp a row: at the smallest M a block
// holds one real row, which one warp quantized alone while the others waited at the caller's barrier.
template <bool kBf16, int kBlockM, int kWarps, class Source>
__device__ __forceinline__ void quantize_block_rows_fp8_token(const Source& source, const int* row_src, int K,
                                                              unsigned short* staged, float* row_scales, int warp,
                                                              int lane) {
  constexpr int kThreads = kWarps * 32;
  constexpr int kGroup = 4;  // a thread fetches kGroup vectors before it uses the first
  __shared__ unsigned row_bits[kBlockM];  // a real row's largest magnitude bits
  const int tid = warp * 32 + lane;
  const int vecs = K / 8, stride = staged_row_stride(K), row_vecs = (stride - 8) / 8;
  const CodeSink<QuantFormat::kFp8Token, kBf16, true> sink{reinterpret_cast<unsigned char*>(staged), 0};
  unsigned real_rows = 0;
#pragma unroll
  for (int r = 0; r < kBlockM; ++r)
    if (row_src[r] >= 0 && vecs > 0) real_rows |= 1u << r;
  const BlockRowsWalk<kBlockM> walk{real_rows, vecs};
  using Cursor = typename BlockRowsWalk<kBlockM>::Cursor;
  if (tid < kBlockM) row_bits[tid] = 0;
  for (int i = tid; i < kBlockM * (row_vecs - vecs); i += kThreads) {
    const int r = i / (row_vecs - vecs), v = vecs + i % (row_vecs - vecs);
    reinterpret_cast<uint4*>(staged + r * stride)[v] = make_uint4(0, 0, 0, 0);
  }
  __syncthreads();
  // Pass 1: stage the rows' 16-bit values and take each row's amax of magnitude bits (a running max a row, one shared
  // atomic where the thread's walk leaves the row).
  {
    int bits_row = -1;
    unsigned bits = 0;
#pragma unroll 1
    for (Cursor c = walk.first(tid); c.r < kBlockM;) {
      Cursor at[kGroup];
      decltype(source.template fetch<8>(0LL, 0LL)) in[kGroup];
      at[0] = c;
#pragma unroll
      for (int j = 1; j < kGroup; ++j) at[j] = walk.advance(at[j - 1], kThreads);
#pragma unroll
      for (int j = 0; j < kGroup; ++j)
        if (at[j].r < kBlockM) in[j] = source.template fetch<8>(row_src[at[j].r], 8LL * at[j].v);
#pragma unroll
      for (int j = 0; j < kGroup; ++j)
        if (at[j].r < kBlockM) {
          const HalfVec<8> x = source.template from_inputs<8>(in[j]);
          reinterpret_cast<uint4*>(staged + at[j].r * stride)[at[j].v] = x.raw;
          if (at[j].r != bits_row) {
            if (bits_row >= 0) atomicMax(&row_bits[bits_row], bits);
            bits_row = at[j].r;
            bits = 0;
          }
          bits = max(bits, abs_max_bits<8>(x));
        }
      c = walk.advance(at[kGroup - 1], kThreads);
    }
    // NOTE: every lane reaches this, whatever its walk's length. The lanes of a row reduce first: at one real row every
    // thread's walk ends in it, and one shared atomic a warp replaces 32.
    const unsigned same_row = __match_any_sync(0xFFFFFFFFu, bits_row);
    bits = __reduce_max_sync(same_row, bits);
    if (bits_row >= 0 && lane == __ffs(same_row) - 1) atomicMax(&row_bits[bits_row], bits);
  }
  __syncthreads();
  // The rows' scales, a warp a row. A row holding +-inf or NaN is quantized here by its warp, with the reference's
  // arithmetic (fmaxf amax skips NaN, IEEE division, NaN codes keep the input's sign), as quantize_fp8_token_rows.
  for (int r = warp; r < kBlockM; r += kWarps) {
    if (row_src[r] < 0) {
      if (lane == 0) row_scales[r] = 1.0f;
      continue;
    }
    const unsigned bits = row_bits[r];
    if (bits < kHalfInfBits<kBf16>) {
      // Every element finite: amax is the largest magnitude itself, s is finite and normal.
      if (lane == 0) row_scales[r] = fp8_token_scale(half_bits_to_f32<kBf16>(bits));
      continue;
    }
    const uint4* staged_row = reinterpret_cast<const uint4*>(staged + r * stride);
    float amax = 0.0f;
    for (int v = lane; v < vecs; v += 32) {
      HalfVec<8> x;
      x.raw = staged_row[v];
      float f[8];
      unpack_half_vec<kBf16, 8>(x, f);
      amax = fmaxf(amax, abs_max(f));
    }
    amax = warp_max(amax, 32);
    const float scale = fp8_token_scale(amax);
    if (lane == 0) row_scales[r] = scale;
    for (int v = lane; v < vecs; v += 32) {
      HalfVec<8> x;
      x.raw = staged_row[v];
      float f[8];
      unpack_half_vec<kBf16, 8>(x, f);
      store_e4m3<true, 8>(sink, static_cast<long long>(r) * stride + 8 * v, f, scale, 1.0f);
    }
  }
  // Pass 2: the finite rows' codes, each thread over the vectors it staged. No barrier before it: it takes each scale
  // from row_bits as the loop above does (the same bits), and writes no row the loop above writes.
  int scale_row = -1;
  bool finite = false;
  float scale = 1.0f, inv_scale = 1.0f;
#pragma unroll 1
  for (Cursor c = walk.first(tid); c.r < kBlockM; c = walk.advance(c, kThreads)) {
    if (c.r != scale_row) {
      scale_row = c.r;
      const unsigned bits = row_bits[c.r];
      finite = bits < kHalfInfBits<kBf16>;
      scale = fp8_token_scale(half_bits_to_f32<kBf16>(finite ? bits : 0u));
      inv_scale = __frcp_rn(scale);
    }
    if (!finite) continue;
    HalfVec<8> x;
    x.raw = reinterpret_cast<const uint4*>(staged + c.r * stride)[c.v];
    sink.e4m3x8(static_cast<long long>(c.r) * stride + 8 * c.v, encode_finite_fp8_token_x8<kBf16>(x, scale, inv_scale),
                1.0f);
  }
}

}  // namespace moeq_dev
