#pragma once
// A dynamic activation quantizer (moe/quantize.cuh) folded into the launch of a routing kernel
// (kernels/routing.cuh): the CTAs from `first_block` on quantize GEMM1's input while the ones
// before it route. The two read and write disjoint buffers, so they need no order between them,
// and the step saves the quantizer's own kernel boundary (src/cuda/routing.hpp, FoldedQuantizer).
// The generated RoutingCfg defines kFoldFormat (-1: none, else a QuantFormat), kFoldBf16,
// kFoldValuesOut, kFoldFp8Slots and kFoldOrderRows.
// kFoldOrderRows: the folded CTAs do not quantize but copy 16-bit rows into the MMA's K order
// (moe/order_rows.cuh: GEMM1's input on a `/t` tile), `in` to `codes` (dense, cols a row).
#include "moeq_dev/moe/order_rows.cuh"
#include "moeq_dev/moe/quantize.cuh"
#include "moeq_dev/moe/routing.cuh"

namespace moeq_dev {

// Kernel argument; the host's mirror is moeq::cuda::FoldedQuantizerArgs (same layout). The order fold
// (kFoldOrderRows) reads in, in_row_stride (even), codes, rows and cols (a multiple of 64).
struct FoldedQuantizerArgs {
  const unsigned short* in;  // [rows, cols] at in_row_stride elements
  long long in_row_stride;
  unsigned char* codes;  // codes, or with kFoldValuesOut their 16-bit values (dense)
  void* scales;
  int rows, cols;
  int vectorized, warps_per_row;  // as moeq_quantize_activation's
  unsigned first_block;           // the routing's CTAs come first
  int mma_order;                  // the values (or FP8 per-token codes) in the MMA's K order (CodeSink)
};

template <class RoutingCfg>
struct FoldedQuantizerCfg {
  static constexpr QuantFormat kFormat = static_cast<QuantFormat>(RoutingCfg::kFoldFormat);
  static constexpr bool kDtypeIsBf16 = RoutingCfg::kFoldBf16;
  static constexpr bool kValuesOut = RoutingCfg::kFoldValuesOut;
  static constexpr int kThreads = RoutingCfg::kThreads;
  // FP8 per token: the vectors a lane keeps per pass, 2 rather than the quantizer's own 8 (the host's
  // kFoldedFp8TokenSlots, written into RoutingCfg).
  // PERF: with 8, inline, the unrolled bodies shared the routing's 64 registers a thread (1024-thread
  // CTAs): the folded route_fused spilled 56 bytes and its routing CTA alone took 13.4 us against the
  // plain kernel's 6.6 at Qwen3 M = 1, half its cycles waiting for instruction fetches (ncu, cold);
  // out of line, 8 slots spilled 116 bytes in the quantizer, 2 slots 0-20
  // (bench/results/2026-12-03-h200-fold-codegen.md).
  static constexpr int kFp8Slots = RoutingCfg::kFoldFp8Slots;
};

template <class RoutingCfg>
__device__ __forceinline__ void folded_quantize_rows_inline(const FoldedQuantizerArgs& a) {
  quantize_rows<FoldedQuantizerCfg<RoutingCfg>>(BufferSource{a.in, a.in_row_stride}, a.rows, a.cols, a.codes, a.scales,
                                                a.vectorized, a.warps_per_row,
                                                GridSlice{blockIdx.x - a.first_block, gridDim.x - a.first_block}, a.mma_order);
}
template <class RoutingCfg>
__device__ __noinline__ void folded_quantize_rows_out_of_line(const FoldedQuantizerArgs& a) {
  folded_quantize_rows_inline<RoutingCfg>(a);
}

// True on the quantizer's CTAs, once they are done: the caller returns. False on the routing's.
// PERF: out of line where the routing half takes every register itself (route_fused: 63 of 64 at
// 1024 threads), inline where it leaves room (route_count, route_chunk_count: 32). Qwen3-30B-A3B
// MXFP4 x FP8 per token, step: out of line -1.75 us at M = 1 (route_fused) but +0.5 / +1.3 us at
// M = 16 / 256 (route_count), where inline took -0.7 / -1.2 us (both against 8 slots inline;
// bench/results/2026-12-03-h200-fold-codegen.md).
template <class RoutingCfg>
__device__ __forceinline__ void folded_order_rows(const FoldedQuantizerArgs& a) {
  constexpr unsigned kWarpsPerCta = RoutingCfg::kThreads / 32;
  order_rows_for_mma_warps(reinterpret_cast<const unsigned*>(a.in), a.in_row_stride / 2,
                           reinterpret_cast<unsigned*>(a.codes), a.cols / 2, a.rows, a.cols / 64,
                           (blockIdx.x - a.first_block) * kWarpsPerCta + threadIdx.x / 32,
                           (gridDim.x - a.first_block) * kWarpsPerCta);
}

template <class RoutingCfg>
__device__ __forceinline__ bool run_folded_quantizer(const FoldedQuantizerArgs& a) {
  if constexpr (RoutingCfg::kFoldOrderRows) {
    if (blockIdx.x < a.first_block) return false;
    folded_order_rows<RoutingCfg>(a);
    return true;
  } else if constexpr (RoutingCfg::kFoldFormat >= 0) {
    if (blockIdx.x < a.first_block) return false;
    if constexpr (RoutingCfg::kKernel == RoutingKernel::kRouteFused) {
      folded_quantize_rows_out_of_line<RoutingCfg>(a);
    } else {
      folded_quantize_rows_inline<RoutingCfg>(a);
    }
    return true;
  } else {
    return false;
  }
}

}  // namespace moeq_dev
