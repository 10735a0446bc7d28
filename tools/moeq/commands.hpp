#pragma once
// Subcommands of the moeq CLI. Each registers its options on `app` and returns the action to
// run when the subcommand was chosen; actions return the process exit code.
#include <functional>
#include <string>

#include <CLI/CLI.hpp>

#include "cuda/driver.hpp"
#include "jit/compiler.hpp"
#include "moeq/error.hpp"

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

Action add_info_command(CLI::App& app);
Action add_run_command(CLI::App& app);
Action add_bench_command(CLI::App& app);
Action add_compile_command(CLI::App& app);
Action add_cache_command(CLI::App& app);
Action add_verify_command(CLI::App& app);
Action add_tune_command(CLI::App& app);

}  // namespace moeq::cli
