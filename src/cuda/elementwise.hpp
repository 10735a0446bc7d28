#pragma once
// Host side of the elementwise kernels (device/moeq_dev/kernels/elementwise.cuh): the activation
// (CONTRACT §6), the dynamic activation quantizers (CONTRACT §5) and their dequantizers. Each entry point validates
// its arguments on the host (moeq::Error naming the argument), takes device pointers and a
// stream, enqueues one kernel and returns: no host sync, no allocation, no compile after a
// config's first use, so it is CUDA-graph safe. rows = 0 enqueues nothing.
// Results: quantizer codes and scales equal reference/quantize_activations.cpp bit for bit;
// activations equal reference/activation.cpp rounded to the dtype, or differ by 1 ulp where
// CUDA's expf / erff / tanhf differ from libm's (docs/numerics.md).
#include <cstdint>
#include <vector>

#include "cuda/driver.hpp"
#include "jit/compiler.hpp"
#include "moeq/experts.hpp"
#include "moeq/types.hpp"

namespace moeq::cuda {

// in: [rows, N13] (N13 = 2I gated, I otherwise), dtype bf16 or f16, contiguous;
// out: [rows, I] of the same dtype; in is never written. `interleaved` (gated kinds only):
// columns [g0, u0, g1, u1, ...] instead of [gate | up]. alpha / limit / clamp are kernel
// arguments: one compiled kernel per (kind, dtype, interleaved).
// mma_order: each out row in the MMA's K order (moeq_dev::mma_order_position; GEMM2's input on a
// `/t` tile): needs I % 64 == 0 and 16-byte aligned in / out.
void activation(const ActivationParams& params, bool interleaved, DType dtype, CUdeviceptr in,
                int64_t rows, int64_t intermediate, CUdeviceptr out, CUstream stream, bool mma_order = false);

// in: [rows, cols] 16-bit elements with row stride in_row_stride (elements) -> out [rows, cols] with
// row stride out_row_stride, each row in the MMA's K order (GEMM1's input on a `/t` tile). cols % 64
// == 0, even strides, 4-byte aligned pointers; out == in (same strides) rewrites the rows in place.
void order_rows_for_mma(CUdeviceptr in, int64_t in_row_stride, int64_t rows, int64_t cols, CUdeviceptr out,
                        int64_t out_row_stride, CUstream stream);
jit::KernelSpec order_rows_kernel_spec();

// in: [rows, cols] (bf16 / f16) with row stride in_row_stride elements (>= cols);
// codes / scales as reference/quantize.hpp (act_code_bytes / act_scale_bytes bytes):
//   fp8_token: codes e4m3 [rows, cols], scales f32 [rows]
//   mxfp8:     codes e4m3 [rows, cols], scales ue8m0 [rows, cols / 32]
//   mxfp4:     codes e2m1 [rows, cols / 2], scales ue8m0 [rows, cols / 32]
// mma_order (FP8 per token, cols % 128 == 0): each row's codes in the e4m3 consumers' K order
// (moeq_dev::e4m3_mma_order_position; GEMM1's input on a `/t` e4m3 tile).
void quantize_activation(ActFormat format, DType dtype, CUdeviceptr in, int64_t in_row_stride,
                         int64_t rows, int64_t cols, CUdeviceptr codes, CUdeviceptr scales,
                         CUstream stream, bool mma_order = false);

// quantize_activation and dequantize_activation in one kernel: the codes' 16-bit values, bit for
// bit what dequantize_activation writes, into values [rows, cols] (dtype, dense), and the scales
// as quantize_activation writes them (FP8 per token: MoeGemmArgs::a_row_scales). No codes are
// written. The 16-bit GEMM path's input (PERF: one pass fewer over the codes, one launch fewer).
// mma_order (cols % 64 == 0): each row's values in the MMA's K order (moeq_dev::mma_order_position; GEMM1's
// input on a `/t` tile).
void quantize_activation_values(ActFormat format, DType dtype, CUdeviceptr in, int64_t in_row_stride, int64_t rows,
                                int64_t cols, CUdeviceptr values, CUdeviceptr scales, CUstream stream,
                                bool mma_order = false);

// activation then quantize_activation_values in one kernel, for GEMM2's input: gate_up [rows, N13]
// as `activation` takes it -> values [rows, I] (dense) and scales, bit for bit what the two kernels
// write (the activation's rounded outputs are what the quantizer reads); no activation buffer.
// mma_order (I % 64 == 0): each row's values in the MMA's K order (GEMM2's input on a `/t` tile).
void activation_quantize_values(const ActivationParams& params, bool interleaved, ActFormat format, DType dtype,
                                CUdeviceptr gate_up, int64_t rows, int64_t intermediate, CUdeviceptr values,
                                CUdeviceptr scales, CUstream stream, bool mma_order = false);
// The same with the codes written (as quantize_activation writes them: dense [rows, I], 8-byte
// aligned for the 16-byte path) instead of their values: GEMM2's input where it reads e4m3 codes.
// mma_order (FP8 per token, I % 128 == 0): as quantize_activation's (GEMM2's input on a `/t` e4m3 tile).
void activation_quantize_codes(const ActivationParams& params, bool interleaved, ActFormat format, DType dtype,
                               CUdeviceptr gate_up, int64_t rows, int64_t intermediate, CUdeviceptr codes,
                               CUdeviceptr scales, CUstream stream, bool mma_order = false);

// codes / scales as quantize_activation writes them -> out [rows, cols] (dtype bf16 / f16) with
// row stride out_row_stride elements: the values the GEMM's 16-bit MMAs take for the quantized
// activations (device/moeq_dev/moe/dequantize.cuh): MX codes times their scale (exact), FP8 per
// token the codes alone (their row scale goes to MoeGemmArgs::a_row_scales).
void dequantize_activation(ActFormat format, DType dtype, CUdeviceptr codes, CUdeviceptr scales, int64_t rows,
                           int64_t cols, CUdeviceptr out, int64_t out_row_stride, CUstream stream);

// The generated kernel sources, one per config.
jit::KernelSpec activation_kernel_spec(Activation kind, bool interleaved, DType dtype);
// values_out: quantize_activation_values's kernel.
jit::KernelSpec quantize_kernel_spec(ActFormat format, DType dtype, bool values_out = false);
jit::KernelSpec dequantize_kernel_spec(ActFormat format, DType dtype);
// values_out false: activation_quantize_codes's kernel.
jit::KernelSpec activation_quantize_kernel_spec(Activation kind, bool interleaved, ActFormat format, DType dtype,
                                                bool values_out = true);
// Every config the entry points can launch: 9 activations x 2 dtypes (x interleaved for the 5
// gated kinds) = 28, 3 quantizers x 2 dtypes x codes or values out = 12, 3 dequantizers x 2
// dtypes = 6, and one fused activation-quantizer per format and dtype = 6 (of 84: the rest differ
// only in the activation or the format, which the others cover), FP8 per token's also with codes
// out = 2.
std::vector<jit::KernelSpec> elementwise_kernel_specs();

}  // namespace moeq::cuda
