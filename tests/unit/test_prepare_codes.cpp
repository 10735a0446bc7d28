// The prepared code layout on the host (src/api/prepare.cpp): a bijection of the canonical codes
// plus zero padding, with the fragment order documented in device/moeq_dev/format/prepared.cuh.
#include <gtest/gtest.h>

#include <cstring>
#include <random>
#include <vector>

#include "moeq/error.hpp"
#include "moeq/weights.hpp"

namespace moeq {
namespace {

WeightDesc desc_of(WeightFormat f, int64_t E, int64_t n, int64_t k) {
  WeightDesc d;
  d.format = f;
  d.num_experts = E;
  d.n = n;
  d.k = k;
  return d;
}

int bits_of(WeightFormat f) { return (f == WeightFormat::mxfp4 || f == WeightFormat::nvfp4 || f == WeightFormat::int4) ? 4 : 8; }

// Code (e, row, k) of canonical bytes.
uint32_t canonical_code(const std::vector<uint8_t>& c, const WeightDesc& d, int64_t e, int64_t row, int64_t k) {
  const int bits = bits_of(d.format);
  const uint8_t byte = c[static_cast<size_t>((e * d.n + row) * (d.k * bits / 8) + k * bits / 8)];
  return bits == 4 ? (byte >> (4 * (k % 2))) & 0xFu : byte;
}

uint32_t rotr(uint32_t w, int r) { return r == 0 ? w : (w >> r) | (w << (32 - r)); }

// What the GEMM computes from a prepared e2m1 word for register `reg` (weights_fragment.cuh,
// e2m1_prepared_bits), written out again here: the bf16 bits of the pair, e1 e0 m at 8..6 and
// the sign at 15 of each half.
uint32_t e2m1_register_bits(uint32_t w, int reg) {
  constexpr uint32_t kPairBits = 0x81C081C0u;
  if (reg == 0) return w & kPairBits;
  if (reg == 1) return rotr(w, 4) & kPairBits;
  if (reg == 2) return rotr(w, 10) & kPairBits;
  return (rotr(w, 6) & 0x81808180u) | (rotr(w, 14) & 0x00400040u);
}

// Code of prepared (e, 16-channel tile j, K tile kt, lane, register p of step s, half).
uint32_t prepared_code(const std::vector<uint8_t>& p, const WeightDesc& d, int64_t e, int64_t j, int64_t kt, int lane,
                       int s, int reg, int half) {
  const int bits = bits_of(d.format);
  const int64_t tiles_n = (d.n + 15) / 16, tiles_k = (d.k + 63) / 64;
  const int64_t block = ((e * tiles_n + j) * tiles_k + kt) * bits * 128;
  uint32_t word;
  if (bits == 4) {
    std::memcpy(&word, &p[static_cast<size_t>(block + 16 * lane + 4 * s)], 4);
    if (d.format == WeightFormat::mxfp4 || d.format == WeightFormat::nvfp4) {
      const uint32_t pair_bits = e2m1_register_bits(word, reg) >> (16 * half);
      return ((pair_bits >> 6) & 7u) | ((pair_bits >> 12) & 8u);
    }
    return (word >> (4 * (reg + 4 * half))) & 0xFu;
  }
  const int w = 2 * s + (reg >> 1);
  std::memcpy(&word, &p[static_cast<size_t>(block + 512 * (w / 4) + 16 * lane + 4 * (w % 4))], 4);
  return (word >> (8 * ((reg & 1) + 2 * half))) & 0xFFu;
}

TEST(PrepareCodes, EveryCodeLandsInItsFragmentRegister) {
  std::mt19937 rng(7);
  for (WeightFormat f : {WeightFormat::int4, WeightFormat::mxfp4, WeightFormat::nvfp4, WeightFormat::fp8_block,
                         WeightFormat::int8})
    for (auto [n, k] : {std::pair<int64_t, int64_t>{32, 64}, {200, 352}, {7, 96}}) {
      const WeightDesc d = desc_of(f, 3, n, k);
      std::vector<uint8_t> canonical(static_cast<size_t>(d.code_bytes()));
      for (auto& b : canonical) b = static_cast<uint8_t>(rng());
      std::vector<uint8_t> prepared(static_cast<size_t>(prepared_code_bytes(d)), 0xAB);
      prepare_codes_host(d, canonical.data(), prepared.data());
      const int64_t tiles_n = (n + 15) / 16, tiles_k = (k + 63) / 64;
      int64_t checked = 0, padding = 0;
      for (int64_t e = 0; e < 3; ++e)
        for (int64_t j = 0; j < tiles_n; ++j)
          for (int64_t kt = 0; kt < tiles_k; ++kt)
            for (int lane = 0; lane < 32; ++lane)
              for (int s = 0; s < 4; ++s)
                for (int reg = 0; reg < 4; ++reg)
                  for (int half = 0; half < 2; ++half) {
                    const int64_t row = j * 16 + lane / 4 + 8 * (reg & 1);
                    const int64_t kk = kt * 64 + 16 * (lane % 4) + 4 * s + 2 * (reg >> 1) + half;
                    const uint32_t got = prepared_code(prepared, d, e, j, kt, lane, s, reg, half);
                    if (row >= n || kk >= k) {
                      ASSERT_EQ(got, 0u) << "padding at row " << row << " k " << kk;
                      ++padding;
                    } else {
                      ASSERT_EQ(got, canonical_code(canonical, d, e, row, kk))
                          << to_string(f) << " e " << e << " row " << row << " k " << kk;
                      ++checked;
                    }
                  }
      EXPECT_EQ(checked, 3 * n * k);  // every canonical code exactly once (positions are distinct)
      EXPECT_EQ(checked + padding, prepared_code_bytes(d) * 8 / bits_of(f));
    }
}

TEST(PrepareCodes, SizesPadToBlocksAndBadDescsThrow) {
  EXPECT_EQ(prepared_code_bytes(desc_of(WeightFormat::int4, 2, 200, 352)), 2 * 208 * 384 / 2);
  EXPECT_EQ(prepared_code_bytes(desc_of(WeightFormat::fp8_channel, 1, 16, 64)), 16 * 64);
  std::vector<uint8_t> buf(64);
  EXPECT_THROW(prepare_codes_host(desc_of(WeightFormat::int4, 0, 16, 64), buf.data(), buf.data()), Error);
  EXPECT_THROW(prepare_codes_host(desc_of(WeightFormat::int4, 1, 16, 64), nullptr, buf.data()), Error);
}

// mx_scales_at_most_two_host: 2^(b - 127) <= 2 for every scale byte b, i.e. b <= 128 (the NaN
// code 255 is not); MX formats only.
TEST(PrepareCodes, MxScalesAtMostTwoReadsEveryScaleByte) {
  for (WeightFormat f : {WeightFormat::mxfp4, WeightFormat::mxfp8}) {
    WeightDesc d = desc_of(f, 3, 5, 64);
    d.group_size = 32;
    d.scale_dtype = DType::ue8m0;
    std::vector<uint8_t> scales(static_cast<size_t>(d.scale_elems()), 128);
    scales.front() = 0;
    EXPECT_TRUE(mx_scales_at_most_two_host(d, scales.data()));
    for (uint8_t above : {129, 200, 255}) {
      scales.back() = above;  // the last byte of the last expert
      EXPECT_FALSE(mx_scales_at_most_two_host(d, scales.data())) << int(above);
    }
    EXPECT_THROW(mx_scales_at_most_two_host(d, nullptr), Error);
    // Counted from k, not from group_size: a desc with the default group_size 0 reads them all.
    WeightDesc no_group = d;
    no_group.group_size = 0;
    EXPECT_FALSE(mx_scales_at_most_two_host(no_group, scales.data()));
    scales.back() = 128;
    EXPECT_TRUE(mx_scales_at_most_two_host(no_group, scales.data()));
    WeightDesc bad = d;
    bad.group_size = 16;
    EXPECT_THROW(mx_scales_at_most_two_host(bad, scales.data()), Error);
    bad = d;
    bad.k = 48;
    EXPECT_THROW(mx_scales_at_most_two_host(bad, scales.data()), Error);
  }
  WeightDesc nvfp4 = desc_of(WeightFormat::nvfp4, 1, 16, 64);
  std::vector<uint8_t> e4m3(static_cast<size_t>(nvfp4.scale_bytes()), 0x30);
  try {
    mx_scales_at_most_two_host(nvfp4, e4m3.data());
    FAIL() << "nvfp4 has no ue8m0 scales";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("format = nvfp4 has no ue8m0 scales"), std::string::npos) << e.what();
  }
}

}  // namespace
}  // namespace moeq
