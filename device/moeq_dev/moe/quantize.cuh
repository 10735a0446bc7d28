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
#include "moeq_dev/format/ue8m0.cuh"
#include "moeq_dev/moe/activation.cuh"

namespace moeq_dev {

// Same order as moeq::ActFormat minus `none`.
enum class QuantFormat : int { kFp8Token, kMxfp8, kMxfp4 };

constexpr int kMxBlock = 32;
constexpr float kE4m3MaxValue = 448.0f;
constexpr float kE2m1MaxValue = 6.0f;
constexpr float kFp8TokenMinAmax = 1e-12f;

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

// kVec e4m3 codes of f[i] / s (FP8 per token) or f[i] * s (MX), stored at p (8 or 1 bytes).
template <bool kDivide, int kVec>
__device__ __forceinline__ void store_e4m3(unsigned char* p, const float (&f)[kVec], float s) {
  float q[kVec];
#pragma unroll
  for (int i = 0; i < kVec; ++i) q[i] = f[i] != f[i] ? f[i] : (kDivide ? __fdiv_rn(f[i], s) : __fmul_rn(f[i], s));
  if constexpr (kVec == 8) {
    unsigned w[2];
#pragma unroll
    for (int i = 0; i < 2; ++i)
      w[i] = f32x2_to_e4m3x2(q[4 * i], q[4 * i + 1]) | (f32x2_to_e4m3x2(q[4 * i + 2], q[4 * i + 3]) << 16);
    *reinterpret_cast<uint2*>(p) = make_uint2(w[0], w[1]);
  } else {
    *p = static_cast<unsigned char>(f32_to_e4m3(q[0]));
  }
}

// ---- FP8 per token: a group of `warps_per_row` warps owns a row ----
// PERF: a row of up to kSlots * 8 * 32 * warps_per_row elements stays in registers between the
// amax pass and the encode pass (8 slots of 16 bytes = 32 registers), so the row is read from
// DRAM once; longer rows (cols > 16384 at 8 warps) re-read it, mostly from L2.
constexpr int kFp8TokenSlots = 8;

template <bool kBf16, int kVec, int kThreads>
__device__ __forceinline__ void quantize_fp8_token_rows(const unsigned short* in, long long in_row_stride,
                                                        int rows, int cols, unsigned char* codes,
                                                        float* scales, int warps_per_row) {
  constexpr int kWarps = kThreads / 32;
  __shared__ float partial_amax[kWarps];
  const int warp = threadIdx.x / 32;
  const int group = warp / warps_per_row;
  const int rows_per_block = kWarps / warps_per_row;
  const int group_threads = warps_per_row * 32;
  const int t = threadIdx.x - group * group_threads;
  const int num_vecs = cols / kVec;
  const int pass_vecs = group_threads * kFp8TokenSlots;
  const int num_passes = (num_vecs + pass_vecs - 1) / pass_vecs;

  // NOTE: the loop bound is uniform over the block (every thread reaches each __syncthreads).
  for (long long row_base = static_cast<long long>(blockIdx.x) * rows_per_block; row_base < rows;
       row_base += static_cast<long long>(gridDim.x) * rows_per_block) {
    const long long row = row_base + group;
    const bool row_ok = row < rows;
    const unsigned short* src = in + row * in_row_stride;
    HalfVec<kVec> slot[kFp8TokenSlots];
    float amax = 0.0f;
    for (int pass = 0; pass < num_passes; ++pass) {
#pragma unroll
      for (int s = 0; s < kFp8TokenSlots; ++s) {
        const int v = pass * pass_vecs + s * group_threads + t;
        if (row_ok && v < num_vecs) {
          slot[s] = load_half_vec<kVec>(src + static_cast<long long>(v) * kVec);
          float f[kVec];
          unpack_half_vec<kBf16, kVec>(slot[s], f);
          amax = fmaxf(amax, abs_max(f));
        }
      }
    }
    amax = warp_max(amax, 32);
    if (warps_per_row > 1) {
      if (threadIdx.x % 32 == 0) partial_amax[warp] = amax;
      __syncthreads();
      for (int w = 0; w < warps_per_row; ++w) amax = fmaxf(amax, partial_amax[group * warps_per_row + w]);
      __syncthreads();  // partial_amax is rewritten by the next row
    }
    const float scale = __fdiv_rn(fmaxf(amax, kFp8TokenMinAmax), kE4m3MaxValue);
    if (row_ok && t == 0) scales[row] = scale;
    unsigned char* dst = codes + row * static_cast<long long>(cols);
    for (int pass = 0; pass < num_passes; ++pass) {
#pragma unroll
      for (int s = 0; s < kFp8TokenSlots; ++s) {
        const int v = pass * pass_vecs + s * group_threads + t;
        if (row_ok && v < num_vecs) {
          if (num_passes > 1) slot[s] = load_half_vec<kVec>(src + static_cast<long long>(v) * kVec);
          float f[kVec];
          unpack_half_vec<kBf16, kVec>(slot[s], f);
          store_e4m3<true, kVec>(dst + static_cast<long long>(v) * kVec, f, scale);
        }
      }
    }
  }
}

// ---- MXFP8 / MXFP4, 16-byte path: one thread per 8 elements, 4 lanes per 32-element block ----
// PERF: the block amax is two shuffles; no shared memory, no row-wide step, so the whole tensor
// is one flat grid-stride loop over 16-byte vectors (rows * cols / 8 items). Each lane issues
// kMxItems independent loads before the first use: one 16-byte load per thread left the DRAM
// pipe short of bytes in flight (52% of copy bandwidth on an H200 at one item).
constexpr int kMxItems = 2;

template <QuantFormat kFormat, bool kBf16>
__device__ __forceinline__ void quantize_mx_vec8(const unsigned short* in, long long in_row_stride,
                                                 int rows, int cols, unsigned char* codes,
                                                 unsigned char* scales) {
  constexpr bool kFp4 = kFormat == QuantFormat::kMxfp4;
  // PERF: 32-bit item arithmetic (the host keeps rows * cols / 8 below 2^31).
  const unsigned vecs_per_row = static_cast<unsigned>(cols) / 8u;
  const unsigned num_items = static_cast<unsigned>(rows) * vecs_per_row;
  const long long blocks_per_row = cols / kMxBlock;
  const unsigned lane = threadIdx.x % 32;
  // NOTE: a warp walks kMxItems runs of 32 consecutive items and num_items is a multiple of 4,
  // so each 4-lane group is all in range or all out: the shuffles see every lane they read.
  for (unsigned base = (blockIdx.x * blockDim.x + (threadIdx.x - lane)) * kMxItems; base < num_items;
       base += gridDim.x * blockDim.x * kMxItems) {
    float f[kMxItems][8];
    bool ok[kMxItems];
    long long row[kMxItems], v[kMxItems];
#pragma unroll
    for (int k = 0; k < kMxItems; ++k) {
      const unsigned item = base + 32u * k + lane;
      ok[k] = item < num_items;
      const unsigned row32 = ok[k] ? item / vecs_per_row : 0u;
      row[k] = row32;
      v[k] = ok[k] ? static_cast<long long>(item - row32 * vecs_per_row) : 0;
      if (ok[k]) {
        unpack_half_vec<kBf16, 8>(load_half_vec<8>(in + row[k] * in_row_stride + v[k] * 8), f[k]);
      } else {
#pragma unroll
        for (int i = 0; i < 8; ++i) f[k][i] = 0.0f;
      }
    }
#pragma unroll
    for (int k = 0; k < kMxItems; ++k) {
      const float amax = warp_max(abs_max(f[k]), 4);
      const unsigned code = ue8m0_scale_for(amax, kFp4 ? kE2m1MaxValue : kE4m3MaxValue);
      const float inv = ue8m0_inverse_scale(code);
      if (!ok[k]) continue;
      if (v[k] % 4 == 0) scales[row[k] * blocks_per_row + v[k] / 4] = static_cast<unsigned char>(code);
      if constexpr (kFp4) {
        unsigned packed = 0;
#pragma unroll
        for (int i = 0; i < 8; i += 2) {
          const float lo = f[k][i] != f[k][i] ? f[k][i] : __fmul_rn(f[k][i], inv);
          const float hi = f[k][i + 1] != f[k][i + 1] ? f[k][i + 1] : __fmul_rn(f[k][i + 1], inv);
          packed |= f32x2_to_e2m1x2(lo, hi) << (4 * i);
        }
        *reinterpret_cast<unsigned*>(codes + row[k] * (cols / 2) + v[k] * 4) = packed;
      } else {
        store_e4m3<false, 8>(codes + row[k] * static_cast<long long>(cols) + v[k] * 8, f[k], inv);
      }
    }
  }
}

// ---- MX scalar fallback (rows not 16-byte aligned): one thread per 32-element block ----
template <QuantFormat kFormat, bool kBf16>
__device__ __forceinline__ void quantize_mx_scalar(const unsigned short* in, long long in_row_stride,
                                                   int rows, int cols, unsigned char* codes,
                                                   unsigned char* scales) {
  constexpr bool kFp4 = kFormat == QuantFormat::kMxfp4;
  const long long blocks_per_row = cols / kMxBlock;
  const long long num_items = static_cast<long long>(rows) * blocks_per_row;
  for (long long item = static_cast<long long>(blockIdx.x) * blockDim.x + threadIdx.x; item < num_items;
       item += static_cast<long long>(gridDim.x) * blockDim.x) {
    const long long row = item / blocks_per_row;
    const long long b = item - row * blocks_per_row;
    const unsigned short* src = in + row * in_row_stride + b * kMxBlock;
    float f[kMxBlock];
#pragma unroll
    for (int i = 0; i < kMxBlock; ++i) f[i] = half_to_f32<kBf16>(src[i]);
    const unsigned code = ue8m0_scale_for(abs_max(f), kFp4 ? kE2m1MaxValue : kE4m3MaxValue);
    const float inv = ue8m0_inverse_scale(code);
    scales[item] = static_cast<unsigned char>(code);
#pragma unroll
    for (int i = 0; i < kMxBlock; ++i) f[i] = f[i] != f[i] ? f[i] : __fmul_rn(f[i], inv);
    if constexpr (kFp4) {
      unsigned char* dst = codes + row * (cols / 2) + b * (kMxBlock / 2);
#pragma unroll
      for (int i = 0; i < kMxBlock; i += 2) dst[i / 2] = static_cast<unsigned char>(f32x2_to_e2m1x2(f[i], f[i + 1]));
    } else {
      unsigned char* dst = codes + row * static_cast<long long>(cols) + b * kMxBlock;
#pragma unroll
      for (int i = 0; i < kMxBlock; ++i) dst[i] = static_cast<unsigned char>(f32_to_e4m3(f[i]));
    }
  }
}

}  // namespace moeq_dev
