#pragma once
// Canonical weight layouts (CONTRACT §4) as the caller hands them to moeq: raw pointers,
// one view per GEMM. The CPU reference reads these layouts directly; GPU backends `prepare`
// them into their own kernel layout once, at load time.
#include <cstdint>

#include "moeq/types.hpp"

namespace moeq {

// Shape and encoding of one GEMM's weights (w13 or w2), all experts.
// codes:        [E, n, k] elements of weight_format_code_dtype(format), packed along k.
// scales:       MX:   ue8m0 [E, n, k/32];  NVFP4: e4m3 [E, n, k/16]
//               FP8 channel: f32 [E, n];    FP8 block: f32 [E, ceil(n/128), ceil(k/128)]
//               INT4/INT8: scale_dtype [E, n, k/group_size] (group_size 0: [E, n])
// global_scales: NVFP4 only, f32 [E, num_global_scales]; with 2, rows [0, n/2) use column 0
//               (gate) and rows [n/2, n) column 1 (up).
// zero_points:  INT4 with has_zero_point: u8 [E, n, k/group_size] (or [E, n]), values 0..15;
//               value = (code - zp) * s. Without it, the zero point is 8 (INT4) / 128 (INT8).
// bias:         bias_dtype [E, n] when bias_dtype != none.
struct WeightDesc {
  WeightFormat format = WeightFormat::int4;
  int64_t num_experts = 0;
  int64_t n = 0;
  int64_t k = 0;
  int group_size = 0;  // K elements per scale: fixed by MX/NVFP4/FP8-block, chosen for INT4/INT8
  DType scale_dtype = DType::none;
  bool has_zero_point = false;
  int num_global_scales = 0;  // NVFP4: 1 or 2
  DType bias_dtype = DType::none;

  // Number of scale entries along k per row (1 for per-channel).
  int64_t scale_groups_k() const;
  // Element counts of each tensor, for all experts.
  int64_t code_bytes() const;
  int64_t scale_elems() const;
  int64_t scale_bytes() const;
  int64_t zero_point_bytes() const;
  int64_t global_scale_elems() const;
  int64_t bias_bytes() const;
};

// Layout of WeightView::codes. `canonical` is CONTRACT §4 (above). `prepared` is the CUDA
// GEMM's own order (16-channel x 64-k blocks whose 32-bit words are whole MMA fragment
// registers; device/moeq_dev/format/prepared.cuh), written once at load time by prepare_codes
// (GPU) or prepare_codes_host (CPU): the GEMM then needs no byte permutes. Scales, zero points
// and biases are the same in both. Only the CUDA backend reads prepared codes.
enum class CodeLayout { canonical, prepared };

struct WeightView {
  CodeLayout code_layout = CodeLayout::canonical;
  const void* codes = nullptr;
  const void* scales = nullptr;
  const float* global_scales = nullptr;
  const uint8_t* zero_points = nullptr;
  const void* bias = nullptr;
  // MX formats (ue8m0 scales): the caller's word that every scale is at most 2 (scale byte <= 128),
  // as mx_scales_at_most_two[_host] finds once at load time. MXFP4 weights with bf16 activations
  // then multiply each pair of codes once instead of twice on the GPU's warp-specialized tiles, and
  // skip the per-warp check of the smaller tiles (prepared codes): the same values, 0.4-6.8% of the
  // GEMMs' time on the H200 (bench/results/2026-12-04-h200-mx-fold.md). moeq checks it where the
  // scales are on the host (validate_weights), not on the GPU: a scale above 2 under this word
  // gives wrong outputs (scale x 2^126 overflows the bf16 multiplier), as wrong codes would.
  // Scales of quantized checkpoints are far below 2 (weights of magnitude < 12).
  bool mx_scales_at_most_two = false;
};

}  // namespace moeq

namespace moeq {
// Checks host-resident canonical weights: every pointer the desc needs is present and
// aligned, and every scale is finite and non-negative (ue8m0: not 255). Throws moeq::Error
// naming the tensor, the element and the value. `name` is
// "w13" or "w2".
void validate_weights(const WeightDesc& desc, const WeightView& view, const char* name);

// Bytes of the prepared codes of `desc`: n rounded up to 16 and k to 64 (padding codes are 0).
int64_t prepared_code_bytes(const WeightDesc& desc);
// Canonical codes -> prepared codes, host memory (prepared_code_bytes(desc) bytes). The same
// map as prepare_codes on the GPU, bit for bit. Throws moeq::Error for an invalid desc.
void prepare_codes_host(const WeightDesc& desc, const void* canonical, void* prepared);
// The same on the GPU: device pointers, enqueued on `stream` (a CUstream, null = default), no
// sync. Both pointers 16-byte aligned. Throws moeq::Error without a CUDA device.
void prepare_codes(const WeightDesc& desc, const void* canonical, void* prepared, void* stream = nullptr);

// Whether every ue8m0 scale of `desc` (an MX format: E x n x k / 32 scales, whatever its
// group_size, which must be 0 or 32) is at most 2, i.e. every scale byte <= 128: the value for
// WeightView::mx_scales_at_most_two. Host scales; throws moeq::Error for a desc that is not MX, k
// not a multiple of 32, or a null pointer.
bool mx_scales_at_most_two_host(const WeightDesc& desc, const void* scales);
// The same for scales in device memory: waits for `stream` (a CUstream, null = default), then
// reads them back in 16 MiB chunks with synchronous copies (which also wait for blocking streams;
// not while a graph is being captured). Meant for load time, next to prepare_codes. Throws
// moeq::Error without a CUDA device.
bool mx_scales_at_most_two(const WeightDesc& desc, const void* scales, void* stream = nullptr);
}  // namespace moeq
