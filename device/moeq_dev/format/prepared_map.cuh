#pragma once
// The index map of the prepared code layout (format/prepared.cuh), shared by the GPU transform
// and the host one (src/api/prepare.cpp), so the two cannot drift apart.
// NOTE: NVRTC-safe and host-safe: no standard headers, plain integer arithmetic.

#if defined(__CUDACC__) || defined(__CUDACC_RTC__)
#define MOEQ_HOST_DEVICE __host__ __device__ __forceinline__
#else
#define MOEQ_HOST_DEVICE inline
#endif

namespace moeq_dev {

// Canonical (row within the block, k within the tile) of code `index` of lane L's run (4-bit:
// index = 8 s + q for nibble q of word s; 8-bit: index = 4 w + b for byte b of word w).
MOEQ_HOST_DEVICE void prepared_source(int code_bits, int lane, int index, int& row, int& k) {
  const int g = lane / 4, t = lane % 4;
  int s, p, half;
  if (code_bits == 4) {
    const int q = index % 8;
    s = index / 8;
    p = q % 4;
    half = q / 4;
  } else {
    const int w = index / 4, b = index % 4;
    s = w / 2;
    p = 2 * (w % 2) + (b % 2);
    half = b / 2;
  }
  row = g + 8 * (p & 1);
  k = 16 * t + 4 * s + 2 * (p >> 1) + half;
}

// e2m1 codes (MXFP4, NVFP4) are stored with their bits moved so that the GEMM gets the bf16 bits
// of a fragment register (each element's e1 e0 m at bits 8..6 of its half, the sign at 15: the
// e2m1 value times 2^-126) with a rotate and a mask, or two of each (format/weights_fragment.cuh,
// e2m1_prepared_bits): register p of a word reads bit t of the result from word bit (t + r) % 32,
// r = 0, 4, 10 for p = 0, 1, 2 and, for p = 3, r = 14 at t = 6 and 22, else 6. The four
// registers' source bits tile the word. Bit b of a code: 0 m, 1 e0, 2 e1, 3 sign.
// PERF: ~2.25 instructions per pair instead of ~5 (shift, mask, two shifts and a merge per pair).
MOEQ_HOST_DEVICE int e2m1_prepared_bit(int p, int half, int b) {
  const int target = (b == 3 ? 15 : 6 + b) + 16 * half;
  const int r = p == 0 ? 0 : p == 1 ? 4 : p == 2 ? 10 : (target % 16 == 6 ? 14 : 6);
  return (target + r) % 32;
}

// A word of eight 4-bit codes in nibble order (nibble p + 4 half: register p, half `half`) with
// the e2m1 codes' bits moved as above.
MOEQ_HOST_DEVICE unsigned e2m1_place_word(unsigned nibbles) {
  unsigned out = 0;
  for (int q = 0; q < 8; ++q)
    for (int b = 0; b < 4; ++b)
      if ((nibbles >> (4 * q + b)) & 1u) out |= 1u << e2m1_prepared_bit(q % 4, q / 4, b);
  return out;
}

}  // namespace moeq_dev
