#pragma once
// Value types shared by every layer of moeq: element dtypes, quantization formats,
// activations, layouts and backends. Each enum has exactly one to_string and one parser.
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace moeq {

// Storage element types. e2m1 and u4 are 4-bit codes packed two per byte along K
// (element 2j in the low nibble of byte j).
enum class DType : uint8_t { none, bf16, f16, f32, e4m3, e5m2, e2m1, ue8m0, u4, u8, i32, i64 };

// Weight quantization formats (CONTRACT §4).
enum class WeightFormat : uint8_t { mxfp4, nvfp4, mxfp8, fp8_channel, fp8_block, int4, int8 };

// Activation formats (CONTRACT §5): `none` = 16-bit activations (bf16/fp16, no quantization).
enum class ActFormat : uint8_t { none, fp8_token, mxfp8, mxfp4 };

// Activations (CONTRACT §6). The *_no_mul ones are not gated: GEMM1 is I wide, not 2I.
enum class Activation : uint8_t {
  silu, gelu, gelu_tanh, swiglu_oai, swiglu_step,
  silu_no_mul, gelu_no_mul, gelu_tanh_no_mul, relu2_no_mul
};

// Layouts (CONTRACT §3). `auto_select` picks masked for batched input, else indexed or contiguous.
enum class Layout : uint8_t { auto_select, indexed, contiguous, masked };

enum class Backend : uint8_t { auto_select, cpu, cuda };

std::string_view to_string(DType v);
std::string_view to_string(WeightFormat v);
std::string_view to_string(ActFormat v);
std::string_view to_string(Activation v);
std::string_view to_string(Layout v);
std::string_view to_string(Backend v);

// Parsers accept exactly the to_string spelling (case-insensitive, '-' and '_' interchangeable)
// and return nullopt otherwise.
std::optional<DType> parse_dtype(std::string_view s);
std::optional<WeightFormat> parse_weight_format(std::string_view s);
std::optional<ActFormat> parse_act_format(std::string_view s);
std::optional<Activation> parse_activation(std::string_view s);
std::optional<Layout> parse_layout(std::string_view s);
std::optional<Backend> parse_backend(std::string_view s);

template <typename Enum>
std::vector<Enum> all_values();  // every value of the enum, in declaration order

// Bits of one element (4 for packed nibbles), and bytes for `elems` elements (rounded up).
int dtype_bits(DType t);
int64_t dtype_bytes(DType t, int64_t elems);

bool is_gated(Activation a);
// Bits of one activation element as the GEMM consumes it (16, 8 or 4).
int act_format_bits(ActFormat a);
// Element dtype of a quantized activation buffer (e4m3 / e2m1), or `none` for 16-bit.
DType act_format_code_dtype(ActFormat a);
// K elements per weight scale fixed by the format (32 MX, 16 NVFP4, 128 FP8 block); 0 when
// the group is a parameter (INT4 / INT8) or the scale is per channel (FP8 channel).
int weight_format_fixed_group(WeightFormat w);
// Weight scale dtype fixed by the format (ue8m0 MX, e4m3 NVFP4, f32 FP8); `none` for INT4 / INT8, whose
// scales take a dtype of the caller's choice.
DType weight_format_fixed_scale_dtype(WeightFormat w);
DType weight_format_code_dtype(WeightFormat w);

struct QuantPair {
  WeightFormat weight;
  ActFormat act;
};
// The 16 supported (weight, activation) pairs, in CONTRACT §5 order.
const std::vector<QuantPair>& supported_pairs();
bool is_supported_pair(WeightFormat w, ActFormat a);

}  // namespace moeq
