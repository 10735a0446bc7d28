#include "io/problem_file.hpp"

#include <cstring>
#include <sstream>

#include "moeq/error.hpp"

namespace moeq::io {
namespace {

std::string shape_string(const std::vector<int64_t>& shape) {
  std::ostringstream s;
  s << "[";
  for (size_t i = 0; i < shape.size(); ++i) s << (i ? ", " : "") << shape[i];
  s << "]";
  return s.str();
}

// The dtype a canonical tensor is stored with in a file: codes and 8-bit scales the format
// cannot name (e2m1, u4, ue8m0) are stored as U8.
DType file_dtype(DType t) {
  switch (t) {
    case DType::e2m1: case DType::u4: case DType::ue8m0: return DType::u8;
    default: return t;
  }
}

struct TensorSpec {
  std::string name;
  DType dtype;
  std::vector<int64_t> shape;
};

std::vector<TensorSpec> weight_specs(const std::string& prefix, const WeightDesc& d) {
  const int64_t E = d.num_experts, N = d.n, K = d.k;
  const DType code = weight_format_code_dtype(d.format);
  std::vector<TensorSpec> specs;
  specs.push_back({prefix + ".weight", file_dtype(code), {E, N, dtype_bits(code) == 4 ? K / 2 : K}});
  std::vector<int64_t> scale_shape;
  if (d.format == WeightFormat::fp8_block)
    scale_shape = {E, (N + 127) / 128, (K + 127) / 128};
  else if (d.group_size == 0)
    scale_shape = {E, N};
  else
    scale_shape = {E, N, d.scale_groups_k()};
  specs.push_back({prefix + ".weight_scale", file_dtype(d.scale_dtype), scale_shape});
  if (d.num_global_scales > 0) {
    specs.push_back({prefix + ".weight_scale_2", DType::f32,
                     d.num_global_scales == 1 ? std::vector<int64_t>{E} : std::vector<int64_t>{E, d.num_global_scales}});
  }
  if (d.has_zero_point) specs.push_back({prefix + ".zero_point", DType::u8, scale_shape});
  if (d.bias_dtype != DType::none) specs.push_back({prefix + ".bias", d.bias_dtype, {E, N}});
  return specs;
}

std::vector<uint8_t>* storage_for(ref::QuantizedWeights& q, const std::string& suffix) {
  if (suffix == ".weight") return &q.codes;
  if (suffix == ".weight_scale") return &q.scales;
  if (suffix == ".zero_point") return &q.zero_points;
  if (suffix == ".bias") return &q.bias;
  return nullptr;
}

const Tensor& checked_tensor(const SafetensorsFile& f, const TensorSpec& spec, const std::string& why) {
  const Tensor& t = f.get(spec.name);
  if (t.dtype != spec.dtype)
    throw Error(f.origin + ": tensor '" + spec.name + "' has dtype " + std::string(safetensors_dtype_name(t.dtype)) +
                " but " + why + " needs " + std::string(safetensors_dtype_name(spec.dtype)));
  if (t.shape != spec.shape)
    throw Error(f.origin + ": tensor '" + spec.name + "' has shape " + shape_string(t.shape) + " but " + why +
                " needs " + shape_string(spec.shape));
  return t;
}

Tensor make_tensor(std::string name, DType dtype, std::vector<int64_t> shape, const void* data, size_t bytes) {
  Tensor t;
  t.name = std::move(name);
  t.dtype = dtype;
  t.shape = std::move(shape);
  t.data.resize(bytes);
  if (bytes > 0) std::memcpy(t.data.data(), data, bytes);
  return t;
}

// Checks every tensor of one GEMM before anything is allocated from the metadata's sizes.
void check_weight_tensors(const SafetensorsFile& f, const std::string& prefix, const WeightDesc& d,
                          const std::string& why) {
  for (const auto& spec : weight_specs(prefix, d)) checked_tensor(f, spec, why);
}

void load_weights(const SafetensorsFile& f, const std::string& prefix, ref::QuantizedWeights& q,
                  const std::string& why) {
  for (const auto& spec : weight_specs(prefix, q.desc)) {
    const Tensor& t = checked_tensor(f, spec, why);
    const std::string suffix = spec.name.substr(prefix.size());
    if (suffix == ".weight_scale_2") {
      std::memcpy(q.global_scales.data(), t.data.data(), t.data.size());
    } else {
      auto* dst = storage_for(q, suffix);
      std::memcpy(dst->data(), t.data.data(), t.data.size());
    }
  }
}

const std::string& meta_at(const std::map<std::string, std::string>& m, const std::string& key,
                           const std::string& origin) {
  auto it = m.find(key);
  if (it == m.end()) throw Error(origin + ": metadata key '" + key + "' is missing");
  return it->second;
}

int64_t meta_int(const std::map<std::string, std::string>& m, const std::string& key, const std::string& origin) {
  const std::string& v = meta_at(m, key, origin);
  size_t used = 0;
  int64_t x = 0;
  try {
    x = std::stoll(v, &used);
  } catch (const std::exception&) {
    used = 0;
  }
  if (used != v.size() || v.empty()) throw Error(origin + ": metadata " + key + " = '" + v + "' is not an integer");
  return x;
}

int meta_small_int(const std::map<std::string, std::string>& m, const std::string& key, const std::string& origin) {
  const int64_t x = meta_int(m, key, origin);
  if (x < -(int64_t{1} << 30) || x > (int64_t{1} << 30))
    throw Error(origin + ": metadata " + key + " = " + std::to_string(x) + " is out of range");
  return static_cast<int>(x);
}

float meta_float(const std::map<std::string, std::string>& m, const std::string& key, const std::string& origin) {
  const std::string& v = meta_at(m, key, origin);
  try {
    size_t used = 0;
    const float x = std::stof(v, &used);
    if (used == v.size()) return x;
  } catch (const std::exception&) {
  }
  throw Error(origin + ": metadata " + key + " = '" + v + "' is not a number");
}

template <typename Parse>
auto meta_enum(const std::map<std::string, std::string>& m, const std::string& key, const std::string& origin,
               Parse parse) {
  const std::string& v = meta_at(m, key, origin);
  auto x = parse(v);
  if (!x) throw Error(origin + ": metadata " + key + " = '" + v + "' is not a known value");
  return *x;
}

std::string float_text(float v) {
  std::ostringstream s;
  s.precision(9);
  s << v;
  return s.str();
}

}  // namespace

std::map<std::string, std::string> desc_metadata(const ExpertsDesc& d, Layout layout) {
  return {
      {"format", "moeq-problem-1"},
      {"num_experts", std::to_string(d.num_experts)},
      {"num_global_experts", std::to_string(d.global_experts())},
      {"hidden_size", std::to_string(d.hidden_size)},
      {"intermediate_size", std::to_string(d.intermediate_size)},
      {"top_k", std::to_string(d.top_k)},
      {"act_dtype", std::string(to_string(d.act_dtype))},
      {"weight_format", std::string(to_string(d.weight_format))},
      {"act_format", std::string(to_string(d.act_format))},
      {"group_size", std::to_string(d.group_size)},
      {"scale_dtype", std::string(to_string(d.w13().scale_dtype))},
      {"zero_point", d.has_zero_point ? "true" : "false"},
      {"num_global_scales_w13", std::to_string(d.num_global_scales_w13)},
      {"bias_dtype", std::string(to_string(d.bias_dtype))},
      {"activation", std::string(to_string(d.activation.kind))},
      {"swiglu_alpha", float_text(d.activation.swiglu_alpha)},
      {"swiglu_limit", float_text(d.activation.swiglu_limit)},
      {"silu_clamp", float_text(d.activation.silu_clamp)},
      {"interleaved_gate_up", d.interleaved_gate_up ? "true" : "false"},
      {"layout", std::string(to_string(layout))},
  };
}

ExpertsDesc desc_from_metadata(const std::map<std::string, std::string>& m, const std::string& origin,
                               Layout* layout) {
  auto boolean = [&](const std::string& key) {
    const std::string& v = meta_at(m, key, origin);
    if (v != "true" && v != "false") throw Error(origin + ": metadata " + key + " = '" + v + "' is not true/false");
    return v == "true";
  };
  const std::string& format = meta_at(m, "format", origin);
  if (format != "moeq-problem-1")
    throw Error(origin + ": metadata format = '" + format + "' is not 'moeq-problem-1'");
  ExpertsDesc d;
  d.num_experts = meta_int(m, "num_experts", origin);
  d.num_global_experts = meta_int(m, "num_global_experts", origin);
  d.hidden_size = meta_int(m, "hidden_size", origin);
  d.intermediate_size = meta_int(m, "intermediate_size", origin);
  d.top_k = meta_int(m, "top_k", origin);
  d.act_dtype = meta_enum(m, "act_dtype", origin, parse_dtype);
  d.weight_format = meta_enum(m, "weight_format", origin, parse_weight_format);
  d.act_format = meta_enum(m, "act_format", origin, parse_act_format);
  d.group_size = meta_small_int(m, "group_size", origin);
  d.scale_dtype = meta_enum(m, "scale_dtype", origin, parse_dtype);
  if (d.weight_format != WeightFormat::int4 && d.weight_format != WeightFormat::int8) d.scale_dtype = DType::none;
  d.has_zero_point = boolean("zero_point");
  d.num_global_scales_w13 = meta_small_int(m, "num_global_scales_w13", origin);
  d.bias_dtype = meta_enum(m, "bias_dtype", origin, parse_dtype);
  d.activation.kind = meta_enum(m, "activation", origin, parse_activation);
  d.activation.swiglu_alpha = meta_float(m, "swiglu_alpha", origin);
  d.activation.swiglu_limit = meta_float(m, "swiglu_limit", origin);
  d.activation.silu_clamp = meta_float(m, "silu_clamp", origin);
  d.interleaved_gate_up = boolean("interleaved_gate_up");
  if (layout) *layout = meta_enum(m, "layout", origin, parse_layout);
  const auto reasons = can_implement(d, Options{});
  if (!reasons.empty()) throw Error(origin + ": the layer in the metadata cannot run: " + reasons.front());
  return d;
}

void add_weight_tensors(const HostProblem& p, SafetensorsFile& file) {
  for (const auto* q : {p.w13.get(), p.w2.get()}) {
    const std::string prefix = q == p.w13.get() ? "w13" : "w2";
    for (const auto& spec : weight_specs(prefix, q->desc)) {
      const std::string suffix = spec.name.substr(prefix.size());
      if (suffix == ".weight_scale_2") {
        file.add(make_tensor(spec.name, spec.dtype, spec.shape, q->global_scales.data(), q->global_scales.size() * 4));
      } else {
        auto* src = storage_for(const_cast<ref::QuantizedWeights&>(*q), suffix);
        file.add(make_tensor(spec.name, spec.dtype, spec.shape, src->data(), src->size()));
      }
    }
  }
}

void add_input_tensors(const HostProblem& p, SafetensorsFile& file) {
  const ExpertsDesc& d = p.desc;
  const int64_t M = p.num_tokens;
  const std::vector<int64_t> hidden_shape = p.is_batched()
      ? std::vector<int64_t>{d.num_experts, p.max_tokens_per_expert, d.hidden_size}
      : std::vector<int64_t>{M, d.hidden_size};
  file.add(make_tensor("hidden", d.act_dtype, hidden_shape, p.hidden.data(), p.hidden.size()));
  // NOTE: standard input always has its routing, [0, top_k] at M = 0 (reading the file back needs the tensors);
  // batched input has it only where the caller gave the ids of a combine.
  if (!p.is_batched() || !p.topk_ids.empty()) {
    file.add(make_tensor("topk_ids", p.topk_ids_dtype, {M, d.top_k}, p.topk_ids.data(), p.topk_ids.size()));
    file.add(make_tensor("topk_weights", p.topk_weights_dtype, {M, d.top_k}, p.topk_weights.data(), p.topk_weights.size()));
  }
  if (!p.expert_map.empty())
    file.add(make_tensor("expert_map", DType::i32, {d.global_experts()}, p.expert_map.data(), p.expert_map.size() * 4));
  if (p.is_batched())
    file.add(make_tensor("expert_num_tokens", DType::i32, {d.num_experts}, p.expert_num_tokens.data(),
                         p.expert_num_tokens.size() * 4));
}

void save_problem(const std::string& path, const HostProblem& p) {
  SafetensorsFile file;
  file.metadata = desc_metadata(p.desc, p.layout);
  add_weight_tensors(p, file);
  add_input_tensors(p, file);
  write_safetensors(path, file);
}

HostProblem problem_from_files(const SafetensorsFile& wf, const SafetensorsFile& in) {
  HostProblem p;
  p.desc = desc_from_metadata(wf.metadata, wf.origin, &p.layout);
  const ExpertsDesc& d = p.desc;
  const std::string why = "the layer " + d.to_string();
  check_weight_tensors(wf, "w13", d.w13(), why);
  check_weight_tensors(wf, "w2", d.w2(), why);
  p.w13 = std::make_unique<ref::QuantizedWeights>(d.w13());
  p.w2 = std::make_unique<ref::QuantizedWeights>(d.w2());
  load_weights(wf, "w13", *p.w13, why);
  load_weights(wf, "w2", *p.w2, why);

  const Tensor& hidden = in.get("hidden");
  if (hidden.dtype != d.act_dtype)
    throw Error(in.origin + ": tensor 'hidden' has dtype " + std::string(safetensors_dtype_name(hidden.dtype)) +
                " but the layer's act_dtype is " + std::string(safetensors_dtype_name(d.act_dtype)));
  if (const Tensor* counts = in.find("expert_num_tokens")) {
    if (hidden.shape.size() != 3 || hidden.shape[0] != d.num_experts || hidden.shape[2] != d.hidden_size)
      throw Error(in.origin + ": tensor 'hidden' has shape " + shape_string(hidden.shape) +
                  " but batched input needs [E = " + std::to_string(d.num_experts) + ", T, K = " +
                  std::to_string(d.hidden_size) + "]");
    p.max_tokens_per_expert = hidden.shape[1];
    const bool wide = counts->dtype == DType::i64;
    checked_tensor(in, {"expert_num_tokens", wide ? DType::i64 : DType::i32, {d.num_experts}}, why);
    p.expert_num_tokens.resize(static_cast<size_t>(d.num_experts));
    for (int64_t e = 0; e < d.num_experts; ++e) {
      int64_t n = 0;
      if (wide) {
        std::memcpy(&n, counts->data.data() + e * 8, 8);
      } else {
        int32_t n32 = 0;
        std::memcpy(&n32, counts->data.data() + e * 4, 4);
        n = n32;
      }
      if (n < 0 || n > p.max_tokens_per_expert)
        throw Error(in.origin + ": expert_num_tokens[" + std::to_string(e) + "] = " + std::to_string(n) +
                    " is outside [0, T = " + std::to_string(p.max_tokens_per_expert) + "]");
      p.expert_num_tokens[e] = static_cast<int32_t>(n);
    }
  } else if (hidden.shape.size() != 2 || hidden.shape[1] != d.hidden_size) {
    throw Error(in.origin + ": tensor 'hidden' has shape " + shape_string(hidden.shape) + " but needs [M, K = " +
                std::to_string(d.hidden_size) + "]");
  } else {
    p.num_tokens = hidden.shape[0];
  }
  p.hidden = hidden.data;

  if (const Tensor* ids = in.find("topk_ids")) {
    const int64_t M = ids->shape.empty() ? -1 : ids->shape[0];
    if (ids->dtype != DType::i32 && ids->dtype != DType::i64)
      throw Error(in.origin + ": tensor 'topk_ids' must be I32 or I64, not " + std::string(safetensors_dtype_name(ids->dtype)));
    if (ids->shape != std::vector<int64_t>{M, d.top_k} || (!p.is_batched() && M != p.num_tokens))
      throw Error(in.origin + ": tensor 'topk_ids' has shape " + shape_string(ids->shape) + " but needs [M = " +
                  std::to_string(p.num_tokens) + ", top_k = " + std::to_string(d.top_k) + "]");
    const Tensor& w = in.get("topk_weights");
    if (w.shape != ids->shape)
      throw Error(in.origin + ": tensor 'topk_weights' has shape " + shape_string(w.shape) + " but topk_ids has " +
                  shape_string(ids->shape));
    if (w.dtype != DType::f32 && w.dtype != DType::bf16 && w.dtype != DType::f16)
      throw Error(in.origin + ": tensor 'topk_weights' must be F32, BF16 or F16, not " + std::string(safetensors_dtype_name(w.dtype)));
    if (p.is_batched()) p.num_tokens = M;
    p.topk_ids_dtype = ids->dtype;
    p.topk_ids = ids->data;
    p.topk_weights_dtype = w.dtype;
    p.topk_weights = w.data;
  } else if (!p.is_batched()) {
    throw Error(in.origin + ": tensor 'topk_ids' is missing (standard input needs topk_ids and topk_weights)");
  }
  if (const Tensor* map = in.find("expert_map")) {
    checked_tensor(in, {"expert_map", DType::i32, {d.global_experts()}}, why);
    p.expert_map.resize(static_cast<size_t>(d.global_experts()));
    std::memcpy(p.expert_map.data(), map->data.data(), map->data.size());
  }
  return p;
}

HostProblem load_problem(const std::string& weights_path, const std::string& inputs_path) {
  const SafetensorsFile weights = read_safetensors(weights_path);
  if (inputs_path == weights_path) return problem_from_files(weights, weights);
  return problem_from_files(weights, read_safetensors(inputs_path));
}

}  // namespace moeq::io
