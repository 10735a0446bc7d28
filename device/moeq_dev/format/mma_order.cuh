#pragma once
// The MMA's K order of 16-bit activations (moeq::cuda::GemmTile::mma_order_tokens): where each k of a
// 64-k tile sits in a token row laid out for the warp-specialized tile's wgmma to read as copied.
// The weights' K order (kernels/moe_gemm_sync.cuh) gives lane t of a fragment row the physical k
// [16t, 16t + 16) of a tile, k16 step s taking 16t + 4s + 2j + {0, 1} as its fragment pair j (logical
// k 8j + 2t + {0, 1} of the step); the tokens must hold that physical k at logical position 16s + 8j +
// 2t + {0, 1}. In units of two k: unit u = 8t + 2s + j moves to 8s + 4j + t, a permutation of 4-byte
// units that keeps each pair together. Shared by the GPU kernels and the host (tests, the CPU side).
// NOTE: NVRTC-safe and host-safe: no standard headers.

#if defined(__CUDACC__) || defined(__CUDACC_RTC__)
#define MOEQ_MMA_ORDER_HD __host__ __device__ __forceinline__
#else
#define MOEQ_MMA_ORDER_HD inline
#endif

namespace moeq_dev {

// Position in the MMA-ordered row of the element at k (the permutation stays inside each 64-k tile).
MOEQ_MMA_ORDER_HD long long mma_order_position(long long k) {
  const int in_tile = static_cast<int>(k & 63), unit = in_tile >> 1;
  const int t = unit >> 3, s = (unit >> 1) & 3, j = unit & 1;
  return (k & ~63ll) + 2 * (8 * s + 4 * j + t) + (in_tile & 1);
}

// The same for e4m3 codes (one byte each; the e4m3 consumers of kernels/moe_gemm_ws_e4m3.cuh, `/t` tiles):
// a 128-k tile of codes fills the 128 bytes of a 64-k tile of 16-bit elements, and the consumers' K order
// moves the same 4-byte units the same way (lane t owns the physical k [32t, 32t + 32) of a tile, MMA j (k32)
// taking 32t + 8j + 4h + [0, 4) as its logical k 16h + 4t + [0, 4): unit u = 8t + 2j + h moves to 8j + 4h + t),
// so code k goes where byte k of the 16-bit row goes.
MOEQ_MMA_ORDER_HD long long e4m3_mma_order_position(long long k) { return 2 * mma_order_position(k >> 1) + (k & 1); }

#if defined(__CUDACC__) || defined(__CUDACC_RTC__)
// The e4m3 codes [e, e + 8) (e % 8 == 0; each row a whole number of 128-k tiles), bytes of `codes` (byte i of the
// pair = element e + i), stored in the MMA's K order: units 2u and 2u + 1 land 16 bytes apart (h = 0, 1).
__device__ __forceinline__ void store_e4m3x8_in_mma_order(unsigned char* codes, long long e, uint2 w) {
  unsigned* first = reinterpret_cast<unsigned*>(codes + e4m3_mma_order_position(e));
  first[0] = w.x;
  first[4] = w.y;
}

// The 16-bit elements [e, e + 8) of `values` (e % 8 == 0; each row a whole number of 64-k tiles), given as 4
// pairs, stored in the MMA's K order: each pair at its own place.
// NOTE: the chunk is units u0 + i (u0 % 4 == 0: t = u0 / 8, s = s0 + i / 2, j = i % 2), so pair i lands
// 8 s0 + t + 8 (i / 2) + 4 (i % 2) = the first pair's place + 4 i units: one address, 16-byte steps.
// PERF: the position of each pair apart cost ~60 integer instructions a chunk (64-bit address math, four
// times) in a warp-specialized GEMM1's activation epilogue (SASS, session 56).
__device__ __forceinline__ void store_pairs_in_mma_order(unsigned short* values, long long e, const unsigned (&pairs)[4]) {
  unsigned* first = reinterpret_cast<unsigned*>(values + mma_order_position(e));
#pragma unroll
  for (int i = 0; i < 4; ++i) first[4 * i] = pairs[i];
}
#endif

}  // namespace moeq_dev
