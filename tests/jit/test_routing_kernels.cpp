// Every routing kernel config the planner can emit compiles through NVRTC for every supported
// arch (no GPU needed), and each module exports the entry its spec names.
#include <gtest/gtest.h>

#include <cstdio>
#include <set>
#include <string>
#include <vector>

#include "cuda/routing.hpp"
#include "jit/compiler.hpp"
#include "jit/nvrtc.hpp"
#include "moeq/error.hpp"

namespace {

using moeq::jit::Arch;
using moeq::jit::KernelSpec;

TEST(RoutingKernels, SpecsAreDistinctAndNamed) {
  const std::vector<KernelSpec> specs = moeq::cuda::routing_kernel_specs();
  // {count, fused, chunk count} x {i32, i64}, scatter, permute rows, chunk place,
  // reduce x {bf16, f16} x {f32, bf16, f16}
  EXPECT_EQ(specs.size(), 15u);
  std::set<std::string> sources;
  for (const KernelSpec& spec : specs) {
    EXPECT_TRUE(sources.insert(spec.source).second) << "duplicate source for " << spec.entry;
    EXPECT_NE(spec.source.find("struct RoutingCfg"), std::string::npos) << spec.source;
    EXPECT_NE(spec.entry.find("moeq_"), std::string::npos) << spec.entry;
  }
}

TEST(RoutingKernels, EverySpecCompilesForEveryArch) {
  std::string why;
  if (!moeq::jit::nvrtc_available(&why)) GTEST_SKIP() << "NVRTC not available: " << why;
  for (const KernelSpec& spec : moeq::cuda::routing_kernel_specs()) {
    for (const Arch arch : {Arch{80, false}, Arch{89, false}, Arch{90, true}}) {
      try {
        const moeq::jit::CompileResult result =
            moeq::jit::compile_to_cubin(spec.source, spec.entry, arch.sm, arch.arch_specific, {});
        ASSERT_GT(result.cubin.size(), 4u);
        EXPECT_EQ(result.cubin[0], 0x7f) << "not an ELF image";
        // The entry's name is in the CUBIN's symbol table.
        const std::string image(result.cubin.begin(), result.cubin.end());
        EXPECT_NE(image.find(spec.entry), std::string::npos) << spec.entry << " " << to_string(arch);
        EXPECT_EQ(result.log.find("warning"), std::string::npos) << spec.entry << " " << to_string(arch)
                                                                 << ":\n" << result.log;
        std::printf("%-20s %-7s %6zu bytes, %.0f ms\n", spec.entry.c_str(), to_string(arch).c_str(),
                    result.cubin.size(), result.compile_ms);
      } catch (const moeq::Error& error) {
        ADD_FAILURE() << error.what() << "\nsource:\n" << spec.source;
      }
    }
  }
}

// A folded spec compiles for sm_80 and sm_90a without warnings, its entry in the image.
void expect_compiles_clean(const KernelSpec& spec) {
  for (const Arch arch : {Arch{80, false}, Arch{90, true}}) {
    try {
      const moeq::jit::CompileResult result =
          moeq::jit::compile_to_cubin(spec.source, spec.entry, arch.sm, arch.arch_specific, {});
      const std::string image(result.cubin.begin(), result.cubin.end());
      EXPECT_NE(image.find(spec.entry), std::string::npos) << spec.entry << " " << to_string(arch);
      EXPECT_EQ(result.log.find("warning"), std::string::npos) << spec.entry << ":\n" << result.log;
      std::printf("folded %-22s %-7s %.0f ms\n", spec.entry.c_str(), to_string(arch).c_str(), result.compile_ms);
    } catch (const moeq::Error& error) {
      ADD_FAILURE() << error.what() << "\nsource:\n" << spec.source;
    }
  }
}

// The first routing kernels with a quantizer folded in (cuda/folded_quantizer.hpp): each format,
// codes and values out, one of the three kernels each (the layer lists hold all six per format;
// every one compiled in full took too long for CI), for sm_80 and sm_90a.
TEST(RoutingKernels, FoldedQuantizerSpecsCompile) {
  std::string why;
  if (!moeq::jit::nvrtc_available(&why)) GTEST_SKIP() << "NVRTC not available: " << why;
  struct Pick {
    moeq::ActFormat format;
    moeq::DType dtype;
    bool values_out;
    size_t index;  // into folded_routing_kernel_specs: {count, fused, chunk count} x {i32, i64}
  };
  const Pick picks[] = {{moeq::ActFormat::fp8_token, moeq::DType::bf16, true, 0},
                        {moeq::ActFormat::fp8_token, moeq::DType::f16, false, 2},
                        {moeq::ActFormat::mxfp8, moeq::DType::bf16, true, 5},
                        {moeq::ActFormat::mxfp4, moeq::DType::bf16, false, 1}};
  // Every folded config has its own source (the JIT cache's key), naming its format, dtype and output.
  std::set<std::string> sources;
  for (const moeq::ActFormat format : {moeq::ActFormat::fp8_token, moeq::ActFormat::mxfp8, moeq::ActFormat::mxfp4})
    for (const moeq::DType dtype : {moeq::DType::bf16, moeq::DType::f16})
      for (const bool values_out : {false, true}) {
        const std::vector<KernelSpec> specs = moeq::cuda::folded_routing_kernel_specs(format, dtype, values_out);
        ASSERT_EQ(specs.size(), 6u);
        for (const KernelSpec& spec : specs) {
          EXPECT_TRUE(sources.insert(spec.source).second) << spec.entry;
          EXPECT_NE(spec.source.find(std::string("kFoldBf16 = ") + (dtype == moeq::DType::bf16 ? "true" : "false")),
                    std::string::npos);
          EXPECT_NE(spec.source.find(std::string("kFoldValuesOut = ") + (values_out ? "true" : "false")),
                    std::string::npos);
        }
      }
  EXPECT_EQ(sources.size(), 3u * 2u * 2u * 6u);
  for (const Pick& pick : picks) {
    const std::vector<KernelSpec> specs = moeq::cuda::folded_routing_kernel_specs(pick.format, pick.dtype, pick.values_out);
    const KernelSpec& spec = specs[pick.index];
    EXPECT_NE(spec.source.find("kFoldFormat = " + std::to_string(static_cast<int>(pick.format) - 1)), std::string::npos)
        << spec.source;
    expect_compiles_clean(spec);
  }
  // The unfolded specs are none of these.
  for (const KernelSpec& spec : moeq::cuda::routing_kernel_specs()) EXPECT_EQ(sources.count(spec.source), 0u);
}

// The MMA-order copy folded into the first routing kernels (fold_order_rows): its own sources, compiled clean.
TEST(RoutingKernels, FoldedOrderRowsSpecsCompile) {
  std::string why;
  if (!moeq::jit::nvrtc_available(&why)) GTEST_SKIP() << "NVRTC not available: " << why;
  std::set<std::string> sources;
  for (const KernelSpec& spec : moeq::cuda::routing_kernel_specs()) sources.insert(spec.source);
  for (const moeq::DType dtype : {moeq::DType::bf16, moeq::DType::f16}) {
    const std::vector<KernelSpec> specs = moeq::cuda::folded_order_routing_kernel_specs(dtype);
    ASSERT_EQ(specs.size(), 6u);
    for (const KernelSpec& spec : specs) {
      EXPECT_TRUE(sources.insert(spec.source).second) << spec.entry;
      EXPECT_NE(spec.source.find("kFoldOrderRows = true"), std::string::npos) << spec.source;
    }
    // count (i32) and fused (i64): the entries a 16-bit indexed layer launches with the fold.
    for (const size_t index : {size_t{0}, size_t{3}}) expect_compiles_clean(specs[index]);
  }
  EXPECT_THROW(moeq::cuda::folded_order_routing_kernel_specs(moeq::DType::f32), moeq::Error);
}

}  // namespace
