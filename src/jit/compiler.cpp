#include "jit/compiler.hpp"

#include <chrono>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <string_view>

#include "common/parallel.hpp"
#include "jit/nvrtc.hpp"
#include "moeq/error.hpp"

namespace moeq::jit {
namespace {

using Clock = std::chrono::steady_clock;

double ms_since(Clock::time_point start) {
  return std::chrono::duration<double, std::milli>(Clock::now() - start).count();
}

void write_file(const std::filesystem::path& path, const void* data, size_t num_bytes) {
  std::ofstream file(path, std::ios::binary);
  file.write(static_cast<const char*>(data), static_cast<std::streamsize>(num_bytes));
}

}  // namespace

std::string to_string(const Arch& arch) { return arch_name(arch.sm, arch.arch_specific); }

Arch current_arch() {
  // NOTE: the selected device is fixed for the process (MOEQ_DEVICE is read once), so is its arch.
  static const Arch arch = [] {
    const cuda::DeviceInfo info = cuda::current_device_info();
    // NOTE: only Hopper needs the 'a' target today (wgmma, setmaxnreg); an sm_90a CUBIN runs on
    // 9.0 alone, which is exactly the device in hand.
    return Arch{info.cc_major * 10 + info.cc_minor, info.cc_major == 9 && info.cc_minor == 0};
  }();
  return arch;
}

std::string wgmma_serialization_note(const std::string& log) {
  constexpr std::string_view kSerialized = "wgmma.mma_async instructions are serialized";
  const size_t at = log.find(kSerialized);
  if (at == std::string::npos) return "";
  const size_t line_start = log.rfind('\n', at);
  const size_t begin = line_start == std::string::npos ? 0 : line_start + 1;
  const size_t end = log.find('\n', at);
  return log.substr(begin, end == std::string::npos ? std::string::npos : end - begin);
}

const char* to_string(CubinOrigin origin) {
  switch (origin) {
    case CubinOrigin::kMemory: return "memory";
    case CubinOrigin::kDisk: return "disk";
    case CubinOrigin::kCompiled: return "compiled";
  }
  return "?";
}

KernelCache::KernelCache(const JitOptions& options)
    : options_(options), cache_(options.cache_dir, !options.disable_cache) {}

std::vector<std::string> KernelCache::extra_options() const {
  if (options_.ptxas_verbose) return {"--ptxas-options=-v"};
  return {};
}

CubinLookup KernelCache::lookup(const KernelSpec& spec, Arch arch) {
  const Clock::time_point start = Clock::now();
  const std::vector<std::string> extra = extra_options();
  CacheKeyInputs inputs;
  inputs.source = spec.source;
  const std::string headers_hash = included_headers_hash(spec.source);
  inputs.headers_hash = headers_hash;
  inputs.nvrtc_version = nvrtc_version();
  inputs.options = nvrtc_options(arch.sm, arch.arch_specific, extra);
  const std::string arch_string = to_string(arch);
  inputs.arch = arch_string;

  CubinLookup result;
  result.key = cache_key(inputs);
  bool from_disk = false;
  if (const std::vector<uint8_t>* hit = cache_.find(result.key, &from_disk)) {
    result.cubin = hit;
    result.origin = from_disk ? CubinOrigin::kDisk : CubinOrigin::kMemory;
    result.lookup_ms = ms_since(start);
    return result;
  }

  // NOTE: the source goes out before the compile, so a compiler that crashes leaves it behind.
  if (!options_.dump_dir.empty()) dump_source(spec, result.key);
  CompileResult compiled = compile_to_cubin(spec.source, spec.entry, arch.sm, arch.arch_specific, extra);
  if (options_.ptxas_verbose) {
    std::fprintf(stderr, "[moeq] %s (%s, %.1f ms):\n%s\n", spec.entry.c_str(), arch_string.c_str(),
                 compiled.compile_ms, compiled.log.c_str());
  }
  if (!options_.dump_dir.empty()) dump_result(spec, result.key, compiled.log, compiled.cubin);
  result.origin = CubinOrigin::kCompiled;
  result.compile_ms = compiled.compile_ms;
  result.wgmma_serialized = wgmma_serialization_note(compiled.log);
  result.cubin = &cache_.insert(result.key, std::move(compiled.cubin));
  result.lookup_ms = ms_since(start);
  return result;
}

std::vector<CubinLookup> KernelCache::lookup_all(const std::vector<KernelSpec>& specs, Arch arch, int threads) {
  // NOTE: a source's first spec is compiled in the parallel pass, its repeats are looked up after
  // it, so no two threads compile the same program.
  std::vector<size_t> first_of_source;
  std::vector<bool> is_first(specs.size(), false);
  {
    std::unordered_map<std::string_view, size_t> seen;
    for (size_t i = 0; i < specs.size(); ++i) {
      if (seen.emplace(specs[i].source, i).second) {
        first_of_source.push_back(i);
        is_first[i] = true;
      }
    }
  }
  std::vector<CubinLookup> results(specs.size());
  parallel_for(static_cast<int64_t>(first_of_source.size()), threads,
               [&](int64_t j) { results[first_of_source[j]] = lookup(specs[first_of_source[j]], arch); });
  for (size_t i = 0; i < specs.size(); ++i)
    if (!is_first[i]) results[i] = lookup(specs[i], arch);
  return results;
}

// NOTE: debugging aids only: a failure to write is silent, the compile result stands.
std::filesystem::path KernelCache::dump_stem(const KernelSpec& spec, const std::string& key) const {
  std::error_code ec;
  const std::filesystem::path dir = options_.dump_dir;
  std::filesystem::create_directories(dir, ec);
  return dir / (spec.entry + "." + key.substr(0, 16));
}

void KernelCache::dump_source(const KernelSpec& spec, const std::string& key) const {
  write_file(dump_stem(spec, key).string() + ".cu", spec.source.data(), spec.source.size());
}

void KernelCache::dump_result(const KernelSpec& spec, const std::string& key, const std::string& log,
                              const std::vector<uint8_t>& cubin) const {
  const std::string stem = dump_stem(spec, key).string();
  write_file(stem + ".cubin", cubin.data(), cubin.size());
  write_file(stem + ".log", log.data(), log.size());
}

const LoadedKernel& KernelCache::load(const KernelSpec& spec) {
  // PERF: one SHA-256 over the (short) generated source per call; each kernel family's host
  // code keeps its loaded CUfunctions in a table, so this runs once per config and process.
  CubinLookup cubin = lookup(spec, current_arch());
  // NOTE: one module may hold several entries: a loaded kernel is (cubin key, entry name).
  const std::string loaded_key = cubin.key + "/" + spec.entry;
  std::lock_guard<std::mutex> lock(load_mutex_);
  if (auto it = loaded_.find(loaded_key); it != loaded_.end()) return it->second;

  const cuda::Driver& d = cuda::driver();
  cuda::ensure_context();
  LoadedKernel kernel;
  const Clock::time_point start = Clock::now();
  // NOTE: modules are never unloaded: CUfunctions are handed out for the life of the process.
  cuda::check(d.cuModuleLoadData(&kernel.module, cubin.cubin->data()), "cuModuleLoadData");
  const cuda::CUresult found = d.cuModuleGetFunction(&kernel.function, kernel.module, spec.entry.c_str());
  if (found != cuda::kSuccess) {
    d.cuModuleUnload(kernel.module);
    cuda::check(found, ("cuModuleGetFunction('" + spec.entry + "')").c_str());
  }
  kernel.module_load_ms = ms_since(start);
  kernel.cubin = std::move(cubin);
  return loaded_.emplace(loaded_key, std::move(kernel)).first->second;
}

size_t KernelCache::num_loaded() {
  std::lock_guard<std::mutex> lock(load_mutex_);
  return loaded_.size();
}

KernelCache& kernel_cache() {
  static KernelCache cache(jit_options());
  return cache;
}

}  // namespace moeq::jit
