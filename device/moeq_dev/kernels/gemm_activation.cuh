#pragma once
// GEMM1's epilogue with the activation fused in (Cfg::kFusedActivation, warp-specialized tiles):
// the out tile that write_output_tile leaves in shared memory (the products rounded to the 16-bit
// dtype, exactly what an unfused GEMM1 writes to its output) goes through the activation and into
// C = the activation's output [rows, n / 2] (gated) or [rows, n] (not gated). Every value is the
// one the activation kernel (kernels/elementwise.cuh) computes from the same 16-bit products, so
// fusing changes no bit of the step.
// Which products a CTA holds (MoeGemmParams::act_gate_up):
// - kActGateUpSplit ([gate; up] rows): CTA y holds the gates of out columns [y BN/2, (y + 1) BN/2)
//   in tile columns [0, BN/2) and their ups (weight rows n / 2 further) in [BN/2, BN);
// - kActGateUpInterleaved ([g0, u0, g1, u1, ...] rows): tile columns 2c and 2c + 1, out column
//   y BN/2 + c;
// - kActNotGated: tile column c is out column y BN + c.
// NOTE: NVRTC-safe: no standard headers.
#include "moeq_dev/kernels/moe_gemm_common.cuh"

namespace moeq_dev {

// activation_value of a run-time kind: one compiled GEMM serves every activation (a uniform
// branch per output, in the epilogue only).
__device__ __forceinline__ float activation_of(int kind, float g, float u, const ActivationArgs& a) {
  switch (static_cast<ActivationKind>(kind)) {
    case ActivationKind::kSilu: return activation_value<ActivationKind::kSilu>(g, u, a);
    case ActivationKind::kGelu: return activation_value<ActivationKind::kGelu>(g, u, a);
    case ActivationKind::kGeluTanh: return activation_value<ActivationKind::kGeluTanh>(g, u, a);
    case ActivationKind::kSwigluOai: return activation_value<ActivationKind::kSwigluOai>(g, u, a);
    case ActivationKind::kSwigluStep: return activation_value<ActivationKind::kSwigluStep>(g, u, a);
    case ActivationKind::kSiluNoMul: return activation_value<ActivationKind::kSiluNoMul>(g, u, a);
    case ActivationKind::kGeluNoMul: return activation_value<ActivationKind::kGeluNoMul>(g, u, a);
    case ActivationKind::kGeluTanhNoMul: return activation_value<ActivationKind::kGeluTanhNoMul>(g, u, a);
    default: return activation_value<ActivationKind::kRelu2NoMul>(g, u, a);
  }
}

// The first weight row (channel) of this CTA's products: the gates' with kActGateUpSplit.
template <int BN>
__device__ __forceinline__ int fused_weight_n0(const MoeGemmParams& p, bool fused) {
  return fused && p.act_gate_up == kActGateUpSplit ? static_cast<int>(blockIdx.y) * (BN / 2) : static_cast<int>(blockIdx.y) * BN;
}

// Rows between a split CTA's gate products and its up products beyond the BN / 2 that the tile
// columns already step (0 without the split).
template <int BN>
__device__ __forceinline__ int fused_up_shift(const MoeGemmParams& p, bool fused) {
  return fused && p.act_gate_up == kActGateUpSplit ? p.n / 2 - BN / 2 : 0;
}

// The out tile's rows through the activation into C (row_dst; padding rows skipped) by the CTA's
// T threads, 8 out columns per item: 16-byte stores where the row and the width allow.
template <int BM, int BN, int T, bool kBf16>
__device__ __forceinline__ void store_activated_rows(const MoeGemmParams& p, const unsigned char* out_tile,
                                                     int out_row_bytes, const int* row_dst, int tid) {
  const bool gated = p.act_gate_up != kActNotGated;
  const int out_cols = gated ? p.n / 2 : p.n;
  const int width = gated ? BN / 2 : BN;  // out columns of this CTA
  const int out_n0 = static_cast<int>(blockIdx.y) * width;
  const bool wide = ((reinterpret_cast<unsigned long long>(p.c) | static_cast<unsigned long long>(p.c_row_stride) * 2) & 15) == 0;
  const int chunks_per_row = width / 8;
  for (int c = tid; c < BM * chunks_per_row; c += T) {
    const int token = c / chunks_per_row, chunk = c % chunks_per_row;
    const int dst = row_dst[token];
    const int n = out_n0 + chunk * 8;
    if (dst < 0 || n >= out_cols) continue;
    const unsigned char* row = out_tile + token * out_row_bytes;
    unsigned short g[8], u[8];
    if (p.act_gate_up == kActGateUpInterleaved) {
      const uint4 lo = *reinterpret_cast<const uint4*>(row + chunk * 32);
      const uint4 hi = *reinterpret_cast<const uint4*>(row + chunk * 32 + 16);
      const unsigned words[8] = {lo.x, lo.y, lo.z, lo.w, hi.x, hi.y, hi.z, hi.w};
#pragma unroll
      for (int i = 0; i < 8; ++i) {
        g[i] = static_cast<unsigned short>(words[i] & 0xFFFFu);
        u[i] = static_cast<unsigned short>(words[i] >> 16);
      }
    } else {
      const uint4 a = *reinterpret_cast<const uint4*>(row + chunk * 16);
      // Split: the ups sit BN / 2 columns (BN bytes) after their gates; not gated: unused.
      const uint4 b = gated ? *reinterpret_cast<const uint4*>(row + BN + chunk * 16) : make_uint4(0, 0, 0, 0);
      const unsigned wa[4] = {a.x, a.y, a.z, a.w}, wb[4] = {b.x, b.y, b.z, b.w};
#pragma unroll
      for (int i = 0; i < 4; ++i) {
        g[2 * i] = static_cast<unsigned short>(wa[i] & 0xFFFFu);
        g[2 * i + 1] = static_cast<unsigned short>(wa[i] >> 16);
        u[2 * i] = static_cast<unsigned short>(wb[i] & 0xFFFFu);
        u[2 * i + 1] = static_cast<unsigned short>(wb[i] >> 16);
      }
    }
    unsigned short out[8];
#pragma unroll
    for (int i = 0; i < 8; ++i)
      out[i] = f32_to_half<kBf16>(activation_of(p.act_kind, half_to_f32<kBf16>(g[i]), half_to_f32<kBf16>(u[i]), p.act_args));
    unsigned short* to = p.c + static_cast<long long>(dst) * p.c_row_stride + n;
    if (wide && n + 8 <= out_cols) {
      *reinterpret_cast<uint4*>(to) = make_uint4(out[0] | static_cast<unsigned>(out[1]) << 16, out[2] | static_cast<unsigned>(out[3]) << 16,
                                                 out[4] | static_cast<unsigned>(out[5]) << 16, out[6] | static_cast<unsigned>(out[7]) << 16);
    } else {
      for (int i = 0; i < 8 && n + i < out_cols; ++i) to[i] = out[i];
    }
  }
}

}  // namespace moeq_dev
