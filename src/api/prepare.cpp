// The prepared code layout on the host (the reference of prepare_codes on the GPU): the index
// map of device/moeq_dev/format/prepared_map.cuh (shared with the GPU kernel) in plain loops.
#include <algorithm>
#include <cstring>
#include <string>

#include "cuda/prepare.hpp"
#include "moeq/error.hpp"
#include "moeq/weights.hpp"
#include "plan/legality.hpp"
#include "device/moeq_dev/format/prepared_map.cuh"

namespace moeq {
namespace {

int code_bits_of(WeightFormat f) { return dtype_bits(weight_format_code_dtype(f)); }

// The codes' part of a WeightDesc (its scales are not read here, so their fields may stay unset).
// NOTE: ExpertsDesc's bounds (plan::weight_size_reason) keep prepared_code_bytes inside int64.
void require_desc(const WeightDesc& d, const char* caller) {
  const std::string who(caller);
  const auto formats = all_values<WeightFormat>();
  if (std::find(formats.begin(), formats.end(), d.format) == formats.end())
    throw Error(who + ": format = " + std::to_string(static_cast<int>(d.format)) + " is not a WeightFormat value");
  if (const std::string size = plan::weight_size_reason(d.num_experts, d.n, d.k); !size.empty())
    throw Error(who + ": " + size);
  if (code_bits_of(d.format) == 4 && d.k % 2 != 0)
    throw Error(who + ": k = " + std::to_string(d.k) + " is odd for a 4-bit format");
}

}  // namespace

int64_t prepared_code_bytes(const WeightDesc& d) {
  require_desc(d, "prepared_code_bytes");
  return d.num_experts * ((d.n + 15) / 16 * 16) * ((d.k + 63) / 64 * 64) * code_bits_of(d.format) / 8;
}

void prepare_codes_host(const WeightDesc& d, const void* canonical, void* prepared) {
  require_desc(d, "prepare_codes_host");
  if (canonical == nullptr || prepared == nullptr) throw Error("prepare_codes_host: a pointer is null");
  const int bits = code_bits_of(d.format);
  const int block_bytes = bits * 128;
  const int64_t tiles_n = (d.n + 15) / 16, tiles_k = (d.k + 63) / 64;
  const int64_t row_bytes = d.k * bits / 8;
  const auto* in = static_cast<const uint8_t*>(canonical);
  auto* out = static_cast<uint8_t*>(prepared);
  std::memset(out, 0, static_cast<size_t>(prepared_code_bytes(d)));
  const int per_word = 32 / bits;
  const bool e2m1 = d.format == WeightFormat::mxfp4 || d.format == WeightFormat::nvfp4;
  for (int64_t e = 0; e < d.num_experts; ++e)
    for (int64_t j = 0; j < tiles_n; ++j)
      for (int64_t kt = 0; kt < tiles_k; ++kt) {
        uint8_t* block = out + ((e * tiles_n + j) * tiles_k + kt) * block_bytes;
        for (int lane = 0; lane < 32; ++lane)
          for (int word = 0; word < (bits == 4 ? 4 : 8); ++word) {
            const int offset = bits == 4 ? 16 * lane + 4 * word : 512 * (word / 4) + 16 * lane + 4 * (word % 4);
            uint32_t value = 0;
            for (int c = 0; c < per_word; ++c) {
              int row, kk;
              moeq_dev::prepared_source(bits, lane, word * per_word + c, row, kk);
              const int64_t n_abs = j * 16 + row, k_abs = kt * 64 + kk;
              if (n_abs >= d.n || k_abs >= d.k) continue;
              const uint8_t* r = in + (e * d.n + n_abs) * row_bytes;
              const uint32_t code = bits == 4 ? (r[k_abs / 2] >> (4 * (k_abs % 2))) & 0xFu : r[k_abs];
              value |= code << (bits * c);
            }
            if (e2m1) value = moeq_dev::e2m1_place_word(value);
            std::memcpy(block + offset, &value, 4);
          }
      }
}

void prepare_codes(const WeightDesc& d, const void* canonical, void* prepared, void* stream) {
  require_desc(d, "prepare_codes");
  cuda::prepare_codes(d, canonical, prepared, static_cast<cuda::CUstream>(stream));
}

namespace {

// The number of ue8m0 scales of an MX desc, E x n x k / 32, checked first.
// NOTE: counted from k, not from WeightDesc::scale_elems(), which reads group_size: a desc built by
// hand with the default group_size 0 would count one scale per row and pass unread scales above 2.
int64_t require_mx_scales(const WeightDesc& d, const void* scales, const char* caller) {
  const std::string who(caller);
  if (d.format != WeightFormat::mxfp4 && d.format != WeightFormat::mxfp8)
    throw Error(who + ": format = " + std::string(to_string(d.format)) + " has no ue8m0 scales (MX formats only)");
  // NOTE: each size bounded on its own (an empty desc, a size 0, has no scales to read), so that no product of
  // them overflows.
  if (d.num_experts < 0 || d.n < 0 || d.k < 0 || d.num_experts > plan::kMaxExperts || d.n > plan::kMaxWeightRows ||
      d.k > plan::kMaxDim)
    throw Error(who + ": the desc has E = " + std::to_string(d.num_experts) + ", n = " + std::to_string(d.n) +
                ", k = " + std::to_string(d.k) + "; E must be in [0, 2^16], n in [0, 2^21] and k in [0, 2^20]");
  if (d.k % 32 != 0) throw Error(who + ": k = " + std::to_string(d.k) + " is not a multiple of the MX group of 32");
  if (d.group_size != 0 && d.group_size != 32)
    throw Error(who + ": group_size = " + std::to_string(d.group_size) + " (MX groups are 32 elements)");
  const int64_t count = d.num_experts * d.n * (d.k / 32);
  if (scales == nullptr && count > 0) throw Error(who + ": scales is null");
  return count;
}

// NOTE: 2^(byte - 127) <= 2 <=> byte <= 128 (the NaN code 255 is above it too).
constexpr uint8_t kLargestFoldableScale = 128;

}  // namespace

bool mx_scales_at_most_two_host(const WeightDesc& d, const void* scales) {
  const int64_t count = require_mx_scales(d, scales, "mx_scales_at_most_two_host");
  const auto* bytes = static_cast<const uint8_t*>(scales);
  return std::all_of(bytes, bytes + count, [](uint8_t b) { return b <= kLargestFoldableScale; });
}

bool mx_scales_at_most_two(const WeightDesc& d, const void* scales, void* stream) {
  const int64_t count = require_mx_scales(d, scales, "mx_scales_at_most_two");
  return cuda::max_device_byte(scales, count, static_cast<cuda::CUstream>(stream)) <= kLargestFoldableScale;
}

}  // namespace moeq
