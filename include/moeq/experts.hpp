#pragma once
// The experts step: out[t] = sum_k w[t,k] * W2_e(act(W13_e x_t)) over the local experts of
// token t (CONTRACT §2). Host API in the CUTLASS style: can_implement -> Experts (plan) ->
// workspace_bytes -> apply. apply never allocates device memory or synchronizes; on the GPU the
// first apply of a configuration compiles (or loads from the disk cache) its kernels, so call
// warm_up once before capturing a CUDA graph (docs/design.md).
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "moeq/tuning.hpp"
#include "moeq/types.hpp"
#include "moeq/weights.hpp"

namespace moeq {

struct ActivationParams {
  Activation kind = Activation::silu;
  float swiglu_alpha = 1.702f;  // SWIGLUOAI
  float swiglu_limit = 7.0f;    // SWIGLUOAI and SWIGLUSTEP
  float silu_clamp = 0.0f;      // SILU: > 0 clamps gate above and up on both sides
};

// What the layer is: shapes, formats, activation. Fixed for the life of a model.
struct ExpertsDesc {
  int64_t num_experts = 0;         // E: local experts (first dim of the weights)
  int64_t num_global_experts = 0;  // E_g: range of topk_ids; 0 means E
  int64_t hidden_size = 0;         // K
  int64_t intermediate_size = 0;   // I (called N in vLLM)
  int64_t top_k = 1;
  DType act_dtype = DType::bf16;   // hidden / output dtype: bf16 or f16
  WeightFormat weight_format = WeightFormat::int4;
  ActFormat act_format = ActFormat::none;
  int group_size = 128;            // INT4 / INT8 only: 32, 64, 128 or 0 (per channel)
  DType scale_dtype = DType::none; // INT4 / INT8 only: bf16 / f16 (INT8 also f32); none = act_dtype
  bool has_zero_point = false;     // INT4 only
  int num_global_scales_w13 = 1;   // NVFP4 only: 1, or 2 (gate and up scaled separately)
  DType bias_dtype = DType::none;  // f32 or act_dtype adds per-expert bias to both GEMMs
  ActivationParams activation;
  bool interleaved_gate_up = false;  // w13 rows [g0, u0, g1, u1, ...] instead of [g; u]

  int64_t global_experts() const { return num_global_experts > 0 ? num_global_experts : num_experts; }
  int64_t gemm1_n() const;  // N13: 2I gated, I otherwise
  WeightDesc w13() const;   // [E, N13, K]
  WeightDesc w2() const;    // [E, K, I]
  std::string to_string() const;
  // What a tuning table is measured for: shapes, top_k, weight and activation formats (not the
  // activation function), e.g. "E=128 K=2048 I=768 N13=1536 top_k=8 mxfp4:bf16 bf16".
  std::string tuning_key() const;
};

// How to compute. Layout auto: masked when batched input is given, else chosen by routed rows.
struct Options {
  Layout layout = Layout::auto_select;
  Backend backend = Backend::auto_select;
  bool batch_invariant = false;  // rows bit-identical whatever else is in the batch (fixes the GPU tile)
  bool f16_accum = false;
  int64_t block_m = 0;  // indexed layout alignment (CUDA: 8, 16, 24, 32, 48, 64, 80, 96, 128 or 144); 0 = chosen by the planner
  // Block size and GEMM tiles by valid_shape_m (moeq tune); empty = the planner's rules. Checked
  // against the layer by can_implement; not with batch_invariant or block_m.
  TuningTable tuning;
  // CUDA backend: with no table above, no block_m and no batch_invariant, the table shipped with
  // moeq for this layer (TuningTable::key) and device (tuning/<arch>/), where there is one; with
  // quantized activations and no table of their own, the one of the same layer with 16-bit activations.
  bool shipped_tuning = true;
  // CUDA backend, FP8 per-token activations: the FP8 (e4m3) tensor cores where a GEMM kernel has
  // them (FP8 per-channel weights at small M, sm_89+; with fp8_wgmma also canonical MXFP4 codes at
  // large M; docs/design.md); false: every GEMM takes the codes' 16-bit values (A/B timing).
  bool fp8_tensor_cores = true;
  // CUDA backend, FP8 per-token activations with canonical MXFP4 codes, sm_90: also the e4m3
  // warp-specialized body at large M (kernels/moe_gemm_ws_e4m3.cuh). Correct, but slower than the
  // 16-bit values path on the H200 (Qwen3 M = 4096: 1190 against 1091 us; docs/perf-notes.md), so
  // off unless asked for (its tests, timing).
  bool fp8_wgmma = false;
  // CPU backend: threads its GEMMs use, an expert each at a time (0: one per core). The result is
  // the same bytes for any count.
  int cpu_threads = 0;
  std::string to_string() const;
};

// Every reason `desc` with `options` cannot run; empty when it can.
std::vector<std::string> can_implement(const ExpertsDesc& desc, const Options& options);

// Routing and activations for one call. All pointers live where the backend computes
// (host memory for the CPU backend). Row strides are in elements.
struct ExpertsInputs {
  // Standard format: hidden [M, K]; masked (batched) format: hidden [E, T, K].
  const void* hidden = nullptr;
  int64_t num_tokens = 0;         // M (standard). Ignored for masked input.
  int64_t hidden_row_stride = 0;  // 0 = K
  const void* topk_ids = nullptr;      // [M, top_k] i32 or i64, global ids, -1 = no expert
  DType topk_ids_dtype = DType::i32;
  const void* topk_weights = nullptr;  // [M, top_k] f32 (bf16/f16 accepted)
  DType topk_weights_dtype = DType::f32;
  const int32_t* expert_map = nullptr;  // [E_g] global -> local id, -1 = not here; null = identity
  // Masked (batched) format: expert_num_tokens [E] (i32/i64), T rows per expert.
  const void* expert_num_tokens = nullptr;
  DType expert_num_tokens_dtype = DType::i32;
  int64_t max_tokens_per_expert = 0;  // T
  // CUDA backend: values apply cannot check without a sync (a topk id outside [-1, E_g), an
  // expert_map value outside [-1, E), a masked count outside [0, T]) drop the rows concerned
  // (non-local slots, clamped counts) and OR kInputError* bits into this int32 in device memory
  // (4-byte aligned). apply never clears it: the caller zeroes it, and reads it after a sync,
  // e.g. once per many graph replays (describe_input_errors words it). Null: the bits go to a
  // word in workspace 2 that nobody reads. The CPU backend throws moeq::Error for such values.
  int32_t* error_word = nullptr;
  bool is_batched() const { return expert_num_tokens != nullptr; }
};

// Bits of ExpertsInputs::error_word.
constexpr int32_t kInputErrorBadTopkId = 1;        // a topk id outside [-1, num_global_experts)
constexpr int32_t kInputErrorBadExpertMap = 2;     // an expert_map value outside [-1, num_experts)
constexpr int32_t kInputErrorBatchedOverflow = 4;  // a masked count outside [0, T], or an expert got > T rows
// The bits in words ("" for 0), e.g. for the moeq::Error a caller throws after reading the word.
std::string describe_input_errors(int32_t bits);

// One caller-owned output: [M, K] (standard) or [E, T, K] (masked), act_dtype.
struct ExpertsOutput {
  void* out = nullptr;
  int64_t row_stride = 0;  // 0 = K
};

// The two ping-pong workspaces apply needs for a given row count (CONTRACT §7).
struct WorkspaceSizes {
  int64_t workspace1_bytes = 0;
  int64_t workspace2_bytes = 0;
};


class Experts {
 public:
  // Plans the layer: validates desc and options and resolves the backend.
  Experts(const ExpertsDesc& desc, const Options& options);
  ~Experts();
  Experts(Experts&&) noexcept;
  Experts& operator=(Experts&&) noexcept;

  const ExpertsDesc& desc() const;
  const Options& options() const;
  Backend backend() const;  // the backend actually used (auto resolved)
  // Layout used for `num_tokens` standard rows (a negative count throws), or masked for batched input.
  Layout layout_for(int64_t num_tokens, bool batched) const;

  // Workspace sizes for M standard rows, or E*T batched rows when `batched_tokens_per_expert` > 0.
  // Either backend takes fewer than 2^31 routed rows (M * top_k, or E * T); larger counts throw, as do
  // input kinds the layout refuses (standard rows under masked, batched rows under indexed or contiguous).
  WorkspaceSizes workspace_bytes(int64_t num_tokens, int64_t batched_tokens_per_expert = 0) const;

  // CUDA backend: loads every kernel this layer's apply can launch, for any M, layout and ids
  // dtype (compiling what the disk cache lacks; `moeq compile` fills it ahead of time), so that
  // no later apply compiles or loads anything, e.g. under CUDA-graph capture. Synchronous; the
  // CPU backend has nothing to load.
  void warm_up() const;
  // The same for weights like these only (their code layouts, MX scales' words and scale pointers'
  // 4-byte alignment; checked as apply checks them): applies with such weights load nothing more,
  // others may compile. An Experts serving several layers (one desc) needs it for each distinct
  // kind (repeat calls add only what is new), or warm_up(). Qwen3-30B-A3B compiles 146 of 344
  // kernels (MXFP4) or 149 of 192 (INT4) (docs/design.md, "Warm-up for the caller's weights").
  void warm_up(const WeightView& w13, const WeightView& w2) const;

  // Runs the experts step. Validates every argument first; on error nothing is written.
  // Workspaces: null where the plan needs none, else 16-byte aligned and not overlapping each other (either backend).
  void apply(const WeightView& w13, const WeightView& w2, const ExpertsInputs& inputs,
             const ExpertsOutput& output, void* workspace1, void* workspace2,
             void* stream = nullptr) const;

  // The plan in words: backend, layout, block size, tuning entry, on the CUDA backend each GEMM's tile and
  // what it reads, then the workspaces. For standard input: a layer with layout = masked throws.
  std::string explain(int64_t num_tokens) const;

 private:
  struct Impl;
  const Impl& impl() const;  // throws moeq::Error on a moved-from object
  std::unique_ptr<Impl> impl_;
};

// Weights and reduces a batched (masked-layout) result `batched_out` [E, T, K] back to
// out [M, K], for callers without a combine step of their own (CONTRACT §3). `routing` gives
// topk_ids, topk_weights, expert_map, expert_num_tokens and T; expert e's rows are its slots in
// increasing t*top_k + k, as an expert-parallel dispatch delivers them. Host memory (the CPU
// backend); validates like apply and throws moeq::Error when the counts do not match the ids.
void combine_batched(const ExpertsDesc& desc, const ExpertsInputs& routing, const void* batched_out,
                     const ExpertsOutput& output);

}  // namespace moeq
