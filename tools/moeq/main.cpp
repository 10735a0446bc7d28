// moeq: command-line front end over the moeq C++ API.
#include <cstdio>
#include <exception>
#include <new>
#include <string>

#include "moeq/error.hpp"
#include "tools/moeq/commands.hpp"

int main(int argc, char** argv) {
  CLI::App app{"moeq: quantized Mixture-of-Experts layers (run `moeq <command> --help`)"};
  app.set_version_flag("--version", std::string("moeq ") + MOEQ_VERSION);
  app.require_subcommand(0, 1);

  const moeq::cli::Action info = moeq::cli::add_info_command(app);
  const moeq::cli::Action run = moeq::cli::add_run_command(app);
  const moeq::cli::Action bench = moeq::cli::add_bench_command(app);
  const moeq::cli::Action compile = moeq::cli::add_compile_command(app);
  const moeq::cli::Action cache = moeq::cli::add_cache_command(app);
  const moeq::cli::Action verify = moeq::cli::add_verify_command(app);
  const moeq::cli::Action tune = moeq::cli::add_tune_command(app);
  // NOTE: a text option given an empty value (`--scheme ''`, `-o ''`) would read as "not given" and take its
  // default without a word.
  const CLI::Validator non_empty(
      [](std::string& value) {
        return value.empty() ? std::string("the value is empty (leave the option out for its default)") : std::string();
      },
      "", "non-empty");
  for (CLI::App* command : app.get_subcommands([](CLI::App*) { return true; }))
    for (CLI::Option* option : command->get_options())
      if (option->get_type_name().rfind("TEXT", 0) == 0) option->check(non_empty);

  try {
    // NOTE: no subcommand runs the main job, `moeq run` with its built-in default.
    if (argc == 1) {
      const char* default_argv[] = {argv[0], "run"};
      app.parse(2, const_cast<char**>(default_argv));
    } else {
      app.parse(argc, argv);
    }
  } catch (const CLI::ParseError& e) {
    return app.exit(e);
  }

  try {
    if (app.got_subcommand("info")) return info();
    if (app.got_subcommand("bench")) return bench();
    if (app.got_subcommand("compile")) return compile();
    if (app.got_subcommand("cache")) return cache();
    if (app.got_subcommand("verify")) return verify();
    if (app.got_subcommand("tune")) return tune();
    return run();
  } catch (const moeq::Error& e) {
    std::fprintf(stderr, "moeq: error: %s\n", e.what());
    return 1;
  } catch (const std::bad_alloc&) {
    std::fprintf(stderr, "moeq: error: out of host memory (try fewer --tokens or a smaller preset)\n");
    return 1;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "moeq: internal error: %s\n", e.what());
    return 3;
  }
}
