#pragma once
// e2m1 codes (MXFP4 weights) as e4m3 bytes with a power of two folded in, for the e4m3 tensor
// cores (kernels/moe_gemm_ws_e4m3.cuh): code c of an MX group whose scale exponent lies d binades
// above a base b becomes the e4m3 byte of e2m1(c) * 2^(d - 6); the MMA's sums then only need the
// base's 2^(b - 127 + 6) per row and window of groups, not one multiply per group.
// NOTE: exact for d in [0, 12]: the e2m1 magnitudes are {1, 2, 3, 4, 6, 8, 12} * 2^-1 (at most
// two significant bits), times 2^(d - 6) they lie in [2^-7, 384]: normals of e4m3 (<= 448) but
// for 2^-7 at d = 0, which is the subnormal 4 * 2^-9 (byte 0x04). Byte of magnitude code m
// (e1 e0 m0 = e2m1 exponent e, mantissa bit): m = 0 -> 0; m = 1 (0.5) -> d << 3, or 0x04 at d = 0;
// m >= 2 -> ((e + d) << 3) | (m0 << 2) = (m << 2) + (d << 3).
// NOTE: NVRTC-safe and host-safe (the table; the byte permute is device code).

#if defined(__CUDACC__) || defined(__CUDACC_RTC__)
#define MOEQ_E2M1_E4M3_HD __host__ __device__ __forceinline__
#else
#define MOEQ_E2M1_E4M3_HD inline
#endif

namespace moeq_dev {

// Largest d the table is exact for (6 * 2^(12 - 6) = 384 <= 448 < 6 * 2^7).
constexpr int kE2m1E4m3MaxShift = 12;

// The e4m3 bytes of the 8 magnitude codes at shift d (0 <= d <= 12): byte m of {lo, hi}.
struct E2m1E4m3Table {
  unsigned lo, hi;
};

MOEQ_E2M1_E4M3_HD E2m1E4m3Table e2m1_e4m3_table(int d) {
  const unsigned D = static_cast<unsigned>(d) << 3;
  const unsigned half = d == 0 ? 0x04u : D;
  // NOTE: no carry between bytes: the largest byte is 0x1C + (12 << 3) = 0x7C.
  return {0x0C080000u + D * 0x01010000u + (half << 8), 0x1C181410u + D * 0x01010101u};
}

// The e4m3 byte of one 4-bit code (sign bit 3) through the table: the host statement of what
// e2m1x8_to_e4m3 computes per code (tests/unit).
MOEQ_E2M1_E4M3_HD unsigned e2m1_e4m3_byte(unsigned code, const E2m1E4m3Table& t) {
  const unsigned m = code & 7u;
  const unsigned magnitude = ((m < 4 ? t.lo : t.hi) >> (8 * (m & 3u))) & 0xFFu;
  return magnitude | ((code & 8u) << 4);
}

#if defined(__CUDACC__) || defined(__CUDACC_RTC__)
// Eight codes (nibble i = code i) -> two registers of four e4m3 bytes: lo = codes 0-3, hi = 4-7.
// PERF: a byte permute per four magnitudes and one per four signs (the selector 0 / 4 picks 0x00 or the
// immediate's 0x80: no constant register to rematerialize before each permute). The integer ALU pipe (half rate)
// is as busy as the e4m3 MMAs in the decode loop, so work goes to the FMA pipe where it can: the sum of the
// disjoint magnitude and sign bytes (IMAD.IADD, not LOP3) and the sign's shift (IMAD.HI). Per narrow 128-k tile
// and warp of the st6 e4m3 GEMM (offline, nvcc 13.0): ALU-pipe instructions 115 -> 91, FMA-pipe 77 -> 101.
__device__ __forceinline__ void e2m1x8_to_e4m3(unsigned w, const E2m1E4m3Table& t, unsigned& lo, unsigned& hi) {
  const unsigned magnitude = w & 0x77777777u, sign = __umulhi(w, 0x80000000u) & 0x44444444u;
  lo = __byte_perm(t.lo, t.hi, magnitude) + __byte_perm(0u, 0x80u, sign);
  hi = __byte_perm(t.lo, t.hi, magnitude >> 16) + __byte_perm(0u, 0x80u, sign >> 16);
}
#endif

}  // namespace moeq_dev
