// The first pieces of the FP8 MMA path (issue 5 item 2, docs/perf-notes.md "Step 2 (FP8 MMAs)"):
// the e2m1 -> e4m3 weight conversion (exact, times 2^-6) and the m16n8k32 e4m3 fragment layout of
// ptx/mma.cuh, each against the reference on the GPU.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <random>
#include <vector>

#include "cuda/driver.hpp"
#include "cuda/launch.hpp"
#include "jit/compiler.hpp"
#include "reference/formats.hpp"
#include "tests/gpu/fp8_mma_probe_source.hpp"

namespace {

namespace cu = moeq::cuda;

bool have_fp8_mma() {
  if (cu::device_count() == 0) return false;
  const cu::DeviceInfo info = cu::current_device_info();
  return info.cc_major * 10 + info.cc_minor >= 89;
}

cu::CUfunction probe(const char* entry) {
  return moeq::jit::kernel_cache().function({entry, moeq::test::kFp8MmaProbeSource});
}

// Every code in every nibble position and random words: byte i decodes (e4m3) to nibble i's e2m1
// value times 2^-6, exactly.
TEST(Fp8MmaGpu, E2m1ToE4m3IsExactTimesTwoToTheMinusSix) {
  if (cu::device_count() == 0) GTEST_SKIP() << "no CUDA device";
  std::vector<uint32_t> words;
  for (uint32_t code = 0; code < 16; ++code)
    for (int pos = 0; pos < 8; ++pos) words.push_back(code << (4 * pos) | (15u - code) << (4 * ((pos + 3) % 8)));
  std::mt19937 rng(3);
  for (int i = 0; i < 100000; ++i) words.push_back(static_cast<uint32_t>(rng()));
  const int n = static_cast<int>(words.size());
  cu::DeviceBuffer d_in = cu::DeviceBuffer::from_host(words), d_out(words.size() * 8);
  cu::Stream stream;
  cu::LaunchShape shape;
  shape.grid_x = static_cast<unsigned>((n + 255) / 256);
  shape.block_x = 256;
  cu::launch(probe("moeq_test_e2m1_to_e4m3"), shape, stream.get(), d_in.ptr(), d_out.ptr(), n);
  stream.synchronize();
  const std::vector<uint8_t> out = d_out.to_host<uint8_t>(words.size() * 8);
  int64_t mismatches = 0;
  for (size_t w = 0; w < words.size(); ++w)
    for (int i = 0; i < 8; ++i) {
      const auto code = static_cast<uint8_t>((words[w] >> (4 * i)) & 0xFu);
      const float want = std::ldexp(moeq::ref::e2m1_to_f32(code), -6);
      const float got = moeq::ref::e4m3_to_f32(out[w * 8 + i]);
      // Signed zeros too: -0 stays -0.
      if (got != want || std::signbit(got) != std::signbit(want)) {
        if (mismatches++ == 0)
          ADD_FAILURE() << "word 0x" << std::hex << words[w] << " element " << std::dec << i << ": e4m3 0x" << std::hex
                        << int{out[w * 8 + i]} << std::dec << " = " << got << ", want " << want;
      }
    }
  EXPECT_EQ(mismatches, 0);
}

// One m16n8k32 e4m3 MMA on random finite codes against the float64 product: the fragment layout
// documented in ptx/mma.cuh (a layout error pairs the wrong elements: errors of the order of the
// sum itself). The bound allows the tensor cores' reduced-precision FP8 accumulation (DeepGEMM
// promotes every 128 k for it; ~14 bits kept): 2^-8 of the sum of |products| per element, 32
// products of up to 2^-13 each. The largest error seen is printed (a first measurement of it).
TEST(Fp8MmaGpu, M16n8k32E4m3FragmentsMatchTheProduct) {
  if (!have_fp8_mma()) GTEST_SKIP() << "no CUDA device with FP8 MMA (sm_89+)";
  std::mt19937 rng(5);
  auto finite_code = [&] {
    uint8_t c;
    do c = static_cast<uint8_t>(rng()); while ((c & 0x7F) == 0x7F);  // no NaN
    return c;
  };
  double worst = 0;
  for (int round = 0; round < 8; ++round) {
    std::vector<uint8_t> a(16 * 32), b(8 * 32);
    for (auto& c : a) c = finite_code();
    for (auto& c : b) c = finite_code();
    cu::DeviceBuffer d_a = cu::DeviceBuffer::from_host(a), d_b = cu::DeviceBuffer::from_host(b), d_d(16 * 8 * 4);
    cu::Stream stream;
    cu::LaunchShape shape;
    shape.grid_x = 1;
    shape.block_x = 32;
    cu::launch(probe("moeq_test_mma_e4m3"), shape, stream.get(), d_a.ptr(), d_b.ptr(), d_d.ptr());
    stream.synchronize();
    const std::vector<float> d = d_d.to_host<float>(16 * 8);
    for (int m = 0; m < 16; ++m)
      for (int n = 0; n < 8; ++n) {
        double sum = 0, magnitude = 0;
        for (int k = 0; k < 32; ++k) {
          const double p = static_cast<double>(moeq::ref::e4m3_to_f32(a[m * 32 + k])) * moeq::ref::e4m3_to_f32(b[n * 32 + k]);
          sum += p;
          magnitude += std::fabs(p);
        }
        EXPECT_LE(std::fabs(d[m * 8 + n] - sum), std::ldexp(magnitude, -8) + 1e-30)
            << "round " << round << " d[" << m << "][" << n << "] = " << d[m * 8 + n] << ", want " << sum;
        if (magnitude > 0) worst = std::max(worst, std::fabs(d[m * 8 + n] - sum) / magnitude);
      }
  }
  std::printf("m16n8k32 e4m3: largest |error| / sum |products| = %.3g (2^%.1f)\n", worst,
              worst > 0 ? std::log2(worst) : -1e9);
}

}  // namespace
