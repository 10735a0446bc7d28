// The FP8 MMA probe kernels (tests/gpu/fp8_mma_probe_source.hpp) compile for sm_89 and sm_90a with
// no GPU: mma.sync m16n8k32 e4m3 and the e2m1 -> e4m3 conversion in NVRTC.
#include <gtest/gtest.h>

#include "jit/compiler.hpp"
#include "jit/nvrtc.hpp"
#include "tests/gpu/fp8_mma_probe_source.hpp"
#include "tests/gpu/wgmma_mix_probe_source.hpp"
#include "tests/gpu/wgmma_rate_probe_source.hpp"

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
  // The wgmma rate probe: sm_90a only (wgmma).
  for (const char* entry : {"moeq_test_wgmma_rate_e4m3_rs", "moeq_test_wgmma_rate_e4m3_ss", "moeq_test_wgmma_rate_bf16_rs",
                            "moeq_test_wgmma_rate_e4m3_rs_fresh", "moeq_test_wgmma_rate_bf16_rs_fresh"}) {
    const auto& cubin = cache.cubin({entry, moeq::test::kWgmmaRateProbeSource}, moeq::jit::Arch{90, true});
    ASSERT_GE(cubin.size(), 4u) << entry;
    EXPECT_EQ(cubin[0], 0x7f) << entry;
  }
  for (const moeq::test::WgmmaMixEntry& entry : moeq::test::kWgmmaMixEntries) {
    const auto& cubin = cache.cubin({entry.name, moeq::test::kWgmmaMixProbeSource}, moeq::jit::Arch{90, true});
    ASSERT_GE(cubin.size(), 4u) << entry.name;
    EXPECT_EQ(cubin[0], 0x7f) << entry.name;
  }
}

}  // namespace
