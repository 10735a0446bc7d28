#pragma once
// Dequantization straight into mma.sync A fragments (GEMM v3 and v4: the weights are the A operand).
// A lane owns 16 consecutive codes of each of its two weight rows (g and g + 8) per 64-wide K
// tile (kernels/moe_gemm_sync.cuh explains the K order), so it needs one scale per row and K tile:
// every group (MX 32, NVFP4 16, INT 32/64/128, FP8 block 128) holds whole 16-code runs.
// NOTE: NVRTC-safe: no standard headers.
#include "moeq_dev/format/weights.cuh"

namespace moeq_dev {

// Where a lane finds the scales of one weight row: the row's first scale (and zero point) and
// the group of a column, k >> group_shift. Computed once per CTA, so the K loop only shifts
// and adds.
// NOTE: a row past N reads row N - 1's scales (its codes are zeros and its outputs are never
// stored): the K loop then loads with no null test.
struct LaneScaleRow {
  const unsigned char* scales = nullptr;
  const unsigned char* zero_points = nullptr;  // INT with zero points
};

template <class Cfg>
__device__ __forceinline__ constexpr int scale_elem_bytes() {
  constexpr WeightFormatId F = Cfg::kFormat;
  if constexpr (F == WeightFormatId::kMxfp4 || F == WeightFormatId::kMxfp8 || F == WeightFormatId::kNvfp4) return 1;
  if constexpr (F == WeightFormatId::kFp8Channel || F == WeightFormatId::kFp8Block) return 4;
  return ScaleStorage<Cfg>::kDtype == ScaleDtypeId::kF32 ? 4 : 2;
}

// NOTE: groups are powers of two (MX 32, NVFP4 16, FP8 block 128, INT 32/64/128); one scale per
// row (FP8 channel, INT per channel) is the shift 30: every k < 2^30 lands in group 0.
template <class Cfg>
__device__ __forceinline__ int scale_group_shift(const WeightScaling& w) {
  constexpr WeightFormatId F = Cfg::kFormat;
  if constexpr (F == WeightFormatId::kMxfp4 || F == WeightFormatId::kMxfp8) return 5;
  if constexpr (F == WeightFormatId::kNvfp4) return 4;
  if constexpr (F == WeightFormatId::kFp8Block) return 7;
  if constexpr (F == WeightFormatId::kFp8Channel) return 30;
  return w.group_size > 0 ? 31 - __clz(w.group_size) : 30;
}

template <class Cfg>
__device__ __forceinline__ LaneScaleRow lane_scale_row(const WeightScaling& w, int e, int n, int N, int K) {
  LaneScaleRow r;
  constexpr WeightFormatId F = Cfg::kFormat;
  n = n < N ? n : N - 1;
  const long long row = static_cast<long long>(e) * N + n;
  const unsigned char* base = static_cast<const unsigned char*>(w.scales);
  if constexpr (F == WeightFormatId::kMxfp4 || F == WeightFormatId::kMxfp8) {
    r.scales = base + row * (K / 32);
  } else if constexpr (F == WeightFormatId::kNvfp4) {
    r.scales = base + row * (K / 16);
  } else if constexpr (F == WeightFormatId::kFp8Channel) {
    r.scales = base + row * 4;
  } else if constexpr (F == WeightFormatId::kFp8Block) {
    const int blocks_n = (N + 127) / 128, blocks_k = (K + 127) / 128;
    r.scales = base + (static_cast<long long>(e) * blocks_n + n / 128) * blocks_k * 4;
  } else {
    const long long groups = w.group_size > 0 ? K / w.group_size : 1;
    r.scales = base + row * groups * scale_elem_bytes<Cfg>();
    if (ScaleStorage<Cfg>::kZeroPoints) r.zero_points = w.zero_points + row * groups;
  }
  return r;
}

// The raw bits of one lane's scale (and zero point) for its 16 codes of a group: loaded a few
// K tiles ahead and decoded only when used, so the load's latency stays hidden.
// NOTE: codes past K (a partial last tile) take the row's last group: their codes and
// activations are zero-filled, and a scale that is not finite there would make the row's
// outputs non-finite anyway.
struct LaneScale {
  unsigned bits = 0;
  unsigned zero_point = 0;
};

// PERF: the element size and the zero points are compile-time (ScaleStorage): one load per row
// and K tile, no run-time dtype branches (GEMM v3 spent ~35 instructions per K tile here).
// PERF: no null or bounds test per load (LaneScaleRow, LaneScale): GEMM v7 spent ~28
// instructions per K tile on 4 scale loads of the memory-bound INT4 tile, 14 without them.
template <class Cfg>
__device__ __forceinline__ LaneScale load_lane_scale(const LaneScaleRow& r, int group) {
  LaneScale s;
  constexpr int kBytes = scale_elem_bytes<Cfg>();
  if constexpr (kBytes == 1) {
    s.bits = __ldg(r.scales + group);
  } else if constexpr (kBytes == 2) {
    s.bits = __ldg(reinterpret_cast<const unsigned short*>(r.scales) + group);
  } else {
    s.bits = __ldg(reinterpret_cast<const unsigned*>(r.scales) + group);
  }
  if constexpr (ScaleStorage<Cfg>::kZeroPoints) s.zero_point = __ldg(r.zero_points + group);
  return s;
}

// A lane's scale, decoded once per K tile: the fp32 values for the generic path and the
// bf16x2 multipliers of the fast paths.
struct FragmentScale {
  float scale = 1.0f;       // on the weights (1 when it is on the accumulators)
  float acc_scale = 1.0f;   // on the fp32 accumulators (decode_lane_scale<Cfg, true>)
  float zero_point = 0.0f;  // INT
  unsigned scale2 = 0;      // bf16x2 splat of the scale (fast paths)
  unsigned neg_offset2 = 0; // INT4 fast paths: splat of -(zero_point + 128) (bf16) or -(zero_point + 1024) (f16)
  unsigned scale2_folded = 0;  // MX: bf16x2 splat of scale * 2^126; FP8 block: bf16(scale) * 2^120
  bool foldable = false;       // MX: scale <= 2, so scale * 2^126 fits bf16
};

// FP8 128x128-block scales with bf16 activations: the e4m3 bias 2^120 and the bf16-rounded scale
// can be one multiplier wherever |bf16(scale)| < 2^8 (fp8_block_scale_foldable), which the
// warp-specialized GEMM checks once per CTA for all of its scales.
template <class Cfg>
struct Fp8BlockFoldable {
  static constexpr bool value = Cfg::kActBf16 && Cfg::kFormat == WeightFormatId::kFp8Block;
};

// NOTE: bf16 exponent field <= 134 (|s| < 2^8): s * 2^120 is then a finite bf16, exact also for
// subnormal and zero s, so (code * 2^-120) * (s * 2^120) rounds exactly as (code * s) does.
__device__ __forceinline__ bool fp8_block_scale_foldable(float scale) {
  return ((f32_to_bf16_rn(scale) >> 7) & 0xFFu) <= 134u;
}

// Formats whose fast path can fold the e2m1 bias into the scale (MXFP4 with bf16 activations).
template <class Cfg>
struct MxFoldable {
  static constexpr bool value = Cfg::kActBf16 && Cfg::kFormat == WeightFormatId::kMxfp4;
};

// Formats whose scale can multiply the fp32 accumulators once per K tile instead of every weight:
// one scale per row over a whole 64-k tile, i.e. INT4 and INT8 with groups of >= 64 (or per
// channel; the caller checks the group at run time) and the FP8 128x128 block. Then the
// dequantized values are exact (INT code - zp: at most 8 significant bits) or exact up to the
// 2^120 bias (e4m3), and the fp32 block scale is no longer rounded to bf16.
// NOTE: INT8 joined in issue 5: (code - 128) x scale rounded to bf16 (2^-9 relative per weight)
// moved GEMM1's output enough to flip FP8 per-token codes of the intermediate, and int8-ch with
// fp8-token activations missed CONTRACT §8 (rel 0.024 at M = 7 on the H200).
template <class Cfg>
struct AccumulatorScaled {
  static constexpr bool value = Cfg::kFormat == WeightFormatId::kInt4 || Cfg::kFormat == WeightFormatId::kInt8 ||
                                Cfg::kFormat == WeightFormatId::kFp8Block;
};

// kOnAccumulators: the scale goes to `acc_scale` for the fp32 accumulators; the weights get 1.
template <class Cfg, bool kOnAccumulators = false>
__device__ __forceinline__ FragmentScale decode_lane_scale(const LaneScale& raw, const WeightScaling& w) {
  constexpr WeightFormatId F = Cfg::kFormat;
  FragmentScale f;
  if constexpr (F == WeightFormatId::kMxfp4 || F == WeightFormatId::kMxfp8) {
    f.scale = ue8m0_to_f32(raw.bits);
  } else if constexpr (F == WeightFormatId::kNvfp4) {
    f.scale = e4m3_to_f32(raw.bits);
  } else if constexpr (F == WeightFormatId::kFp8Channel) {
    f.scale = 1.0f;  // on the accumulators
  } else if constexpr (F == WeightFormatId::kFp8Block) {
    f.scale = __uint_as_float(raw.bits);
  } else {
    constexpr ScaleDtypeId D = ScaleStorage<Cfg>::kDtype;
    f.scale = D == ScaleDtypeId::kF32    ? __uint_as_float(raw.bits)
              : D == ScaleDtypeId::kBf16 ? __uint_as_float(raw.bits << 16)
                                         : f16_to_f32(static_cast<unsigned short>(raw.bits));
    f.zero_point = ScaleStorage<Cfg>::kZeroPoints ? static_cast<float>(raw.zero_point)
                   : F == WeightFormatId::kInt4   ? 8.0f
                                                  : 128.0f;
  }
  if constexpr (kOnAccumulators) {
    static_assert(AccumulatorScaled<Cfg>::value, "scale on the accumulators: INT4, INT8 or FP8 block");
    f.acc_scale = f.scale;
    f.scale = 1.0f;
    f.scale2 = Cfg::kActBf16 ? kBf16x2One : kF16x2One;
    if constexpr (F == WeightFormatId::kInt4) {
      // NOTE: -(128 + zp) in bf16 is 0xC300 | zp and -(1024 + zp) in f16 is 0xE400 | zp, exact
      // for the zero points [0, 15] that validation admits.
      const unsigned zp = ScaleStorage<Cfg>::kZeroPoints ? raw.zero_point : 8u;
      f.neg_offset2 = ((Cfg::kActBf16 ? 0xC300u : 0xE400u) | zp) * 0x10001u;
    }
    return f;
  }
  if constexpr (Cfg::kActBf16) {
    // NOTE: exact for MX (powers of two), NVFP4 (e4m3) and INT with bf16 scales; the FP8-block
    // fp32 scale is rounded here (docs/numerics.md).
    if constexpr (F == WeightFormatId::kMxfp4 || F == WeightFormatId::kMxfp8) {
      // PERF: the bf16 bits of 2^(b - 127) straight from the code: b << 7, with code 0 the bf16
      // subnormal 2^-127 and 255 NaN; no fp32 detour (this runs per row and K tile).
      const unsigned b = raw.bits & 0xFFu;
      f.scale2 = (b == 0 ? 0x0040u : b == 255 ? 0x7FC0u : b << 7) * 0x10001u;
      // 2^(b - 127) * 2^126 = 2^(b - 1): bf16 exponent field b + 126, a normal number for b <= 128.
      f.foldable = b <= 128;
      f.scale2_folded = ((b + 126) << 7) * 0x10001u;
    } else if constexpr (F == WeightFormatId::kInt4) {
      f.scale2 = ScaleStorage<Cfg>::kDtype == ScaleDtypeId::kBf16 ? (raw.bits & 0xFFFFu) * 0x10001u
                                                                  : bf16x2_splat(f32_to_bf16_rn(f.scale));
    } else {
      f.scale2 = bf16x2_splat(f32_to_bf16_rn(f.scale));
      if constexpr (F == WeightFormatId::kFp8Block) f.scale2_folded = bf16x2_mul(f.scale2, kBf16x2TwoPow120);
    }
    if constexpr (F == WeightFormatId::kInt4) f.neg_offset2 = bf16x2_splat(f32_to_bf16_rn(-(f.zero_point + 128.0f)));
  }
  return f;
}

// Two fp32 values rounded once to the activation dtype, lo in the low half.
template <bool kBf16>
__device__ __forceinline__ unsigned pack_act2(float lo, float hi) {
  return kBf16 ? (f32_to_bf16_rn(lo) | (static_cast<unsigned>(f32_to_bf16_rn(hi)) << 16))
               : (f32_to_f16_rn(lo) | (static_cast<unsigned>(f32_to_f16_rn(hi)) << 16));
}

// fp32 value of one code (before the epilogue's accumulator scales).
template <class Cfg>
__device__ __forceinline__ float lane_code_value(unsigned code, const FragmentScale& s) {
  constexpr WeightFormatId F = Cfg::kFormat;
  if constexpr (F == WeightFormatId::kMxfp4 || F == WeightFormatId::kNvfp4) return e2m1_to_f32(code) * s.scale;
  if constexpr (F == WeightFormatId::kMxfp8 || F == WeightFormatId::kFp8Channel || F == WeightFormatId::kFp8Block)
    return e4m3_to_f32(code) * s.scale;
  // NOTE: 2^23 + code as float bits, minus 2^23 + zero point: both exact, no int -> float convert.
  return (__uint_as_float(0x4B000000u | code) - (8388608.0f + s.zero_point)) * s.scale;
}

// Whether the bf16 fast paths (format/weights_fast.cuh) serve this config: INT8 cannot hold
// 128 + code in bf16; INT4 takes it only with bf16 scales (ScaleStorage, checked by the caller).
template <class Cfg>
struct FragmentFastPath {
  static constexpr bool value = Cfg::kActBf16 && Cfg::kFormat != WeightFormatId::kInt8;
};

// How a K tile's codes become A-fragment values (chosen per tile by the GEMM; constant at each
// inlined call site, so no branch survives in the dequantization):
enum class DequantPath : int {
  kGeneric,   // fp32 decode x scale, one rounding (INT8, f16 activations, INT4 with f16 scales,
              // where the scale stays on the weights)
  kFast,      // bf16 bit tricks with the scale on the weights (FragmentFastPath)
  kFolded,    // the e2m1 bias 2^126 (MXFP4, MxFoldable) or the e4m3 bias 2^120 (FP8 block,
              // Fp8BlockFoldable) and the scale are one multiplier
  kUnscaled,  // the scale is on the accumulators (AccumulatorScaled): exact values (INT4 code - zp,
              // e4m3 value) in bf16 or f16
};

// A path as a type, for the loop bodies instantiated once per path.
template <DequantPath P>
struct DequantPathTag {
  static constexpr DequantPath value = P;
};

// The path with the scale on the weights: the bf16 fast path where it serves (INT4 only with
// bf16 scales, which multiply the pair as they are), else the generic one.
template <class Cfg>
struct WeightsPath {
  static constexpr DequantPath value =
      FragmentFastPath<Cfg>::value &&
              (Cfg::kFormat != WeightFormatId::kInt4 || ScaleStorage<Cfg>::kDtype == ScaleDtypeId::kBf16)
          ? DequantPath::kFast
          : DequantPath::kGeneric;
};

// A lane's scale rows (its fragment rows g and g + 8 of kTilesN 16-channel tiles) and the
// group shift, found once per CTA; load() fills a ring slot with the raw scales of K tile kt.
template <class Cfg, int kTilesN>
struct LaneScaleRows {
  LaneScaleRow rows[kTilesN][2];
  int group_shift;

  // channel_of(nt, r): the block-relative channel of tile nt's row g + 8 r.
  template <class ChannelOf>
  __device__ __forceinline__ LaneScaleRows(const WeightScaling& w, int e, int n0, int N, int K, ChannelOf channel_of) {
#pragma unroll
    for (int nt = 0; nt < kTilesN; ++nt)
#pragma unroll
      for (int r = 0; r < 2; ++r) rows[nt][r] = lane_scale_row<Cfg>(w, e, n0 + channel_of(nt, r), N, K);
    group_shift = scale_group_shift<Cfg>(w);
  }

  // The raw scales of every row at column k (past K: the row's last group, LaneScale).
  __device__ __forceinline__ void load(LaneScale (&slot)[kTilesN][2], int k, int K) const {
    if constexpr (Cfg::kFormat == WeightFormatId::kFp8Channel) return;  // on the accumulators
    const int group = (k < K ? k : K - 1) >> group_shift;
#pragma unroll
    for (int nt = 0; nt < kTilesN; ++nt)
#pragma unroll
      for (int r = 0; r < 2; ++r) slot[nt][r] = load_lane_scale<Cfg>(rows[nt][r], group);
  }
};

// One word of eight 4-bit codes (elements 0-7 in nibble order) -> four 16-bit pairs in element
// order: out[0] = (e0, e1), ..., out[3] = (e6, e7).
template <class Cfg>
__device__ __forceinline__ void dequant_word4(unsigned w, const FragmentScale& s, DequantPath path, unsigned (&out)[4]) {
  constexpr WeightFormatId F = Cfg::kFormat;
  if constexpr (F == WeightFormatId::kInt4) {
    if (path == DequantPath::kUnscaled) {
      int4_word_to_act<Cfg::kActBf16>(w, s.neg_offset2, 0u, true, out);
      return;
    }
  }
  if constexpr (FragmentFastPath<Cfg>::value) {
    if constexpr (F == WeightFormatId::kInt4) {
      if (path == DequantPath::kFast) {
        int4_word_to_act<true>(w, s.neg_offset2, s.scale2, false, out);
        return;
      }
    } else if (MxFoldable<Cfg>::value && path == DequantPath::kFolded) {
      e2m1_word_to_bf16(w, s.scale2_folded, true, out);
      return;
    } else {
      e2m1_word_to_bf16(w, s.scale2, false, out);
      return;
    }
  }
#pragma unroll
  for (int i = 0; i < 4; ++i) {
    const float lo = lane_code_value<Cfg>((w >> (8 * i)) & 0xFu, s);
    const float hi = lane_code_value<Cfg>((w >> (8 * i + 4)) & 0xFu, s);
    out[i] = pack_act2<Cfg::kActBf16>(lo, hi);
  }
}

// One word of four 8-bit codes -> out[0] = (e0, e1), out[1] = (e2, e3).
// NOTE: with the scale on the weights (kFast) the FP8-block fp32 scale is rounded to bf16
// (docs/numerics.md); kUnscaled leaves it to the accumulators.
template <class Cfg>
__device__ __forceinline__ void dequant_word8(unsigned w, const FragmentScale& s, DequantPath path, unsigned (&out)[2]) {
  constexpr WeightFormatId F = Cfg::kFormat;
  if constexpr (FragmentFastPath<Cfg>::value) {
    if (Fp8BlockFoldable<Cfg>::value && path == DequantPath::kFolded) {
      e4m3_word_to_bf16_folded(w, s.scale2_folded, out);
      return;
    }
    e4m3_word_to_bf16(w, s.scale2, F != WeightFormatId::kFp8Channel && path != DequantPath::kUnscaled, out);
  } else {
#pragma unroll
    for (int i = 0; i < 2; ++i) {
      const float lo = lane_code_value<Cfg>((w >> (16 * i)) & 0xFFu, s);
      const float hi = lane_code_value<Cfg>((w >> (16 * i + 8)) & 0xFFu, s);
      out[i] = pack_act2<Cfg::kActBf16>(lo, hi);
    }
  }
}

}  // namespace moeq_dev

// ---- Prepared codes (format/prepared.cuh): one 32-bit word holds whole A-fragment pairs ----
namespace moeq_dev {

// The bf16 bits (e2m1 value times 2^-126 in each half) of register p of a prepared e2m1 word
// (format/prepared_map.cuh, e2m1_prepared_bit). p is a constant at every call site.
__device__ __forceinline__ unsigned e2m1_prepared_bits(unsigned w, int p) {
  constexpr unsigned kPairBits = 0x81C081C0u;  // e1 e0 m at 8..6 and the sign at 15, both halves
  if (p == 0) return w & kPairBits;
  if (p == 1) return __funnelshift_r(w, w, 4) & kPairBits;
  if (p == 2) return __funnelshift_r(w, w, 10) & kPairBits;
  return (__funnelshift_r(w, w, 6) & 0x81808180u) | (__funnelshift_r(w, w, 14) & 0x00400040u);
}

// Pair p of a word of eight 4-bit codes: nibbles p (low half) and p + 4 (high half), as the
// prepared layout stores the (k, k + 1) codes of one fragment register (e2m1: moved bits).
template <class Cfg>
__device__ __forceinline__ unsigned dequant_pair4(unsigned w, int p, const FragmentScale& s, DequantPath path) {
  constexpr WeightFormatId F = Cfg::kFormat;
  if constexpr (F == WeightFormatId::kInt4) {
    if (path == DequantPath::kUnscaled) return int4_pair_unscaled<Cfg::kActBf16>(w >> (4 * p), s.neg_offset2);
  }
  unsigned x;  // the two codes in the low nibble of each half
  if constexpr (F == WeightFormatId::kInt4) {
    x = (w >> (4 * p)) & 0x000F000Fu;
  } else {
    const unsigned b = e2m1_prepared_bits(w, p);
    x = ((b >> 6) & 0x00070007u) | ((b >> 12) & 0x00080008u);
  }
  if constexpr (FragmentFastPath<Cfg>::value) {
    if constexpr (F == WeightFormatId::kInt4) {
      if (path == DequantPath::kFast) return bf16x2_mul(int4_pair_unscaled<true>(w >> (4 * p), s.neg_offset2), s.scale2);
    } else {
      constexpr unsigned kTwoPow126 = 0x7E807E80u;
      const unsigned bits = e2m1_prepared_bits(w, p);
      // NOTE: bits are the e2m1 value times 2^-126 (exact); times 2^(b - 1) it is the exact
      // value times the scale, as the two-multiply path computes.
      if (MxFoldable<Cfg>::value && path == DequantPath::kFolded) return bf16x2_mul(bits, s.scale2_folded);
      return bf16x2_mul(bf16x2_mul(bits, kTwoPow126), s.scale2);
    }
  }
  const float lo = lane_code_value<Cfg>(x & 0xFu, s);
  const float hi = lane_code_value<Cfg>(x >> 16, s);
  return pack_act2<Cfg::kActBf16>(lo, hi);
}

// Pair i of a word of four 8-bit codes: bytes i and i + 2.
template <class Cfg>
__device__ __forceinline__ unsigned dequant_pair8(unsigned w, int i, const FragmentScale& s, DequantPath path) {
  constexpr WeightFormatId F = Cfg::kFormat;
  if constexpr (FragmentFastPath<Cfg>::value) {
    if (Fp8BlockFoldable<Cfg>::value && path == DequantPath::kFolded) return bf16x2_mul(e4m3_pair_bits(w, i, i + 2), s.scale2_folded);
    const unsigned value = bf16x2_mul(e4m3_pair_bits(w, i, i + 2), kBf16x2TwoPow120);
    // FP8 per channel, and FP8 block with kUnscaled: the scale is on the accumulators.
    if (F == WeightFormatId::kFp8Channel || path == DequantPath::kUnscaled) return value;
    return bf16x2_mul(value, s.scale2);
  } else {
    const unsigned x = (w >> (8 * i)) & 0x00FF00FFu;
    const float lo = lane_code_value<Cfg>(x & 0xFFu, s);
    const float hi = lane_code_value<Cfg>(x >> 16, s);
    return pack_act2<Cfg::kActBf16>(lo, hi);
  }
}

}  // namespace moeq_dev
