// Host side of the activation kernel and of the MMA row order: checks, work split, launch.
#include "cuda/elementwise.hpp"

#include <array>
#include <atomic>
#include <climits>
#include <string>

#include "cuda/elementwise_kernels.hpp"
#include "cuda/folded_quantizer.hpp"
#include "cuda/launch.hpp"
#include "moeq/error.hpp"

namespace moeq::cuda {

using elementwise_detail::kThreads;
using elementwise_detail::kVecElems;
using elementwise_detail::str;
using elementwise_detail::activation_enum;
using elementwise_detail::check_dtype;
using elementwise_detail::activation_index;
using elementwise_detail::cached_function;
using elementwise_detail::grid_blocks;
using elementwise_detail::aligned;
using elementwise_detail::KernelActivationArgs;

void activation(const ActivationParams& params, bool interleaved, DType dtype, CUdeviceptr in,
                int64_t rows, int64_t intermediate, CUdeviceptr out, CUstream stream, bool mma_order) {
  check_dtype(dtype);
  activation_enum(params.kind);
  if (interleaved && !is_gated(params.kind))
    throw Error("interleaved_gate_up needs a gated activation, not " + std::string(to_string(params.kind)));
  if (rows < 0 || rows > INT_MAX) throw Error("rows = " + str(rows) + " is outside [0, 2^31)");
  if (intermediate <= 0) throw Error("intermediate = " + str(intermediate) + " is not positive");
  if (rows == 0) return;
  if (in == 0 || out == 0) throw Error("activation: in and out must be device pointers, not null");

  // 16-byte path: I % 8 == 0 keeps every row (I or 2I elements) 16-byte aligned.
  const bool vectorized = intermediate % kVecElems == 0 && aligned(in, 16) && aligned(out, 16);
  if (mma_order && (intermediate % 64 != 0 || !vectorized))
    throw Error("activation: the MMA's K order needs intermediate % 64 == 0 (intermediate = " + str(intermediate) +
                ") and 16-byte aligned in and out");
  const int64_t items = rows * (vectorized ? intermediate / kVecElems : intermediate);
  if (items >= (int64_t{1} << 31))  // the kernel indexes items in 32 bits
    throw Error("activation: rows * intermediate = " + str(rows * intermediate) + " is too large");

  static std::array<std::atomic<CUfunction>, 9 * 2 * 2> functions{};
  const CUfunction f = cached_function(functions, activation_index(params.kind, interleaved, dtype),
                                       [&] { return activation_kernel_spec(params.kind, interleaved, dtype); });
  LaunchShape shape;
  shape.grid_x = grid_blocks((items + kThreads - 1) / kThreads);
  shape.block_x = kThreads;
  const int rows_arg = static_cast<int>(rows);
  const long long intermediate_arg = intermediate;
  const KernelActivationArgs args{params.swiglu_alpha, params.swiglu_limit, params.silu_clamp};
  const int vectorized_arg = vectorized ? 1 : 0, mma_order_arg = mma_order ? 1 : 0;
  launch(f, shape, stream, in, out, rows_arg, intermediate_arg, args, vectorized_arg, mma_order_arg);
}

namespace {

// order_rows_for_mma's arguments; false: rows = 0 (nothing to do).
bool check_order_rows(CUdeviceptr in, int64_t in_row_stride, int64_t rows, int64_t cols, CUdeviceptr out,
                      int64_t out_row_stride) {
  if (rows < 0) throw Error("order_rows_for_mma: rows = " + str(rows) + " is negative");
  if (cols <= 0 || cols % 64 != 0) throw Error("order_rows_for_mma: cols = " + str(cols) + " is not a positive multiple of 64");
  if (in_row_stride < cols || in_row_stride % 2 != 0 || out_row_stride < cols || out_row_stride % 2 != 0)
    throw Error("order_rows_for_mma: row strides " + str(in_row_stride) + " / " + str(out_row_stride) +
                " must be even and at least cols = " + str(cols));
  if (rows == 0) return false;
  if (in == 0 || out == 0 || !aligned(in, 4) || !aligned(out, 4))
    throw Error("order_rows_for_mma: in and out must be 4-byte aligned device pointers");
  if (in == out && in_row_stride != out_row_stride)
    throw Error("order_rows_for_mma: in place needs one row stride, not " + str(in_row_stride) + " and " +
                str(out_row_stride));
  const int64_t tiles = rows * (cols / 64);
  if (tiles >= (int64_t{1} << 31)) throw Error("order_rows_for_mma: rows * cols / 64 = " + str(tiles) + " is too large");
  return true;
}

}  // namespace

void order_rows_for_mma(CUdeviceptr in, int64_t in_row_stride, int64_t rows, int64_t cols, CUdeviceptr out,
                        int64_t out_row_stride, CUstream stream) {
  if (!check_order_rows(in, in_row_stride, rows, cols, out, out_row_stride)) return;
  const int64_t tiles = rows * (cols / 64);
  static std::array<std::atomic<CUfunction>, 1> functions{};
  const CUfunction f = cached_function(functions, 0, [] { return order_rows_kernel_spec(); });
  LaunchShape shape;
  // A warp per 64-k tile, 4 tiles a step (moeq_dev::kOrderTilesPerStep).
  shape.grid_x = grid_blocks((tiles + kThreads / 32 * 4 - 1) / (kThreads / 32 * 4));
  shape.block_x = kThreads;
  const long long in_words = in_row_stride / 2, out_words = out_row_stride / 2;
  const int rows_arg = static_cast<int>(rows), tiles_arg = static_cast<int>(cols / 64);
  launch(f, shape, stream, in, in_words, out, out_words, rows_arg, tiles_arg);
}

FoldedQuantizer fold_order_rows(DType dtype, CUdeviceptr in, int64_t in_row_stride, int64_t rows, int64_t cols,
                                CUdeviceptr out, int threads) {
  check_dtype(dtype);
  FoldedQuantizer fold;
  if (!check_order_rows(in, in_row_stride, rows, cols, out, cols)) return fold;
  if (rows > INT_MAX || cols > INT_MAX)
    throw Error("fold_order_rows: rows = " + str(rows) + " or cols = " + str(cols) + " is too large");
  const int64_t tiles_per_cta = int64_t{threads} / 32 * 4;  // moeq_dev::kOrderTilesPerStep tiles a warp per step
  fold.order_rows = true;
  fold.dtype = dtype;
  fold.blocks = folded_blocks((rows * (cols / 64) + tiles_per_cta - 1) / tiles_per_cta, threads);
  fold.args.in = in;
  fold.args.in_row_stride = in_row_stride;
  fold.args.codes = out;
  fold.args.rows = static_cast<int32_t>(rows);
  fold.args.cols = static_cast<int32_t>(cols);
  return fold;
}

}  // namespace moeq::cuda
