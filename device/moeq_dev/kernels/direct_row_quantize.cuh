#pragma once
// A direct tile that makes its own A rows (Cfg::kQuantizesRows, an FP8 per-token layer at the smallest M): each real
// row of the block, GEMM2's the activation of GEMM1's gate_up row (moe/quantize_common.cuh ActivationSource) and a
// self-routed GEMM1's the caller's row of x (PlainRowsSource), is quantized to FP8 per token exactly as the
// quantizer kernels do (moe/quantize_fp8_token.cuh: the same amax of magnitude bits, scale, reciprocal and rounding),
// kept in shared memory as the codes' 16-bit values, its scale in the block's row scales. The K loop then reads its
// token fragments from there.
// Why: at the smallest M the FP8 step ran GEMM1's quantizer in the routing's launch, which kept GEMM1 from starting
// before the routing (self-routed, as the bf16 step's does).
// PERF: session 68 (H100, bench/results/2026-12-07-h100-s68-rows-quantized.md): the self-routed GEMM1's rows -1.0 to
// -2.8 us a step at Qwen3-30B-A3B M = 1; GEMM2's rows (no activation-quantize kernel between the GEMMs) +0.4 to +4.2
// us at M = 1-16, so the host leaves them off (kQuantizingGemm2MaxRows). Each CTA of a block's N tiles redoes its
// rows' work.
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

// Block rows r = warp, warp + kWarps, ... of `row_src` (-1: padding, scale 1, nothing staged): staged[r * stride + k]
// the 16-bit value of the row's e4m3 code at k (0 past K), row_scales[r] its scale. The caller syncs the CTA after.
template <bool kBf16, int kBlockM, int kWarps, class Source>
__device__ __forceinline__ void quantize_block_rows_fp8_token(const Source& source, const int* row_src, int K,
                                                              unsigned short* staged, float* row_scales, int warp,
                                                              int lane) {
  constexpr int kGroup = 4;  // a lane fetches kGroup vectors before it uses the first
  const int vecs = K / 8, stride = staged_row_stride(K), row_vecs = (stride - 8) / 8;
  const CodeSink<QuantFormat::kFp8Token, kBf16, true> sink{reinterpret_cast<unsigned char*>(staged), 0};
  for (int r = warp; r < kBlockM; r += kWarps) {
    const int row = row_src[r];
    if (row < 0) {
      if (lane == 0) row_scales[r] = 1.0f;
      continue;
    }
    uint4* staged_row = reinterpret_cast<uint4*>(staged + r * stride);
    unsigned bits = 0;
#pragma unroll 1
    for (int v0 = lane; v0 < vecs; v0 += kGroup * 32) {
      decltype(source.template fetch<8>(0LL, 0LL)) in[kGroup];
#pragma unroll
      for (int j = 0; j < kGroup; ++j)
        if (v0 + 32 * j < vecs) in[j] = source.template fetch<8>(row, 8LL * (v0 + 32 * j));
#pragma unroll
      for (int j = 0; j < kGroup; ++j)
        if (v0 + 32 * j < vecs) {
          const HalfVec<8> x = source.template from_inputs<8>(in[j]);
          staged_row[v0 + 32 * j] = x.raw;
          bits = max(bits, abs_max_bits<8>(x));
        }
    }
    for (int v = vecs + lane; v < row_vecs; v += 32) staged_row[v] = make_uint4(0, 0, 0, 0);
    bits = __reduce_max_sync(0xFFFFFFFFu, bits);
    // Each lane rewrites only the vectors it staged: no sync between the passes.
    if (bits < kHalfInfBits<kBf16>) {
      // Every element finite: amax is the largest magnitude itself, s is finite and normal.
      const float scale = fp8_token_scale(half_bits_to_f32<kBf16>(bits));
      const float inv_scale = __frcp_rn(scale);
      if (lane == 0) row_scales[r] = scale;
      for (int v = lane; v < vecs; v += 32) {
        HalfVec<8> x;
        x.raw = staged_row[v];
        sink.e4m3x8(static_cast<long long>(r) * stride + 8 * v, encode_finite_fp8_token_x8<kBf16>(x, scale, inv_scale), 1.0f);
      }
      continue;
    }
    // The row holds +-inf or NaN: the reference's arithmetic (fmaxf amax skips NaN, IEEE division, NaN codes keep the
    // input's sign), as quantize_fp8_token_rows.
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
}

}  // namespace moeq_dev
