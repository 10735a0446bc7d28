#pragma once
// The prepared code layout (moeq::CodeLayout::prepared): the MoE GEMM's own order of the weight
// codes, written once at load time by moeq::prepare_codes (GPU) or prepare_codes_host (CPU,
// src/api/prepare.cpp, the same map). Scales, zero points and biases stay canonical.
//
// Codes are cut into blocks of 16 channels x 64 k (one MMA A tile of 16 rows x one K tile),
// stored [E][ceil(N / 16)][ceil(K / 64)][block]; channels past N and k past K are zero codes.
// Inside a block, lane L = 4g + t of a warp owns rows g and g + 8 and the k [16t, 16t + 16) of
// the tile (the GEMM's K order, kernels/moe_gemm_sync.cuh). For k16 step s its four A registers
// a_p (p = 0..3) hold row g + 8 (p & 1), k = 16t + 4s + 2 (p >> 1) + {0, 1}:
//   4-bit (512-byte block): word s of lane L is at byte 16 L + 4 s; register a_p is its
//         nibbles p (k + 0) and p + 4 (k + 1), so `(w >> 4p) & 0x000F000F` is the pair (INT4);
//         e2m1 codes have their bits moved within the word (prepared_map.cuh, e2m1_place_word).
//   8-bit (1 KB block): word w = 2s + (p >> 1) of lane L is at byte 512 (w >> 2) + 16 L +
//         4 (w & 3) (two 512-byte halves keep 16-byte loads conflict-free); a_p is its bytes
//         (p & 1) (k + 0) and (p & 1) + 2 (k + 1).
// NOTE: NVRTC-safe: no standard headers.

#include "moeq_dev/format/prepared_map.cuh"
#include "moeq_dev/ptx/grid_dependency.cuh"

// One thread per output 32-bit word of the prepared codes.
extern "C" __global__ void moeq_prepare_codes(const unsigned char* canonical, unsigned* prepared, long long num_words,
                                              int code_bits, int e2m1, int n, int k, int tiles_n, int tiles_k) {
  moeq_dev::begin_dependent_grid();
  const long long word = static_cast<long long>(blockIdx.x) * blockDim.x + threadIdx.x;
  if (word >= num_words) return;
  const int block_bytes = code_bits * 128;  // 16 x 64 codes
  const long long block = word * 4 / block_bytes;
  const int offset = static_cast<int>(word * 4 % block_bytes);
  const int kt = static_cast<int>(block % tiles_k);
  const long long en = block / tiles_k;  // e * tiles_n + j
  const int j = static_cast<int>(en % tiles_n);
  const long long e = en / tiles_n;
  int lane, word_in_lane;
  if (code_bits == 4) {
    lane = offset / 16;
    word_in_lane = (offset % 16) / 4;
  } else {
    lane = (offset % 512) / 16;
    word_in_lane = 4 * (offset / 512) + (offset % 16) / 4;
  }
  const long long row_bytes = static_cast<long long>(k) * code_bits / 8;
  const int per_word = 32 / code_bits;
  unsigned out = 0;
  for (int c = 0; c < per_word; ++c) {
    int row, kk;
    moeq_dev::prepared_source(code_bits, lane, word_in_lane * per_word + c, row, kk);
    const int n_abs = j * 16 + row, k_abs = kt * 64 + kk;
    if (n_abs >= n || k_abs >= k) continue;
    const unsigned char* r = canonical + (e * n + n_abs) * row_bytes;
    const unsigned code = code_bits == 4 ? (r[k_abs / 2] >> (4 * (k_abs % 2))) & 0xFu : r[k_abs];
    out |= code << (code_bits * c);
  }
  prepared[word] = e2m1 ? moeq_dev::e2m1_place_word(out) : out;
}
