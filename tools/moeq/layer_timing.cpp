// Timing the whole experts step under a CUDA graph (tools/moeq/layer_timing.hpp).
#include "tools/moeq/layer_timing.hpp"

#include <algorithm>
#include <cmath>
#include <random>
#include <sstream>
#include <vector>

#include "tools/moeq/gemm_timing.hpp"

namespace moeq::cli {
namespace {

using cuda::DeviceBuffer;

void* as_ptr(cuda::CUdeviceptr p) { return reinterpret_cast<void*>(static_cast<uintptr_t>(p)); }

WeightView device_view(const WeightDesc& w, const cuda::GemmWeights& g, CodeLayout codes) {
  WeightView v;
  v.code_layout = codes;
  v.mx_scales_at_most_two = random_weights_mx_scales_at_most_two(w);
  v.codes = as_ptr(g.codes);
  v.scales = as_ptr(g.scales);
  v.global_scales = static_cast<const float*>(as_ptr(g.global_scales));
  v.zero_points = static_cast<const uint8_t*>(as_ptr(g.zero_points));
  v.bias = as_ptr(g.bias);
  return v;
}

// Experts::explain's backend line and the two GEMMs' tiles for these codes, e.g. "cuda, layout indexed (block_m 24)
// for M = 256 (valid_shape_m 2048), gemm1 24x128/1x4x1/4/r, gemm2 24x128/1x4x1/4/r".
std::string plan_line(const Experts& experts, int64_t M, CodeLayout codes) {
  std::istringstream lines(experts.explain(M));
  std::string plan;
  for (std::string line; std::getline(lines, line);) {
    if (line.rfind("backend ", 0) == 0) plan = line.substr(8);
    for (const char* gemm : {"  gemm1 ", "  gemm2 "}) {
      if (line.rfind(gemm, 0) != 0) continue;
      // "  gemm1 <prepared tile> <input>[ (canonical codes: <tile> <input>)]"
      const size_t canonical = line.find("(canonical codes: ");
      std::istringstream words(codes == CodeLayout::canonical && canonical != std::string::npos
                                   ? line.substr(canonical + 18)
                                   : line.substr(std::string(gemm).size()));
      std::string tile;
      words >> tile;
      plan += ", " + std::string(gemm + 2) + tile;  // "gemm1 " + tile
    }
  }
  return plan;
}

// Owns a graph and its executable.
class Graph {
 public:
  Graph() = default;
  Graph(const Graph&) = delete;
  Graph& operator=(const Graph&) = delete;
  ~Graph() {
    const auto& d = cuda::driver();
    if (exec_ != nullptr) d.cuGraphExecDestroy(exec_);
    if (graph_ != nullptr) d.cuGraphDestroy(graph_);
  }
  template <typename Body>
  void capture(cuda::CUstream stream, Body&& body) {
    const auto& d = cuda::driver();
    cuda::check(d.cuStreamBeginCapture_v2(stream, 0), "cuStreamBeginCapture");
    body();
    cuda::check(d.cuStreamEndCapture(stream, &graph_), "cuStreamEndCapture");
    cuda::check(d.cuGraphInstantiateWithFlags(&exec_, graph_, 0), "cuGraphInstantiate");
  }
  void launch(cuda::CUstream stream) const { cuda::check(cuda::driver().cuGraphLaunch(exec_, stream), "cuGraphLaunch"); }

 private:
  cuda::CUgraph graph_ = nullptr;
  cuda::CUgraphExec exec_ = nullptr;
};

}  // namespace

LayerTiming time_experts_layer(const ExpertsDesc& d, const Options& options, int64_t M, int64_t l2_bytes,
                               int iterations, int trials, cuda::CUstream stream, CodeLayout codes) {
  Options o = options;
  o.backend = Backend::cuda;
  const Experts experts(d, o);
  experts.warm_up();
  const int64_t E = d.num_experts, K = d.hidden_size, top_k = d.top_k;
  std::mt19937 rng(7 + static_cast<unsigned>(M));
  const std::vector<int32_t> ids_host = random_routing(M, top_k, E, rng);
  std::vector<bool> touched(static_cast<size_t>(E), false);
  for (int32_t e : ids_host) touched[e] = true;
  const double experts_touched = static_cast<double>(std::count(touched.begin(), touched.end(), true));
  const WeightDesc w13 = d.w13(), w2 = d.w2();
  auto expert_bytes = [&](const WeightDesc& w) {
    return static_cast<double>(w.code_bytes() + w.scale_bytes() + w.zero_point_bytes() + w.bias_bytes()) / E;
  };
  const double weight_bytes = (expert_bytes(w13) + expert_bytes(w2)) * experts_touched;
  LayerTiming t;
  t.bytes = weight_bytes + 2.0 * static_cast<double>(M * K * 2);
  t.flops = 2.0 * static_cast<double>(M * top_k) * static_cast<double>(w13.n * w13.k + w2.n * w2.k);
  t.plan = plan_line(experts, M, codes);
  t.weight_copies = static_cast<int>(std::clamp(std::ceil(3.0 * static_cast<double>(l2_bytes) / t.bytes), 1.0, 16.0));
  const bool prepared = codes == CodeLayout::prepared;
  const auto& copies13 = random_weight_copies(w13, t.weight_copies, rng, prepared);
  const auto& copies2 = random_weight_copies(w2, t.weight_copies, rng, prepared);

  DeviceBuffer ids = DeviceBuffer::from_host(ids_host);
  DeviceBuffer weights = DeviceBuffer::from_host(std::vector<float>(static_cast<size_t>(M * top_k), 1.0f / static_cast<float>(top_k)));
  DeviceBuffer hidden = random_16bit(d.act_dtype, std::max<int64_t>(M * K, 1), 1.0f, rng);
  DeviceBuffer out(static_cast<size_t>(std::max<int64_t>(M * K * 2, 2)));
  const WorkspaceSizes ws = experts.workspace_bytes(M);
  DeviceBuffer ws1(static_cast<size_t>(std::max<int64_t>(ws.workspace1_bytes, 1)));
  DeviceBuffer ws2(static_cast<size_t>(std::max<int64_t>(ws.workspace2_bytes, 1)));
  ExpertsInputs in;
  in.hidden = as_ptr(hidden.ptr());
  in.num_tokens = M;
  in.topk_ids = as_ptr(ids.ptr());
  in.topk_weights = as_ptr(weights.ptr());
  const int copies = t.weight_copies;
  auto apply = [&](int i) {
    experts.apply(device_view(d.w13(), copies13[i % copies], codes), device_view(d.w2(), copies2[i % copies], codes), in,
                  {as_ptr(out.ptr()), 0}, as_ptr(ws1.ptr()), as_ptr(ws2.ptr()), stream);
  };
  const int launches = (std::max(iterations, 1) + copies - 1) / copies * copies;
  Graph graph;
  graph.capture(stream, [&] {
    for (int i = 0; i < launches; ++i) apply(i);
  });
  // One replay per sample (time_us's warm-up replays upload the graph and touch the buffers).
  t.us = time_us([&](int) { graph.launch(stream); }, 1, std::max(trials, 1), stream) / launches;
  return t;
}

}  // namespace moeq::cli
