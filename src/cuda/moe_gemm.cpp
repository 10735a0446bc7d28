// Host side of the MoE GEMM: a per-process table of loaded functions, argument checks and the launch.
#include "cuda/moe_gemm.hpp"

#include <algorithm>
#include <cstdint>
#include <mutex>
#include <string>
#include <unordered_map>

#include "cuda/gemm_device_params.hpp"
#include "cuda/launch.hpp"
#include "moeq/error.hpp"

namespace moeq::cuda {
namespace {

template <typename T>
T* as_ptr(CUdeviceptr p) {
  return reinterpret_cast<T*>(static_cast<uintptr_t>(p));
}

constexpr int kFuncAttributeMaxDynamicSharedBytes = 8;  // CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES

// The loaded function of a GEMM or segment-builder config (the tile as the device runs it),
// found by gemm_config_key: the source text is generated, the tile's shared memory checked
// against the device and the GEMM's dynamic shared-memory limit raised (the attribute is per
// function) only at a config's first use in the process.
CUfunction gemm_function(const WeightDesc& w, DType act_dtype, const GemmTile& tile, bool prepared, bool segments,
                         GemmInput input = GemmInput::values, bool mx_scales_at_most_two = false,
                         GemmVariant variant = GemmVariant::plain, const EpilogueActivation& activation = {});

void require_aligned(CUdeviceptr p, int64_t bytes, const char* name) {
  if (p % static_cast<CUdeviceptr>(bytes) != 0)
    throw Error(std::string("moe_gemm: ") + name + " is not aligned to " + std::to_string(bytes) + " bytes");
}

}  // namespace

void build_segments(const WeightDesc& w, DType act_dtype, const GemmTile& tile, CUdeviceptr offsets,
                    CUdeviceptr counts, DType counts_dtype, int64_t rows_per_expert, int64_t num_experts,
                    CUdeviceptr block_table, CUdeviceptr num_blocks, CUdeviceptr error_flags, CUstream stream,
                    GemmInput input) {
  if (num_experts > 4096) throw Error("build_segments: num_experts = " + std::to_string(num_experts) + " exceeds 4096");
  if ((offsets == 0) == (counts == 0)) throw Error("build_segments: give exactly one of offsets and counts");
  const CUfunction f = gemm_function(w, act_dtype, tile_for_device(tile), false, true, input);
  const long long* offsets_ptr = as_ptr<const long long>(offsets);
  const void* counts_ptr = as_ptr<const void>(counts);
  const int counts_int64 = counts_dtype == DType::i64 ? 1 : 0;
  const long long rows = rows_per_expert;
  const int experts = static_cast<int>(num_experts);
  int* table = as_ptr<int>(block_table);
  int* count = as_ptr<int>(num_blocks);
  int* errors = as_ptr<int>(error_flags);
  LaunchShape shape;
  shape.block_x = 256;
  launch(f, shape, stream, offsets_ptr, counts_ptr, counts_int64, rows, experts, table, count, errors);
}

namespace {

CUfunction gemm_function(const WeightDesc& w, DType act_dtype, const GemmTile& tile, bool prepared, bool segments,
                         GemmInput input, bool mx_scales_at_most_two, GemmVariant variant,
                         const EpilogueActivation& activation) {
  static std::mutex mutex;
  // [bias][variant][epilogue activation: 0 none, else 1 + 2 kind + interleaved]: not bits of gemm_config_key.
  constexpr int kActivations = 1 + 2 * 9;
  static std::unordered_map<uint64_t, CUfunction> tables[2][2][kActivations];
  static_assert(static_cast<int>(Activation::relu2_no_mul) == 8, "kActivations counts every Activation");
  if (segments) variant = GemmVariant::plain;
  const EpilogueActivation none{};
  const EpilogueActivation& epilogue = segments ? none : activation;
  const int activation_index =
      epilogue.on ? 1 + 2 * static_cast<int>(epilogue.kind) + (epilogue.interleaved ? 1 : 0) : 0;
  auto& table = tables[w.bias_dtype != DType::none ? 1 : 0][static_cast<int>(variant)][activation_index];
  const uint64_t key = gemm_config_key(w, act_dtype, tile, prepared, segments, input, mx_scales_at_most_two);
  std::lock_guard<std::mutex> lock(mutex);
  if (auto it = table.find(key); it != table.end()) return it->second;
  const int64_t smem = gemm_smem_bytes(tile, w, input), static_smem = gemm_static_smem_bytes(tile, input);
  if (const int max_smem = process_device_info().max_smem_per_block_optin; !segments && smem + static_smem > max_smem)
    throw Error("moe_gemm: tile " + tile.to_string() + " needs " + std::to_string(smem + static_smem) +
                " bytes of shared memory; this device allows " + std::to_string(max_smem));
  const CUfunction f = jit::kernel_cache().function(
      segments ? moe_gemm_segments_kernel_spec(w, act_dtype, tile, prepared, input)
               : moe_gemm_kernel_spec(w, act_dtype, tile, prepared, input, mx_scales_at_most_two, variant, epilogue));
  // NOTE: the 48 KB default covers static plus dynamic shared memory. A kernel staging its rows (GemmInput::
  // quantized_rows) serves every K of its key (its source does not depend on K, the staged bytes do), so its limit is
  // raised once for the most any K may stage (gemm_quantizes_rows: kMaxStagedRowsBytes).
  const int64_t limit = input == GemmInput::quantized_rows
                            ? smem - gemm_staged_rows_bytes(tile, w, input) + kMaxStagedRowsBytes
                            : smem;
  if (!segments && limit + static_smem > 48 * 1024)
    check(driver().cuFuncSetAttribute(f, kFuncAttributeMaxDynamicSharedBytes,
                                      static_cast<int>(std::min<int64_t>(
                                          limit, process_device_info().max_smem_per_block_optin - static_smem))),
          "cuFuncSetAttribute(max dynamic shared memory)");
  table.emplace(key, f);
  return f;
}

}  // namespace

std::vector<GemmKernelVariant> gemm_extra_variants(const GemmTile& tile, const WeightDesc& w, GemmInput input,
                                                   const GemmVariantUse& use) {
  std::vector<GemmKernelVariant> variants;
  if (input == GemmInput::row_scaled_values && gemm_quantizes_rows(tile, w)) {
    if (use.rows_activation.on) variants.push_back({GemmVariant::plain, use.rows_activation, true});
    if (use.quantized_self_route && gemm_self_routes(tile, GemmInput::quantized_rows))
      variants.push_back({GemmVariant::self_routed, {}, true});
  }
  const bool self_routes = use.self_route && gemm_self_routes(tile, input);
  if (self_routes) variants.push_back({GemmVariant::self_routed, {}});
  if (use.activation.on && gemm_fuses_activation(tile, input, use.activation)) {
    variants.push_back({GemmVariant::plain, use.activation});
    if (self_routes) variants.push_back({GemmVariant::self_routed, use.activation});
  }
  return variants;
}

GemmWeightsKind GemmWeightsKind::of(const WeightView& view) {
  return {view.code_layout == CodeLayout::prepared, view.mx_scales_at_most_two,
          scales_off_word_boundary(static_cast<CUdeviceptr>(reinterpret_cast<uintptr_t>(view.scales)))};
}

std::vector<bool> GemmWeightsKind::admitted(const std::optional<bool>& field) {
  if (field.has_value()) return {*field};
  return {false, true};
}

void load_moe_gemm(const WeightDesc& w, DType act_dtype, const GemmTile& requested, GemmInput input,
                   const GemmVariantUse& use, const GemmWeightsKind& kind) {
  const GemmTile tile = tile_for_device(requested);
  // NOTE: where the tile is its own unaligned-scales tile, the second pass finds every key loaded.
  for (bool unaligned : GemmWeightsKind::admitted(kind.unaligned_scales)) {
    const GemmTile runs = unaligned ? unaligned_scales_tile(tile) : tile;
    for (bool prepared : GemmWeightsKind::admitted(kind.prepared_codes))
      if (input != GemmInput::row_scaled_e4m3 || gemm_takes_e4m3(w, runs, 90, prepared))
        for (bool mx_fold : GemmWeightsKind::admitted(kind.mx_scales_at_most_two)) {
          // Where the word changes nothing, the same key: loaded once.
          gemm_function(w, act_dtype, runs, prepared, false, input, mx_fold);
          for (const GemmKernelVariant& v : gemm_extra_variants(runs, w, input, use))
            gemm_function(w, act_dtype, runs, prepared, false, v.input(input), mx_fold, v.variant, v.activation);
        }
  }
  // NOTE: build_segments loads the canonical, unfolded module whatever the weights (the builder reads no weights).
  gemm_function(w, act_dtype, tile, false, true, input);
  if (gemm_runs_permuting_twin(tile, input)) load_moe_gemm(w, act_dtype, permuting_tile(tile, w), input, use, kind);
}

int ctas_per_sm_for_registers(int registers, int threads, int registers_per_sm) {
  const int per_warp = (std::max(registers, 1) * 32 + 255) / 256 * 256, warps = (std::max(threads, 1) + 31) / 32;
  return registers_per_sm / per_warp / warps;
}

namespace {

// The tile moe_gemm launches `a` on (as the device runs it, for its weights' scales).
GemmTile launched_tile(const MoeGemmArgs& a) { return tile_for_scales(tile_for_device(a.tile), a.weights.scales); }

// What A holds for `a`.
GemmInput launched_input(const MoeGemmArgs& a) {
  if (a.quantize_rows) return GemmInput::quantized_rows;
  return a.a_e4m3 ? GemmInput::row_scaled_e4m3 : a.a_row_scales != 0 ? GemmInput::row_scaled_values : GemmInput::values;
}

// The kernel moe_gemm launches for `a` on `tile` (launched_tile), with `epilogue` in its epilogue.
CUfunction launched_function(const MoeGemmArgs& a, const GemmTile& tile, const EpilogueActivation& epilogue) {
  const GemmVariant variant = a.self_route ? GemmVariant::self_routed : GemmVariant::plain;
  return gemm_function(a.weights_desc, a.act_dtype, tile, a.prepared_codes, false, launched_input(a),
                       a.mx_scales_at_most_two, variant, epilogue);
}

int ctas_per_sm_by_registers(CUfunction f, int threads) {
  int registers = 0;
  check(driver().cuFuncGetAttribute(&registers, func_attr::kNumRegs, f), "cuFuncGetAttribute(registers)");
  return ctas_per_sm_for_registers(registers, threads, process_device_info().max_registers_per_sm);
}

}  // namespace

bool activation_epilogue_keeps_occupancy(const MoeGemmArgs& a, const EpilogueActivation& epilogue) {
  const GemmTile tile = launched_tile(a);
  const CUfunction plain = launched_function(a, tile, {}), fused = launched_function(a, tile, epilogue);
  static std::mutex mutex;
  static std::unordered_map<CUfunction, bool> verdicts;  // by the fused kernel, whose key names its plain twin
  const std::lock_guard<std::mutex> lock(mutex);
  if (const auto known = verdicts.find(fused); known != verdicts.end()) return known->second;
  const int threads = static_cast<int>(tile.threads());
  const bool keeps = ctas_per_sm_by_registers(fused, threads) >= ctas_per_sm_by_registers(plain, threads);
  verdicts.emplace(fused, keeps);
  return keeps;
}

void moe_gemm(const MoeGemmArgs& a, CUstream stream) {
  const WeightDesc& w = a.weights_desc;
  auto reasons = moe_gemm_reasons(w, a.act_dtype);
  for (auto& reason : gemm_tile_reasons(a.tile, w)) reasons.push_back(reason);
  const GemmTile tile = launched_tile(a);
  if (!reasons.empty()) throw Error("moe_gemm: " + reasons.front());
  if (a.max_ctas < 0) throw Error("moe_gemm: max_ctas = " + std::to_string(a.max_ctas) + " is negative");
  if (a.a == 0 || a.c == 0 || a.weights.codes == 0 || a.weights.scales == 0 ||
      (w.num_global_scales > 0 && a.weights.global_scales == 0) || (w.has_zero_point && a.weights.zero_points == 0) ||
      (w.bias_dtype != DType::none && a.weights.bias == 0))
    throw Error("moe_gemm: a pointer the weights or operands need is null");
  require_aligned(a.a, 16, "A");
  require_aligned(a.weights.codes, 16, "codes");
  require_aligned(a.c, 4, "C");
  require_aligned(a.a_row_scales, 4, "a_row_scales");
  require_aligned(a.a_scale_rows, 4, "a_scale_rows");
  if (a.a_scale_rows != 0 && (a.a_row_scales == 0 || a.a_scale_row_divisor < 1 || a.a_scale_row_divisor > INT32_MAX))
    throw Error("moe_gemm: a_scale_rows needs a_row_scales and a_scale_row_divisor = " +
                std::to_string(a.a_scale_row_divisor) + " in [1, 2^31)");
  if (a.a_e4m3) {
    if (!gemm_takes_e4m3(w, tile, device_sm(), a.prepared_codes))
      throw Error(std::string("moe_gemm: ") + kE4m3Rule + ", not " + std::string(moeq::to_string(w.format)) +
                  (a.prepared_codes ? " (prepared codes)" : "") + " on " + tile.to_string() + " (sm_" +
                  std::to_string(device_sm()) + ", K = " + std::to_string(w.k) + ")");
    if (a.a_row_scales == 0) throw Error("moe_gemm: e4m3 activations need a_row_scales");
    if (a.a_row_stride % 16 != 0)
      throw Error("moe_gemm: a_row_stride = " + std::to_string(a.a_row_stride) +
                  " bytes of e4m3 codes must be a multiple of 16");
  }
  if (a.a_row_stride % 8 != 0 || a.c_row_stride % 2 != 0)
    throw Error("moe_gemm: a_row_stride = " + std::to_string(a.a_row_stride) + " must be a multiple of 8 and c_row_stride = " +
                std::to_string(a.c_row_stride) + " even");
  if (a.self_route) {
    if (!a.gather || !gemm_self_routes(tile, launched_input(a)) || a.rows_activation || a.a_e4m3 || a.a_row_scales != 0 ||
        a.num_slots > kMaxSelfRoutedSlots ||
        a.num_slots > a.tile.block_m * a.src_row_divisor || a.topk_ids == 0 || a.num_global_experts < 1 ||
        a.num_local_experts < 1 || (a.topk_ids_dtype != DType::i32 && a.topk_ids_dtype != DType::i64))
      throw Error("moe_gemm: self_route needs the indexed layout, an 8-row direct tile, 16-bit A (or FP8 per-token rows "
                  "it quantizes itself), num_slots = " +
                  std::to_string(a.num_slots) + " <= " + std::to_string(kMaxSelfRoutedSlots) +
                  " with M <= block_m, int32 or int64 topk_ids and the expert counts");
  }
  // The GEMM's output columns and the channels a CTA computes for them: gated [gate | up] rows with the activation in
  // the epilogue pair block y's gate and up halves (epilogue_weight_row), so blocks of block_n / 2 outputs.
  const bool gated = is_gated(a.activation.kind);
  const bool pairs_halves = a.epilogue_activation && gated && !a.interleaved_gate_up;
  if (a.epilogue_activation) {
    const int64_t intermediate = gated ? w.n / 2 : w.n;
    const EpilogueActivation epilogue{true, a.activation.kind, a.interleaved_gate_up};
    if (!gemm_fuses_activation(tile, GemmInput::values, epilogue) || a.a_e4m3 || a.a_row_scales != 0 ||
        (a.interleaved_gate_up && !gated) || (pairs_halves && intermediate % 16 != 0) ||
        (tile.mma_order_tokens && intermediate % 64 != 0) || a.c_row_stride < intermediate)
      throw Error("moe_gemm: epilogue_activation needs 16-bit A on an 8-row direct or a warp-specialized wgmma tile "
                  "(not " + tile.to_string() + "), a gated kind for interleaved rows, I % 16 == 0 for [gate | up] "
                  "rows, I % 64 == 0 on a `/t` tile (its outputs in the MMA's K order) (I = " +
                  std::to_string(intermediate) + ") and c_row_stride = " + std::to_string(a.c_row_stride) + " >= I");
  }
  if (a.quantize_rows) {
    const int64_t n13 = gated ? 2 * w.k : w.k;
    if (!gemm_quantizes_rows(tile, w) || a.epilogue_activation || a.a_e4m3 || a.a_row_scales != 0 ||
        a.self_route == a.rows_activation || (a.rows_activation && (a.a_row_stride != n13 || (a.interleaved_gate_up && !gated))) ||
        (!a.rows_activation && a.a_row_stride < w.k))
      throw Error("moe_gemm: quantize_rows needs a direct tile, K % 8 == 0 and at most " +
                  std::to_string(kMaxStagedRowsBytes) + " bytes of staged rows (not " + tile.to_string() + ", K = " +
                  std::to_string(w.k) + "), no other A input, and either rows_activation (GEMM2: not self-routed, a "
                  "gated kind for interleaved rows, dense gate_up rows: a_row_stride = " + std::to_string(a.a_row_stride) +
                  " must be " + std::to_string(n13) + ") or self_route (GEMM1: a_row_stride >= K)");
  }
  const int64_t m_blocks = a.gather ? a.sorted_capacity / a.tile.block_m : a.max_blocks;
  if (m_blocks <= 0) return;

  DeviceGemmParams p{};
  p.a = as_ptr<const void>(a.a);
  p.a_row_stride = a.a_row_stride;
  p.codes = as_ptr<const unsigned char>(a.weights.codes);
  p.scaling = {as_ptr<const void>(a.weights.scales), as_ptr<const float>(a.weights.global_scales),
               w.has_zero_point ? as_ptr<const unsigned char>(a.weights.zero_points) : nullptr, w.group_size,
               scale_dtype_id(w.scale_dtype), w.num_global_scales > 0 ? w.num_global_scales : 1};
  p.bias = as_ptr<const void>(a.weights.bias);
  p.bias_dtype = bias_dtype_id(w.bias_dtype);
  p.gather = a.gather ? 1 : 0;
  p.c = as_ptr<void>(a.c);
  p.c_row_stride = a.c_row_stride;
  p.n = static_cast<int>(w.n);
  p.k = static_cast<int>(w.k);
  p.sorted_ids = as_ptr<const int>(a.sorted_ids);
  p.expert_ids = as_ptr<const int>(a.expert_ids);
  p.num_tokens_padded = as_ptr<const int>(a.num_tokens_padded);
  p.num_slots = static_cast<int>(a.num_slots);
  p.src_row_divisor = static_cast<int>(a.src_row_divisor);
  p.block_table = as_ptr<const int>(a.block_table);
  p.num_blocks = as_ptr<const int>(a.num_blocks);
  p.a_row_scales = as_ptr<const float>(a.a_row_scales);
  p.a_scale_rows = as_ptr<const int>(a.a_scale_rows);
  p.a_scale_row_divisor = static_cast<int>(a.a_scale_row_divisor);
  p.max_m_blocks = static_cast<int>(m_blocks);
  if (a.self_route) {
    p.topk_ids = as_ptr<const void>(a.topk_ids);
    p.expert_map = as_ptr<const int>(a.expert_map);
    p.topk_ids_int64 = a.topk_ids_dtype == DType::i64 ? 1 : 0;
    p.num_global_experts = static_cast<int>(a.num_global_experts);
    p.num_local_experts = static_cast<int>(a.num_local_experts);
  }

  // The activation's kind and parameters: GEMM1's epilogue's, or the one GEMM2 applies to the rows it quantizes.
  const bool applies_activation = a.epilogue_activation || (a.quantize_rows && a.rows_activation);
  if (applies_activation) {
    p.activation_swiglu_alpha = a.activation.swiglu_alpha;
    p.activation_swiglu_limit = a.activation.swiglu_limit;
    p.activation_silu_clamp = a.activation.silu_clamp;
  }

  const GemmInput input = launched_input(a);
  const CUfunction f = launched_function(
      a, tile,
      EpilogueActivation{applies_activation, a.activation.kind, a.interleaved_gate_up});
  const int64_t smem = gemm_smem_bytes(tile, w, input);
  LaunchShape shape;
  shape.grid_x = static_cast<unsigned>(m_blocks);
  shape.grid_y = static_cast<unsigned>(pairs_halves ? (w.n / 2 + tile.block_n / 2 - 1) / (tile.block_n / 2)
                                                    : (w.n + tile.block_n - 1) / tile.block_n);
  if (tile.persistent) {
    // One CTA per SM (a warp-specialized CTA takes an SM's registers), each looping over the tiles.
    const int64_t tiles = int64_t{shape.grid_x} * shape.grid_y;
    const int64_t num_sms = process_device_info().num_sms;
    const int64_t ctas = a.max_ctas > 0 ? std::min<int64_t>(a.max_ctas, num_sms) : num_sms;
    shape.grid_x = static_cast<unsigned>(std::max<int64_t>(1, std::min(tiles, ctas)));
    shape.grid_y = 1;
  }
  shape.grid_z = static_cast<unsigned>(tile.split_k);
  shape.block_x = static_cast<unsigned>(tile.threads());
  shape.smem_bytes = static_cast<unsigned>(smem);
  shape.cluster_z = static_cast<unsigned>(tile.split_k);
  launch(f, shape, stream, p);
}

}  // namespace moeq::cuda
