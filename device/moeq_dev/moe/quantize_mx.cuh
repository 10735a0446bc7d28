#pragma once
// The MXFP8 and MXFP4 activation quantizers (moe/quantize.cuh: their contract).
// NOTE: NVRTC-safe: no standard headers.
#include "moeq_dev/format/ue8m0.cuh"
#include "moeq_dev/moe/quantize_common.cuh"

namespace moeq_dev {

// ---- MXFP8 / MXFP4, 16-byte path: one thread per 8 elements, 4 lanes per 32-element block ----
// PERF: the block amax is two shuffles of an integer max; no shared memory, no row-wide step, so
// the whole tensor is one flat grid-stride loop over 16-byte vectors (rows * cols / 8 items). A
// lane issues kMxItems independent loads before the first use. Dense rows (stride = cols) need no
// row index: codes, scales and inputs are all at item-proportional offsets (the per-item 32-bit
// division cost about 15 instructions per 8 elements). With the division-free scale code and the
// NaN-free encoders: MXFP8 53-56% -> 83-88%, MXFP4 31% -> 81-86% of copy at M = 4096 (H200).
constexpr int kMxItems = 4;

template <QuantFormat kFormat, bool kBf16, bool kValues, class Source>
__device__ __forceinline__ void quantize_mx_vec8(const Source& source, int rows, int cols, unsigned char* codes,
                                                 unsigned char* scales, GridSlice grid, int mma_order) {
  constexpr bool kFp4 = kFormat == QuantFormat::kMxfp4;
  const CodeSink<kFormat, kBf16, kValues> sink{codes, mma_order};
  // PERF: 32-bit item arithmetic (the host keeps rows * cols / 8 below 2^31).
  const unsigned vecs_per_row = static_cast<unsigned>(cols) / 8u;
  const unsigned num_items = static_cast<unsigned>(rows) * vecs_per_row;
  const bool dense = source.dense(cols);
  const unsigned lane = threadIdx.x % 32;
  const unsigned group_mask = 0xFu << (lane & ~3u);
  // NOTE: a warp walks kMxItems runs of 32 consecutive items and num_items is a multiple of 4,
  // so each 4-lane group is all in range or all out: the shuffles see every lane they read.
  for (unsigned base = (grid.block * blockDim.x + (threadIdx.x - lane)) * kMxItems; base < num_items;
       base += grid.blocks * blockDim.x * kMxItems) {
    HalfVec<8> raw[kMxItems];
#pragma unroll
    for (int k = 0; k < kMxItems; ++k) {
      const unsigned item = base + 32u * k + lane;
      if (item < num_items) {
        if (dense) {
          raw[k] = source.load_dense(static_cast<long long>(item) * 8);
        } else {
          const unsigned row = item / vecs_per_row;
          raw[k] = source.template load<8>(row, static_cast<long long>(item - row * vecs_per_row) * 8);
        }
      } else {
        raw[k].raw = make_uint4(0u, 0u, 0u, 0u);
      }
    }
#pragma unroll
    for (int k = 0; k < kMxItems; ++k) {
      const unsigned item = base + 32u * k + lane;
      const bool ok = item < num_items;
      unsigned bits = abs_max_bits<8>(raw[k]);
      bits = max(bits, __shfl_xor_sync(0xFFFFFFFFu, bits, 1));
      bits = max(bits, __shfl_xor_sync(0xFFFFFFFFu, bits, 2));
      const unsigned amax_bits = __float_as_uint(half_bits_to_f32<kBf16>(bits));
      // Finite, normal-range amax (and bf16 for the packed e2m1 encoder): the fast encoders.
      const bool fast = amax_bits >= kUe8m0NarrowMinBits && amax_bits < kUe8m0NarrowEndBits && (kBf16 || !kFp4);
      unsigned char* scale_out = scales + item / 4;
      if (fast) {
        const unsigned code = ue8m0_scale_for_narrow<kFp4>(amax_bits);
        if (!ok) continue;
        if (lane % 4 == 0) *scale_out = static_cast<unsigned char>(code);
        // NOTE: kValues only: the values' scale; the code is at most 254 here (the narrow range).
        const float mx_scale = kValues ? ue8m0_to_f32(code) : 1.0f;
        if constexpr (kFp4) {
          sink.e2m1x8(static_cast<long long>(item) * 8, bf16x8_to_e2m1x8(raw[k].raw, (254u - code) * 0x00800080u),
                      mx_scale);
        } else {
          const float inv = __uint_as_float((254u - code) << 23);
          float f[8];
          unpack_half_vec<kBf16, 8>(raw[k], f);
          unsigned w[2];
#pragma unroll
          for (int i = 0; i < 2; ++i)
            w[i] = f32x2_to_e4m3x2_no_nan(__fmul_rn(f[4 * i], inv), __fmul_rn(f[4 * i + 1], inv)) |
                   (f32x2_to_e4m3x2_no_nan(__fmul_rn(f[4 * i + 2], inv), __fmul_rn(f[4 * i + 3], inv)) << 16);
          sink.e4m3x8(static_cast<long long>(item) * 8, make_uint2(w[0], w[1]), mx_scale);
        }
        continue;
      }
      // Zero, tiny, +-inf or NaN in the block (or f16 MXFP4): the reference's arithmetic. The
      // condition is uniform over the 4-lane group, so the group's shuffles are complete.
      float f[8];
      unpack_half_vec<kBf16, 8>(raw[k], f);
      float amax = __uint_as_float(amax_bits);
      if (bits > kHalfInfBits<kBf16>) {  // a NaN: fmaxf skips it
        amax = abs_max(f);
        amax = fmaxf(amax, __shfl_xor_sync(group_mask, amax, 1));
        amax = fmaxf(amax, __shfl_xor_sync(group_mask, amax, 2));
      }
      const unsigned code = ue8m0_scale_for(amax, kFp4 ? kE2m1MaxValue : kE4m3MaxValue);
      const float inv = ue8m0_inverse_scale(code);
      if (!ok) continue;
      if (lane % 4 == 0) *scale_out = static_cast<unsigned char>(code);
      const float mx_scale = kValues ? ue8m0_to_f32(code) : 1.0f;
      if constexpr (kFp4) {
        unsigned packed = 0;
#pragma unroll
        for (int i = 0; i < 8; i += 2) {
          const float lo = f[i] != f[i] ? f[i] : __fmul_rn(f[i], inv);
          const float hi = f[i + 1] != f[i + 1] ? f[i + 1] : __fmul_rn(f[i + 1], inv);
          packed |= f32x2_to_e2m1x2(lo, hi) << (4 * i);
        }
        sink.e2m1x8(static_cast<long long>(item) * 8, packed, mx_scale);
      } else {
        store_e4m3<false, 8>(sink, static_cast<long long>(item) * 8, f, inv, mx_scale);
      }
    }
  }
}

// ---- MX scalar fallback (rows not 16-byte aligned): one thread per 32-element block ----
template <QuantFormat kFormat, bool kBf16, bool kValues, class Source>
__device__ __forceinline__ void quantize_mx_scalar(const Source& source, int rows, int cols, unsigned char* codes,
                                                   unsigned char* scales, GridSlice grid, int mma_order) {
  constexpr bool kFp4 = kFormat == QuantFormat::kMxfp4;
  const CodeSink<kFormat, kBf16, kValues> sink{codes, mma_order};
  const long long blocks_per_row = cols / kMxBlock;
  const long long num_items = static_cast<long long>(rows) * blocks_per_row;
  for (long long item = static_cast<long long>(grid.block) * blockDim.x + threadIdx.x; item < num_items;
       item += static_cast<long long>(grid.blocks) * blockDim.x) {
    const long long row = item / blocks_per_row;
    const long long b = item - row * blocks_per_row;
    float f[kMxBlock];
#pragma unroll
    for (int i = 0; i < kMxBlock; ++i) f[i] = half_to_f32<kBf16>(source.template load<1>(row, b * kMxBlock + i).raw);
    const unsigned code = ue8m0_scale_for(abs_max(f), kFp4 ? kE2m1MaxValue : kE4m3MaxValue);
    const float inv = ue8m0_inverse_scale(code);
    scales[item] = static_cast<unsigned char>(code);
    const float mx_scale = kValues ? ue8m0_to_f32(code) : 1.0f;
#pragma unroll
    for (int i = 0; i < kMxBlock; ++i) f[i] = f[i] != f[i] ? f[i] : __fmul_rn(f[i], inv);
    const long long block_elem = row * static_cast<long long>(cols) + b * kMxBlock;
    if constexpr (kFp4 && !kValues) {
      // PERF: the byte pointer of the pre-CodeSink code: the sink's (e / 2) per pair cost ~120
      // instructions and 7 registers in this fallback (SASS of sm_90a, session 21 review).
      unsigned char* dst = codes + row * (cols / 2) + b * (kMxBlock / 2);
#pragma unroll
      for (int i = 0; i < kMxBlock; i += 2) dst[i / 2] = static_cast<unsigned char>(f32x2_to_e2m1x2(f[i], f[i + 1]));
    } else if constexpr (kFp4) {
#pragma unroll
      for (int i = 0; i < kMxBlock; i += 2) sink.e2m1x2(block_elem + i, f32x2_to_e2m1x2(f[i], f[i + 1]), mx_scale);
    } else {
#pragma unroll
      for (int i = 0; i < kMxBlock; ++i) sink.e4m3(block_elem + i, f32_to_e4m3(f[i]), mx_scale);
    }
  }
}

}  // namespace moeq_dev
