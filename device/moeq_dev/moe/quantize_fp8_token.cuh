#pragma once
// The FP8 per-token quantizer (moe/quantize.cuh: its contract).
// NOTE: NVRTC-safe: no standard headers.
#include "moeq_dev/moe/quantize_common.cuh"

namespace moeq_dev {

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

// A row's FP8 per-token scale from its amax (the reference's: fmaxf skips NaN, IEEE division).
__device__ __forceinline__ float fp8_token_scale(float amax) {
  return __fdiv_rn(fmaxf(amax, kFp8TokenMinAmax), kE4m3MaxValue);
}

// Eight values of a row with no +-inf or NaN as e4m3 codes (byte i the code of element i), RN(x / scale) each;
// inv_scale = __frcp_rn(scale). Shared by the quantizer kernels and the GEMMs that quantize their own rows
// (kernels/direct_row_quantize.cuh), which must give the same bits.
template <bool kBf16>
__device__ __forceinline__ uint2 encode_finite_fp8_token_x8(const HalfVec<8>& x, float scale, float inv_scale) {
  float f[8];
  unpack_half_vec<kBf16, 8>(x, f);
#pragma unroll
  for (int i = 0; i < 8; ++i) f[i] = div_rn_by_scale(f[i], scale, inv_scale);
  unsigned w[2];
#pragma unroll
  for (int i = 0; i < 2; ++i)
    w[i] = f32x2_to_e4m3x2_no_nan(f[4 * i], f[4 * i + 1]) | (f32x2_to_e4m3x2_no_nan(f[4 * i + 2], f[4 * i + 3]) << 16);
  return make_uint2(w[0], w[1]);
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
      const float scale = fp8_token_scale(half_bits_to_f32<kBf16>(bits));
      const float inv_scale = __frcp_rn(scale);
      if (row_ok && t == 0) scales[row] = scale;
      for_each_vec(false, [&](const HalfVec<kVec>& x, int v) {
        if constexpr (kVec == 8) {
          sink.e4m3x8(row_elem + static_cast<long long>(v) * kVec, encode_finite_fp8_token_x8<kBf16>(x, scale, inv_scale),
                      1.0f);
        } else {
          float f[kVec];
          unpack_half_vec<kBf16, kVec>(x, f);
          sink.e4m3(row_elem + v, f32x2_to_e4m3x2_no_nan(div_rn_by_scale(f[0], scale, inv_scale), 0.0f) & 0xFFu, 1.0f);
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
    const float scale = fp8_token_scale(amax);
    if (row_ok && t == 0) scales[row] = scale;
    for_each_vec(false, [&](const HalfVec<kVec>& x, int v) {
      float f[kVec];
      unpack_half_vec<kBf16, kVec>(x, f);
      store_e4m3<true, kVec>(sink, row_elem + static_cast<long long>(v) * kVec, f, scale, 1.0f);
    });
  }
}

}  // namespace moeq_dev
