#include "api/validate.hpp"

#include <cmath>
#include <cstdint>
#include <limits>
#include <sstream>

#include "moeq/error.hpp"
#include "plan/legality.hpp"
#include "reference/formats.hpp"
#include "reference/routing.hpp"
#include "reference/scalars.hpp"

namespace moeq {
namespace {

template <typename... Parts>
[[noreturn]] void fail(const Parts&... parts) {
  std::ostringstream s;
  (s << ... << parts);
  throw Error(s.str());
}

void check_scale_value(const char* gemm, const char* tensor, int64_t i, float v) {
  if (!std::isfinite(v) || v < 0.0f)
    fail(gemm, ".", tensor, "[", i, "] = ", v, " is not a finite non-negative scale");
}

int64_t element_bytes(DType t) { return std::max<int64_t>(1, dtype_bits(t) / 8); }

}  // namespace

using api::require_pointer;

void validate_weights(const WeightDesc& d, const WeightView& v, const char* name) {
  if (const auto reasons = plan::weight_desc_reasons(d); !reasons.empty()) fail(name, ": the WeightDesc's ", reasons.front());
  const std::string gemm(name);
  require_pointer(v.codes, (gemm + ".codes").c_str(), 1);
  require_pointer(v.scales, (gemm + ".scales").c_str(), element_bytes(d.scale_dtype));
  if (v.mx_scales_at_most_two && d.scale_dtype != DType::ue8m0)
    fail(name, ".mx_scales_at_most_two is set for ", to_string(d.format), " weights (MX formats only)");
  const int64_t num_scales = d.scale_elems();
  for (int64_t i = 0; i < num_scales; ++i) {
    if (d.scale_dtype == DType::ue8m0) {
      const uint8_t code = static_cast<const uint8_t*>(v.scales)[i];
      if (code == 255) fail(name, ".scales[", i, "] = 255 is the ue8m0 NaN code");
      if (code > 128 && v.mx_scales_at_most_two)
        fail(name, ".scales[", i, "] = ", int(code), " (2^", int(code) - 127,
             ") is above 2, but mx_scales_at_most_two is set");
    } else if (d.scale_dtype == DType::e4m3) {
      check_scale_value(name, "scales", i, ref::e4m3_to_f32(static_cast<const uint8_t*>(v.scales)[i]));
    } else {
      check_scale_value(name, "scales", i, ref::load_float(d.scale_dtype, v.scales, i));
    }
  }
  if (d.global_scale_elems() > 0) {
    require_pointer(v.global_scales, (gemm + ".global_scales").c_str(), 4);
    for (int64_t i = 0; i < d.global_scale_elems(); ++i) {
      const float g = v.global_scales[i];
      // NOTE: 0 is legal: an all-zero expert quantizes to a zero global scale.
      if (!std::isfinite(g) || g < 0.0f) fail(name, ".global_scales[", i, "] = ", g, " is not a finite non-negative scale");
    }
  }
  if (d.has_zero_point) {
    require_pointer(v.zero_points, (gemm + ".zero_points").c_str(), 1);
    for (int64_t i = 0; i < d.zero_point_bytes(); ++i)
      if (v.zero_points[i] > 15) fail(name, ".zero_points[", i, "] = ", int(v.zero_points[i]), " is outside [0, 15]");
  }
  if (d.bias_dtype != DType::none) require_pointer(v.bias, (gemm + ".bias").c_str(), element_bytes(d.bias_dtype));
}

namespace api {

void require_pointer(const void* p, const char* name, int64_t align_bytes) {
  if (p == nullptr) fail(name, " is null");
  if (reinterpret_cast<uintptr_t>(p) % static_cast<uintptr_t>(align_bytes) != 0)
    fail(name, " = ", p, " is not aligned to ", align_bytes, " bytes");
}

std::string dtype_text(DType t) {
  const std::string_view name = to_string(t);
  return name != "?" ? std::string(name) : "DType(" + std::to_string(static_cast<int>(t)) + ")";
}

void validate_token_counts(const ExpertsDesc& d, int64_t num_tokens, int64_t max_tokens_per_expert, bool batched,
                           const char* where, const char* t_name) {
  constexpr int64_t kMaxRows = (int64_t{1} << 31) - 1;
  if (batched) {
    if (max_tokens_per_expert < 0) fail(where, ": ", t_name, " = ", max_tokens_per_expert, " is negative");
    if (max_tokens_per_expert > kMaxRows / d.num_experts)
      fail(where, ": ", t_name, " = ", max_tokens_per_expert, " over E = ", d.num_experts,
           " local experts makes 2^31 or more rows; the limit is fewer than 2^31");
    return;
  }
  if (num_tokens < 0) fail(where, ": num_tokens = ", num_tokens, " is negative");
  if (num_tokens > kMaxRows / d.top_k)
    fail(where, ": num_tokens = ", num_tokens, " with top_k = ", d.top_k,
         " routes 2^31 or more rows; the limit is fewer than 2^31");
}

void validate_row_span(const char* name, int64_t stride, int64_t rows, int64_t elem_bytes) {
  if (stride <= 0 || rows <= 0) return;
  if (stride > std::numeric_limits<int64_t>::max() / elem_bytes / rows)
    fail(name, " = ", stride, " over ", rows, " rows of ", elem_bytes, "-byte elements spans 2^63 bytes or more");
}

void validate_workspaces(const void* workspace1, const void* workspace2) {
  if (workspace1 != nullptr) require_pointer(workspace1, "workspace1", 16);
  if (workspace2 != nullptr) require_pointer(workspace2, "workspace2", 16);
}

void validate_workspace_ranges(const void* workspace1, int64_t bytes1, const void* workspace2, int64_t bytes2) {
  if (workspace1 == nullptr || workspace2 == nullptr || bytes1 <= 0 || bytes2 <= 0) return;
  const uintptr_t a = reinterpret_cast<uintptr_t>(workspace1), b = reinterpret_cast<uintptr_t>(workspace2);
  if (a < b + static_cast<uintptr_t>(bytes2) && b < a + static_cast<uintptr_t>(bytes1))
    fail("workspace1 = ", workspace1, " (", bytes1, " bytes) and workspace2 = ", workspace2, " (", bytes2,
         " bytes) overlap; the step needs two separate buffers");
}

void validate_inputs(const ExpertsDesc& d, Layout layout, const ExpertsInputs& in, const ExpertsOutput& out) {
  const bool batched = in.is_batched();
  if (batched != (layout == Layout::masked))
    fail("layout = ", to_string(layout), " does not fit ", batched ? "batched" : "standard",
         " input (masked needs expert_num_tokens, indexed/contiguous need topk_ids)");
  const int64_t elem = dtype_bytes(d.act_dtype, 1);
  if (in.hidden_row_stride != 0 && in.hidden_row_stride < d.hidden_size)
    fail("hidden_row_stride = ", in.hidden_row_stride, " is smaller than K = ", d.hidden_size);
  if (out.row_stride != 0 && out.row_stride < d.hidden_size)
    fail("output row_stride = ", out.row_stride, " is smaller than K = ", d.hidden_size);
  const int64_t rows = batched ? d.num_experts * in.max_tokens_per_expert : in.num_tokens;
  validate_row_span("hidden_row_stride", in.hidden_row_stride, rows, elem);
  validate_row_span("output row_stride", out.row_stride, rows, elem);
  if (in.expert_map != nullptr) {
    require_pointer(in.expert_map, "expert_map", 4);
    for (int64_t g = 0; g < d.global_experts(); ++g)
      if (in.expert_map[g] < -1 || in.expert_map[g] >= d.num_experts)
        fail("expert_map[", g, "] = ", in.expert_map[g], " is outside [-1, ", d.num_experts, ")");
  }

  if (batched) {
    if (in.max_tokens_per_expert < 0) fail("max_tokens_per_expert = ", in.max_tokens_per_expert, " is negative");
    if (in.expert_num_tokens_dtype != DType::i32 && in.expert_num_tokens_dtype != DType::i64)
      fail("expert_num_tokens dtype = ", dtype_text(in.expert_num_tokens_dtype), " must be i32 or i64");
    require_pointer(in.expert_num_tokens, "expert_num_tokens", element_bytes(in.expert_num_tokens_dtype));
    for (int64_t e = 0; e < d.num_experts; ++e) {
      const int64_t n = in.expert_num_tokens_dtype == DType::i64
                            ? static_cast<const int64_t*>(in.expert_num_tokens)[e]
                            : static_cast<const int32_t*>(in.expert_num_tokens)[e];
      if (n < 0 || n > in.max_tokens_per_expert)
        fail("expert_num_tokens[", e, "] = ", n, " is outside [0, ", in.max_tokens_per_expert, "]");
    }
    if (in.max_tokens_per_expert > 0) {
      require_pointer(in.hidden, "hidden", elem);
      require_pointer(out.out, "out", elem);
    }
    return;
  }

  if (in.num_tokens < 0) fail("num_tokens = ", in.num_tokens, " is negative");
  if (in.num_tokens == 0) return;
  require_pointer(in.hidden, "hidden", elem);
  require_pointer(out.out, "out", elem);
  if (in.topk_ids_dtype != DType::i32 && in.topk_ids_dtype != DType::i64)
    fail("topk_ids dtype = ", dtype_text(in.topk_ids_dtype), " must be i32 or i64");
  require_pointer(in.topk_ids, "topk_ids", element_bytes(in.topk_ids_dtype));
  if (in.topk_weights_dtype != DType::f32 && in.topk_weights_dtype != DType::bf16 &&
      in.topk_weights_dtype != DType::f16)
    fail("topk_weights dtype = ", dtype_text(in.topk_weights_dtype), " must be f32, bf16 or f16");
  require_pointer(in.topk_weights, "topk_weights", element_bytes(in.topk_weights_dtype));
  // Throws naming the first out-of-range id.
  (void)ref::to_local_expert_ids(in.topk_ids, in.topk_ids_dtype, in.num_tokens, d.top_k,
                                 d.global_experts(), in.expert_map, d.num_experts);
}

}  // namespace api
}  // namespace moeq
