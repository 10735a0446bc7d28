// `moeq tune`: per token count, the fastest legal GEMM tiles of a layer on this GPU, each checked
// against the reference before it is timed, written as a tuning table (include/moeq/tuning.hpp)
// that `moeq run --tuning`, `moeq bench --tuning` and Options::tuning take.
#include <algorithm>
#include <array>
#include <chrono>
#include <cstdio>
#include <fstream>
#include <iterator>
#include <limits>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "common/parallel.hpp"
#include "cuda/driver.hpp"
#include "cuda/layer_kernels.hpp"
#include "cuda/moe_gemm.hpp"
#include "io/presets.hpp"
#include "io/verify.hpp"
#include "jit/compiler.hpp"
#include "moeq/error.hpp"
#include "plan/legality.hpp"
#include "plan/tuning.hpp"
#include "plan/workspace.hpp"
#include "tools/moeq/commands.hpp"
#include "tools/moeq/gemm_timing.hpp"
#include "tools/moeq/layer_timing.hpp"

namespace moeq::cli {
namespace {

struct TuneArgs {
  std::string preset = "qwen3-30b-a3b";
  std::string scheme;  // default: the preset's
  std::vector<int64_t> tokens{1, 2, 4, 8, 16, 24, 32, 48, 64, 96, 128, 256, 512, 1024, 2048, 4096};
  std::vector<std::string> candidates;  // default: cuda::gemm_tile_candidates()
  std::string out;                      // the table's file; empty = standard output
  int iterations = 20;
  int trials = 5;
  int64_t check_tokens = 9;
  std::string layout;  // "" = time the indexed layout's GEMMs, write a table for every layout
  int confirm_rounds = 3;
  double min_gain_pct = 1.0;
  std::string update;  // a table to merge the picks into ("" = a table of the picks alone)
  bool steps = false;  // decide by whole steps (Experts::apply under a graph), not by the GEMMs' sum
};

struct Timed {
  std::string tile;
  double us = std::numeric_limits<double>::infinity();
};

// A block size's GEMM pair, with the GEMMs' times alone.
struct BlockPick {
  int64_t block = 0;
  Timed gemm[2];
};

// Options that plan every M with one block size and GEMM pair (the whole step's timing of a contender).
Options one_pair_options(int64_t block, const std::string& gemm1, const std::string& gemm2) {
  Options o;
  o.backend = Backend::cuda;
  o.tuning.entries = {{0, plan::kTuningLastMaxM, block, gemm1, gemm2}};
  return o;
}


// Whether `tile` runs the layer's experts step (both GEMMs on it) within the reference's bounds, in
// the indexed and masked layouts (the GEMM with and without segment tables), on a copy of the layer
// with at most 8 experts (the tiles' legality does not depend on E). The problems and their oracle
// are made once, on the first check.
class TileChecker {
 public:
  TileChecker(const ExpertsDesc& d, int64_t tokens) : desc_(d), tokens_(tokens) {
    desc_.num_experts = std::min<int64_t>(d.num_experts, 8);
    desc_.num_global_experts = 0;
    desc_.top_k = std::min(d.top_k, desc_.num_experts);
  }

  bool passes(const cuda::GemmTile& tile) {
    const std::string name = tile.to_string();
    const auto known = verdicts_.find(name);
    if (known != verdicts_.end()) return known->second;
    const Options o = one_pair_options(tile.block_m, name, name);
    if (verifiers_.empty()) {
      for (Layout layout : {Layout::indexed, Layout::masked}) {
        io::VerifyCase c{desc_, layout, tokens_, 1, 17};
        c.codes = CodeLayout::prepared;
        verifiers_.push_back(std::make_unique<io::GpuVerifier>(c));
        labels_.push_back(c.label());
      }
    }
    bool ok = true;
    for (size_t i = 0; i < verifiers_.size(); ++i) {
      try {
        const io::VerifyResult r = verifiers_[i]->run(o);
        if (!r.passed) {
          std::fprintf(stderr, "tune: %s fails the reference (%s: rel %.3g): not timed\n", name.c_str(),
                       labels_[i].c_str(), r.error.rel_err);
          ok = false;
        }
      } catch (const Error& e) {
        std::fprintf(stderr, "tune: %s cannot run the layer: %s\n", name.c_str(), e.what());
        ok = false;
      }
      if (!ok) break;
    }
    verdicts_[name] = ok;
    return ok;
  }

 private:
  ExpertsDesc desc_;
  int64_t tokens_;
  std::map<std::string, bool> verdicts_;
  std::vector<std::unique_ptr<io::GpuVerifier>> verifiers_;  // indexed, masked
  std::vector<std::string> labels_;
};

int run_tune(const TuneArgs& a) {
  Layout layout = Layout::indexed;
  if (!a.layout.empty()) {
    const auto parsed = parse_layout(a.layout);
    if (!parsed || *parsed == Layout::auto_select)
      throw Error("--layout = \"" + a.layout + "\" is not indexed, contiguous or masked");
    layout = *parsed;
  }
  for (const int64_t M : a.tokens)
    if (M < 1) throw Error("--tokens: M = " + std::to_string(M) + " is not a token count (at least 1)");
  require_at_least("--trials", a.trials, 1);
  require_at_least("--iterations", a.iterations, 1);
  require_at_least("--check-tokens", a.check_tokens, 1);
  require_at_least("--confirm-rounds", a.confirm_rounds, 1);
  if (a.steps && layout != Layout::indexed)
    throw Error("--steps times the step on indexed input; --layout = \"" + a.layout + "\" cannot be timed that way");
  if (!(a.min_gain_pct >= 0.0 && a.min_gain_pct < 100.0))
    throw Error("--min-gain = " + std::to_string(a.min_gain_pct) + " is not a percentage in [0, 100)");
  // NOTE: checked now, written at the end: a tune takes minutes, and its table would be lost to a bad path.
  if (!a.out.empty()) require_writable_file("--out", a.out);
  const io::Preset& preset = io::find_preset(a.preset);
  ExpertsDesc d = preset.desc;
  const std::string scheme = a.scheme.empty() ? preset.default_scheme : a.scheme;
  io::apply_scheme(scheme, d);
  plan::require_implementable(d, Options{});  // an unsupported pair is named as such, before the tune's own rules
  if (d.act_format != ActFormat::none)
    throw Error("moeq tune times 16-bit activations; " + d.to_string() +
                " quantizes them for the same tiles (tune its weights with bf16 or f16 activations)");
  std::optional<TuningTable> base;
  if (!a.update.empty()) {
    base = TuningTable::load(a.update);
    if (!base->key.empty() && base->key != d.tuning_key())
      throw Error("--update " + a.update + " is the table of \"" + base->key + "\", not of this layer (\"" +
                  d.tuning_key() + "\")");
    // NOTE: the table's layout is kept, so it must be the one these timings are for.
    if (base->layout != (a.layout.empty() ? Layout::auto_select : layout))
      throw Error("--update " + a.update + " serves " +
                  (base->layout == Layout::auto_select ? std::string("every layout") : std::string(to_string(base->layout))) +
                  ", not what --layout times; give the same --layout");
    Options table_options;
    table_options.tuning = *base;
    if (const auto reasons = plan::tuning_reasons(d, table_options); !reasons.empty())
      throw Error("--update " + a.update + " cannot serve " + d.to_string() + ": " + reasons.front());
  }
  require_cuda_device("tune");
  Options cuda_options;
  cuda_options.backend = Backend::cuda;
  if (const auto reasons = can_implement(d, cuda_options); !reasons.empty())
    throw Error("cannot run " + d.to_string() + " on the GPU: " + reasons.front());
  cuda::ensure_context();
  const auto info = cuda::current_device_info();
  const std::string arch = "sm_" + std::to_string(info.cc_major) + std::to_string(info.cc_minor);
  if (base && !base->arch.empty() && base->arch != arch)
    throw Error("--update " + a.update + " was tuned on " + base->arch + ", this GPU is " + arch);
  cuda::Stream stream;

  // Candidates legal for both GEMMs, once each as this device runs them.
  std::vector<cuda::GemmTile> candidates;
  std::vector<std::string> seen;
  const std::vector<cuda::GemmTile> all = a.candidates.empty() ? cuda::gemm_tile_candidates() : [&] {
    std::vector<cuda::GemmTile> named;
    for (const std::string& text : a.candidates) named.push_back(cuda::parse_gemm_tile(text));
    return named;
  }();
  for (const cuda::GemmTile& tile : cuda::layer_tiles_legal_for(d, all)) {
    const std::string runs_as = cuda::tile_for_device(tile).to_string();
    if (std::find(seen.begin(), seen.end(), runs_as) != seen.end()) continue;
    seen.push_back(runs_as);
    candidates.push_back(tile);
  }
  if (candidates.empty()) throw Error("no candidate tile is legal for both GEMMs of " + d.to_string());
  {
    // PERF: every candidate's kernels compile first on a thread per core (the search then loads
    // them from memory), instead of one NVRTC program at each candidate's first launch.
    const auto start = std::chrono::steady_clock::now();
    const auto compiled = jit::kernel_cache().lookup_all(cuda::layer_kernel_specs(d, candidates), jit::current_arch(),
                                                         hardware_threads());
    std::fprintf(stderr, "tune: %zu kernels ready in %.1f s\n", compiled.size(),
                 std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count());
  }
  std::fprintf(stderr, "tune: %s %s on %s (sm_%d%d), %zu candidate tiles\n", preset.name.c_str(), scheme.c_str(),
               info.name.c_str(), info.cc_major, info.cc_minor, candidates.size());
  // planner / table / tuned: the GEMM pairs' (with --steps the whole steps') medians over the confirm
  // rounds (table: --update's entry at those rows, "-" where it has none); gain: the pick's over the
  // better of the other two; kept: the config written (with --update, "table" and "planner" leave the
  // table as it is).
  if (a.steps)
    std::fprintf(stderr, "tune: planner, table and tuned are whole steps (us; --steps), gemm1 and gemm2 the GEMMs alone\n");
  std::fprintf(stderr, "%6s %8s %6s  %-22s %9s  %-22s %9s  %9s %9s %9s %7s  %s\n", "M", "rows", "block", "gemm1", "us",
               "gemm2", "us", "planner", "table", "tuned", "gain", "kept");

  TileChecker checker(d, a.check_tokens);
  std::vector<plan::TunedPoint> points;
  std::vector<int64_t> gap_rows;  // --update: rows whose range goes to the planner's rules
  for (int64_t M : a.tokens) {
    const int64_t rows = plan::valid_shape_m(d, M);
    const int64_t planner_block = planner_block_m(d, M);
    auto time_gemm = [&](bool second, const cuda::GemmTile& tile) {
      return time_moe_gemm(d, second, M, tile, true, info.l2_bytes, a.iterations, a.trials, stream.get(), layout).us;
    };
    // NOTE: the indexed planner's block and tiles at M, also the baseline of --layout contiguous /
    // masked (whose planner sizes by the routed rows, the masked one by E x T: close at a uniform
    // routing, not equal).
    const cuda::GemmTile planner_tiles[2] = {planner_gemm_tile(d, false, M), planner_gemm_tile(d, true, M)};
    // The planner's block size and its neighbours in the GPU's block sizes (24 is not a power of
    // two, so not halving and doubling): one block size serves both GEMMs.
    const auto& sizes = plan::kGpuBlockSizes;
    const int64_t at = std::find(std::begin(sizes), std::end(sizes), planner_block) - std::begin(sizes);
    std::vector<int64_t> blocks;
    for (int64_t i = std::max<int64_t>(at - 1, 0); i <= at + 1 && i < static_cast<int64_t>(std::size(sizes)); ++i)
      blocks.push_back(sizes[i]);
    int64_t best_block = 0;
    Timed best[2];
    std::vector<BlockPick> block_picks;
    for (int64_t block : blocks) {
      Timed at_block[2];
      std::map<std::string, std::array<double, 2>> tile_us;  // each tile's GEMM1 and GEMM2 times
      for (const cuda::GemmTile& tile : candidates) {
        if (tile.block_m != block || !checker.passes(tile)) continue;
        for (int g = 0; g < 2; ++g) {
          const double us = time_gemm(g == 1, tile);
          tile_us[tile.to_string()][g] = us;
          if (us < at_block[g].us) at_block[g] = {tile.to_string(), us};
        }
      }
      if (at_block[0].tile.empty()) continue;
      // With --steps, each of the two fastest tiles on both GEMMs too: the step's winner was such a pair
      // where the GEMMs' own fastest pair was not (2026-12-05-h100-tables-mixtral-deepseek.md, call 7).
      if (a.steps) {
        block_picks.push_back({block, {at_block[0], at_block[1]}});
        if (at_block[0].tile != at_block[1].tile)
          for (const Timed& t : at_block) {
            const auto& us = tile_us.at(t.tile);
            block_picks.push_back({block, {{t.tile, us[0]}, {t.tile, us[1]}}});
          }
      }
      if (best_block == 0 || at_block[0].us + at_block[1].us < best[0].us + best[1].us) {
        best_block = block;
        best[0] = at_block[0];
        best[1] = at_block[1];
      }
    }
    if (best_block == 0) throw Error("no candidate passed the reference at M = " + std::to_string(M));
    // NOTE: the pick against the planner's pair, timed alternately: minutes of search at the power cap
    // slow the GPU, and a planner pair timed once before the search looked 3-10% faster than the
    // same tiles timed in it (bench/results/2026-12-02-h200-tune-tables.md, session 21).
    const cuda::GemmTile tuned_tiles[2] = {cuda::parse_gemm_tile(best[0].tile), cuda::parse_gemm_tile(best[1].tile)};
    // NOTE: with --update, the table's own entry too: session 32 shipped picks that beat the planner's
    // tiles yet lost to the entry they replaced (bench/results/2026-12-03-h200-dense-tune.md).
    const TuningEntry* old_entry = base ? base->find(rows) : nullptr;
    std::vector<double> planner_runs, tuned_runs, table_runs;
    if (a.steps) {
      // NOTE: whole steps, because the GEMMs' sum misjudges two-CTA tiles inside the graph-launched
      // step (a pick's GEMMs 15.5% faster than an `/o2` entry's, its step 2.0% slower:
      // bench/results/2026-12-05-h100-side-by-side.md), and the step's winner can sit in another
      // block size than the GEMMs' (2026-12-05-h100-tables-mixtral-deepseek.md, call 7): every
      // searched block's pairs are contenders, picked by their steps.
      Options planner_options;
      planner_options.backend = Backend::cuda;
      planner_options.shipped_tuning = false;
      auto step_us = [&](const Options& o) {
        return time_experts_layer(d, o, M, info.l2_bytes, a.iterations, a.trials, stream.get()).us;
      };
      std::vector<std::vector<double>> pick_runs(block_picks.size());
      for (int round = 0; round < a.confirm_rounds; ++round) {
        planner_runs.push_back(step_us(planner_options));
        for (size_t i = 0; i < block_picks.size(); ++i)
          pick_runs[i].push_back(step_us(one_pair_options(block_picks[i].block, block_picks[i].gemm[0].tile,
                                                          block_picks[i].gemm[1].tile)));
        if (old_entry != nullptr)
          table_runs.push_back(
              step_us(one_pair_options(old_entry->block_m, old_entry->gemm1_tile, old_entry->gemm2_tile)));
      }
      size_t fastest = 0;
      for (size_t i = 1; i < block_picks.size(); ++i)
        if (median(pick_runs[i]) < median(pick_runs[fastest])) fastest = i;
      best_block = block_picks[fastest].block;
      best[0] = block_picks[fastest].gemm[0];
      best[1] = block_picks[fastest].gemm[1];
      tuned_runs = pick_runs[fastest];
    } else {
      for (int round = 0; round < a.confirm_rounds; ++round) {
        planner_runs.push_back(time_gemm(false, planner_tiles[0]) + time_gemm(true, planner_tiles[1]));
        tuned_runs.push_back(time_gemm(false, tuned_tiles[0]) + time_gemm(true, tuned_tiles[1]));
        if (old_entry != nullptr)
          table_runs.push_back(time_gemm(false, cuda::parse_gemm_tile(old_entry->gemm1_tile)) +
                               time_gemm(true, cuda::parse_gemm_tile(old_entry->gemm2_tile)));
      }
    }
    const double planner_us = median(planner_runs), tuned_us = median(tuned_runs);
    const double table_us = old_entry != nullptr ? median(table_runs) : std::numeric_limits<double>::infinity();
    const double rival_us = std::min(planner_us, table_us);
    const double gain_pct = 100.0 * (rival_us - tuned_us) / rival_us;
    const bool keep_tuned = gain_pct >= a.min_gain_pct;
    // With --update, where the planner's tiles beat the table's entry by as much, its rows become a gap.
    const bool to_gap = !keep_tuned && old_entry != nullptr &&
                        100.0 * (table_us - planner_us) / table_us >= a.min_gain_pct;
    // NOTE: with --update the table's entry stays unless one of the other two beat it (a planner within
    // --min-gain of it does not), and rows past its ranges are the planner's already.
    const char* kept = keep_tuned ? "tuned" : to_gap ? "planner (gap)" : old_entry != nullptr ? "table" : "planner";
    char table_text[32] = "-";
    if (old_entry != nullptr) std::snprintf(table_text, sizeof table_text, "%.2f", table_us);
    std::fprintf(stderr, "%6lld %8lld %6lld  %-22s %9.2f  %-22s %9.2f  %9.2f %9s %9.2f %6.1f%%  %s\n",
                 static_cast<long long>(M), static_cast<long long>(rows), static_cast<long long>(best_block),
                 best[0].tile.c_str(), best[0].us, best[1].tile.c_str(), best[1].us, planner_us, table_text,
                 tuned_us, gain_pct, kept);
    if (keep_tuned) {
      points.push_back({rows, best_block, best[0].tile, best[1].tile});
    } else if (to_gap) {
      gap_rows.push_back(rows);
    } else if (!base) {
      points.push_back({rows, planner_tiles[0].block_m, planner_tiles[0].to_string(), planner_tiles[1].to_string()});
    }
  }

  TuningTable table = plan::tuning_table_from_points(points);
  if (base) {
    std::vector<int64_t> sampled;
    for (const int64_t M : a.tokens) sampled.push_back(plan::valid_shape_m(d, M));
    table = plan::update_tuning_table(*base, points, gap_rows, d.top_k, sampled);
  }
  table.arch = arch;
  table.layer = preset.name + " " + scheme;
  table.key = d.tuning_key();
  if (!a.layout.empty()) table.layout = layout;
  Options check;
  check.tuning = table;
  if (const auto reasons = plan::tuning_reasons(d, check); !reasons.empty())
    throw Error("internal: the tuned table is not legal: " + reasons.front());
  if (a.out.empty()) {
    std::fputs(table.to_json().c_str(), stdout);
  } else {
    std::ofstream f(a.out);
    f << table.to_json();
    if (!f) throw Error("cannot write " + a.out);
    std::fprintf(stderr, "tune: wrote %s (%zu ranges)\n", a.out.c_str(), table.entries.size());
  }
  return 0;
}

}  // namespace

Action add_tune_command(CLI::App& app) {
  auto a = std::make_shared<TuneArgs>();
  CLI::App* cmd = app.add_subcommand("tune", "Time the legal GEMM tiles per token count on this GPU; write a tuning table");
  cmd->add_option("--preset", a->preset, "Model preset")->capture_default_str();
  cmd->add_option("--scheme", a->scheme, "W[:bf16|f16] (default: the preset's)");
  cmd->add_option("--tokens,-M", a->tokens, "Token counts to sample (each serves the rows down to the one before)")
      ->capture_default_str();
  cmd->add_option("--candidates", a->candidates, "Tiles to consider (default: every candidate legal for both GEMMs)");
  cmd->add_option("--out,-o", a->out, "Write the table here (JSON; default: standard output)");
  cmd->add_option("--check-tokens", a->check_tokens, "Tokens of the reference check of each tile")->capture_default_str();
  cmd->add_option("--layout", a->layout,
                  "Time the GEMMs as this layout runs them (indexed, contiguous, masked) and write a table for that "
                  "layout only (default: indexed timing, a table for every layout)");
  cmd->add_option("--iterations", a->iterations, "Launches per timed trial")->capture_default_str();
  cmd->add_option("--trials", a->trials, "Timed trials (the median is taken)")->capture_default_str();
  cmd->add_option("--confirm-rounds", a->confirm_rounds,
                  "Rounds timing the pick, the planner's tiles and with --update the table's entry alternately after "
                  "the search (medians compared)")
      ->capture_default_str();
  cmd->add_option("--min-gain", a->min_gain_pct,
                  "Keep the pick only when it beats the planner's tiles (and with --update the table's entry) by this "
                  "many percent in the confirm rounds")
      ->capture_default_str();
  cmd->add_flag("--steps", a->steps,
                 "Decide by whole steps (Experts::apply under a CUDA graph, as `moeq bench --kernel layer`): for each "
                 "block size searched its fastest GEMM1 and GEMM2 tiles as a pair and each on both GEMMs, the "
                 "planner's tiles and with --update the table's entry, each timed as the step over the confirm "
                 "rounds (indexed layout only)");
  cmd->add_option("--update", a->update,
                  "Merge the picks into this table (JSON, the layer's): each kept pick takes the rows from the nearest "
                  "sampled M, power of two or range end below its own; where the planner's tiles beat the table's "
                  "entry by --min-gain instead, those rows become a gap; elsewhere the table stays as it is");
  return [a] { return run_tune(*a); };
}

}  // namespace moeq::cli
