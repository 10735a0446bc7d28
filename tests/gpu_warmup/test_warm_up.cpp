// Experts::warm_up loads every kernel apply can launch. A binary of its own (moeq_gpu_warmup_test)
// so that nothing is loaded before warm_up: then "apply loads nothing after it" covers every
// kernel the applies below use, routing and elementwise included, not only the ones no earlier
// test happened to load.
#include <gtest/gtest.h>

#include <cstdint>

#include "cuda/driver.hpp"
#include "cuda/routing.hpp"
#include "io/device_problem.hpp"
#include "io/presets.hpp"
#include "io/problem.hpp"
#include "io/verify.hpp"
#include "jit/compiler.hpp"

namespace moeq {
namespace {

TEST(WarmUpGpu, NoApplyLoadsAKernelAfterWarmUp) {
  if (cuda::device_count() == 0) GTEST_SKIP() << "no CUDA device";
  ExpertsDesc d = io::find_preset("tiny").desc;  // E = 7, top-3, K = 256, I = 128
  io::apply_scheme("mxfp8:f16", d);
  d.activation.kind = Activation::gelu_tanh;
  jit::KernelCache& cache = jit::kernel_cache();
  ASSERT_EQ(cache.num_loaded(), 0u) << "this process must start with no kernel loaded";
  Experts(d, Options{}).warm_up();
  const size_t warmed = cache.num_loaded();
  EXPECT_GT(warmed, 0u);
  Options batch_invariant;
  batch_invariant.batch_invariant = true;
  int case_index = 0;
  // M = 1 and 2 route <= 8 slots (the fused align kernel), 33 to 600 the two-kernel path, 2100
  // (6300 slots, top-3) the chunked one; 129 and 600 reach the 32- and 64-row tiles.
  static_assert(2100 * 3 >= cuda::kChunkedMinSlots && 600 * 3 < cuda::kChunkedMinSlots);
  for (Layout layout : {Layout::indexed, Layout::contiguous, Layout::masked})
    for (int64_t m : {1, 2, 33, 129, 600, 2100})
      for (const Options& o : {Options{}, batch_invariant}) {
        io::VerifyCase c{d, layout, m, 1, static_cast<uint64_t>(m)};
        c.codes = case_index++ % 2 == 0 ? CodeLayout::prepared : CodeLayout::canonical;
        const io::VerifyResult r = io::verify_on_gpu(c, o);
        EXPECT_TRUE(r.passed) << c.label() << ": rel " << r.error.rel_err;
        EXPECT_EQ(cache.num_loaded(), warmed) << c.label() << (o.batch_invariant ? " batch-invariant" : "")
                                              << ": apply loaded a kernel that warm_up did not";
      }
}

// A tuning table's tiles, none of them the planner's for this layer: warm_up loads them too. Its
// own process state: the layer above is a different one, so its kernels do not cover these.
TEST(WarmUpGpu, TunedTilesAreLoadedByWarmUp) {
  if (cuda::device_count() == 0) GTEST_SKIP() << "no CUDA device";
  ExpertsDesc d = io::find_preset("tiny").desc;
  io::apply_scheme("int4-g128", d);
  Options o;
  o.tuning.entries = {{0, 8, 8, "8x64/1x4x1/2/r", "8x128/1x4x1/4/r"}, {8, int64_t{1} << 30, 16, "16x64/1x4x1/4", "16x64/1x4x2/8"}};
  jit::KernelCache& cache = jit::kernel_cache();
  Experts(d, o).warm_up();
  const size_t warmed = cache.num_loaded();
  for (Layout layout : {Layout::indexed, Layout::masked})
    for (int64_t m : {1, 33}) {
      io::VerifyCase c{d, layout, m, 1, static_cast<uint64_t>(m)};
      c.codes = CodeLayout::prepared;
      const io::VerifyResult r = io::verify_on_gpu(c, o);
      EXPECT_TRUE(r.passed) << c.label() << ": rel " << r.error.rel_err;
      EXPECT_EQ(cache.num_loaded(), warmed) << c.label() << ": apply loaded a tuned kernel that warm_up did not";
    }
}

// Quantized activations add the quantizer of each GEMM input (and MXFP4 GEMMs, which the layers
// above do not load; FP8 per channel with FP8 per token the e4m3 GEMMs and the codes-out
// quantizers): warm_up loads them.
TEST(WarmUpGpu, QuantizedActivationKernelsAreLoadedByWarmUp) {
  if (cuda::device_count() == 0) GTEST_SKIP() << "no CUDA device";
  jit::KernelCache& cache = jit::kernel_cache();
  for (const char* scheme : {"mxfp4:fp8-token", "mxfp4:mxfp4", "fp8-channel:fp8-token"}) {
    ExpertsDesc d = io::find_preset("tiny").desc;
    io::apply_scheme(scheme, d);
    Experts(d, Options{}).warm_up();
    const size_t warmed = cache.num_loaded();
    for (Layout layout : {Layout::indexed, Layout::contiguous, Layout::masked})
      for (int64_t m : {1, 129}) {
        io::VerifyCase c{d, layout, m, 1, static_cast<uint64_t>(m + 5)};
        c.codes = CodeLayout::prepared;
        const io::VerifyResult r = io::verify_on_gpu(c);
        EXPECT_TRUE(r.passed) << c.label() << ": rel " << r.error.rel_err;
        EXPECT_EQ(cache.num_loaded(), warmed) << c.label() << ": apply loaded a kernel that warm_up did not";
      }
  }
}

// Experts::warm_up(w13, w2) loads the kernels for weights like those only (their code layout, MX word and scale
// alignment): the applies with them load nothing more, and the full warm_up() then still has kernels to load. A layer
// no test above loads GEMMs of (MXFP4 with bf16 activations), for one code layout per process state.
TEST(WarmUpGpu, WarmUpForTheseWeightsLoadsWhatTheirAppliesRun) {
  if (cuda::device_count() == 0) GTEST_SKIP() << "no CUDA device";
  ExpertsDesc d = io::find_preset("tiny").desc;
  io::apply_scheme("mxfp4", d);
  jit::KernelCache& cache = jit::kernel_cache();
  constexpr uint64_t kSeed = 70;
  io::GenerateOptions g;
  g.num_tokens = 33;
  g.seed = kSeed;
  // The verify cases below generate their weights from the same seed: the same MX word (N(0, 1) weights: scales of
  // at most 2).
  const io::DeviceProblem weights = io::upload_problem(io::generate_problem(d, g), CodeLayout::prepared);
  const Experts experts(d, Options{});
  experts.warm_up(weights.w13, weights.w2);
  const size_t warmed = cache.num_loaded();
  for (Layout layout : {Layout::indexed, Layout::contiguous, Layout::masked})
    for (int64_t m : {1, 33, 600}) {
      io::VerifyCase c{d, layout, m, 1, kSeed};
      c.codes = CodeLayout::prepared;
      const io::VerifyResult r = io::verify_on_gpu(c);
      EXPECT_TRUE(r.passed) << c.label() << ": rel " << r.error.rel_err;
      EXPECT_EQ(cache.num_loaded(), warmed) << c.label() << ": apply loaded a kernel that warm_up(w13, w2) did not";
    }
  experts.warm_up();
  EXPECT_GT(cache.num_loaded(), warmed) << "warm_up(w13, w2) loaded every kernel of warm_up()";
}

}  // namespace
}  // namespace moeq
