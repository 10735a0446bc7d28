// Every MoE GEMM config the planner can emit compiles through NVRTC for sm_80, sm_89, sm_90a: one
// test per arch, so CTest can run the arches in separate processes side by side (CMakeLists.txt).
#include <gtest/gtest.h>

#include <set>

#include "cuda/moe_gemm.hpp"
#include "cuda/prepare.hpp"
#include "jit/compiler.hpp"
#include "jit/nvrtc.hpp"

namespace moeq {
namespace {

void every_config_compiles_for(jit::Arch arch) {
  std::string why;
  if (!jit::nvrtc_available(&why)) GTEST_SKIP() << "NVRTC not available: " << why;
  jit::JitOptions options = jit::jit_options();
  options.disable_cache = true;
  jit::KernelCache cache(options);
  auto specs = cuda::moe_gemm_kernel_specs();
  // Each source once; every planner tile of every format, for both activation dtypes and both
  // code layouts, is among them.
  std::set<std::string> sources;
  for (const auto& spec : specs) sources.insert(spec.source);
  ASSERT_EQ(sources.size(), specs.size());
  size_t planner_configs = 0;
  for (WeightFormat f : all_values<WeightFormat>()) planner_configs += cuda::planner_tiles(f).size() * 2 * 2;
  ASSERT_GE(specs.size(), planner_configs);
  specs.push_back(cuda::prepare_kernel_spec());
  for (const auto& spec : specs) {
    const auto& cubin = cache.cubin(spec, arch);
    ASSERT_GE(cubin.size(), 4u);
    EXPECT_EQ(cubin[0], 0x7f) << spec.source;
    EXPECT_EQ(cubin[1], 'E') << spec.source;
  }
}

TEST(MoeGemmJit, EveryConfigCompilesForSm80) { every_config_compiles_for(jit::Arch{80, false}); }
TEST(MoeGemmJit, EveryConfigCompilesForSm89) { every_config_compiles_for(jit::Arch{89, false}); }
TEST(MoeGemmJit, EveryConfigCompilesForSm90a) { every_config_compiles_for(jit::Arch{90, true}); }

}  // namespace
}  // namespace moeq
