// ptxas's note that it serialized a kernel's wgmma instructions reaches CubinLookup (and `moeq compile`'s output):
// the 256-channel e4m3 tile of session 66 was timed with every wgmma serialized (C7512) and nobody saw it.
#include <gtest/gtest.h>

#include <string>

#include "jit/compiler.hpp"
#include "jit/nvrtc.hpp"

namespace {

// A kernel of e4m3 wgmmas with A from registers into kSets accumulator sets of 64 registers, all in flight
// at once, at 384 threads a CTA (168 registers a thread): one set fits; three (192 registers) do not, so ptxas
// serializes the wgmmas (C7511 here: too few registers for the wgmma pipeline), as it did the 256-channel e4m3 tile
// (C7512).
// NOTE: one kernel a source: the cache compiles a source once, and its log covers every kernel in it.
std::string serialization_source(int sets) {
  return "#define MOEQ_TEST_SETS " + std::to_string(sets) + "\n" + R"(#include "moeq_dev/ptx/wgmma.cuh"
template <int kSets>
__device__ void loop(float* out, const unsigned* in, int iterations) {
  extern __shared__ __align__(1024) unsigned char smem[];
  const unsigned long long b = moeq_dev::wgmma_descriptor_swizzle128(static_cast<unsigned>(__cvta_generic_to_shared(smem)));
  float d[kSets][64];
#pragma unroll
  for (int s = 0; s < kSets; ++s)
#pragma unroll
    for (int i = 0; i < 64; ++i) d[s][i] = 0.0f;
  unsigned a[4];
#pragma unroll
  for (int r = 0; r < 4; ++r) a[r] = in[threadIdx.x + 128 * r];
  for (int it = 0; it < iterations; ++it) {
    moeq_dev::wgmma_fence();
#pragma unroll
    for (int s = 0; s < kSets; ++s) moeq_dev::wgmma_m64k32_e4m3_rs<128>(d[s], a, moeq_dev::wgmma_descriptor_advance(b, 1024 * s));
    moeq_dev::wgmma_commit();
    moeq_dev::wgmma_wait<0>();
  }
#pragma unroll
  for (int s = 0; s < kSets; ++s)
#pragma unroll
    for (int i = 0; i < 64; ++i) out[64 * (kSets * threadIdx.x + s) + i] = d[s][i];
}
extern "C" __global__ void __launch_bounds__(384, 1) moeq_test_wgmma_sets(float* out, const unsigned* in, int n) {
  loop<MOEQ_TEST_SETS>(out, in, n);
}
)";
}

TEST(WgmmaSerializationJit, PtxasNoteReachesTheLookup) {
  std::string why;
  if (!moeq::jit::nvrtc_available(&why)) GTEST_SKIP() << "NVRTC not available: " << why;
  moeq::jit::JitOptions options = moeq::jit::jit_options();
  options.disable_cache = true;
  moeq::jit::KernelCache cache(options);
  const moeq::jit::Arch sm90a{90, true};
  const moeq::jit::CubinLookup pipelined = cache.lookup({"moeq_test_wgmma_sets", serialization_source(1)}, sm90a);
  EXPECT_EQ(pipelined.origin, moeq::jit::CubinOrigin::kCompiled);
  EXPECT_EQ(pipelined.wgmma_serialized, "");
  const moeq::jit::CubinLookup serialized = cache.lookup({"moeq_test_wgmma_sets", serialization_source(3)}, sm90a);
  EXPECT_EQ(serialized.origin, moeq::jit::CubinOrigin::kCompiled);
  EXPECT_NE(serialized.wgmma_serialized.find("moeq_test_wgmma_sets"), std::string::npos)
      << "ptxas should have serialized the wgmmas of 192 accumulators in flight at 168 registers; note: '"
      << serialized.wgmma_serialized << "'";
}

TEST(WgmmaSerializationJit, NoteIsTheLogLineThatSaysSo) {
  const std::string line =
      "ptxas info    : (C7512) Potential Performance Loss: wgmma.mma_async instructions are serialized due to "
      "insufficient register resources for the function 'moeq_moe_gemm'";
  EXPECT_EQ(moeq::jit::wgmma_serialization_note(line), line);
  EXPECT_EQ(moeq::jit::wgmma_serialization_note("ptxas info : Used 168 registers\n" + line + "\nptxas info : done\n"),
            line);
  EXPECT_EQ(moeq::jit::wgmma_serialization_note(""), "");
  EXPECT_EQ(moeq::jit::wgmma_serialization_note("ptxas info    : Used 168 registers, used 5 barriers\n"), "");
}

}  // namespace
