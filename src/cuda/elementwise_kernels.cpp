// The elementwise kernels' generated sources (activation, quantizers, dequantizer, the fused
// activation-quantizer, MMA row order) and the helpers their launchers share.
#include "cuda/elementwise_kernels.hpp"

#include <algorithm>
#include <string>
#include <vector>

#include "cuda/elementwise.hpp"
#include "moeq/error.hpp"

namespace moeq::cuda {

namespace elementwise_detail {

const char* activation_enum(Activation a) {
  switch (a) {
    case Activation::silu: return "kSilu";
    case Activation::gelu: return "kGelu";
    case Activation::gelu_tanh: return "kGeluTanh";
    case Activation::swiglu_oai: return "kSwigluOai";
    case Activation::swiglu_step: return "kSwigluStep";
    case Activation::silu_no_mul: return "kSiluNoMul";
    case Activation::gelu_no_mul: return "kGeluNoMul";
    case Activation::gelu_tanh_no_mul: return "kGeluTanhNoMul";
    case Activation::relu2_no_mul: return "kRelu2NoMul";
  }
  throw Error("activation = " + str(static_cast<int>(a)) + " is not a known activation");
}

const char* format_enum(ActFormat f) {
  switch (f) {
    case ActFormat::fp8_token: return "kFp8Token";
    case ActFormat::mxfp8: return "kMxfp8";
    case ActFormat::mxfp4: return "kMxfp4";
    case ActFormat::none: break;
  }
  throw Error("activation format = " + std::string(to_string(f)) + " has no quantizer kernel");
}

void check_dtype(DType dtype) {
  if (dtype != DType::bf16 && dtype != DType::f16)
    throw Error("dtype = " + std::string(to_string(dtype)) + " is not an activation dtype (bf16 or f16)");
}

// Blocks for a grid-stride loop: enough to cover the work, at most one full wave of resident
// blocks (2048 threads per SM on sm_80 .. sm_90), queried once.
unsigned grid_blocks(int64_t work_blocks) {
  static const int64_t max_blocks = int64_t{current_device_info().num_sms} * (2048 / kThreads);
  return static_cast<unsigned>(std::clamp<int64_t>(work_blocks, 1, max_blocks));
}

}  // namespace elementwise_detail

using elementwise_detail::kThreads;
using elementwise_detail::str;
using elementwise_detail::bool_str;
using elementwise_detail::activation_enum;
using elementwise_detail::format_enum;
using elementwise_detail::check_dtype;

jit::KernelSpec activation_kernel_spec(Activation kind, bool interleaved, DType dtype) {
  check_dtype(dtype);
  if (interleaved && !is_gated(kind))
    throw Error("interleaved_gate_up needs a gated activation, not " + std::string(to_string(kind)));
  std::string src = "#include \"moeq_dev/moe/activation.cuh\"\n";
  src += "struct ElementwiseCfg {\n";
  src += "  static constexpr moeq_dev::ActivationKind kActivation = moeq_dev::ActivationKind::" +
         std::string(activation_enum(kind)) + ";\n";
  src += "  static constexpr bool kInterleaved = " + std::string(bool_str(interleaved)) + ";\n";
  src += "  static constexpr bool kDtypeIsBf16 = " + std::string(bool_str(dtype == DType::bf16)) + ";\n";
  src += "  static constexpr int kThreads = " + str(kThreads) + ";\n";
  src += "};\n#include \"moeq_dev/kernels/elementwise.cuh\"\n";
  return jit::KernelSpec{"moeq_activation", std::move(src)};
}

namespace {

// The (de)quantizer config of `format`: `header` declares the format enum, `constant` names it.
jit::KernelSpec activation_format_spec(const char* header, const char* constant, const char* entry, ActFormat format,
                                       DType dtype, const std::string& more_members = "") {
  check_dtype(dtype);
  std::string src = "#include \"" + std::string(header) + "\"\n";
  src += "struct ElementwiseCfg {\n";
  src += "  static constexpr moeq_dev::QuantFormat " + std::string(constant) + " = moeq_dev::QuantFormat::" +
         std::string(format_enum(format)) + ";\n";
  src += "  static constexpr bool kDtypeIsBf16 = " + std::string(bool_str(dtype == DType::bf16)) + ";\n";
  src += more_members;
  src += "  static constexpr int kThreads = " + str(kThreads) + ";\n";
  src += "};\n#include \"moeq_dev/kernels/elementwise.cuh\"\n";
  return jit::KernelSpec{entry, std::move(src)};
}

}  // namespace

jit::KernelSpec quantize_kernel_spec(ActFormat format, DType dtype, bool values_out) {
  return activation_format_spec("moeq_dev/moe/quantize.cuh", "kFormat", "moeq_quantize_activation", format, dtype,
                                "  static constexpr bool kValuesOut = " + std::string(bool_str(values_out)) + ";\n");
}

jit::KernelSpec activation_quantize_kernel_spec(Activation kind, bool interleaved, ActFormat format, DType dtype,
                                                bool values_out) {
  jit::KernelSpec spec = activation_kernel_spec(kind, interleaved, dtype);
  const std::string members = std::string("  static constexpr moeq_dev::QuantFormat kFormat = moeq_dev::QuantFormat::") +
                              format_enum(format) + ";\n  static constexpr bool kValuesOut = " + bool_str(values_out) +
                              ";\n";
  const size_t at = spec.source.find("  static constexpr int kThreads");
  spec.source.insert(at, members);
  spec.source.insert(0, "#include \"moeq_dev/moe/quantize.cuh\"\n");
  spec.entry = "moeq_activation_quantize";
  return spec;
}

jit::KernelSpec dequantize_kernel_spec(ActFormat format, DType dtype) {
  return activation_format_spec("moeq_dev/moe/dequantize.cuh", "kDequantFormat", "moeq_dequantize_activation", format,
                                dtype);
}

std::vector<jit::KernelSpec> elementwise_kernel_specs() {
  std::vector<jit::KernelSpec> specs;
  for (const DType dtype : {DType::bf16, DType::f16}) {
    for (const Activation kind : all_values<Activation>()) {
      specs.push_back(activation_kernel_spec(kind, false, dtype));
      if (is_gated(kind)) specs.push_back(activation_kernel_spec(kind, true, dtype));
    }
    for (const ActFormat format : {ActFormat::fp8_token, ActFormat::mxfp8, ActFormat::mxfp4}) {
      specs.push_back(quantize_kernel_spec(format, dtype, false));
      specs.push_back(quantize_kernel_spec(format, dtype, true));
      specs.push_back(dequantize_kernel_spec(format, dtype));
    }
    // NOTE: the fused entry is the activation's values through the quantizer's code paths, both
    // covered in full above; its configs here: each format once per dtype, gated, interleaved and
    // plain among them (all 84 took minutes of every JIT test run: ~8 s each per arch on 2 cores).
    specs.push_back(activation_quantize_kernel_spec(Activation::silu, false, ActFormat::fp8_token, dtype));
    specs.push_back(activation_quantize_kernel_spec(Activation::silu, false, ActFormat::fp8_token, dtype, false));
    specs.push_back(activation_quantize_kernel_spec(Activation::swiglu_oai, true, ActFormat::mxfp8, dtype));
    specs.push_back(activation_quantize_kernel_spec(Activation::relu2_no_mul, false, ActFormat::mxfp4, dtype));
  }
  return specs;
}

jit::KernelSpec order_rows_kernel_spec() {
  return jit::KernelSpec{"moeq_order_rows_for_mma", "#include \"moeq_dev/kernels/mma_order_rows.cuh\"\n"};
}

}  // namespace moeq::cuda
