// Elementwise kernels against the reference: e4m3 / e2m1 / ue8m0 codecs bit for bit over every
// input class; the 9 activations (bf16 / f16, interleaved, clamps) within 1 ulp of the rounded
// reference; the 3 activation quantizers bit-exact in codes and scales. Outputs are pre-filled
// with 0xFF (plus a guard tail that must stay 0xFF) before each run.
#include <gtest/gtest.h>

#include <algorithm>
#include <bit>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <limits>
#include <random>
#include <string>
#include <vector>

#include "cuda/driver.hpp"
#include "cuda/elementwise.hpp"
#include "cuda/launch.hpp"
#include "common/parallel.hpp"
#include "jit/compiler.hpp"
#include "moeq/error.hpp"
#include "reference/activation.hpp"
#include "reference/formats.hpp"
#include "reference/quantize.hpp"
#include "tests/gpu/quantizer_test_util.hpp"
#include "device/moeq_dev/format/mma_order.cuh"

namespace {

namespace cu = moeq::cuda;
using moeq::test::download;
using moeq::test::expect_guard_intact;
using moeq::test::poisoned;
using moeq::test::quantize_input;
using moeq::test::to_half;
using moeq::ActFormat;
using moeq::Activation;
using moeq::DType;

#define SKIP_WITHOUT_DEVICE() \
  if (cu::device_count() == 0) GTEST_SKIP() << "no CUDA device"

// ---------------------------------------------------------------- codecs

constexpr const char* kCodecSource = R"(#include "moeq_dev/format/fp4.cuh"
#include "moeq_dev/format/fp8.cuh"
#include "moeq_dev/format/ue8m0.cuh"
#include "moeq_dev/ptx/grid_dependency.cuh"
struct CodecCfg { static constexpr int kThreads = 256; };
// out: 7 bytes per input: e4m3 (arch path), e4m3 (software path), e2m1, ue8m0(x,448), ue8m0(x,6),
// e4m3 of the pair path's high half, e2m1 (generic integer path). dec: e4m3 / e2m1 / ue8m0 decode of code i (i < 256).
extern "C" __global__ void __launch_bounds__(CodecCfg::kThreads)
moeq_test_codecs(const float* in, unsigned char* out, float* dec, int n) {
  moeq_dev::begin_dependent_grid();  // launched through cuda::launch, as every moeq kernel
  const int i = blockIdx.x * CodecCfg::kThreads + threadIdx.x;
  if (i < 256) {
    dec[3 * i] = moeq_dev::e4m3_to_f32(i);
    dec[3 * i + 1] = moeq_dev::e2m1_to_f32(i & 15);
    dec[3 * i + 2] = moeq_dev::ue8m0_to_f32(i);
  }
  if (i >= n) return;
  const float x = in[i];
  out[7 * i] = moeq_dev::f32_to_e4m3(x);
  out[7 * i + 1] = moeq_dev::f32_to_e4m3_sw(x);
  out[7 * i + 2] = moeq_dev::f32_to_e2m1(x);
  out[7 * i + 3] = moeq_dev::ue8m0_scale_for(fabsf(x), 448.0f);
  out[7 * i + 4] = moeq_dev::ue8m0_scale_for(fabsf(x), 6.0f);
  out[7 * i + 5] = moeq_dev::f32x2_to_e4m3x2(1.0f, x) >> 8;
  out[7 * i + 6] = moeq_dev::f32_to_e2m1_sw(x);
}
)";

std::vector<float> codec_inputs() {
  std::vector<float> v;
  for (uint32_t b = 0; b < 65536; ++b) v.push_back(moeq::ref::bf16_to_f32(static_cast<uint16_t>(b)));
  // Every e4m3 / e2m1 value, the midpoints between neighbours (ties) and one fp32 ulp either side.
  std::vector<float> grid;
  for (int c = 0; c < 256; ++c) grid.push_back(moeq::ref::e4m3_to_f32(static_cast<uint8_t>(c)));
  for (int c = 0; c < 16; ++c) grid.push_back(moeq::ref::e2m1_to_f32(static_cast<uint8_t>(c)));
  for (int c = 0; c < 255; ++c) grid.push_back(moeq::ref::ue8m0_to_f32(static_cast<uint8_t>(c)) * 448.0f);
  for (int c = 0; c < 255; ++c) grid.push_back(moeq::ref::ue8m0_to_f32(static_cast<uint8_t>(c)) * 6.0f);
  for (float g : {448.0f, 464.0f, 480.0f, 6.0f, 5.0f, 7.0f, 0.25f, 0.75f, 1.25f, 1.75f, 2.5f, 3.5f,
                  0.001953125f, 0.0009765625f, 0.00146484375f, 0.0029296875f})
    grid.push_back(g);
  for (size_t i = 0, n = grid.size(); i < n; ++i) {
    for (size_t j = i + 1; j < std::min(n, i + 2); ++j) grid.push_back(0.5f * (grid[i] + grid[j]));
  }
  for (float g : grid) {
    if (std::isnan(g)) continue;
    for (float s : {1.0f, -1.0f}) {
      const float x = s * g;
      v.push_back(x);
      v.push_back(std::nextafter(x, std::numeric_limits<float>::infinity()));
      v.push_back(std::nextafter(x, -std::numeric_limits<float>::infinity()));
    }
  }
  const uint32_t specials[] = {0x7F800000u, 0xFF800000u, 0x7FC00000u, 0xFFC00000u, 0x7F800001u, 0xFFFFFFFFu,
                               0x00000001u, 0x80000001u, 0x007FFFFFu, 0x00400000u, 0x00400001u, 0x00800000u,
                               0x7F7FFFFFu, 0xFF7FFFFFu, 0x00000000u, 0x80000000u};
  for (uint32_t b : specials) v.push_back(std::bit_cast<float>(b));
  std::mt19937 rng(7);
  for (int i = 0; i < 1 << 20; ++i) v.push_back(std::bit_cast<float>(static_cast<uint32_t>(rng())));
  return v;
}

TEST(ElementwiseGpu, CodecsMatchReferenceOnEveryInputClass) {
  SKIP_WITHOUT_DEVICE();
  const std::vector<float> in = codec_inputs();
  const int n = static_cast<int>(in.size());
  cu::DeviceBuffer d_in = cu::DeviceBuffer::from_host(in);
  cu::DeviceBuffer d_out = poisoned(7 * in.size());
  cu::DeviceBuffer d_dec(3 * 256 * sizeof(float));
  const cu::CUfunction f = moeq::jit::kernel_cache().function({"moeq_test_codecs", kCodecSource});
  cu::Stream stream;
  cu::LaunchShape shape;
  shape.grid_x = static_cast<unsigned>((n + 255) / 256);
  shape.block_x = 256;
  cu::launch(f, shape, stream.get(), d_in.ptr(), d_out.ptr(), d_dec.ptr(), n);
  stream.synchronize();
  const std::vector<uint8_t> out = download(d_out);
  const std::vector<float> dec = d_dec.to_host<float>(3 * 256);
  expect_guard_intact(out, 7 * in.size(), "codec out");

  const char* names[] = {"e4m3 (arch path)", "e4m3 (software path)", "e2m1", "ue8m0(|x|, 448)",
                         "ue8m0(|x|, 6)", "e4m3 (pair, high half)", "e2m1 (integer path)"};
  for (int k = 0; k < 7; ++k) {
    int64_t mismatches = 0;
    for (int i = 0; i < n; ++i) {
      const float x = in[i];
      uint8_t want = 0;
      switch (k) {
        case 0: case 1: case 5: want = moeq::ref::f32_to_e4m3(x); break;
        case 2: case 6: want = moeq::ref::f32_to_e2m1(x); break;
        case 3: want = moeq::ref::ue8m0_scale_for(std::fabs(x), 448.0f); break;
        case 4: want = moeq::ref::ue8m0_scale_for(std::fabs(x), 6.0f); break;
      }
      const uint8_t got = out[7 * static_cast<size_t>(i) + k];
      if (got != want && mismatches++ == 0) {
        ADD_FAILURE() << names[k] << ": first mismatch at input " << i << ", x = " << x << " (bits 0x"
                      << std::hex << std::bit_cast<uint32_t>(x) << "): gpu 0x" << int{got} << ", reference 0x"
                      << int{want} << std::dec;
      }
    }
    EXPECT_EQ(mismatches, 0) << names[k] << " over " << n << " inputs";
  }
  for (int c = 0; c < 256; ++c) {
    const float want[3] = {moeq::ref::e4m3_to_f32(static_cast<uint8_t>(c)),
                           moeq::ref::e2m1_to_f32(static_cast<uint8_t>(c & 15)),
                           moeq::ref::ue8m0_to_f32(static_cast<uint8_t>(c))};
    for (int k = 0; k < 3; ++k) {
      const float got = dec[3 * c + k];
      const bool same = std::isnan(want[k]) ? std::isnan(got) && std::signbit(got) == std::signbit(want[k])
                                            : std::bit_cast<uint32_t>(got) == std::bit_cast<uint32_t>(want[k]);
      EXPECT_TRUE(same) << "decode " << k << " (e4m3, e2m1, ue8m0) of code " << c << ": gpu " << got
                        << ", reference " << want[k];
    }
  }
}

// ---------------------------------------------------------------- activations

float from_half(DType dt, uint16_t h) {
  return dt == DType::bf16 ? moeq::ref::bf16_to_f32(h) : moeq::ref::f16_to_f32(h);
}

// Gate/up values: random in [-12, 12], plus limits, just beyond them, zeros, big values.
std::vector<uint16_t> activation_input(DType dt, int64_t rows, int64_t cols, uint32_t seed) {
  std::mt19937 rng(seed);
  std::uniform_real_distribution<float> uni(-12.0f, 12.0f);
  const float specials[] = {7.0f, -7.0f, 7.03125f, -7.03125f, 6.96875f, 0.0f, -0.0f, 1.0f, -1.0f,
                            20.0f, -20.0f, 90.0f, -90.0f, 1e-3f, -1e-3f, 3.0f, -3.0f, 100.0f};
  std::vector<uint16_t> v(static_cast<size_t>(rows * cols));
  for (size_t i = 0; i < v.size(); ++i) {
    const float x = (rng() % 8 == 0) ? specials[rng() % std::size(specials)] : uni(rng);
    v[i] = to_half(dt, x);
  }
  return v;
}

struct ActCase {
  moeq::ActivationParams params;
  bool interleaved;
};

std::vector<ActCase> activation_cases() {
  std::vector<ActCase> cases;
  for (const Activation kind : moeq::all_values<Activation>()) {
    moeq::ActivationParams p;
    p.kind = kind;
    cases.push_back({p, false});
    if (moeq::is_gated(kind)) cases.push_back({p, true});
  }
  moeq::ActivationParams silu_clamped;
  silu_clamped.silu_clamp = 7.0f;
  cases.push_back({silu_clamped, false});
  moeq::ActivationParams oai;
  oai.kind = Activation::swiglu_oai;
  oai.swiglu_alpha = 1.5f;
  oai.swiglu_limit = 3.0f;
  cases.push_back({oai, true});
  moeq::ActivationParams step;
  step.kind = Activation::swiglu_step;
  step.swiglu_limit = 2.5f;
  cases.push_back({step, false});
  return cases;
}

TEST(ElementwiseGpu, ActivationsMatchReferenceWithinOneUlp) {
  SKIP_WITHOUT_DEVICE();
  cu::Stream stream;
  // NOTE: gelu's 1 + erf(x) (and gelu_tanh's 1 + tanh) cancel for x << 0: an ulp of erff near
  // -1 (CUDA and glibc each round within 1-2 ulp) becomes a large relative error of a tiny
  // output, scaled by |g| (and |u| when gated). For the gelu kinds only, such elements pass when
  // |gpu - ref| <= kCancelAbs * |g| * max(1, |u|) (outputs are O(1); these are ~1e-4 and below).
  constexpr double kCancelAbs = 1e-6;
  int64_t total = 0, one_ulp = 0, cancel = 0;
  for (const DType dt : {DType::bf16, DType::f16}) {
    for (const ActCase& c : activation_cases()) {
      // I = 100 takes the scalar path (rows not 16-byte aligned); the others the 16-byte path.
      for (const auto& [rows, inter] : std::vector<std::pair<int64_t, int64_t>>{
               {1, 8}, {7, 768}, {129, 100}, {33, 2048}, {0, 64}}) {
        const bool gated = moeq::is_gated(c.params.kind);
        const int64_t in_cols = gated ? 2 * inter : inter;
        const std::vector<uint16_t> in = activation_input(dt, rows, in_cols, static_cast<uint32_t>(rows * 31 + inter));
        std::vector<float> in_f(in.size());
        for (size_t i = 0; i < in.size(); ++i) in_f[i] = from_half(dt, in[i]);
        std::vector<float> ref(static_cast<size_t>(rows * inter));
        moeq::ref::apply_activation(c.params, c.interleaved, in_f.data(), rows, inter, ref.data());

        cu::DeviceBuffer d_in = cu::DeviceBuffer::from_host(in.empty() ? std::vector<uint16_t>(1) : in);
        const size_t out_bytes = static_cast<size_t>(rows * inter) * 2;
        cu::DeviceBuffer d_out = poisoned(out_bytes);
        cu::activation(c.params, c.interleaved, dt, d_in.ptr(), rows, inter, d_out.ptr(), stream.get());
        stream.synchronize();
        const std::vector<uint8_t> bytes = download(d_out);
        const std::string what = std::string(moeq::to_string(c.params.kind)) + (c.interleaved ? " interleaved " : " ") +
                                 std::string(moeq::to_string(dt)) + " rows " + std::to_string(rows) + " I " +
                                 std::to_string(inter);
        expect_guard_intact(bytes, out_bytes, what);
        EXPECT_EQ(d_in.to_host<uint16_t>(in.size()), in) << what << ": the input was modified";
        int64_t bad = 0;
        for (int64_t i = 0; i < rows * inter; ++i) {
          const uint16_t got = static_cast<uint16_t>(bytes[2 * i] | (bytes[2 * i + 1] << 8));
          const uint16_t want = to_half(dt, ref[i]);
          ++total;
          if (got == want) continue;
          const bool nan_both = std::isnan(from_half(dt, got)) && std::isnan(from_half(dt, want));
          const int diff = std::abs(static_cast<int>(got) - static_cast<int>(want));
          const bool same_sign = ((got ^ want) & 0x8000) == 0;
          if (nan_both) continue;
          if (diff == 1 && same_sign) {
            ++one_ulp;
            continue;
          }
          const Activation kind = c.params.kind;
          const bool cancels = kind == Activation::gelu || kind == Activation::gelu_tanh ||
                               kind == Activation::gelu_no_mul || kind == Activation::gelu_tanh_no_mul;
          const int64_t r = i / inter, j = i % inter;
          const float g = !gated ? in_f[r * in_cols + j] : c.interleaved ? in_f[r * in_cols + 2 * j] : in_f[r * in_cols + j];
          const float u = !gated ? 1.0f : c.interleaved ? in_f[r * in_cols + 2 * j + 1] : in_f[r * in_cols + inter + j];
          const double bound = kCancelAbs * std::fabs(g) * std::max(1.0, std::fabs(static_cast<double>(u)));
          if (cancels && std::fabs(static_cast<double>(from_half(dt, got)) - ref[i]) <= bound) {
            ++cancel;
            continue;
          }
          if (bad++ == 0) {
            ADD_FAILURE() << what << ": first mismatch at [" << i / inter << ", " << i % inter << "]: gpu 0x"
                          << std::hex << got << std::dec << " (" << from_half(dt, got) << "), reference 0x"
                          << std::hex << want << std::dec << " (" << from_half(dt, want) << ", fp32 " << ref[i] << ")";
          }
        }
        EXPECT_EQ(bad, 0) << what << ": elements more than 1 ulp away";
      }
    }
  }
  std::printf("activations: %lld elements, %lld differ by 1 ulp of the output dtype (%.4f%%), %lld tiny outputs by"
              " more but within %.0e * |g| * max(1, |u|) (gelu cancellation), rest bit-exact\n",
              static_cast<long long>(total), static_cast<long long>(one_ulp), 100.0 * one_ulp / std::max<int64_t>(total, 1),
              static_cast<long long>(cancel), kCancelAbs);
}

// ---------------------------------------------------------------- quantizers

TEST(ElementwiseGpu, QuantizersMatchReferenceBitExactly) {
  SKIP_WITHOUT_DEVICE();
  cu::Stream stream;
  int64_t nan_sign_only = 0;
  for (const DType dt : {DType::bf16, DType::f16}) {
    for (const ActFormat fmt : {ActFormat::fp8_token, ActFormat::mxfp8, ActFormat::mxfp4}) {
      for (const int64_t rows : {0, 1, 7, 129, 4100}) {
        for (const int64_t cols : {32, 768, 2048, 7168}) {
          if (rows == 4100 && cols == 2048) continue;  // keep the CPU reference quick
          // Contiguous, padded (16-byte path) and odd strides (scalar path).
          for (const int64_t pad : {0, 64, 1}) {
            if (rows == 4100 && pad != 0) continue;
            const int64_t stride = cols + pad;
            const std::vector<uint16_t> in = quantize_input(dt, rows, stride, cols, static_cast<uint32_t>(rows + cols + pad));
            std::vector<float> x(static_cast<size_t>(rows * cols));
            for (int64_t r = 0; r < rows; ++r)
              for (int64_t c = 0; c < cols; ++c) x[r * cols + c] = from_half(dt, in[r * stride + c]);
            const size_t code_bytes = static_cast<size_t>(moeq::ref::act_code_bytes(fmt, rows, cols));
            const size_t scale_bytes = static_cast<size_t>(moeq::ref::act_scale_bytes(fmt, rows, cols));
            std::vector<uint8_t> ref_codes(code_bytes), ref_scales(scale_bytes);
            moeq::ref::quantize_activation(fmt, x.data(), rows, cols, ref_codes.data(), ref_scales.data());

            cu::DeviceBuffer d_in = cu::DeviceBuffer::from_host(in.empty() ? std::vector<uint16_t>(8) : in);
            cu::DeviceBuffer d_codes = poisoned(code_bytes), d_scales = poisoned(scale_bytes);
            cu::quantize_activation(fmt, dt, d_in.ptr(), stride, rows, cols, d_codes.ptr(), d_scales.ptr(), stream.get());
            stream.synchronize();
            const std::vector<uint8_t> codes = download(d_codes), scales = download(d_scales);
            const std::string what = std::string(moeq::to_string(fmt)) + " " + std::string(moeq::to_string(dt)) +
                                     " rows " + std::to_string(rows) + " cols " + std::to_string(cols) +
                                     " stride " + std::to_string(stride);
            expect_guard_intact(codes, code_bytes, what + " codes");
            expect_guard_intact(scales, scale_bytes, what + " scales");
            for (size_t i = 0; i < scale_bytes; ++i) {
              if (scales[i] != ref_scales[i]) {
                ADD_FAILURE() << what << ": first scale byte mismatch at " << i << " (row "
                              << (fmt == ActFormat::fp8_token ? i / 4 : i / (cols / 32)) << "): gpu 0x" << std::hex
                              << int{scales[i]} << ", reference 0x" << int{ref_scales[i]} << std::dec;
                break;
              }
            }
            for (size_t i = 0; i < code_bytes; ++i) {
              if (codes[i] == ref_codes[i]) continue;
              // NOTE: x / s with x = +-inf and s = inf is a NaN whose sign IEEE leaves open (x86
              // sets it, the GPU does not); any NaN code is accepted there, only there.
              const int64_t col = static_cast<int64_t>(i) % cols;
              const float xi = x[(i / cols) * cols + col];
              if (fmt == ActFormat::fp8_token && std::isinf(xi) && (codes[i] & 0x7F) == 0x7F &&
                  (ref_codes[i] & 0x7F) == 0x7F) {
                ++nan_sign_only;
                continue;
              }
              const int64_t per_row = fmt == ActFormat::mxfp4 ? cols / 2 : cols;
              ADD_FAILURE() << what << ": first code mismatch at byte " << i << " (row " << i / per_row << ", col "
                            << (fmt == ActFormat::mxfp4 ? 2 * (i % per_row) : i % per_row) << "): gpu 0x" << std::hex
                            << int{codes[i]} << ", reference 0x" << int{ref_codes[i]} << std::dec;
              break;
            }
          }
        }
      }
    }
  }
  std::printf("quantizers: %lld fp8_token codes of inf/inf differ only in the NaN sign\n",
              static_cast<long long>(nan_sign_only));
}

// The dequantizers give the values the reference multiplies with (ref::dequantize_activation of the
// reference's own codes and scales), rounded to the dtype: MX q * 2^(code - 127), FP8 per token q
// alone (its scale belongs to the GEMM's epilogue). Both round one fp32 value, so bit for bit (f16
// clamped to +-65504); NaN for NaN. The rows past `rows` and the padding columns stay poisoned.
TEST(ElementwiseGpu, DequantizersGiveTheReferenceValues) {
  SKIP_WITHOUT_DEVICE();
  cu::Stream stream;
  for (const DType dt : {DType::bf16, DType::f16}) {
    for (const ActFormat fmt : {ActFormat::fp8_token, ActFormat::mxfp8, ActFormat::mxfp4}) {
      for (const int64_t rows : {1, 7, 129}) {
        for (const int64_t cols : {32, 2048, 2880}) {
          for (const int64_t pad : {0, 8, 3}) {  // 16-byte path, padded rows, scalar path
            const int64_t stride = cols + pad;
            const std::vector<uint16_t> in = quantize_input(dt, rows, cols, cols, static_cast<uint32_t>(rows * cols + pad));
            std::vector<float> x(in.size());
            for (size_t i = 0; i < in.size(); ++i) x[i] = from_half(dt, in[i]);
            const size_t code_bytes = static_cast<size_t>(moeq::ref::act_code_bytes(fmt, rows, cols));
            const size_t scale_bytes = static_cast<size_t>(moeq::ref::act_scale_bytes(fmt, rows, cols));
            std::vector<uint8_t> codes(code_bytes), scales(scale_bytes);
            moeq::ref::quantize_activation(fmt, x.data(), rows, cols, codes.data(), scales.data());
            std::vector<uint8_t> unit_scales = scales;
            const float one = 1.0f;
            if (fmt == ActFormat::fp8_token)
              for (int64_t r = 0; r < rows; ++r) std::memcpy(&unit_scales[r * 4], &one, 4);
            std::vector<float> values(static_cast<size_t>(rows * cols));
            moeq::ref::dequantize_activation(fmt, codes.data(), unit_scales.data(), rows, cols, values.data());

            cu::DeviceBuffer d_codes = cu::DeviceBuffer::from_host(codes), d_scales = cu::DeviceBuffer::from_host(scales);
            const size_t out_bytes = static_cast<size_t>(rows * stride * 2);
            cu::DeviceBuffer d_out = poisoned(out_bytes);
            cu::dequantize_activation(fmt, dt, d_codes.ptr(), d_scales.ptr(), rows, cols, d_out.ptr(), stride, stream.get());
            stream.synchronize();
            const std::vector<uint8_t> out = download(d_out);
            const std::string what = std::string(moeq::to_string(fmt)) + " " + std::string(moeq::to_string(dt)) +
                                     " rows " + std::to_string(rows) + " cols " + std::to_string(cols) +
                                     " stride " + std::to_string(stride);
            expect_guard_intact(out, out_bytes, what);
            bool reported = false;
            for (int64_t r = 0; r < rows && !reported; ++r)
              for (int64_t c = 0; c < stride && !reported; ++c) {
                uint16_t got;
                std::memcpy(&got, &out[static_cast<size_t>((r * stride + c) * 2)], 2);
                if (c >= cols) {  // padding: never written
                  if (got != 0xFFFFu) {
                    ADD_FAILURE() << what << ": padding (" << r << ", " << c << ") was written";
                    reported = true;
                  }
                  continue;
                }
                float want = values[static_cast<size_t>(r * cols + c)];
                // f16 clamps what its range cannot hold (moe/dequantize.cuh): MX codes rounded up
                // near 65504.
                if (dt == DType::f16 && std::fabs(want) > 65504.0f) want = std::copysign(65504.0f, want);
                const uint16_t want_bits = to_half(dt, want);
                const bool both_nan = std::isnan(want) && std::isnan(from_half(dt, got));
                if (got != want_bits && !both_nan) {
                  ADD_FAILURE() << what << ": first mismatch at (" << r << ", " << c << "): gpu 0x" << std::hex << got
                                << ", reference 0x" << want_bits << std::dec << " (" << want << ")";
                  reported = true;
                }
              }
          }
        }
      }
    }
  }
}

// quantize_activation_values (the 16-bit GEMM path's input in one kernel) writes exactly what
// quantize_activation followed by dequantize_activation write: the values bit for bit (NaN bits
// too: both decode the same codes) and the scales byte for byte, over the special rows of
// quantize_input, the 16-byte and scalar paths and strided inputs. Nothing past the payload is written.
TEST(ElementwiseGpu, QuantizeToValuesEqualsQuantizeThenDequantize) {
  SKIP_WITHOUT_DEVICE();
  cu::Stream stream;
  for (const DType dt : {DType::bf16, DType::f16}) {
    for (const ActFormat fmt : {ActFormat::fp8_token, ActFormat::mxfp8, ActFormat::mxfp4}) {
      for (const int64_t rows : {1, 7, 129}) {
        for (const int64_t cols : {32, 2048, 2880, 16416}) {
          for (const int64_t pad : {0, 8, 3}) {  // 16-byte path, padded rows, scalar path
            if (cols == 16416 && rows == 129) continue;  // the long FP8 row (re-read passes) needs few rows
            const int64_t stride = cols + pad;
            const std::vector<uint16_t> in =
                quantize_input(dt, rows, stride, cols, static_cast<uint32_t>(3 * rows + cols + pad));
            cu::DeviceBuffer d_in = cu::DeviceBuffer::from_host(in);
            const size_t code_bytes = static_cast<size_t>(moeq::ref::act_code_bytes(fmt, rows, cols));
            const size_t scale_bytes = static_cast<size_t>(moeq::ref::act_scale_bytes(fmt, rows, cols));
            const size_t value_bytes = static_cast<size_t>(rows * cols * 2);
            cu::DeviceBuffer d_codes = poisoned(code_bytes), d_scales = poisoned(scale_bytes);
            cu::DeviceBuffer d_two_pass = poisoned(value_bytes), d_one_pass = poisoned(value_bytes);
            cu::DeviceBuffer d_one_pass_scales = poisoned(scale_bytes);
            cu::quantize_activation(fmt, dt, d_in.ptr(), stride, rows, cols, d_codes.ptr(), d_scales.ptr(), stream.get());
            cu::dequantize_activation(fmt, dt, d_codes.ptr(), d_scales.ptr(), rows, cols, d_two_pass.ptr(), cols,
                                      stream.get());
            cu::quantize_activation_values(fmt, dt, d_in.ptr(), stride, rows, cols, d_one_pass.ptr(),
                                           d_one_pass_scales.ptr(), stream.get());
            stream.synchronize();
            const std::string what = std::string(moeq::to_string(fmt)) + " " + std::string(moeq::to_string(dt)) +
                                     " rows " + std::to_string(rows) + " cols " + std::to_string(cols) +
                                     " stride " + std::to_string(stride);
            const std::vector<uint8_t> want = download(d_two_pass), got = download(d_one_pass);
            const std::vector<uint8_t> want_scales = download(d_scales), got_scales = download(d_one_pass_scales);
            expect_guard_intact(got, value_bytes, what + " values");
            expect_guard_intact(got_scales, scale_bytes, what + " scales");
            EXPECT_TRUE(std::equal(want_scales.begin(), want_scales.begin() + static_cast<long>(scale_bytes),
                                   got_scales.begin()))
                << what << ": scales differ";
            for (size_t i = 0; i < value_bytes; i += 2)
              if (want[i] != got[i] || want[i + 1] != got[i + 1]) {
                const size_t e = i / 2;
                ADD_FAILURE() << what << ": first mismatch at (" << e / cols << ", " << e % cols << "): one pass 0x"
                              << std::hex << (got[i] | got[i + 1] << 8) << ", two passes 0x" << (want[i] | want[i + 1] << 8)
                              << std::dec;
                break;
              }
          }
        }
      }
    }
  }
}

// activation_quantize_values (GEMM2's input in one kernel) writes exactly what `activation` followed
// by quantize_activation_values write: every activation (interleaved too) x format x dtype, the
// 16-byte and scalar paths (I not a multiple of 8 for FP8 per token; a values pointer off 16-byte
// alignment for MX), rows past 8 warps' registers (I = 16416 re-reads), the FP8 per-token row split
// over 1, 2 (I = 512, 16 rows), 4 (I = 768, 128 rows) and 8 warps, and rows holding +-inf and NaN
// (I = 512 and 768: FP8 per token's special path).
TEST(ElementwiseGpu, ActivationQuantizeEqualsActivationThenQuantize) {
  SKIP_WITHOUT_DEVICE();
  {
    // PERF: the loops below launch 84 fused configs and their unfused pairs; compiled on a thread per core first (the
    // launches then find them in the disk cache) instead of one program after another at the first launch of each,
    // which took 145 s of an H100 machine's device call (session 54).
    std::vector<moeq::jit::KernelSpec> specs;
    for (const DType dt : {DType::bf16, DType::f16})
      for (const Activation kind : moeq::all_values<Activation>())
        for (const bool interleaved : {false, true}) {
          if (interleaved && !moeq::is_gated(kind)) continue;
          specs.push_back(cu::activation_kernel_spec(kind, interleaved, dt));
          for (const ActFormat fmt : {ActFormat::fp8_token, ActFormat::mxfp8, ActFormat::mxfp4}) {
            specs.push_back(cu::quantize_kernel_spec(fmt, dt, true));
            specs.push_back(cu::activation_quantize_kernel_spec(kind, interleaved, fmt, dt));
          }
        }
    moeq::jit::kernel_cache().lookup_all(specs, moeq::jit::current_arch(), moeq::hardware_threads());
  }
  cu::Stream stream;
  std::mt19937 rng(41);
  std::normal_distribution<float> normal(0.0f, 2.0f);
  for (const DType dt : {DType::bf16, DType::f16}) {
    for (const Activation kind : moeq::all_values<Activation>()) {
      for (const bool interleaved : {false, true}) {
        if (interleaved && !moeq::is_gated(kind)) continue;
        for (const ActFormat fmt : {ActFormat::fp8_token, ActFormat::mxfp8, ActFormat::mxfp4}) {
          for (const int64_t inter : {int64_t{64}, int64_t{2880}, int64_t{36}, int64_t{16416}, int64_t{512},
                                      int64_t{768}}) {
            const bool mx = fmt != ActFormat::fp8_token;
            if (mx && inter % 32 != 0) continue;
            const int64_t rows = inter == 16416 ? 3 : inter == 36 ? 7 : inter == 512 ? 16 : inter == 768 ? 128 : 129;
            const int64_t n13 = moeq::is_gated(kind) ? 2 * inter : inter;
            std::vector<uint16_t> gate_up(static_cast<size_t>(rows * n13));
            for (auto& v : gate_up) v = to_half(dt, normal(rng));
            if (inter == 512 || inter == 768) {
              gate_up[static_cast<size_t>(2 * n13 + 5)] = to_half(dt, std::numeric_limits<float>::infinity());
              gate_up[static_cast<size_t>(5 * n13 + 300)] = to_half(dt, -std::numeric_limits<float>::infinity());
              gate_up[static_cast<size_t>(9 * n13 + 7)] = to_half(dt, std::numeric_limits<float>::quiet_NaN());
            }
            moeq::ActivationParams params;
            params.kind = kind;
            if (kind == Activation::silu) params.silu_clamp = 3.0f;
            cu::DeviceBuffer d_in = cu::DeviceBuffer::from_host(gate_up);
            const size_t value_bytes = static_cast<size_t>(rows * inter * 2);
            const size_t scale_bytes = static_cast<size_t>(moeq::ref::act_scale_bytes(fmt, rows, inter));
            cu::DeviceBuffer d_act = poisoned(value_bytes), d_want = poisoned(value_bytes), d_want_scales = poisoned(scale_bytes);
            // MX: the fused values 2 bytes past a 16-byte boundary take the scalar path.
            const size_t skew = mx && inter == 64 ? 2 : 0;
            cu::DeviceBuffer d_got = poisoned(value_bytes + skew), d_got_scales = poisoned(scale_bytes);
            cu::activation(params, interleaved, dt, d_in.ptr(), rows, inter, d_act.ptr(), stream.get());
            cu::quantize_activation_values(fmt, dt, d_act.ptr(), inter, rows, inter, d_want.ptr(), d_want_scales.ptr(),
                                           stream.get());
            cu::activation_quantize_values(params, interleaved, fmt, dt, d_in.ptr(), rows, inter, d_got.ptr() + skew,
                                           d_got_scales.ptr(), stream.get());
            stream.synchronize();
            const std::string what = std::string(moeq::to_string(kind)) + (interleaved ? " interleaved " : " ") +
                                     std::string(moeq::to_string(fmt)) + " " + std::string(moeq::to_string(dt)) +
                                     " rows " + std::to_string(rows) + " I " + std::to_string(inter);
            const std::vector<uint8_t> want = download(d_want), got = download(d_got);
            const std::vector<uint8_t> want_scales = download(d_want_scales), got_scales = download(d_got_scales);
            expect_guard_intact(got, value_bytes + skew, what + " values");
            expect_guard_intact(got_scales, scale_bytes, what + " scales");
            EXPECT_TRUE(std::equal(want_scales.begin(), want_scales.begin() + static_cast<long>(scale_bytes),
                                   got_scales.begin()))
                << what << ": scales differ";
            for (size_t i = 0; i < value_bytes; ++i)
              if (want[i] != got[i + skew]) {
                ADD_FAILURE() << what << ": first differing byte " << i << " (element " << i / 2 << ")";
                break;
              }
          }
        }
      }
    }
  }
}

// The MMA's K order (`/t` GEMM tiles): the activation with mma_order writes the plain activation's bits, each
// row's elements moved to mma_order_position; order_rows_for_mma moves the same way, with row strides and in
// place. Every 0xFF guard past the outputs stays.
TEST(ElementwiseGpu, MmaOrderMovesEveryElementToItsPosition) {
  SKIP_WITHOUT_DEVICE();
  cu::Stream stream;
  std::mt19937 rng(64);
  std::normal_distribution<float> normal(0.0f, 2.0f);
  const auto expect_ordered = [](const std::vector<uint8_t>& plain, const std::vector<uint8_t>& got, int64_t rows,
                                 int64_t cols, int64_t plain_stride, int64_t got_stride, const std::string& what) {
    for (int64_t r = 0; r < rows; ++r)
      for (int64_t k = 0; k < cols; ++k) {
        const size_t from = static_cast<size_t>(2 * (r * plain_stride + k));
        const size_t to = static_cast<size_t>(2 * (r * got_stride + moeq_dev::mma_order_position(k)));
        if (plain[from] != got[to] || plain[from + 1] != got[to + 1]) {
          ADD_FAILURE() << what << ": row " << r << " k " << k << " not at " << moeq_dev::mma_order_position(k);
          return;
        }
      }
  };
  for (const DType dt : {DType::bf16, DType::f16})
    for (const Activation kind : {Activation::silu, Activation::swiglu_oai, Activation::relu2_no_mul})
      for (const int64_t inter : {int64_t{64}, int64_t{768}, int64_t{2880}}) {
        const bool interleaved = kind == Activation::swiglu_oai;
        const int64_t rows = inter == 2880 ? 5 : 37, n13 = moeq::is_gated(kind) ? 2 * inter : inter;
        std::vector<uint16_t> gate_up(static_cast<size_t>(rows * n13));
        for (auto& v : gate_up) v = to_half(dt, normal(rng));
        moeq::ActivationParams params;
        params.kind = kind;
        const size_t bytes = static_cast<size_t>(rows * inter * 2);
        cu::DeviceBuffer d_in = cu::DeviceBuffer::from_host(gate_up), d_plain = poisoned(bytes), d_ordered = poisoned(bytes);
        cu::activation(params, interleaved, dt, d_in.ptr(), rows, inter, d_plain.ptr(), stream.get());
        cu::activation(params, interleaved, dt, d_in.ptr(), rows, inter, d_ordered.ptr(), stream.get(), true);
        stream.synchronize();
        const std::string what = std::string(moeq::to_string(kind)) + " " + std::string(moeq::to_string(dt)) + " I " +
                                 std::to_string(inter);
        const std::vector<uint8_t> plain = download(d_plain), ordered = download(d_ordered);
        expect_guard_intact(ordered, bytes, what);
        expect_ordered(plain, ordered, rows, inter, inter, inter, what);
      }
  // The quantizers' 16-bit values (GEMM1's and GEMM2's inputs with quantized activations): the same bits moved,
  // the scales unchanged; the 16-byte path and (stride cols + 2) the scalar one.
  for (const DType dt : {DType::bf16, DType::f16})
    for (const ActFormat fmt : {ActFormat::fp8_token, ActFormat::mxfp8, ActFormat::mxfp4})
      for (const int64_t cols : {int64_t{768}, int64_t{2880}}) {
        const int64_t rows = 33, stride = cols == 768 ? cols + 2 : cols, bytes = rows * cols * 2;
        const size_t scale_bytes = static_cast<size_t>(moeq::ref::act_scale_bytes(fmt, rows, cols));
        std::vector<uint16_t> x(static_cast<size_t>(rows * stride));
        for (auto& v : x) v = to_half(dt, normal(rng));
        cu::DeviceBuffer d_x = cu::DeviceBuffer::from_host(x), d_plain = poisoned(static_cast<size_t>(bytes)),
                         d_ordered = poisoned(static_cast<size_t>(bytes)), s_plain = poisoned(scale_bytes),
                         s_ordered = poisoned(scale_bytes);
        cu::quantize_activation_values(fmt, dt, d_x.ptr(), stride, rows, cols, d_plain.ptr(), s_plain.ptr(), stream.get());
        cu::quantize_activation_values(fmt, dt, d_x.ptr(), stride, rows, cols, d_ordered.ptr(), s_ordered.ptr(),
                                       stream.get(), true);
        // GEMM2's input: the activation of [rows, 2 cols] (SiLU), quantized.
        std::vector<uint16_t> gate_up(static_cast<size_t>(rows * 2 * cols));
        for (auto& v : gate_up) v = to_half(dt, normal(rng));
        moeq::ActivationParams silu;
        cu::DeviceBuffer d_gu = cu::DeviceBuffer::from_host(gate_up), a_plain = poisoned(static_cast<size_t>(bytes)),
                         a_ordered = poisoned(static_cast<size_t>(bytes)), as_plain = poisoned(scale_bytes),
                         as_ordered = poisoned(scale_bytes);
        cu::activation_quantize_values(silu, false, fmt, dt, d_gu.ptr(), rows, cols, a_plain.ptr(), as_plain.ptr(),
                                       stream.get());
        cu::activation_quantize_values(silu, false, fmt, dt, d_gu.ptr(), rows, cols, a_ordered.ptr(), as_ordered.ptr(),
                                       stream.get(), true);
        stream.synchronize();
        const std::string what = std::string(moeq::to_string(fmt)) + " " + std::string(moeq::to_string(dt)) + " cols " +
                                 std::to_string(cols);
        const std::vector<uint8_t> ordered = download(d_ordered), a_got = download(a_ordered);
        expect_guard_intact(ordered, static_cast<size_t>(bytes), what + " values");
        expect_guard_intact(a_got, static_cast<size_t>(bytes), what + " activation values");
        expect_ordered(download(d_plain), ordered, rows, cols, cols, cols, what + " values");
        expect_ordered(download(a_plain), a_got, rows, cols, cols, cols, what + " activation values");
        EXPECT_TRUE(download(s_plain) == download(s_ordered)) << what << ": scales differ";
        EXPECT_TRUE(download(as_plain) == download(as_ordered)) << what << ": activation scales differ";
      }
  // FP8 per-token codes (the e4m3 wgmma tiles' inputs, `/t`): each code moved to e4m3_mma_order_position, the
  // scales unchanged; the 16-byte path and (stride cols + 2) the scalar one. Other formats' codes refuse the order.
  for (const DType dt : {DType::bf16, DType::f16})
    for (const int64_t cols : {int64_t{768}, int64_t{2944}}) {
      const int64_t rows = 33, stride = cols == 768 ? cols + 2 : cols, bytes = rows * cols;
      const size_t scale_bytes = static_cast<size_t>(moeq::ref::act_scale_bytes(ActFormat::fp8_token, rows, cols));
      std::vector<uint16_t> x(static_cast<size_t>(rows * stride)), gate_up(static_cast<size_t>(rows * 2 * cols));
      for (auto& v : x) v = to_half(dt, normal(rng));
      for (auto& v : gate_up) v = to_half(dt, normal(rng));
      moeq::ActivationParams silu;
      cu::DeviceBuffer d_x = cu::DeviceBuffer::from_host(x), d_gu = cu::DeviceBuffer::from_host(gate_up);
      std::vector<cu::DeviceBuffer> codes, scales;
      for (int i = 0; i < 4; ++i) {
        codes.push_back(poisoned(static_cast<size_t>(bytes)));
        scales.push_back(poisoned(scale_bytes));
      }
      for (const bool ordered : {false, true}) {
        const int i = ordered ? 1 : 0;
        cu::quantize_activation(ActFormat::fp8_token, dt, d_x.ptr(), stride, rows, cols, codes[i].ptr(),
                                scales[i].ptr(), stream.get(), ordered);
        cu::activation_quantize_codes(silu, false, ActFormat::fp8_token, dt, d_gu.ptr(), rows, cols,
                                      codes[2 + i].ptr(), scales[2 + i].ptr(), stream.get(), ordered);
      }
      stream.synchronize();
      for (const int first : {0, 2}) {
        const std::string what = std::string(first == 0 ? "codes " : "activation codes ") +
                                 std::string(moeq::to_string(dt)) + " cols " + std::to_string(cols);
        const std::vector<uint8_t> plain = download(codes[first]), got = download(codes[first + 1]);
        expect_guard_intact(got, static_cast<size_t>(bytes), what);
        EXPECT_TRUE(download(scales[first]) == download(scales[first + 1])) << what << ": scales differ";
        bool moved = true;
        for (int64_t r = 0; r < rows && moved; ++r)
          for (int64_t k = 0; k < cols && moved; ++k)
            if (plain[static_cast<size_t>(r * cols + k)] !=
                got[static_cast<size_t>(r * cols + moeq_dev::e4m3_mma_order_position(k))]) {
              ADD_FAILURE() << what << ": row " << r << " k " << k << " not at " << moeq_dev::e4m3_mma_order_position(k);
              moved = false;
            }
      }
    }
  {
    cu::DeviceBuffer d_x = poisoned(2 * 256 * 2), d_codes = poisoned(2 * 256), d_scales = poisoned(64);
    EXPECT_THROW(cu::quantize_activation(ActFormat::mxfp8, DType::bf16, d_x.ptr(), 256, 2, 256, d_codes.ptr(),
                                         d_scales.ptr(), stream.get(), true),
                 moeq::Error);
    EXPECT_THROW(cu::quantize_activation(ActFormat::fp8_token, DType::bf16, d_x.ptr(), 192, 2, 192, d_codes.ptr(),
                                         d_scales.ptr(), stream.get(), true),
                 moeq::Error);
  }
  // Rows with strides (a caller's hidden states), and in place (the contiguous layout's permuted rows);
  // 2880 = 45 tiles a row.
  for (const int64_t cols : {int64_t{64}, int64_t{2880}, int64_t{7168}}) {
    const int64_t rows = cols == 64 ? 1001 : 9, bytes_out = rows * cols * 2;
    for (const int64_t stride : {cols + 2, cols + 64}) {
      std::vector<uint16_t> x(static_cast<size_t>(rows * stride));
      for (auto& v : x) v = to_half(DType::bf16, normal(rng));
      std::vector<uint8_t> plain(x.size() * 2);
      std::memcpy(plain.data(), x.data(), plain.size());
      const std::string what = "rows " + std::to_string(rows) + " x " + std::to_string(cols) + ", stride " +
                               std::to_string(stride);
      cu::DeviceBuffer d_x = cu::DeviceBuffer::from_host(x), d_out = poisoned(static_cast<size_t>(bytes_out));
      cu::order_rows_for_mma(d_x.ptr(), stride, rows, cols, d_out.ptr(), cols, stream.get());
      stream.synchronize();
      const std::vector<uint8_t> out = download(d_out);
      expect_guard_intact(out, static_cast<size_t>(bytes_out), what);
      expect_ordered(plain, out, rows, cols, stride, cols, what);
      if (stride % 8 != 0) continue;
      cu::DeviceBuffer d_in_place = cu::DeviceBuffer::from_host(x);
      cu::order_rows_for_mma(d_in_place.ptr(), stride, rows, cols, d_in_place.ptr(), stride, stream.get());
      stream.synchronize();
      const std::vector<uint8_t> in_place = download(d_in_place);
      expect_ordered(plain, in_place, rows, cols, stride, stride, what + " in place");
      for (int64_t r = 0; r < rows; ++r)  // the stride's tail stays as it was
        EXPECT_EQ(std::memcmp(plain.data() + 2 * (r * stride + cols), in_place.data() + 2 * (r * stride + cols), 128), 0)
            << what << " in place: row " << r << "'s tail changed";
    }
  }
  EXPECT_THROW(cu::order_rows_for_mma(1024, 96, 2, 96, 4096, 96, stream.get()), moeq::Error);  // cols % 64
  EXPECT_THROW(cu::activation(moeq::ActivationParams{}, false, DType::bf16, 1024, 2, 96, 4096, stream.get(), true),
               moeq::Error);
}

// ---------------------------------------------------------------- bandwidth (printed, not asserted)

TEST(ElementwiseGpu, Bandwidth) {
  SKIP_WITHOUT_DEVICE();
  cu::Stream stream;
  const int64_t rows = 32768;
  for (const int64_t inter : {768, 2048}) {
    cu::DeviceBuffer in(static_cast<size_t>(rows * 2 * inter * 2)), out(static_cast<size_t>(rows * inter * 2));
    in.fill_bytes(0x3C);
    cu::DeviceBuffer codes(static_cast<size_t>(rows * 2 * inter)), scales(static_cast<size_t>(rows * 2 * inter / 8));
    auto time = [&](const char* name, double bytes, const auto& fn) {
      for (int i = 0; i < 3; ++i) fn();
      cu::Event start, stop;
      start.record(stream.get());
      constexpr int kIters = 20;
      for (int i = 0; i < kIters; ++i) fn();
      stop.record(stream.get());
      stop.synchronize();
      const double ms = cu::Event::elapsed_ms(start, stop) / kIters;
      std::printf("%-22s rows %lld I %lld: %.1f us, %.0f GB/s\n", name, static_cast<long long>(rows),
                  static_cast<long long>(inter), ms * 1e3, bytes / ms / 1e6);
    };
    moeq::ActivationParams silu;
    time("silu bf16", rows * inter * 6.0, [&] {
      cu::activation(silu, false, DType::bf16, in.ptr(), rows, inter, out.ptr(), stream.get());
    });
    time("silu_no_mul bf16", rows * inter * 4.0, [&] {
      moeq::ActivationParams p;
      p.kind = Activation::silu_no_mul;
      cu::activation(p, false, DType::bf16, in.ptr(), rows, inter, out.ptr(), stream.get());
    });
    moeq::ActivationParams oai;
    oai.kind = Activation::swiglu_oai;
    time("swiglu_oai interleaved", rows * inter * 6.0, [&] {
      cu::activation(oai, true, DType::bf16, in.ptr(), rows, inter, out.ptr(), stream.get());
    });
    time("quant fp8_token", rows * inter * 3.0 + rows * 4.0, [&] {
      cu::quantize_activation(ActFormat::fp8_token, DType::bf16, out.ptr(), inter, rows, inter, codes.ptr(), scales.ptr(), stream.get());
    });
    time("quant mxfp8", rows * inter * (3.0 + 1.0 / 32), [&] {
      cu::quantize_activation(ActFormat::mxfp8, DType::bf16, out.ptr(), inter, rows, inter, codes.ptr(), scales.ptr(), stream.get());
    });
    time("quant mxfp4", rows * inter * (2.5 + 1.0 / 32), [&] {
      cu::quantize_activation(ActFormat::mxfp4, DType::bf16, out.ptr(), inter, rows, inter, codes.ptr(), scales.ptr(), stream.get());
    });
  }
}

}  // namespace
