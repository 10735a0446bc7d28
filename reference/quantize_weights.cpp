// Reference weight quantizers and dequantizers for the 7 canonical formats (CONTRACT §4).
#include <algorithm>
#include <array>
#include <bit>
#include <cmath>
#include <cstring>
#include <limits>
#include <string>

#include "moeq/error.hpp"
#include "reference/formats.hpp"
#include "reference/quantize.hpp"

namespace moeq::ref {
namespace {

std::string name_of(DType t) { return std::string(to_string(t)); }
std::string name_of(WeightFormat f) { return std::string(to_string(f)); }

// Scale dtypes each format's checkpoints use (CONTRACT §4), and their names for messages.
bool scale_dtype_allowed(WeightFormat f, DType t) {
  switch (f) {
    case WeightFormat::mxfp4: case WeightFormat::mxfp8: return t == DType::ue8m0;
    case WeightFormat::nvfp4: return t == DType::e4m3;
    case WeightFormat::fp8_channel: case WeightFormat::fp8_block: return t == DType::f32;
    case WeightFormat::int4: return t == DType::bf16 || t == DType::f16;
    case WeightFormat::int8: return t == DType::bf16 || t == DType::f16 || t == DType::f32;
  }
  return false;
}
std::string allowed_scale_dtypes(WeightFormat f) {
  switch (f) {
    case WeightFormat::mxfp4: case WeightFormat::mxfp8: return "ue8m0";
    case WeightFormat::nvfp4: return "e4m3";
    case WeightFormat::fp8_channel: case WeightFormat::fp8_block: return "f32";
    case WeightFormat::int4: return "bf16 or f16";
    case WeightFormat::int8: return "bf16, f16 or f32";
  }
  return "";
}

void validate(const WeightDesc& d) {
  const std::string fmt = name_of(d.format);
  auto reject = [](const std::string& field, const std::string& value, const std::string& why) {
    throw Error("WeightDesc." + field + " = " + value + " " + why);
  };
  if (d.num_experts < 0 || d.n < 0 || d.k < 0)
    reject("[num_experts, n, k]", "[" + std::to_string(d.num_experts) + ", " + std::to_string(d.n) +
           ", " + std::to_string(d.k) + "]", "has a negative dimension");
  if (!scale_dtype_allowed(d.format, d.scale_dtype))
    reject("scale_dtype", name_of(d.scale_dtype),
           "is not valid for " + fmt + " weights (expected " + allowed_scale_dtypes(d.format) + ")");
  const int g = d.group_size;
  if (d.format == WeightFormat::int4 || d.format == WeightFormat::int8) {
    if (g != 0 && g != 32 && g != 64 && g != 128)
      reject("group_size", std::to_string(g), "is not valid for " + fmt + " weights (expected 0, 32, 64 or 128)");
  } else if (g != weight_format_fixed_group(d.format)) {
    reject("group_size", std::to_string(g), "is not valid for " + fmt + " weights (expected " +
           std::to_string(weight_format_fixed_group(d.format)) + ")");
  }
  // FP8 block scales cover partial edge blocks; every other grouped format needs whole groups.
  if (g > 0 && d.format != WeightFormat::fp8_block && d.k % g != 0)
    reject("k", std::to_string(d.k), "is not a multiple of " + std::to_string(g) + ", required by " + fmt + " scales");
  if (dtype_bits(weight_format_code_dtype(d.format)) == 4 && d.k % 2 != 0)
    reject("k", std::to_string(d.k), "is odd; " + fmt + " packs two codes per byte");
  if (d.format == WeightFormat::nvfp4 && d.num_global_scales != 1 && d.num_global_scales != 2)
    reject("num_global_scales", std::to_string(d.num_global_scales), "is not valid for nvfp4 weights (expected 1 or 2)");
  if (d.has_zero_point && d.format != WeightFormat::int4)
    reject("has_zero_point", "true", "is not valid for " + fmt + " weights (int4 only)");
  if (d.bias_dtype != DType::none && d.bias_dtype != DType::f32 && d.bias_dtype != DType::bf16 &&
      d.bias_dtype != DType::f16)
    reject("bias_dtype", name_of(d.bias_dtype), "is not valid (expected none, f32, bf16 or f16)");
}

void check_expert(const WeightDesc& d, int64_t e) {
  if (e < 0 || e >= d.num_experts)
    throw Error("expert e = " + std::to_string(e) + " is outside [0, " +
                std::to_string(d.num_experts) + ")");
}

// Encodes x into element i of a bf16/f16/f32 array and returns the value actually stored.
float store_float(void* base, DType t, int64_t i, float x) {
  if (t == DType::f32) {
    std::memcpy(static_cast<uint8_t*>(base) + i * 4, &x, 4);
    return x;
  }
  const uint16_t bits = t == DType::bf16 ? f32_to_bf16(x) : f32_to_f16(x);
  std::memcpy(static_cast<uint8_t*>(base) + i * 2, &bits, 2);
  return t == DType::bf16 ? bf16_to_f32(bits) : f16_to_f32(bits);
}

float load_float(const void* base, DType t, int64_t i) {
  if (t == DType::f32) {
    float x;
    std::memcpy(&x, static_cast<const uint8_t*>(base) + i * 4, 4);
    return x;
  }
  uint16_t bits;
  std::memcpy(&bits, static_cast<const uint8_t*>(base) + i * 2, 2);
  return t == DType::bf16 ? bf16_to_f32(bits) : f16_to_f32(bits);
}

// NaN elements are skipped (fmax semantics), so one NaN does not poison a whole scale.
float abs_max(const float* x, int64_t len) {
  float m = 0.0f;
  for (int64_t j = 0; j < len; ++j) {
    const float a = std::fabs(x[j]);
    m = a > m ? a : m;
  }
  return m;
}

// Round half to even of v, valid for |v| < 2^22 (callers clamp to a small code range first).
// Adding and subtracting 1.5 * 2^23 uses the FPU's own RNE and avoids a libm call per element.
inline float round_half_even(float v) {
  constexpr float kShift = 12582912.0f;
  return (v + kShift) - kShift;
}

// NaN maps to lo, so the float -> int conversion below is always defined.
inline float clamp_nan_low(float v, float lo, float hi) {
  v = v > lo ? v : lo;
  return v < hi ? v : hi;
}

// Writes len codes of consecutive elements; 4-bit codes pack element 2j into the low nibble.
template <typename Encode>
inline void write_codes(const float* x, int64_t len, bool packed, uint8_t* out, Encode encode) {
  if (packed) {
    for (int64_t j = 0; j < len; j += 2)
      out[j >> 1] = static_cast<uint8_t>(encode(x[j]) | (encode(x[j + 1]) << 4));
  } else {
    for (int64_t j = 0; j < len; ++j) out[j] = encode(x[j]);
  }
}

// The e2m1 / e4m3 encoders round by comparing |x| with grid values and midpoints that have at
// most 4 significant fraction bits, so their code depends only on the top 13 bits of x (sign,
// exponent, 4 fraction bits) and on whether the remaining 19 bits are zero. Tabulating the codecs
// on that key gives exactly their codes at a fraction of the cost of a call per element.
class TabulatedEncoder {
 public:
  explicit TabulatedEncoder(uint8_t (*encode)(float)) {
    for (uint32_t key = 0; key < kKeys; ++key)
      codes_[key] = encode(std::bit_cast<float>(((key >> 1) << kLowBits) | (key & 1)));
  }
  uint8_t operator()(float x) const {
    const uint32_t bits = std::bit_cast<uint32_t>(x);
    return codes_[((bits >> kLowBits) << 1) | ((bits & kLowMask) != 0 ? 1u : 0u)];
  }

 private:
  static constexpr int kLowBits = 19;
  static constexpr uint32_t kLowMask = (1u << kLowBits) - 1;
  static constexpr uint32_t kKeys = 1u << (32 - kLowBits + 1);
  std::array<uint8_t, kKeys> codes_{};
};

const TabulatedEncoder& e2m1_encoder() {
  static const TabulatedEncoder encoder(f32_to_e2m1);
  return encoder;
}
const TabulatedEncoder& e4m3_encoder() {
  static const TabulatedEncoder encoder(f32_to_e4m3);
  return encoder;
}

// Decoded values of every code, from the codecs (the decoders are slow per element).
template <int kCodes>
std::array<float, kCodes> decode_table(float (*decode)(uint8_t)) {
  std::array<float, kCodes> t{};
  for (int c = 0; c < kCodes; ++c) t[c] = decode(static_cast<uint8_t>(c));
  return t;
}
const std::array<float, 16>& e2m1_values() {
  static const auto t = decode_table<16>(e2m1_to_f32);
  return t;
}
const std::array<float, 256>& e4m3_values() {
  static const auto t = decode_table<256>(e4m3_to_f32);
  return t;
}

struct ExpertSlices {
  uint8_t* codes;        // [n, row_bytes]
  int64_t row_bytes;
  bool packed;
  void* scales;          // element offset scale_base in desc.scale_dtype
  int64_t scale_base;
  uint8_t* zero_points;  // [n, groups] or null
};

void quantize_fp8_block(const WeightDesc& d, const float* w, const ExpertSlices& s) {
  const int64_t kb_count = (d.k + 127) / 128;
  const TabulatedEncoder& e4m3 = e4m3_encoder();
  std::vector<float> amax(static_cast<size_t>(kb_count));
  for (int64_t r0 = 0; r0 < d.n; r0 += 128) {
    const int64_t r1 = std::min(d.n, r0 + 128);
    std::fill(amax.begin(), amax.end(), 0.0f);
    for (int64_t r = r0; r < r1; ++r)
      for (int64_t kb = 0; kb < kb_count; ++kb) {
        const int64_t c0 = kb * 128;
        amax[kb] = std::max(amax[kb], abs_max(w + r * d.k + c0, std::min<int64_t>(128, d.k - c0)));
      }
    for (int64_t kb = 0; kb < kb_count; ++kb) {
      const float scale = std::max(amax[kb], 1e-12f) / kE4m3Max;
      store_float(s.scales, DType::f32, s.scale_base + (r0 / 128) * kb_count + kb, scale);
      for (int64_t r = r0; r < r1; ++r) {
        const int64_t c0 = kb * 128;
        write_codes(w + r * d.k + c0, std::min<int64_t>(128, d.k - c0), false,
                    s.codes + r * s.row_bytes + c0, [scale, &e4m3](float x) { return e4m3(x / scale); });
      }
    }
  }
}

// NVFP4 global scale per expert, or per half (gate rows, up rows) with 2 global scales.
void nvfp4_global_scales(const WeightDesc& d, const float* w, float* g) {
  const int64_t gate_rows = d.num_global_scales == 2 ? d.n / 2 : d.n;
  g[0] = abs_max(w, gate_rows * d.k) / (kE2m1Max * kE4m3Max);
  if (d.num_global_scales == 2)
    g[1] = abs_max(w + gate_rows * d.k, (d.n - gate_rows) * d.k) / (kE2m1Max * kE4m3Max);
}

// Every format except FP8 block: one scale per (row, group of `group` consecutive k).
void quantize_grouped(const WeightDesc& d, const float* w, const ExpertSlices& s,
                      const float* global) {
  const int64_t group = d.group_size == 0 ? d.k : d.group_size;
  const int64_t groups = d.scale_groups_k();
  const int64_t gate_rows = d.num_global_scales == 2 ? d.n / 2 : d.n;
  const bool int4 = d.format == WeightFormat::int4;
  const float qmax = int4 ? 7.0f : 127.0f;
  const float qmin = int4 ? -8.0f : -128.0f;
  const float offset = int4 ? 8.0f : 128.0f;
  const TabulatedEncoder& e2m1 = e2m1_encoder();
  const TabulatedEncoder& e4m3 = e4m3_encoder();
  for (int64_t r = 0; r < d.n; ++r) {
    for (int64_t gi = 0; gi < groups; ++gi) {
      const float* x = w + r * d.k + gi * group;
      uint8_t* out = s.codes + r * s.row_bytes + (s.packed ? gi * group / 2 : gi * group);
      const int64_t si = s.scale_base + r * groups + gi;
      auto write = [&](auto encode) { write_codes(x, group, s.packed, out, encode); };
      switch (d.format) {
        case WeightFormat::mxfp4: case WeightFormat::mxfp8: {
          const bool fp4 = d.format == WeightFormat::mxfp4;
          const uint8_t code = ue8m0_scale_for(abs_max(x, group), fp4 ? kE2m1Max : kE4m3Max);
          static_cast<uint8_t*>(s.scales)[si] = code;
          // 2^(127 - code) is exact for codes 0..254, so x * inv rounds like x / 2^(code - 127).
          const float inv = code == 255 ? std::numeric_limits<float>::quiet_NaN()
                                        : std::ldexp(1.0f, 127 - code);
          if (fp4) write([inv, &e2m1](float v) { return e2m1(v * inv); });
          else write([inv, &e4m3](float v) { return e4m3(v * inv); });
          break;
        }
        case WeightFormat::nvfp4: {
          const float g = global[r < gate_rows ? 0 : 1];
          const float amax = abs_max(x, group);
          const uint8_t code = amax == 0.0f ? f32_to_e4m3(1.0f) : f32_to_e4m3(amax / (kE2m1Max * g));
          static_cast<uint8_t*>(s.scales)[si] = code;
          const float denom = e4m3_to_f32(code) * g;
          if (denom == 0.0f) write([](float) { return uint8_t{0}; });
          else write([denom, &e2m1](float v) { return e2m1(v / denom); });
          break;
        }
        case WeightFormat::fp8_channel: {
          const float scale = std::max(abs_max(x, group), 1e-12f) / kE4m3Max;
          store_float(s.scales, DType::f32, si, scale);
          write([scale, &e4m3](float v) { return e4m3(v / scale); });
          break;
        }
        case WeightFormat::int4: case WeightFormat::int8: {
          if (!d.has_zero_point) {
            const float scale = store_float(s.scales, d.scale_dtype, si, abs_max(x, group) / qmax);
            if (scale == 0.0f || !std::isfinite(scale)) {
              write([offset](float) { return static_cast<uint8_t>(offset); });
              break;
            }
            write([=](float v) {
              return static_cast<uint8_t>(round_half_even(clamp_nan_low(v / scale, qmin, qmax)) + offset);
            });
            break;
          }
          // The range always includes 0 (as GPTQ does), so zp lies in [0, 15] and 0 is exact.
          float lo = 0.0f, hi = 0.0f;
          for (int64_t j = 0; j < group; ++j) {
            lo = x[j] < lo ? x[j] : lo;
            hi = x[j] > hi ? x[j] : hi;
          }
          const float scale = store_float(s.scales, d.scale_dtype, si, (hi - lo) / 15.0f);
          if (scale == 0.0f || !std::isfinite(scale)) {
            s.zero_points[r * groups + gi] = 0;
            write([](float) { return uint8_t{0}; });
            break;
          }
          const float zp = round_half_even(clamp_nan_low(-lo / scale, 0.0f, 15.0f));
          s.zero_points[r * groups + gi] = static_cast<uint8_t>(zp);
          write([=](float v) {
            return static_cast<uint8_t>(round_half_even(clamp_nan_low(v / scale, -zp, 15.0f - zp)) + zp);
          });
          break;
        }
        case WeightFormat::fp8_block: break;  // handled by quantize_fp8_block
      }
    }
  }
}

}  // namespace

QuantizedWeights::QuantizedWeights(const WeightDesc& d) : desc(d) {
  validate(d);
  codes.assign(static_cast<size_t>(d.code_bytes()), 0);
  scales.assign(static_cast<size_t>(d.scale_bytes()), 0);
  global_scales.assign(static_cast<size_t>(d.global_scale_elems()), 0.0f);
  zero_points.assign(static_cast<size_t>(d.zero_point_bytes()), 0);
  bias.assign(static_cast<size_t>(d.bias_bytes()), 0);
}

WeightView QuantizedWeights::view() const {
  WeightView v;
  v.codes = codes.empty() ? nullptr : codes.data();
  v.scales = scales.empty() ? nullptr : scales.data();
  v.global_scales = global_scales.empty() ? nullptr : global_scales.data();
  v.zero_points = zero_points.empty() ? nullptr : zero_points.data();
  v.bias = bias.empty() ? nullptr : bias.data();
  return v;
}

void quantize_expert(const float* w, int64_t e, QuantizedWeights& q) {
  const WeightDesc& d = q.desc;
  validate(d);
  check_expert(d, e);
  const int64_t row_bytes = dtype_bytes(weight_format_code_dtype(d.format), d.k);
  const int64_t scales_per_expert = d.scale_elems() / std::max<int64_t>(d.num_experts, 1);
  const int64_t groups = d.scale_groups_k();
  ExpertSlices s{q.codes.data() + e * d.n * row_bytes, row_bytes,
                 dtype_bits(weight_format_code_dtype(d.format)) == 4, q.scales.data(),
                 e * scales_per_expert,
                 d.has_zero_point ? q.zero_points.data() + e * d.n * groups : nullptr};
  if (d.format == WeightFormat::fp8_block) {
    quantize_fp8_block(d, w, s);
    return;
  }
  float* global = nullptr;
  if (d.format == WeightFormat::nvfp4) {
    global = q.global_scales.data() + e * d.num_global_scales;
    nvfp4_global_scales(d, w, global);
  }
  quantize_grouped(d, w, s, global);
}

void set_bias(const float* b, int64_t e, QuantizedWeights& q) {
  const WeightDesc& d = q.desc;
  validate(d);
  check_expert(d, e);
  if (d.bias_dtype == DType::none) throw Error("set_bias: WeightDesc.bias_dtype is none");
  for (int64_t r = 0; r < d.n; ++r) store_float(q.bias.data(), d.bias_dtype, e * d.n + r, b[r]);
}

void dequantize_expert(const WeightDesc& d, const WeightView& v, int64_t e, float* out) {
  validate(d);
  check_expert(d, e);
  if (d.n == 0 || d.k == 0) return;
  if (v.codes == nullptr || v.scales == nullptr) throw Error("dequantize_expert: codes or scales is null");
  if (d.format == WeightFormat::nvfp4 && v.global_scales == nullptr)
    throw Error("dequantize_expert: nvfp4 global_scales is null");
  if (d.has_zero_point && v.zero_points == nullptr)
    throw Error("dequantize_expert: zero_points is null while has_zero_point is set");

  const bool packed = dtype_bits(weight_format_code_dtype(d.format)) == 4;
  const int64_t row_bytes = dtype_bytes(weight_format_code_dtype(d.format), d.k);
  const uint8_t* codes = static_cast<const uint8_t*>(v.codes) + e * d.n * row_bytes;
  const uint8_t* scale_bytes = static_cast<const uint8_t*>(v.scales);
  const int64_t groups = d.scale_groups_k();
  const int64_t scale_base = e * (d.scale_elems() / d.num_experts);
  const int64_t group = d.group_size > 0 ? d.group_size : d.k;
  const int64_t gate_rows = d.num_global_scales == 2 ? d.n / 2 : d.n;
  const float int_zero = d.format == WeightFormat::int4 ? 8.0f : 128.0f;
  const std::array<float, 16>& e2m1 = e2m1_values();
  const std::array<float, 256>& e4m3 = e4m3_values();

  for (int64_t r = 0; r < d.n; ++r) {
    const uint8_t* row = codes + r * row_bytes;
    float* o = out + r * d.k;
    for (int64_t gi = 0; gi < groups; ++gi) {
      const int64_t c0 = gi * group, c1 = std::min(d.k, c0 + group);
      // FP8 block scales are [ceil(n/128), ceil(k/128)]; every other format is [n, groups].
      const int64_t si = scale_base + (d.format == WeightFormat::fp8_block ? (r / 128) : r) * groups + gi;
      auto fill = [&](auto value) {
        for (int64_t c = c0; c < c1; ++c) o[c] = value(packed ? nibble_at(row, c) : row[c]);
      };
      switch (d.format) {
        case WeightFormat::mxfp4: case WeightFormat::mxfp8: {
          const float s = ue8m0_to_f32(scale_bytes[si]);
          if (packed) fill([s, &e2m1](uint8_t q) { return e2m1[q] * s; });
          else fill([s, &e4m3](uint8_t q) { return e4m3[q] * s; });
          break;
        }
        case WeightFormat::nvfp4: {
          const float s = e4m3_to_f32(scale_bytes[si]);
          const float g = v.global_scales[e * d.num_global_scales + (r < gate_rows ? 0 : 1)];
          fill([s, g, &e2m1](uint8_t q) { return e2m1[q] * s * g; });
          break;
        }
        case WeightFormat::fp8_channel: case WeightFormat::fp8_block: {
          const float s = load_float(v.scales, DType::f32, si);
          fill([s, &e4m3](uint8_t q) { return e4m3[q] * s; });
          break;
        }
        case WeightFormat::int4: case WeightFormat::int8: {
          const float s = load_float(v.scales, d.scale_dtype, si);
          const float zp = d.has_zero_point ? static_cast<float>(v.zero_points[si]) : int_zero;
          fill([s, zp](uint8_t q) { return (static_cast<float>(q) - zp) * s; });
          break;
        }
      }
    }
  }
}

void bias_expert(const WeightDesc& d, const WeightView& v, int64_t e, float* out) {
  validate(d);
  check_expert(d, e);
  if (d.bias_dtype == DType::none) {
    std::fill(out, out + d.n, 0.0f);
    return;
  }
  if (v.bias == nullptr) throw Error("bias_expert: bias is null while bias_dtype = " + name_of(d.bias_dtype));
  for (int64_t r = 0; r < d.n; ++r) out[r] = load_float(v.bias, d.bias_dtype, e * d.n + r);
}

}  // namespace moeq::ref
