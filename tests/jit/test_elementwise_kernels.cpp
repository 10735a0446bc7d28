// Every elementwise kernel config (activation x dtype x interleaved, (de)quantizer x dtype) compiles
// through NVRTC for each supported arch, from the embedded device headers, with no GPU.
#include <gtest/gtest.h>

#include <cstdio>
#include <set>
#include <string>
#include <vector>

#include "cuda/elementwise.hpp"
#include "jit/nvrtc.hpp"
#include "moeq/error.hpp"

namespace {

using moeq::jit::KernelSpec;

TEST(ElementwiseKernels, SpecListCoversEveryConfigOnce) {
  const std::vector<KernelSpec> specs = moeq::cuda::elementwise_kernel_specs();
  // (9 + 5 interleaved) x 2 dtypes; 3 quantizers x 2 dtypes x (codes, values); 3 dequantizers x 2 dtypes;
  // 3 fused activation-quantizers (one per format) x 2 dtypes, FP8 per token's with codes out x 2 dtypes
  EXPECT_EQ(specs.size(), 28u + 12u + 6u + 6u + 2u);
  std::set<std::string> sources;
  for (const KernelSpec& spec : specs) {
    EXPECT_TRUE(sources.insert(spec.source).second) << "duplicate config:\n" << spec.source;
    EXPECT_NE(spec.source.find("struct ElementwiseCfg"), std::string::npos);
    const char* constant = spec.entry == "moeq_activation"             ? "kActivation"
                           : spec.entry == "moeq_dequantize_activation" ? "kDequantFormat"
                                                                        : "kFormat";  // quantizers, fused
    EXPECT_NE(spec.source.find(constant), std::string::npos)
        << spec.entry << ":\n" << spec.source;
  }
}

TEST(ElementwiseKernels, IllegalConfigsAreRejected) {
  EXPECT_THROW(moeq::cuda::activation_kernel_spec(moeq::Activation::relu2_no_mul, true, moeq::DType::bf16),
               moeq::Error);
  EXPECT_THROW(moeq::cuda::activation_kernel_spec(moeq::Activation::silu, false, moeq::DType::f32), moeq::Error);
  EXPECT_THROW(moeq::cuda::quantize_kernel_spec(moeq::ActFormat::none, moeq::DType::bf16), moeq::Error);
  EXPECT_THROW(moeq::cuda::dequantize_kernel_spec(moeq::ActFormat::none, moeq::DType::bf16), moeq::Error);
}

TEST(ElementwiseKernels, EverySpecCompilesForEachArch) {
  std::string why;
  if (!moeq::jit::nvrtc_available(&why)) GTEST_SKIP() << "NVRTC not available: " << why;
  const struct {
    int sm;
    bool arch_specific;
  } archs[] = {{80, false}, {89, false}, {90, true}};
  const std::vector<KernelSpec> specs = moeq::cuda::elementwise_kernel_specs();
  double total_ms = 0.0;
  for (const auto& arch : archs) {
    for (const KernelSpec& spec : specs) {
      try {
        const moeq::jit::CompileResult result =
            moeq::jit::compile_to_cubin(spec.source, spec.entry, arch.sm, arch.arch_specific, {});
        EXPECT_FALSE(result.cubin.empty());
        // NOTE: warnings would show up in the log; the kernels are meant to compile cleanly.
        EXPECT_EQ(result.log.find("warning"), std::string::npos)
            << moeq::jit::arch_name(arch.sm, arch.arch_specific) << " " << spec.entry << ":\n"
            << spec.source << "\n" << result.log;
        total_ms += result.compile_ms;
      } catch (const moeq::Error& error) {
        ADD_FAILURE() << error.what();
      }
    }
  }
  std::printf("%zu configs x 3 archs compiled in %.0f ms\n", specs.size(), total_ms);
}

}  // namespace
