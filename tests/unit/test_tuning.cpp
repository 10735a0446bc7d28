// Tuning tables (include/moeq/tuning.hpp): JSON, range lookup, their legality against a layer, and
// the plan they give (block size, tiles) on the CPU backend.
#include <gtest/gtest.h>

#include <set>
#include <string>

#include "error_test_util.hpp"
#include "cuda/layer_kernels.hpp"
#include "experts_test_util.hpp"
#include "io/presets.hpp"
#include "moeq/experts.hpp"
#include "moeq/tuning.hpp"
#include "plan/tuning.hpp"
#include "plan/workspace.hpp"

namespace moeq {
namespace {

using test::error_of;

// Qwen3-30B-A3B MXFP4: 8-row direct tiles up to 64 routed rows, then 16-row ones.
TuningTable qwen3_table() {
  TuningTable t;
  t.arch = "sm_90";
  t.layer = "qwen3-30b-a3b mxfp4";
  t.entries = {{0, 64, 8, "8x128/1x4x1/4/o4/r", "8x128/1x4x1/2/r"},
               {64, 512, 16, "16x128/1x4x1/4", "16x128/1x4x1/4"}};
  return t;
}

ExpertsDesc qwen3_mxfp4() {
  ExpertsDesc d = io::find_preset("qwen3-30b-a3b").desc;
  io::apply_scheme("mxfp4", d);
  return d;
}

TEST(Tuning, JsonRoundTrip) {
  const TuningTable t = qwen3_table();
  const TuningTable back = TuningTable::from_json(t.to_json());
  EXPECT_EQ(back.arch, "sm_90");
  EXPECT_EQ(back.layer, t.layer);
  ASSERT_EQ(back.entries.size(), 2u);
  EXPECT_EQ(back.entries[1].min_m, 64);
  EXPECT_EQ(back.entries[1].max_m, 512);
  EXPECT_EQ(back.entries[1].block_m, 16);
  EXPECT_EQ(back.entries[0].gemm1_tile, "8x128/1x4x1/4/o4/r");
  EXPECT_EQ(back.entries[0].gemm2_tile, "8x128/1x4x1/2/r");
  EXPECT_EQ(back.to_json(), t.to_json());
  EXPECT_TRUE(back.key.empty());
  TuningTable keyed = t;
  keyed.key = qwen3_mxfp4().tuning_key();
  EXPECT_EQ(TuningTable::from_json(keyed.to_json()).key, keyed.key);
  // No "layout" in the JSON: every layout; a table tuned in one layout keeps its name.
  EXPECT_EQ(back.layout, Layout::auto_select);
  EXPECT_EQ(t.to_json().find("layout"), std::string::npos);
  TuningTable masked = t;
  masked.layout = Layout::masked;
  EXPECT_NE(masked.to_json().find("\"layout\": \"masked\""), std::string::npos);
  EXPECT_EQ(TuningTable::from_json(masked.to_json()).layout, Layout::masked);
}

// The key names what the tiles' speed depends on (shapes, top_k, formats), not the activation.
TEST(Tuning, KeyNamesShapesAndFormats) {
  ExpertsDesc d = qwen3_mxfp4();
  EXPECT_EQ(d.tuning_key(), "E=128 K=2048 I=768 N13=1536 top_k=8 mxfp4:bf16 bf16");
  ExpertsDesc other_activation = d;
  other_activation.activation.kind = Activation::gelu;
  EXPECT_EQ(other_activation.tuning_key(), d.tuning_key());
  ExpertsDesc int4 = io::find_preset("qwen3-30b-a3b").desc;
  io::apply_scheme("int4-g128", int4);
  EXPECT_EQ(int4.tuning_key(), "E=128 K=2048 I=768 N13=1536 top_k=8 int4-g128-sbf16:bf16 bf16");
  ExpertsDesc ep = d;
  ep.num_global_experts = 256;
  EXPECT_NE(ep.tuning_key(), d.tuning_key());
}

// Every shipped table parses, names its architecture in its folder, belongs to one preset's layer
// under one scheme (its `layer` says which), has that layer's key, and is legal for it; the lookup
// finds it for that layer and that architecture only.
TEST(Tuning, ShippedTablesAreLegalForTheirLayers) {
  for (const auto& [path, table] : plan::shipped_tuning_tables()) {
    SCOPED_TRACE(path);
    ASSERT_FALSE(table.empty());
    EXPECT_EQ(path.rfind(table.arch + "/", 0), 0u);
    const auto space = table.layer.find(' ');
    ASSERT_NE(space, std::string::npos) << table.layer;
    ExpertsDesc d = io::find_preset(table.layer.substr(0, space)).desc;
    io::apply_scheme(table.layer.substr(space + 1), d);
    EXPECT_EQ(table.key, d.tuning_key());
    Options o;
    o.tuning = table;
    EXPECT_EQ(plan::tuning_reasons(d, o), std::vector<std::string>{});
    EXPECT_EQ(plan::shipped_tuning(d, table.arch), &table);
    EXPECT_EQ(plan::shipped_tuning(d, "sm_1"), nullptr);
  }
}

TEST(Tuning, FindTakesHalfOpenRanges) {
  const TuningTable t = qwen3_table();
  EXPECT_EQ(t.find(1), &t.entries[0]);
  EXPECT_EQ(t.find(64), &t.entries[0]);  // (0, 64]
  EXPECT_EQ(t.find(65), &t.entries[1]);
  EXPECT_EQ(t.find(512), &t.entries[1]);
  EXPECT_EQ(t.find(513), nullptr);        // past the table: the planner's rules
  EXPECT_EQ(t.find(0), &t.entries[0]);    // no rows: the first range
  EXPECT_EQ(TuningTable{}.find(10), nullptr);
}

TEST(Tuning, BadJsonNamesTheField) {
  EXPECT_NE(error_of([] { TuningTable::from_json("{"); }).find("not JSON"), std::string::npos);
  EXPECT_NE(error_of([] { TuningTable::from_json("[]"); }).find("not an object"), std::string::npos);
  EXPECT_NE(error_of([] { TuningTable::from_json("{}"); }).find("\"entries\""), std::string::npos);
  const std::string no_tile = R"({"entries": [{"min_m": 0, "max_m": 8, "block_m": 8, "gemm1_tile": "8x128/1x4x1/2/r"}]})";
  EXPECT_NE(error_of([&] { TuningTable::from_json(no_tile); }).find("entries[0] has no \"gemm2_tile\""), std::string::npos);
  const std::string text_m = R"({"entries": [{"min_m": "0", "max_m": 8, "block_m": 8, "gemm1_tile": "a", "gemm2_tile": "b"}]})";
  EXPECT_NE(error_of([&] { TuningTable::from_json(text_m); }).find("entries[0].min_m = \"0\" is not a 64-bit signed integer"),
            std::string::npos);
  EXPECT_NE(error_of([] { TuningTable::load("/nonexistent/table.json"); }).find("cannot read /nonexistent/table.json"),
            std::string::npos);
  for (const char* layout : {"auto", "sideways"}) {
    const std::string text = std::string(R"({"layout": ")") + layout + R"(", "entries": []})";
    EXPECT_NE(error_of([&] { TuningTable::from_json(text); })
                  .find(std::string("layout = \"") + layout + "\" is not indexed, contiguous or masked"),
              std::string::npos);
  }
}

TEST(Tuning, ALegalTableHasNoReasons) {
  Options o;
  o.tuning = qwen3_table();
  EXPECT_TRUE(plan::tuning_reasons(qwen3_mxfp4(), o).empty());
  EXPECT_TRUE(plan::tuning_reasons(qwen3_mxfp4(), Options{}).empty());
}

TEST(Tuning, ReasonsNameTheEntryAndTheValue) {
  const ExpertsDesc d = qwen3_mxfp4();
  auto reasons_of = [&](const TuningTable& t, const Options& base = Options{}) {
    Options o = base;
    o.tuning = t;
    std::string all;
    for (const std::string& r : plan::tuning_reasons(d, o)) all += r + "\n";
    return all;
  };
  TuningTable overlap = qwen3_table();
  overlap.entries[1].min_m = 32;
  EXPECT_NE(reasons_of(overlap).find("entries[1] (32, 512]: min_m = 32 is below 64"), std::string::npos);
  // A gap is legal: the planner's rules serve it.
  TuningTable gap = qwen3_table();
  gap.entries[1].min_m = 100;
  EXPECT_EQ(reasons_of(gap), "");
  EXPECT_EQ(gap.find(80), nullptr);
  EXPECT_EQ(gap.find(100), nullptr);
  EXPECT_EQ(gap.find(101), &gap.entries[1]);
  TuningTable empty_range = qwen3_table();
  empty_range.entries[1].max_m = 64;
  EXPECT_NE(reasons_of(empty_range).find("max_m = 64 is not above min_m"), std::string::npos);
  TuningTable odd_block = qwen3_table();
  odd_block.entries[0].block_m = 12;
  EXPECT_NE(reasons_of(odd_block).find("block_m = 12 must be 8, 16, 24, 32, 48, 64, 80, 96, 128 or 144"), std::string::npos);
  TuningTable rows = qwen3_table();
  rows.entries[0].gemm2_tile = "16x128/1x4x1/4";
  EXPECT_NE(reasons_of(rows).find("gemm2_tile = '16x128/1x4x1/4' has 16-row blocks, not block_m = 8"), std::string::npos);
  TuningTable garbage = qwen3_table();
  garbage.entries[0].gemm1_tile = "fast";
  EXPECT_NE(reasons_of(garbage).find("gemm1_tile = 'fast'"), std::string::npos);
  Options invariant;
  invariant.batch_invariant = true;
  EXPECT_NE(reasons_of(qwen3_table(), invariant).find("batch_invariant"), std::string::npos);
  Options fixed;
  fixed.block_m = 16;
  EXPECT_NE(reasons_of(qwen3_table(), fixed).find("block_m = 16 and a table"), std::string::npos);
  // can_implement and the constructor say the same.
  Options o;
  o.tuning = rows;
  EXPECT_FALSE(can_implement(d, o).empty());
  EXPECT_NE(error_of([&] { Experts(d, o); }).find("16-row blocks"), std::string::npos);
}

// Sampled points become half-open ranges from 0, equal neighbours merged, the last one ending at
// the last point (past it nothing was timed: the planner's rules).
TEST(Tuning, PointsBecomeContiguousRanges) {
  using plan::TunedPoint;
  const std::vector<TunedPoint> points = {{8, 8, "8x64/1x2x2/2/r", "8x64/1x2x2/2/r"},
                                          {32, 8, "8x128/1x4x1/4/o4/r", "8x128/1x4x1/2/r"},
                                          {64, 8, "8x128/1x4x1/4/o4/r", "8x128/1x4x1/2/r"},
                                          {64, 16, "16x128/1x4x1/4", "16x128/1x4x1/4"},  // same rows again: dropped
                                          {512, 16, "16x128/1x4x1/4", "16x128/1x4x1/4"}};
  const TuningTable t = plan::tuning_table_from_points(points);
  ASSERT_EQ(t.entries.size(), 3u);
  EXPECT_EQ(t.entries[0].min_m, 0);
  EXPECT_EQ(t.entries[0].max_m, 8);
  EXPECT_EQ(t.entries[1].min_m, 8);
  EXPECT_EQ(t.entries[1].max_m, 64);  // points 32 and 64 merged
  EXPECT_EQ(t.entries[1].gemm1_tile, "8x128/1x4x1/4/o4/r");
  EXPECT_EQ(t.entries[2].min_m, 64);
  EXPECT_EQ(t.entries[2].max_m, 512);
  EXPECT_EQ(t.entries[2].block_m, 16);
  EXPECT_EQ(t.find(513), nullptr);
  Options o;
  o.tuning = t;
  ExpertsDesc d = io::find_preset("qwen3-30b-a3b").desc;
  io::apply_scheme("int4-g128", d);
  EXPECT_TRUE(plan::tuning_reasons(d, o).empty());
  EXPECT_TRUE(plan::tuning_table_from_points({}).empty());
}

// `moeq tune --update`: a pick at rows r takes (s, r], s the nearest below r of the table's range ends,
// top_k x a power of two and the tune's other samples; the entries there are cut back around it.
TEST(Tuning, UpdatePutsAPickBetweenTheSamplesBelowIt) {
  TuningTable t;
  t.entries = {{0, 8, 8, "8x32/1x1x4/4/o4/r", "8x32/1x1x4/2/r"},
               {16, 32, 8, "8x128/1x4x1/4/o4/r", "8x256/1x8x1/4/r"},
               {2816, 4096, 48, "48x256/1x8x1/6/p/s", "48x256/1x8x1/6/p/s"},
               {4096, 7168, 64, "64x256/1x8x1/8/p/s", "64x256/1x8x1/8/p/s"}};
  const int64_t top_k = 8;
  EXPECT_EQ(plan::tuned_range_start(t, 24, top_k, {24, 48}), 16);       // a range end
  EXPECT_EQ(plan::tuned_range_start(t, 48, top_k, {24, 48}), 32);       // a range end (and 4 x 8)
  EXPECT_EQ(plan::tuned_range_start(t, 1536, top_k, {1536}), 1024);     // in a gap: 128 x 8
  EXPECT_EQ(plan::tuned_range_start(t, 5120, top_k, {4608, 5120}), 4608);  // the tune's own sample
  EXPECT_EQ(plan::tuned_range_start(t, 8, top_k, {}), 0);

  plan::put_tuning_entry(t, {4608, 5120, 48, "48x128/1x4x1/4", "48x128/1x4x1/4"});  // inside one range: split
  plan::put_tuning_entry(t, {16, 24, 8, "8x32/1x1x4/2/r", "8x256/1x8x1/4/r"});      // its lower part
  plan::put_tuning_entry(t, {1024, 3072, 24, "24x128/1x4x1/4/r", "24x128/1x4x1/4/r"});  // a gap and a range's start
  const std::vector<std::pair<int64_t, int64_t>> expected = {{0, 8},       {16, 24},    {24, 32},    {1024, 3072},
                                                             {3072, 4096}, {4096, 4608}, {4608, 5120}, {5120, 7168}};
  ASSERT_EQ(t.entries.size(), expected.size());
  for (size_t i = 0; i < expected.size(); ++i) {
    EXPECT_EQ(t.entries[i].min_m, expected[i].first) << i;
    EXPECT_EQ(t.entries[i].max_m, expected[i].second) << i;
  }
  EXPECT_EQ(t.entries[2].gemm1_tile, "8x128/1x4x1/4/o4/r");  // the old (16, 32] entry's upper part
  EXPECT_EQ(t.entries[4].block_m, 48);
  EXPECT_EQ(t.entries[5].gemm1_tile, "64x256/1x8x1/8/p/s");
  EXPECT_EQ(t.entries[6].gemm1_tile, "48x128/1x4x1/4");
  EXPECT_EQ(t.entries[7].block_m, 64);
  // A gap cut into one range, then the same config again beside another: one range.
  plan::clear_tuning_rows(t, 28, 30);
  ASSERT_EQ(t.entries.size(), expected.size() + 1);
  EXPECT_EQ(t.entries[2].max_m, 28);
  EXPECT_EQ(t.entries[3].min_m, 30);
  EXPECT_EQ(t.find(29), nullptr);
  plan::put_tuning_entry(t, {24, 32, 8, "8x128/1x4x1/4/o4/r", "8x256/1x8x1/4/r"});
  ASSERT_EQ(t.entries.size(), expected.size());
  plan::put_tuning_entry(t, {5120, 6144, 48, "48x128/1x4x1/4", "48x128/1x4x1/4"});
  ASSERT_EQ(t.entries.size(), expected.size());
  EXPECT_EQ(t.entries[6].min_m, 4608);
  EXPECT_EQ(t.entries[6].max_m, 6144);
  EXPECT_EQ(t.entries[7].min_m, 6144);
  Options o;
  o.tuning = t;
  EXPECT_TRUE(plan::tuning_reasons(qwen3_mxfp4(), o).empty());
}

TEST(Tuning, UpdateLeavesGapsAndPutsPicksFromTheSampleBelow) {
  TuningTable base;
  base.entries = {{0, 16, 8, "8x32/1x1x4/4/o4/r", "8x32/1x1x4/2/r"},
                  {16, 64, 8, "8x128/1x4x1/4/o4/r", "8x256/1x8x1/4/r"},
                  {64, 512, 16, "16x128/1x4x1/2/r", "16x128/1x4x1/4"}};
  const int64_t top_k = 8;
  // The tune sampled rows 24, 48 and 256: 48 became a gap, 256 a pick; 24 kept the table's entry.
  const std::vector<plan::TunedPoint> picks = {{256, 24, "24x128/1x4x1/4/r", "24x128/1x4x1/4/r"}};
  const TuningTable t = plan::update_tuning_table(base, picks, {48}, top_k, {24, 48, 256});
  // 48's range starts at 32 (4 x 8), 256's at 128 (16 x 8); the rest of each entry stays.
  const std::vector<std::pair<int64_t, int64_t>> expected = {{0, 16},   {16, 32},   {48, 64},
                                                             {64, 128}, {128, 256}, {256, 512}};
  ASSERT_EQ(t.entries.size(), expected.size());
  for (size_t i = 0; i < expected.size(); ++i) {
    EXPECT_EQ(t.entries[i].min_m, expected[i].first) << i;
    EXPECT_EQ(t.entries[i].max_m, expected[i].second) << i;
  }
  EXPECT_EQ(t.find(40), nullptr);  // the gap: the planner's rules
  EXPECT_EQ(t.entries[1].gemm1_tile, "8x128/1x4x1/4/o4/r");
  EXPECT_EQ(t.entries[2].gemm1_tile, "8x128/1x4x1/4/o4/r");
  EXPECT_EQ(t.entries[4].block_m, 24);
  EXPECT_EQ(t.entries[5].gemm2_tile, "16x128/1x4x1/4");
  // No picks, no gaps: the table as it was.
  EXPECT_EQ(plan::update_tuning_table(base, {}, {}, top_k, {24}).to_json(), base.to_json());
}

// `moeq compile --tuning` compiles each entry's GEMM1 tile for w13 and GEMM2 tile for w2 (and a wgmma
// tile's mma.sync stand-in; MXFP4 also folded, for weights given with mx_scales_at_most_two). (N, K
// and the bias are run-time values, so a tile's kernel text is usually the same for both GEMMs: only
// coverage is checked.)
TEST(Tuning, TunedKernelSpecsFollowEachGemm) {
  const ExpertsDesc d = qwen3_mxfp4();
  TuningTable t;
  t.entries = {{0, 64, 8, "8x64/1x4x1/2/r", "8x128/1x4x1/4/r"},
               {64, plan::kTuningLastMaxM, 64, "64x128/1x4x1/4/w", "64x256/1x8x1/8/p"}};
  std::set<std::string> sources;
  for (const jit::KernelSpec& spec : cuda::tuned_kernel_specs(d, t)) sources.insert(spec.source);
  auto has = [&](const WeightDesc& w, const char* tile) {
    const cuda::GemmTile g = cuda::parse_gemm_tile(tile);
    return sources.count(cuda::moe_gemm_kernel_spec(w, d.act_dtype, g, true).source) > 0 &&
           sources.count(cuda::moe_gemm_kernel_spec(w, d.act_dtype, g, false).source) > 0 &&
           sources.count(cuda::moe_gemm_kernel_spec(w, d.act_dtype, g, true, cuda::GemmInput::values, true).source) > 0 &&
           sources.count(cuda::moe_gemm_segments_kernel_spec(w, d.act_dtype, g, true).source) > 0;
  };
  EXPECT_TRUE(has(d.w13(), "8x64/1x4x1/2/r"));
  EXPECT_TRUE(has(d.w2(), "8x128/1x4x1/4/r"));
  EXPECT_TRUE(has(d.w13(), "64x128/1x4x1/4/w"));
  EXPECT_TRUE(has(d.w2(), "64x256/1x8x1/8/p"));
  const cuda::GemmTile stand_in = cuda::mma_sync_tile_of(cuda::parse_gemm_tile("64x128/1x4x1/4/w"));
  EXPECT_TRUE(sources.count(cuda::moe_gemm_kernel_spec(d.w13(), d.act_dtype, stand_in, true).source) > 0);
  EXPECT_TRUE(cuda::tuned_kernel_specs(d, TuningTable{}).empty());
}

// An illegal tile for the layer's weights is refused by the one legality function's words.
TEST(Tuning, TilesAreCheckedAgainstTheLayer) {
  const ExpertsDesc d = qwen3_mxfp4();
  TuningTable t = qwen3_table();
  t.entries[0].gemm1_tile = "8x128/1x4x1/4/k2/r";  // split K is not a direct-tile option
  Options o;
  o.tuning = t;
  const auto reasons = plan::tuning_reasons(d, o);
  ASSERT_FALSE(reasons.empty());
  EXPECT_NE(reasons.front().find("entries[0] (0, 64]: gemm1_tile = '8x128/1x4x1/4/k2/r'"), std::string::npos) << reasons.front();
}

// The table's block size serves the plan (workspaces, alignment) at the M it covers; past it the
// planner's rules return. The CPU result does not depend on the block size.
TEST(Tuning, TheTableSetsTheBlockSizeItCovers) {
  const ExpertsDesc d = test::small_desc(WeightFormat::mxfp4, ActFormat::none, Activation::silu);
  TuningTable t;
  t.entries = {{0, 12, 32, "32x128/1x8x1/4", "32x128/1x8x1/4"}};  // valid_shape_m = 3 M
  Options tuned;
  tuned.backend = Backend::cpu;
  tuned.tuning = t;
  Options plain;
  plain.backend = Backend::cpu;
  const Experts with_table(d, tuned), without(d, plain);
  EXPECT_NE(with_table.explain(4).find("block_m 32"), std::string::npos);
  EXPECT_NE(with_table.explain(4).find("tuned (0, 12]: block_m 32, gemm1 32x128/1x8x1/4"), std::string::npos)
      << with_table.explain(4);
  EXPECT_EQ(with_table.explain(5).find("tuned"), std::string::npos);  // 15 rows: past the table
  EXPECT_GT(with_table.workspace_bytes(4).workspace2_bytes, without.workspace_bytes(4).workspace2_bytes);
  io::GenerateOptions g;
  g.num_tokens = 4;
  g.seed = 5;
  g.num_threads = 1;
  const io::HostProblem p = io::generate_problem(d, g);
  EXPECT_EQ(test::run_cpu(p, tuned), test::run_cpu(p, plain));
}

// A table tuned in one layout (`moeq tune --layout`) serves only steps in that layout.
TEST(Tuning, ALayoutsTableServesOnlyThatLayout) {
  const ExpertsDesc d = test::small_desc(WeightFormat::mxfp4, ActFormat::none, Activation::silu);
  TuningTable t;
  t.entries = {{0, 12, 32, "32x128/1x8x1/4", "32x128/1x8x1/4"}};
  t.layout = Layout::contiguous;
  EXPECT_TRUE(t.serves(Layout::contiguous));
  EXPECT_FALSE(t.serves(Layout::indexed));
  EXPECT_FALSE(t.serves(Layout::masked));
  for (Layout step : {Layout::indexed, Layout::contiguous}) {
    Options o;
    o.backend = Backend::cpu;
    o.layout = step;
    o.tuning = t;
    const std::string plan = Experts(d, o).explain(4);
    EXPECT_EQ(plan.find("tuned (0, 12]") != std::string::npos, step == Layout::contiguous) << plan;
  }
  t.layout = Layout::auto_select;
  EXPECT_TRUE(t.serves(Layout::indexed) && t.serves(Layout::masked));
}

// Rows in a gap between a table's ranges are planned by the planner's rules, as past its last range.
TEST(Tuning, AGapIsPlannedByThePlannersRules) {
  const ExpertsDesc d = test::small_desc(WeightFormat::mxfp4, ActFormat::none, Activation::silu);
  TuningTable t;
  t.entries = {{0, 4, 32, "32x128/1x8x1/4", "32x128/1x8x1/4"}, {40, 64, 32, "32x128/1x8x1/4", "32x128/1x8x1/4"}};
  Options o;
  o.backend = Backend::cpu;
  o.tuning = t;
  ASSERT_TRUE(plan::tuning_reasons(d, o).empty());
  const Experts experts(d, o);
  for (int64_t M : {int64_t{1}, int64_t{4}, int64_t{16}}) {
    const int64_t rows = plan::valid_shape_m(d, M);
    const std::string plan = experts.explain(M);
    const bool in_range = (rows > 0 && rows <= 4) || (rows > 40 && rows <= 64);
    EXPECT_EQ(plan.find("tuned (") != std::string::npos, in_range) << "M = " << M << " rows " << rows << ": " << plan;
  }
}

// The shipped table serves only options that leave the choice to moeq.
TEST(Tuning, ShippedTableOnlyWhereTheOptionsLeaveTheChoice) {
  const ExpertsDesc d = qwen3_mxfp4();
  const TuningTable* shipped = plan::shipped_tuning(d, "sm_90");
  ASSERT_NE(shipped, nullptr);
  EXPECT_EQ(plan::shipped_tuning_for(d, Options{}, "sm_90"), shipped);
  EXPECT_EQ(plan::shipped_tuning_for(d, Options{}, "sm_80"), nullptr);
  Options o;
  o.shipped_tuning = false;
  EXPECT_EQ(plan::shipped_tuning_for(d, o, "sm_90"), nullptr);
  o = Options{};
  o.block_m = 16;
  EXPECT_EQ(plan::shipped_tuning_for(d, o, "sm_90"), nullptr);
  o = Options{};
  o.batch_invariant = true;
  EXPECT_EQ(plan::shipped_tuning_for(d, o, "sm_90"), nullptr);
  o = Options{};
  o.tuning = qwen3_table();
  EXPECT_EQ(plan::shipped_tuning_for(d, o, "sm_90"), nullptr);
}

// Quantized activations without a table of their own plan with their weights' 16-bit table (the
// same GEMM tiles); a table of their own, where there is one, comes first.
TEST(Tuning, QuantizedActivationsTakeTheSixteenBitTable) {
  const ExpertsDesc d = qwen3_mxfp4();
  const TuningTable* sixteen_bit = plan::shipped_tuning(d, "sm_90");
  ASSERT_NE(sixteen_bit, nullptr);
  for (const char* scheme : {"mxfp4:fp8-token", "mxfp4:mxfp8", "mxfp4:mxfp4"}) {
    ExpertsDesc q = io::find_preset("qwen3-30b-a3b").desc;
    io::apply_scheme(scheme, q);
    ASSERT_NE(q.act_format, ActFormat::none) << scheme;
    EXPECT_EQ(plan::shipped_tuning(q, "sm_90"), sixteen_bit) << scheme;
    EXPECT_EQ(plan::shipped_tuning_for(q, Options{}, "sm_90"), sixteen_bit) << scheme;
    EXPECT_EQ(plan::shipped_tuning(q, "sm_80"), nullptr) << scheme;
  }
  ExpertsDesc no_table = io::find_preset("qwen3-30b-a3b").desc;
  io::apply_scheme("nvfp4:fp8-token", no_table);  // no NVFP4 table
  EXPECT_EQ(plan::shipped_tuning(no_table, "sm_90"), nullptr);
  ExpertsDesc f16 = io::find_preset("qwen3-30b-a3b").desc;
  io::apply_scheme("mxfp4:f16", f16);  // 16-bit activations of another dtype: no fallback
  EXPECT_EQ(plan::shipped_tuning(f16, "sm_90"), nullptr);
}

}  // namespace
}  // namespace moeq
