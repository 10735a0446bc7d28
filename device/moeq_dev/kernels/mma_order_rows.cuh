#pragma once
// The order pass's own launch (moe/order_rows.cuh): GEMM1's 16-bit input in the MMA's K order where it cannot
// ride on the routing's first launch (src/api/cuda_backend.cpp: the contiguous layout's permuted rows, the
// chunked routing path).
// NOTE: NVRTC-safe: no standard headers.
#include "moeq_dev/moe/order_rows.cuh"
#include "moeq_dev/ptx/grid_dependency.cuh"

// in / out: rows of tiles_per_row 64-k tiles, row strides in 4-byte words; the host checked
// rows * tiles_per_row < 2^31 and 4-byte alignment.
extern "C" __global__ void __launch_bounds__(256)
moeq_order_rows_for_mma(const unsigned* in, long long in_row_words, unsigned* out, long long out_row_words, int rows,
                        int tiles_per_row) {
  moeq_dev::begin_dependent_grid();
  const unsigned warps_per_cta = blockDim.x / 32;
  moeq_dev::order_rows_for_mma_warps(in, in_row_words, out, out_row_words, rows, tiles_per_row,
                                     blockIdx.x * warps_per_cta + threadIdx.x / 32, gridDim.x * warps_per_cta);
}
