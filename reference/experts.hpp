#pragma once
// The reference experts step, stage by stage, with the rounding points of CONTRACT §2, for the
// three layouts of CONTRACT §3. Every intermediate lives in a caller-provided buffer (the CPU
// backend places them per the workspace plan), so stale rows behave exactly as on the GPU.
#include <cstdint>
#include <vector>

#include "moeq/experts.hpp"
#include "moeq/weights.hpp"

namespace moeq::ref {

// Operand A of a GEMM: 16-bit rows, or quantized codes with per-row scales (dense rows).
struct ActivationRows {
  ActFormat format = ActFormat::none;
  DType dtype = DType::bf16;   // 16-bit element type when format == none
  const void* data = nullptr;
  int64_t row_stride = 0;      // elements, 16-bit only
  const void* scales = nullptr;
  int64_t cols = 0;
};
// Row `row` of a as fp32 (decoded, or dequantized codes * scales).
void decode_row(const ActivationRows& a, int64_t row, float* out);

struct RowPair {
  int64_t src;  // row of A
  int64_t dst;  // row of C
};

// Expert e's GEMM over some rows: C[dst, n] = round(sum_k A[src, k] * W_e[n, k] + b_e[n]),
// fp32 accumulation in increasing k, one rounding to c_dtype. `weights_scratch` holds the
// dequantized expert ([n, k] floats), reused across calls.
void gemm_rows(const WeightDesc& wd, const WeightView& w, int64_t e, const ActivationRows& a,
               const std::vector<RowPair>& rows, void* c, DType c_dtype, int64_t c_row_stride,
               std::vector<float>& weights_scratch);

// Activation of rows [0, rows): in [rows, n_in] -> out [rows, I], fp32 math, rounded to dtype.
void activation_stage(const ActivationParams& p, bool interleaved, DType dtype, const void* in,
                      int64_t rows, int64_t intermediate, void* out);

// Dynamic quantization of rows [0, rows) of a 16-bit buffer [rows, cols] into codes + scales.
void quantize_stage(ActFormat f, DType dtype, const void* in, int64_t in_row_stride, int64_t rows,
                    int64_t cols, uint8_t* codes, void* scales);

// Pointers of every buffer the step uses (from plan::plan_workspaces).
struct StepBuffers {
  uint8_t* quanted_gate_up_input = nullptr;
  void* quanted_gate_up_scales = nullptr;
  void* gate_up_output = nullptr;
  void* activation_output = nullptr;
  uint8_t* quanted_down_input = nullptr;
  void* quanted_down_scales = nullptr;
  void* down_output = nullptr;
  void* permuted_hidden = nullptr;   // contiguous
  int32_t* local_ids = nullptr;      // standard layouts
  int32_t* sorted_ids = nullptr;     // indexed
  int32_t* expert_ids = nullptr;
  int32_t* num_tokens_padded = nullptr;
  int64_t* expert_offsets = nullptr;  // contiguous
  int32_t* inv_permuted_idx = nullptr;
  int32_t* permuted_src = nullptr;
};

struct StepArgs {
  const ExpertsDesc* desc = nullptr;
  const WeightView* w13 = nullptr;
  const WeightView* w2 = nullptr;
  const ExpertsInputs* inputs = nullptr;
  ExpertsOutput output;
  int64_t block_m = 64;  // indexed only
  int threads = 1;       // experts' GEMMs side by side; the result is the same bytes for any count
};

// The whole step for one layout. Standard layouts write the weighted, reduced [M, K] result;
// masked writes the unweighted [E, T, K] down projections (rows >= count unspecified).
// Inputs must already be validated.
void run_indexed(const StepArgs& args, const StepBuffers& buffers);
void run_contiguous(const StepArgs& args, const StepBuffers& buffers);
void run_masked(const StepArgs& args, const StepBuffers& buffers);

}  // namespace moeq::ref
