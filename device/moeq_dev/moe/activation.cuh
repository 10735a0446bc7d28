#pragma once
// The 9 MoE activations of CONTRACT §6 in fp32, formula for formula as reference/activation.cpp,
// plus the 16-bit (bf16 / f16) vector I/O shared by the elementwise kernels.
// NOTE: every product and sum is written with __fmul_rn / __fadd_rn. They are IEEE round-to-nearest;
// what they add is that the compiler may not contract them into FMAs, which round once where the
// reference (x86, no FMA contraction) rounds twice. erff / tanhf are CUDA's accurate math functions
// (<= 2 ulp). The logistic function of silu / sigmoid is the one approximation (below).
#include "moeq_dev/format/mma_order.cuh"
#include "moeq_dev/ptx/cvt.cuh"

namespace moeq_dev {

// Same order as moeq::Activation (include/moeq/types.hpp); the host emits these names.
enum class ActivationKind : int {
  kSilu, kGelu, kGeluTanh, kSwigluOai, kSwigluStep,
  kSiluNoMul, kGeluNoMul, kGeluTanhNoMul, kRelu2NoMul
};

__device__ __forceinline__ constexpr bool is_gated(ActivationKind k) {
  return k == ActivationKind::kSilu || k == ActivationKind::kGelu || k == ActivationKind::kGeluTanh ||
         k == ActivationKind::kSwigluOai || k == ActivationKind::kSwigluStep;
}

// Run-time parameters: kernel arguments, so one compiled kernel serves every model's values.
struct ActivationArgs {
  float swiglu_alpha;  // SWIGLUOAI
  float swiglu_limit;  // SWIGLUOAI, SWIGLUSTEP
  float silu_clamp;    // SILU: > 0 clamps the gate above and the up both sides
};

// Comparisons, not fminf: a NaN input stays NaN (as the reference's cap_above / clamp_both).
__device__ __forceinline__ float cap_above(float x, float hi) { return x > hi ? hi : x; }
__device__ __forceinline__ float clamp_both(float x, float limit) {
  return x < -limit ? -limit : cap_above(x, limit);
}

// 2^x and 1 / x on the special function unit (ex2.approx / rcp.approx): ~2 and 1 ulp of fp32, where
// the outputs are rounded to 16 bits (2^-9 or 2^-12 a half ulp). Both flush subnormals (.ftz):
// - 2^x: logistic_f32 only adds it to 1, where a subnormal and 0 give the same sum.
// - 1 / d for d >= 1: subnormal for d > 2^126 (silu's x in (-88.7, -87.3), whose product is still a normal
//   bf16), so such d are scaled by 1/4 first and the reciprocal after (the FMUL keeps subnormals). The
//   compiler's own subnormal handling of rcp.approx.f32 costs 6 instructions, this 4.
__device__ __forceinline__ float exp2_approx_ftz(float x) {
  float y;
  asm("ex2.approx.ftz.f32 %0, %1;" : "=f"(y) : "f"(x));
  return y;
}
__device__ __forceinline__ float reciprocal_of_at_least_one(float d) {
  const float scale = d > 0x1p126f ? 0.25f : 1.0f;  // NaN: 1, and the reciprocal stays NaN
  float y;
  asm("rcp.approx.ftz.f32 %0, %1;" : "=f"(y) : "f"(__fmul_rn(d, scale)));
  return __fmul_rn(y, scale);
}
// 1 / (1 + e^-x). PERF: ~8 instructions, against ~35 and a slow-path call for expf and an IEEE
// division. A warp-specialized GEMM1 computes it in its epilogue while its tensor cores wait: with
// expf and __fdiv_rn the fused 48x512 GEMM1 ran 26.5 us over the plain one at gpt-oss-120b M = 1024,
// about the activation kernel it replaced; with this, 5.5 us, and the activation kernel itself 26.0 ->
// 22.9 us (H100 session 56, ncu). Outputs: 0.096% one 16-bit ulp from the reference (0.09% with expf).
// The error (~5e-6 relative at |x| = 88, from rounding x log2(e)) stays far below a half ulp.
// Limits as the reference's: x = -inf gives 0, +inf 1, NaN NaN (and silu(-inf) NaN, inf / inf).
__device__ __forceinline__ float logistic_f32(float x) {
  constexpr float kLog2e = 1.4426950408889634f;
  return reciprocal_of_at_least_one(__fadd_rn(1.0f, exp2_approx_ftz(__fmul_rn(-kLog2e, x))));
}
__device__ __forceinline__ float sigmoid_f32(float x) { return logistic_f32(x); }
__device__ __forceinline__ float silu_f32(float x) { return __fmul_rn(x, logistic_f32(x)); }

__device__ __forceinline__ float gelu_erf_f32(float x) {
  constexpr float kInvSqrt2 = 0.70710678118654752440f;
  return __fmul_rn(__fmul_rn(0.5f, x), __fadd_rn(1.0f, erff(__fmul_rn(x, kInvSqrt2))));
}

__device__ __forceinline__ float gelu_tanh_f32(float x) {
  constexpr float kSqrt2OverPi = 0.79788456080286535588f;
  constexpr float kCubic = 0.044715f;
  const float cube = __fmul_rn(__fmul_rn(x, x), x);
  const float inner = __fmul_rn(kSqrt2OverPi, __fadd_rn(x, __fmul_rn(kCubic, cube)));
  return __fmul_rn(__fmul_rn(0.5f, x), __fadd_rn(1.0f, tanhf(inner)));
}

// One output element: gate g and up u (u unused by the *_no_mul kinds).
template <ActivationKind kKind>
__device__ __forceinline__ float activation_value(float g, float u, const ActivationArgs& a) {
  if constexpr (kKind == ActivationKind::kSilu) {
    if (a.silu_clamp > 0.0f) {
      g = cap_above(g, a.silu_clamp);
      u = clamp_both(u, a.silu_clamp);
    }
    return __fmul_rn(silu_f32(g), u);
  } else if constexpr (kKind == ActivationKind::kGelu) {
    return __fmul_rn(gelu_erf_f32(g), u);
  } else if constexpr (kKind == ActivationKind::kGeluTanh) {
    return __fmul_rn(gelu_tanh_f32(g), u);
  } else if constexpr (kKind == ActivationKind::kSwigluOai) {
    g = cap_above(g, a.swiglu_limit);
    u = clamp_both(u, a.swiglu_limit);
    const float glu = __fmul_rn(g, sigmoid_f32(__fmul_rn(a.swiglu_alpha, g)));
    return __fmul_rn(__fadd_rn(u, 1.0f), glu);
  } else if constexpr (kKind == ActivationKind::kSwigluStep) {
    return __fmul_rn(cap_above(silu_f32(g), a.swiglu_limit), clamp_both(u, a.swiglu_limit));
  } else if constexpr (kKind == ActivationKind::kSiluNoMul) {
    return silu_f32(g);
  } else if constexpr (kKind == ActivationKind::kGeluNoMul) {
    return gelu_erf_f32(g);
  } else if constexpr (kKind == ActivationKind::kGeluTanhNoMul) {
    return gelu_tanh_f32(g);
  } else {
    const float r = g > 0.0f ? g : 0.0f;  // RELU2: relu(x)^2
    return __fmul_rn(r, r);
  }
}

// ---- 16-bit activation I/O (bf16 when kBf16, else f16); values travel as raw bits ----

template <bool kBf16>
__device__ __forceinline__ float half_to_f32(unsigned short h) {
  if constexpr (kBf16) return bf16_to_f32(h); else return f16_to_f32(h);
}
template <bool kBf16>
__device__ __forceinline__ unsigned short f32_to_half(float x) {
  if constexpr (kBf16) return f32_to_bf16_rn(x); else return f32_to_f16_rn(x);
}

// kVec consecutive 16-bit elements as raw bits: 8 (one 16-byte access) or 1 (scalar fallback for
// rows that are not 16-byte aligned).
template <int kVec> struct HalfVec;
template <> struct HalfVec<8> { uint4 raw; };
template <> struct HalfVec<1> { unsigned short raw; };

// PERF: inputs are read exactly once per elementwise kernel: ld.global.cs (evict-first) keeps
// them from pushing the GEMM operands that come next out of L2.
template <int kVec>
__device__ __forceinline__ HalfVec<kVec> load_half_vec(const unsigned short* p) {
  HalfVec<kVec> v;
  if constexpr (kVec == 8) v.raw = __ldcs(reinterpret_cast<const uint4*>(p)); else v.raw = __ldcs(p);
  return v;
}

template <bool kBf16, int kVec>
__device__ __forceinline__ void unpack_half_vec(const HalfVec<kVec>& v, float (&f)[kVec]) {
  if constexpr (kVec == 8) {
    const unsigned w[4] = {v.raw.x, v.raw.y, v.raw.z, v.raw.w};
#pragma unroll
    for (int i = 0; i < 4; ++i) {
      f[2 * i] = half_to_f32<kBf16>(static_cast<unsigned short>(w[i] & 0xFFFFu));
      f[2 * i + 1] = half_to_f32<kBf16>(static_cast<unsigned short>(w[i] >> 16));
    }
  } else {
    f[0] = half_to_f32<kBf16>(v.raw);
  }
}

// 8 values rounded once each (RNE) to 16 bits, as 4 pairs (element 2i in the low half of word i).
template <bool kBf16>
__device__ __forceinline__ void pack_half_pairs(const float (&f)[8], unsigned (&w)[4]) {
#pragma unroll
  for (int i = 0; i < 4; ++i)
    w[i] = static_cast<unsigned>(f32_to_half<kBf16>(f[2 * i])) |
           (static_cast<unsigned>(f32_to_half<kBf16>(f[2 * i + 1])) << 16);
}

// One rounding per element (RNE) and one store of kVec elements.
template <bool kBf16, int kVec>
__device__ __forceinline__ void store_half_vec(unsigned short* p, const float (&f)[kVec]) {
  if constexpr (kVec == 8) {
    unsigned w[4];
    pack_half_pairs<kBf16>(f, w);
    *reinterpret_cast<uint4*>(p) = make_uint4(w[0], w[1], w[2], w[3]);
  } else {
    *p = f32_to_half<kBf16>(f[0]);
  }
}

// The 16-bit inputs of kVec activation outputs, as loaded: gated [gate (I) | up (I)]: a the gates,
// b the ups; interleaved [g0, u0, g1, u1, ...]: a and b the 2 kVec pairs in order; not gated: a
// the inputs (b unused).
template <int kVec>
struct ActivationInputs {
  HalfVec<kVec> a, b;
};

// The inputs of row `row_in` (N13 wide) for output columns [col, col + kVec).
template <ActivationKind kKind, bool kInterleaved, int kVec>
__device__ __forceinline__ ActivationInputs<kVec> load_activation_inputs(const unsigned short* row_in, long long col,
                                                                         long long intermediate) {
  ActivationInputs<kVec> in;
  if constexpr (!is_gated(kKind)) {
    in.a = load_half_vec<kVec>(row_in + col);
  } else if constexpr (kInterleaved) {
    in.a = load_half_vec<kVec>(row_in + 2 * col);
    in.b = load_half_vec<kVec>(row_in + 2 * col + kVec);
  } else {
    in.a = load_half_vec<kVec>(row_in + col);
    in.b = load_half_vec<kVec>(row_in + intermediate + col);
  }
  return in;
}

// kVec activation outputs in fp32, before their rounding, from their loaded inputs.
template <ActivationKind kKind, bool kInterleaved, bool kBf16, int kVec>
__device__ __forceinline__ void activation_from_inputs(const ActivationInputs<kVec>& in, const ActivationArgs& args,
                                                       float (&out)[kVec]) {
  float g[kVec], u[kVec];
  if constexpr (!is_gated(kKind)) {
    unpack_half_vec<kBf16, kVec>(in.a, g);
#pragma unroll
    for (int i = 0; i < kVec; ++i) u[i] = 0.0f;
  } else if constexpr (kInterleaved) {
    // (2 * kVec) inputs: gates at even and ups at odd positions.
    float lo[kVec], hi[kVec];
    unpack_half_vec<kBf16, kVec>(in.a, lo);
    unpack_half_vec<kBf16, kVec>(in.b, hi);
    if constexpr (kVec == 1) {
      g[0] = lo[0];
      u[0] = hi[0];
    } else {
#pragma unroll
      for (int i = 0; i < kVec / 2; ++i) {
        g[i] = lo[2 * i];
        u[i] = lo[2 * i + 1];
        g[kVec / 2 + i] = hi[2 * i];
        u[kVec / 2 + i] = hi[2 * i + 1];
      }
    }
  } else {
    unpack_half_vec<kBf16, kVec>(in.a, g);
    unpack_half_vec<kBf16, kVec>(in.b, u);
  }
#pragma unroll
  for (int i = 0; i < kVec; ++i) out[i] = activation_value<kKind>(g[i], u[i], args);
}

// kVec activation outputs of row `row_in` (N13 wide), output columns [col, col + kVec), in fp32
// before their rounding.
template <ActivationKind kKind, bool kInterleaved, bool kBf16, int kVec>
__device__ __forceinline__ void activation_values(const unsigned short* row_in, long long col, long long intermediate,
                                                  const ActivationArgs& args, float (&out)[kVec]) {
  activation_from_inputs<kKind, kInterleaved, kBf16, kVec>(
      load_activation_inputs<kKind, kInterleaved, kVec>(row_in, col, intermediate), args, out);
}

// One item of the activation kernel: kVec outputs of row `row_in` into `row_out` (I wide),
// starting at output column `col`, one rounding each.
template <ActivationKind kKind, bool kInterleaved, bool kBf16, int kVec>
__device__ __forceinline__ void activation_item(const unsigned short* row_in, unsigned short* row_out,
                                                long long col, long long intermediate,
                                                const ActivationArgs& args) {
  float out[kVec];
  activation_values<kKind, kInterleaved, kBf16, kVec>(row_in, col, intermediate, args, out);
  store_half_vec<kBf16, kVec>(row_out + col, out);
}

// The outputs [col, col + 8) of a row (col % 8 == 0) in the MMA's K order (format/mma_order.cuh): 4 pairs,
// each rounded once and stored at its place in col's 64-k tile.
template <bool kBf16>
__device__ __forceinline__ void store_half8_in_mma_order(unsigned short* row_out, long long col, const float (&out)[8]) {
  unsigned pairs[4];
  pack_half_pairs<kBf16>(out, pairs);
  store_pairs_in_mma_order(row_out, col, pairs);
}

// activation_item with the outputs in the MMA's K order (store_half8_in_mma_order).
template <ActivationKind kKind, bool kInterleaved, bool kBf16>
__device__ __forceinline__ void activation_item_mma_order(const unsigned short* row_in, unsigned short* row_out,
                                                          long long col, long long intermediate,
                                                          const ActivationArgs& args) {
  float out[8];
  activation_values<kKind, kInterleaved, kBf16, 8>(row_in, col, intermediate, args, out);
  store_half8_in_mma_order<kBf16>(row_out, col, out);
}

}  // namespace moeq_dev
