#pragma once
// GEMM1 with the activation in its epilogue (Cfg::kEpilogueActivation; over 16-bit A, 8-row direct tiles at the
// smallest M, warp-specialized tiles at any M): C is GEMM2's input [rows, I],
// act(gate, up) of the GEMM's rounded outputs, instead of [rows, N13]; in the MMA's K order from a `/t` tile.
// A CTA needs each output's gate and up channel in its own tile:
// - interleaved rows [g0, u0, g1, u1, ...] and the non-gated kinds: the plain channels, outputs n0 / 2 (n0) on;
// - [gate | up] rows: block y's BN channels are the gate rows [y BN / 2, (y + 1) BN / 2) and then the same up rows
//   (epilogue_weight_row); every 16-channel tile lies in one half (BN % 32 == 0, I % 16 == 0: the host's rule).
// The outputs are the activation kernel's arithmetic (moe/activation.cuh) on the same rounded 16-bit inputs, so the
// same bits as GEMM1 and moeq_activation.
// PERF: one kernel boundary and a pass over [rows, 2I] fewer at the smallest M, where the activation's marginal cost
// in the step was ~1.5 us of Qwen3-30B-A3B's at M = 1 (H200, session 33's MOEQ_DIAG_OMIT).
// NOTE: NVRTC-safe: no standard headers.
#include "moeq_dev/format/mma_order.cuh"
#include "moeq_dev/kernels/moe_gemm_common.cuh"
#include "moeq_dev/moe/activation.cuh"

namespace moeq_dev {

// Cfg::kEpilogueActivation / kEpilogueInterleaved where the config names them (a GEMM1's own kernel), else none.
template <class C, class = void>
struct CfgEpilogueActivation {
  static constexpr bool value = false;
  static constexpr ActivationKind kind = ActivationKind::kSilu;
  static constexpr bool interleaved = false;
};
template <class C>
struct CfgEpilogueActivation<C, decltype(void(C::kEpilogueActivation))> {
  static constexpr bool value = true;
  static constexpr ActivationKind kind = C::kEpilogueActivation;
  static constexpr bool interleaved = C::kEpilogueInterleaved;
};
template <class Cfg>
__device__ constexpr bool gemm_activation_epilogue() {
  return CfgEpilogueActivation<Cfg>::value;
}
// Whether block y's channels are gate rows and then the same up rows ([gate | up] weights).
template <class Cfg>
__device__ constexpr bool gemm_pairs_gate_up_halves() {
  using E = CfgEpilogueActivation<Cfg>;
  return E::value && is_gated(E::kind) && !E::interleaved;
}

// The weight row (GEMM1 output channel) of block-relative channel c of the block at n0 = blockIdx.y * BN.
// NOTE: gate rows past I (the last block of an I that is not whole half blocks) read up rows; their outputs are
// never stored.
template <class Cfg, int BN>
__device__ __forceinline__ int epilogue_weight_row(int c, int n0, int N) {
  if constexpr (gemm_pairs_gate_up_halves<Cfg>()) {
    static_assert(BN % 32 == 0, "whole 16-channel tiles in each half");
    constexpr int kHalf = BN / 2;
    const int gate0 = n0 / 2;
    return c < kHalf ? gate0 + c : N / 2 + gate0 + (c - kHalf);
  } else {
    return n0 + c;
  }
}

// The output tile (BM rows of BN rounded channels, block-relative, out_row_bytes apart) as activations to C (GEMM2's
// input, I = N / 2 or N columns, row_dst; padding rows skipped) by the CTA's T threads, 8 outputs each: one 16-byte
// store where the row and I allow, else one per output.
template <class Cfg, int BM, int BN, int T>
__device__ __forceinline__ void store_activation_rows(const MoeGemmParams& p, const unsigned char* out_tile,
                                                      int out_row_bytes, const int* row_dst, int n0, int tid) {
  using E = CfgEpilogueActivation<Cfg>;
  constexpr bool kGated = is_gated(E::kind), kBf16 = Cfg::kActBf16;
  constexpr int kOut = kGated ? BN / 2 : BN;  // output columns of the tile
  static_assert(kOut % 8 == 0, "whole 8-output chunks");
  const int I = kGated ? p.n / 2 : p.n, col0 = kGated ? n0 / 2 : n0;
  const bool wide = ((reinterpret_cast<unsigned long long>(p.c) | static_cast<unsigned long long>(p.c_row_stride) * 2) & 15) == 0;
  constexpr int kChunks = BM * (kOut / 8);
  for (int c = tid; c < kChunks; c += T) {
    const int token = c / (kOut / 8), chunk = c % (kOut / 8);
    const int dst = row_dst[token], col = col0 + chunk * 8;
    if (dst < 0 || col >= I) continue;
    // PERF: the chunk's inputs in 16-byte loads (one, or two where gated), as store_output_rows reads the tile.
    // Sixteen 2-byte loads, 32 bytes apart from thread to thread (interleaved rows), each conflicted 8 ways in
    // the shared banks: H100 session 55 (ncu), GEMM1 48x512/1x8x1/6/p/t with it 630.8 us against 594.0 without the
    // activation, more than the 26.1 us activation kernel it replaced.
    const unsigned char* tile_row = out_tile + token * out_row_bytes;
    uint4 raw[2] = {};  // raw[1] unread where not gated; zeroed so every word copied below is defined
    if constexpr (!kGated) {
      raw[0] = *reinterpret_cast<const uint4*>(tile_row + chunk * 16);
    } else if constexpr (E::interleaved) {
      raw[0] = *reinterpret_cast<const uint4*>(tile_row + chunk * 32);
      raw[1] = *reinterpret_cast<const uint4*>(tile_row + chunk * 32 + 16);
    } else {
      raw[0] = *reinterpret_cast<const uint4*>(tile_row + chunk * 16);
      raw[1] = *reinterpret_cast<const uint4*>(tile_row + 2 * kOut + chunk * 16);
    }
    const unsigned words[8] = {raw[0].x, raw[0].y, raw[0].z, raw[0].w, raw[1].x, raw[1].y, raw[1].z, raw[1].w};
    // 16-bit input k of the chunk's (up to) 16 loaded, in memory order.
    auto input = [&](int k) {
      return half_to_f32<kBf16>(static_cast<unsigned short>(words[k >> 1] >> (16 * (k & 1))));
    };
    float out[8];
#pragma unroll
    for (int i = 0; i < 8; ++i) {
      float g, u = 0.0f;
      if constexpr (!kGated) {
        g = input(i);
      } else if constexpr (E::interleaved) {
        g = input(2 * i);
        u = input(2 * i + 1);
      } else {
        g = input(i);
        u = input(8 + i);
      }
      out[i] = activation_value<E::kind>(g, u, p.activation);
    }
    unsigned short* to = p.c + static_cast<long long>(dst) * p.c_row_stride + col;
    if constexpr (Cfg::kMmaOrderTokens) {
      // A `/t` GEMM1 (warp-specialized) writes GEMM2's `/t` input in the MMA's K order (the host's rule: I % 64 == 0,
      // so whole chunks and 64-output tiles).
      store_half8_in_mma_order<kBf16>(p.c + static_cast<long long>(dst) * p.c_row_stride, col, out);
    } else if (wide && col + 8 <= I) {
      store_half_vec<kBf16, 8>(to, out);
    } else {
      for (int i = 0; i < 8 && col + i < I; ++i) to[i] = f32_to_half<kBf16>(out[i]);
    }
  }
}

}  // namespace moeq_dev
