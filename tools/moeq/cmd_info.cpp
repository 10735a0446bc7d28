// `moeq info`: what moeq supports, and whether a given combination is legal (and why not).
#include <cstdio>
#include <string>

#include "cuda/driver.hpp"
#include "io/presets.hpp"
#include "moeq/experts.hpp"
#include "tools/moeq/commands.hpp"

namespace moeq::cli {
namespace {

struct InfoArgs {
  std::string preset;
  std::string scheme;
  std::string activation;
  std::string layout;
  bool f16_accum = false;
};

void print_catalogue() {
  std::printf("moeq %s\n\nweight formats:", MOEQ_VERSION);
  for (auto w : all_values<WeightFormat>()) std::printf(" %s", std::string(to_string(w)).c_str());
  std::printf("\nactivation formats: bf16/f16 (16-bit)");
  for (auto a : all_values<ActFormat>())
    if (a != ActFormat::none) std::printf(" %s", std::string(to_string(a)).c_str());
  std::printf("\n\nsupported (weight, activation) pairs (%zu):\n", supported_pairs().size());
  for (const auto& p : supported_pairs())
    std::printf("  %-12s x %s\n", std::string(to_string(p.weight)).c_str(),
                p.act == ActFormat::none ? "bf16/f16" : std::string(to_string(p.act)).c_str());
  std::printf("\nlayouts:");
  for (auto l : all_values<Layout>()) std::printf(" %s", std::string(to_string(l)).c_str());
  std::printf("\nactivations:");
  for (auto a : all_values<Activation>()) std::printf(" %s", std::string(to_string(a)).c_str());
  std::string why;
  const bool have_gpu = cuda::device_count() > 0;
  if (!have_gpu) cuda::driver_available(&why);
  std::printf("\nbackends: cpu (reference) | cuda (%s) | auto\n\npresets:\n",
              have_gpu ? "a CUDA device is present" : ("no CUDA device: " + why).c_str());
  for (const auto& p : io::presets())
    std::printf("  %-14s %s (default scheme %s)\n", p.name.c_str(), p.description.c_str(), p.default_scheme.c_str());
}

int check_combination(const InfoArgs& a) {
  ExpertsDesc desc = io::find_preset(a.preset.empty() ? "tiny" : a.preset).desc;
  if (!a.scheme.empty()) io::apply_scheme(a.scheme, desc);
  if (!a.activation.empty()) io::apply_activation(a.activation, desc);
  Options options;
  options.f16_accum = a.f16_accum;
  if (!a.layout.empty()) {
    auto layout = parse_layout(a.layout);
    if (!layout) {
      std::printf("layout '%s' is unknown\n", a.layout.c_str());
      return 1;
    }
    options.layout = *layout;
  }
  const auto reasons = can_implement(desc, options);
  std::printf("%s\n%s\n", desc.to_string().c_str(), options.to_string().c_str());
  if (reasons.empty()) {
    std::printf("legal: yes\n");
    return 0;
  }
  std::printf("legal: no\n");
  for (const auto& r : reasons) std::printf("  - %s\n", r.c_str());
  return 1;
}

}  // namespace

Action add_info_command(CLI::App& app) {
  auto args = std::make_shared<InfoArgs>();
  CLI::App* cmd = app.add_subcommand(
      "info", "List formats, the 16 pairs, layouts, activations and presets; with a combination, say whether it is "
              "legal (exit 0) or why not (exit 1)");
  cmd->add_option("--preset", args->preset, "Model preset (default tiny when checking a combination)");
  cmd->add_option("--scheme", args->scheme, "W[:A], e.g. int4-g128:bf16, mxfp4:fp8-token");
  cmd->add_option("--activation", args->activation, "silu, gelu, swiglu-oai, relu2-no-mul, ...");
  cmd->add_option("--layout", args->layout, "auto, indexed, contiguous, masked");
  cmd->add_flag("--f16-accum", args->f16_accum, "fp16 accumulation");
  return [args] {
    if (args->preset.empty() && args->scheme.empty() && args->activation.empty() && args->layout.empty() &&
        !args->f16_accum) {
      print_catalogue();
      return 0;
    }
    return check_combination(*args);
  };
}

}  // namespace moeq::cli
