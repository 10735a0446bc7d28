#pragma once
// A complete experts problem in host memory: the layer, its canonical weights and one batch
// of inputs. Generated synthetically (`moeq run --preset`) or read from safetensors files.
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "moeq/experts.hpp"
#include "reference/quantize.hpp"

namespace moeq::io {

struct HostProblem {
  ExpertsDesc desc;
  Layout layout = Layout::auto_select;
  std::unique_ptr<ref::QuantizedWeights> w13, w2;
  int64_t num_tokens = 0;              // M
  std::vector<uint8_t> hidden;         // [M, K] (or [E, T, K] when batched), act_dtype
  DType topk_ids_dtype = DType::i32;
  std::vector<uint8_t> topk_ids;       // [M, top_k]
  DType topk_weights_dtype = DType::f32;
  std::vector<uint8_t> topk_weights;   // [M, top_k]
  std::vector<int32_t> expert_map;     // [E_g] or empty
  int64_t max_tokens_per_expert = 0;   // T (batched only)
  std::vector<int32_t> expert_num_tokens;  // [E] (batched only)

  bool is_batched() const { return !expert_num_tokens.empty(); }
  ExpertsInputs inputs() const;
  int64_t output_rows() const;  // M, or E*T when batched
};

struct GenerateOptions {
  int64_t num_tokens = 16;
  uint64_t seed = 0;
  int ep_size = 1;  // expert parallelism: this rank holds experts [rank*E_g/size, (rank+1)*E_g/size)
  int ep_rank = 0;
  bool batched = false;  // dispatch into [E, T, K] for the masked layout
  int num_threads = 0;   // 0 = hardware concurrency
};

// Deterministic synthetic problem (same seed -> same bytes on every machine):
// weights ~ N(0, 1) quantized by the reference quantizers, biases ~ N(0, 0.1),
// hidden ~ N(0, 1/K) (so GEMM1 outputs have unit variance), router logits ~ N(0, 1) with
// softmax over E_g, top-k, renormalised to sum 1. With ep_size > 1, desc.num_experts is
// E_g / ep_size and expert_map marks the other ranks' experts -1.
HostProblem generate_problem(const ExpertsDesc& global_desc, const GenerateOptions& options);

// Counter-based normal samples: value i of stream (seed, stream) is a fixed function of the
// three numbers, so generation is parallel and reproducible.
float normal_sample(uint64_t seed, uint64_t stream, uint64_t index);
// Values 2*pair_index and 2*pair_index + 1 of the stream at once (one Box-Muller step).
void normal_pair(uint64_t seed, uint64_t stream, uint64_t pair_index, float* out);
// out[i] = scale * normal_sample(seed, stream, i) for i < n.
void fill_normal(uint64_t seed, uint64_t stream, float scale, float* out, int64_t n);

}  // namespace moeq::io
