#include "io/problem.hpp"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <numeric>
#include <sstream>

#include <unistd.h>

#include "common/parallel.hpp"
#include "moeq/error.hpp"
#include "reference/routing.hpp"
#include "reference/scalars.hpp"

namespace moeq::io {
namespace {

uint64_t mix64(uint64_t x) {
  x ^= x >> 30;
  x *= 0xbf58476d1ce4e5b9ULL;
  x ^= x >> 27;
  x *= 0x94d049bb133111ebULL;
  x ^= x >> 31;
  return x;
}

// Streams of the generator, one per tensor kind.
enum Stream : uint64_t { kW13 = 1, kW2, kB13, kB2, kHidden, kLogits };

uint64_t stream_id(Stream s, int64_t expert) { return (static_cast<uint64_t>(s) << 32) | static_cast<uint64_t>(expert); }

void fill_weights(ref::QuantizedWeights& q, Stream weight_stream, Stream bias_stream, int64_t expert_offset,
                  uint64_t seed, int threads) {
  const WeightDesc& d = q.desc;
  parallel_for(d.num_experts, threads, [&](int64_t e) {
    const uint64_t id = stream_id(weight_stream, e + expert_offset);
    std::vector<float> w(static_cast<size_t>(d.n * d.k));
    fill_normal(seed, id, 1.0f, w.data(), d.n * d.k);
    ref::quantize_expert(w.data(), e, q);
    if (d.bias_dtype != DType::none) {
      std::vector<float> b(static_cast<size_t>(d.n));
      const uint64_t bid = stream_id(bias_stream, e + expert_offset);
      fill_normal(seed, bid, 0.1f, b.data(), d.n);
      ref::set_bias(b.data(), e, q);
    }
  });
}

// Softmax over all E_g logits, the top_k largest (ties to the lower id), renormalised.
void route_token(const ExpertsDesc& g, uint64_t seed, int64_t t, int32_t* ids, float* weights) {
  const int64_t eg = g.global_experts();
  std::vector<double> p(static_cast<size_t>(eg));
  double max_logit = -1e300;
  for (int64_t e = 0; e < eg; ++e) {
    p[e] = normal_sample(seed, stream_id(kLogits, t), static_cast<uint64_t>(e));
    max_logit = std::max(max_logit, p[e]);
  }
  for (double& v : p) v = std::exp(v - max_logit);
  std::vector<int32_t> order(static_cast<size_t>(eg));
  std::iota(order.begin(), order.end(), 0);
  std::partial_sort(order.begin(), order.begin() + g.top_k, order.end(),
                    [&](int32_t a, int32_t b) { return p[a] != p[b] ? p[a] > p[b] : a < b; });
  double total = 0.0;
  for (int64_t k = 0; k < g.top_k; ++k) total += p[order[k]];
  for (int64_t k = 0; k < g.top_k; ++k) {
    ids[k] = order[k];
    weights[k] = static_cast<float>(p[order[k]] / total);
  }
}

}  // namespace

float normal_sample(uint64_t seed, uint64_t stream, uint64_t index) {
  float pair[2];
  normal_pair(seed, stream, index >> 1, pair);
  return pair[index & 1];
}

void normal_pair(uint64_t seed, uint64_t stream, uint64_t pair_index, float* out) {
  // Box-Muller on two counter-derived uniforms in (0, 1): values 2i and 2i+1 of the stream.
  const uint64_t base = mix64(seed * 0x9e3779b97f4a7c15ULL ^ mix64(stream + 0x632be59bd9b4e019ULL));
  const uint64_t a = mix64(base ^ (2 * pair_index));
  const uint64_t b = mix64(base ^ (2 * pair_index + 1));
  const double u1 = (static_cast<double>(a >> 11) + 0.5) * 0x1.0p-53;
  const double u2 = static_cast<double>(b >> 11) * 0x1.0p-53;
  const double r = std::sqrt(-2.0 * std::log(u1));
  out[0] = static_cast<float>(r * std::cos(6.283185307179586 * u2));
  out[1] = static_cast<float>(r * std::sin(6.283185307179586 * u2));
}

void fill_normal(uint64_t seed, uint64_t stream, float scale, float* out, int64_t n) {
  float pair[2];
  for (int64_t i = 0; i + 1 < n; i += 2) {
    normal_pair(seed, stream, static_cast<uint64_t>(i >> 1), pair);
    out[i] = scale * pair[0];
    out[i + 1] = scale * pair[1];
  }
  if (n % 2 == 1) out[n - 1] = scale * normal_sample(seed, stream, static_cast<uint64_t>(n - 1));
}

ExpertsInputs HostProblem::inputs() const {
  ExpertsInputs in;
  in.hidden = hidden.data();
  in.num_tokens = num_tokens;
  in.topk_ids = topk_ids.empty() ? nullptr : topk_ids.data();
  in.topk_ids_dtype = topk_ids_dtype;
  in.topk_weights = topk_weights.empty() ? nullptr : topk_weights.data();
  in.topk_weights_dtype = topk_weights_dtype;
  in.expert_map = expert_map.empty() ? nullptr : expert_map.data();
  if (is_batched()) {
    in.expert_num_tokens = expert_num_tokens.data();
    in.expert_num_tokens_dtype = DType::i32;
    in.max_tokens_per_expert = max_tokens_per_expert;
  }
  return in;
}

int64_t HostProblem::output_rows() const {
  return is_batched() ? desc.num_experts * max_tokens_per_expert : num_tokens;
}

namespace {

// The generated weights live in host memory: refuse, naming the sizes, what this machine cannot hold
// (a legal layer at the size limits asks for up to 2^56 bytes, found by fuzzing).
void check_host_memory(const ExpertsDesc& global_desc, int ep_size) {
  ExpertsDesc local = global_desc;
  local.num_experts = global_desc.global_experts() / ep_size;
  const auto bytes_of = [](const WeightDesc& w) {
    return w.code_bytes() + w.scale_bytes() + 4 * w.global_scale_elems() + w.zero_point_bytes() + w.bias_bytes();
  };
  const int64_t w13 = bytes_of(local.w13()), w2 = bytes_of(local.w2());
  const long pages = ::sysconf(_SC_PHYS_PAGES), page_bytes = ::sysconf(_SC_PAGE_SIZE);
  if (pages <= 0 || page_bytes <= 0) return;  // unknown: let the allocation decide
  const double gib = 1024.0 * 1024.0 * 1024.0, have = static_cast<double>(pages) * static_cast<double>(page_bytes);
  if (static_cast<double>(w13) + static_cast<double>(w2) > have) {
    std::ostringstream s;
    s.precision(3);
    s << "the generated weights take " << (static_cast<double>(w13) + static_cast<double>(w2)) / gib
      << " GiB of host memory (w13 " << static_cast<double>(w13) / gib << ", w2 " << static_cast<double>(w2) / gib
      << "); this machine has " << have / gib << " GiB";
    throw Error(s.str());
  }
}

}  // namespace

HostProblem generate_problem(const ExpertsDesc& global_desc, const GenerateOptions& o) {
  const int64_t eg = global_desc.global_experts();
  if (o.ep_size < 1 || o.ep_rank < 0 || o.ep_rank >= o.ep_size || eg % o.ep_size != 0)
    throw Error("ep_size = " + std::to_string(o.ep_size) + ", ep_rank = " + std::to_string(o.ep_rank) +
                ": need 0 <= rank < size and size dividing E_g = " + std::to_string(eg));
  if (global_desc.top_k < 1) throw Error("top_k = " + std::to_string(global_desc.top_k) + " must be at least 1");
  if (o.num_tokens < 0 || o.num_tokens > ((int64_t{1} << 31) - 1) / global_desc.top_k)
    throw Error("num_tokens = " + std::to_string(o.num_tokens) + " must be >= 0 with fewer than 2^31 routed rows");
  const int threads = o.num_threads > 0 ? o.num_threads : hardware_threads();

  check_host_memory(global_desc, o.ep_size);
  HostProblem p;
  p.desc = global_desc;
  p.desc.num_global_experts = eg;
  p.desc.num_experts = eg / o.ep_size;
  const int64_t first_local = o.ep_rank * p.desc.num_experts;
  const ExpertsDesc& d = p.desc;
  const int64_t M = o.num_tokens, K = d.hidden_size;

  p.w13 = std::make_unique<ref::QuantizedWeights>(d.w13());
  p.w2 = std::make_unique<ref::QuantizedWeights>(d.w2());
  fill_weights(*p.w13, kW13, kB13, first_local, o.seed, threads);
  fill_weights(*p.w2, kW2, kB2, first_local, o.seed, threads);

  p.num_tokens = M;
  std::vector<int32_t> ids(static_cast<size_t>(M * d.top_k));
  std::vector<float> weights(ids.size());
  for (int64_t t = 0; t < M; ++t) route_token(d, o.seed, t, &ids[t * d.top_k], &weights[t * d.top_k]);
  p.topk_ids.resize(ids.size() * 4);
  std::memcpy(p.topk_ids.data(), ids.data(), p.topk_ids.size());
  p.topk_weights.resize(weights.size() * 4);
  std::memcpy(p.topk_weights.data(), weights.data(), p.topk_weights.size());
  if (o.ep_size > 1) {
    p.expert_map.assign(static_cast<size_t>(eg), -1);
    for (int64_t e = 0; e < d.num_experts; ++e) p.expert_map[first_local + e] = static_cast<int32_t>(e);
  }

  const float hidden_std = 1.0f / std::sqrt(static_cast<float>(K));
  std::vector<uint8_t> standard(static_cast<size_t>(dtype_bytes(d.act_dtype, M * K)));
  std::vector<float> row(static_cast<size_t>(K));
  for (int64_t t = 0; t < M; ++t) {
    fill_normal(o.seed, stream_id(kHidden, t), hidden_std, row.data(), K);
    for (int64_t k = 0; k < K; ++k) ref::store_float(d.act_dtype, standard.data(), t * K + k, row[k]);
  }
  if (!o.batched) {
    p.hidden = std::move(standard);
    return p;
  }

  // Expert-parallel dispatch: expert e's rows are its slots in increasing flat order.
  const auto local = ref::to_local_expert_ids(ids.data(), DType::i32, M, d.top_k, eg,
                                              p.expert_map.empty() ? nullptr : p.expert_map.data(), d.num_experts);
  std::vector<int32_t> counts(static_cast<size_t>(d.num_experts), 0);
  for (int32_t e : local)
    if (e >= 0) ++counts[e];
  const int64_t T = std::max<int64_t>(1, *std::max_element(counts.begin(), counts.end()));
  std::vector<int32_t> slot_of_row(static_cast<size_t>(d.num_experts * T));
  p.expert_num_tokens.assign(static_cast<size_t>(d.num_experts), 0);
  ref::batched_dispatch(local.data(), M * d.top_k, d.num_experts, T, p.expert_num_tokens.data(), slot_of_row.data());
  p.max_tokens_per_expert = T;
  const int64_t row_bytes = dtype_bytes(d.act_dtype, K);
  p.hidden.assign(static_cast<size_t>(d.num_experts * T * row_bytes), 0);
  for (int64_t r = 0; r < d.num_experts * T; ++r)
    if (slot_of_row[r] >= 0)
      std::memcpy(&p.hidden[r * row_bytes], &standard[(slot_of_row[r] / d.top_k) * row_bytes], row_bytes);
  return p;
}

}  // namespace moeq::io
