#include "plan/legality.hpp"

#include <cmath>
#include <sstream>

#include "cuda/driver.hpp"
#include "cuda/moe_gemm.hpp"
#include "moeq/error.hpp"
#include "plan/tuning.hpp"

namespace moeq::plan {
namespace {

template <typename... Parts>
std::string cat(const Parts&... parts) {
  std::ostringstream s;
  (s << ... << parts);
  return s.str();
}

constexpr int64_t kMaxGpuExperts = 4096;  // shared-memory tables of the routing and segment kernels

bool is_16bit_float(DType t) { return t == DType::bf16 || t == DType::f16; }

// K elements per weight scale, for the format and the desc's group choice (0 = whole row).
int weight_group(const ExpertsDesc& d) {
  const int fixed = weight_format_fixed_group(d.weight_format);
  if (fixed > 0) return fixed;
  if (d.weight_format == WeightFormat::int4 || d.weight_format == WeightFormat::int8) return d.group_size;
  return 0;
}

void check_reduction_dim(std::vector<std::string>& reasons, const ExpertsDesc& d, const char* name,
                         int64_t k) {
  const int group = weight_group(d);
  // NOTE: FP8 128x128 blocks may be partial at the matrix edge (CONTRACT §4), so no rule here.
  if (group > 0 && d.weight_format != WeightFormat::fp8_block && k % group != 0)
    reasons.push_back(cat(name, " = ", k, " is not a multiple of ", group, ", required by ",
                          to_string(d.weight_format), " weight scales"));
  if (dtype_bits(weight_format_code_dtype(d.weight_format)) == 4 && k % 2 != 0)
    reasons.push_back(cat(name, " = ", k, " is odd; ", to_string(d.weight_format),
                          " packs two codes per byte along K"));
  if ((d.act_format == ActFormat::mxfp8 || d.act_format == ActFormat::mxfp4) && k % 32 != 0)
    reasons.push_back(cat(name, " = ", k, " is not a multiple of 32, required by ",
                          to_string(d.act_format), " activation scales"));
}

// An enum field that holds none of its enumerators (a cast from an integer): named by its integer,
// since to_string has no name for it.
template <typename Enum>
void check_known(std::vector<std::string>& reasons, const char* name, Enum v) {
  for (Enum known : all_values<Enum>())
    if (known == v) return;
  reasons.push_back(cat(name, " = ", static_cast<long long>(v), " is not one of its enum's values"));
}

std::vector<std::string> unknown_enum_reasons(const ExpertsDesc& d) {
  std::vector<std::string> r;
  check_known(r, "act_dtype", d.act_dtype);
  check_known(r, "weight_format", d.weight_format);
  check_known(r, "act_format", d.act_format);
  check_known(r, "scale_dtype", d.scale_dtype);
  check_known(r, "bias_dtype", d.bias_dtype);
  check_known(r, "activation", d.activation.kind);
  return r;
}

}  // namespace

std::string weight_size_reason(int64_t num_experts, int64_t n, int64_t k) {
  if (num_experts < 1 || num_experts > kMaxExperts)
    return cat("num_experts = ", num_experts, " is outside [1, ", kMaxExperts, "]");
  if (n < 1 || n > kMaxWeightRows || k < 1 || k > kMaxDim)
    return cat("n = ", n, ", k = ", k, ": n must be in [1, ", kMaxWeightRows, "] and k in [1, ", kMaxDim, "]");
  return "";
}

std::vector<std::string> weight_desc_reasons(const WeightDesc& w) {
  std::vector<std::string> r;
  check_known(r, "format", w.format);
  check_known(r, "scale_dtype", w.scale_dtype);
  check_known(r, "bias_dtype", w.bias_dtype);
  if (!r.empty()) return r;
  if (std::string size = weight_size_reason(w.num_experts, w.n, w.k); !size.empty()) r.push_back(std::move(size));
  const int fixed = weight_format_fixed_group(w.format);
  const bool is_int = w.format == WeightFormat::int4 || w.format == WeightFormat::int8;
  if (fixed > 0 && w.group_size != fixed)
    r.push_back(cat("group_size = ", w.group_size, " must be ", fixed, " for ", to_string(w.format)));
  if (is_int && w.group_size != 0 && w.group_size != 32 && w.group_size != 64 && w.group_size != 128)
    r.push_back(cat("group_size = ", w.group_size, " must be 32, 64, 128 or 0 (per channel)"));
  if (!is_int && fixed == 0 && w.group_size != 0)
    r.push_back(cat("group_size = ", w.group_size, " must be 0 for ", to_string(w.format)));
  const int group = fixed > 0 ? fixed : w.group_size;
  if (group > 0 && w.format != WeightFormat::fp8_block && w.k % group != 0)
    r.push_back(cat("k = ", w.k, " is not a multiple of group_size = ", group));
  if (dtype_bits(weight_format_code_dtype(w.format)) == 4 && w.k % 2 != 0)
    r.push_back(cat("k = ", w.k, " is odd; ", to_string(w.format), " packs two codes per byte along k"));
  const DType scale = weight_format_fixed_scale_dtype(w.format);
  const bool scale_ok = is_int ? (is_16bit_float(w.scale_dtype) || w.scale_dtype == DType::f32) : w.scale_dtype == scale;
  if (!scale_ok)
    r.push_back(cat("scale_dtype = ", to_string(w.scale_dtype), " is not ",
                    is_int ? std::string("bf16, f16 or f32") : std::string(to_string(scale)), " for ",
                    to_string(w.format)));
  if (w.has_zero_point && w.format != WeightFormat::int4)
    r.push_back(cat("has_zero_point is set for ", to_string(w.format), " (int4 only)"));
  const bool nvfp4 = w.format == WeightFormat::nvfp4;
  if (nvfp4 ? (w.num_global_scales != 1 && w.num_global_scales != 2) : w.num_global_scales != 0)
    r.push_back(cat("num_global_scales = ", w.num_global_scales, " must be ", nvfp4 ? "1 or 2" : "0", " for ",
                    to_string(w.format)));
  if (w.bias_dtype != DType::none && w.bias_dtype != DType::f32 && !is_16bit_float(w.bias_dtype))
    r.push_back(cat("bias_dtype = ", to_string(w.bias_dtype), " must be none, f32, bf16 or f16"));
  return r;
}

std::vector<std::string> desc_reasons(const ExpertsDesc& d) {
  // NOTE: the checks below look formats up by value; an unknown one would index past their tables.
  if (auto unknown = unknown_enum_reasons(d); !unknown.empty()) return unknown;
  std::vector<std::string> r;
  if (d.num_experts <= 0) r.push_back(cat("num_experts = ", d.num_experts, " must be positive"));
  if (d.num_global_experts < 0 || (d.num_global_experts > 0 && d.num_global_experts < d.num_experts))
    r.push_back(cat("num_global_experts = ", d.num_global_experts, " must be 0 or at least num_experts = ",
                    d.num_experts));
  if (d.hidden_size <= 0) r.push_back(cat("hidden_size = ", d.hidden_size, " must be positive"));
  if (d.intermediate_size <= 0)
    r.push_back(cat("intermediate_size = ", d.intermediate_size, " must be positive"));
  // NOTE: bounds far above any model keep every size computation inside int64.
  if (d.num_experts > kMaxExperts || d.num_global_experts > kMaxExperts)
    r.push_back(cat("num_experts = ", d.num_experts, " / num_global_experts = ", d.num_global_experts,
                    " exceed ", kMaxExperts));
  if (d.hidden_size > kMaxDim || d.intermediate_size > kMaxDim)
    r.push_back(cat("hidden_size = ", d.hidden_size, " / intermediate_size = ", d.intermediate_size, " exceed ",
                    kMaxDim));
  if (d.top_k <= 0 || (d.num_experts > 0 && d.top_k > d.global_experts()))
    r.push_back(cat("top_k = ", d.top_k, " is outside [1, ", d.global_experts(), "]"));
  if (!is_16bit_float(d.act_dtype))
    r.push_back(cat("act_dtype = ", to_string(d.act_dtype), " must be bf16 or f16"));
  if (!is_supported_pair(d.weight_format, d.act_format))
    r.push_back(cat("(", to_string(d.weight_format), ", ", to_string(d.act_format),
                    ") is not a supported (weight, activation) pair; see `moeq info`"));

  const bool is_int = d.weight_format == WeightFormat::int4 || d.weight_format == WeightFormat::int8;
  if (is_int) {
    if (d.group_size != 0 && d.group_size != 32 && d.group_size != 64 && d.group_size != 128)
      r.push_back(cat("group_size = ", d.group_size, " must be 32, 64, 128 or 0 (per channel)"));
    const bool scale_ok = d.scale_dtype == DType::none || is_16bit_float(d.scale_dtype) ||
                          (d.weight_format == WeightFormat::int8 && d.scale_dtype == DType::f32);
    if (!scale_ok)
      r.push_back(cat("scale_dtype = ", to_string(d.scale_dtype), " is not allowed for ",
                      to_string(d.weight_format), " (bf16, f16", 
                      d.weight_format == WeightFormat::int8 ? ", f32" : "", ")"));
  } else if (d.scale_dtype != DType::none && d.scale_dtype != d.w13().scale_dtype) {
    r.push_back(cat("scale_dtype = ", to_string(d.scale_dtype), " is fixed to ",
                    to_string(d.w13().scale_dtype), " by ", to_string(d.weight_format)));
  }
  if (d.has_zero_point && d.weight_format != WeightFormat::int4)
    r.push_back(cat("has_zero_point is only supported for int4 weights, not ", to_string(d.weight_format)));
  if (d.weight_format == WeightFormat::nvfp4 && d.num_global_scales_w13 != 1 && d.num_global_scales_w13 != 2)
    r.push_back(cat("num_global_scales_w13 = ", d.num_global_scales_w13, " must be 1 or 2"));
  if (d.weight_format == WeightFormat::nvfp4 && d.num_global_scales_w13 == 2 &&
      !is_gated(d.activation.kind))
    r.push_back(cat("num_global_scales_w13 = 2 needs a gated activation (gate and up halves), not ",
                    to_string(d.activation.kind)));
  if (d.weight_format == WeightFormat::nvfp4 && d.num_global_scales_w13 == 2 && d.interleaved_gate_up)
    r.push_back("num_global_scales_w13 = 2 needs [gate; up] halves, not interleaved_gate_up rows");
  if (d.bias_dtype != DType::none && d.bias_dtype != DType::f32 && d.bias_dtype != d.act_dtype)
    r.push_back(cat("bias_dtype = ", to_string(d.bias_dtype), " must be none, f32 or act_dtype (",
                    to_string(d.act_dtype), ")"));

  const ActivationParams& a = d.activation;
  if (d.interleaved_gate_up && !is_gated(a.kind))
    r.push_back(cat("interleaved_gate_up needs a gated activation, not ", to_string(a.kind)));
  if (!(a.silu_clamp >= 0.0f) || std::isinf(a.silu_clamp))
    r.push_back(cat("silu_clamp = ", a.silu_clamp, " must be finite and >= 0"));
  if (a.silu_clamp > 0.0f && a.kind != Activation::silu)
    r.push_back(cat("silu_clamp = ", a.silu_clamp, " applies to silu only, not ", to_string(a.kind)));
  if (!(a.swiglu_limit > 0.0f) || !std::isfinite(a.swiglu_alpha))
    r.push_back(cat("swiglu_alpha = ", a.swiglu_alpha, ", swiglu_limit = ", a.swiglu_limit,
                    ": alpha must be finite and limit positive"));

  if (d.hidden_size > 0 && d.intermediate_size > 0) {
    check_reduction_dim(r, d, "hidden_size (K)", d.hidden_size);
    check_reduction_dim(r, d, "intermediate_size (I)", d.intermediate_size);
  }
  return r;
}

std::vector<std::string> cuda_reasons(const ExpertsDesc& d, const Options& o) {
  std::vector<std::string> r;
  std::string why;
  if (cuda::device_count() == 0) {
    cuda::driver_available(&why);
    r.push_back("no CUDA device" + (why.empty() ? std::string() : " (" + why + ")"));
  }
  for (auto& reason : cuda_kernel_reasons(d, o)) r.push_back(std::move(reason));
  return r;
}

std::vector<std::string> cuda_kernel_reasons(const ExpertsDesc& d, const Options& o) {
  std::vector<std::string> r;
  if (d.num_experts > kMaxGpuExperts || d.global_experts() > kMaxGpuExperts)
    r.push_back(cat("num_experts = ", d.num_experts, " / num_global_experts = ", d.global_experts(), " exceed ",
                    kMaxGpuExperts, ", the GPU routing and segment tables' limit"));
  if (o.f16_accum) r.push_back("f16_accum is not on the CUDA backend yet");
  if (o.block_m != 0 && !is_gpu_block_m(o.block_m))
    r.push_back(cat("block_m = ", o.block_m, " must be ", kGpuBlockMs, " on the CUDA backend"));
  if (d.hidden_size > 0 && d.intermediate_size > 0 && d.num_experts > 0) {
    for (auto& s : cuda::moe_gemm_reasons(d.w13(), d.act_dtype)) r.push_back("w13: " + s);
    for (auto& s : cuda::moe_gemm_reasons(d.w2(), d.act_dtype)) r.push_back("w2: " + s);
  }
  return r;
}

std::vector<std::string> option_reasons(const ExpertsDesc& d, const Options& o) {
  std::vector<std::string> r;
  check_known(r, "layout", o.layout);
  check_known(r, "backend", o.backend);
  if (!r.empty() || !unknown_enum_reasons(d).empty()) return r;
  if (o.f16_accum) {
    const bool ok = d.act_dtype == DType::f16 &&
                    (d.act_format == ActFormat::none || d.act_format == ActFormat::fp8_token ||
                     d.act_format == ActFormat::mxfp8);
    if (!ok)
      r.push_back(cat("f16_accum needs f16 output with f16 or e4m3 activations, not act_dtype = ",
                      to_string(d.act_dtype), ", act_format = ", to_string(d.act_format)));
  }
  if (o.backend == Backend::cuda)
    for (auto& reason : cuda_reasons(d, o)) r.push_back("backend = cuda: " + reason);
  if (o.cpu_threads < 0) r.push_back(cat("cpu_threads = ", o.cpu_threads, " must be >= 0 (0: one per core)"));
  if (o.block_m < 0 || o.block_m > 1024)
    r.push_back(cat("block_m = ", o.block_m, " is outside [0, 1024] (0 = chosen by the planner)"));
  for (auto& reason : tuning_reasons(d, o)) r.push_back(std::move(reason));
  return r;
}

void require_implementable(const ExpertsDesc& desc, const Options& options) {
  auto reasons = desc_reasons(desc);
  for (auto& s : option_reasons(desc, options)) reasons.push_back(std::move(s));
  if (reasons.empty()) return;
  std::string msg = "cannot run " + desc.to_string() + ": ";
  for (size_t i = 0; i < reasons.size(); ++i) msg += (i ? "; " : "") + reasons[i];
  throw Error(msg);
}

}  // namespace moeq::plan
