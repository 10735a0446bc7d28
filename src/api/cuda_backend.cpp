#include "api/cuda_backend.hpp"
#include "api/validate.hpp"

#include <cstdint>
#include <string>
#include <vector>

#include "common/parallel.hpp"
#include "cuda/driver.hpp"
#include "cuda/elementwise.hpp"
#include "cuda/layer_kernels.hpp"
#include "cuda/moe_gemm.hpp"
#include "cuda/routing.hpp"
#include "cuda/step_plan.hpp"
#include "jit/compiler.hpp"
#include "moeq/error.hpp"

namespace moeq::api {
namespace {

using cuda::CUdeviceptr;

CUdeviceptr dptr(const void* p) { return static_cast<CUdeviceptr>(reinterpret_cast<uintptr_t>(p)); }

void require(const void* p, const char* name, int64_t align) {
  if (p == nullptr) throw Error(std::string(name) + " is null");
  if (reinterpret_cast<uintptr_t>(p) % static_cast<uintptr_t>(align) != 0)
    throw Error(std::string(name) + " is not aligned to " + std::to_string(align) + " bytes (the GPU path loads 16-byte vectors)");
}

// GEMM1's input quantizer in the routing's first launch (cuda/folded_quantizer.hpp) unless the
// routing takes the chunked pair.
// PERF: H200, Qwen3-30B-A3B MXFP4 x FP8 per token, whole step against the quantizer in its own launch
// (bench/results/2026-12-03-h200-folded-quantizer.md): M = 256 -1.8% (186 against 189 us), M = 16
// -0.3%, but M = 4096 (chunked routing) +1.0% (902 against 893 us).
// Env MOEQ_FOLD=0 (read once) launches the quantizer on its own instead, for measuring the fold.
bool fold_gemm1_quantizer(const cuda::RouteIds& ids, CUdeviceptr chunk_counts) {
  static const bool enabled = !cuda::env_is_zero("MOEQ_FOLD");
  return enabled && !cuda::takes_chunked_path(ids, chunk_counts);
}

// The same for the MMA-order copy of 16-bit rows (cuda::fold_order_rows), up to cuda::kFoldOrderMaxSlots (PERF there).
// Env MOEQ_FOLD_ORDER (timing): 0 launches it alone, 2 folds it at any slots, on the chunked routing path too.
bool fold_gemm1_order_rows(const cuda::RouteIds& ids, CUdeviceptr chunk_counts) {
  static const int64_t mode = cuda::env_integer("MOEQ_FOLD_ORDER", 0, 2, 1);
  return mode == 2 ||
         (mode == 1 && ids.num_slots() <= cuda::kFoldOrderMaxSlots && fold_gemm1_quantizer(ids, chunk_counts));
}

cuda::GemmWeights device_weights(const WeightView& v) {
  return {dptr(v.codes), dptr(v.scales), dptr(v.global_scales), dptr(v.zero_points), dptr(v.bias)};
}

}  // namespace

void validate_device_weights(const WeightDesc& w, const WeightView& v, const char* name) {
  const std::string gemm(name);
  const auto elem = [](DType t) { return std::max<int64_t>(1, dtype_bits(t) / 8); };
  if (v.code_layout != CodeLayout::canonical && v.code_layout != CodeLayout::prepared)
    throw Error(gemm + ".code_layout = " + std::to_string(static_cast<int>(v.code_layout)) + " is not canonical or prepared");
  if (v.mx_scales_at_most_two && w.scale_dtype != DType::ue8m0)
    throw Error(gemm + ".mx_scales_at_most_two is set for " + std::string(to_string(w.format)) +
                " weights (MX formats only)");
  require(v.codes, (gemm + ".codes").c_str(), 16);
  require(v.scales, (gemm + ".scales").c_str(), elem(w.scale_dtype));
  if (w.global_scale_elems() > 0) require(v.global_scales, (gemm + ".global_scales").c_str(), 4);
  if (w.has_zero_point) require(v.zero_points, (gemm + ".zero_points").c_str(), 1);
  if (w.bias_dtype != DType::none) require(v.bias, (gemm + ".bias").c_str(), elem(w.bias_dtype));
}

void validate_device_inputs(const ExpertsDesc& d, Layout layout, const ExpertsInputs& in, const ExpertsOutput& out) {
  const bool batched = in.is_batched();
  if (batched != (layout == Layout::masked))
    throw Error("layout = " + std::string(to_string(layout)) + " does not fit " + (batched ? "batched" : "standard") + " input");
  const int64_t K = d.hidden_size;
  const int64_t hidden_stride = in.hidden_row_stride > 0 ? in.hidden_row_stride : K;
  const int64_t out_stride = out.row_stride > 0 ? out.row_stride : K;
  if (hidden_stride < K || hidden_stride % 8 != 0)
    throw Error("hidden_row_stride = " + std::to_string(hidden_stride) + " must be >= K and a multiple of 8 on the GPU");
  if (out_stride < K || out_stride % 2 != 0)
    throw Error("output row_stride = " + std::to_string(out_stride) + " must be >= K and even on the GPU");
  const int64_t rows = batched ? d.num_experts * in.max_tokens_per_expert : in.num_tokens;
  validate_row_span("hidden_row_stride", hidden_stride, rows, dtype_bytes(d.act_dtype, 1));
  validate_row_span("output row_stride", out_stride, rows, dtype_bytes(d.act_dtype, 1));
  if (rows < 0)
    throw Error(batched ? "max_tokens_per_expert = " + std::to_string(in.max_tokens_per_expert) + " is negative"
                        : "num_tokens = " + std::to_string(in.num_tokens) + " is negative");
  // NOTE: row indices are int32 on the device.
  if (rows * (batched ? 1 : d.top_k) >= (int64_t{1} << 31))
    throw Error("the step has " + std::to_string(rows * (batched ? 1 : d.top_k)) + " routed rows; the GPU path takes fewer than 2^31");
  if (in.error_word != nullptr && reinterpret_cast<uintptr_t>(in.error_word) % 4 != 0)
    throw Error("error_word is not aligned to 4 bytes");
  if (rows == 0) return;
  require(in.hidden, "hidden", 16);
  require(out.out, "out", 4);
  if (in.expert_map != nullptr) require(in.expert_map, "expert_map", 4);
  if (batched) {
    if (in.expert_num_tokens_dtype != DType::i32 && in.expert_num_tokens_dtype != DType::i64)
      throw Error("expert_num_tokens dtype = " + dtype_text(in.expert_num_tokens_dtype) + " must be i32 or i64");
    require(in.expert_num_tokens, "expert_num_tokens", in.expert_num_tokens_dtype == DType::i64 ? 8 : 4);
    return;
  }
  if (in.topk_ids_dtype != DType::i32 && in.topk_ids_dtype != DType::i64)
    throw Error("topk_ids dtype = " + dtype_text(in.topk_ids_dtype) + " must be i32 or i64");
  require(in.topk_ids, "topk_ids", in.topk_ids_dtype == DType::i64 ? 8 : 4);
  if (in.topk_weights_dtype != DType::f32 && in.topk_weights_dtype != DType::bf16 && in.topk_weights_dtype != DType::f16)
    throw Error("topk_weights dtype = " + dtype_text(in.topk_weights_dtype) + " must be f32, bf16 or f16");
  require(in.topk_weights, "topk_weights", in.topk_weights_dtype == DType::f32 ? 4 : 2);
}

void apply_cuda(const ExpertsDesc& d, const plan::PlanShape& shape, const plan::WorkspacePlan& plan,
                const WeightView& w13, const WeightView& w2, const ExpertsInputs& in, const ExpertsOutput& out,
                void* workspace1, void* workspace2, void* stream_ptr) {
  const auto stream = static_cast<cuda::CUstream>(stream_ptr);
  auto buffer = [&](const char* name) -> CUdeviceptr {
    const plan::BufferPlacement* b = plan.find(name);
    if (b == nullptr) return 0;
    return dptr(b->workspace == 1 ? workspace1 : workspace2) + static_cast<CUdeviceptr>(b->offset_bytes);
  };
  const int64_t E = d.num_experts, K = d.hidden_size, I = d.intermediate_size, N13 = d.gemm1_n();
  const DType c = d.act_dtype;
  const int64_t elem = dtype_bytes(c, 1);
  const int64_t hidden_stride = in.hidden_row_stride > 0 ? in.hidden_row_stride : K;
  const int64_t out_stride = out.row_stride > 0 ? out.row_stride : K;
  // What each GEMM reads and on which tile: 16-bit activations, or FP8 per-token codes as e4m3 (direct
  // tiles of FP8 per-channel weights, warp-specialized tiles of canonical MXFP4 codes) or as their 16-bit
  // values, the row scales in the GEMM's epilogue either way.
  const cuda::StepGemmPlans plans =
      cuda::plan_step_gemms(d, shape, w13.code_layout == CodeLayout::prepared, w2.code_layout == CodeLayout::prepared,
                            cuda::process_device_info());
  // The caller's error word accumulates (the caller clears it); the workspace's is cleared per call.
  CUdeviceptr error_flags = dptr(in.error_word);
  if (error_flags == 0) {
    error_flags = buffer("error_flags");
    cuda::check(cuda::driver().cuMemsetD8Async(error_flags, 0, 4, stream), "cuMemsetD8Async(error_flags)");
  }

  cuda::MoeGemmArgs g1;
  g1.weights_desc = d.w13();
  g1.weights = device_weights(w13);
  g1.prepared_codes = w13.code_layout == CodeLayout::prepared;
  g1.mx_scales_at_most_two = w13.mx_scales_at_most_two;
  g1.act_dtype = c;
  g1.tile = plans.gemm1.tile;
  g1.c = buffer("gate_up_output");
  g1.c_row_stride = N13;
  cuda::MoeGemmArgs g2 = g1;
  g2.tile = plans.gemm2.tile;
  g2.weights_desc = d.w2();
  g2.weights = device_weights(w2);
  g2.prepared_codes = w2.code_layout == CodeLayout::prepared;
  g2.mx_scales_at_most_two = w2.mx_scales_at_most_two;
  g2.c = buffer("down_output");
  g2.c_row_stride = K;

  const cuda::GemmInput input1 = plans.gemm1.input, input2 = plans.gemm2.input;
  const auto set_row_scales = [&](cuda::MoeGemmArgs& g, cuda::GemmInput input, CUdeviceptr scales) {
    g.a_e4m3 = input == cuda::GemmInput::row_scaled_e4m3;
    g.a_row_scales = input != cuda::GemmInput::values ? scales : 0;
    g.a_scale_rows = 0;
  };
  // x [rows, cols] (row stride `stride`) quantized for a GEMM reading `input`: its codes (e4m3) or
  // their 16-bit values into `out` (dense), and the scales.
  // fold: not launched but returned there, for the routing's first launch to run (cuda/folded_quantizer.hpp).
  // mma_order: the values (or e4m3 codes) in the MMA's K order (GEMM1 on a `/t` tile).
  const auto quantize_for = [&](cuda::GemmInput input, CUdeviceptr x, int64_t stride, int64_t rows, int64_t cols,
                                CUdeviceptr out, CUdeviceptr scales, bool mma_order,
                                cuda::FoldedQuantizer* fold = nullptr) {
    if (fold != nullptr) {
      *fold = cuda::fold_quantizer(d.act_format, c, x, stride, rows, cols, out, scales,
                                   input != cuda::GemmInput::row_scaled_e4m3, cuda::kRouteFirstKernelThreads, mma_order);
    } else if (input == cuda::GemmInput::row_scaled_e4m3) {
      cuda::quantize_activation(d.act_format, c, x, stride, rows, cols, out, scales, stream, mma_order);
    } else {
      cuda::quantize_activation_values(d.act_format, c, x, stride, rows, cols, out, scales, stream, mma_order);
    }
  };
  // A GEMM's input x [rows, cols] (row stride `stride`): as is, or, for quantized activations
  // (CONTRACT §5), quantized into the codes the e4m3 GEMM takes, or quantized and dequantized in
  // one kernel into the 16-bit values the other GEMMs take (the codes themselves not written).
  // fold: as quantize_for's.
  const auto set_gemm_input = [&](cuda::MoeGemmArgs& g, cuda::GemmInput input, CUdeviceptr x, int64_t stride,
                                  int64_t rows, int64_t cols, const std::string& codes_name,
                                  const char* dequantized_name, cuda::FoldedQuantizer* fold = nullptr) {
    g.a = x;
    g.a_row_stride = stride;
    if (d.act_format == ActFormat::none) return;
    const CUdeviceptr scales = buffer((codes_name + ".scales").c_str());
    g.a = buffer(input == cuda::GemmInput::row_scaled_e4m3 ? codes_name.c_str() : dequantized_name);
    quantize_for(input, x, stride, rows, cols, g.a, scales, g.tile.mma_order_tokens, fold);
    g.a_row_stride = cols;
    set_row_scales(g, input, scales);
  };
  // GEMM1's input: x [rows_in, K] of row stride `stride` (the caller's hidden states or the permuted
  // rows); x = 0: g1 already holds it (the contiguous layout's quantized rows).
  const auto run_chain = [&](CUdeviceptr x, int64_t stride, int64_t rows_in, int64_t rows) {
    if (x != 0) set_gemm_input(g1, input1, x, stride, rows_in, K, "quanted_gate_up_input", "dequantized_gate_up_input");
    if (d.act_format == ActFormat::none) {
      const CUdeviceptr activation_output = buffer("activation_output");
      // PERF: on an 8-row direct tile GEMM1 applies the activation in its epilogue and writes GEMM2's input itself
      // (MoeGemmArgs::epilogue_activation): one kernel boundary and a pass over [rows, N13] fewer. Session 51 (H200,
      // whole steps against MOEQ_FUSED_ACTIVATION=0): -0.7 to -1.2 us at 4-16 rows, but +4.0 us at gpt-oss-120b M = 16
      // (64 rows), which kept it to 16 rows until session 58. That loss was the epilogue's registers costing a CTA an SM
      // (ptxas, session 57), which activation_epilogue_keeps_occupancy now refuses (Mixtral-8x7B M = 1 lost 6.3 us of
      // 77 on the H100 so, session 52); with the logistic ~4x cheaper (session 56) every other direct row gains or
      // ties: session 58 (H100, whole steps, MOEQ_FUSED_ACTIVATION_MAX_ROWS=2048 against 16) -0.2 to -2.4 us at
      // Qwen3-30B-A3B MXFP4 M = 4-128, -0.5 to -1.1 us at INT4-g128 M = 16 / 64 (0.0 at 160), -1.0 us at gpt-oss-120b
      // M = 8, -0.7 / -7.3 us at Mixtral-8x7B M = 16 / 32. Hence kActivationEpilogueMaxRows = 2048 (the env variable
      // moves it, for measuring).
      // A warp-specialized GEMM1 takes it at any M: its epilogue writes the activation in its own tokens' order, so only
      // where GEMM2 reads that order (both `/t` or neither).
      // NOTE: not where activation_output overlaps GEMM1's A (the contiguous layout's permuted rows share its
      // workspace): it is written while other CTAs still read A.
      static const bool fused_activation_enabled = cuda::env_integer("MOEQ_FUSED_ACTIVATION", 0, 1, 1) != 0;
      static const int64_t fused_activation_max_rows =
          cuda::env_integer("MOEQ_FUSED_ACTIVATION_MAX_ROWS", 0, 1L << 30, cuda::kActivationEpilogueMaxRows);
      const CUdeviceptr a_begin = g1.a, a_end = g1.a + static_cast<CUdeviceptr>(((rows_in - 1) * g1.a_row_stride + K) * elem);
      const CUdeviceptr act_end = activation_output + static_cast<CUdeviceptr>(rows * I * elem);
      const bool overlaps_a = rows_in > 0 && rows > 0 && a_begin < act_end && activation_output < a_end;
      const bool fuse_activation =
          fused_activation_enabled &&
          cuda::step_fuses_activation(d, cuda::tile_for_device(g1.tile), input1, g2.tile, rows, overlaps_a, [&] {
            return cuda::activation_epilogue_keeps_occupancy(g1, {true, d.activation.kind, d.interleaved_gate_up});
          }, fused_activation_max_rows);
      if (fuse_activation) {
        g1.epilogue_activation = true;
        g1.activation = d.activation;
        g1.interleaved_gate_up = d.interleaved_gate_up;
        g1.c = activation_output;
        g1.c_row_stride = I;
      }
      cuda::moe_gemm(g1, stream);
      if (!fuse_activation)
        cuda::activation(d.activation, d.interleaved_gate_up, c, g1.c, rows, I, activation_output, stream,
                         g2.tile.mma_order_tokens);
      set_gemm_input(g2, input2, activation_output, I, rows, I, "quanted_down_input", "dequantized_down_input");
    } else if (cuda::step_quantizes_rows(d, g2.weights_desc, cuda::tile_for_device(g2.tile), input2, rows,
                                         cuda::quantizing_gemm2_max_rows())) {
      // GEMM2 makes its input from GEMM1's rows itself (MoeGemmArgs::quantize_rows): no kernel between the GEMMs. Only
      // at the fewest rows (cuda::kQuantizingGemm2MaxRows, env MOEQ_GEMM2_QUANTIZES_MAX_ROWS; 0 by default until the
      // whole GPU suite has run with it): past them the activation-quantize kernel measured faster.
      cuda::moe_gemm(g1, stream);
      g2.a = g1.c;
      g2.a_row_stride = g1.c_row_stride;
      g2.quantize_rows = true;
      g2.rows_activation = true;
      g2.activation = d.activation;
      g2.interleaved_gate_up = d.interleaved_gate_up;
    } else {
      cuda::moe_gemm(g1, stream);
      // PERF: the activation, its quantization and the values in one kernel: the activation
      // output is never written (one pass fewer over [rows, I]) and two launches fewer.
      // NOTE: not quanted_down_input(.scales): those lie inside gate_up_output, which this kernel
      // reads (src/plan/workspace.cpp places these two past it); e4m3 codes (1 byte each) fit in
      // the values' buffer.
      const CUdeviceptr scales = buffer("dequantized_down_input.scales"), out = buffer("dequantized_down_input");
      if (input2 == cuda::GemmInput::row_scaled_e4m3) {
        cuda::activation_quantize_codes(d.activation, d.interleaved_gate_up, d.act_format, c, g1.c, rows, I, out,
                                        scales, stream, g2.tile.mma_order_tokens);
      } else {
        cuda::activation_quantize_values(d.activation, d.interleaved_gate_up, d.act_format, c, g1.c, rows, I, out,
                                         scales, stream, g2.tile.mma_order_tokens);
      }
      g2.a = out;
      g2.a_row_stride = I;
      set_row_scales(g2, input2, scales);
    }
    cuda::moe_gemm(g2, stream);
  };

  // Tokens in the MMA's K order (`/t` tiles: gemm_plan): GEMM2's input from the activation kernel or the
  // activation-quantize; GEMM1's from its quantizer, or with 16-bit activations rewritten by order_rows_for_mma
  // (indexed: the caller's rows into mma_ordered_hidden; contiguous: the permuted rows in place). The masked
  // layout's 16-bit GEMM1 reads the caller's slabs as they are: the twin (plan_step_gemms).
  const bool order_gemm1_rows = g1.tile.mma_order_tokens && d.act_format == ActFormat::none;

  if (shape.layout == Layout::masked) {
    const int64_t T = in.max_tokens_per_expert, rows = E * T;
    const CUdeviceptr table = buffer("block_table"), count = buffer("num_blocks");
    cuda::build_segments(g1.weights_desc, c, g1.tile, 0, dptr(in.expert_num_tokens), in.expert_num_tokens_dtype, T, E,
                         table, count, error_flags, stream, input1);
    for (cuda::MoeGemmArgs* g : {&g1, &g2}) {
      g->gather = false;
      g->block_table = table;
      g->num_blocks = count;
      g->max_blocks = cuda::segment_capacity(rows, E, shape.block_m);
    }
    // NOTE: GEMM2 writes the caller's [E, T, K] output directly: it is the result.
    g2.c = dptr(out.out);
    g2.c_row_stride = out_stride;
    run_chain(dptr(in.hidden), hidden_stride, rows, rows);
    return;
  }

  const int64_t M = in.num_tokens, slots = M * d.top_k;
  cuda::RouteIds ids{dptr(in.topk_ids), in.topk_ids_dtype, M, d.top_k, d.global_experts(), dptr(in.expert_map), E,
                     error_flags};
  const CUdeviceptr local_ids = buffer("local_ids");
  cuda::ReduceArgs reduce;
  reduce.down = g2.c;
  reduce.down_row_stride = K;
  reduce.dtype = c;
  reduce.local_ids = local_ids;
  reduce.weights = dptr(in.topk_weights);
  reduce.weights_dtype = in.topk_weights_dtype;
  reduce.num_tokens = M;
  reduce.top_k = d.top_k;
  reduce.cols = K;
  reduce.out = dptr(out.out);
  reduce.out_row_stride = out_stride;

  if (shape.layout == Layout::indexed) {
    cuda::AlignOutputs align{local_ids, buffer("sorted_ids"), buffer("expert_ids"), buffer("num_tokens_padded"),
                             buffer("route_chunk_counts")};
    // PERF: at the smallest M GEMM1 finds its rows from topk_ids itself and streams its weights while route_fused
    // runs (MoeGemmArgs::self_route); MOEQ_SELF_ROUTE=0 turns it off (timing). Session 50 (H100, whole steps against
    // MOEQ_SELF_ROUTE=0): -3.6 to -4.3 us at M = 1 on Qwen3-30B-A3B, gpt-oss-120b, Mixtral-8x7B; -3.6 at gpt-oss-120b
    // M = 2 (8 slots, 128 experts), but +1.3 at Mixtral-8x7B M = 4 (8 slots over its 8 experts; +4.8 in session 49's
    // H200 call), so it stays off where the slots reach the local experts' count.
    // With FP8 per-token activations the self-routed GEMM1 quantizes the caller's rows itself (quantize_rows), so its
    // quantizer does not ride on the routing's first launch. Session 68 (H100, Qwen3-30B-A3B whole steps against
    // MOEQ_SELF_ROUTE=0): -1.0 to -1.3 us at M = 1 (prepared codes), -2.0 to -2.8 (canonical); M = 2 / 4 unchanged.
    static const bool self_route_enabled = cuda::env_integer("MOEQ_SELF_ROUTE", 0, 1, 1) != 0;
    const cuda::GemmTile tile1 = cuda::tile_for_device(g1.tile);
    const bool self_route_fits = self_route_enabled && !order_gemm1_rows && cuda::aligns_in_one_kernel(ids) &&
                                 slots <= cuda::kMaxSelfRoutedSlots && slots < ids.num_experts && M <= g1.tile.block_m;
    const bool quantizing_self_route = self_route_fits && d.act_format == ActFormat::fp8_token &&
                                       input1 == cuda::GemmInput::row_scaled_values &&
                                       cuda::gemm_self_routes(tile1, cuda::GemmInput::quantized_rows) &&
                                       cuda::gemm_quantizes_rows(tile1, g1.weights_desc);
    // GEMM1's input quantizer, if any, runs in the routing's first launch (fold_gemm1_quantizer).
    // With 16-bit activations on a `/t` GEMM1 tile, the order pass runs there instead (fold_order_rows).
    const bool fold =
        d.act_format != ActFormat::none && !quantizing_self_route && fold_gemm1_quantizer(ids, align.chunk_counts);
    const bool fold_order = order_gemm1_rows && fold_gemm1_order_rows(ids, align.chunk_counts);
    if (fold)
      set_gemm_input(g1, input1, dptr(in.hidden), hidden_stride, M, K, "quanted_gate_up_input",
                     "dequantized_gate_up_input", &align.quantizer);
    if (fold_order)
      align.quantizer = cuda::fold_order_rows(c, dptr(in.hidden), hidden_stride, M, K, buffer("mma_ordered_hidden"),
                                              cuda::kRouteFirstKernelThreads);
    cuda::map_and_align(ids, shape.block_m, align, stream);
    for (cuda::MoeGemmArgs* g : {&g1, &g2}) {
      g->gather = true;
      g->sorted_ids = align.sorted_ids;
      g->expert_ids = align.expert_ids;
      g->num_tokens_padded = align.num_tokens_padded;
      g->num_slots = slots;
      g->sorted_capacity = cuda::align_capacity(slots, E, shape.block_m);
    }
    g1.src_row_divisor = d.top_k;
    g2.src_row_divisor = 1;
    g1.self_route = quantizing_self_route || (self_route_fits && !fold && d.act_format == ActFormat::none &&
                                              cuda::gemm_self_routes(tile1, cuda::GemmInput::values));
    if (quantizing_self_route) {
      g1.a = dptr(in.hidden);
      g1.a_row_stride = hidden_stride;
      g1.quantize_rows = true;
    }
    if (g1.self_route) {
      g1.topk_ids = ids.topk_ids;
      g1.topk_ids_dtype = ids.ids_dtype;
      g1.expert_map = ids.expert_map;
      g1.num_global_experts = ids.num_global_experts;
      g1.num_local_experts = ids.num_experts;
    }
    if (order_gemm1_rows) {
      // NOTE: 16-bit activations, so no folded quantizer: the order pass rides on the routing's first launch instead,
      // where a quantizer would (fold_gemm1_quantizer), or runs alone.
      const CUdeviceptr ordered = buffer("mma_ordered_hidden");
      if (!fold_order) cuda::order_rows_for_mma(dptr(in.hidden), hidden_stride, M, K, ordered, K, stream);
      run_chain(ordered, K, M, slots);
    } else {
      run_chain(fold || quantizing_self_route ? 0 : dptr(in.hidden), hidden_stride, M, slots);
    }
    cuda::topk_reduce(reduce, stream);
    return;
  }

  // Contiguous: permute, then the GEMMs over each expert's segment of the permuted rows.
  cuda::PermuteOutputs perm{local_ids, buffer("expert_offsets"), buffer("inv_permuted_idx"), buffer("permuted_src"),
                            buffer("route_chunk_counts")};
  const CUdeviceptr permuted = buffer("permuted_hidden");
  CUdeviceptr gemm1_input = permuted;
  if (d.act_format == ActFormat::none) {
    cuda::permute(ids, {dptr(in.hidden), hidden_stride * elem, K * elem, permuted, K * elem}, perm, stream);
    if (order_gemm1_rows) cuda::order_rows_for_mma(permuted, K, slots, K, permuted, K, stream);
  } else {
    // PERF: quantized per token, a token's copies are equal rows: quantize (and dequantize) the M
    // tokens (e4m3 codes into quanted_gate_up_input, 16-bit values into permuted_hidden, as
    // [M, K]), then permute those rows into GEMM1's input; the scales stay per token (the GEMM
    // maps each permuted row to its token through permuted_src). Permuting first quantized
    // M * top_k rows: ~350 MB more traffic at Qwen3 M = 4096
    // (bench/results/2026-12-02-h200-quant-activations.md).
    const CUdeviceptr scales = buffer("quanted_gate_up_input.scales");
    const bool e4m3 = input1 == cuda::GemmInput::row_scaled_e4m3;
    const CUdeviceptr tokens = e4m3 ? buffer("quanted_gate_up_input") : permuted;
    const bool fold = fold_gemm1_quantizer(ids, perm.chunk_counts);
    // NOTE: the permute copies whole rows, so rows quantized in the MMA's order stay in it.
    const bool mma_order = g1.tile.mma_order_tokens;
    if (fold) quantize_for(input1, dptr(in.hidden), hidden_stride, M, K, tokens, scales, mma_order, &perm.quantizer);
    cuda::permute_indices(ids, perm, stream);
    if (!fold) quantize_for(input1, dptr(in.hidden), hidden_stride, M, K, tokens, scales, mma_order);
    // NOTE: e4m3 codes (1 byte each) fit in the values' buffer.
    const CUdeviceptr rows_out = buffer("dequantized_gate_up_input");
    const int64_t row_bytes = e4m3 ? K : K * elem;
    cuda::permute_rows({tokens, row_bytes, row_bytes, rows_out, row_bytes}, perm.permuted_src, perm.offsets, E, slots,
                       d.top_k, stream);
    g1.a = rows_out;
    g1.a_row_stride = K;
    set_row_scales(g1, input1, scales);
    if (g1.a_row_scales != 0) {
      g1.a_scale_rows = perm.permuted_src;
      g1.a_scale_row_divisor = d.top_k;
    }
    gemm1_input = 0;
  }
  const CUdeviceptr table = buffer("block_table"), count = buffer("num_blocks");
  cuda::build_segments(g1.weights_desc, c, g1.tile, perm.offsets, 0, DType::i32, 0, E, table, count, 0, stream, input1);
  for (cuda::MoeGemmArgs* g : {&g1, &g2}) {
    g->gather = false;
    g->block_table = table;
    g->num_blocks = count;
    g->max_blocks = cuda::segment_capacity(slots, E, shape.block_m);
  }
  run_chain(gemm1_input, K, slots, slots);
  reduce.row_map = perm.inv_permuted_idx;
  cuda::topk_reduce(reduce, stream);
}

void warm_up_cuda(const ExpertsDesc& desc, const TuningTable& tuning, bool fp8_tensor_cores, bool fp8_wgmma,
                  const WeightView* w13, const WeightView* w2) {
  const int sm = fp8_tensor_cores ? cuda::device_sm() : 0;  // as apply_cuda
  // No mma.sync stand-ins on a wgmma device, and with weights given only the kernels for such weights.
  const bool wgmma_device = cuda::device_has_wgmma(cuda::process_device_info());
  cuda::LayerKernelScope scope;
  scope.wgmma_device_only = wgmma_device;
  if (w13 != nullptr && w2 != nullptr) {
    validate_device_weights(desc.w13(), *w13, "w13");
    validate_device_weights(desc.w2(), *w2, "w2");
    scope = cuda::LayerKernelScope::of(*w13, *w2, wgmma_device);
  }
  // PERF: what the disk cache lacks compiles on a thread per core first (`moeq compile`'s list, a
  // superset of the loads below, which then find every CUBIN in memory): one program after another
  // took 102 s for Qwen3-30B-A3B's INT4 layer on one core (docs/perf-notes.md, session 41).
  std::vector<jit::KernelSpec> specs = cuda::layer_kernel_specs(desc, {}, scope);
  for (jit::KernelSpec& spec : cuda::tuned_kernel_specs(desc, tuning, scope)) specs.push_back(std::move(spec));
  jit::kernel_cache().lookup_all(specs, jit::current_arch(), hardware_threads());
  cuda::load_layer_kernels(desc, sm, fp8_wgmma, scope);
  // Each tuned tile for its own GEMM only: a GEMM1 tile need not be legal for GEMM2's weights.
  for (const TuningEntry& e : tuning.entries) {
    for (bool second : {false, true}) {
      const cuda::GemmTile tile = cuda::parse_gemm_tile(second ? e.gemm2_tile : e.gemm1_tile);
      const WeightDesc& w = second ? desc.w2() : desc.w13();
      const cuda::GemmWeightsKind& kind = second ? scope.w2 : scope.w13;
      for (bool prepared : cuda::GemmWeightsKind::admitted(kind.prepared_codes)) {
        const cuda::GemmPlan plan = cuda::gemm_plan(desc, w, cuda::tile_for_device(tile), sm, prepared, fp8_wgmma);
        cuda::load_moe_gemm(w, desc.act_dtype, plan.tile, plan.input, cuda::layer_gemm_variants(desc, !second), kind);
      }
    }
  }
}

static_assert(kInputErrorBadTopkId == cuda::kRoutingErrorBadTopkId && kInputErrorBadExpertMap == cuda::kRoutingErrorBadExpertMap &&
                  kInputErrorBatchedOverflow == cuda::kRoutingErrorBatchedOverflow,
              "the public error-word bits are the routing kernels' bits");

}  // namespace moeq::api
