#pragma once
// A dynamic activation quantizer (moe/quantize.cuh) folded into the launch of a routing kernel
// (kernels/routing.cuh): the CTAs from `first_block` on quantize GEMM1's input while the ones
// before it route. The two read and write disjoint buffers, so they need no order between them,
// and the step saves the quantizer's own kernel boundary (src/cuda/routing.hpp, FoldedQuantizer).
// The generated RoutingCfg defines kFoldFormat (-1: none, else a QuantFormat), kFoldBf16 and
// kFoldValuesOut.
#include "moeq_dev/moe/quantize.cuh"

namespace moeq_dev {

// Kernel argument; the host's mirror is moeq::cuda::FoldedQuantizerArgs (same layout).
struct FoldedQuantizerArgs {
  const unsigned short* in;  // [rows, cols] at in_row_stride elements
  long long in_row_stride;
  unsigned char* codes;  // codes, or with kFoldValuesOut their 16-bit values (dense)
  void* scales;
  int rows, cols;
  int vectorized, warps_per_row;  // as moeq_quantize_activation's
  unsigned first_block;           // the routing's CTAs come first
  int unused;
};

template <class RoutingCfg>
struct FoldedQuantizerCfg {
  static constexpr QuantFormat kFormat = static_cast<QuantFormat>(RoutingCfg::kFoldFormat);
  static constexpr bool kDtypeIsBf16 = RoutingCfg::kFoldBf16;
  static constexpr bool kValuesOut = RoutingCfg::kFoldValuesOut;
  static constexpr int kThreads = RoutingCfg::kThreads;
};

// True on the quantizer's CTAs, once they are done: the caller returns. False on the routing's.
template <class RoutingCfg>
__device__ __forceinline__ bool run_folded_quantizer(const FoldedQuantizerArgs& a) {
  if constexpr (RoutingCfg::kFoldFormat >= 0) {
    if (blockIdx.x < a.first_block) return false;
    quantize_rows<FoldedQuantizerCfg<RoutingCfg>>(BufferSource{a.in, a.in_row_stride}, a.rows, a.cols, a.codes,
                                                  a.scales, a.vectorized, a.warps_per_row,
                                                  GridSlice{blockIdx.x - a.first_block, gridDim.x - a.first_block});
    return true;
  } else {
    return false;
  }
}

}  // namespace moeq_dev
