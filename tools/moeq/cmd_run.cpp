// `moeq run`: one experts step on a generated problem (a model preset) or on safetensors files.
#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <limits>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "io/presets.hpp"
#include "io/problem.hpp"
#include "io/problem_file.hpp"
#include "cuda/driver.hpp"
#include "io/device_problem.hpp"
#include "io/safetensors.hpp"
#include "io/verify.hpp"
#include "plan/legality.hpp"
#include "moeq/error.hpp"
#include "moeq/experts.hpp"
#include "reference/oracle.hpp"
#include "reference/routing.hpp"
#include "reference/scalars.hpp"
#include "tools/moeq/commands.hpp"

namespace moeq::cli {
namespace {

struct RunArgs {
  std::string codes = "prepared";  // weight code layout on the GPU
  std::string preset = "qwen3-30b-a3b";
  std::string scheme;
  std::string layout = "auto";
  std::string activation;
  std::string backend = "auto";
  int64_t tokens = 16;
  std::string seed = "0";
  int ep_size = 1;
  int ep_rank = 0;
  int64_t block_m = 0;
  std::string tuning;  // a tuning table (JSON) for Options::tuning
  bool no_shipped_tuning = false;  // Options::shipped_tuning = false
  bool no_fp8_tensor_cores = false;  // Options::fp8_tensor_cores = false
  bool fp8_wgmma = false;            // Options::fp8_wgmma
  bool batch_invariant = false;
  bool f16_accum = false;
  bool check = false;
  int threads = 0;
  std::string weights, inputs, output, save_problem;
};

double seconds_since(std::chrono::steady_clock::time_point t0) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
}

template <typename Parse>
auto parse_or_throw(const std::string& text, const char* what, Parse parse) {
  auto v = parse(text);
  if (!v) throw Error(std::string(what) + " = '" + text + "' is unknown; see `moeq info`");
  return *v;
}

io::HostProblem make_problem(const RunArgs& a, const Options& options) {
  const Layout layout = options.layout;
  if (!a.weights.empty() || !a.inputs.empty()) {
    if (a.weights.empty() || a.inputs.empty()) throw Error("--weights and --inputs go together");
    io::HostProblem p = io::load_problem(a.weights, a.inputs);
    if (layout != Layout::auto_select) p.layout = layout;
    if (p.layout == Layout::masked && !p.is_batched())
      throw Error("layout = masked takes batched input (hidden [E, T, K] and expert_num_tokens), and " + a.inputs +
                  " holds standard input (hidden [M, K], topk_ids); use indexed, contiguous or auto");
    return p;
  }
  ExpertsDesc desc = io::find_preset(a.preset).desc;
  if (!a.scheme.empty()) io::apply_scheme(a.scheme, desc);
  if (!a.activation.empty()) io::apply_activation(a.activation, desc);
  // Refuse before generating: a large preset takes seconds to quantize.
  plan::require_implementable(desc, options);
  // NOTE: the generator takes the layer as global and holds E_g / ep_size experts locally; a preset naming both counts
  // (a rank's share of E_g) must get the matching --ep-size, or it would run with E_g local experts without a word.
  if (desc.num_global_experts > desc.num_experts && desc.num_global_experts != desc.num_experts * a.ep_size)
    throw Error("the preset holds E = " + std::to_string(desc.num_experts) + " of E_g = " +
                std::to_string(desc.num_global_experts) + " experts, but --ep-size = " + std::to_string(a.ep_size) +
                " gives each rank " + std::to_string(desc.num_global_experts / std::max(a.ep_size, 1)) +
                "; give --ep-size " + std::to_string(desc.num_global_experts / desc.num_experts) + " (and --ep-rank)");
  io::GenerateOptions g;
  g.num_tokens = a.tokens;
  g.seed = parse_seed(a.seed);
  g.ep_size = a.ep_size;
  g.ep_rank = a.ep_rank;
  g.batched = layout == Layout::masked;
  g.num_threads = a.threads;
  io::HostProblem p = io::generate_problem(desc, g);
  p.layout = layout;
  return p;
}

// Sum of the values and an FNV-1a hash of the bytes: the sum is readable, the hash exact.
void print_checksum(const char* label, DType dtype, const std::vector<uint8_t>& bytes, int64_t elems) {
  double sum = 0.0, sum_abs = 0.0;
  for (int64_t i = 0; i < elems; ++i) {
    const double v = ref::load_float(dtype, bytes.data(), i);
    sum += v;
    sum_abs += std::fabs(v);
  }
  uint64_t hash = 1469598103934665603ULL;
  for (uint8_t b : bytes) hash = (hash ^ b) * 1099511628211ULL;
  std::printf("%-10s sum %.6e  sum|x| %.6e  fnv1a %016llx\n", label, sum, sum_abs,
              static_cast<unsigned long long>(hash));
}

// Relative Frobenius error and largest element error of `out` against the float64 oracle; whether it is within
// CONTRACT §8.
bool print_check(const io::HostProblem& p, const std::vector<uint8_t>& out) {
  const io::OracleComparison c = io::compare_with_oracle(p, out);
  const bool within = c.within_contract(p.desc.act_format);
  std::printf("check      vs float64 oracle: rel err %.3e, max err %.3e (%.3f%% of max|ref|)%s%s\n", c.rel_err, c.max_err,
              100.0 * c.max_err_fraction, c.finite ? "" : ", NaN/Inf where the oracle has none (or the reverse)",
              within ? "" : "  OUTSIDE CONTRACT §8");
  return within;
}

// Uploads the problem, runs once to load every kernel (compiling on a cold cache), then times
// 10 runs with device events. Returns seconds per run; `out` receives the result.
// The weight codes are prepared on the GPU at upload (moeq::prepare_codes) unless
// --codes canonical.
double apply_on_gpu(const Experts& experts, const io::HostProblem& p, const WorkspaceSizes& ws, std::vector<uint8_t>& out,
                    CodeLayout codes) {
  const io::DeviceProblem d = io::upload_problem(p, codes);
  cuda::DeviceBuffer ws1(std::max<int64_t>(ws.workspace1_bytes, 1)), ws2(std::max<int64_t>(ws.workspace2_bytes, 1));
  cuda::DeviceBuffer out_d(std::max<size_t>(out.size(), 1));
  out_d.fill_bytes(0xFF);
  cuda::Stream stream;
  auto ptr = [](const cuda::DeviceBuffer& b) { return reinterpret_cast<void*>(static_cast<uintptr_t>(b.ptr())); };
  // Values the GPU cannot check without a sync (ids, expert_map, counts) land in an error word,
  // read once after the first run: a bad problem file is an error here as on the CPU backend.
  cuda::DeviceBuffer error_word(4);
  error_word.fill_bytes(0);
  ExpertsInputs inputs = d.inputs;
  inputs.error_word = static_cast<int32_t*>(ptr(error_word));
  const auto t0 = std::chrono::steady_clock::now();
  experts.apply(d.w13, d.w2, inputs, {ptr(out_d), 0}, ptr(ws1), ptr(ws2), stream.get());
  stream.synchronize();
  std::printf("first run  %.3f s (loads the kernels; compiles them on a cold cache)\n", seconds_since(t0));
  int32_t errors = 0;
  error_word.download(&errors, sizeof(errors));
  if (errors != 0) throw Error("the problem's routing is invalid: " + describe_input_errors(errors));
  cuda::Event start, stop;
  constexpr int kRuns = 10;
  start.record(stream.get());
  for (int i = 0; i < kRuns; ++i)
    experts.apply(d.w13, d.w2, d.inputs, {ptr(out_d), 0}, ptr(ws1), ptr(ws2), stream.get());
  stop.record(stream.get());
  stop.synchronize();
  if (!out.empty()) out_d.download(out.data(), out.size());
  return cuda::Event::elapsed_ms(start, stop) / 1000.0 / kRuns;
}

// Two arguments name one file: the same path once resolved, or one file under two names.
bool same_file(const std::string& a, const std::string& b) {
  namespace fs = std::filesystem;
  std::error_code ec;
  if (fs::equivalent(a, b, ec)) return true;
  const fs::path ca = fs::weakly_canonical(a, ec), cb = fs::weakly_canonical(b, ec);
  return !ec && ca == cb;
}

// The files written (-o, --save-problem) are neither read (--weights, --inputs) nor each other: writing one
// over another loses the problem after the step, or the saved problem under the result.
void require_distinct_files(const RunArgs& a) {
  const std::pair<const char*, const std::string*> read[] = {{"--weights", &a.weights}, {"--inputs", &a.inputs}};
  const std::pair<const char*, const std::string*> written[] = {{"--output", &a.output}, {"--save-problem", &a.save_problem}};
  for (const auto& [w_name, w_path] : written) {
    if (w_path->empty()) continue;
    for (const auto& [r_name, r_path] : read)
      if (!r_path->empty() && same_file(*w_path, *r_path))
        throw Error(std::string(w_name) + " = '" + *w_path + "' is the file " + r_name + " reads");
  }
  if (!a.output.empty() && !a.save_problem.empty() && same_file(a.output, a.save_problem))
    throw Error("--output = '" + a.output + "' is the file --save-problem writes");
}

int run(const RunArgs& a) {
  require_distinct_files(a);
  const CodeLayout codes = parse_codes(a.codes);  // on every backend, before the problem is made
  const Layout layout = parse_or_throw(a.layout, "layout", parse_layout);
  Options options;
  options.layout = layout;
  options.backend = parse_or_throw(a.backend, "backend", parse_backend);
  options.batch_invariant = a.batch_invariant;
  options.f16_accum = a.f16_accum;
  options.block_m = a.block_m;
  if (!a.tuning.empty()) options.tuning = TuningTable::load(a.tuning);
  options.shipped_tuning = !a.no_shipped_tuning;
  options.fp8_tensor_cores = !a.no_fp8_tensor_cores;
  options.fp8_wgmma = a.fp8_wgmma;
  options.cpu_threads = a.threads;

  auto t0 = std::chrono::steady_clock::now();
  io::HostProblem p = make_problem(a, options);
  const double setup_s = seconds_since(t0);
  options.layout = p.layout;
  const Experts experts(p.desc, options);
  if (options.backend == Backend::auto_select) {
    if (experts.backend() == Backend::cuda) {
      std::printf("backend    auto: CUDA device found, using the GPU\n");
    } else {
      Options cuda_options = options;
      cuda_options.backend = Backend::cuda;
      const auto why = plan::cuda_reasons(p.desc, cuda_options);
      std::printf("backend    auto: using the CPU reference (%s)\n", why.empty() ? "" : why.front().c_str());
    }
  }
  const ExpertsDesc& d = p.desc;

  const bool batched = p.is_batched();
  const int64_t T = p.max_tokens_per_expert;
  const WorkspaceSizes ws = experts.workspace_bytes(p.num_tokens, batched ? T : 0);
  std::vector<uint8_t> ws1(static_cast<size_t>(ws.workspace1_bytes)), ws2(static_cast<size_t>(ws.workspace2_bytes));
  const int64_t out_elems = p.output_rows() * d.hidden_size;
  std::vector<uint8_t> out(static_cast<size_t>(dtype_bytes(d.act_dtype, out_elems)));

  std::printf("problem    %s\n", d.to_string().c_str());
  std::printf("tokens     M = %lld%s, layout %s, backend %s\n", static_cast<long long>(p.num_tokens),
              batched ? (", batched T = " + std::to_string(T)).c_str() : "",
              std::string(to_string(experts.layout_for(p.num_tokens, batched))).c_str(),
              std::string(to_string(experts.backend())).c_str());
  std::printf("workspace  %.2f MB + %.2f MB\n", ws.workspace1_bytes / 1e6, ws.workspace2_bytes / 1e6);
  if (!a.save_problem.empty()) {
    io::save_problem(a.save_problem, p);
    std::printf("saved      problem to %s\n", a.save_problem.c_str());
  }

  double apply_s = 0.0;
  if (experts.backend() == Backend::cuda) {
    apply_s = apply_on_gpu(experts, p, ws, out, codes);
  } else {
    t0 = std::chrono::steady_clock::now();
    experts.apply(p.w13->view(), p.w2->view(), p.inputs(), {out.data(), 0}, ws1.data(), ws2.data());
    apply_s = seconds_since(t0);
  }

  // Rows that reached a local expert, for the throughput figure.
  int64_t routed_rows = 0;
  if (batched) {
    for (int32_t n : p.expert_num_tokens) routed_rows += n;
  } else if (p.num_tokens > 0) {
    const auto local = ref::to_local_expert_ids(p.topk_ids.data(), p.topk_ids_dtype, p.num_tokens, d.top_k,
                                                d.global_experts(), p.expert_map.empty() ? nullptr : p.expert_map.data(),
                                                d.num_experts);
    for (int32_t e : local) routed_rows += e >= 0;
  }
  const double flops = 2.0 * static_cast<double>(routed_rows) *
                       static_cast<double>(d.gemm1_n() * d.hidden_size + d.hidden_size * d.intermediate_size);
  // NOTE: a GPU step takes tens to hundreds of microseconds, the CPU reference seconds.
  char apply_text[32];
  if (apply_s < 0.1) std::snprintf(apply_text, sizeof(apply_text), "%.1f us", apply_s * 1e6);
  else std::snprintf(apply_text, sizeof(apply_text), "%.3f s", apply_s);
  std::printf("time       setup %.3f s, apply %s (%.2f GFLOP/s over %lld routed rows)\n", setup_s, apply_text,
              apply_s > 0 ? flops / apply_s / 1e9 : 0.0, static_cast<long long>(routed_rows));
  print_checksum(batched ? "out[E,T,K]" : "out", d.act_dtype, out, out_elems);
  if (batched && !p.topk_ids.empty()) {
    // Weight and reduce back to [M, K] so the checksum compares with the other layouts.
    std::vector<uint8_t> combined(static_cast<size_t>(dtype_bytes(d.act_dtype, p.num_tokens * d.hidden_size)));
    combine_batched(d, p.inputs(), out.data(), {combined.data(), 0});
    print_checksum("combined", d.act_dtype, combined, p.num_tokens * d.hidden_size);
  }
  const bool checked_ok = !a.check || print_check(p, out);

  if (!a.output.empty()) {
    io::SafetensorsFile file;
    file.metadata = io::desc_metadata(d, experts.layout_for(p.num_tokens, batched));
    io::Tensor t;
    t.name = "out";
    t.dtype = d.act_dtype;
    t.shape = batched ? std::vector<int64_t>{d.num_experts, T, d.hidden_size}
                      : std::vector<int64_t>{p.num_tokens, d.hidden_size};
    t.data = std::move(out);
    file.add(std::move(t));
    io::write_safetensors(a.output, file);
    std::printf("wrote      %s\n", a.output.c_str());
  }
  return checked_ok ? 0 : 1;
}

}  // namespace

Action add_run_command(CLI::App& app) {
  auto a = std::make_shared<RunArgs>();
  CLI::App* cmd = app.add_subcommand("run", "Run one experts step (default: Qwen3-30B-A3B, INT4-g128 x bf16, M = 16)");
  cmd->add_option("--preset", a->preset, "Model preset (see `moeq info`)")->capture_default_str();
  cmd->add_option("--scheme", a->scheme, "W[:A], e.g. int4-g128:bf16, mxfp4:fp8-token (default: the preset's)");
  cmd->add_option("--layout", a->layout, "auto | indexed | contiguous | masked")->capture_default_str();
  cmd->add_option("--activation", a->activation, "Override the preset's activation (silu, gelu, ...)");
  cmd->add_option("--tokens,-M", a->tokens, "Tokens M")->capture_default_str();
  cmd->add_option("--backend", a->backend, "auto | cpu | cuda")->capture_default_str();
  cmd->add_option("--codes", a->codes, "GPU weight code layout: prepared (moeq::prepare_codes at load) | canonical")
      ->capture_default_str();
  cmd->add_option("--seed", a->seed, "Seed of the synthetic problem")->capture_default_str();
  cmd->add_option("--ep-size", a->ep_size, "Expert-parallel ranks (this rank holds E_g/ep-size experts)");
  cmd->add_option("--ep-rank", a->ep_rank, "This rank");
  cmd->add_option("--block-m", a->block_m, "Indexed-layout alignment (0 = planner's choice)");
  cmd->add_option("--tuning", a->tuning, "Tuning table (JSON, `moeq tune`): block size and GEMM tiles by M");
  cmd->add_flag("--no-shipped-tuning", a->no_shipped_tuning,
               "GPU: plan by the planner's rules, not by the tuning table shipped for the layer and GPU");
  cmd->add_flag("--fp8-wgmma", a->fp8_wgmma,
               "GPU, FP8 per-token activations on canonical MXFP4 codes: also the e4m3 wgmma body at large M");
  cmd->add_flag("--no-fp8-tensor-cores", a->no_fp8_tensor_cores,
               "GPU, FP8 per-token activations: the 16-bit tensor cores everywhere (no e4m3 GEMMs)");
  cmd->add_flag("--batch-invariant", a->batch_invariant, "Bit-identical rows whatever the batch");
  cmd->add_flag("--f16-accum", a->f16_accum, "fp16 accumulation (f16 output only)");
  cmd->add_flag("--check", a->check, "Compare the result with the float64 oracle (exit 1 outside CONTRACT §8)");
  cmd->add_option("--threads", a->threads, "Threads for problem generation and the CPU backend's GEMMs (0 = all cores)");
  CLI::Option* weights =
      cmd->add_option("--weights", a->weights, "Layer weights and metadata (safetensors; docs/file-format.md)");
  cmd->add_option("--inputs", a->inputs, "Inputs: hidden, topk_ids, topk_weights, ... (may be the weights file)");
  cmd->add_option("--output,-o", a->output, "Write the result tensor 'out' to this safetensors file");
  cmd->add_option("--save-problem", a->save_problem, "Write the problem (weights + inputs) to this file");
  // NOTE: a problem read from files has its own layer and tokens; generator options would be ignored.
  for (const char* generator : {"--preset", "--scheme", "--activation", "--tokens", "--seed", "--ep-size", "--ep-rank"})
    weights->excludes(cmd->get_option(generator));
  return [a] { return run(*a); };
}

}  // namespace moeq::cli
