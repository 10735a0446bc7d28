#pragma once
// Subcommands of the moeq CLI. Each registers its options on `app` and returns the action to
// run when the subcommand was chosen; actions return the process exit code.
#include <unistd.h>

#include <cstdint>
#include <filesystem>
#include <functional>
#include <string>

#include <CLI/CLI.hpp>

#include "cuda/driver.hpp"
#include "jit/compiler.hpp"
#include "moeq/error.hpp"
#include "moeq/weights.hpp"

namespace moeq::cli {

using Action = std::function<int()>;

// Throws "moeq COMMAND needs a CUDA device: <why>" where there is none (bench, verify, tune).
inline void require_cuda_device(const char* command) {
  if (cuda::device_count() > 0) return;
  std::string why;
  cuda::driver_available(&why);
  throw Error(std::string("moeq ") + command + " needs a CUDA device: " + (why.empty() ? std::string("none found") : why));
}

// `--arch`'s values.
inline jit::Arch parse_arch(const std::string& text) {
  if (text == "sm_80") return {80, false};
  if (text == "sm_89") return {89, false};
  if (text == "sm_90") return {90, false};
  if (text == "sm_90a") return {90, true};
  throw Error("--arch = '" + text + "' is not one of sm_80, sm_89, sm_90, sm_90a");
}

// `--seed`'s value: decimal digits within 0 .. 2^64 - 1 (CLI11 would wrap "-1" and saturate what is larger).
inline uint64_t parse_seed(const std::string& text) {
  bool digits = !text.empty() && text.size() <= 20;
  for (char c : text) digits = digits && c >= '0' && c <= '9';
  // NOTE: 20 digits may still exceed 2^64 - 1; the wide comparison catches it.
  if (digits && (text.size() < 20 || text <= "18446744073709551615")) return std::stoull(text);
  throw Error("--seed = '" + text + "' is not an integer in 0 .. 18446744073709551615");
}

// `--codes`'s value: the GPU weight code layout (prepared by moeq::prepare_codes, or canonical).
inline CodeLayout parse_codes(const std::string& text) {
  if (text == "prepared") return CodeLayout::prepared;
  if (text == "canonical") return CodeLayout::canonical;
  throw Error("--codes = '" + text + "' is not prepared or canonical");
}

// A count option (`--trials`, `--iterations`, ...) of at least `least`: 0 trials would take the median of none,
// 0 iterations divide by zero.
inline void require_at_least(const char* option, int64_t value, int64_t least) {
  if (value < least)
    throw Error(std::string(option) + " = " + std::to_string(value) + " must be at least " + std::to_string(least));
}

// `path` can be written: an existing file that is writable, or a new name in a writable directory.
inline void require_writable_file(const char* option, const std::string& path) {
  namespace fs = std::filesystem;
  std::error_code ec;
  const fs::path p(path);
  if (fs::is_directory(p, ec)) throw Error(std::string(option) + " = '" + path + "' is a directory");
  if (fs::exists(p, ec)) {
    if (::access(path.c_str(), W_OK) != 0) throw Error(std::string(option) + " = '" + path + "' is not writable");
    return;
  }
  const fs::path dir = p.has_parent_path() ? p.parent_path() : fs::path(".");
  if (!fs::is_directory(dir, ec) || ::access(dir.c_str(), W_OK) != 0)
    throw Error(std::string(option) + " = '" + path + "': its directory " + dir.string() + " is missing or not writable");
}

Action add_info_command(CLI::App& app);
Action add_run_command(CLI::App& app);
Action add_bench_command(CLI::App& app);
Action add_compile_command(CLI::App& app);
Action add_cache_command(CLI::App& app);
Action add_verify_command(CLI::App& app);
Action add_tune_command(CLI::App& app);

}  // namespace moeq::cli
