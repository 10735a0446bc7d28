#pragma once
// The FP8 MMA probe kernels, shared by tests/gpu/test_fp8_mma.cpp (run on the GPU) and
// tests/jit/test_fp8_mma_jit.cpp (compiled for sm_89 and sm_90a without one).
namespace moeq::test {

inline constexpr const char* kFp8MmaProbeSource = R"(#include "moeq_dev/format/fp4.cuh"
#include "moeq_dev/ptx/grid_dependency.cuh"
#include "moeq_dev/ptx/mma.cuh"
// out[i] = the e4m3 codes of in[i]'s eight e2m1 codes, times 2^-6.
extern "C" __global__ void moeq_test_e2m1_to_e4m3(const unsigned* in, uint2* out, int n) {
  moeq_dev::begin_dependent_grid();
  const int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) out[i] = moeq_dev::e2m1x8_to_e4m3x8_scaled(in[i]);
}

// One warp: d [16][8] (fp32, row-major) = a [16][32] (e4m3, k contiguous) x b [8][32] (e4m3, k
// contiguous per column), fragments as ptx/mma.cuh documents mma_m16n8k32_e4m3.
extern "C" __global__ void moeq_test_mma_e4m3(const unsigned char* a, const unsigned char* b, float* d) {
  moeq_dev::begin_dependent_grid();
  const int lane = threadIdx.x, g = lane / 4, t = lane % 4;
  auto word = [](const unsigned char* p) {
    return static_cast<unsigned>(p[0]) | static_cast<unsigned>(p[1]) << 8 | static_cast<unsigned>(p[2]) << 16 |
           static_cast<unsigned>(p[3]) << 24;
  };
  const unsigned fa[4] = {word(a + g * 32 + 4 * t), word(a + (g + 8) * 32 + 4 * t), word(a + g * 32 + 16 + 4 * t),
                          word(a + (g + 8) * 32 + 16 + 4 * t)};
  float acc[4] = {0.0f, 0.0f, 0.0f, 0.0f};
  moeq_dev::mma_m16n8k32_e4m3(acc, fa, word(b + g * 32 + 4 * t), word(b + g * 32 + 16 + 4 * t));
  d[g * 8 + 2 * t] = acc[0];
  d[g * 8 + 2 * t + 1] = acc[1];
  d[(g + 8) * 8 + 2 * t] = acc[2];
  d[(g + 8) * 8 + 2 * t + 1] = acc[3];
}
)";

}  // namespace moeq::test
