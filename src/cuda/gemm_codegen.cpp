// The MoE GEMM's generated source per config, its key, and the configs tests/jit and `moeq compile` cover.
#include "cuda/gemm_codegen.hpp"

#include <algorithm>
#include <sstream>

#include "cuda/elementwise_kernels.hpp"
#include "cuda/gemm_device_params.hpp"
#include "cuda/gemm_planner.hpp"
#include "cuda/routing.hpp"
#include "moeq/error.hpp"

namespace moeq::cuda {
namespace {

const char* format_id(WeightFormat f) {
  switch (f) {
    case WeightFormat::mxfp4: return "kMxfp4";
    case WeightFormat::nvfp4: return "kNvfp4";
    case WeightFormat::mxfp8: return "kMxfp8";
    case WeightFormat::fp8_channel: return "kFp8Channel";
    case WeightFormat::fp8_block: return "kFp8Block";
    case WeightFormat::int4: return "kInt4";
    case WeightFormat::int8: return "kInt8";
  }
  return "kInt4";
}

}  // namespace

jit::KernelSpec moe_gemm_kernel_spec(const WeightDesc& w, DType act_dtype, const GemmTile& tile, bool prepared_codes,
                                     GemmInput input, bool mx_scales_at_most_two, GemmVariant variant,
                                     const EpilogueActivation& activation) {
  if (variant == GemmVariant::self_routed && !gemm_self_routes(tile, input))
    throw Error("moe_gemm: a self-routed GEMM1 needs an 8-row direct tile over 16-bit A, not " + tile.to_string() +
                (input != GemmInput::values ? " over quantized A" : ""));
  if (input == GemmInput::quantized_rows &&
      (!gemm_quantizes_rows(tile, w) || activation.on == (variant == GemmVariant::self_routed)))
    throw Error("moe_gemm: a GEMM quantizing its own rows needs a direct tile with K % 8 == 0 and at most " +
                std::to_string(kMaxStagedRowsBytes) + " bytes of staged rows, and either their activation (GEMM2) "
                "or self-routing (GEMM1); not " + tile.to_string() + " (K = " + std::to_string(w.k) + ")" +
                (activation.on ? " with an activation" : "") +
                (variant == GemmVariant::self_routed ? " self-routed" : ""));
  if (input != GemmInput::quantized_rows && activation.on && !gemm_fuses_activation(tile, input, activation))
    throw Error("moe_gemm: a GEMM1 with the activation in its epilogue needs 16-bit A and an 8-row direct or a "
                "warp-specialized wgmma tile; not " +
                std::string(moeq::to_string(activation.kind)) + (activation.interleaved ? " (interleaved)" : "") +
                " on " + tile.to_string() + (input != GemmInput::values ? " over quantized A" : ""));
  if (activation.on && activation.interleaved && !is_gated(activation.kind))
    throw Error(std::string("moe_gemm: interleaved gate / up rows need a gated activation, not ") +
                std::string(moeq::to_string(activation.kind)));
  // NOTE: any arch that has the instruction: the caller checks the device (gemm_takes_e4m3).
  if (input == GemmInput::row_scaled_e4m3 && !gemm_takes_e4m3(w, tile, 90, prepared_codes))
    throw Error(std::string("moe_gemm: ") + kE4m3Rule + ", not " + std::string(moeq::to_string(w.format)) +
                (prepared_codes ? " (prepared codes)" : "") + " on " + tile.to_string() + " (K = " + std::to_string(w.k) +
                ")");
  // NOTE: only INT formats have a choice of scale dtype and zero points; the others always get
  // the same text, so they share one compiled kernel.
  const bool is_int = w.format == WeightFormat::int4 || w.format == WeightFormat::int8;
  std::ostringstream s;
  s << "#include \"moeq_dev/format/weights.cuh\"\n";
  if (activation.on) s << "#include \"moeq_dev/moe/activation.cuh\"\n";
  const bool rows_activation = input == GemmInput::quantized_rows && activation.on;
  s << "struct MoeGemmCfg {\n"
    << "  static constexpr moeq_dev::WeightFormatId kFormat = moeq_dev::WeightFormatId::" << format_id(w.format) << ";\n"
    << "  static constexpr bool kActBf16 = " << (act_dtype == DType::bf16 ? "true" : "false") << ";\n"
    << "  static constexpr int kBlockM = " << tile.block_m << ";\n"
    << "  static constexpr int kBlockN = " << tile.block_n << ";\n"
    << "  static constexpr int kWarpsM = " << tile.warps_m << ";\n"
    << "  static constexpr int kWarpsN = " << tile.warps_n << ";\n"
    << "  static constexpr int kWarpsK = " << tile.warps_k << ";\n"
    << "  static constexpr int kStages = " << tile.stages << ";\n"
    << "  static constexpr int kSplitK = " << tile.split_k << ";\n"
    << "  static constexpr int kMinCtasPerSm = " << tile.min_ctas << ";\n"
    << "  static constexpr bool kWgmma = " << (tile.wgmma ? "true" : "false") << ";\n"
    << "  static constexpr bool kProducer = " << (tile.producer ? "true" : "false") << ";\n"
    << "  static constexpr bool kDirect = " << (tile.direct ? "true" : "false") << ";\n"
    << "  static constexpr bool kPersistent = " << (tile.persistent ? "true" : "false") << ";\n"
    << "  static constexpr bool kMmaOrderTokens = " << (tile.mma_order_tokens ? "true" : "false") << ";\n"
    << "  static constexpr bool kPreparedCodes = " << (prepared_codes ? "true" : "false") << ";\n"
    << "  static constexpr int kScaleDtype = " << (is_int ? scale_dtype_id(w.scale_dtype) : 0) << ";\n"
    << "  static constexpr bool kZeroPoints = " << (is_int && w.has_zero_point ? "true" : "false") << ";\n"
    << "  static constexpr bool kRowScales = " << (input != GemmInput::values ? "true" : "false") << ";\n"
    << "  static constexpr bool kActE4m3 = " << (input == GemmInput::row_scaled_e4m3 ? "true" : "false") << ";\n"
    << "  static constexpr bool kMxScalesAtMostTwo = "
    << (mx_scales_at_most_two && gemm_folds_mx_scales(w, act_dtype, tile, prepared_codes, input) ? "true" : "false") << ";\n";
  // NOTE: timing only (docs/env.md); read once per process, so gemm_config_key needs no bits for it.
  static const long ws_diag = env_integer("MOEQ_DIAG_WS", 0, 63, 0);
  if (ws_diag != 0 && tile.producer && tile.wgmma) s << "  static constexpr int kDiagWs = " << ws_diag << ";\n";
  static const long e4m3_window = env_integer("MOEQ_DIAG_E4M3_WINDOW", 1, 16, 0);
  if (e4m3_window != 0 && input == GemmInput::row_scaled_e4m3)
    s << "#define MOEQ_E4M3_PROMOTE_TILES " << e4m3_window << "\n";
  // NOTE: named only where true, so that the other kernels' sources stay what they were.
  if (variant == GemmVariant::self_routed) s << "  static constexpr bool kSelfRouted = true;\n";
  if (w.bias_dtype != DType::none) s << "  static constexpr bool kBias = true;\n";
  if (activation.on && !rows_activation)
    s << "  static constexpr moeq_dev::ActivationKind kEpilogueActivation = moeq_dev::ActivationKind::"
      << elementwise_detail::activation_enum(activation.kind) << ";\n"
      << "  static constexpr bool kEpilogueInterleaved = " << (activation.interleaved ? "true" : "false") << ";\n";
  if (input == GemmInput::quantized_rows) s << "  static constexpr bool kQuantizesRows = true;\n";
  if (rows_activation)
    s << "  static constexpr moeq_dev::ActivationKind kRowsActivation = moeq_dev::ActivationKind::"
      << elementwise_detail::activation_enum(activation.kind) << ";\n"
      << "  static constexpr bool kRowsInterleaved = " << (activation.interleaved ? "true" : "false") << ";\n";
  s << "};\n"
    << "#include \"moeq_dev/kernels/moe_gemm.cuh\"\n"
    << "static_assert(moeq_dev::MoeGemmKernel<MoeGemmCfg>::Shape::kSmemBytes == "
    << gemm_smem_bytes(tile, w, input) - gemm_staged_rows_bytes(tile, w, input)
    << ", \"host and device disagree on the dynamic shared memory (gemm_smem_bytes)\");\n"
    << "static_assert(sizeof(moeq_dev::MoeGemmParams) == " << sizeof(DeviceGemmParams)
    << ", \"host and device disagree on the kernel parameters (DeviceGemmParams)\");\n"
    << "static_assert(moeq_dev::kErrorBatchedOverflow == " << kRoutingErrorBatchedOverflow
    << ", \"host and device disagree on the masked-count error bit\");\n";
  return {"moeq_moe_gemm", s.str()};
}

jit::KernelSpec moe_gemm_segments_kernel_spec(const WeightDesc& w, DType act_dtype, const GemmTile& tile,
                                              bool prepared_codes, GemmInput input) {
  jit::KernelSpec spec = moe_gemm_kernel_spec(w, act_dtype, tile, prepared_codes, input);
  spec.entry = "moeq_moe_gemm_segments";
  return spec;
}

std::vector<jit::KernelSpec> moe_gemm_kernel_specs() {
  std::vector<jit::KernelSpec> specs;
  auto add = [&](const WeightDesc& w, DType act, const GemmTile& tile, bool prepared,
                 GemmInput input = GemmInput::values, bool mx_fold = false, GemmVariant variant = GemmVariant::plain,
                 const EpilogueActivation& activation = {}) {
    jit::KernelSpec spec = moe_gemm_kernel_spec(w, act, tile, prepared, input, mx_fold, variant, activation);
    const bool seen = std::any_of(specs.begin(), specs.end(), [&](const jit::KernelSpec& o) { return o.source == spec.source; });
    if (!seen) specs.push_back(std::move(spec));
  };
  for (WeightFormat f : all_values<WeightFormat>()) {
    const bool is_int = f == WeightFormat::int4 || f == WeightFormat::int8;
    for (DType act : {DType::bf16, DType::f16}) {
      WeightDesc w;
      w.format = f;
      if (is_int) w.scale_dtype = act;  // the default INT scale dtype is the activation dtype
      for (const GemmTile& tile : planner_tiles(f))
        for (bool prepared : {false, true})
          for (bool mx_fold : {false, true}) add(w, act, tile, prepared, GemmInput::values, mx_fold);  // same source: once
      // The INT scale storage is compile-time (Cfg::kScaleDtype, kZeroPoints): the other
      // variants the legality admits (f32 scales for INT8 only, zero points for INT4 only) once,
      // on the 8-row tile of many rows.
      if (!is_int) continue;
      const GemmTile tile = gemm_tile_for(f, 8, kFewRoutedRows + 1);
      for (DType scale : {DType::bf16, DType::f16, DType::f32})
        for (bool zero_points : {false, true}) {
          if ((scale == DType::f32 && f != WeightFormat::int8) || (zero_points && f != WeightFormat::int4)) continue;
          WeightDesc v = w;
          v.scale_dtype = scale;
          v.has_zero_point = zero_points;
          add(v, act, tile, true);
        }
    }
  }
  // The permuting twins of the planner's `/t` tiles (what the masked layout's 16-bit GEMM1 and K off a
  // multiple of 64 run): once per tile with MXFP4 codes, the first also with 8-bit codes.
  {
    WeightDesc mx, fp8_block;
    mx.format = WeightFormat::mxfp4;
    fp8_block.format = WeightFormat::fp8_block;
    bool first = true;
    for (const GemmTile& tile : planner_tiles(WeightFormat::mxfp4)) {
      if (!tile.mma_order_tokens) continue;
      add(mx, DType::bf16, permuting_tile(tile, mx), true);
      if (first) add(fp8_block, DType::bf16, permuting_tile(tile, fp8_block), false);
      first = false;
    }
  }
  // The row-scale epilogue (FP8 per-token activations) once per GEMM body: the same code in each.
  std::vector<std::string> bodies;
  for (const GemmTile& tile : planner_tiles(WeightFormat::mxfp4)) {
    const std::string body = std::to_string(tile.direct) + std::to_string(tile.wgmma) + std::to_string(tile.producer);
    if (std::find(bodies.begin(), bodies.end(), body) != bodies.end()) continue;
    bodies.push_back(body);
    WeightDesc w;
    w.format = WeightFormat::mxfp4;
    add(w, DType::bf16, tile, true, GemmInput::row_scaled_values);
  }
  // e4m3 activations (FP8 per-channel weights, direct tiles): each ring depth of the planner's and
  // the tuning candidates' direct tiles once, prepared codes, and the first also with canonical
  // codes (the two fragment paths).
  std::vector<int> depths;
  WeightDesc fp8;
  fp8.format = WeightFormat::fp8_channel;
  std::vector<GemmTile> direct_tiles = planner_tiles(WeightFormat::fp8_channel);
  for (const GemmTile& tile : gemm_tile_candidates()) direct_tiles.push_back(tile);
  for (const GemmTile& tile : direct_tiles) {
    if (!tile.direct || std::find(depths.begin(), depths.end(), tile.stages) != depths.end() ||
        !gemm_tile_reasons(tile, fp8).empty())  // rings past 4 deep hold 4-bit codes only
      continue;
    if (depths.empty()) add(fp8, DType::bf16, tile, false, GemmInput::row_scaled_e4m3);
    depths.push_back(tile.stages);
    add(fp8, DType::bf16, tile, true, GemmInput::row_scaled_e4m3);
  }
  // e4m3 activations on MXFP4 weights (warp-specialized tiles, canonical codes): each tile the
  // planner's wgmma tiles run as (e4m3_tile_of), bf16, and the first also f16.
  WeightDesc mx;
  mx.format = WeightFormat::mxfp4;
  bool first_mx = true;
  for (const GemmTile& planned : planner_tiles(WeightFormat::mxfp4)) {
    const GemmTile tile = e4m3_tile_of(planned);
    if (!gemm_takes_e4m3(mx, tile, 90, false)) continue;
    add(mx, DType::bf16, tile, false, GemmInput::row_scaled_e4m3);
    if (first_mx) add(mx, DType::f16, tile, false, GemmInput::row_scaled_e4m3);
    first_mx = false;
  }
  // The persistent warp-specialized body (a tuning candidate, not a planner tile): 4- and 8-bit
  // codes, canonical and prepared, once each, and MXFP4's prepared codes with scales at most 2.
  WeightDesc fp8_block;
  fp8_block.format = WeightFormat::fp8_block;
  const GemmTile persistent = parse_gemm_tile("80x256/1x8x1/5/p/s");
  for (const WeightDesc& w : {mx, fp8_block})
    for (bool prepared : {false, true}) add(w, DType::bf16, persistent, prepared);
  add(mx, DType::bf16, persistent, true, GemmInput::values, true);
  // The 512-channel body (staged MX scales; the MXFP4 tables run 48x512/1x8x1/4/p): both code layouts with and
  // without the MX scales word, MXFP8 once, and the persistent one once.
  WeightDesc mxfp8;
  mxfp8.format = WeightFormat::mxfp8;
  const GemmTile wide = parse_gemm_tile("48x512/1x8x1/4/p");
  for (bool prepared : {false, true})
    for (bool mx_fold : {false, true}) add(mx, DType::bf16, wide, prepared, GemmInput::values, mx_fold);
  add(mxfp8, DType::bf16, wide, true);
  add(mx, DType::bf16, parse_gemm_tile("48x512/1x8x1/4/p/s"), true, GemmInput::values, true);
  // The self-routed GEMM1 (gemm_self_routes): each format's first 8-row direct planner tile, prepared codes, bf16.
  for (WeightFormat f : all_values<WeightFormat>()) {
    WeightDesc w;
    w.format = f;
    if (f == WeightFormat::int4 || f == WeightFormat::int8) w.scale_dtype = DType::bf16;
    for (const GemmTile& tile : planner_tiles(f))
      if (gemm_self_routes(tile, GemmInput::values)) {
        add(w, DType::bf16, tile, true, GemmInput::values, false, GemmVariant::self_routed);
        break;
      }
    // GEMM1 with the activation in its epilogue (gemm_fuses_activation): self-routed SiLU on each format's first such
    // tile; every kind (and the interleaved gated rows) plain on MXFP4's, bf16 and f16.
    for (const GemmTile& tile : planner_tiles(f))
      if (tile.direct && gemm_fuses_activation(tile, GemmInput::values, EpilogueActivation{true, Activation::silu, false})) {
        add(w, DType::bf16, tile, true, GemmInput::values, false, GemmVariant::self_routed,
            EpilogueActivation{true, Activation::silu, false});
        if (f == WeightFormat::mxfp4)
          for (Activation kind : all_values<Activation>())
            for (bool interleaved : {false, true})
              if (!interleaved || is_gated(kind))
                add(w, interleaved ? DType::f16 : DType::bf16, tile, true, GemmInput::values, false,
                    GemmVariant::plain, EpilogueActivation{true, kind, interleaved});
        break;
      }
    // GEMM2 making its FP8 per-token input from GEMM1's rows (gemm_quantizes_rows): SiLU on each format's first direct
    // tile, prepared codes, bf16; every kind (and the interleaved gated rows, f16) on MXFP4's. The self-routed GEMM1
    // quantizing the caller's rows on the first 8-row one, bf16 and f16 (MXFP4).
    for (const GemmTile& tile : planner_tiles(f))
      if (gemm_self_routes(tile, GemmInput::quantized_rows) && gemm_quantizes_rows(tile, w)) {
        add(w, DType::bf16, tile, true, GemmInput::quantized_rows, false, GemmVariant::self_routed);
        if (f == WeightFormat::mxfp4) add(w, DType::f16, tile, false, GemmInput::quantized_rows, false, GemmVariant::self_routed);
        break;
      }
    for (const GemmTile& tile : planner_tiles(f))
      if (gemm_quantizes_rows(tile, w)) {
        add(w, DType::bf16, tile, true, GemmInput::quantized_rows, false, GemmVariant::plain,
            EpilogueActivation{true, Activation::silu, false});
        if (f == WeightFormat::mxfp4)
          for (Activation kind : all_values<Activation>())
            for (bool interleaved : {false, true})
              if (!interleaved || is_gated(kind))
                add(w, interleaved ? DType::f16 : DType::bf16, tile, true, GemmInput::quantized_rows, false,
                    GemmVariant::plain, EpilogueActivation{true, kind, interleaved});
        break;
      }
    // A bias (Cfg::kBias: the epilogue loads the bias first) on each format's first and last planner tile (a direct and a
    // warp-specialized body where the format has them), bf16, prepared codes.
    WeightDesc biased = w;
    biased.bias_dtype = DType::f32;
    const std::vector<GemmTile> tiles = planner_tiles(f);
    if (!tiles.empty()) {
      add(biased, DType::bf16, tiles.front(), true);
      add(biased, DType::bf16, tiles.back(), true);
    }
  }
  // The activation epilogue on warp-specialized tiles (gemm_fuses_activation): MXFP4's gpt-oss-120b rows (interleaved
  // SwiGLU-OAI with a bias) on a two-CTA `/t`, a 512-channel `/t` and a persistent tile; a non-gated kind in f16;
  // [gate | up] SiLU rows (the copy warps load them paired) on canonical and prepared codes, the 512-channel staged
  // scales, and the 8-bit prepared codes' bulk copies (MXFP8).
  WeightDesc fused = mx;
  fused.bias_dtype = DType::bf16;
  for (const char* text : {"24x256/1x8x1/4/o2/p/t", "48x512/1x8x1/6/p/t", "80x256/1x8x1/6/p/s/t"})
    add(fused, DType::bf16, parse_gemm_tile(text), true, GemmInput::values, true, GemmVariant::plain,
        EpilogueActivation{true, Activation::swiglu_oai, true});
  add(mx, DType::f16, parse_gemm_tile("128x256/1x8x1/4/p"), false, GemmInput::values, false, GemmVariant::plain,
      EpilogueActivation{true, Activation::relu2_no_mul, false});
  const EpilogueActivation halves{true, Activation::silu, false};
  for (bool prepared : {false, true}) {
    add(mx, DType::bf16, parse_gemm_tile("64x256/1x8x1/8/p/t"), prepared, GemmInput::values, false, GemmVariant::plain,
        halves);
    add(mx, DType::bf16, parse_gemm_tile("48x512/1x8x1/6/p/t"), prepared, GemmInput::values, false, GemmVariant::plain,
        halves);
  }
  WeightDesc mxfp8_halves;
  mxfp8_halves.format = WeightFormat::mxfp8;
  add(mxfp8_halves, DType::bf16, parse_gemm_tile("64x256/1x8x1/4/p/t"), true, GemmInput::values, false,
      GemmVariant::plain, halves);
  WeightDesc int4_halves;
  int4_halves.format = WeightFormat::int4;
  int4_halves.scale_dtype = DType::bf16;
  add(int4_halves, DType::bf16, parse_gemm_tile("80x256/1x8x1/6/p/s/t"), true, GemmInput::values, false,
      GemmVariant::plain, halves);
  return specs;
}

uint64_t gemm_config_key(const WeightDesc& w, DType act_dtype, const GemmTile& tile, bool prepared_codes, bool segments,
                         GemmInput input, bool mx_scales_at_most_two) {
  // NOTE: mirrors moe_gemm_kernel_spec: only INT formats have a scale dtype and zero points.
  const bool is_int = w.format == WeightFormat::int4 || w.format == WeightFormat::int8;
  uint64_t key = 0;
  int shift = 0;
  const auto put = [&](uint64_t value, int bits) {
    key |= (value & ((uint64_t{1} << bits) - 1)) << shift;
    shift += bits;
  };
  put(static_cast<uint64_t>(w.format), 4);
  put(act_dtype == DType::bf16, 1);
  put(static_cast<uint64_t>(tile.block_m), 8);  // <= 144
  put(static_cast<uint64_t>(tile.block_n), 10);  // <= 512
  put(static_cast<uint64_t>(tile.warps_m), 5);   // threads <= 512: <= 16 warps
  put(static_cast<uint64_t>(tile.warps_n), 5);
  put(static_cast<uint64_t>(tile.warps_k), 5);
  put(static_cast<uint64_t>(tile.stages), 5);    // <= 16
  put(static_cast<uint64_t>(tile.split_k), 3);   // <= 4
  put(static_cast<uint64_t>(tile.min_ctas), 5);  // <= 16
  put(tile.wgmma, 1);
  put(tile.producer, 1);
  put(tile.direct, 1);
  put(tile.persistent, 1);
  put(tile.mma_order_tokens, 1);
  put(prepared_codes, 1);
  put(is_int ? static_cast<uint64_t>(scale_dtype_id(w.scale_dtype)) : 0, 2);
  put(is_int && w.has_zero_point, 1);
  put(segments, 1);
  put(static_cast<uint64_t>(input), 2);
  put(mx_scales_at_most_two && gemm_folds_mx_scales(w, act_dtype, tile, prepared_codes, input), 1);
  return key;
}

}  // namespace moeq::cuda
