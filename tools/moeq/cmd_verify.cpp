// `moeq verify`: the GPU against the CPU reference over formats x layouts x activations x
// shapes; a pass/fail table with the measured errors; non-zero exit on any failure.
#include <cstdio>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "cuda/driver.hpp"
#include "io/presets.hpp"
#include "io/verify.hpp"
#include "moeq/error.hpp"
#include "moeq/tuning.hpp"
#include "tools/moeq/commands.hpp"

namespace moeq::cli {
namespace {

struct VerifyArgs {
  std::string preset = "tiny";
  std::vector<std::string> schemes;      // default: every weight format with 16-bit activations
  std::vector<std::string> layouts{"indexed", "contiguous", "masked"};
  std::vector<std::string> activations{"silu", "swiglu-oai", "gelu-no-mul"};
  // 300: 129 rows per expert of the tiny preset, the 128-row (warp-specialized wgmma) blocks.
  std::vector<int64_t> tokens{1, 7, 129, 300};
  std::string seed = "0";
  std::vector<std::string> codes{"prepared", "canonical"};
  std::string tuning;  // a tuning table (JSON, `moeq tune`) in place of the shipped one; empty: the shipped one
  bool fp8_wgmma = false;  // Options::fp8_wgmma
};

int run_verify(const VerifyArgs& a) {
  const uint64_t seed = parse_seed(a.seed);
  std::vector<CodeLayout> code_layouts;
  for (const std::string& codes : a.codes) code_layouts.push_back(parse_codes(codes));
  // A standard batch serves indexed, contiguous and auto; masked takes a batched one.
  std::vector<std::pair<std::string, Layout>> standard_layouts, batched_layouts;
  for (const std::string& name : a.layouts) {
    const auto layout = parse_layout(name);
    if (!layout) throw Error("--layout = '" + name + "' is unknown (indexed, contiguous, masked or auto)");
    (*layout == Layout::masked ? batched_layouts : standard_layouts).emplace_back(name, *layout);
  }
  // The table is read before the GPU is looked for: a bad path is an error on any machine.
  Options options;
  if (!a.tuning.empty()) options.tuning = TuningTable::load(a.tuning);
  options.fp8_wgmma = a.fp8_wgmma;
  require_cuda_device("verify");
  std::vector<std::string> schemes = a.schemes;
  if (schemes.empty()) schemes = {"mxfp4", "nvfp4", "mxfp8", "fp8-channel", "fp8-block", "int4-g128", "int4-g64-zp", "int8-ch"};
  std::printf("%-6s %-56s %-11s %6s %-9s %10s %10s\n", "result", "layer", "layout", "M", "codes", "rel err", "max err %");
  int failed = 0, total = 0;
  for (const auto& scheme : schemes)
    for (const auto& act : a.activations)
      for (int64_t m : a.tokens)
        for (const auto* layouts : {&standard_layouts, &batched_layouts}) {
          if (layouts->empty()) continue;
          io::VerifyCase c;
          c.desc = io::find_preset(a.preset).desc;
          io::apply_scheme(scheme, c.desc);
          io::apply_activation(act, c.desc);
          // Exercise the interleaved row order where gpt-oss uses it.
          c.desc.interleaved_gate_up = c.desc.activation.kind == Activation::swiglu_oai;
          c.layout = layouts->front().second;
          c.num_tokens = m;
          c.seed = seed + static_cast<uint64_t>(m);
          c.codes = code_layouts.front();
          // PERF: one problem and oracle per input kind, shared by its layouts and code layouts (the
          // same bytes each case generated for itself before): a large layer's generation and float64
          // oracle took most of a case's seconds.
          const io::GpuVerifier verifier(c);
          for (size_t i = 0; i < code_layouts.size(); ++i)
            for (const auto& [layout_name, layout] : *layouts) {
              const io::VerifyResult r = verifier.run_as(options, layout, code_layouts[i]);
              ++total;
              failed += !r.passed;
              std::printf("%-6s %-56s %-11s %6lld %-9s %10.3e %9.3f%%\n", r.passed ? "pass" : "FAIL",
                          c.desc.to_string().c_str(), layout_name.c_str(), static_cast<long long>(m),
                          a.codes[i].c_str(), r.error.rel_err, 100.0 * r.error.max_err_fraction);
              std::fflush(stdout);
            }
        }
  std::printf("\nverify: %d passed, %d failed\n", total - failed, failed);
  return failed == 0 ? 0 : 1;
}

}  // namespace

Action add_verify_command(CLI::App& app) {
  auto a = std::make_shared<VerifyArgs>();
  CLI::App* cmd = app.add_subcommand("verify", "GPU against the CPU reference over formats x layouts x activations x shapes");
  cmd->add_option("--preset", a->preset, "Model preset")->capture_default_str();
  cmd->add_option("--scheme", a->schemes, "Schemes (default: every weight format, 16-bit activations)");
  cmd->add_option("--layout", a->layouts, "Layouts")->capture_default_str();
  cmd->add_option("--activation", a->activations, "Activations")->capture_default_str();
  cmd->add_option("--tokens,-M", a->tokens, "Token counts")->capture_default_str();
  cmd->add_option("--seed", a->seed, "Seed")->capture_default_str();
  cmd->add_option("--tuning", a->tuning,
                  "A tuning table (JSON, `moeq tune`) in place of the shipped one (M it does not cover: the planner's rules)");
  cmd->add_flag("--fp8-wgmma", a->fp8_wgmma,
               "Options::fp8_wgmma: canonical MXFP4 x FP8 per token on the e4m3 wgmma body where a tile admits it");
  cmd->add_option("--codes", a->codes, "Weight code layouts: prepared (moeq::prepare_codes), canonical")
      ->capture_default_str();
  return [a] { return run_verify(*a); };
}

}  // namespace moeq::cli
