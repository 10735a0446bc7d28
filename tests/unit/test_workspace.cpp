// Workspace planning (CONTRACT §7, reference-notes §3): placement of the spec buffers, shapes,
// byte sizes, the extra buffers moeq adds, and the layout / block-size choices.
#include "plan/workspace.hpp"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <limits>
#include <map>
#include <random>
#include <set>
#include <string>
#include <vector>

#include "cuda/routing.hpp"
#include "moeq/error.hpp"
#include "moeq/experts.hpp"
#include "reference/routing.hpp"

namespace moeq::plan {
namespace {

using ::testing::ElementsAre;

const std::vector<std::string> kSpecNames = {"quanted_gate_up_input", "gate_up_output", "activation_output",
                                             "quanted_down_input", "down_output", "output"};
const std::vector<std::string> kMetaNames = {"local_ids", "route_chunk_counts", "sorted_ids", "expert_ids", "num_tokens_padded",
                                             "expert_offsets", "inv_permuted_idx", "permuted_src", "error_flags",
                                             "block_table", "num_blocks"};

bool is_spec(const std::string& name) {
  return std::find(kSpecNames.begin(), kSpecNames.end(), name) != kSpecNames.end();
}
bool is_meta(const std::string& name) {
  return std::find(kMetaNames.begin(), kMetaNames.end(), name) != kMetaNames.end();
}

ExpertsDesc make_desc(WeightFormat w, ActFormat a, Activation act, int64_t K, int64_t I, int64_t E,
                      int64_t top_k) {
  ExpertsDesc d;
  d.num_experts = E;
  d.hidden_size = K;
  d.intermediate_size = I;
  d.top_k = top_k;
  d.weight_format = w;
  d.act_format = a;
  d.group_size = 64;
  d.activation.kind = act;
  return d;
}

PlanShape standard(Layout layout, int64_t M, int64_t block_m = 16) {
  PlanShape p;
  p.layout = layout;
  p.num_tokens = M;
  p.block_m = block_m;
  return p;
}

PlanShape masked(int64_t T) {
  PlanShape p;
  p.layout = Layout::masked;
  p.max_tokens_per_expert = T;
  return p;
}

// Names of the spec buffers in workspace `ws`, sorted.
std::vector<std::string> spec_in(const WorkspacePlan& plan, int ws) {
  std::vector<std::string> out;
  for (const auto& b : plan.buffers)
    if (is_spec(b.name) && b.workspace == ws) out.push_back(b.name);
  std::sort(out.begin(), out.end());
  return out;
}

std::vector<std::string> sorted(std::vector<std::string> v) {
  std::sort(v.begin(), v.end());
  return v;
}

void expect_placement(const WorkspacePlan& plan, const std::vector<std::string>& ws1,
                      const std::vector<std::string>& ws2) {
  EXPECT_EQ(spec_in(plan, 1), sorted(ws1)) << plan.to_string();
  EXPECT_EQ(spec_in(plan, 2), sorted(ws2)) << plan.to_string();
  for (const auto& b : plan.buffers)
    if (is_spec(b.name)) {
      EXPECT_EQ(b.offset_bytes, 0) << b.name;
    }
}

TEST(WorkspacePlacement, Standard16Bit) {
  const auto d = make_desc(WeightFormat::int4, ActFormat::none, Activation::silu, 256, 128, 8, 2);
  for (Layout l : {Layout::indexed, Layout::contiguous}) {
    SCOPED_TRACE(to_string(l));
    expect_placement(plan_workspaces(d, standard(l, 10)), {"output", "activation_output"},
                     {"down_output", "gate_up_output"});
  }
}

TEST(WorkspacePlacement, StandardQuantized) {
  for (ActFormat a : {ActFormat::fp8_token, ActFormat::mxfp8, ActFormat::mxfp4}) {
    const auto d = make_desc(WeightFormat::mxfp4, a, Activation::silu, 256, 128, 8, 2);
    for (Layout l : {Layout::indexed, Layout::contiguous}) {
      SCOPED_TRACE(std::string(to_string(a)) + " " + std::string(to_string(l)));
      expect_placement(plan_workspaces(d, standard(l, 10)), {"output", "quanted_down_input", "gate_up_output"},
                       {"down_output", "activation_output", "quanted_gate_up_input"});
    }
  }
}

TEST(WorkspacePlacement, Batched16Bit) {
  const auto d = make_desc(WeightFormat::fp8_block, ActFormat::none, Activation::gelu, 256, 128, 8, 2);
  const auto plan = plan_workspaces(d, masked(5));
  expect_placement(plan, {"down_output", "gate_up_output"}, {"activation_output"});
  EXPECT_EQ(plan.find("output"), nullptr);
  EXPECT_THAT(plan.get("down_output").shape, ElementsAre(8, 5, 256));
}

TEST(WorkspacePlacement, BatchedQuantized) {
  const auto d = make_desc(WeightFormat::int8, ActFormat::fp8_token, Activation::silu, 256, 128, 8, 2);
  const auto plan = plan_workspaces(d, masked(5));
  expect_placement(plan, {"down_output", "activation_output", "quanted_gate_up_input"},
                   {"quanted_down_input", "gate_up_output"});
  EXPECT_EQ(plan.find("output"), nullptr);
  EXPECT_THAT(plan.get("quanted_gate_up_input").shape, ElementsAre(40, 256));
  EXPECT_THAT(plan.get("gate_up_output").shape, ElementsAre(40, 256));
}

TEST(WorkspaceShapes, VllmExampleGated) {
  // SILU, I = 1856, M = 7, top_k = 6: gate_up (42, 3712), activation (42, 1856).
  const auto d = make_desc(WeightFormat::int4, ActFormat::none, Activation::silu, 2048, 1856, 8, 6);
  ASSERT_TRUE(can_implement(d, Options{}).empty());
  for (Layout l : {Layout::indexed, Layout::contiguous}) {
    SCOPED_TRACE(to_string(l));
    const auto plan = plan_workspaces(d, standard(l, 7));
    EXPECT_THAT(plan.get("gate_up_output").shape, ElementsAre(42, 3712));
    EXPECT_THAT(plan.get("activation_output").shape, ElementsAre(42, 1856));
    EXPECT_THAT(plan.get("down_output").shape, ElementsAre(42, 2048));
    EXPECT_THAT(plan.get("output").shape, ElementsAre(7, 2048));
    EXPECT_EQ(plan.get("gate_up_output").dtype, DType::bf16);
    EXPECT_EQ(plan.get("gate_up_output").bytes, 42 * 3712 * 2);
    EXPECT_EQ(plan.get("activation_output").bytes, 42 * 1856 * 2);
  }
}

TEST(WorkspaceShapes, VllmExampleRelu2NoMul) {
  const auto d = make_desc(WeightFormat::mxfp4, ActFormat::none, Activation::relu2_no_mul, 2048, 1856, 8, 6);
  ASSERT_TRUE(can_implement(d, Options{}).empty());
  const auto plan = plan_workspaces(d, standard(Layout::indexed, 7));
  EXPECT_THAT(plan.get("gate_up_output").shape, ElementsAre(42, 1856));
  EXPECT_THAT(plan.get("activation_output").shape, ElementsAre(42, 1856));
}

TEST(WorkspaceShapes, QuantizedBuffers) {
  // Indexed: GEMM1 reads hidden rows directly, so its quantized input has M rows; contiguous
  // quantizes the permuted rows (M*top_k). 4-bit codes count elements; bytes are halved.
  const auto d = make_desc(WeightFormat::mxfp4, ActFormat::mxfp4, Activation::silu, 2048, 1856 - 32, 8, 6);
  ASSERT_TRUE(can_implement(d, Options{}).empty());
  const auto ind = plan_workspaces(d, standard(Layout::indexed, 7));
  EXPECT_THAT(ind.get("quanted_gate_up_input").shape, ElementsAre(7, 2048));
  EXPECT_EQ(ind.get("quanted_gate_up_input").dtype, DType::e2m1);
  EXPECT_EQ(ind.get("quanted_gate_up_input").bytes, 7 * 1024);
  EXPECT_THAT(ind.get("quanted_gate_up_input.scales").shape, ElementsAre(7, 64));
  EXPECT_EQ(ind.get("quanted_gate_up_input.scales").dtype, DType::ue8m0);
  EXPECT_EQ(ind.get("quanted_gate_up_input.scales").bytes, 7 * 64);
  EXPECT_THAT(ind.get("quanted_down_input").shape, ElementsAre(42, 1824));
  EXPECT_EQ(ind.get("quanted_down_input").bytes, 42 * 912);
  EXPECT_THAT(ind.get("quanted_down_input.scales").shape, ElementsAre(42, 57));
  const auto con = plan_workspaces(d, standard(Layout::contiguous, 7));
  EXPECT_THAT(con.get("quanted_gate_up_input").shape, ElementsAre(42, 2048));

  const auto f = make_desc(WeightFormat::int4, ActFormat::fp8_token, Activation::silu, 256, 128, 8, 2);
  const auto fp = plan_workspaces(f, standard(Layout::indexed, 5));
  EXPECT_EQ(fp.get("quanted_down_input").dtype, DType::e4m3);
  EXPECT_EQ(fp.get("quanted_down_input").bytes, 10 * 128);
  EXPECT_THAT(fp.get("quanted_down_input.scales").shape, ElementsAre(10, 1));
  EXPECT_EQ(fp.get("quanted_down_input.scales").dtype, DType::f32);
  EXPECT_EQ(fp.get("quanted_down_input.scales").bytes, 10 * 4);
  // No quantized buffers for 16-bit activations.
  const auto b16 = plan_workspaces(make_desc(WeightFormat::int4, ActFormat::none, Activation::silu, 256, 128, 8, 2),
                                   standard(Layout::indexed, 5));
  for (const auto& b : b16.buffers) EXPECT_EQ(b.name.find("quanted"), std::string::npos) << b.name;
}

TEST(WorkspaceShapes, GetThrowsForAbsentBuffer) {
  const auto d = make_desc(WeightFormat::int4, ActFormat::none, Activation::silu, 256, 128, 8, 2);
  const auto plan = plan_workspaces(d, standard(Layout::indexed, 5));
  EXPECT_THROW(plan.get("quanted_gate_up_input"), Error);
  EXPECT_EQ(plan.find("permuted_hidden"), nullptr);
  EXPECT_NE(plan.find("sorted_ids"), nullptr);
}

TEST(WorkspaceMetadata, IndexedCapacity) {
  const auto d = make_desc(WeightFormat::int4, ActFormat::none, Activation::silu, 256, 128, 7, 3);
  for (int64_t bm : {16, 24, 32, 48, 64}) {
    for (int64_t M : {0, 1, 13, 100}) {
      const auto plan = plan_workspaces(d, standard(Layout::indexed, M, bm));
      const int64_t cap = ref::align_capacity(M * 3, 7, bm);
      EXPECT_EQ(cap % bm, 0);
      EXPECT_GE(cap, M * 3 + std::min<int64_t>(7, M * 3) * (bm - 1));
      EXPECT_THAT(plan.get("sorted_ids").shape, ElementsAre(cap));
      EXPECT_EQ(plan.get("sorted_ids").dtype, DType::i32);
      EXPECT_EQ(plan.get("sorted_ids").bytes, cap * 4);
      EXPECT_THAT(plan.get("expert_ids").shape, ElementsAre(cap / bm));
      EXPECT_THAT(plan.get("num_tokens_padded").shape, ElementsAre(1));
      EXPECT_THAT(plan.get("local_ids").shape, ElementsAre(M * 3));
      // One chunk of E + 1 bucket counts for these few slots.
      EXPECT_THAT(plan.get("route_chunk_counts").shape, ElementsAre(8));
      EXPECT_EQ(plan.find("expert_offsets"), nullptr);
      EXPECT_EQ(plan.find("permuted_hidden"), nullptr);
    }
  }
}

// The chunked routing path's chunks: whole units of kRouteChunkUnit slots, at most kMaxRouteChunks
// of them, covering every slot; one chunk (E + 1 counts) even for no slots.
TEST(WorkspaceMetadata, RouteChunksCoverTheSlots) {
  EXPECT_EQ(cuda::route_num_chunks(0), 1);
  EXPECT_EQ(cuda::route_chunk_counts_elems(0, 7), 8);
  EXPECT_EQ(cuda::route_num_chunks(1024), 1);
  EXPECT_EQ(cuda::route_num_chunks(1025), 2);
  EXPECT_EQ(cuda::route_num_chunks(32768), 32);
  EXPECT_EQ(cuda::route_chunk_counts_elems(32768, 128), 32 * 129);
  EXPECT_EQ(cuda::route_chunk_slots(128 * 1024), 1024);
  EXPECT_EQ(cuda::route_chunk_slots(128 * 1024 + 1), 2048);
  for (const int64_t slots : {1, 8, 2047, 4096, 40000, 131072, 131073, 160000, 1 << 22}) {
    const int64_t chunk = cuda::route_chunk_slots(slots), chunks = cuda::route_num_chunks(slots);
    EXPECT_EQ(chunk % cuda::kRouteChunkUnit, 0) << slots;
    EXPECT_LE(chunks, cuda::kMaxRouteChunks) << slots;
    EXPECT_GE(chunks * chunk, slots) << slots;
    EXPECT_LT((chunks - 1) * chunk, slots) << slots;
  }
}

TEST(WorkspaceMetadata, ContiguousHasPermutedHiddenInWorkspace1) {
  for (ActFormat a : {ActFormat::none, ActFormat::fp8_token}) {
    auto d = make_desc(WeightFormat::int4, a, Activation::silu, 256, 128, 7, 3);
    d.act_dtype = DType::f16;
    const auto plan = plan_workspaces(d, standard(Layout::contiguous, 11));
    const auto& ph = plan.get("permuted_hidden");
    EXPECT_EQ(ph.workspace, 1);
    EXPECT_THAT(ph.shape, ElementsAre(33, 256));
    EXPECT_EQ(ph.dtype, DType::f16);
    EXPECT_EQ(ph.bytes, 33 * 256 * 2);
    // The first stage (quantize or GEMM1) writes workspace 2 while it reads permuted_hidden.
    EXPECT_EQ(plan.get(a == ActFormat::none ? "gate_up_output" : "quanted_gate_up_input").workspace, 2);
    EXPECT_THAT(plan.get("expert_offsets").shape, ElementsAre(8));
    EXPECT_EQ(plan.get("expert_offsets").dtype, DType::i64);
    EXPECT_THAT(plan.get("inv_permuted_idx").shape, ElementsAre(33));
    EXPECT_THAT(plan.get("permuted_src").shape, ElementsAre(33));
    EXPECT_EQ(plan.find("sorted_ids"), nullptr);
  }
}

// GEMM1's input in the MMA's K order (indexed, 16-bit activations): [M, K] in the workspace GEMM1 does not
// write, past activation_output (which a GEMM1 with the activation in its epilogue writes while it reads this).
TEST(WorkspaceMetadata, IndexedHasMmaOrderedHiddenPastTheActivationOutput) {
  for (DType dtype : {DType::bf16, DType::f16}) {
    auto d = make_desc(WeightFormat::mxfp4, ActFormat::none, Activation::silu, 256, 128, 7, 3);
    d.act_dtype = dtype;
    const auto plan = plan_workspaces(d, standard(Layout::indexed, 11));
    const auto& ordered = plan.get("mma_ordered_hidden");
    EXPECT_THAT(ordered.shape, ElementsAre(11, 256));
    EXPECT_EQ(ordered.dtype, dtype);
    EXPECT_NE(ordered.workspace, plan.get("gate_up_output").workspace);
    EXPECT_EQ(ordered.workspace, plan.get("output").workspace);
    const auto& activation = plan.get("activation_output");
    EXPECT_EQ(activation.workspace, ordered.workspace);
    EXPECT_GE(ordered.offset_bytes, activation.offset_bytes + activation.bytes);
    EXPECT_LT(ordered.offset_bytes, activation.offset_bytes + activation.bytes + 256);
    EXPECT_EQ(ordered.bytes, plan.get("output").bytes);
  }
  const auto quantized =
      plan_workspaces(make_desc(WeightFormat::mxfp4, ActFormat::mxfp8, Activation::silu, 256, 128, 7, 3),
                      standard(Layout::indexed, 11));
  EXPECT_EQ(quantized.find("mma_ordered_hidden"), nullptr);
}

TEST(WorkspaceMetadata, MaskedHasOnlyTheGemmBlockTable) {
  const auto d = make_desc(WeightFormat::int4, ActFormat::fp8_token, Activation::silu, 256, 128, 7, 3);
  const auto plan = plan_workspaces(d, masked(4));
  const std::set<std::string> allowed = {"error_flags", "block_table", "num_blocks"};
  for (const auto& b : plan.buffers) {
    EXPECT_TRUE(!is_meta(b.name) || allowed.count(b.name)) << b.name;
    EXPECT_NE(b.name, "permuted_hidden");
  }
}

// Stage interval [first writer, last reader] of every buffer, in the step's stage order:
// 0 route, 1 permute, 2 quantize GEMM1 input, 3 dequantize it (CUDA), 4 GEMM1, 5 activation,
// 6 quantize GEMM2 input, 7 dequantize it (CUDA), 8 GEMM2, 9 reduce. Two buffers live in a common
// stage must not share bytes. (The CPU backend reads the codes in its GEMMs: stages 3 and 7 are
// empty there and the codes live on to 4 and 8, which only widens their ranges below. The CUDA
// backend writes GEMM2's values and their scales in stage 5, from gate_up_output, and with the
// contiguous layout GEMM1's token values into permuted_hidden in stage 2, permuted in stage 3.)
// activation_in_gemm1: GEMM1 may write activation_output itself (its activation epilogue; 16-bit activations, not
// the contiguous layout, whose permuted_hidden GEMM1 reads where activation_output goes).
std::pair<int, int> live_range(const std::string& name, bool quantized, bool activation_in_gemm1) {
  std::string base = name;
  if (const auto dot = name.find('.'); dot != std::string::npos) base = name.substr(0, dot);
  if (is_meta(base)) return {0, 9};
  if (base == "permuted_hidden") return {1, quantized ? 3 : 4};
  if (base == "mma_ordered_hidden") return {1, 4};
  if (base == "quanted_gate_up_input") return {2, 4};
  if (base == "dequantized_gate_up_input") return {3, 4};
  if (base == "gate_up_output") return {4, 5};
  if (base == "activation_output") return {activation_in_gemm1 ? 4 : 5, quantized ? 6 : 8};
  if (base == "quanted_down_input") return {6, 8};
  if (base == "dequantized_down_input") return {5, 8};
  if (base == "down_output") return {8, 9};
  if (base == "output") return {9, 9};
  ADD_FAILURE() << "unknown buffer " << name;
  return {0, 7};
}

void check_plan_invariants(const ExpertsDesc& d, const PlanShape& p, const WorkspacePlan& plan) {
  const bool quantized = d.act_format != ActFormat::none;
  const bool batched = p.layout == Layout::masked;
  const int64_t rows = batched ? d.num_experts * p.max_tokens_per_expert : p.num_tokens * d.top_k;
  std::set<std::string> names;
  int64_t end1 = 0, end2 = 0;
  for (const auto& b : plan.buffers) {
    SCOPED_TRACE(b.name);
    EXPECT_TRUE(names.insert(b.name).second) << "duplicate";
    ASSERT_TRUE(b.workspace == 1 || b.workspace == 2);
    int64_t elems = 1;
    for (int64_t s : b.shape) elems *= s;
    EXPECT_EQ(b.bytes, (elems * dtype_bits(b.dtype) + 7) / 8);
    EXPECT_GE(b.offset_bytes, 0);
    if (is_spec(b.name)) {
      EXPECT_EQ(b.offset_bytes, 0);
    }
    (b.workspace == 1 ? end1 : end2) = std::max(b.workspace == 1 ? end1 : end2, b.offset_bytes + b.bytes);
  }
  EXPECT_EQ(plan.workspace1_bytes, end1);
  EXPECT_EQ(plan.workspace2_bytes, end2);

  // The expected set of buffers.
  std::set<std::string> expected = {"gate_up_output", "activation_output", "down_output"};
  if (!batched) expected.insert("output");
  if (quantized)
    for (const char* n : {"quanted_gate_up_input", "quanted_gate_up_input.scales", "dequantized_gate_up_input",
                          "quanted_down_input", "quanted_down_input.scales", "dequantized_down_input",
                          "dequantized_down_input.scales"})
      expected.insert(n);
  expected.insert("error_flags");
  if (!batched)
    for (const char* n : {"local_ids", "route_chunk_counts"}) expected.insert(n);
  if (p.layout != Layout::indexed)
    for (const char* n : {"block_table", "num_blocks"}) expected.insert(n);
  if (p.layout == Layout::indexed)
    for (const char* n : {"sorted_ids", "expert_ids", "num_tokens_padded"}) expected.insert(n);
  if (p.layout == Layout::contiguous)
    for (const char* n : {"permuted_hidden", "expert_offsets", "inv_permuted_idx", "permuted_src"})
      expected.insert(n);
  if (p.layout == Layout::indexed && !quantized) expected.insert("mma_ordered_hidden");
  EXPECT_EQ(names, expected);

  // Shapes of the spec buffers.
  EXPECT_THAT(plan.get("gate_up_output").shape, ElementsAre(rows, d.gemm1_n()));
  EXPECT_THAT(plan.get("activation_output").shape, ElementsAre(rows, d.intermediate_size));
  if (!batched) {
    EXPECT_THAT(plan.get("output").shape, ElementsAre(p.num_tokens, d.hidden_size));
  }

  // Scales right after (never inside) their codes, same workspace.
  for (const char* codes : {"quanted_gate_up_input", "quanted_down_input"}) {
    const auto* c = plan.find(codes);
    const auto* s = plan.find(std::string(codes) + ".scales");
    if (!quantized) continue;
    ASSERT_NE(c, nullptr);
    ASSERT_NE(s, nullptr);
    EXPECT_EQ(s->workspace, c->workspace);
    EXPECT_GE(s->offset_bytes, c->offset_bytes + c->bytes) << codes;
  }

  // Metadata: workspace 2, past every other workspace-2 buffer, not overlapping each other.
  int64_t other_end2 = 0;
  for (const auto& b : plan.buffers)
    if (b.workspace == 2 && !is_meta(b.name)) other_end2 = std::max(other_end2, b.offset_bytes + b.bytes);
  for (const auto& b : plan.buffers) {
    if (!is_meta(b.name)) continue;
    EXPECT_EQ(b.workspace, 2) << b.name;
    EXPECT_GE(b.offset_bytes, other_end2) << b.name;
  }

  // No two buffers that are live in a common stage share a byte.
  for (size_t i = 0; i < plan.buffers.size(); ++i)
    for (size_t j = i + 1; j < plan.buffers.size(); ++j) {
      const auto& a = plan.buffers[i];
      const auto& b = plan.buffers[j];
      if (a.workspace != b.workspace || a.bytes == 0 || b.bytes == 0) continue;
      const bool activation_in_gemm1 = !quantized && p.layout != Layout::contiguous;
      const auto ra = live_range(a.name, quantized, activation_in_gemm1),
                 rb = live_range(b.name, quantized, activation_in_gemm1);
      const bool live_together = ra.first <= rb.second && rb.first <= ra.second;
      const bool overlap = a.offset_bytes < b.offset_bytes + b.bytes && b.offset_bytes < a.offset_bytes + a.bytes;
      EXPECT_FALSE(live_together && overlap) << a.name << " and " << b.name << " overlap\n" << plan.to_string();
    }
}

TEST(WorkspaceProperty, RandomShapesLayoutsAndFormats) {
  std::mt19937_64 rng(12345);
  auto pick = [&](int64_t lo, int64_t hi) { return std::uniform_int_distribution<int64_t>(lo, hi)(rng); };
  const auto& pairs = supported_pairs();
  const auto activations = all_values<Activation>();
  int checked = 0;
  for (int iter = 0; iter < 600; ++iter) {
    const auto& pair = pairs[static_cast<size_t>(pick(0, static_cast<int64_t>(pairs.size()) - 1))];
    const int64_t E = pick(1, 20);
    ExpertsDesc d = make_desc(pair.weight, pair.act, activations[static_cast<size_t>(pick(0, 8))],
                              64 * pick(1, 12), 64 * pick(1, 8), E, pick(1, std::min<int64_t>(E, 8)));
    d.act_dtype = pick(0, 1) ? DType::bf16 : DType::f16;
    ASSERT_TRUE(can_implement(d, Options{}).empty()) << d.to_string();
    const Layout layout = std::vector<Layout>{Layout::indexed, Layout::contiguous, Layout::masked}[static_cast<size_t>(pick(0, 2))];
    PlanShape p = layout == Layout::masked ? masked(pick(1, 40)) : standard(layout, pick(0, 300), 16 * pick(1, 4));
    SCOPED_TRACE(d.to_string() + " layout " + std::string(to_string(layout)) + " M=" + std::to_string(p.num_tokens) +
                 " T=" + std::to_string(p.max_tokens_per_expert) + " bm=" + std::to_string(p.block_m));
    const auto plan = plan_workspaces(d, p);
    check_plan_invariants(d, p, plan);
    if (::testing::Test::HasFailure()) return;
    ++checked;
  }
  EXPECT_EQ(checked, 600);
}

TEST(WorkspaceSizes, ExpertsWorkspaceBytesMatchesPlan) {
  const auto d = make_desc(WeightFormat::int4, ActFormat::fp8_token, Activation::silu, 256, 128, 8, 2);
  for (Layout l : {Layout::auto_select, Layout::indexed, Layout::contiguous}) {
    for (int64_t bm : {0, 32}) {
      Options o;
      o.layout = l;
      o.block_m = bm;
      const Experts ex(d, o);
      for (int64_t M : {1, 7, 60, 255, 256, 1000}) {
        PlanShape p = standard(choose_layout(d, l, M, false), M, bm > 0 ? bm : choose_block_m(d, M));
        const auto plan = plan_workspaces(d, p);
        const auto ws = ex.workspace_bytes(M);
        EXPECT_EQ(ws.workspace1_bytes, plan.workspace1_bytes) << M;
        EXPECT_EQ(ws.workspace2_bytes, plan.workspace2_bytes) << M;
        EXPECT_GT(ws.workspace1_bytes, 0);
        EXPECT_EQ(ex.layout_for(M, false), p.layout);
      }
    }
  }
  const Experts ex(d, Options{});
  const auto plan = plan_workspaces(d, masked(9));
  EXPECT_EQ(ex.workspace_bytes(0, 9).workspace1_bytes, plan.workspace1_bytes);
  EXPECT_EQ(ex.workspace_bytes(0, 9).workspace2_bytes, plan.workspace2_bytes);
  EXPECT_EQ(ex.layout_for(5, true), Layout::masked);
  // More rows never need less workspace.
  EXPECT_LT(ex.workspace_bytes(10).workspace1_bytes, ex.workspace_bytes(100).workspace1_bytes);
  EXPECT_LT(ex.workspace_bytes(10).workspace2_bytes, ex.workspace_bytes(100).workspace2_bytes);
}

TEST(WorkspaceChoice, LayoutBatchedAndExplicit) {
  const auto d = make_desc(WeightFormat::int4, ActFormat::none, Activation::silu, 256, 128, 8, 2);
  for (Layout req : {Layout::auto_select, Layout::indexed, Layout::contiguous, Layout::masked})
    EXPECT_EQ(choose_layout(d, req, 3, true), Layout::masked);
  for (int64_t M : {1, 100, 100000}) {
    EXPECT_EQ(choose_layout(d, Layout::indexed, M, false), Layout::indexed);
    EXPECT_EQ(choose_layout(d, Layout::contiguous, M, false), Layout::contiguous);
  }
}

TEST(WorkspaceChoice, AutoIsIndexedForUnbatchedInputAtEveryM) {
  // The contiguous layout only when asked for: its permute kernel cost more than GEMM1's row
  // gather saved at every M measured (plan::choose_layout).
  const auto d = make_desc(WeightFormat::int4, ActFormat::none, Activation::silu, 256, 128, 8, 2);
  for (int64_t M : {0, 1, 255, 256, 600, 100000}) EXPECT_EQ(choose_layout(d, Layout::auto_select, M, false), Layout::indexed) << M;
  auto ep = d;  // expert parallelism changes nothing
  ep.num_experts = 4;
  ep.num_global_experts = 16;
  EXPECT_EQ(choose_layout(ep, Layout::auto_select, 511, false), Layout::indexed);
  EXPECT_EQ(choose_layout(ep, Layout::auto_select, 511, true), Layout::masked);
}

TEST(WorkspaceChoice, BlockM) {
  // E = 8, top_k = 2: M/4 rows per expert; the smallest BM in {8, 16, 24, 32, 48, 64} with rows/BM < 0.9
  // (24 for 4-bit codes only), else by expected_block_rows among 64, 80, 96, 128 and 144.
  const auto d = make_desc(WeightFormat::int4, ActFormat::none, Activation::silu, 256, 128, 8, 2);
  EXPECT_EQ(choose_block_m(d, 0), 8);
  EXPECT_EQ(choose_block_m(d, 1), 8);
  EXPECT_EQ(choose_block_m(d, 28), 8);    // 7 / 8 = 0.875
  EXPECT_EQ(choose_block_m(d, 29), 16);   // 7.25 / 8 = 0.906
  EXPECT_EQ(choose_block_m(d, 57), 16);   // 14.25 / 16 = 0.89
  EXPECT_EQ(choose_block_m(d, 58), 24);   // 14.5 / 16 = 0.906
  EXPECT_EQ(choose_block_m(d, 86), 24);   // 21.5 / 24 = 0.896
  EXPECT_EQ(choose_block_m(d, 87), 32);   // 21.75 / 24 = 0.906
  EXPECT_EQ(choose_block_m(d, 115), 32);  // 28.75 / 32 = 0.898
  EXPECT_EQ(choose_block_m(d, 116), 48);
  EXPECT_EQ(choose_block_m(d, 172), 48);  // 43 / 48 = 0.896
  EXPECT_EQ(choose_block_m(d, 173), 64);
  EXPECT_EQ(choose_block_m(d, 230), 64);  // 57.5 rows per expert: 57.5 / 64 = 0.898
  // From 57.6 rows the warp-specialized blocks of 80, 96, 128 or 144 rows, whichever pads the experts
  // least (rows ~ Normal(mean, sqrt(mean)), 70 rows more per block).
  EXPECT_EQ(choose_block_m(d, 256), 80);   // 64 rows: half the experts would take two 64-row blocks
  EXPECT_EQ(choose_block_m(d, 300), 96);   // 75: 28% of the experts past 80
  EXPECT_EQ(choose_block_m(d, 360), 128);  // 90
  EXPECT_EQ(choose_block_m(d, 512), 144);  // 128: half the experts would take two 128-row blocks
  EXPECT_EQ(choose_block_m(d, 600), 80);   // 150: ~2.2 blocks of 80 against ~1.7 of 144
  EXPECT_EQ(choose_block_m(d, 768), 128);  // 192: two of 128
  EXPECT_EQ(choose_block_m(d, 1024), 144);  // 256: two of 144
  EXPECT_EQ(choose_block_m(d, 100000), 144);
  // 8-bit codes alike (GEMM v13's direct-load tiles).
  const auto f8 = make_desc(WeightFormat::fp8_block, ActFormat::none, Activation::silu, 256, 128, 8, 2);
  EXPECT_EQ(choose_block_m(f8, 8), 8);    // 2 rows per expert
  EXPECT_EQ(choose_block_m(f8, 28), 8);
  EXPECT_EQ(choose_block_m(f8, 29), 16);
  EXPECT_EQ(choose_block_m(f8, 57), 16);
  EXPECT_EQ(choose_block_m(f8, 58), 32);  // no 24-row blocks for 8-bit codes (not timed)
}

TEST(WorkspaceChoice, ExpectedBlockRows) {
  // Far from a block boundary an expert takes ceil(mean / b) blocks; on one, half take one more.
  EXPECT_NEAR(expected_block_rows(60.0, 128, 0.0), 128.0, 1e-6);
  EXPECT_NEAR(expected_block_rows(128.0, 128, 0.0), 1.5 * 128.0, 1e-6);
  EXPECT_NEAR(expected_block_rows(256.0, 128, 20.0), 2.5 * 148.0, 0.1);
  EXPECT_NEAR(expected_block_rows(500.0, 144, 10.0), 4.0 * 154.0, 0.5);
  EXPECT_NEAR(expected_block_rows(0.0, 64, 0.0), 0.5 * 64.0, 0.5);  // sigma 1: P(X > 0) = 1/2
  EXPECT_NEAR(expected_block_rows(1e9, 100, 0.0), 1e9 + 50.0, 1.0);    // far blocks counted, not summed
  EXPECT_TRUE(std::isinf(expected_block_rows(std::nan(""), 64, 0.0)));
  EXPECT_TRUE(std::isinf(expected_block_rows(std::numeric_limits<double>::infinity(), 64, 0.0)));
}

TEST(WorkspaceChoice, ValidShapeM) {
  auto d = make_desc(WeightFormat::int4, ActFormat::none, Activation::silu, 256, 128, 8, 2);
  EXPECT_EQ(valid_shape_m(d, 0), 0);
  EXPECT_EQ(valid_shape_m(d, 7), 14);  // E = E_g: M * top_k
  d.num_experts = 3;
  d.num_global_experts = 8;
  EXPECT_EQ(valid_shape_m(d, 5), 4);  // 5*2*3/8 = 3.75 -> 4 (ceil)
  EXPECT_EQ(valid_shape_m(d, 4), 3);  // 24/8 = 3 exactly
  EXPECT_EQ(valid_shape_m(d, 1), 1);  // 0.75 -> 1
  d.num_global_experts = 0;  // 0 means E
  EXPECT_EQ(valid_shape_m(d, 5), 10);
}

TEST(WorkspaceMasked, SizesDependOnTNotOnM) {
  // A caller sizes the workspaces once for T and may pass any num_tokens with batched input.
  const auto d = make_desc(WeightFormat::mxfp4, ActFormat::none, Activation::silu, 256, 128, 7, 3);
  Options o;
  o.layout = Layout::masked;
  const Experts experts(d, o);
  const auto reference = experts.workspace_bytes(0, 40);
  for (int64_t m : {1, 7, 129, 100000}) {
    const auto ws = experts.workspace_bytes(m, 40);
    EXPECT_EQ(ws.workspace1_bytes, reference.workspace1_bytes) << m;
    EXPECT_EQ(ws.workspace2_bytes, reference.workspace2_bytes) << m;
  }
  EXPECT_THROW(experts.workspace_bytes(16), Error) << "masked needs T";
}

}  // namespace
}  // namespace moeq::plan
