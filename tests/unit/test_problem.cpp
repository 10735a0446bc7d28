// Synthetic problem generation and the problem file format (save_problem / load_problem).
#include "io/problem.hpp"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "tests/unit/error_test_util.hpp"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <functional>
#include <iterator>
#include <set>
#include <string>

#include "io/problem_file.hpp"
#include "io/safetensors.hpp"
#include "moeq/error.hpp"

namespace moeq::io {
namespace {

using ::testing::HasSubstr;
namespace fs = std::filesystem;

ExpertsDesc small_desc(WeightFormat w, ActFormat a = ActFormat::none, int64_t K = 128, int64_t I = 64) {
  ExpertsDesc d;
  d.num_experts = 4;
  d.hidden_size = K;
  d.intermediate_size = I;
  d.top_k = 2;
  d.weight_format = w;
  d.act_format = a;
  d.group_size = 64;
  return d;
}

GenerateOptions gen(int64_t M, uint64_t seed, int threads = 1) {
  GenerateOptions o;
  o.num_tokens = M;
  o.seed = seed;
  o.num_threads = threads;
  return o;
}

std::string temp_path(const std::string& name) {
  return (fs::path(::testing::TempDir()) / ("moeq_test_problem_" + name + ".safetensors")).string();
}

std::vector<uint8_t> file_bytes(const std::string& path) {
  std::ifstream f(path, std::ios::binary);
  return {std::istreambuf_iterator<char>(f), std::istreambuf_iterator<char>()};
}

using test::error_of;

void expect_same_weights(const ref::QuantizedWeights& a, const ref::QuantizedWeights& b) {
  EXPECT_EQ(a.codes, b.codes);
  EXPECT_EQ(a.scales, b.scales);
  EXPECT_EQ(a.global_scales, b.global_scales);
  EXPECT_EQ(a.zero_points, b.zero_points);
  EXPECT_EQ(a.bias, b.bias);
}

void expect_same_problem(const HostProblem& a, const HostProblem& b) {
  expect_same_weights(*a.w13, *b.w13);
  expect_same_weights(*a.w2, *b.w2);
  EXPECT_EQ(a.num_tokens, b.num_tokens);
  EXPECT_EQ(a.hidden, b.hidden);
  EXPECT_EQ(a.topk_ids_dtype, b.topk_ids_dtype);
  EXPECT_EQ(a.topk_ids, b.topk_ids);
  EXPECT_EQ(a.topk_weights_dtype, b.topk_weights_dtype);
  EXPECT_EQ(a.topk_weights, b.topk_weights);
  EXPECT_EQ(a.expert_map, b.expert_map);
  EXPECT_EQ(a.max_tokens_per_expert, b.max_tokens_per_expert);
  EXPECT_EQ(a.expert_num_tokens, b.expert_num_tokens);
}

std::vector<int32_t> ids_of(const HostProblem& p) {
  std::vector<int32_t> ids(p.topk_ids.size() / 4);
  std::memcpy(ids.data(), p.topk_ids.data(), p.topk_ids.size());
  return ids;
}

std::vector<float> weights_of(const HostProblem& p) {
  std::vector<float> w(p.topk_weights.size() / 4);
  std::memcpy(w.data(), p.topk_weights.data(), p.topk_weights.size());
  return w;
}

TEST(ProblemGenerate, SameSeedSameBytes) {
  auto d = small_desc(WeightFormat::int4);
  d.has_zero_point = true;
  d.bias_dtype = DType::f32;
  const HostProblem a = generate_problem(d, gen(9, 42, 1));
  const HostProblem b = generate_problem(d, gen(9, 42, 3));  // thread count does not matter
  expect_same_problem(a, b);
  EXPECT_EQ(a.hidden.size(), 9u * 128 * 2);
  EXPECT_EQ(a.topk_ids.size(), 9u * 2 * 4);
  EXPECT_EQ(a.w13->codes.size(), static_cast<size_t>(d.w13().code_bytes()));

  const HostProblem c = generate_problem(d, gen(9, 43, 1));
  EXPECT_NE(a.hidden, c.hidden);
  EXPECT_NE(a.w13->codes, c.w13->codes);
  EXPECT_NE(a.w2->scales, c.w2->scales);
  EXPECT_NE(a.w13->bias, c.w13->bias);
  EXPECT_NE(a.topk_weights, c.topk_weights);
  // Not all-zero data.
  EXPECT_TRUE(std::any_of(a.hidden.begin(), a.hidden.end(), [](uint8_t x) { return x != 0; }));
}

TEST(ProblemGenerate, RoutingIsAValidTopK) {
  auto d = small_desc(WeightFormat::fp8_channel);
  d.num_experts = 7;
  d.top_k = 3;
  const HostProblem p = generate_problem(d, gen(50, 5));
  const auto ids = ids_of(p);
  const auto w = weights_of(p);
  ASSERT_EQ(ids.size(), 150u);
  EXPECT_TRUE(p.expert_map.empty());
  EXPECT_EQ(p.topk_ids_dtype, DType::i32);
  EXPECT_EQ(p.topk_weights_dtype, DType::f32);
  std::set<int32_t> used;
  for (int64_t t = 0; t < 50; ++t) {
    std::set<int32_t> row;
    double sum = 0;
    for (int64_t k = 0; k < 3; ++k) {
      const int32_t e = ids[t * 3 + k];
      EXPECT_GE(e, 0);
      EXPECT_LT(e, 7);
      row.insert(e);
      used.insert(e);
      EXPECT_GT(w[t * 3 + k], 0.0f);
      sum += w[t * 3 + k];
    }
    EXPECT_EQ(row.size(), 3u) << "token " << t << " has a repeated expert";
    EXPECT_NEAR(sum, 1.0, 1e-5) << "token " << t;
  }
  EXPECT_EQ(used.size(), 7u);  // 50 tokens reach every expert
}

TEST(ProblemGenerate, ExpertParallelRanks) {
  auto d = small_desc(WeightFormat::int8);
  d.num_experts = 8;
  const HostProblem full = generate_problem(d, gen(12, 7));
  EXPECT_EQ(full.desc.num_experts, 8);
  EXPECT_TRUE(full.expert_map.empty());
  const int64_t per_expert = full.w13->codes.size() / 8;
  for (int rank = 0; rank < 4; ++rank) {
    GenerateOptions o = gen(12, 7);
    o.ep_size = 4;
    o.ep_rank = rank;
    const HostProblem p = generate_problem(d, o);
    SCOPED_TRACE(rank);
    EXPECT_EQ(p.desc.num_experts, 2);
    EXPECT_EQ(p.desc.global_experts(), 8);
    ASSERT_EQ(p.expert_map.size(), 8u);
    for (int32_t g = 0; g < 8; ++g)
      EXPECT_EQ(p.expert_map[g], g / 2 == rank ? g % 2 : -1) << "global expert " << g;
    // Routing is global: identical on every rank; the weights are the global experts' own.
    EXPECT_EQ(p.topk_ids, full.topk_ids);
    EXPECT_EQ(p.topk_weights, full.topk_weights);
    EXPECT_EQ(p.hidden, full.hidden);
    ASSERT_EQ(static_cast<int64_t>(p.w13->codes.size()), 2 * per_expert);
    EXPECT_TRUE(std::equal(p.w13->codes.begin(), p.w13->codes.end(),
                           full.w13->codes.begin() + 2 * rank * per_expert));
    EXPECT_TRUE(can_implement(p.desc, Options{}).empty());
  }
  GenerateOptions bad = gen(4, 7);
  bad.ep_size = 3;  // does not divide 8
  EXPECT_THAT(error_of([&] { generate_problem(d, bad); }), HasSubstr("ep_size = 3"));
  bad.ep_size = 4;
  bad.ep_rank = 4;
  EXPECT_THAT(error_of([&] { generate_problem(d, bad); }), HasSubstr("ep_rank = 4"));
  EXPECT_THAT(error_of([&] { generate_problem(d, gen(-1, 0)); }), HasSubstr("num_tokens = -1"));
}

void check_batched(const ExpertsDesc& d, GenerateOptions o) {
  o.batched = false;
  const HostProblem standard = generate_problem(d, o);
  o.batched = true;
  const HostProblem p = generate_problem(d, o);
  ASSERT_TRUE(p.is_batched());
  const int64_t E = p.desc.num_experts, K = d.hidden_size, top_k = d.top_k;
  const auto ids = ids_of(p);
  EXPECT_EQ(p.topk_ids, standard.topk_ids);
  // Local slots, in increasing flat order per local expert.
  std::vector<std::vector<int64_t>> slots(static_cast<size_t>(E));
  for (size_t f = 0; f < ids.size(); ++f) {
    const int32_t local = p.expert_map.empty() ? ids[f] : p.expert_map[ids[f]];
    if (local >= 0) slots[local].push_back(static_cast<int64_t>(f));
  }
  ASSERT_EQ(p.expert_num_tokens.size(), static_cast<size_t>(E));
  int64_t total = 0, expected_total = 0, max_count = 0;
  for (int64_t e = 0; e < E; ++e) {
    EXPECT_EQ(p.expert_num_tokens[e], static_cast<int32_t>(slots[e].size())) << "expert " << e;
    total += p.expert_num_tokens[e];
    expected_total += static_cast<int64_t>(slots[e].size());
    max_count = std::max<int64_t>(max_count, static_cast<int64_t>(slots[e].size()));
  }
  EXPECT_EQ(total, expected_total);
  EXPECT_EQ(p.max_tokens_per_expert, std::max<int64_t>(1, max_count));
  const int64_t T = p.max_tokens_per_expert;
  const size_t row_bytes = static_cast<size_t>(K) * 2;
  ASSERT_EQ(p.hidden.size(), static_cast<size_t>(E * T) * row_bytes);
  EXPECT_EQ(p.output_rows(), E * T);
  for (int64_t e = 0; e < E; ++e)
    for (int64_t i = 0; i < T; ++i) {
      const uint8_t* row = &p.hidden[static_cast<size_t>(e * T + i) * row_bytes];
      if (i < static_cast<int64_t>(slots[e].size())) {
        const int64_t token = slots[e][i] / top_k;
        EXPECT_EQ(std::memcmp(row, &standard.hidden[static_cast<size_t>(token) * row_bytes], row_bytes), 0)
            << "expert " << e << " row " << i << " should be token " << token;
      } else {
        EXPECT_TRUE(std::all_of(row, row + row_bytes, [](uint8_t x) { return x == 0; }))
            << "expert " << e << " padding row " << i;
      }
    }
}

TEST(ProblemGenerate, BatchedDispatch) {
  auto d = small_desc(WeightFormat::mxfp8);
  d.num_experts = 6;
  d.top_k = 2;
  check_batched(d, gen(20, 11));
  GenerateOptions o = gen(20, 12);
  o.ep_size = 3;
  o.ep_rank = 1;
  check_batched(d, o);  // only rank 1's slots count
}

// ---- Files ----

HostProblem generated(const ExpertsDesc& d, int64_t M, bool batched = false) {
  EXPECT_TRUE(can_implement(d, Options{}).empty()) << d.to_string();
  GenerateOptions o = gen(M, 99);
  o.batched = batched;
  return generate_problem(d, o);
}

void expect_round_trip(const std::string& name, HostProblem p) {
  SCOPED_TRACE(name);
  const std::string path = temp_path(name), path2 = temp_path(name + "_again");
  save_problem(path, p);
  const HostProblem q = load_problem(path, path);
  expect_same_problem(p, q);
  EXPECT_EQ(q.layout, p.layout);
  EXPECT_EQ(q.desc.to_string(), p.desc.to_string());
  EXPECT_EQ(q.desc.w13().scale_dtype, p.desc.w13().scale_dtype);
  EXPECT_EQ(q.desc.num_global_scales_w13, p.desc.num_global_scales_w13);
  EXPECT_FLOAT_EQ(q.desc.activation.swiglu_alpha, p.desc.activation.swiglu_alpha);
  EXPECT_FLOAT_EQ(q.desc.activation.swiglu_limit, p.desc.activation.swiglu_limit);
  save_problem(path2, q);
  const auto bytes = file_bytes(path);
  EXPECT_GT(bytes.size(), p.hidden.size());
  EXPECT_EQ(bytes, file_bytes(path2)) << "saving the loaded problem gives a different file";
  fs::remove(path);
  fs::remove(path2);
}

TEST(ProblemFile, RoundTripInt4ZeroPointWithBias) {
  auto d = small_desc(WeightFormat::int4, ActFormat::none, 256, 128);
  d.group_size = 128;
  d.has_zero_point = true;
  d.bias_dtype = DType::f32;
  HostProblem p = generated(d, 5);
  ASSERT_FALSE(p.w13->zero_points.empty());
  ASSERT_FALSE(p.w13->bias.empty());
  p.layout = Layout::contiguous;
  expect_round_trip("int4zp", std::move(p));
}

TEST(ProblemFile, RoundTripNvFp4TwoGlobalScales) {
  auto d = small_desc(WeightFormat::nvfp4, ActFormat::fp8_token);
  d.num_global_scales_w13 = 2;
  d.activation.kind = Activation::swiglu_oai;
  d.activation.swiglu_alpha = 1.5f;
  d.act_dtype = DType::f16;
  HostProblem p = generated(d, 6);
  ASSERT_EQ(p.w13->global_scales.size(), 8u);
  ASSERT_EQ(p.w2->global_scales.size(), 4u);
  expect_round_trip("nvfp4", std::move(p));
}

TEST(ProblemFile, RoundTripFp8BlockPartialBlocks) {
  HostProblem p = generated(small_desc(WeightFormat::fp8_block, ActFormat::none, 200, 136), 3);
  p.layout = Layout::indexed;
  expect_round_trip("fp8block", std::move(p));
}

TEST(ProblemFile, RoundTripMxfp4Activations) {
  auto d = small_desc(WeightFormat::mxfp4, ActFormat::mxfp4);
  d.bias_dtype = DType::bf16;
  d.activation.kind = Activation::gelu_tanh_no_mul;
  expect_round_trip("mxfp4", generated(d, 4));
}

// M = 0 keeps its routing tensors ([0, top_k]): a saved empty step reads back (it had no topk_ids once).
TEST(ProblemFile, RoundTripZeroTokens) {
  expect_round_trip("zero_tokens", generated(small_desc(WeightFormat::int4, ActFormat::none), 0));
}

TEST(ProblemFile, RoundTripBatchedWithExpertMap) {
  auto d = small_desc(WeightFormat::int8, ActFormat::fp8_token);
  d.num_experts = 8;
  GenerateOptions o = gen(10, 3);
  o.batched = true;
  o.ep_size = 2;
  o.ep_rank = 1;
  HostProblem p = generate_problem(d, o);
  ASSERT_TRUE(p.is_batched());
  ASSERT_FALSE(p.expert_map.empty());
  p.layout = Layout::masked;
  expect_round_trip("batched", std::move(p));
}

TEST(ProblemFile, SeparateWeightAndInputFiles) {
  const HostProblem p = generated(small_desc(WeightFormat::mxfp8), 4);
  SafetensorsFile weights, inputs;
  weights.metadata = desc_metadata(p.desc, p.layout);
  add_weight_tensors(p, weights);
  add_input_tensors(p, inputs);
  EXPECT_EQ(weights.find("hidden"), nullptr);
  EXPECT_EQ(inputs.find("w13.weight"), nullptr);
  const std::string wp = temp_path("weights_only"), ip = temp_path("inputs_only");
  write_safetensors(wp, weights);
  write_safetensors(ip, inputs);
  expect_same_problem(p, load_problem(wp, ip));
  // The weights file alone has no inputs.
  EXPECT_THAT(error_of([&] { load_problem(wp, wp); }), HasSubstr("hidden"));
  fs::remove(wp);
  fs::remove(ip);
}

// A saved good problem, edited and written again; returns load_problem's error.
class ProblemFileErrors : public ::testing::Test {
 protected:
  void SetUp() override {
    auto d = small_desc(WeightFormat::int4, ActFormat::none, 128, 64);
    d.bias_dtype = DType::f32;
    problem_ = generated(d, 5);
    path_ = temp_path("errors_base");
    save_problem(path_, problem_);
  }
  void TearDown() override {
    fs::remove(path_);
    fs::remove(temp_path("errors_edited"));
  }
  std::string load_error(const std::function<void(SafetensorsFile&)>& edit) {
    SafetensorsFile f = read_safetensors(path_);
    edit(f);
    const std::string edited = temp_path("errors_edited");
    write_safetensors(edited, f);
    return error_of([&] { load_problem(edited, edited); });
  }
  static Tensor& tensor(SafetensorsFile& f, const std::string& name) {
    for (auto& t : f.tensors)
      if (t.name == name) return t;
    throw std::runtime_error("test setup: no tensor " + name);
  }
  static void reshape(Tensor& t, DType dtype, std::vector<int64_t> shape) {
    t.dtype = dtype;
    t.shape = std::move(shape);
    t.data.assign(static_cast<size_t>(dtype_bytes(dtype, t.numel())), 0);
  }
  HostProblem problem_;
  std::string path_;
};

TEST_F(ProblemFileErrors, BaseFileLoads) { expect_same_problem(problem_, load_problem(path_, path_)); }

TEST_F(ProblemFileErrors, WeightTensorWithWrongShape) {
  const std::string msg = load_error([](SafetensorsFile& f) {
    reshape(tensor(f, "w13.weight_scale"), DType::bf16, {4, 128, 3});
  });
  EXPECT_THAT(msg, HasSubstr("'w13.weight_scale'"));
  EXPECT_THAT(msg, HasSubstr("[4, 128, 3]"));
  EXPECT_THAT(msg, HasSubstr("[4, 128, 2]"));
}

TEST_F(ProblemFileErrors, WeightTensorWithWrongDtype) {
  const std::string msg = load_error([](SafetensorsFile& f) { reshape(tensor(f, "w2.bias"), DType::bf16, {4, 128}); });
  EXPECT_THAT(msg, HasSubstr("'w2.bias'"));
  EXPECT_THAT(msg, HasSubstr("BF16"));
  EXPECT_THAT(msg, HasSubstr("F32"));
}

TEST_F(ProblemFileErrors, MissingTensor) {
  const std::string msg = load_error([](SafetensorsFile& f) {
    f.tensors.erase(std::find_if(f.tensors.begin(), f.tensors.end(), [](const Tensor& t) { return t.name == "w2.weight"; }));
  });
  EXPECT_THAT(msg, HasSubstr("w2.weight"));
  EXPECT_THAT(msg, HasSubstr("missing"));
}

TEST_F(ProblemFileErrors, MissingTopkIds) {
  const std::string msg = load_error([](SafetensorsFile& f) {
    f.tensors.erase(std::find_if(f.tensors.begin(), f.tensors.end(), [](const Tensor& t) { return t.name == "topk_ids"; }));
  });
  EXPECT_THAT(msg, HasSubstr("topk_ids"));
}

TEST_F(ProblemFileErrors, MissingMetadataKey) {
  const std::string msg = load_error([](SafetensorsFile& f) { f.metadata.erase("top_k"); });
  EXPECT_THAT(msg, HasSubstr("'top_k'"));
  EXPECT_THAT(msg, HasSubstr("missing"));
}

TEST_F(ProblemFileErrors, BadMetadataValues) {
  std::string msg = load_error([](SafetensorsFile& f) { f.metadata["hidden_size"] = "128x"; });
  EXPECT_THAT(msg, HasSubstr("hidden_size"));
  EXPECT_THAT(msg, HasSubstr("'128x'"));
  msg = load_error([](SafetensorsFile& f) { f.metadata["activation"] = "swish"; });
  EXPECT_THAT(msg, HasSubstr("activation"));
  EXPECT_THAT(msg, HasSubstr("'swish'"));
  msg = load_error([](SafetensorsFile& f) { f.metadata["zero_point"] = "yes"; });
  EXPECT_THAT(msg, HasSubstr("zero_point"));
  EXPECT_THAT(msg, HasSubstr("'yes'"));
  msg = load_error([](SafetensorsFile& f) { f.metadata["swiglu_limit"] = "seven"; });
  EXPECT_THAT(msg, HasSubstr("swiglu_limit"));
  EXPECT_THAT(msg, HasSubstr("'seven'"));
  // A well-formed but illegal layer.
  msg = load_error([](SafetensorsFile& f) { f.metadata["group_size"] = "48"; });
  EXPECT_THAT(msg, HasSubstr("group_size = 48"));
}

TEST_F(ProblemFileErrors, HiddenWithWrongK) {
  std::string msg = load_error([](SafetensorsFile& f) { reshape(tensor(f, "hidden"), DType::bf16, {5, 96}); });
  EXPECT_THAT(msg, HasSubstr("'hidden'"));
  EXPECT_THAT(msg, HasSubstr("[5, 96]"));
  EXPECT_THAT(msg, HasSubstr("K = 128"));
  msg = load_error([](SafetensorsFile& f) { reshape(tensor(f, "hidden"), DType::f16, {5, 128}); });
  EXPECT_THAT(msg, HasSubstr("'hidden'"));
  EXPECT_THAT(msg, HasSubstr("F16"));
}

TEST_F(ProblemFileErrors, TopkIdsShapeMismatch) {
  std::string msg = load_error([](SafetensorsFile& f) { reshape(tensor(f, "topk_ids"), DType::i32, {5, 3}); });
  EXPECT_THAT(msg, HasSubstr("'topk_ids'"));
  EXPECT_THAT(msg, HasSubstr("[5, 3]"));
  EXPECT_THAT(msg, HasSubstr("top_k = 2"));
  msg = load_error([](SafetensorsFile& f) {
    reshape(tensor(f, "topk_ids"), DType::i32, {4, 2});
    reshape(tensor(f, "topk_weights"), DType::f32, {4, 2});
  });
  EXPECT_THAT(msg, HasSubstr("'topk_ids'"));
  EXPECT_THAT(msg, HasSubstr("[4, 2]"));
  EXPECT_THAT(msg, HasSubstr("M = 5"));
  msg = load_error([](SafetensorsFile& f) { reshape(tensor(f, "topk_weights"), DType::f32, {5, 1}); });
  EXPECT_THAT(msg, HasSubstr("'topk_weights'"));
  EXPECT_THAT(msg, HasSubstr("[5, 1]"));
  msg = load_error([](SafetensorsFile& f) { reshape(tensor(f, "topk_ids"), DType::f32, {5, 2}); });
  EXPECT_THAT(msg, HasSubstr("'topk_ids'"));
  EXPECT_THAT(msg, HasSubstr("F32"));
}

}  // namespace
}  // namespace moeq::io
