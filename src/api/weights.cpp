// Sizes of the canonical weight tensors (CONTRACT §4).
#include "moeq/weights.hpp"

namespace moeq {
namespace {
int64_t ceil_div(int64_t a, int64_t b) { return (a + b - 1) / b; }
}  // namespace

int64_t WeightDesc::scale_groups_k() const {
  if (format == WeightFormat::fp8_channel) return 1;
  if (format == WeightFormat::fp8_block) return ceil_div(k, 128);
  return group_size > 0 ? k / group_size : 1;
}

int64_t WeightDesc::code_bytes() const {
  return num_experts * n * dtype_bytes(weight_format_code_dtype(format), k);
}

int64_t WeightDesc::scale_elems() const {
  if (format == WeightFormat::fp8_block) return num_experts * ceil_div(n, 128) * ceil_div(k, 128);
  return num_experts * n * scale_groups_k();
}

int64_t WeightDesc::scale_bytes() const { return dtype_bytes(scale_dtype, scale_elems()); }

int64_t WeightDesc::zero_point_bytes() const {
  return has_zero_point ? num_experts * n * scale_groups_k() : 0;
}

int64_t WeightDesc::global_scale_elems() const {
  return format == WeightFormat::nvfp4 ? num_experts * num_global_scales : 0;
}

int64_t WeightDesc::bias_bytes() const { return dtype_bytes(bias_dtype, num_experts * n); }

}  // namespace moeq
