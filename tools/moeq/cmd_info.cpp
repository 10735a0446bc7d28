// `moeq info`: what moeq supports, whether a given combination is legal (and why not), and with -M its CUDA plan.
#include <cstdio>
#include <string>
#include <vector>

#include "api/step_plan.hpp"
#include "api/validate.hpp"
#include "cuda/driver.hpp"
#include "io/presets.hpp"
#include "moeq/experts.hpp"
#include "moeq/tuning.hpp"
#include "plan/legality.hpp"
#include "plan/workspace.hpp"
#include "tools/moeq/commands.hpp"

namespace moeq::cli {
namespace {

struct InfoArgs {
  std::string preset;
  std::string scheme;
  std::string activation;
  std::string layout;
  bool f16_accum = false;
  // -M: the plan of each M on a CUDA device (the one present, or --arch / --sms).
  std::vector<int64_t> tokens;
  std::string arch;
  int num_sms = 0;
  bool arch_given = false, sms_given = false;  // so that `--arch ''` or `--sms 0` is refused, not taken as unset
  std::string tuning;
  bool no_shipped_tuning = false;
  bool fp8_wgmma = false;
};

// The device -M plans for: the one present unless --arch or --sms say otherwise; without one, an H200's
// (sm_90a, 132 SMs) for what --arch and --sms leave open.
cuda::DeviceInfo planning_device(const InfoArgs& a, std::string* note) {
  cuda::DeviceInfo device;
  const bool present = cuda::device_count() > 0;
  if (present) {
    device = cuda::process_device_info();
  } else {
    device.cc_major = 9;
    device.num_sms = 132;
  }
  if (a.arch_given) {
    const jit::Arch arch = parse_arch(a.arch);
    device.cc_major = arch.sm / 10;
    device.cc_minor = arch.sm % 10;
  }
  if (a.sms_given && a.num_sms <= 0) throw Error("--sms = " + std::to_string(a.num_sms) + " must be positive");
  if (a.sms_given) device.num_sms = a.num_sms;
  const bool overridden = a.arch_given || a.sms_given;
  if (present)
    *note = device.name + (overridden ? ", as --arch / --sms change it" : "");
  else
    *note = std::string("no CUDA device") + (!a.arch_given || !a.sms_given ? "; --arch and --sms default to an H200's" : "");
  return device;
}

void print_plans(const InfoArgs& a, const ExpertsDesc& desc, const Options& options) {
  if (options.layout == Layout::masked)
    throw Error("-M plans standard input (M tokens); the masked layout's batched input is sized by T, not M");
  std::string note;
  const cuda::DeviceInfo device = planning_device(a, &note);
  const TuningTable tuning = api::effective_tuning(desc, options, &device);
  std::printf("\nplan on sm_%d%d with %d SMs (%s); tuning: %s\n", device.cc_major, device.cc_minor, device.num_sms,
              note.c_str(),
              tuning.empty()                ? "none, the planner's rules"
              : !options.tuning.empty()     ? ("--tuning " + a.tuning).c_str()
                                            : ("shipped table " + tuning.arch + " " + tuning.layer).c_str());
  for (const int64_t M : a.tokens) {
    const plan::PlanShape shape = api::step_shape(desc, options, tuning, &device, M, 0, false);
    std::printf("M = %lld (valid_shape_m %lld): layout %s", static_cast<long long>(M),
                static_cast<long long>(plan::valid_shape_m(desc, M)), std::string(to_string(shape.layout)).c_str());
    if (shape.layout == Layout::indexed) std::printf(", block_m %lld", static_cast<long long>(shape.block_m));
    if (shape.tuned != nullptr)
      std::printf(", table entry (%lld, %lld]\n", static_cast<long long>(shape.tuned->min_m),
                  static_cast<long long>(shape.tuned->max_m));
    else
      std::printf(", the planner's rules\n");
    std::printf("%s", api::step_gemms_text(desc, shape, device).c_str());
  }
}

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
  options.fp8_wgmma = a.fp8_wgmma;
  options.shipped_tuning = !a.no_shipped_tuning;
  if (!a.tuning.empty()) options.tuning = TuningTable::load(a.tuning);
  if (!a.layout.empty()) {
    auto layout = parse_layout(a.layout);
    if (!layout) {
      throw Error("--layout = '" + a.layout + "' is unknown; see `moeq info`");
    }
    options.layout = *layout;
  }
  const auto reasons = can_implement(desc, options);
  // -M's counts and device, for a legal layer (the counts' check divides by top_k), before anything is printed.
  if (reasons.empty() && !a.tokens.empty()) {
    for (const int64_t M : a.tokens) api::validate_token_counts(desc, M, 0, false, "-M");
    std::string note;
    planning_device(a, &note);
  }
  std::printf("%s\n%s\n", desc.to_string().c_str(), options.to_string().c_str());
  if (reasons.empty()) {
    std::printf("legal: yes\n");
    if (!a.tokens.empty()) {
      if (const auto reasons = plan::cuda_kernel_reasons(desc, options); !reasons.empty()) {
        std::printf("no CUDA plan: %s\n", reasons.front().c_str());
        return 1;
      }
      print_plans(a, desc, options);
    }
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
  CLI::Option* tokens = cmd->add_option(
      "-M,--tokens", args->tokens,
      "Print the CUDA plan of these token counts: layout, block size, tuning entry, each GEMM's tile and input");
  // NOTE: these planning options shape only -M's plans: given alone, they would be read by nothing.
  cmd->add_option("--arch", args->arch, "-M plans for sm_80 | sm_89 | sm_90 | sm_90a (default: the device's, else sm_90a; sm_90 and sm_90a "
                  "plan alike: a compute capability 9.0 device runs sm_90a kernels)")
      ->needs(tokens);
  cmd->add_option("--sms", args->num_sms, "-M plans for this many SMs (default: the device's, else 132)")
      ->needs(tokens);
  cmd->add_option("--tuning", args->tuning,
                  "Check this tuning table (JSON, `moeq tune`) against the layer; -M plans with it");
  cmd->add_flag("--no-shipped-tuning", args->no_shipped_tuning, "-M plans with the planner's rules, not the shipped table")
      ->needs(tokens);
  cmd->add_flag("--fp8-wgmma", args->fp8_wgmma, "Options::fp8_wgmma (the e4m3 wgmma body for canonical MXFP4 codes)")
      ->needs(tokens);
  return [args, cmd] {
    args->arch_given = cmd->count("--arch") > 0;
    args->sms_given = cmd->count("--sms") > 0;
    if (args->preset.empty() && args->scheme.empty() && args->activation.empty() && args->layout.empty() &&
        !args->f16_accum && args->tokens.empty() && args->tuning.empty()) {
      print_catalogue();
      return 0;
    }
    return check_combination(*args);
  };
}

}  // namespace moeq::cli
