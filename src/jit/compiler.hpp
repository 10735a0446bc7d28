#pragma once
// Spec -> CUBIN -> CUfunction, each step cached: memory, then the disk cache, then NVRTC.
// Knows nothing about MoE: a kernel is an entry name and a generated translation unit.
#include <cstdint>
#include <filesystem>
#include <mutex>
#include <string>
#include <unordered_map>
#include <vector>

#include "cuda/driver.hpp"
#include "jit/cache.hpp"

namespace moeq::jit {

struct Arch {
  int sm = 90;                // 80, 89, 90, ...
  bool arch_specific = true;  // the 'a' suffix (sm_90a): wgmma and setmaxnreg need it
};
std::string to_string(const Arch& arch);  // "sm_90a"
// The selected device's architecture: 9.0 -> sm_90a (Hopper-only instructions), else plain sm_XY.
Arch current_arch();

struct KernelSpec {
  std::string entry;   // the extern "C" __global__ function's name
  std::string source;  // generated: named constexpr config + #include of a kernels/ header
};

enum class CubinOrigin { kMemory, kDisk, kCompiled };
const char* to_string(CubinOrigin origin);

struct CubinLookup {
  const std::vector<uint8_t>* cubin = nullptr;  // owned by the KernelCache
  std::string key;
  CubinOrigin origin = CubinOrigin::kCompiled;
  double compile_ms = 0.0;  // NVRTC time when compiled, else 0
  double lookup_ms = 0.0;   // key + memory/disk lookup (+ compile + store when compiled)
  // When compiled: ptxas's note that it serialized the kernel's wgmma instructions (wgmma_serialization_note),
  // else empty. Not kept in the cache: a hit says nothing.
  std::string wgmma_serialized;
};

// The first line of an NVRTC log in which ptxas says it serialized wgmma.mma_async instructions (seen: C7511 and
// C7512, too few registers; C7513, ordinary instructions writing a wgmma's inputs inside the pipeline), or "" if none. Such a kernel is correct,
// but its MMAs wait for each other: session 67 found the 256-channel e4m3 tile of session 66 timed that way.
std::string wgmma_serialization_note(const std::string& log);

struct LoadedKernel {
  cuda::CUfunction function = nullptr;
  cuda::CUmodule module = nullptr;
  CubinLookup cubin;
  double module_load_ms = 0.0;
};

class KernelCache {
 public:
  explicit KernelCache(const JitOptions& options);

  // Cache lookup -> compile -> store. Thread-safe; two threads asking for the same missing kernel
  // may both compile it (both results are identical; the first stored is kept).
  CubinLookup lookup(const KernelSpec& spec, Arch arch);
  const std::vector<uint8_t>& cubin(const KernelSpec& spec, Arch arch) { return *lookup(spec, arch).cubin; }
  // lookup() of every spec, the missing ones compiled on up to `threads` threads (NVRTC runs
  // programs side by side). Specs with the same source compile once: the others are memory hits.
  // Results are in the order of `specs`; if some fail, the first failing spec's error is thrown
  // after all the rest have finished (their CUBINs are kept).
  std::vector<CubinLookup> lookup_all(const std::vector<KernelSpec>& specs, Arch arch, int threads);

  // Needs a device: compiles for current_arch(), loads the module once per key and keeps it
  // (and its CUfunction) for the life of the process.
  const LoadedKernel& load(const KernelSpec& spec);
  cuda::CUfunction function(const KernelSpec& spec) { return load(spec).function; }
  // Kernels loaded so far by this process (tests: a warmed-up layer loads nothing more).
  size_t num_loaded();

  Cache& cache() { return cache_; }
  const JitOptions& options() const { return options_; }

 private:
  std::vector<std::string> extra_options() const;
  // MOEQ_DUMP_DIR: <entry>.<key[0:16]>.cu before the compile, .cubin and .log after it.
  std::filesystem::path dump_stem(const KernelSpec& spec, const std::string& key) const;
  void dump_source(const KernelSpec& spec, const std::string& key) const;
  void dump_result(const KernelSpec& spec, const std::string& key, const std::string& log,
                   const std::vector<uint8_t>& cubin) const;

  JitOptions options_;
  Cache cache_;
  std::mutex load_mutex_;
  std::unordered_map<std::string, LoadedKernel> loaded_;  // key -> module; node-stable values
};

// The process's kernel cache, built from jit_options() on first use.
KernelCache& kernel_cache();

}  // namespace moeq::jit
