#include "io/device_problem.hpp"

#include <cstdint>

namespace moeq::io {
namespace {

// Uploads bytes (nothing for an empty range) and returns the device pointer as a host-typed one.
const void* keep(DeviceProblem& d, const void* data, size_t bytes) {
  if (bytes == 0 || data == nullptr) return nullptr;
  d.buffers.emplace_back(bytes);
  d.buffers.back().upload(data, bytes);
  return reinterpret_cast<const void*>(static_cast<uintptr_t>(d.buffers.back().ptr()));
}

WeightView upload_weights(DeviceProblem& d, const ref::QuantizedWeights& q, CodeLayout codes) {
  WeightView v;
  v.codes = keep(d, q.codes.data(), q.codes.size());
  if (codes == CodeLayout::prepared) {
    d.buffers.emplace_back(static_cast<size_t>(prepared_code_bytes(q.desc)));
    void* prepared = reinterpret_cast<void*>(static_cast<uintptr_t>(d.buffers.back().ptr()));
    prepare_codes(q.desc, v.codes, prepared);
    cuda::check(cuda::driver().cuCtxSynchronize(), "cuCtxSynchronize");
    v.codes = prepared;
    v.code_layout = CodeLayout::prepared;
  }
  v.scales = keep(d, q.scales.data(), q.scales.size());
  // As an engine would at load time: MX layers vouch for their scales where they are at most 2.
  const bool mx = q.desc.format == WeightFormat::mxfp4 || q.desc.format == WeightFormat::mxfp8;
  v.mx_scales_at_most_two = mx && mx_scales_at_most_two_host(q.desc, q.scales.data());
  v.global_scales = static_cast<const float*>(keep(d, q.global_scales.data(), q.global_scales.size() * 4));
  v.zero_points = static_cast<const uint8_t*>(keep(d, q.zero_points.data(), q.zero_points.size()));
  v.bias = keep(d, q.bias.data(), q.bias.size());
  return v;
}

}  // namespace

DeviceProblem upload_problem(const HostProblem& p, CodeLayout codes) {
  cuda::ensure_context();
  DeviceProblem d;
  d.buffers.reserve(16);
  d.w13 = upload_weights(d, *p.w13, codes);
  d.w2 = upload_weights(d, *p.w2, codes);
  d.inputs = p.inputs();
  d.inputs.hidden = keep(d, p.hidden.data(), p.hidden.size());
  d.inputs.topk_ids = keep(d, p.topk_ids.data(), p.topk_ids.size());
  d.inputs.topk_weights = keep(d, p.topk_weights.data(), p.topk_weights.size());
  d.inputs.expert_map = static_cast<const int32_t*>(keep(d, p.expert_map.data(), p.expert_map.size() * 4));
  if (p.is_batched())
    d.inputs.expert_num_tokens = keep(d, p.expert_num_tokens.data(), p.expert_num_tokens.size() * 4);
  return d;
}

}  // namespace moeq::io
