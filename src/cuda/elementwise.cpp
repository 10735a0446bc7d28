#include "cuda/elementwise.hpp"

#include <algorithm>
#include <array>
#include <atomic>
#include <climits>
#include <cstdlib>
#include <string>

#include "cuda/folded_quantizer.hpp"
#include "cuda/launch.hpp"
#include "moeq/error.hpp"

namespace moeq::cuda {
namespace {

// PERF: 256 threads = 8 warps: a whole 32-row group of the FP8 row kernel fits in one block at
// 8 warps per row, and 8 resident blocks fill an SM's 2048 threads.
constexpr int kThreads = 256;
constexpr int kMxBlock = 32;
constexpr int kVecElems = 8;      // one 16-byte access of 16-bit elements
constexpr int kFp8TokenSlots = 8; // moeq_dev::kFp8TokenSlots: vectors a lane keeps per pass
constexpr int kMxItems = 4;        // moeq_dev::kMxItems: 16-byte vectors a lane loads per MX step

std::string str(int64_t v) { return std::to_string(v); }

const char* activation_enum(Activation a) {
  switch (a) {
    case Activation::silu: return "kSilu";
    case Activation::gelu: return "kGelu";
    case Activation::gelu_tanh: return "kGeluTanh";
    case Activation::swiglu_oai: return "kSwigluOai";
    case Activation::swiglu_step: return "kSwigluStep";
    case Activation::silu_no_mul: return "kSiluNoMul";
    case Activation::gelu_no_mul: return "kGeluNoMul";
    case Activation::gelu_tanh_no_mul: return "kGeluTanhNoMul";
    case Activation::relu2_no_mul: return "kRelu2NoMul";
  }
  throw Error("activation = " + str(static_cast<int>(a)) + " is not a known activation");
}

const char* format_enum(ActFormat f) {
  switch (f) {
    case ActFormat::fp8_token: return "kFp8Token";
    case ActFormat::mxfp8: return "kMxfp8";
    case ActFormat::mxfp4: return "kMxfp4";
    case ActFormat::none: break;
  }
  throw Error("activation format = " + std::string(to_string(f)) + " has no quantizer kernel");
}

void check_dtype(DType dtype) {
  if (dtype != DType::bf16 && dtype != DType::f16)
    throw Error("dtype = " + std::string(to_string(dtype)) + " is not an activation dtype (bf16 or f16)");
}

const char* bool_str(bool b) { return b ? "true" : "false"; }

// Indices into the per-process function tables.
size_t activation_index(Activation kind, bool interleaved, DType dtype) {
  return (static_cast<size_t>(kind) * 2 + (interleaved ? 1 : 0)) * 2 + (dtype == DType::bf16 ? 1 : 0);
}
size_t quantize_index(ActFormat format, DType dtype) {
  return static_cast<size_t>(format) * 2 + (dtype == DType::bf16 ? 1 : 0);
}

// PERF: a lock-free table per entry point: after a config's first call (compile or disk load,
// module load) a launch costs one atomic load, no hashing of the source.
template <size_t kSize, typename MakeSpec>
CUfunction cached_function(std::array<std::atomic<CUfunction>, kSize>& table, size_t index,
                           MakeSpec make_spec) {
  if (CUfunction f = table[index].load(std::memory_order_acquire)) return f;
  CUfunction f = jit::kernel_cache().function(make_spec());  // thread-safe, loads a module once
  table[index].store(f, std::memory_order_release);
  return f;
}

// Blocks for a grid-stride loop: enough to cover the work, at most one full wave of resident
// blocks (2048 threads per SM on sm_80 .. sm_90), queried once.
unsigned grid_blocks(int64_t work_blocks) {
  static const int64_t max_blocks = int64_t{current_device_info().num_sms} * (2048 / kThreads);
  return static_cast<unsigned>(std::clamp<int64_t>(work_blocks, 1, max_blocks));
}

bool aligned(CUdeviceptr p, unsigned bytes) { return p % bytes == 0; }

struct KernelActivationArgs {  // moeq_dev::ActivationArgs, passed by value
  float swiglu_alpha;
  float swiglu_limit;
  float silu_clamp;
};

}  // namespace

jit::KernelSpec activation_kernel_spec(Activation kind, bool interleaved, DType dtype) {
  check_dtype(dtype);
  if (interleaved && !is_gated(kind))
    throw Error("interleaved_gate_up needs a gated activation, not " + std::string(to_string(kind)));
  std::string src = "#include \"moeq_dev/moe/activation.cuh\"\n";
  src += "struct ElementwiseCfg {\n";
  src += "  static constexpr moeq_dev::ActivationKind kActivation = moeq_dev::ActivationKind::" +
         std::string(activation_enum(kind)) + ";\n";
  src += "  static constexpr bool kInterleaved = " + std::string(bool_str(interleaved)) + ";\n";
  src += "  static constexpr bool kDtypeIsBf16 = " + std::string(bool_str(dtype == DType::bf16)) + ";\n";
  src += "  static constexpr int kThreads = " + str(kThreads) + ";\n";
  src += "};\n#include \"moeq_dev/kernels/elementwise.cuh\"\n";
  return jit::KernelSpec{"moeq_activation", std::move(src)};
}

namespace {

// The (de)quantizer config of `format`: `header` declares the format enum, `constant` names it.
jit::KernelSpec activation_format_spec(const char* header, const char* constant, const char* entry, ActFormat format,
                                       DType dtype, const std::string& more_members = "") {
  check_dtype(dtype);
  std::string src = "#include \"" + std::string(header) + "\"\n";
  src += "struct ElementwiseCfg {\n";
  src += "  static constexpr moeq_dev::QuantFormat " + std::string(constant) + " = moeq_dev::QuantFormat::" +
         std::string(format_enum(format)) + ";\n";
  src += "  static constexpr bool kDtypeIsBf16 = " + std::string(bool_str(dtype == DType::bf16)) + ";\n";
  src += more_members;
  src += "  static constexpr int kThreads = " + str(kThreads) + ";\n";
  src += "};\n#include \"moeq_dev/kernels/elementwise.cuh\"\n";
  return jit::KernelSpec{entry, std::move(src)};
}

}  // namespace

jit::KernelSpec quantize_kernel_spec(ActFormat format, DType dtype, bool values_out) {
  return activation_format_spec("moeq_dev/moe/quantize.cuh", "kFormat", "moeq_quantize_activation", format, dtype,
                                "  static constexpr bool kValuesOut = " + std::string(bool_str(values_out)) + ";\n");
}

jit::KernelSpec activation_quantize_kernel_spec(Activation kind, bool interleaved, ActFormat format, DType dtype,
                                                bool values_out) {
  jit::KernelSpec spec = activation_kernel_spec(kind, interleaved, dtype);
  const std::string members = std::string("  static constexpr moeq_dev::QuantFormat kFormat = moeq_dev::QuantFormat::") +
                              format_enum(format) + ";\n  static constexpr bool kValuesOut = " + bool_str(values_out) +
                              ";\n";
  const size_t at = spec.source.find("  static constexpr int kThreads");
  spec.source.insert(at, members);
  spec.source.insert(0, "#include \"moeq_dev/moe/quantize.cuh\"\n");
  spec.entry = "moeq_activation_quantize";
  return spec;
}

jit::KernelSpec dequantize_kernel_spec(ActFormat format, DType dtype) {
  return activation_format_spec("moeq_dev/moe/dequantize.cuh", "kDequantFormat", "moeq_dequantize_activation", format,
                                dtype);
}

std::vector<jit::KernelSpec> elementwise_kernel_specs() {
  std::vector<jit::KernelSpec> specs;
  for (const DType dtype : {DType::bf16, DType::f16}) {
    for (const Activation kind : all_values<Activation>()) {
      specs.push_back(activation_kernel_spec(kind, false, dtype));
      if (is_gated(kind)) specs.push_back(activation_kernel_spec(kind, true, dtype));
    }
    for (const ActFormat format : {ActFormat::fp8_token, ActFormat::mxfp8, ActFormat::mxfp4}) {
      specs.push_back(quantize_kernel_spec(format, dtype, false));
      specs.push_back(quantize_kernel_spec(format, dtype, true));
      specs.push_back(dequantize_kernel_spec(format, dtype));
    }
    // NOTE: the fused entry is the activation's values through the quantizer's code paths, both
    // covered in full above; its configs here: each format once per dtype, gated, interleaved and
    // plain among them (all 84 took minutes of every JIT test run: ~8 s each per arch on 2 cores).
    specs.push_back(activation_quantize_kernel_spec(Activation::silu, false, ActFormat::fp8_token, dtype));
    specs.push_back(activation_quantize_kernel_spec(Activation::silu, false, ActFormat::fp8_token, dtype, false));
    specs.push_back(activation_quantize_kernel_spec(Activation::swiglu_oai, true, ActFormat::mxfp8, dtype));
    specs.push_back(activation_quantize_kernel_spec(Activation::relu2_no_mul, false, ActFormat::mxfp4, dtype));
  }
  return specs;
}

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

jit::KernelSpec order_rows_kernel_spec() {
  return jit::KernelSpec{"moeq_order_rows_for_mma", "#include \"moeq_dev/kernels/mma_order_rows.cuh\"\n"};
}

void order_rows_for_mma(CUdeviceptr in, int64_t in_row_stride, int64_t rows, int64_t cols, CUdeviceptr out,
                        int64_t out_row_stride, CUstream stream) {
  if (rows < 0) throw Error("order_rows_for_mma: rows = " + str(rows) + " is negative");
  if (cols <= 0 || cols % 64 != 0) throw Error("order_rows_for_mma: cols = " + str(cols) + " is not a positive multiple of 64");
  if (in_row_stride < cols || in_row_stride % 2 != 0 || out_row_stride < cols || out_row_stride % 2 != 0)
    throw Error("order_rows_for_mma: row strides " + str(in_row_stride) + " / " + str(out_row_stride) +
                " must be even and at least cols = " + str(cols));
  if (rows == 0) return;
  if (in == 0 || out == 0 || !aligned(in, 4) || !aligned(out, 4))
    throw Error("order_rows_for_mma: in and out must be 4-byte aligned device pointers");
  if (in == out && in_row_stride != out_row_stride)
    throw Error("order_rows_for_mma: in place needs one row stride, not " + str(in_row_stride) + " and " +
                str(out_row_stride));
  const int64_t tiles = rows * (cols / 64);
  if (tiles >= (int64_t{1} << 31)) throw Error("order_rows_for_mma: rows * cols / 64 = " + str(tiles) + " is too large");
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

// The checks of quantize_activation (values_out false: `out` is the codes) and
// quantize_activation_values (true: `out` is the codes' 16-bit values, dense [rows, cols]), folded
// or not; whether the 16-byte path serves. rows = 0 passes before the pointers are checked.
bool check_quantizer(ActFormat format, DType dtype, CUdeviceptr in, int64_t in_row_stride, int64_t rows, int64_t cols,
                     CUdeviceptr out, CUdeviceptr scales, bool values_out, bool mma_order = false) {
  check_dtype(dtype);
  format_enum(format);
  if (mma_order && (!values_out || cols % 64 != 0))
    throw Error("the MMA's K order needs 16-bit values out and cols % 64 == 0 (cols = " + str(cols) + ")");
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
  if (mma_order && (!values_out || intermediate % 64 != 0))
    throw Error("the MMA's K order needs 16-bit values out and intermediate % 64 == 0 (intermediate = " +
                str(intermediate) + ")");
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
                               CUdeviceptr scales, CUstream stream) {
  launch_activation_quantizer(params, interleaved, format, dtype, gate_up, rows, intermediate, codes, scales, false,
                              stream);
}

FoldedQuantizer fold_quantizer(ActFormat format, DType dtype, CUdeviceptr in, int64_t in_row_stride, int64_t rows,
                               int64_t cols, CUdeviceptr out, CUdeviceptr scales, bool values_out, int threads,
                               bool mma_order) {
  FoldedQuantizer fold;
  const bool vectorized =
      check_quantizer(format, dtype, in, in_row_stride, rows, cols, out, scales, values_out, mma_order);
  if (rows == 0) return fold;
  const QuantizerLaunch q = quantizer_launch(format, rows, cols, vectorized, threads, kFoldedFp8TokenSlots);
  // NOTE: as grid_blocks: at most a full GPU of these CTAs (2048 threads per SM); the bodies loop.
  static const int64_t num_sms = current_device_info().num_sms;
  fold.format = format;
  fold.dtype = dtype;
  fold.values_out = values_out;
  fold.blocks = std::clamp<int64_t>(q.work_blocks, 1, num_sms * std::max(1, 2048 / threads));
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
                         int64_t cols, CUdeviceptr codes, CUdeviceptr scales, CUstream stream) {
  launch_quantizer(format, dtype, in, in_row_stride, rows, cols, codes, scales, false, stream);
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
