// ExpertsDesc / Options helpers and can_implement.
#include <sstream>

#include "moeq/experts.hpp"
#include "plan/legality.hpp"

namespace moeq {
namespace {

DType canonical_scale_dtype(const ExpertsDesc& d) {
  const DType fixed = weight_format_fixed_scale_dtype(d.weight_format);
  if (fixed != DType::none) return fixed;
  return d.scale_dtype == DType::none ? d.act_dtype : d.scale_dtype;  // INT4 / INT8
}

WeightDesc make_weight_desc(const ExpertsDesc& d, int64_t n, int64_t k, int num_global_scales) {
  WeightDesc w;
  w.format = d.weight_format;
  w.num_experts = d.num_experts;
  w.n = n;
  w.k = k;
  const int fixed = weight_format_fixed_group(d.weight_format);
  const bool is_int = d.weight_format == WeightFormat::int4 || d.weight_format == WeightFormat::int8;
  w.group_size = fixed > 0 ? fixed : (is_int ? d.group_size : 0);
  w.scale_dtype = canonical_scale_dtype(d);
  w.has_zero_point = d.has_zero_point;
  w.num_global_scales = d.weight_format == WeightFormat::nvfp4 ? num_global_scales : 0;
  w.bias_dtype = d.bias_dtype;
  return w;
}

// Shapes and formats, as ExpertsDesc::to_string and tuning_key share them; the key adds N13 and the
// INT scale dtype (what the GEMM tiles see).
void write_shapes_and_formats(std::ostream& s, const ExpertsDesc& d, bool key) {
  s << "E=" << d.num_experts;
  if (d.num_global_experts > 0 && d.num_global_experts != d.num_experts) s << "/" << d.num_global_experts;
  s << " K=" << d.hidden_size << " I=" << d.intermediate_size;
  if (key) s << " N13=" << d.gemm1_n();
  s << " top_k=" << d.top_k << " " << moeq::to_string(d.weight_format);
  if (d.weight_format == WeightFormat::int4 || d.weight_format == WeightFormat::int8) {
    s << "-g" << d.group_size << (d.has_zero_point ? "-zp" : "");
    if (key) s << "-s" << moeq::to_string(canonical_scale_dtype(d));
  }
  s << ":" << (d.act_format == ActFormat::none ? moeq::to_string(d.act_dtype) : moeq::to_string(d.act_format)) << " "
    << moeq::to_string(d.act_dtype);
}

}  // namespace

int64_t ExpertsDesc::gemm1_n() const {
  return is_gated(activation.kind) ? 2 * intermediate_size : intermediate_size;
}

WeightDesc ExpertsDesc::w13() const {
  return make_weight_desc(*this, gemm1_n(), hidden_size, num_global_scales_w13);
}

WeightDesc ExpertsDesc::w2() const { return make_weight_desc(*this, hidden_size, intermediate_size, 1); }

std::string ExpertsDesc::to_string() const {
  std::ostringstream s;
  write_shapes_and_formats(s, *this, false);
  s << " " << moeq::to_string(activation.kind);
  if (interleaved_gate_up) s << " interleaved";
  if (bias_dtype != DType::none) s << " bias=" << moeq::to_string(bias_dtype);
  return s.str();
}

std::string ExpertsDesc::tuning_key() const {
  std::ostringstream s;
  write_shapes_and_formats(s, *this, true);
  return s.str();
}

std::string Options::to_string() const {
  std::ostringstream s;
  s << "layout=" << moeq::to_string(layout) << " backend=" << moeq::to_string(backend);
  if (batch_invariant) s << " batch_invariant";
  if (f16_accum) s << " f16_accum";
  if (block_m > 0) s << " block_m=" << block_m;
  if (!shipped_tuning) s << " no_shipped_tuning";
  if (!fp8_tensor_cores) s << " no_fp8_tensor_cores";
  if (fp8_wgmma) s << " fp8_wgmma";
  if (cpu_threads > 0) s << " cpu_threads=" << cpu_threads;
  if (!tuning.empty()) s << " tuning=" << tuning.entries.size() << " ranges" << (tuning.layer.empty() ? "" : " (" + tuning.layer + ")");
  return s.str();
}

std::vector<std::string> can_implement(const ExpertsDesc& desc, const Options& options) {
  auto reasons = plan::desc_reasons(desc);
  for (auto& r : plan::option_reasons(desc, options)) reasons.push_back(std::move(r));
  return reasons;
}

}  // namespace moeq
