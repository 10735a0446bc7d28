#pragma once
// Subcommands of the moeq CLI. Each registers its options on `app` and returns the action to
// run when the subcommand was chosen; actions return the process exit code.
#include <functional>

#include <CLI/CLI.hpp>

namespace moeq::cli {

using Action = std::function<int()>;

Action add_info_command(CLI::App& app);
Action add_run_command(CLI::App& app);
Action add_bench_command(CLI::App& app);
Action add_compile_command(CLI::App& app);
Action add_cache_command(CLI::App& app);
Action add_verify_command(CLI::App& app);
Action add_tune_command(CLI::App& app);

}  // namespace moeq::cli
