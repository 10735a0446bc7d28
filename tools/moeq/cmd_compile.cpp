// `moeq compile`: warm the kernel cache for a model's layer ahead of serving, and
// `moeq cache info|clear`.
#include <chrono>
#include <cstdio>
#include <memory>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "common/parallel.hpp"
#include "cuda/driver.hpp"
#include "cuda/layer_kernels.hpp"
#include "cuda/moe_gemm.hpp"
#include "io/presets.hpp"
#include "jit/compiler.hpp"
#include "jit/nvrtc.hpp"
#include "moeq/error.hpp"
#include "plan/legality.hpp"
#include "plan/tuning.hpp"
#include "tools/moeq/commands.hpp"

namespace moeq::cli {
namespace {

struct CompileArgs {
  std::string preset = "qwen3-30b-a3b";
  std::string scheme;
  std::string activation;  // "" = the preset's
  std::string arch;  // "" = the device's, else sm_80 / sm_89 / sm_90a
  std::vector<std::string> tiles;  // extra GEMM tiles (BMxBN/WMxWNxWK/S), or "candidates"
  std::string tuning;              // a tuning table whose tiles are compiled too
  int jobs = 0;                    // compile threads; 0 = one per hardware thread
  bool list_tiles = false;         // print the --tile tiles (candidates resolved for the layer), compile nothing
  // The weights the kernels are for (cuda::GemmWeightsKind, both GEMMs): "both", or one value each.
  std::string codes = "both";    // prepared | canonical
  std::string mx_word = "both";  // on | off (WeightView::mx_scales_at_most_two)
  std::string scales = "both";   // aligned | unaligned (4-byte)
};

// `--codes` / `--mx-word` / `--scales` as a GemmWeightsKind field: unset for "both", else whether it is `yes`.
std::optional<bool> kind_field(const std::string& option, const std::string& value, const char* yes, const char* no) {
  if (value == "both") return std::nullopt;
  if (value == yes) return true;
  if (value == no) return false;
  throw Error(option + " = '" + value + "' is not both, " + yes + " or " + no);
}

// The GEMM tiles of `--tile`: texts, each legal for the layer's GEMM1 (as cuda::layer_kernel_specs requires, else
// moeq::Error naming why), or "candidates" for the tuning candidates legal for both of its GEMMs (those `moeq tune`
// searches; e.g. the 512-channel tiles take MX weights only). Each tile once, in the order first named
// ("candidates" and a tile among them name it twice).
std::vector<cuda::GemmTile> extra_tiles(const std::vector<std::string>& texts, const ExpertsDesc& desc) {
  std::vector<cuda::GemmTile> tiles;
  std::set<std::string> seen;
  const auto add = [&](const cuda::GemmTile& tile) {
    if (seen.insert(tile.to_string()).second) tiles.push_back(tile);
  };
  for (const auto& text : texts) {
    if (text == "candidates") {
      for (const auto& t : cuda::layer_tiles_legal_for(desc, cuda::gemm_tile_candidates())) add(t);
    } else {
      const cuda::GemmTile tile = cuda::parse_gemm_tile(text);
      if (const auto reasons = cuda::gemm_tile_reasons(tile, desc.w13()); !reasons.empty()) throw Error(reasons.front());
      add(tile);
    }
  }
  return tiles;
}

int run_compile(const CompileArgs& a) {
  if (a.jobs < 0) throw Error("--jobs = " + std::to_string(a.jobs) + " must be >= 0 (0: one per hardware thread)");
  ExpertsDesc desc = io::find_preset(a.preset).desc;
  if (!a.scheme.empty()) io::apply_scheme(a.scheme, desc);
  if (!a.activation.empty()) io::apply_activation(a.activation, desc);
  Options options;
  if (!a.tuning.empty()) options.tuning = TuningTable::load(a.tuning);
  plan::require_implementable(desc, options);
  const std::vector<cuda::GemmTile> tiles = extra_tiles(a.tiles, desc);
  cuda::GemmWeightsKind kind;
  kind.prepared_codes = kind_field("--codes", a.codes, "prepared", "canonical");
  kind.mx_scales_at_most_two = kind_field("--mx-word", a.mx_word, "on", "off");
  kind.unaligned_scales = kind_field("--scales", a.scales, "unaligned", "aligned");
  if (kind.mx_scales_at_most_two.value_or(false) && desc.w13().scale_dtype != DType::ue8m0)
    throw Error("--mx-word on: " + std::string(to_string(desc.weight_format)) +
                " weights have no MX scales (WeightView::mx_scales_at_most_two is for MX formats)");
  if (a.list_tiles) {
    // NOTE: for scripts (scripts/device/warm_parallel.sh): one tile a line, nothing else.
    for (const cuda::GemmTile& tile : tiles) std::printf("%s\n", tile.to_string().c_str());
    return 0;
  }
  std::string why;
  if (!jit::nvrtc_available(&why)) throw Error("moeq compile needs NVRTC: " + why);
  jit::Arch arch;
  if (!a.arch.empty()) {
    arch = parse_arch(a.arch);
  } else if (cuda::device_count() > 0) {
    arch = jit::current_arch();
  } else {
    throw Error("no CUDA device to read the architecture from; give --arch sm_90a (or sm_80, sm_89)");
  }
  auto& cache = jit::kernel_cache();
  if (!cache.cache().disk_enabled())
    throw Error("the disk cache is off (MOEQ_DISABLE_CACHE): moeq compile would write nothing for a later process to load");
  std::printf("layer      %s\narch       %s\ncache      %s\n\n", desc.to_string().c_str(), jit::to_string(arch).c_str(),
              cache.cache().info().dir.c_str());
  // NOTE: the cubins run only on devices of this architecture: where those run the wgmma tiles themselves, no
  // mma.sync stand-ins.
  cuda::DeviceInfo target;
  target.cc_major = arch.sm / 10;
  target.cc_minor = arch.sm % 10;
  cuda::LayerKernelScope scope;
  scope.w13 = kind;
  scope.w2 = kind;
  scope.wgmma_device_only = cuda::device_has_wgmma(target);
  std::vector<jit::KernelSpec> specs = cuda::layer_kernel_specs(desc, tiles, scope);
  for (jit::KernelSpec& spec : cuda::tuned_kernel_specs(desc, options.tuning, scope)) specs.push_back(std::move(spec));
  // The table a GPU of this architecture plans with when the caller gives none (Options::shipped_tuning).
  const TuningTable* shipped = plan::shipped_tuning_for(desc, options, "sm_" + std::to_string(arch.sm));
  if (shipped != nullptr)
    for (jit::KernelSpec& spec : cuda::tuned_kernel_specs(desc, *shipped, scope)) specs.push_back(std::move(spec));
  const int threads = a.jobs > 0 ? a.jobs : hardware_threads();
  const auto start = std::chrono::steady_clock::now();
  const std::vector<jit::CubinLookup> results = cache.lookup_all(specs, arch, threads);
  const double wall_ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start).count();
  int compiled = 0, hits = 0, serialized = 0;
  double compile_ms = 0.0;
  for (size_t i = 0; i < specs.size(); ++i) {
    const jit::CubinLookup& r = results[i];
    const bool was_compiled = r.origin == jit::CubinOrigin::kCompiled;
    compiled += was_compiled;
    hits += !was_compiled;
    compile_ms += r.compile_ms;
    std::printf("  %-28s %-8s %8.1f ms  %s\n", specs[i].entry.c_str(), jit::to_string(r.origin), r.lookup_ms,
                r.key.substr(0, 16).c_str());
    // NOTE: correct but slow kernels; a warning, not an error (MOEQ_DUMP_DIR keeps the source and the whole log).
    if (!r.wgmma_serialized.empty()) {
      ++serialized;
      std::printf("    serialized wgmma: %s\n", r.wgmma_serialized.c_str());
    }
  }
  std::printf("\n%d compiled, %d from the cache, %.1f ms (%.1f ms of NVRTC on %d threads)\n", compiled, hits, wall_ms,
              compile_ms, threads);
  if (serialized > 0)
    std::printf("%d of the %d compiled kernels had ptxas serialize their wgmma instructions (slow, not wrong)\n",
                serialized, compiled);
  // NOTE: the kernels compiled all the same; what failed is the one thing compile is for, the disk copy.
  if (const size_t failed = cache.cache().disk_write_failures(); failed > 0)
    throw Error(std::to_string(failed) + " of " + std::to_string(compiled) + " kernels could not be written to the cache at " +
                cache.cache().dir() + " (MOEQ_CACHE_DIR must name a writable directory)");
  return 0;
}

int run_cache(const std::string& action) {
  jit::Cache& cache = jit::kernel_cache().cache();
  if (action == "info") {
    const jit::CacheInfo info = cache.info();
    std::printf("cache      %s\nentries    %zu\nbytes      %llu\n", info.dir.c_str(), info.num_entries,
                static_cast<unsigned long long>(info.num_bytes));
    return 0;
  }
  if (action == "clear") {
    const jit::CacheInfo before = cache.info();
    cache.clear();
    std::printf("cleared    %zu entries from %s\n", before.num_entries, before.dir.c_str());
    return 0;
  }
  throw Error("cache action = '" + action + "' is not info or clear");
}

}  // namespace

Action add_compile_command(CLI::App& app) {
  auto a = std::make_shared<CompileArgs>();
  CLI::App* cmd = app.add_subcommand("compile", "Compile a layer's kernels into the disk cache ahead of serving");
  cmd->add_option("--preset", a->preset, "Model preset")->capture_default_str();
  cmd->add_option("--scheme", a->scheme, "W[:A] (default: the preset's)");
  cmd->add_option("--activation", a->activation, "Override the preset's activation");
  cmd->add_option("--arch", a->arch, "sm_80 | sm_89 | sm_90 | sm_90a (default: the device's)");
  cmd->add_option("--tile", a->tiles, "Also compile these GEMM tiles (BMxBN/WMxWNxWK/S), or 'candidates' for "
                                      "the tuning candidates legal for the layer");
  cmd->add_option("--tuning", a->tuning, "Also compile this tuning table's tiles (JSON, `moeq tune`)");
  cmd->add_option("--jobs,-j", a->jobs, "Compile threads (0: one per hardware thread)")->capture_default_str();
  cmd->add_option("--codes", a->codes,
                  "Only for weights of this code layout: prepared | canonical | both (WeightView::code_layout)")
      ->capture_default_str();
  cmd->add_option("--mx-word", a->mx_word,
                  "Only for MX weights with (on) or without (off) WeightView::mx_scales_at_most_two, or both")
      ->capture_default_str();
  cmd->add_option("--scales", a->scales, "Only for weight scales 4-byte aligned, unaligned, or both")
      ->capture_default_str();
  cmd->add_flag("--list-tiles", a->list_tiles,
                "Print the --tile tiles, one a line ('candidates' resolved for the layer), and compile nothing");
  return [a] { return run_compile(*a); };
}

Action add_cache_command(CLI::App& app) {
  auto action = std::make_shared<std::string>();
  CLI::App* cmd = app.add_subcommand("cache", "Show or clear the kernel cache (MOEQ_CACHE_DIR)");
  cmd->add_option("action", *action, "info | clear")->required();
  return [action] { return run_cache(*action); };
}

}  // namespace moeq::cli
