#pragma once
// NVRTC, loaded with dlopen on first use (no CUDA headers or libraries at build time).
// Every embedded device header (device/**/*.cuh) is handed to NVRTC in memory, so
// `#include "moeq_dev/..."` resolves without any file on disk.
#include <cstdint>
#include <string>
#include <vector>

namespace moeq::jit {

// True when an NVRTC library loads and every entry point resolves; else the reason in *why.
// Loads once, thread-safe; never throws.
bool nvrtc_available(std::string* why = nullptr);
// major * 1000 + minor * 10 (13.0 -> 13000), like CUDA_VERSION. Throws moeq::Error if unavailable.
int nvrtc_version();

// "sm_80", "sm_90a".
std::string arch_name(int sm, bool arch_specific);

// The complete NVRTC option list for a compile: the fixed options, then `extra_options`.
// NOTE: --use_fast_math is never set: moeq's numerics are specified bit by bit.
std::vector<std::string> nvrtc_options(int sm, bool arch_specific,
                                       const std::vector<std::string>& extra_options);

struct CompileResult {
  std::vector<uint8_t> cubin;  // an ELF image for exactly the requested sm
  std::string log;             // NVRTC's log (warnings; ptxas -v output when asked)
  double compile_ms = 0.0;
};

// Compiles `source` (named `name` in diagnostics) to a CUBIN for sm_<sm>[a].
// Throws moeq::Error carrying the name, the options and the full NVRTC log on failure.
CompileResult compile_to_cubin(const std::string& source, const std::string& name, int sm,
                               bool arch_specific, const std::vector<std::string>& extra_options);

}  // namespace moeq::jit
