// Every MoE GEMM config the planner can emit compiles through NVRTC for sm_80, sm_89, sm_90a: one
// test per arch, so CTest can run the arches in separate processes side by side (CMakeLists.txt).
#include <gtest/gtest.h>

#include <set>
#include <string>
#include <tuple>
#include <utility>

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

// Two CTAs an SM (`/o2`): the consumers' setmaxnreg.inc to 104 waits until the CTA's pool holds the registers,
// so a kernel that started on fewer than 80 a thread (128 x 32 + 256 x 104 = 384 x 80) would hang, not fail.
// ptxas's count at launch is what __launch_bounds__(384, 2) gives; this pins it, and the one-CTA form's 168.
TEST(MoeGemmJit, TwoCtaProducerTilesStartOn80Registers) {
  std::string why;
  if (!jit::nvrtc_available(&why)) GTEST_SKIP() << "NVRTC not available: " << why;
  WeightDesc w;
  w.format = WeightFormat::mxfp4;
  w.num_experts = 8;
  w.n = 1536;
  w.k = 2048;
  // The last: GEMM1 with the activation in its epilogue (gpt-oss-120b's interleaved SwiGLU-OAI with a bias).
  const cuda::EpilogueActivation swiglu{true, Activation::swiglu_oai, true};
  for (const auto& [text, registers, activation] :
       {std::tuple<const char*, int, cuda::EpilogueActivation>{"24x128/1x8x1/4/o2/p/t", 80, {}},
        std::tuple<const char*, int, cuda::EpilogueActivation>{"24x128/1x8x1/4/p/t", 168, {}},
        std::tuple<const char*, int, cuda::EpilogueActivation>{"24x256/1x8x1/4/o2/p/t", 80, swiglu}}) {
    w.bias_dtype = activation.on ? DType::bf16 : DType::none;
    const jit::KernelSpec spec = cuda::moe_gemm_kernel_spec(w, DType::bf16, cuda::parse_gemm_tile(text), true,
                                                            cuda::GemmInput::values, false, cuda::GemmVariant::plain,
                                                            activation);
    const jit::CompileResult r = jit::compile_to_cubin(spec.source, spec.entry, 90, true, {"--ptxas-options=-v"});
    // ptxas -v: "Compiling entry function 'moeq_moe_gemm' for 'sm_90a'" ... "Used N registers".
    const size_t entry = r.log.find("entry function 'moeq_moe_gemm'");
    ASSERT_NE(entry, std::string::npos) << r.log;
    const size_t used = r.log.find("Used ", entry);
    ASSERT_NE(used, std::string::npos) << r.log;
    EXPECT_EQ(std::stoi(r.log.substr(used + 5)), registers) << text << "\n" << r.log;
  }
}

}  // namespace
}  // namespace moeq
