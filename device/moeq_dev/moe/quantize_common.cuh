#pragma once
// What the dynamic activation quantizers (moe/quantize.cuh) share: formats, limits, the code sinks,
// the sources they read (a buffer, or the activation of GEMM1's output).
// NOTE: NVRTC-safe: no standard headers.
#include "moeq_dev/format/fp4.cuh"
#include "moeq_dev/format/fp8.cuh"
#include "moeq_dev/format/mma_order.cuh"
#include "moeq_dev/moe/activation.cuh"
#include "moeq_dev/ptx/simd16.cuh"

namespace moeq_dev {

// Same order as moeq::ActFormat minus `none`.
enum class QuantFormat : int { kFp8Token, kMxfp8, kMxfp4 };

constexpr int kMxBlock = 32;
constexpr float kE4m3MaxValue = 448.0f;
constexpr float kE2m1MaxValue = 6.0f;
constexpr float kFp8TokenMinAmax = 1e-12f;
constexpr float kF16Max = 65504.0f;

// The CTAs a quantizer body runs on: CTA `block` of `blocks`. The whole grid for the quantizer's
// own launch; the CTAs past the routing's for a quantizer folded into a routing launch
// (kernels/routing.cuh), so both share one kernel boundary.
struct GridSlice {
  unsigned block, blocks;
};
__device__ __forceinline__ GridSlice whole_grid() { return GridSlice{blockIdx.x, gridDim.x}; }

// The 16-bit value of one code for the 16-bit GEMMs (moe/dequantize.cuh says why these values):
// MX q * 2^(code - 127) (`mx_scale`), FP8 per token q alone; f16 clamps to +-65504.
template <QuantFormat kFormat, bool kBf16>
__device__ __forceinline__ unsigned short code_value_bits(unsigned code, float mx_scale) {
  float x = kFormat == QuantFormat::kMxfp4 ? e2m1_to_f32(code) : e4m3_to_f32(code);
  if constexpr (kFormat != QuantFormat::kFp8Token) x *= mx_scale;
  if (!kBf16 && fabsf(x) > kF16Max) x = copysignf(kF16Max, x);  // NaN compares false: kept
  return f32_to_half<kBf16>(x);
}

// Where a quantizer's codes go: the codes buffer as reference/quantize.hpp lays it out, or, with
// kValues, their 16-bit values (code_value_bits) into a dense [rows, cols] buffer at the same
// element index: the quantize-dequantize of the 16-bit GEMM path in one kernel, bit for bit the
// dequantizer's output. mma_order != 0 (kValues, cols % 64 == 0): each value at its place in the
// MMA's K order instead (format/mma_order.cuh; a `/t` GEMM's input), pairs kept together; FP8
// per-token codes (not kValues, cols % 128 == 0): each code at its place in the e4m3 consumers' K
// order (e4m3_mma_order_position).
template <QuantFormat kFormat, bool kBf16, bool kValues>
struct CodeSink {
  unsigned char* out;  // codes, or with kValues the 16-bit values
  int mma_order;

  // Four pairs of values of elements [e, e + 8), e % 8 == 0.
  __device__ __forceinline__ void store_values8(long long e, const unsigned (&v)[4]) const {
    unsigned short* values = reinterpret_cast<unsigned short*>(out);
    if (mma_order) {
      store_pairs_in_mma_order(values, e, v);
    } else {
      *reinterpret_cast<uint4*>(values + e) = make_uint4(v[0], v[1], v[2], v[3]);
    }
  }
  __device__ __forceinline__ long long value_index(long long e) const { return mma_order ? mma_order_position(e) : e; }

  // Eight e4m3 codes (byte i of the pair = element i) of elements [e, e + 8).
  __device__ __forceinline__ void e4m3x8(long long e, uint2 w, float mx_scale) const {
    if constexpr (kValues) {
      unsigned v[4];
#pragma unroll
      for (int i = 0; i < 4; ++i) {
        const unsigned word = i < 2 ? w.x : w.y, shift = 16 * (i % 2);
        v[i] = code_value_bits<kFormat, kBf16>((word >> shift) & 0xFFu, mx_scale) |
               (static_cast<unsigned>(code_value_bits<kFormat, kBf16>((word >> (shift + 8)) & 0xFFu, mx_scale)) << 16);
      }
      store_values8(e, v);
    } else if (mma_order) {
      store_e4m3x8_in_mma_order(out, e, w);
    } else {
      *reinterpret_cast<uint2*>(out + e) = w;
    }
  }
  // Eight e2m1 codes (nibble i = element i) of elements [e, e + 8).
  __device__ __forceinline__ void e2m1x8(long long e, unsigned w, float mx_scale) const {
    if constexpr (kValues) {
      unsigned v[4];
#pragma unroll
      for (int i = 0; i < 4; ++i)
        v[i] = code_value_bits<kFormat, kBf16>((w >> (8 * i)) & 0xFu, mx_scale) |
               (static_cast<unsigned>(code_value_bits<kFormat, kBf16>((w >> (8 * i + 4)) & 0xFu, mx_scale)) << 16);
      store_values8(e, v);
    } else {
      *reinterpret_cast<unsigned*>(out + e / 2) = w;
    }
  }
  // One e4m3 code of element e.
  __device__ __forceinline__ void e4m3(long long e, unsigned code, float mx_scale) const {
    if constexpr (kValues) {
      reinterpret_cast<unsigned short*>(out)[value_index(e)] = code_value_bits<kFormat, kBf16>(code, mx_scale);
    } else {
      out[mma_order ? e4m3_mma_order_position(e) : e] = static_cast<unsigned char>(code);
    }
  }
  // Two e2m1 codes (low nibble = element e, e even).
  __device__ __forceinline__ void e2m1x2(long long e, unsigned byte, float mx_scale) const {
    if constexpr (kValues) {
      unsigned short* v = reinterpret_cast<unsigned short*>(out) + value_index(e);
      v[0] = code_value_bits<kFormat, kBf16>(byte & 0xFu, mx_scale);
      v[1] = code_value_bits<kFormat, kBf16>(byte >> 4, mx_scale);
    } else {
      out[e / 2] = static_cast<unsigned char>(byte);
    }
  }
};

__device__ __forceinline__ float warp_max(float v, int width) {
  for (int offset = width / 2; offset > 0; offset /= 2) v = fmaxf(v, __shfl_xor_sync(0xFFFFFFFFu, v, offset));
  return v;
}

template <int kVec>
__device__ __forceinline__ float abs_max(const float (&f)[kVec]) {
  float m = 0.0f;
#pragma unroll
  for (int i = 0; i < kVec; ++i) m = fmaxf(m, fabsf(f[i]));
  return m;
}

// kVec e4m3 codes of f[i] / s (FP8 per token) or f[i] * s (MX), of elements [e, e + kVec), into
// the sink (mx_scale: the values' scale, MX only).
template <bool kDivide, int kVec, class Sink>
__device__ __forceinline__ void store_e4m3(const Sink& sink, long long e, const float (&f)[kVec], float s,
                                           float mx_scale) {
  float q[kVec];
#pragma unroll
  for (int i = 0; i < kVec; ++i) q[i] = f[i] != f[i] ? f[i] : (kDivide ? __fdiv_rn(f[i], s) : __fmul_rn(f[i], s));
  if constexpr (kVec == 8) {
    unsigned w[2];
#pragma unroll
    for (int i = 0; i < 2; ++i)
      w[i] = f32x2_to_e4m3x2(q[4 * i], q[4 * i + 1]) | (f32x2_to_e4m3x2(q[4 * i + 2], q[4 * i + 3]) << 16);
    sink.e4m3x8(e, make_uint2(w[0], w[1]), mx_scale);
  } else {
    sink.e4m3(e, f32_to_e4m3(q[0]), mx_scale);
  }
}

// Largest |x| of a vector as 16-bit magnitude bits (integer order = float order for
// magnitudes; a NaN is above +inf, so the result says whether the vector holds one).
template <int kVec>
__device__ __forceinline__ unsigned abs_max_bits(const HalfVec<kVec>& v) {
  if constexpr (kVec == 8) {
    const unsigned m = max_u16x2(max_u16x2(v.raw.x & 0x7FFF7FFFu, v.raw.y & 0x7FFF7FFFu),
                                 max_u16x2(v.raw.z & 0x7FFF7FFFu, v.raw.w & 0x7FFF7FFFu));
    return max(m & 0xFFFFu, m >> 16);
  } else {
    return v.raw & 0x7FFFu;
  }
}

// Where a quantizer's 16-bit inputs come from: load<kVec>(row, col) gives the kVec elements of row
// `row` from column `col` as the bits a [rows, cols] buffer of the dtype would hold.
// A buffer with row stride row_stride (elements).
struct BufferSource {
  static constexpr bool kRolled = false;
  const unsigned short* in;
  long long row_stride;
  template <int kVec>
  __device__ __forceinline__ HalfVec<kVec> load(long long row, long long col) const {
    return load_half_vec<kVec>(in + row * row_stride + col);
  }
  // Dense rows (stride = cols): element e of the matrix is at in + e, no row index needed.
  __device__ __forceinline__ bool dense(int cols) const { return row_stride == cols; }
  __device__ __forceinline__ HalfVec<8> load_dense(long long e) const { return load_half_vec<8>(in + e); }
};

// GEMM2's input made from GEMM1's output on the fly: the activation of gate_up's row (N13 = 2I
// wide gated, I otherwise), rounded to the dtype once, the bits the activation kernel would store
// (the same activation_values), so the quantizer sees exactly the buffer it would have read.
template <ActivationKind kKind, bool kInterleaved, bool kBf16>
struct ActivationSource {
  static constexpr bool kRolled = true;
  const unsigned short* gate_up;
  long long intermediate;
  ActivationArgs args;
  template <int kVec>
  __device__ __forceinline__ HalfVec<kVec> load(long long row, long long col) const {
    return from_inputs<kVec>(fetch<kVec>(row, col));
  }
  // load in two steps: the inputs' loads, then the activation and its rounding.
  template <int kVec>
  __device__ __forceinline__ ActivationInputs<kVec> fetch(long long row, long long col) const {
    const long long in_cols = is_gated(kKind) ? 2 * intermediate : intermediate;
    return load_activation_inputs<kKind, kInterleaved, kVec>(gate_up + row * in_cols, col, intermediate);
  }
  template <int kVec>
  __device__ __forceinline__ HalfVec<kVec> from_inputs(const ActivationInputs<kVec>& in) const {
    float f[kVec];
    activation_from_inputs<kKind, kInterleaved, kBf16, kVec>(in, args, f);
    HalfVec<kVec> v;
    if constexpr (kVec == 8) {
      unsigned w[4];
#pragma unroll
      for (int i = 0; i < 4; ++i)
        w[i] = static_cast<unsigned>(f32_to_half<kBf16>(f[2 * i])) |
               (static_cast<unsigned>(f32_to_half<kBf16>(f[2 * i + 1])) << 16);
      v.raw = make_uint4(w[0], w[1], w[2], w[3]);
    } else {
      v.raw = f32_to_half<kBf16>(f[0]);
    }
    return v;
  }
  __device__ __forceinline__ bool dense(int) const { return false; }
  __device__ __forceinline__ HalfVec<8> load_dense(long long) const { return HalfVec<8>{}; }  // never called
};

// Magnitude bits of +inf: above it NaN, at it +-inf.
template <bool kBf16> constexpr unsigned kHalfInfBits = kBf16 ? 0x7F80u : 0x7C00u;

template <bool kBf16>
__device__ __forceinline__ float half_bits_to_f32(unsigned bits) {
  return half_to_f32<kBf16>(static_cast<unsigned short>(bits));
}

}  // namespace moeq_dev
