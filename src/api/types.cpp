// to_string / parse for every public enum, and the per-format facts every layer shares.
#include "moeq/types.hpp"

#include <algorithm>
#include <array>
#include <cctype>

#include "moeq/error.hpp"

namespace moeq {
namespace {

template <typename Enum, size_t N>
struct EnumNames {
  std::array<std::pair<Enum, std::string_view>, N> entries;

  std::string_view name(Enum v) const {
    for (const auto& [value, text] : entries)
      if (value == v) return text;
    return "?";
  }
  std::optional<Enum> parse(std::string_view s) const {
    auto same = [](std::string_view a, std::string_view b) {
      if (a.size() != b.size()) return false;
      for (size_t i = 0; i < a.size(); ++i) {
        char x = static_cast<char>(std::tolower(static_cast<unsigned char>(a[i])));
        char y = static_cast<char>(std::tolower(static_cast<unsigned char>(b[i])));
        if (x == '-') x = '_';
        if (y == '-') y = '_';
        if (x != y) return false;
      }
      return true;
    };
    for (const auto& [value, text] : entries)
      if (same(s, text)) return value;
    return std::nullopt;
  }
  std::vector<Enum> values() const {
    std::vector<Enum> out;
    for (const auto& e : entries) out.push_back(e.first);
    return out;
  }
};

constexpr EnumNames<DType, 12> kDTypes{{{
    {DType::none, "none"}, {DType::bf16, "bf16"}, {DType::f16, "f16"}, {DType::f32, "f32"},
    {DType::e4m3, "e4m3"}, {DType::e5m2, "e5m2"}, {DType::e2m1, "e2m1"}, {DType::ue8m0, "ue8m0"},
    {DType::u4, "u4"}, {DType::u8, "u8"}, {DType::i32, "i32"}, {DType::i64, "i64"}}}};

constexpr EnumNames<WeightFormat, 7> kWeightFormats{{{
    {WeightFormat::mxfp4, "mxfp4"}, {WeightFormat::nvfp4, "nvfp4"}, {WeightFormat::mxfp8, "mxfp8"},
    {WeightFormat::fp8_channel, "fp8-channel"}, {WeightFormat::fp8_block, "fp8-block"},
    {WeightFormat::int4, "int4"}, {WeightFormat::int8, "int8"}}}};

constexpr EnumNames<ActFormat, 4> kActFormats{{{
    {ActFormat::none, "a16"}, {ActFormat::fp8_token, "fp8-token"}, {ActFormat::mxfp8, "mxfp8"},
    {ActFormat::mxfp4, "mxfp4"}}}};

constexpr EnumNames<Activation, 9> kActivations{{{
    {Activation::silu, "silu"}, {Activation::gelu, "gelu"}, {Activation::gelu_tanh, "gelu-tanh"},
    {Activation::swiglu_oai, "swiglu-oai"}, {Activation::swiglu_step, "swiglu-step"},
    {Activation::silu_no_mul, "silu-no-mul"}, {Activation::gelu_no_mul, "gelu-no-mul"},
    {Activation::gelu_tanh_no_mul, "gelu-tanh-no-mul"}, {Activation::relu2_no_mul, "relu2-no-mul"}}}};

constexpr EnumNames<Layout, 4> kLayouts{{{
    {Layout::auto_select, "auto"}, {Layout::indexed, "indexed"}, {Layout::contiguous, "contiguous"},
    {Layout::masked, "masked"}}}};

constexpr EnumNames<Backend, 3> kBackends{{{
    {Backend::auto_select, "auto"}, {Backend::cpu, "cpu"}, {Backend::cuda, "cuda"}}}};

}  // namespace

std::string_view to_string(DType v) { return kDTypes.name(v); }
std::string_view to_string(WeightFormat v) { return kWeightFormats.name(v); }
std::string_view to_string(ActFormat v) { return kActFormats.name(v); }
std::string_view to_string(Activation v) { return kActivations.name(v); }
std::string_view to_string(Layout v) { return kLayouts.name(v); }
std::string_view to_string(Backend v) { return kBackends.name(v); }

std::optional<DType> parse_dtype(std::string_view s) { return kDTypes.parse(s); }
std::optional<WeightFormat> parse_weight_format(std::string_view s) { return kWeightFormats.parse(s); }
std::optional<ActFormat> parse_act_format(std::string_view s) {
  // NOTE: "bf16", "f16" and "none" are accepted spellings of 16-bit activations besides "a16".
  if (auto v = kActFormats.parse(s)) return v;
  const auto d = kDTypes.parse(s);
  if (d == DType::bf16 || d == DType::f16 || d == DType::none) return ActFormat::none;
  return std::nullopt;
}
std::optional<Activation> parse_activation(std::string_view s) { return kActivations.parse(s); }
std::optional<Layout> parse_layout(std::string_view s) { return kLayouts.parse(s); }
std::optional<Backend> parse_backend(std::string_view s) { return kBackends.parse(s); }

template <> std::vector<DType> all_values<DType>() { return kDTypes.values(); }
template <> std::vector<WeightFormat> all_values<WeightFormat>() { return kWeightFormats.values(); }
template <> std::vector<ActFormat> all_values<ActFormat>() { return kActFormats.values(); }
template <> std::vector<Activation> all_values<Activation>() { return kActivations.values(); }
template <> std::vector<Layout> all_values<Layout>() { return kLayouts.values(); }
template <> std::vector<Backend> all_values<Backend>() { return kBackends.values(); }

int dtype_bits(DType t) {
  switch (t) {
    case DType::none: return 0;
    case DType::bf16: case DType::f16: return 16;
    case DType::f32: case DType::i32: return 32;
    case DType::i64: return 64;
    case DType::e4m3: case DType::e5m2: case DType::ue8m0: case DType::u8: return 8;
    case DType::e2m1: case DType::u4: return 4;
  }
  return 0;
}

int64_t dtype_bytes(DType t, int64_t elems) { return (elems * dtype_bits(t) + 7) / 8; }

bool is_gated(Activation a) {
  switch (a) {
    case Activation::silu: case Activation::gelu: case Activation::gelu_tanh:
    case Activation::swiglu_oai: case Activation::swiglu_step: return true;
    default: return false;
  }
}

int act_format_bits(ActFormat a) {
  switch (a) {
    case ActFormat::none: return 16;
    case ActFormat::fp8_token: case ActFormat::mxfp8: return 8;
    case ActFormat::mxfp4: return 4;
  }
  return 16;
}

DType act_format_code_dtype(ActFormat a) {
  switch (a) {
    case ActFormat::none: return DType::none;
    case ActFormat::fp8_token: case ActFormat::mxfp8: return DType::e4m3;
    case ActFormat::mxfp4: return DType::e2m1;
  }
  return DType::none;
}

int weight_format_fixed_group(WeightFormat w) {
  switch (w) {
    case WeightFormat::mxfp4: case WeightFormat::mxfp8: return 32;
    case WeightFormat::nvfp4: return 16;
    case WeightFormat::fp8_block: return 128;
    default: return 0;
  }
}

DType weight_format_fixed_scale_dtype(WeightFormat w) {
  switch (w) {
    case WeightFormat::mxfp4: case WeightFormat::mxfp8: return DType::ue8m0;
    case WeightFormat::nvfp4: return DType::e4m3;
    case WeightFormat::fp8_channel: case WeightFormat::fp8_block: return DType::f32;
    default: return DType::none;
  }
}

DType weight_format_code_dtype(WeightFormat w) {
  switch (w) {
    case WeightFormat::mxfp4: case WeightFormat::nvfp4: return DType::e2m1;
    case WeightFormat::mxfp8: case WeightFormat::fp8_channel: case WeightFormat::fp8_block: return DType::e4m3;
    case WeightFormat::int4: return DType::u4;
    case WeightFormat::int8: return DType::u8;
  }
  return DType::none;
}

const std::vector<QuantPair>& supported_pairs() {
  static const std::vector<QuantPair> pairs = [] {
    std::vector<QuantPair> p;
    for (WeightFormat w : all_values<WeightFormat>()) {
      p.push_back({w, ActFormat::none});
      if (w == WeightFormat::mxfp4) {
        p.push_back({w, ActFormat::mxfp4});
        p.push_back({w, ActFormat::mxfp8});
      }
      p.push_back({w, ActFormat::fp8_token});
    }
    return p;
  }();
  return pairs;
}

bool is_supported_pair(WeightFormat w, ActFormat a) {
  const auto& p = supported_pairs();
  return std::any_of(p.begin(), p.end(), [&](const QuantPair& q) { return q.weight == w && q.act == a; });
}

}  // namespace moeq
