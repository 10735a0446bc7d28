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

}  // namespace moeq_dev
