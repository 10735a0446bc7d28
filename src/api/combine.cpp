// combine_batched: the public entry over the reference combine (CPU backend).
#include <cstdint>
#include <string>
#include <vector>

#include "api/validate.hpp"
#include "moeq/error.hpp"
#include "moeq/experts.hpp"
#include "plan/legality.hpp"
#include "reference/routing.hpp"

namespace moeq {

void combine_batched(const ExpertsDesc& desc, const ExpertsInputs& routing, const void* batched_out,
                     const ExpertsOutput& output) {
  plan::require_implementable(desc, Options{});
  if (routing.expert_num_tokens == nullptr) throw Error("combine_batched: expert_num_tokens is null");
  api::validate_token_counts(desc, routing.num_tokens, routing.max_tokens_per_expert, true, "combine_batched");
  api::validate_token_counts(desc, routing.num_tokens, 0, false, "combine_batched");
  if (routing.max_tokens_per_expert > 0)
    api::require_pointer(batched_out, "combine_batched: batched_out", dtype_bytes(desc.act_dtype, 1));
  // routing.hidden is not read: batched_out, checked above, stands in for it in both checks (the
  // standard one: ids, weights, map and out; the batched one: the counts).
  // NOTE: with T = 0 batched_out may be null; the checks then see an address that is never read.
  alignas(16) static const uint8_t kNeverRead[16] = {};
  // NOTE: routing.hidden_row_stride belongs to the hidden rows, not to batched_out ([E, T, K] unpadded).
  ExpertsInputs standard = routing;
  standard.expert_num_tokens = nullptr;
  standard.hidden = batched_out != nullptr ? batched_out : kNeverRead;
  standard.hidden_row_stride = 0;
  api::validate_inputs(desc, Layout::indexed, standard, output);
  ExpertsInputs batched = routing;
  batched.hidden = batched_out;
  batched.hidden_row_stride = 0;
  api::validate_inputs(desc, Layout::masked, batched, {const_cast<void*>(batched_out), 0});
  if (output.row_stride != 0 && output.row_stride != desc.hidden_size)
    throw Error("combine_batched: output row_stride = " + std::to_string(output.row_stride) + " must be 0 or K");
  const int64_t M = routing.num_tokens;
  if (M == 0) return;
  const auto local = ref::to_local_expert_ids(routing.topk_ids, routing.topk_ids_dtype, M, desc.top_k,
                                              desc.global_experts(), routing.expert_map, desc.num_experts);
  std::vector<int64_t> routed(static_cast<size_t>(desc.num_experts), 0);
  for (int32_t e : local)
    if (e >= 0) ++routed[e];
  for (int64_t e = 0; e < desc.num_experts; ++e) {
    const int64_t n = routing.expert_num_tokens_dtype == DType::i64
                          ? static_cast<const int64_t*>(routing.expert_num_tokens)[e]
                          : static_cast<const int32_t*>(routing.expert_num_tokens)[e];
    if (n != routed[e])
      throw Error("combine_batched: expert_num_tokens[" + std::to_string(e) + "] = " + std::to_string(n) +
                  " but topk_ids route " + std::to_string(routed[e]) + " slots to local expert " + std::to_string(e));
  }
  ref::combine_batched(batched_out, desc.act_dtype, routing.max_tokens_per_expert, desc.hidden_size, local.data(),
                       routing.topk_weights, routing.topk_weights_dtype, M, desc.top_k, desc.num_experts, output.out);
}

}  // namespace moeq
