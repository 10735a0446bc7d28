#pragma once
// Dynamic activation quantizers (CONTRACT §5), codes and scales bit-exact with
// reference/quantize_activations.cpp:
//   FP8 per token: s = max(amax_row, 1e-12) / 448 (fp32 division), q = e4m3(x / s) (true division)
//   MXFP8 / MXFP4: per 32 columns, code = ue8m0_scale_for(amax, 448 | 6), q = enc(x * 2^(127-code))
// amax skips NaN (fmaxf), as the reference's `a > m ? a : m`.
// NOTE: a NaN input is encoded from x itself, not from x / s or x * inv: the GPU's arithmetic
// returns the canonical NaN (sign dropped) where x86 propagates the operand's sign, and the
// reference's code keeps that sign (0xFF for a negative NaN).
#include "moeq_dev/format/fp4.cuh"
#include "moeq_dev/format/fp8.cuh"
#include "moeq_dev/format/mma_order.cuh"
#include "moeq_dev/format/ue8m0.cuh"
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
// MMA's K order instead (format/mma_order.cuh; a `/t` GEMM's input), pairs kept together.
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
      out[e] = static_cast<unsigned char>(code);
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

// RN(x / s) for finite x and a finite positive normal s, inv_s = RN(1 / s), without the
// division subroutine: q = RN(x * inv_s) is within 1.5 ulp of x / s, one correction
// q + (x - q s) inv_s (residual exact by fma) makes it faithful, and a second one correctly
// rounded (Markstein: faithful q, inv_s within half an ulp of 1 / s). Where the residual
// underflows (tiny x against a large s) the quotient may differ, but then it is far below the
// smallest e4m3 step and its code is +-0 either way. The residual is taken as q s - x so that
// x = -0 keeps q = -0 (an fma of +0 and -0 gives +0).
// NOTE: checked exhaustively on an H200 for every finite bf16 / f16 x and every amax >= |x|
// (2.07e9 pairs): every e4m3 code equals the one of __fdiv_rn; the fp32 quotients differ for
// 1.48e6 bf16 pairs, all with |q| <= 9.8e-21 (code 0x00 / 0x80), none for f16.
// PERF: 1 FMUL + 4 FFMA per element instead of __fdiv_rn: with the integer amax pass and the
// NaN-free cvt, FP8 per token went from 47.6% to 85-88% of copy bandwidth at M = 4096.
__device__ __forceinline__ float div_rn_by_scale(float x, float s, float inv_s) {
  float q = __fmul_rn(x, inv_s);
  float r = __fmaf_rn(q, s, -x);
  q = __fmaf_rn(-r, inv_s, q);
  r = __fmaf_rn(q, s, -x);
  return __fmaf_rn(-r, inv_s, q);
}

// ---- FP8 per token: a group of `warps_per_row` warps owns a row ----
// PERF: a row of up to kSlots * 8 * 32 * warps_per_row elements stays in registers between the
// amax pass and the encode pass (8 slots of 16 bytes = 32 registers; the folded quantizer keeps 2),
// so the row is read from DRAM once; longer rows (cols > 16384 at 8 warps and 8 slots, > 4096 at 2)
// re-read it, mostly from L2.
constexpr int kFp8TokenSlots = 8;
// A Cfg's slots: kFp8Slots where it names them (the folded quantizer), else kFp8TokenSlots
// (fp8_token_slots<Cfg>(0)).
template <class Cfg>
constexpr auto fp8_token_slots(int) -> decltype(Cfg::kFp8Slots, int()) {
  return Cfg::kFp8Slots;
}
template <class Cfg>
constexpr int fp8_token_slots(long) {
  return kFp8TokenSlots;
}

template <bool kBf16, int kVec, int kThreads, bool kValues, int kSlots, class Source>
__device__ __forceinline__ void quantize_fp8_token_rows(const Source& source, int rows, int cols, unsigned char* codes,
                                                        float* scales, int warps_per_row, GridSlice grid, int mma_order) {
  const CodeSink<QuantFormat::kFp8Token, kBf16, kValues> sink{codes, mma_order};
  constexpr int kWarps = kThreads / 32;
  // kRolled (the fused activation-quantize, 16-byte path): one rolled loop over a lane's vectors,
  // the activation outputs kept in shared memory (slot i of thread x at staged[i kThreads + x])
  // instead of 8 unrolled register slots.
  // PERF: unrolled, each warp of a short grid ran up to 8 slot bodies of 8 activations once, cold:
  // 46% of the warps' cycles waited for instruction fetches (ncu, Qwen3 M = 256: 13.3 us against
  // 5.8 for the activation alone; bench/results/2026-12-02-h200-quantizer-warps.md).
  constexpr bool kRolled = Source::kRolled && kVec == 8;
  __shared__ uint4 staged[kRolled ? kSlots * kThreads : 1];
  __shared__ float partial_amax[kWarps];
  __shared__ unsigned partial_bits[kWarps];
  const int warp = threadIdx.x / 32;
  const int group = warp / warps_per_row;
  const int rows_per_block = kWarps / warps_per_row;
  const int group_threads = warps_per_row * 32;
  const int t = threadIdx.x - group * group_threads;
  const int num_vecs = cols / kVec;
  const int pass_vecs = group_threads * kSlots;
  const int num_passes = (num_vecs + pass_vecs - 1) / pass_vecs;

  // NOTE: the loop bound is uniform over the block (every thread reaches each __syncthreads).
  for (long long row_base = static_cast<long long>(grid.block) * rows_per_block; row_base < rows;
       row_base += static_cast<long long>(grid.blocks) * rows_per_block) {
    const long long row = row_base + group;
    const bool row_ok = row < rows;
    const long long row_elem = row * static_cast<long long>(cols);  // element index of the row's codes
    HalfVec<kVec> slot[kRolled ? 1 : kSlots];
    // Every vector of this thread's part of the row, in slot order: body(vector, index), the
    // vector read from memory on the first pass over the row (`first_read`) and on every pass of
    // a row longer than the slots hold, else kept in its slot (kRolled: its shared-memory slot).
    auto for_each_vec = [&](bool first_read, auto&& body) {
      if constexpr (kRolled) {
        // Lane vector i is v = t + i * group_threads, the slot order of the unrolled form.
        int v = t;
        if (row_ok && v < num_vecs && first_read) {
          // The next vector's inputs load while this one's activation is computed.
          // PERF: two ahead instead (Qwen3 M = 256: 3 vectors a lane, one warp a row, 22.9% occupancy)
          // the kernel took 8.3 us against 7.7 and the steps +0.2-0.5% at M = 256-4096 (ncu and B N N B,
          // bench/results/2026-12-03-h200-fold-codegen.md, call 8).
          ActivationInputs<kVec> next = source.template fetch<kVec>(row, static_cast<long long>(v) * kVec);
#pragma unroll 1
          for (int i = 0; v < num_vecs; ++i, v += group_threads) {
            const ActivationInputs<kVec> in = next;
            if (v + group_threads < num_vecs)
              next = source.template fetch<kVec>(row, static_cast<long long>(v + group_threads) * kVec);
            const HalfVec<kVec> x = source.template from_inputs<kVec>(in);
            if (i < kSlots) staged[i * kThreads + threadIdx.x] = x.raw;
            body(x, v);
          }
        } else if (row_ok) {
#pragma unroll 1
          for (int i = 0; v < num_vecs; ++i, v += group_threads) {
            HalfVec<kVec> x;
            if (i < kSlots) {
              x.raw = staged[i * kThreads + threadIdx.x];
            } else {
              x = source.template load<kVec>(row, static_cast<long long>(v) * kVec);
            }
            body(x, v);
          }
        }
      } else {
        for (int pass = 0; pass < num_passes; ++pass) {
#pragma unroll
          for (int s = 0; s < kSlots; ++s) {
            const int v = pass * pass_vecs + s * group_threads + t;
            if (row_ok && v < num_vecs) {
              if (first_read || num_passes > 1) slot[s] = source.template load<kVec>(row, static_cast<long long>(v) * kVec);
              body(slot[s], v);
            }
          }
        }
      }
    };
    // PERF: the amax pass is an integer max of magnitude bits (1.5 instructions per 8 elements
    // with max.u16x2) and one redux per warp; it also flags +-inf / NaN rows.
    unsigned bits = 0;
    for_each_vec(true, [&](const HalfVec<kVec>& x, int) { bits = max(bits, abs_max_bits<kVec>(x)); });
    bits = __reduce_max_sync(0xFFFFFFFFu, bits);
    bool special = bits >= kHalfInfBits<kBf16>;
    if (warps_per_row > 1) {
      if (threadIdx.x % 32 == 0) partial_bits[warp] = bits;
      __syncthreads();
      unsigned any = 0;
      for (int w = 0; w < kWarps; ++w) any = max(any, partial_bits[w]);
      for (int w = 0; w < warps_per_row; ++w) bits = max(bits, partial_bits[group * warps_per_row + w]);
      __syncthreads();  // partial_bits is rewritten by the next row
      // NOTE: block-uniform, so the special path's __syncthreads are reached by every thread.
      special = any >= kHalfInfBits<kBf16>;
    }
    if (!special) {
      // Every element finite: amax is the largest magnitude itself, s is finite and normal.
      const float scale = __fdiv_rn(fmaxf(half_bits_to_f32<kBf16>(bits), kFp8TokenMinAmax), kE4m3MaxValue);
      const float inv_scale = __frcp_rn(scale);
      if (row_ok && t == 0) scales[row] = scale;
      for_each_vec(false, [&](const HalfVec<kVec>& x, int v) {
        float f[kVec];
        unpack_half_vec<kBf16, kVec>(x, f);
#pragma unroll
        for (int i = 0; i < kVec; ++i) f[i] = div_rn_by_scale(f[i], scale, inv_scale);
        if constexpr (kVec == 8) {
          unsigned w[2];
#pragma unroll
          for (int i = 0; i < 2; ++i)
            w[i] = f32x2_to_e4m3x2_no_nan(f[4 * i], f[4 * i + 1]) | (f32x2_to_e4m3x2_no_nan(f[4 * i + 2], f[4 * i + 3]) << 16);
          sink.e4m3x8(row_elem + static_cast<long long>(v) * kVec, make_uint2(w[0], w[1]), 1.0f);
        } else {
          sink.e4m3(row_elem + v, f32x2_to_e4m3x2_no_nan(f[0], 0.0f) & 0xFFu, 1.0f);
        }
      });
      continue;
    }
    // A row of the block holds +-inf or NaN: the reference's arithmetic (fmaxf amax skips NaN,
    // IEEE division, NaN codes keep the input's sign).
    float amax = 0.0f;
    for_each_vec(false, [&](const HalfVec<kVec>& x, int) {
      float f[kVec];
      unpack_half_vec<kBf16, kVec>(x, f);
      amax = fmaxf(amax, abs_max(f));
    });
    amax = warp_max(amax, 32);
    if (warps_per_row > 1) {
      if (threadIdx.x % 32 == 0) partial_amax[warp] = amax;
      __syncthreads();
      for (int w = 0; w < warps_per_row; ++w) amax = fmaxf(amax, partial_amax[group * warps_per_row + w]);
      __syncthreads();  // partial_amax is rewritten by the next row
    }
    const float scale = __fdiv_rn(fmaxf(amax, kFp8TokenMinAmax), kE4m3MaxValue);
    if (row_ok && t == 0) scales[row] = scale;
    for_each_vec(false, [&](const HalfVec<kVec>& x, int v) {
      float f[kVec];
      unpack_half_vec<kBf16, kVec>(x, f);
      store_e4m3<true, kVec>(sink, row_elem + static_cast<long long>(v) * kVec, f, scale, 1.0f);
    });
  }
}

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

// The quantizer of Cfg (kFormat, kDtypeIsBf16, kValuesOut, kThreads = blockDim.x) over `source`'s
// rows, on the CTAs of `grid`; mma_order: CodeSink's.
template <class Cfg, class Source>
__device__ __forceinline__ void quantize_rows(const Source& source, int rows, int cols, unsigned char* codes,
                                              void* scales, int vectorized, int warps_per_row, GridSlice grid,
                                              int mma_order = 0) {
  constexpr bool kBf16 = Cfg::kDtypeIsBf16, kValues = Cfg::kValuesOut;
  if constexpr (Cfg::kFormat == QuantFormat::kFp8Token) {
    float* s = static_cast<float*>(scales);
    if (vectorized) {
      quantize_fp8_token_rows<kBf16, 8, Cfg::kThreads, kValues, fp8_token_slots<Cfg>(0)>(source, rows, cols, codes,
                                                                                            s, warps_per_row, grid, mma_order);
    } else {
      quantize_fp8_token_rows<kBf16, 1, Cfg::kThreads, kValues, fp8_token_slots<Cfg>(0)>(source, rows, cols, codes,
                                                                                            s, warps_per_row, grid, mma_order);
    }
  } else {
    unsigned char* s = static_cast<unsigned char*>(scales);
    if (vectorized) {
      quantize_mx_vec8<Cfg::kFormat, kBf16, kValues>(source, rows, cols, codes, s, grid, mma_order);
    } else {
      quantize_mx_scalar<Cfg::kFormat, kBf16, kValues>(source, rows, cols, codes, s, grid, mma_order);
    }
  }
}

}  // namespace moeq_dev
