#pragma once
// Entry points of the elementwise kernels: activation (CONTRACT §6) and dynamic activation
// quantization (CONTRACT §5). The generated source includes the header that declares its enum
// (moe/activation.cuh or moe/quantize.cuh), then defines, before including this file, one of:
//
//   struct ElementwiseCfg {                                  // activation
//     static constexpr moeq_dev::ActivationKind kActivation = moeq_dev::ActivationKind::kSilu;
//     static constexpr bool kInterleaved = false;            // gated kinds only
//     static constexpr bool kDtypeIsBf16 = true;             // else f16
//     static constexpr int kThreads = 256;                   // multiple of 32
//   };
//   struct ElementwiseCfg {                                  // quantization
//     static constexpr moeq_dev::QuantFormat kFormat = moeq_dev::QuantFormat::kMxfp8;
//     static constexpr bool kDtypeIsBf16 = true;
//     static constexpr bool kValuesOut = false;             // the codes' 16-bit values, not the codes
//     static constexpr int kThreads = 256;
//   };
//   struct ElementwiseCfg {                                  // activation, then quantization:
//     kActivation, kInterleaved, kFormat, kDtypeIsBf16, kValuesOut (true), kThreads   // GEMM2's input
//   };
//   struct ElementwiseCfg {                                  // dequantization
//     static constexpr moeq_dev::QuantFormat kDequantFormat = moeq_dev::QuantFormat::kMxfp8;
//     static constexpr bool kDtypeIsBf16 = true;
//     static constexpr int kThreads = 256;
//   };
//
// All entries exist in every module; those whose constants the config does not define
// (kActivation / kFormat / kDequantFormat; both kActivation and kFormat: the fused entry only) are
// empty stubs, so a config names only what its own kernel reads.
#include "moeq_dev/moe/activation.cuh"
#include "moeq_dev/moe/dequantize.cuh"
#include "moeq_dev/moe/quantize.cuh"
#include "moeq_dev/ptx/grid_dependency.cuh"

namespace moeq_dev {

template <class...> using void_t = void;
template <class Cfg, class = void> struct HasActivation { static constexpr bool value = false; };
template <class Cfg> struct HasActivation<Cfg, void_t<decltype(Cfg::kActivation)>> {
  static constexpr bool value = true;
};
template <class Cfg, class = void> struct HasQuantFormat { static constexpr bool value = false; };
template <class Cfg> struct HasQuantFormat<Cfg, void_t<decltype(Cfg::kFormat)>> {
  static constexpr bool value = true;
};

template <class Cfg, class = void> struct HasDequantFormat { static constexpr bool value = false; };
template <class Cfg> struct HasDequantFormat<Cfg, void_t<decltype(Cfg::kDequantFormat)>> {
  static constexpr bool value = true;
};

template <class Cfg, bool kLive = HasActivation<Cfg>::value && !HasQuantFormat<Cfg>::value>
struct ActivationEntry {
  __device__ static void run(const unsigned short*, unsigned short*, int, long long, ActivationArgs, int, int) {}
};

template <class Cfg>
struct ActivationEntry<Cfg, true> {
  static_assert(Cfg::kThreads % 32 == 0, "kThreads must be a multiple of 32");
  static_assert(!Cfg::kInterleaved || is_gated(Cfg::kActivation), "interleaved needs a gated activation");

  // kMmaOrder: the outputs in the MMA's K order (the host checked I % 64 == 0; kVec 8).
  template <int kVec, bool kMmaOrder = false>
  __device__ static void loop(const unsigned short* in, unsigned short* out, int rows, long long intermediate,
                              const ActivationArgs& args) {
    constexpr bool kGated = is_gated(Cfg::kActivation);
    const long long in_cols = kGated ? 2 * intermediate : intermediate;
    // PERF: 32-bit item arithmetic (the host keeps rows * I / kVec below 2^31): a 64-bit
    // division per item costs ~4x the instructions of a 32-bit one.
    const unsigned vecs_per_row = static_cast<unsigned>(intermediate / kVec);
    const unsigned num_items = static_cast<unsigned>(rows) * vecs_per_row;
    for (unsigned item = blockIdx.x * Cfg::kThreads + threadIdx.x; item < num_items;
         item += gridDim.x * Cfg::kThreads) {
      const unsigned row32 = item / vecs_per_row;
      const long long row = row32;
      const long long col = static_cast<long long>(item - row32 * vecs_per_row) * kVec;
      if constexpr (kMmaOrder) {
        activation_item_mma_order<Cfg::kActivation, Cfg::kInterleaved, Cfg::kDtypeIsBf16>(
            in + row * in_cols, out + row * intermediate, col, intermediate, args);
      } else {
        activation_item<Cfg::kActivation, Cfg::kInterleaved, Cfg::kDtypeIsBf16, kVec>(
            in + row * in_cols, out + row * intermediate, col, intermediate, args);
      }
    }
  }

  // vectorized != 0: the host checked I % 8 == 0 and 16-byte aligned base pointers; mma_order != 0
  // (vectorized): I % 64 == 0 too.
  __device__ static void run(const unsigned short* in, unsigned short* out, int rows, long long intermediate,
                             ActivationArgs args, int vectorized, int mma_order) {
    if (mma_order) {
      loop<8, true>(in, out, rows, intermediate, args);
    } else if (vectorized) {
      loop<8>(in, out, rows, intermediate, args);
    } else {
      loop<1>(in, out, rows, intermediate, args);
    }
  }
};

template <class Cfg, bool kLive = HasQuantFormat<Cfg>::value && !HasActivation<Cfg>::value>
struct QuantizeEntry {
  __device__ static void run(const unsigned short*, long long, int, int, unsigned char*, void*, int, int, int) {}
};

template <class Cfg>
struct QuantizeEntry<Cfg, true> {
  static_assert(Cfg::kThreads % 32 == 0 && Cfg::kThreads <= 1024, "kThreads: a multiple of 32, at most 1024");

  // vectorized != 0: the host checked cols and the row stride are multiples of 8 and the
  // pointers are aligned for 16-byte loads and 8-byte (fp8) / 4-byte (fp4) code stores.
  __device__ static void run(const unsigned short* in, long long in_row_stride, int rows, int cols,
                             unsigned char* codes, void* scales, int vectorized, int warps_per_row, int mma_order) {
    quantize_rows<Cfg>(BufferSource{in, in_row_stride}, rows, cols, codes, scales, vectorized, warps_per_row,
                       whole_grid(), mma_order);
  }
};

// GEMM2's input in one kernel: the activation of GEMM1's output (ActivationSource), quantized, its
// codes' 16-bit values (kValuesOut) or the codes themselves written, and the scales.
template <class Cfg, bool kLive = HasActivation<Cfg>::value && HasQuantFormat<Cfg>::value>
struct ActivationQuantizeEntry {
  __device__ static void run(const unsigned short*, int, long long, ActivationArgs, unsigned char*, void*, int, int, int) {}
};

template <class Cfg>
struct ActivationQuantizeEntry<Cfg, true> {
  static_assert(!Cfg::kInterleaved || is_gated(Cfg::kActivation), "interleaved needs a gated activation");
  __device__ static void run(const unsigned short* gate_up, int rows, long long intermediate, ActivationArgs args,
                             unsigned char* out, void* scales, int vectorized, int warps_per_row, int mma_order) {
    const ActivationSource<Cfg::kActivation, Cfg::kInterleaved, Cfg::kDtypeIsBf16> source{gate_up, intermediate, args};
    quantize_rows<Cfg>(source, rows, static_cast<int>(intermediate), out, scales, vectorized, warps_per_row,
                       whole_grid(), mma_order);
  }
};

template <class Cfg, bool kLive = HasDequantFormat<Cfg>::value>
struct DequantizeEntry {
  __device__ static void run(const unsigned char*, const void*, int, int, unsigned short*, long long, int) {}
};

template <class Cfg>
struct DequantizeEntry<Cfg, true> {
  __device__ static void run(const unsigned char* codes, const void* scales, int rows, int cols, unsigned short* out,
                             long long out_row_stride, int vectorized) {
    if (vectorized) {
      dequantize_rows<Cfg::kDequantFormat, Cfg::kDtypeIsBf16, 8>(codes, scales, rows, cols, out, out_row_stride);
    } else {
      dequantize_rows<Cfg::kDequantFormat, Cfg::kDtypeIsBf16, 1>(codes, scales, rows, cols, out, out_row_stride);
    }
  }
};

}  // namespace moeq_dev

// in [rows, N13] (N13 = 2I gated, else I), out [rows, I]; 16-bit elements as raw bits; mma_order != 0:
// each out row in the MMA's K order (format/mma_order.cuh).
extern "C" __global__ void __launch_bounds__(ElementwiseCfg::kThreads)
moeq_activation(const unsigned short* in, unsigned short* out, int rows, long long intermediate,
                moeq_dev::ActivationArgs args, int vectorized, int mma_order) {
  moeq_dev::begin_dependent_grid();
  moeq_dev::ActivationEntry<ElementwiseCfg>::run(in, out, rows, intermediate, args, vectorized, mma_order);
}

// in [rows, cols] with row stride in_row_stride (elements); codes and scales as
// reference/quantize.hpp, or with kValuesOut `codes` is a dense [rows, cols] 16-bit buffer of the
// codes' values (moe/quantize_common.cuh CodeSink). warps_per_row: FP8 per token only (1, 2, 4, 8;
// divides kThreads / 32). mma_order != 0 (kValuesOut): the values in the MMA's K order (CodeSink).
extern "C" __global__ void __launch_bounds__(ElementwiseCfg::kThreads)
moeq_quantize_activation(const unsigned short* in, long long in_row_stride, int rows, int cols,
                         unsigned char* codes, void* scales, int vectorized, int warps_per_row, int mma_order) {
  moeq_dev::begin_dependent_grid();
  moeq_dev::QuantizeEntry<ElementwiseCfg>::run(in, in_row_stride, rows, cols, codes, scales, vectorized,
                                               warps_per_row, mma_order);
}

// gate_up [rows, N13] (GEMM1's output) -> out [rows, I] (dense) and scales: the activation, then
// the quantizer of kFormat writing its codes, or with kValuesOut their 16-bit values
// (moe/quantize_common.cuh ActivationSource).
extern "C" __global__ void __launch_bounds__(ElementwiseCfg::kThreads)
moeq_activation_quantize(const unsigned short* gate_up, int rows, long long intermediate, moeq_dev::ActivationArgs args,
                         unsigned char* out, void* scales, int vectorized, int warps_per_row, int mma_order) {
  moeq_dev::begin_dependent_grid();
  moeq_dev::ActivationQuantizeEntry<ElementwiseCfg>::run(gate_up, rows, intermediate, args, out, scales, vectorized,
                                                         warps_per_row, mma_order);
}

// codes and scales as reference/quantize.hpp, [rows, cols] -> out [rows, cols] with row stride
// out_row_stride (elements); moe/dequantize.cuh says which values.
extern "C" __global__ void __launch_bounds__(ElementwiseCfg::kThreads)
moeq_dequantize_activation(const unsigned char* codes, const void* scales, int rows, int cols, unsigned short* out,
                           long long out_row_stride, int vectorized) {
  moeq_dev::begin_dependent_grid();
  moeq_dev::DequantizeEntry<ElementwiseCfg>::run(codes, scales, rows, cols, out, out_row_stride, vectorized);
}
