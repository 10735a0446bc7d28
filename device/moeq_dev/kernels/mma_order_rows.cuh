#pragma once
// Rows of 16-bit activations rewritten in the MMA's K order (format/mma_order.cuh): GEMM1's input for
// a warp-specialized tile that reads its tokens so (`/t`). A warp moves one 64-k tile (128 bytes) of a
// row at a time: lane l's 4-byte unit l to its place, all lanes' loads done before any store, so
// in == out (in place) is allowed.
// NOTE: NVRTC-safe: no standard headers.
#include "moeq_dev/format/mma_order.cuh"
#include "moeq_dev/ptx/grid_dependency.cuh"

namespace moeq_dev {
// 64-k tiles a warp moves per step: their loads in flight together.
// NOTE: arithmetic, not measured: one tile per warp keeps ~8 KB in flight per SM at full occupancy, a
// quarter of what copy bandwidth needs at ~1 us of latency. ncu timed the pass at 9.6 us for 2 x 11.8 MB
// (gpt-oss-120b M = 2048, bench/results/2026-12-04-h200-mma-order.md, call 7).
constexpr int kOrderTilesPerStep = 4;
}  // namespace moeq_dev

// in / out: rows of tiles_per_row 64-k tiles, row strides in 4-byte words; the host checked
// rows * tiles_per_row < 2^31 and 4-byte alignment.
extern "C" __global__ void __launch_bounds__(256)
moeq_order_rows_for_mma(const unsigned* in, long long in_row_words, unsigned* out, long long out_row_words, int rows,
                        int tiles_per_row) {
  moeq_dev::begin_dependent_grid();
  const unsigned lane = threadIdx.x % 32;
  const int to = static_cast<int>(moeq_dev::mma_order_position(2 * lane) / 2);
  const unsigned items = static_cast<unsigned>(rows) * static_cast<unsigned>(tiles_per_row);
  const unsigned warps = gridDim.x * (blockDim.x / 32);
  constexpr int kSteps = moeq_dev::kOrderTilesPerStep;
  for (unsigned first = blockIdx.x * (blockDim.x / 32) + threadIdx.x / 32; first < items; first += kSteps * warps) {
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
