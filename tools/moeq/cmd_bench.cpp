// `moeq bench --kernel NAME`: device time and effective bandwidth of the GPU kernels, next to
// the device-to-device copy bandwidth measured in the same run (method: bench/README.md).
#include <algorithm>
#include <cmath>
#include <cstring>
#include <cstdio>
#include <functional>
#include <map>
#include <memory>
#include <numeric>
#include <random>
#include <string>
#include <vector>

#include "api/step_plan.hpp"
#include "cuda/driver.hpp"
#include "cuda/elementwise.hpp"
#include "cuda/moe_gemm.hpp"
#include "cuda/routing.hpp"
#include "io/presets.hpp"
#include "moeq/error.hpp"
#include "plan/workspace.hpp"
#include "reference/formats.hpp"
#include "reference/quantize.hpp"
#include "tools/moeq/commands.hpp"
#include "tools/moeq/gemm_timing.hpp"
#include "tools/moeq/layer_timing.hpp"

namespace moeq::cli {
namespace {

using cuda::CUdeviceptr;
using cuda::DeviceBuffer;

struct BenchArgs {
  std::vector<std::string> schemes{"int4-g128", "mxfp4", "fp8-block"};  // for gemm1 / gemm2
  std::vector<std::string> kernels{"all"};
  std::vector<std::string> presets{"qwen3-30b-a3b", "deepseek-v3"};
  std::vector<int64_t> tokens{16, 256, 4096};
  int iterations = 20;
  std::vector<std::string> tiles;  // gemm: "BMxBN/WMxWNxWK/S" overrides; empty = the step's tile (bench_gemm)
  std::vector<std::string> codes{"prepared"};  // gemm: weight code layouts to time
  std::string tuning;  // gemm: a tuning table (JSON) whose tiles replace the planner's where it has the M
  bool no_shipped_tuning = false;  // gemm, layer: the planner's rules instead of the shipped table
  bool no_fp8_tensor_cores = false;  // layer: Options::fp8_tensor_cores = false
  bool fp8_wgmma = false;            // layer: Options::fp8_wgmma
  std::string layout = "auto";       // layer: Options::layout
  int trials = 7;
};

const std::vector<std::string> kKernelNames = {"align", "permute", "reduce", "activation",
                                               "quantize-fp8-token", "quantize-mxfp8", "quantize-mxfp4",
                                               "gemm1", "gemm2", "layer"};

struct Row {
  std::string kernel, preset;
  int64_t tokens;
  double us, bytes;
};

void print_row(const Row& r, double copy_gbs) {
  const double gbs = r.bytes / (r.us * 1e-6) / 1e9;
  std::printf("%-19s %-14s %6lld %10.2f %12.3f %9.1f %7.1f%%\n", r.kernel.c_str(), r.preset.c_str(),
              static_cast<long long>(r.tokens), r.us, r.bytes / 1e6, gbs, 100.0 * gbs / copy_gbs);
  std::fflush(stdout);
}

// Number of input copies to rotate through so one pass touches more than 3x the L2.
int rotation_count(double bytes_per_call, int64_t l2_bytes) {
  return static_cast<int>(std::clamp(std::ceil(3.0 * static_cast<double>(l2_bytes) / std::max(bytes_per_call, 1.0)), 1.0, 8.0));
}

void bench_preset(const BenchArgs& a, const std::vector<std::string>& kernels, const io::Preset& preset, int64_t M,
                  double copy_gbs, int64_t l2_bytes, cuda::CUstream stream) {
  const ExpertsDesc& d = preset.desc;
  const int64_t K = d.hidden_size, I = d.intermediate_size, E = d.num_experts, top_k = d.top_k;
  const int64_t slots = M * top_k;
  std::mt19937 rng(1234 + static_cast<unsigned>(M));
  auto wants = [&](const std::string& k) { return std::find(kernels.begin(), kernels.end(), k) != kernels.end(); };

  const auto ids_host = random_routing(M, top_k, E, rng);
  DeviceBuffer ids = DeviceBuffer::from_host(ids_host);
  std::vector<float> w_host(static_cast<size_t>(slots), 1.0f / static_cast<float>(top_k));
  DeviceBuffer weights = DeviceBuffer::from_host(w_host);
  DeviceBuffer local_ids(slots * 4), offsets((E + 1) * 8), inv(slots * 4), src(slots * 4),
      chunk_counts(cuda::route_chunk_counts_elems(slots, E) * 4);
  cuda::RouteIds route{ids.ptr(), DType::i32, M, top_k, E, 0, E, 0};

  if (wants("align")) {
    const int64_t bm = planner_block_m(d, M);
    const int64_t cap = cuda::align_capacity(slots, E, bm);
    DeviceBuffer sorted(cap * 4), expert_ids(cap / bm * 4), padded(4);
    const double us = time_us([&](int) {
      cuda::map_and_align(route, bm, {local_ids.ptr(), sorted.ptr(), expert_ids.ptr(), padded.ptr(), chunk_counts.ptr()},
                          stream);
    }, a.iterations, a.trials, stream);
    print_row({"align", preset.name, M, us, static_cast<double>(slots * 4 * 2 + cap * 4)}, copy_gbs);
  }
  cuda::permute_indices(route, {local_ids.ptr(), offsets.ptr(), inv.ptr(), src.ptr(), chunk_counts.ptr()}, stream);

  if (wants("permute")) {
    // NOTE: each hidden row is gathered top_k times but comes from DRAM once (L2 serves the
    // rest): the floor is M rows read plus M*top_k rows written.
    const double bytes = static_cast<double>(M * K * 2 + slots * K * 2);
    const int n = rotation_count(bytes, l2_bytes);
    std::vector<DeviceBuffer> hidden, permuted;
    for (int i = 0; i < n; ++i) {
      hidden.push_back(random_bf16(M * K, 1.0f, rng));
      permuted.emplace_back(slots * K * 2);
    }
    const double us = time_us([&](int i) {
      cuda::permute_rows({hidden[i % n].ptr(), K * 2, K * 2, permuted[i % n].ptr(), K * 2}, src.ptr(), offsets.ptr(),
                         E, slots, top_k, stream);
    }, a.iterations, a.trials, stream);
    print_row({"permute", preset.name, M, us, bytes}, copy_gbs);
  }

  if (wants("reduce")) {
    const double bytes = static_cast<double>(slots * K * 2 + M * K * 2 + slots * 8);
    const int n = rotation_count(bytes, l2_bytes);
    std::vector<DeviceBuffer> down, out;
    for (int i = 0; i < n; ++i) {
      down.push_back(random_bf16(slots * K, 1.0f, rng));
      out.emplace_back(M * K * 2);
    }
    const double us = time_us([&](int i) {
      cuda::ReduceArgs r;
      r.down = down[i % n].ptr();
      r.down_row_stride = K;
      r.local_ids = local_ids.ptr();
      r.row_map = inv.ptr();
      r.weights = weights.ptr();
      r.num_tokens = M;
      r.top_k = top_k;
      r.cols = K;
      r.out = out[i % n].ptr();
      r.out_row_stride = K;
      cuda::topk_reduce(r, stream);
    }, a.iterations, a.trials, stream);
    print_row({"reduce", preset.name, M, us, bytes}, copy_gbs);
  }

  if (wants("activation")) {
    const int64_t n13 = d.gemm1_n();
    const double bytes = static_cast<double>(slots * n13 * 2 + slots * I * 2);
    const int n = rotation_count(bytes, l2_bytes);
    std::vector<DeviceBuffer> in, out;
    for (int i = 0; i < n; ++i) {
      in.push_back(random_bf16(slots * n13, 2.0f, rng));
      out.emplace_back(slots * I * 2);
    }
    const double us = time_us([&](int i) {
      cuda::activation(d.activation, d.interleaved_gate_up, DType::bf16, in[i % n].ptr(), slots, I, out[i % n].ptr(), stream);
    }, a.iterations, a.trials, stream);
    print_row({"activation-" + std::string(to_string(d.activation.kind)), preset.name, M, us, bytes}, copy_gbs);
  }

  for (ActFormat f : {ActFormat::fp8_token, ActFormat::mxfp8, ActFormat::mxfp4}) {
    const std::string name = "quantize-" + std::string(to_string(f));
    if (!wants(name)) continue;
    // GEMM1's input in the contiguous layout: the permuted rows [M*top_k, K].
    const double bytes = static_cast<double>(slots * K * 2 + ref::act_code_bytes(f, slots, K) + ref::act_scale_bytes(f, slots, K));
    const int n = rotation_count(bytes, l2_bytes);
    std::vector<DeviceBuffer> in, codes, scales;
    for (int i = 0; i < n; ++i) {
      in.push_back(random_bf16(slots * K, 1.0f, rng));
      codes.emplace_back(std::max<int64_t>(ref::act_code_bytes(f, slots, K), 1));
      scales.emplace_back(std::max<int64_t>(ref::act_scale_bytes(f, slots, K), 1));
    }
    const double us = time_us([&](int i) {
      cuda::quantize_activation(f, DType::bf16, in[i % n].ptr(), K, slots, K, codes[i % n].ptr(), scales[i % n].ptr(), stream);
    }, a.iterations, a.trials, stream);
    print_row({name, preset.name, M, us, bytes}, copy_gbs);
  }
}

// One MoE GEMM (indexed layout) over the weights of the distinct experts the routing touches,
// rotated over enough weight copies that every pass reads DRAM.
// The tile: `tile_text` (--tile), else the indexed step's table entry at M (the --tuning table, else the one shipped
// for the layer and GPU unless --no-shipped-tuning: api::effective_tuning, as `--kernel layer` plans), else the
// planner's. So by default a GEMM times the tile the whole step runs at that M.
void bench_gemm(const BenchArgs& a, const io::Preset& preset, const std::string& scheme, bool second, int64_t M,
                const std::string& tile_text, const TuningTable& tuning, const std::string& codes, double copy_gbs,
                int64_t l2_bytes, cuda::CUstream stream) {
  const CodeLayout code_layout = parse_codes(codes);
  ExpertsDesc d = preset.desc;
  io::apply_scheme(scheme, d);
  Options o;
  o.tuning = tuning;
  o.shipped_tuning = !a.no_shipped_tuning;
  o.layout = Layout::indexed;
  static const cuda::DeviceInfo device = cuda::current_device_info();
  const TuningTable table = api::effective_tuning(d, o, &device);
  const plan::PlanShape shape = api::step_shape(d, o, table, &device, M, 0, false);
  const TuningEntry* tuned = tile_text.empty() ? shape.tuned : nullptr;
  const cuda::GemmTile tile =
      !tile_text.empty() ? cuda::parse_gemm_tile(tile_text)
      : tuned != nullptr ? cuda::parse_gemm_tile(second ? tuned->gemm2_tile : tuned->gemm1_tile)
                         : planner_gemm_tile(d, second, M);
  const char* tile_source = !tile_text.empty() ? "--tile"
                            : tuned == nullptr   ? "planner"
                            : a.tuning.empty()   ? "shipped table"
                                                 : "--tuning";
  const GemmTiming t = time_moe_gemm(d, second, M, tile, code_layout == CodeLayout::prepared, l2_bytes, a.iterations, a.trials, stream);
  const double gbs = t.bytes / (t.us * 1e-6) / 1e9;
  const double sized_gbs = sized_copy_gbs(t.bytes, l2_bytes, a.iterations, a.trials, stream);
  std::printf("%-6s %-14s %-10s %6lld %10.2f %10.1f %9.1f %7.1f%% %7.1f%% %9.1f  tile %s (%s), %s, %d weight copies, "
              "sized copy %.0f GB/s\n",
              second ? "gemm2" : "gemm1", preset.name.c_str(), scheme.c_str(), static_cast<long long>(M), t.us,
              t.bytes / 1e6, gbs, 100.0 * gbs / copy_gbs, 100.0 * gbs / sized_gbs, t.flops / (t.us * 1e-6) / 1e12,
              tile.to_string().c_str(), tile_source, codes.c_str(), t.weight_copies, sized_gbs);
  std::fflush(stdout);
}

// The whole experts step (Experts::apply) under a CUDA graph; `tuning` replaces the planner's
// picks where it covers M.
void bench_layer(const BenchArgs& a, const io::Preset& preset, const std::string& scheme, int64_t M,
                 const TuningTable& tuning, const std::string& codes, double copy_gbs, int64_t l2_bytes,
                 cuda::CUstream stream) {
  const CodeLayout code_layout = parse_codes(codes);
  ExpertsDesc d = preset.desc;
  io::apply_scheme(scheme, d);
  Options o;
  o.tuning = tuning;
  o.shipped_tuning = !a.no_shipped_tuning;
  o.fp8_tensor_cores = !a.no_fp8_tensor_cores;
  o.fp8_wgmma = a.fp8_wgmma;
  const auto layout = parse_layout(a.layout);
  if (!layout || *layout == Layout::masked) throw Error("--layout " + a.layout + " is not auto, indexed or contiguous");
  o.layout = *layout;
  o.backend = Backend::cuda;
  if (const auto reasons = can_implement(d, o); !reasons.empty()) {
    std::printf("%-6s %-14s %-10s %6lld  unsupported: %s\n", "layer", preset.name.c_str(), scheme.c_str(),
                static_cast<long long>(M), reasons.front().c_str());
    return;
  }
  const LayerTiming t = time_experts_layer(d, o, M, l2_bytes, a.iterations, a.trials, stream,
                                           code_layout);
  const double gbs = t.bytes / (t.us * 1e-6) / 1e9;
  std::printf("%-6s %-14s %-10s %6lld %10.2f %10.1f %9.1f %7.1f%% %9.1f  %s, %s codes, %d weight copies\n", "layer",
              preset.name.c_str(), scheme.c_str(), static_cast<long long>(M), t.us, t.bytes / 1e6, gbs,
              100.0 * gbs / copy_gbs, t.flops / (t.us * 1e-6) / 1e12, t.plan.c_str(), codes.c_str(), t.weight_copies);
  std::fflush(stdout);
}

int run_bench(const BenchArgs& a) {
  const TuningTable tuning = a.tuning.empty() ? TuningTable{} : TuningTable::load(a.tuning);
  std::vector<std::string> kernels;
  for (const auto& k : a.kernels) {
    if (k == "all") {
      kernels = kKernelNames;
      break;
    }
    if (std::find(kKernelNames.begin(), kKernelNames.end(), k) == kKernelNames.end()) {
      std::string known;
      for (const auto& n : kKernelNames) known += " " + n;
      throw Error("--kernel " + k + " is unknown; known:" + known + " all");
    }
    kernels.push_back(k);
  }
  require_at_least("--trials", a.trials, 1);
  require_at_least("--iterations", a.iterations, 1);
  for (const int64_t M : a.tokens) require_at_least("--tokens", M, 1);
  for (const std::string& codes : a.codes) parse_codes(codes);
  require_cuda_device("bench");
  cuda::ensure_context();
  const auto info = cuda::current_device_info();
  cuda::Stream stream;
  const double copy_gbs = copy_bandwidth_gbs(stream.get());
  std::printf("device     %s (sm_%d%d, %d SMs, L2 %lld MB)\n", info.name.c_str(), info.cc_major, info.cc_minor,
              info.num_sms, static_cast<long long>(info.l2_bytes >> 20));
  std::printf("copy       %.1f GB/s (device-to-device, 1 GiB, read + write)\n", copy_gbs);
  std::printf("timing     median of %d trials x %d back-to-back launches (layer: one CUDA graph of them), inputs "
              "rotated past 3x L2\n\n", a.trials, a.iterations);
  const bool any_elementwise = std::any_of(kernels.begin(), kernels.end(), [](const std::string& k) {
    return k.rfind("gemm", 0) != 0 && k != "layer";
  });
  if (any_elementwise) {
    std::printf("%-19s %-14s %6s %10s %12s %9s %8s\n", "kernel", "preset", "M", "time us", "MB moved", "GB/s", "% copy");
    for (const auto& name : a.presets) {
      const io::Preset& preset = io::find_preset(name);
      for (int64_t M : a.tokens) bench_preset(a, kernels, preset, M, copy_gbs, info.l2_bytes, stream.get());
    }
  }
  for (const char* gemm : {"gemm1", "gemm2"}) {
    if (std::find(kernels.begin(), kernels.end(), gemm) == kernels.end()) continue;
    std::printf("\n%-6s %-14s %-10s %6s %10s %10s %9s %8s %8s %9s\n", "gemm", "preset", "scheme", "M", "time us",
                "MB moved", "GB/s", "% copy", "% sized", "TFLOP/s");
    for (const auto& name : a.presets)
      for (const auto& scheme : a.schemes)
        for (int64_t M : a.tokens) {
          const std::vector<std::string> planner_tile{""};
          for (const auto& tile : a.tiles.empty() ? planner_tile : a.tiles)
            for (const auto& codes : a.codes)
              bench_gemm(a, io::find_preset(name), scheme, std::string(gemm) == "gemm2", M, tile, tuning, codes,
                         copy_gbs, info.l2_bytes, stream.get());
        }
  }
  if (std::find(kernels.begin(), kernels.end(), "layer") != kernels.end()) {
    std::printf("\n%-6s %-14s %-10s %6s %10s %10s %9s %8s %9s  plan\n", "layer", "preset", "scheme", "M", "time us",
                "MB moved", "GB/s", "% copy", "TFLOP/s");
    for (const auto& name : a.presets)
      for (const auto& scheme : a.schemes)
        for (int64_t M : a.tokens)
          for (const auto& codes : a.codes)
            if (M > 0)
              bench_layer(a, io::find_preset(name), scheme, M, tuning, codes, copy_gbs, info.l2_bytes, stream.get());
  }
  return 0;
}

}  // namespace

Action add_bench_command(CLI::App& app) {
  auto a = std::make_shared<BenchArgs>();
  CLI::App* cmd = app.add_subcommand("bench", "Time GPU kernels against the copy bandwidth (bench/README.md)");
  cmd->add_option("--kernel", a->kernels, "align permute reduce activation quantize-fp8-token quantize-mxfp8 "
                                          "quantize-mxfp4 gemm1 gemm2 layer, or all")->capture_default_str();
  cmd->add_option("--preset", a->presets, "Model presets")->capture_default_str();
  cmd->add_option("--tokens,-M", a->tokens, "Token counts")->capture_default_str();
  cmd->add_option("--scheme", a->schemes, "Weight schemes of gemm1 / gemm2")->capture_default_str();
  cmd->add_option("--codes", a->codes, "gemm1 / gemm2 / layer: weight code layouts, prepared and/or canonical")
      ->capture_default_str();
  cmd->add_option("--tile", a->tiles, "gemm1 / gemm2: tiles to time instead of the step's, BMxBN/WMxWNxWK/S "
                                      "(e.g. 16x64/1x4x2/8)");
  cmd->add_option("--tuning", a->tuning, "gemm1 / gemm2 / layer: a tuning table (JSON, `moeq tune`) whose tiles replace the "
                                         "planner's at the M it covers");
  cmd->add_flag("--no-shipped-tuning", a->no_shipped_tuning,
               "gemm1 / gemm2 / layer: plan by the planner's rules, not by the tuning table shipped for the layer and GPU");
  cmd->add_flag("--fp8-wgmma", a->fp8_wgmma,
               "layer, FP8 per-token activations on canonical MXFP4 codes: also the e4m3 wgmma body at large M");
  cmd->add_flag("--no-fp8-tensor-cores", a->no_fp8_tensor_cores,
               "layer, FP8 per-token activations: the 16-bit tensor cores everywhere (no e4m3 GEMMs)");
  cmd->add_option("--layout", a->layout, "layer: auto | indexed | contiguous (the layer's token layout)")->capture_default_str();
  cmd->add_option("--iterations", a->iterations, "Launches per timed trial")->capture_default_str();
  cmd->add_option("--trials", a->trials, "Timed trials (the median is reported)")->capture_default_str();
  return [a] { return run_bench(*a); };
}

}  // namespace moeq::cli
