// Host side of the activation quantizers (FP8 per token, MXFP8, MXFP4): the standalone launch,
// the one fused after the activation, the one folded into a routing kernel, and the dequantizer.
#include <algorithm>
#include <array>
#include <atomic>
#include <climits>
#include <string>

#include "cuda/elementwise.hpp"
#include "cuda/elementwise_kernels.hpp"
#include "cuda/folded_quantizer.hpp"
#include "cuda/launch.hpp"
#include "moeq/error.hpp"

namespace moeq::cuda {

using elementwise_detail::kThreads;
using elementwise_detail::kMxBlock;
using elementwise_detail::kVecElems;
using elementwise_detail::kFp8TokenSlots;
using elementwise_detail::kMxItems;
using elementwise_detail::str;
using elementwise_detail::activation_enum;
using elementwise_detail::format_enum;
using elementwise_detail::check_dtype;
using elementwise_detail::activation_index;
using elementwise_detail::quantize_index;
using elementwise_detail::cached_function;
using elementwise_detail::grid_blocks;
using elementwise_detail::aligned;
using elementwise_detail::KernelActivationArgs;

namespace {

// The quantizers' work split (moe/quantize_fp8_token.cuh, quantize_mx.cuh): FP8 per token, warp groups per row; MX, a flat loop.
struct QuantizerLaunch {
  int warps_per_row = 1;
  int64_t work_blocks = 0;
};
// On CTAs of `threads` (kThreads for the quantizer's own launch, the routing's for a folded one),
// FP8 per token with `slots` vectors a lane keeps per pass (kFp8TokenSlots, or kFoldedFp8TokenSlots).
QuantizerLaunch quantizer_launch(ActFormat format, int64_t rows, int64_t cols, bool vectorized, int threads,
                                 int slots = kFp8TokenSlots) {
  QuantizerLaunch q;
  if (format == ActFormat::fp8_token) {
    // The fewest warps per row that keep the row in registers (`slots` vectors of 8 elements a lane;
    // longer rows use all 8 warps and re-read from L2); then, while the grid is short of one block
    // per SM, twice the warps per row while the row has more vectors than the group has lanes.
    // PERF: with the first rule alone a lane of a short grid ran up to 8 unrolled slot bodies in
    // turn: Qwen3 at M = 16 the GEMM1 input quantizer (16 rows of 2048, 2 blocks) took 7.0 us and
    // GEMM2's fused activation-quantize (128 rows of 768, 16 blocks) 12.5 us (the activation alone:
    // 3.0); with one vector per lane everywhere 4.0 and 7.7 us, but at M = 4096 (512 and 4096
    // blocks of one warp per row) 16 -> 27 and 90 -> 154 us (ncu, bench/results/
    // 2026-12-02-h200-quantizer-warps.md): more warps only where the grid is short.
    // NOTE: at most 8 warps per row (kThreads / 32) on larger CTAs too: the rule was measured there.
    const int max_warps_per_row = kThreads / 32;
    const int64_t vecs = vectorized ? cols / kVecElems : cols;
    while (q.warps_per_row < max_warps_per_row && vecs > int64_t{q.warps_per_row} * 32 * slots)
      q.warps_per_row *= 2;
    static const int64_t num_sms = current_device_info().num_sms;  // queried once, as grid_blocks
    auto blocks = [&](int warps_per_row) {
      const int64_t rows_per_block = threads / 32 / warps_per_row;
      return (rows + rows_per_block - 1) / rows_per_block;
    };
    // PERF: the folded CTAs too, though one 1024-thread CTA fits an SM (64 registers a thread): kept
    // to one wave of them (Qwen3 at M = 640: 80 CTAs of 4 warps per row, not 160 of 8) the FP8 step
    // took +1.3% (M = 512, 768: even; bench/results/2026-12-03-h200-dense-tune.md, call 2).
    while (q.warps_per_row < max_warps_per_row && blocks(q.warps_per_row) < num_sms &&
           vecs > int64_t{q.warps_per_row} * 32)
      q.warps_per_row *= 2;
    q.work_blocks = blocks(q.warps_per_row);
  } else {
    // moeq_dev::kMxItems = 4 vectors per thread on the 16-byte path.
    const int64_t items = vectorized ? rows * cols / kVecElems / kMxItems : rows * cols / kMxBlock;
    q.work_blocks = (items + threads - 1) / threads;
  }
  return q;
}

// The output checks of both quantizer launchers (`name` in the messages), and the bytes a thread
// of the 16-byte path stores per 8 elements: 16 of values, or 8 (e4m3) / 4 (e2m1) of codes.
unsigned check_quantizer_outputs(const std::string& name, ActFormat format, CUdeviceptr out, CUdeviceptr scales,
                                 bool values_out) {
  if (!aligned(scales, format == ActFormat::fp8_token ? 4 : 1))
    throw Error(name + ": fp32 scales must be 4-byte aligned");
  if (values_out && !aligned(out, 2)) throw Error(name + ": values must be 2-byte aligned");
  return values_out ? 16 : format == ActFormat::mxfp4 ? 4 : 8;
}

// The MMA's K order: 16-bit values in whole 64-k tiles (moeq_dev::mma_order_position), or FP8 per-token codes
// in whole 128-k tiles (moeq_dev::e4m3_mma_order_position, the e4m3 consumers').
void check_mma_order(bool mma_order, ActFormat format, bool values_out, int64_t cols, const char* name) {
  if (!mma_order) return;
  if (values_out ? cols % 64 != 0 : format != ActFormat::fp8_token || cols % 128 != 0)
    throw Error(std::string("the MMA's K order needs 16-bit values out with ") + name +
                " % 64 == 0, or FP8 per-token codes with " + name + " % 128 == 0 (" + name + " = " + str(cols) +
                ", format " + std::string(to_string(format)) + (values_out ? ", values out)" : ", codes out)"));
}

// The checks of quantize_activation (values_out false: `out` is the codes) and
// quantize_activation_values (true: `out` is the codes' 16-bit values, dense [rows, cols]), folded
// or not; whether the 16-byte path serves. rows = 0 passes before the pointers are checked.
bool check_quantizer(ActFormat format, DType dtype, CUdeviceptr in, int64_t in_row_stride, int64_t rows, int64_t cols,
                     CUdeviceptr out, CUdeviceptr scales, bool values_out, bool mma_order = false) {
  check_dtype(dtype);
  format_enum(format);
  check_mma_order(mma_order, format, values_out, cols, "cols");
  if (rows < 0 || rows > INT_MAX) throw Error("rows = " + str(rows) + " is outside [0, 2^31)");
  if (cols <= 0 || cols > INT_MAX) throw Error("cols = " + str(cols) + " is outside [1, 2^31)");
  const bool mx = format != ActFormat::fp8_token;
  if (mx && cols % kMxBlock != 0)
    throw Error("cols = " + str(cols) + " is not a multiple of 32, required by " +
                std::string(to_string(format)) + " activation scales");
  if (in_row_stride < cols)
    throw Error("in_row_stride = " + str(in_row_stride) + " is smaller than cols = " + str(cols));
  if (rows == 0) return false;
  const std::string name = values_out ? "quantize_activation_values" : "quantize_activation";
  if (in == 0 || out == 0 || scales == 0)
    throw Error(name + ": in, " + (values_out ? "values" : "codes") + " and scales must be device pointers, not null");
  const unsigned store_bytes = check_quantizer_outputs(name, format, out, scales, values_out);
  const bool vectorized = cols % kVecElems == 0 && in_row_stride % kVecElems == 0 && aligned(in, 16) &&
                          aligned(out, store_bytes);
  if (rows * cols / (vectorized ? kVecElems : 1) >= (int64_t{1} << 31))  // 32-bit item indices
    throw Error(name + ": rows * cols = " + str(rows * cols) + " is too large");
  return vectorized;
}

void launch_quantizer(ActFormat format, DType dtype, CUdeviceptr in, int64_t in_row_stride, int64_t rows, int64_t cols,
                      CUdeviceptr out, CUdeviceptr scales, bool values_out, CUstream stream, bool mma_order = false) {
  const bool vectorized =
      check_quantizer(format, dtype, in, in_row_stride, rows, cols, out, scales, values_out, mma_order);
  if (rows == 0) return;
  const QuantizerLaunch q = quantizer_launch(format, rows, cols, vectorized, kThreads);
  static std::array<std::atomic<CUfunction>, 4 * 2 * 2> functions{};
  const CUfunction f = cached_function(functions, quantize_index(format, dtype) * 2 + (values_out ? 1 : 0),
                                       [&] { return quantize_kernel_spec(format, dtype, values_out); });
  LaunchShape shape;
  shape.grid_x = grid_blocks(q.work_blocks);
  shape.block_x = kThreads;
  const long long stride_arg = in_row_stride;
  const int rows_arg = static_cast<int>(rows);
  const int cols_arg = static_cast<int>(cols);
  const int vectorized_arg = vectorized ? 1 : 0, mma_order_arg = mma_order ? 1 : 0;
  launch(f, shape, stream, in, stride_arg, rows_arg, cols_arg, out, scales, vectorized_arg, q.warps_per_row,
         mma_order_arg);
}

// activation_quantize_values (values_out) and activation_quantize_codes.
void launch_activation_quantizer(const ActivationParams& params, bool interleaved, ActFormat format, DType dtype,
                                 CUdeviceptr gate_up, int64_t rows, int64_t intermediate, CUdeviceptr out,
                                 CUdeviceptr scales, bool values_out, CUstream stream, bool mma_order = false) {
  check_dtype(dtype);
  activation_enum(params.kind);
  format_enum(format);
  check_mma_order(mma_order, format, values_out, intermediate, "intermediate");
  if (interleaved && !is_gated(params.kind))
    throw Error("interleaved_gate_up needs a gated activation, not " + std::string(to_string(params.kind)));
  if (rows < 0 || rows > INT_MAX) throw Error("rows = " + str(rows) + " is outside [0, 2^31)");
  if (intermediate <= 0 || intermediate > INT_MAX)
    throw Error("intermediate = " + str(intermediate) + " is outside [1, 2^31)");
  const bool mx = format != ActFormat::fp8_token;
  if (mx && intermediate % kMxBlock != 0)
    throw Error("intermediate = " + str(intermediate) + " is not a multiple of 32, required by " +
                std::string(to_string(format)) + " activation scales");
  if (rows == 0) return;
  const std::string name = values_out ? "activation_quantize_values" : "activation_quantize_codes";
  if (gate_up == 0 || out == 0 || scales == 0)
    throw Error(name + ": gate_up, " + (values_out ? "values" : "codes") +
                " and scales must be device pointers, not null");
  const unsigned store_bytes = check_quantizer_outputs(name, format, out, scales, values_out);
  // 16-byte path: I % 8 == 0 keeps every row (I or 2I elements) 16-byte aligned, as the activation's.
  const bool vectorized = intermediate % kVecElems == 0 && aligned(gate_up, 16) && aligned(out, store_bytes);
  if (rows * intermediate / (vectorized ? kVecElems : 1) >= (int64_t{1} << 31))
    throw Error(name + ": rows * intermediate = " + str(rows * intermediate) + " is too large");
  QuantizerLaunch q = quantizer_launch(format, rows, intermediate, vectorized, kThreads);
  // Timing diagnostics (docs/env.md; each read once, the results stay exact): MOEQ_DIAG_ACTQ_WARPS (1, 2,
  // 4 or 8) sets the FP8 per-token warps per row instead of quantizer_launch's rule; MOEQ_DIAG_ACTQ_PDL=1
  // launches with programmatic stream serialization; MOEQ_DIAG_ACTQ_SMEM adds that many bytes of unused
  // dynamic shared memory to each CTA (fewer CTAs fit an SM); MOEQ_DIAG_ACTQ_GRID caps the grid (the
  // kernel loops over rows).
  static const int forced_warps = [] {
    const long w = env_integer("MOEQ_DIAG_ACTQ_WARPS", 1, 8, 0);  // 0: unset
    if (w == 3 || w == 5 || w == 6 || w == 7)
      throw Error("MOEQ_DIAG_ACTQ_WARPS = '" + std::to_string(w) + "' is not 1, 2, 4 or 8");
    return static_cast<int>(w);
  }();
  static const bool forced_programmatic = env_integer("MOEQ_DIAG_ACTQ_PDL", 0, 1, 0) == 1;
  static const long padded_smem = env_integer("MOEQ_DIAG_ACTQ_SMEM", 0, 200 * 1024, 0);
  static const long grid_cap = env_integer("MOEQ_DIAG_ACTQ_GRID", 0, INT_MAX, 0);
  if (forced_warps > 0 && format == ActFormat::fp8_token) {
    q.warps_per_row = forced_warps;
    const int64_t rows_per_block = kThreads / 32 / forced_warps;
    q.work_blocks = (rows + rows_per_block - 1) / rows_per_block;
  }
  static std::array<std::atomic<CUfunction>, 9 * 2 * 2 * 3 * 2> functions{};
  const size_t index =
      (activation_index(params.kind, interleaved, dtype) * 3 + static_cast<size_t>(format) - 1) * 2 + (values_out ? 1 : 0);
  const CUfunction f = cached_function(functions, index, [&] {
    return activation_quantize_kernel_spec(params.kind, interleaved, format, dtype, values_out);
  });
  LaunchShape shape;
  shape.grid_x = grid_blocks(q.work_blocks);
  if (grid_cap > 0) shape.grid_x = std::min<unsigned>(shape.grid_x, static_cast<unsigned>(grid_cap));
  shape.block_x = kThreads;
  // PERF: started early under programmatic dependent launch, this kernel cost the Qwen3-30B-A3B MXFP4 x
  // FP8-per-token step 3.6 us at M = 256 and 0.9 us at M = 16 (MOEQ_PDL_SKIP, bench/results/
  // 2026-12-03-h200-dense-tune.md, call 3); no other boundary of the step did. Why was not established.
  shape.programmatic = forced_programmatic;
  if (padded_smem > 0) {
    int static_bytes = 0;
    check(driver().cuFuncGetAttribute(&static_bytes, func_attr::kSharedSizeBytes, f), "cuFuncGetAttribute(shared size)");
    const int64_t limit = current_device_info().max_smem_per_block_optin - static_bytes;
    if (padded_smem > limit)
      throw Error("MOEQ_DIAG_ACTQ_SMEM = " + std::to_string(padded_smem) + " bytes: this device allows at most " +
                  std::to_string(limit) + " beside the kernel's " + std::to_string(static_bytes) +
                  " bytes of static shared memory");
    shape.smem_bytes = static_cast<unsigned>(padded_smem);
    // NOTE: set at every launch (a timing diagnostic; the call is cheap next to the kernel).
    check(driver().cuFuncSetAttribute(f, func_attr::kMaxDynamicSharedSizeBytes, static_cast<int>(padded_smem)),
          "cuFuncSetAttribute(MOEQ_DIAG_ACTQ_SMEM)");
  }
  const int rows_arg = static_cast<int>(rows);
  const long long intermediate_arg = intermediate;
  const KernelActivationArgs args{params.swiglu_alpha, params.swiglu_limit, params.silu_clamp};
  const int vectorized_arg = vectorized ? 1 : 0, mma_order_arg = mma_order ? 1 : 0;
  launch(f, shape, stream, gate_up, rows_arg, intermediate_arg, args, out, scales, vectorized_arg, q.warps_per_row,
         mma_order_arg);
}

}  // namespace

void activation_quantize_values(const ActivationParams& params, bool interleaved, ActFormat format, DType dtype,
                                CUdeviceptr gate_up, int64_t rows, int64_t intermediate, CUdeviceptr values,
                                CUdeviceptr scales, CUstream stream, bool mma_order) {
  launch_activation_quantizer(params, interleaved, format, dtype, gate_up, rows, intermediate, values, scales, true,
                              stream, mma_order);
}

void activation_quantize_codes(const ActivationParams& params, bool interleaved, ActFormat format, DType dtype,
                               CUdeviceptr gate_up, int64_t rows, int64_t intermediate, CUdeviceptr codes,
                               CUdeviceptr scales, CUstream stream, bool mma_order) {
  launch_activation_quantizer(params, interleaved, format, dtype, gate_up, rows, intermediate, codes, scales, false,
                              stream, mma_order);
}

int64_t folded_blocks(int64_t work_blocks, int threads) {
  static const int64_t num_sms = current_device_info().num_sms;
  return std::clamp<int64_t>(work_blocks, 1, num_sms * std::max(1, 2048 / threads));
}

FoldedQuantizer fold_quantizer(ActFormat format, DType dtype, CUdeviceptr in, int64_t in_row_stride, int64_t rows,
                               int64_t cols, CUdeviceptr out, CUdeviceptr scales, bool values_out, int threads,
                               bool mma_order) {
  FoldedQuantizer fold;
  const bool vectorized =
      check_quantizer(format, dtype, in, in_row_stride, rows, cols, out, scales, values_out, mma_order);
  if (rows == 0) return fold;
  const QuantizerLaunch q = quantizer_launch(format, rows, cols, vectorized, threads, kFoldedFp8TokenSlots);
  fold.format = format;
  fold.dtype = dtype;
  fold.values_out = values_out;
  fold.blocks = folded_blocks(q.work_blocks, threads);
  fold.args.in = in;
  fold.args.in_row_stride = in_row_stride;
  fold.args.codes = out;
  fold.args.scales = scales;
  fold.args.rows = static_cast<int32_t>(rows);
  fold.args.cols = static_cast<int32_t>(cols);
  fold.args.vectorized = vectorized ? 1 : 0;
  fold.args.warps_per_row = q.warps_per_row;
  fold.args.mma_order = mma_order ? 1 : 0;
  return fold;
}

void quantize_activation(ActFormat format, DType dtype, CUdeviceptr in, int64_t in_row_stride, int64_t rows,
                         int64_t cols, CUdeviceptr codes, CUdeviceptr scales, CUstream stream, bool mma_order) {
  launch_quantizer(format, dtype, in, in_row_stride, rows, cols, codes, scales, false, stream, mma_order);
}

void quantize_activation_values(ActFormat format, DType dtype, CUdeviceptr in, int64_t in_row_stride, int64_t rows,
                                int64_t cols, CUdeviceptr values, CUdeviceptr scales, CUstream stream, bool mma_order) {
  launch_quantizer(format, dtype, in, in_row_stride, rows, cols, values, scales, true, stream, mma_order);
}

void dequantize_activation(ActFormat format, DType dtype, CUdeviceptr codes, CUdeviceptr scales, int64_t rows,
                           int64_t cols, CUdeviceptr out, int64_t out_row_stride, CUstream stream) {
  check_dtype(dtype);
  format_enum(format);
  if (rows < 0 || rows > INT_MAX) throw Error("rows = " + str(rows) + " is outside [0, 2^31)");
  if (cols <= 0 || cols > INT_MAX) throw Error("cols = " + str(cols) + " is outside [1, 2^31)");
  if (format != ActFormat::fp8_token && cols % kMxBlock != 0)
    throw Error("cols = " + str(cols) + " is not a multiple of 32, required by " + std::string(to_string(format)) +
                " activation scales");
  if (out_row_stride < cols)
    throw Error("out_row_stride = " + str(out_row_stride) + " is smaller than cols = " + str(cols));
  if (rows == 0) return;
  if (codes == 0 || scales == 0 || out == 0)
    throw Error("dequantize_activation: codes, scales and out must be device pointers, not null");
  const bool vectorized = cols % kVecElems == 0 && out_row_stride % kVecElems == 0 && aligned(out, 16) &&
                          aligned(codes, format == ActFormat::mxfp4 ? 4 : 8);
  if (rows * cols / (vectorized ? kVecElems : 1) >= (int64_t{1} << 31))  // 32-bit item indices, as the quantizer
    throw Error("dequantize_activation: rows * cols = " + str(rows * cols) + " is too large");
  static std::array<std::atomic<CUfunction>, 4 * 2> functions{};
  const CUfunction f = cached_function(functions, quantize_index(format, dtype),
                                       [&] { return dequantize_kernel_spec(format, dtype); });
  LaunchShape shape;
  shape.grid_x = grid_blocks((rows * cols / (vectorized ? kVecElems : 1) + kThreads - 1) / kThreads);
  shape.block_x = kThreads;
  const int rows_arg = static_cast<int>(rows);
  const int cols_arg = static_cast<int>(cols);
  const long long stride_arg = out_row_stride;
  const int vectorized_arg = vectorized ? 1 : 0;
  launch(f, shape, stream, codes, scales, rows_arg, cols_arg, out, stride_arg, vectorized_arg);
}

}  // namespace moeq::cuda
