// The first pieces of the FP8 MMA path (issue 5 item 2, docs/perf-notes.md "Step 2 (FP8 MMAs)"):
// the e2m1 -> e4m3 weight conversion (exact, times 2^-6) and the m16n8k32 e4m3 fragment layout of
// ptx/mma.cuh, each against the reference on the GPU.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <chrono>
#include <random>
#include <string>
#include <vector>

#include "cuda/driver.hpp"
#include "cuda/launch.hpp"
#include "jit/compiler.hpp"
#include "reference/formats.hpp"
#include "tests/gpu/fp8_mma_probe_source.hpp"
#include "tests/gpu/wgmma_mix_probe_source.hpp"
#include "tests/gpu/wgmma_rate_probe_source.hpp"

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


// The wgmma rate probe (tests/gpu/wgmma_rate_probe_source.hpp): one CTA an SM, one or two warpgroups each, groups of
// m64n128 MMAs over 128 k into one accumulator set, as the e4m3 GEMM consumers issue them (A from registers, fixed or
// reloaded every group) and with A from shared memory, against bf16 with A from registers. A short run must end every
// accumulator at exactly 128 x iterations (ones times ones); a long one is timed. Prints each form's rate: session 66
// saw groups of 4 e4m3 MMAs take ~1000-1300 cycles inside the GEMMs (docs/perf-notes.md), against 256 at the e4m3 rate.
TEST(Fp8MmaGpu, WgmmaRateProbeAccumulatesAndReportsItsRate) {
  if (cu::device_count() == 0) GTEST_SKIP() << "no CUDA device";
  const cu::DeviceInfo info = cu::current_device_info();
  if (info.cc_major * 10 + info.cc_minor < 90) GTEST_SKIP() << "no wgmma on sm_" << info.cc_major << info.cc_minor;
  // NOTE: 16 iterations sum to 2048. The e4m3 MMAs' own accumulation drops a product of 1 onto a sum of 2^14: on an
  // H100 the long run's e4m3 accumulators stopped at 16384 (session 67), so only the short run checks values.
  const int ctas = info.num_sms, checked_iterations = 16, timed_iterations = 8192;
  cu::DeviceBuffer out(static_cast<size_t>(2 * ctas * 4));
  cu::Stream stream;
  for (const char* entry : {"moeq_test_wgmma_rate_e4m3_rs", "moeq_test_wgmma_rate_e4m3_ss", "moeq_test_wgmma_rate_bf16_rs",
                            "moeq_test_wgmma_rate_e4m3_rs_fresh", "moeq_test_wgmma_rate_bf16_rs_fresh"})
    for (int warpgroups : {1, 2}) {
      const cu::CUfunction f = moeq::jit::kernel_cache().function({entry, moeq::test::kWgmmaRateProbeSource});
      cu::LaunchShape shape;
      shape.grid_x = static_cast<unsigned>(ctas);
      shape.block_x = 128u * static_cast<unsigned>(warpgroups);
      shape.smem_bytes = 8192 + 32768;
      shape.programmatic = false;
      out.fill_bytes(0xFF);
      cu::launch(f, shape, stream.get(), out.ptr(), checked_iterations);
      stream.synchronize();
      const std::vector<float> got = out.to_host<float>(static_cast<size_t>(2 * ctas));
      for (int c = 0; c < ctas; ++c)
        for (int w = 0; w < warpgroups; ++w)
          ASSERT_EQ(got[static_cast<size_t>(2 * c + w)], 128.0f * checked_iterations)
              << entry << " CTA " << c << " warpgroup " << w;
      double best_ms = 1e30;
      for (int round = 0; round < 3; ++round) {
        const auto start = std::chrono::steady_clock::now();
        cu::launch(f, shape, stream.get(), out.ptr(), timed_iterations);
        stream.synchronize();
        best_ms = std::min(best_ms, std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start).count());
      }
      const float last = out.to_host<float>(1)[0];
      // Per warpgroup and iteration: 64 x 128 x 128 multiply-adds.
      const double flops = 2.0 * 64 * 128 * 128 * timed_iterations * warpgroups * ctas;
      std::printf("%s, %d warpgroup(s) a CTA: %.3f ms, %.0f TFLOP/s (long run's first accumulator %.0f)\n", entry,
                  warpgroups, best_ms, flops / best_ms * 1e-9, last);
    }
}

// The wgmma mix probe (tests/gpu/wgmma_mix_probe_source.hpp): the e4m3 groups of the rate probe with fragments
// reloaded every group, two consumer warpgroups a CTA, plus one of the e4m3 GEMM consumers' surroundings at a time
// (ALU work per fragment register, the window-1 promotion, scale loads from global memory, a copy warpgroup). A short
// run checks every accumulator; a long one prints the rate, to say which surrounding slows the MMAs.
TEST(Fp8MmaGpu, WgmmaMixProbeAccumulatesAndReportsItsRate) {
  if (cu::device_count() == 0) GTEST_SKIP() << "no CUDA device";
  const cu::DeviceInfo info = cu::current_device_info();
  if (info.cc_major * 10 + info.cc_minor < 90) GTEST_SKIP() << "no wgmma on sm_" << info.cc_major << info.cc_minor;
  const int ctas = info.num_sms, checked_iterations = 16, timed_iterations = 8192;
  // 32 MB of source chunks: L2-resident on an H100 or H200 (50 / 60 MB), as the GEMMs' token rows mostly are.
  const int src_chunks = 2 << 20;
  cu::DeviceBuffer src(static_cast<size_t>(src_chunks) * 16);
  src.fill_bytes(0x11);
  cu::DeviceBuffer out(static_cast<size_t>(2 * ctas * 4));
  cu::Stream stream;
  for (const moeq::test::WgmmaMixEntry& entry : moeq::test::kWgmmaMixEntries) {
    const cu::CUfunction f = moeq::jit::kernel_cache().function({entry.name, moeq::test::kWgmmaMixProbeSource});
    cu::LaunchShape shape;
    shape.grid_x = static_cast<unsigned>(ctas);
    shape.block_x = entry.third_warpgroup ? 384u : 256u;
    shape.smem_bytes = 8192 + 32768 + (entry.third_warpgroup ? 65536 : 0);
    shape.programmatic = false;
    cu::check(cu::driver().cuFuncSetAttribute(f, cu::func_attr::kMaxDynamicSharedSizeBytes,
                                              static_cast<int>(shape.smem_bytes)),
              "cuFuncSetAttribute");
    const cu::CUdeviceptr src_ptr = src.ptr();
    out.fill_bytes(0xFF);
    cu::launch(f, shape, stream.get(), out.ptr(), checked_iterations, src_ptr, src_chunks, 1.0f);
    stream.synchronize();
    const std::vector<float> got = out.to_host<float>(static_cast<size_t>(2 * ctas));
    int wrong = 0;
    for (int c = 0; c < ctas; ++c)
      for (int w = 0; w < 2; ++w)
        if (got[static_cast<size_t>(2 * c + w)] != 128.0f * checked_iterations && wrong++ == 0)
          ADD_FAILURE() << entry.name << " CTA " << c << " warpgroup " << w << ": " << got[static_cast<size_t>(2 * c + w)]
                        << " against " << 128.0f * checked_iterations;
    if (wrong > 0) std::printf("%s: %d of %d accumulators wrong\n", entry.name, wrong, 2 * ctas);
    double best_ms = 1e30;
    for (int round = 0; round < 3; ++round) {
      const auto start = std::chrono::steady_clock::now();
      cu::launch(f, shape, stream.get(), out.ptr(), timed_iterations, src_ptr, src_chunks, 1.0f);
      stream.synchronize();
      best_ms = std::min(best_ms, std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start).count());
    }
    const double flops = 2.0 * 64 * 128 * 128 * timed_iterations * 2 * ctas;
    // At the e4m3 rate a group of 4 m64n128k32 takes 256 SM cycles, so two warpgroups' groups 512 (~260 ns at 1.98 GHz).
    std::printf("%s: %.3f ms, %.0f TFLOP/s, %.1f ns a group (both warpgroups)\n", entry.name, best_ms,
                flops / best_ms * 1e-9, best_ms * 1e6 / timed_iterations);
  }
}

}  // namespace
