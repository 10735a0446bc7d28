#pragma once
// Subcommands of the moeq CLI. Each registers its options on `app` and returns the action to
// run when the subcommand was chosen; actions return the process exit code.
#include <functional>
#include <string>

#include <CLI/CLI.hpp>

#include "cuda/driver.hpp"
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

Action add_info_command(CLI::App& app);
Action add_run_command(CLI::App& app);
Action add_bench_command(CLI::App& app);
Action add_compile_command(CLI::App& app);
Action add_cache_command(CLI::App& app);
Action add_verify_command(CLI::App& app);
Action add_tune_command(CLI::App& app);

}  // namespace moeq::cli
