// The FP8 MMA probe kernels (tests/gpu/fp8_mma_probe_source.hpp) compile for sm_89 and sm_90a with
// no GPU: mma.sync m16n8k32 e4m3 and the e2m1 -> e4m3 conversion in NVRTC.
#include <gtest/gtest.h>

#include "jit/compiler.hpp"
#include "jit/nvrtc.hpp"
#include "tests/gpu/fp8_mma_probe_source.hpp"

namespace {

TEST(Fp8MmaJit, ProbeKernelsCompileForSm89AndSm90a) {
  std::string why;
  if (!moeq::jit::nvrtc_available(&why)) GTEST_SKIP() << "NVRTC not available: " << why;
  moeq::jit::JitOptions options = moeq::jit::jit_options();
  options.disable_cache = true;
  moeq::jit::KernelCache cache(options);
  for (const moeq::jit::Arch arch : {moeq::jit::Arch{89, false}, moeq::jit::Arch{90, true}}) {
    const auto& cubin = cache.cubin({"moeq_test_mma_e4m3", moeq::test::kFp8MmaProbeSource}, arch);
    ASSERT_GE(cubin.size(), 4u);
    EXPECT_EQ(cubin[0], 0x7f);
  }
}

}  // namespace
