#pragma once
// Rows of 16-bit activations rewritten in the MMA's K order (format/mma_order.cuh): GEMM1's input for a
// warp-specialized tile that reads its tokens so (`/t`), by whichever warps a launch gives it: the order
// kernel's own grid (kernels/mma_order_rows.cuh) or CTAs folded into the routing's first launch
// (moe/folded_quantizer.cuh). A warp moves one 64-k tile (128 bytes) of a row at a time: lane l's 4-byte unit l
// to its place, all lanes' loads done before any store, so in == out (in place) is allowed.
// NOTE: NVRTC-safe: no standard headers.
#include "moeq_dev/format/mma_order.cuh"

namespace moeq_dev {

// 64-k tiles a warp moves per step: their loads in flight together.
// NOTE: arithmetic, not measured: one tile per warp keeps ~8 KB in flight per SM at full occupancy, a
// quarter of what copy bandwidth needs at ~1 us of latency. ncu timed the pass at 9.6 us for 2 x 11.8 MB
// (gpt-oss-120b M = 2048, bench/results/2026-12-04-h200-mma-order.md, call 7).
constexpr int kOrderTilesPerStep = 4;

// in / out: rows of tiles_per_row 64-k tiles, row strides in 4-byte words; warp `warp` of `warps` takes
// tiles warp + warps i. The host checked rows * tiles_per_row < 2^31 and 4-byte alignment.
__device__ __forceinline__ void order_rows_for_mma_warps(const unsigned* in, long long in_row_words, unsigned* out,
                                                         long long out_row_words, int rows, int tiles_per_row,
                                                         unsigned warp, unsigned warps) {
  const unsigned lane = threadIdx.x % 32;
  const int to = static_cast<int>(mma_order_position(2 * lane) / 2);
  const unsigned items = static_cast<unsigned>(rows) * static_cast<unsigned>(tiles_per_row);
  constexpr int kSteps = kOrderTilesPerStep;
  for (unsigned first = warp; first < items; first += kSteps * warps) {
    unsigned v[kSteps];
    long long dst[kSteps];
#pragma unroll
    for (int i = 0; i < kSteps; ++i) {
      const unsigned item = first + i * warps;
      dst[i] = -1;
      if (item < items) {
        const unsigned row = item / static_cast<unsigned>(tiles_per_row), tile = item - row * tiles_per_row;
        v[i] = in[row * in_row_words + 32ll * tile + lane];
        dst[i] = row * out_row_words + 32ll * tile + to;
      }
    }
    __syncwarp();
#pragma unroll
    for (int i = 0; i < kSteps; ++i)
      if (dst[i] >= 0) out[dst[i]] = v[i];
  }
}

}  // namespace moeq_dev
