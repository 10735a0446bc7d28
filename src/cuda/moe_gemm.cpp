// Host side of the MoE GEMM: codegen of each config, a per-process table of loaded functions,
// argument checks and the launch.
#include "cuda/moe_gemm.hpp"

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <mutex>
#include <sstream>
#include <unordered_map>

#include "cuda/launch.hpp"
#include "cuda/routing.hpp"
#include "moeq/error.hpp"
#include "plan/legality.hpp"

namespace moeq::cuda {
namespace {

// Mirror of moeq_dev::MoeGemmParams (kernels/moe_gemm.cuh): same members, same order.
struct DeviceScaling {
  const void* scales;
  const float* global_scales;
  const unsigned char* zero_points;
  int group_size;
  int scale_dtype;
  int num_global_scales;
};
struct DeviceGemmParams {
  const void* a;
  long long a_row_stride;
  const unsigned char* codes;
  DeviceScaling scaling;
  const void* bias;
  int bias_dtype;
  int gather;
  void* c;
  long long c_row_stride;
  int n;
  int k;
  const int* sorted_ids;
  const int* expert_ids;
  const int* num_tokens_padded;
  int num_slots;
  int src_row_divisor;
  const int* block_table;
  const int* num_blocks;
  const float* a_row_scales;
  const int* a_scale_rows;
  int a_scale_row_divisor;
  int max_m_blocks;
};

template <typename T>
T* as_ptr(CUdeviceptr p) {
  return reinterpret_cast<T*>(static_cast<uintptr_t>(p));
}

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

int scale_dtype_id(DType t) { return t == DType::bf16 ? 0 : t == DType::f16 ? 1 : 2; }
int bias_dtype_id(DType t) { return t == DType::none ? 0 : t == DType::f32 ? 1 : t == DType::bf16 ? 2 : 3; }

constexpr int kFuncAttributeMaxDynamicSharedBytes = 8;  // CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES

// The loaded function of a GEMM or segment-builder config (the tile as the device runs it),
// found by gemm_config_key: the source text is generated, the tile's shared memory checked
// against the device and the GEMM's dynamic shared-memory limit raised (the attribute is per
// function) only at a config's first use in the process.
CUfunction gemm_function(const WeightDesc& w, DType act_dtype, const GemmTile& tile, bool prepared, bool segments,
                         GemmInput input = GemmInput::values, bool mx_scales_at_most_two = false);

// NOTE: the device is selected once per process, so its attributes are queried once.
const DeviceInfo& this_device() {
  static const DeviceInfo device = current_device_info();
  return device;
}

bool device_has_wgmma() { return this_device().cc_major == 9 && this_device().cc_minor == 0; }

void require_aligned(CUdeviceptr p, int64_t bytes, const char* name) {
  if (p % static_cast<CUdeviceptr>(bytes) != 0)
    throw Error(std::string("moe_gemm: ") + name + " is not aligned to " + std::to_string(bytes) + " bytes");
}

}  // namespace

std::string GemmTile::to_string() const {
  std::ostringstream s;
  s << block_m << "x" << block_n << "/" << warps_m << "x" << warps_n << "x" << warps_k << "/" << stages;
  if (split_k != 1) s << "/k" << split_k;
  if (min_ctas != 0) s << "/o" << min_ctas;
  if (producer) {
    s << "/p";
    if (persistent) s << "/s";
    if (mma_order_tokens) s << "/t";
  } else if (direct) {
    s << "/r";
  } else if (wgmma) {
    s << "/w";
  }
  return s.str();
}

bool gemm_few_ctas(int64_t num_slots, int64_t n, int num_sms) {
  return num_slots <= kFewRoutedRows && 2 * num_slots * ((n + 63) / 64) < 5 * int64_t{num_sms};
}

double expected_row_blocks(int64_t num_slots, int64_t top_k, int64_t num_experts) {
  const double experts = static_cast<double>(std::max<int64_t>(num_experts, 1));
  const double k = static_cast<double>(std::clamp<int64_t>(top_k, 1, std::max<int64_t>(num_experts, 1)));
  const double tokens = static_cast<double>(num_slots) / k;
  const double distinct = experts * (1.0 - std::pow(1.0 - k / experts, tokens));
  return std::max(distinct, static_cast<double>(num_slots) / 8.0);
}

int64_t gemm_waves(double ctas, int ctas_per_sm, int num_sms) {
  return static_cast<int64_t>(std::ceil(ctas / (static_cast<double>(ctas_per_sm) * num_sms)));
}

bool gemm_alt_fewer_waves(WeightFormat format, DType act_dtype, int64_t num_slots, int64_t top_k,
                          int64_t num_experts, int64_t n, int num_sms) {
  const double blocks = expected_row_blocks(num_slots, top_k, num_experts);
  const double blocks_n128 = static_cast<double>((n + 127) / 128), blocks_n256 = static_cast<double>((n + 255) / 256);
  if (format == WeightFormat::int4) {
    const int64_t alternative = gemm_waves(blocks * blocks_n128, 5, num_sms);  // 8x128/1x4x1/2/r
    return alternative == 1 && gemm_waves(blocks * blocks_n128, 4, num_sms) > 1;
  }
  if (format == WeightFormat::mxfp4 && act_dtype == DType::bf16) {
    const int64_t primary = gemm_waves(blocks * blocks_n128, 5, num_sms);      // 8x128/1x4x1/2/r
    const int64_t alternative = gemm_waves(blocks * blocks_n256, 3, num_sms);  // 8x256/1x4x1/2/r
    return alternative < primary && primary <= kMxfp4AltMaxWaves;
  }
  return false;
}

bool gemm_mx_pass_scales(WeightFormat format, DType act_dtype, int64_t k) {
  return format == WeightFormat::mxfp4 && act_dtype == DType::bf16 && k % 128 == 0;
}

GemmTile gemm_tile_for_channels(WeightFormat format, DType act_dtype, int block_m, int64_t num_slots, int64_t top_k,
                                int64_t n, int64_t k, int64_t num_experts) {
  static const int num_sms = current_device_info().num_sms;  // one device per process (ensure_context)
  return gemm_tile_for(format, block_m, num_slots, gemm_few_ctas(num_slots, n, num_sms),
                       gemm_alt_fewer_waves(format, act_dtype, num_slots, top_k, num_experts, n, num_sms),
                       gemm_mx_pass_scales(format, act_dtype, k));
}

GemmTile gemm_tile_for(WeightFormat format, int block_m, int64_t num_slots, bool few_ctas, bool alt_fewer_waves,
                       bool mx_pass_scales) {
  // PERF: the fastest candidate per regime on the H200, Qwen3-30B-A3B GEMM1 (GEMM v4 sweeps,
  // bench/results/2026-11-30-h200-gemm-v4.md, docs/perf-notes.md):
  // - few routed rows (<= kFewRoutedRows, e.g. M = 1-4 at top_k 8) in 8-row blocks: few CTAs,
  //   so each warp's serial chain of K tiles and the latency of each ring step bound the time;
  //   4 K groups of one warp of 32 channels with a 16-stage ring (4 ring steps, 3 prefetched;
  //   8 stages prefetch 1) do best (v4 sweeps: Qwen3 M = 4 INT4 27.8 us, 29.9 with 2 warps of
  //   16 channels and 16 stages, 32.8 with 8 stages; DeepSeek-V3 M = 1 INT4 69.1 against 80.3).
  //   Not at 64 rows: gpt-oss-120b M = 16 (64 rows, 180 channel blocks) ran at 41% of copy with
  //   a 4-K-group tile, 56% with the standard one. (16-row blocks get few rows only when
  //   Options::block_m forces them: 2 or 4 K groups, from the v3 sweeps.)
  // - 8- and 16-token blocks otherwise: 4-bit codes are instruction-bound and do best with
  //   4 warps of 32 channels (the token fragments and per-tile overhead serve 2 channel tiles;
  //   v4 sweep, M = 16: INT4 51.6 us, MXFP4 60.8); 8-bit codes with 16-token blocks of 4 warps
  //   of 16 channels (FP8-block 85.2 us at M = 16, 119.7 at M = 64). 8-token blocks
  //   (choose_block_m: 4-bit codes up to ~7 rows per expert, M <= 64 on Qwen3) halve the MMAs
  //   and token loads of 16-token ones, which are mostly padding there.
  //   8-bit codes keep the /o1 register budget (__launch_bounds__ minimum 1: 84 registers
  //   against 70 without): FP8-block M = 16 79.2 us against 85.3 (GEMM v6, same run).
  // - GEMM v8: the same 8-token 4-bit tile and the 16-token 8-bit one with a copy warp (/p: the
  //   compute warps issue no copies and pass no CTA barrier; prepared codes by bulk copies):
  //   Qwen3 GEMM1, same run: INT4 M = 16 53.3 -> 50.9 us, M = 64 77.4 -> 73.5; MXFP4 59.7 ->
  //   58.9 and 84.5 -> 84.1; FP8-block (6 stages) 79.1 -> 77.8 and 117.8 -> 107.0 (86% of copy).
  //   8-bit codes in 8-row blocks run 8 copy-fed warps of 16 channels (session 9, call A of
  //   bench/results/2026-12-01-h200-gemm-v9.md): DeepSeek-V3 FP8-block M = 16 GEMM1 798 us (93% of
  //   copy) against 927 without the copy warp and 859 with 16x64/1x4x1/6/p, GEMM2 397 against 453.
  //   Not for 16-token 4-bit blocks (16x128/1x4x1/4/p 67 us against 55 at M = 16) nor 32-token
  //   ones (32x128/1x8x1/4/p 147 us against 119 at M = 256): the copy warp's registers and the
  //   deeper rings cost more CTAs per SM than they save (runs 5-6 of
  //   bench/results/2026-11-30-h200-gemm-v8.md).
  // - 32-token blocks (M = 256): 8 warps of 16 channels (INT4 122 us, FP8-block 144). 4-bit codes
  //   with registers capped at 80 (/o3: 3 CTAs of 256 threads per SM): the INT4 body needs 81
  //   since GEMM v8's scale loads, and at 88 allocated only 2 CTAs fit (INT4 130 -> 119 us,
  //   MXFP4 127 -> 125, FP8-block 140 either way; run 2 of bench/results/2026-11-30-h200-gemm-v8.md).
  // - 64- and 128-token blocks: the warp-specialized wgmma tiles (GEMM v7, sm_90a; elsewhere
  //   tile_for_device runs 64x128/1x4x1/4 on mma.sync, which v5 measured at 761 us for INT4 at
  //   M = 4096). H200, Qwen3 GEMM1 INT4, same run: M = 1024 64x256/p 219 us against 252 for
  //   v6's 64x128/1x4x1/4/o3 (128x256/p 226); M = 4096 128x256/p 488 against 769 (64x256/p
  //   590); MXFP4 and FP8-block alike (M = 4096: 531 and 596 against 808 and 924), GEMM2 and
  //   gpt-oss-120b too (bench/results/2026-11-30-h200-gemm-v7.md).
  //   Session 10's split copy ring (stages of staging tokens and codes, 3 permuted token tiles
  //   apart) lets 64-row blocks take 8 stages: Qwen3 M = 1024 GEMM1 INT4 226 -> 199 us, MXFP4
  //   231 -> 218, FP8-block 264 either way, GEMM2 3-9% faster; 128-row blocks keep 4 stages (5:
  //   INT4 equal, MXFP4 2% and FP8-block 9% slower; call D of bench/results/2026-12-01-h200-gemm-v11.md).
  // - Split K over clusters (/k2, /k4) lost in every regime timed (GEMM v5): the planner does
  //   not use it.
  // - GEMM v13: 8-row blocks, every format, run the direct-load tiles (/r: codes straight into
  //   registers, no ring in shared memory, no barrier in the K loop; bench/results/2026-12-01-h200-gemm-v13.md,
  //   call C). Qwen3 GEMM1 M = 16 / 64 with 8x128/1x4x1/2/r against the copy-warp tiles: INT4
  //   51.3 -> 49.6 / 73.8 -> 70.3 us, MXFP4 54.9 -> 48.6 / 77.9 -> 70.3, FP8-block 75.3 -> 66.3 /
  //   109.0 -> 95.9 (93% / 97% of copy); GEMM2 3-10% faster. Few rows: 8x64/1x2x2/4/r (2 K groups)
  //   against 8x32/1x1x4/16: DeepSeek-V3 M = 1 GEMM1 INT4 64.0 -> 51.6, MXFP4 68.1 -> 43.6, FP8-block
  //   88.5 -> 79.2; Qwen3 M = 2 21.1 -> 17.2, 21.0 -> 14.4, 26.3 -> 17.9.
  // - GEMM v14: the few-rows tile takes a ring of 2 (8x64/1x2x2/2/r: 95 registers for prepared INT4
  //   against 127 with 4; bench/results/2026-12-01-h200-gemm-v14.md, calls B-C): Qwen3 M = 1
  //   GEMM1 INT4 15.1 -> 12.9 us, M = 2 17.1 -> 14.7, MXFP4 and FP8-block within 3% (12.5 -> 12.9
  //   at M = 1 the worst), GEMM2 FP8-block M = 2 14.8 -> 10.7; DeepSeek-V3 M = 1 GEMM1 FP8-block
  //   79.4 -> 59.6, INT4 51.6 -> 43.9, MXFP4 43.4 either way.
  // - GEMM v15: where those few rows make few CTAs (gemm_few_ctas), 32 channels in 4 K groups.
  // - GEMM v16: INT4 takes the 4-deep ring, issued two tiles at a time (kernels/moe_gemm_direct.cuh),
  //   capped at 127 registers (4 CTAs per SM; 140 uncapped), except where the 2-deep tile's grid
  //   is one wave (narrowed in GEMM v19, below). Call D of bench/results/2026-12-01-h200-gemm-v16.md,
  //   against /2/r in the same call: Qwen3-30B-A3B GEMM1 M = 16 49.7 -> 45.6 us, M = 64 70.5 -> 65.6, GEMM2
  //   4-12% less at M = 8-64; gpt-oss-120b 3-5% less, DeepSeek-V3 M = 16 GEMM1 473 -> 449; Qwen3
  //   M = 1 GEMM1 (8x32/1x1x4/4/o4/r) 9.85 -> 9.16, GEMM2 7.23 -> 7.35. MXFP4 gains nothing (GEMM2
  //   at M = 8-16 a little); FP8-block under the cap spills and loses 15-25% (uncapped: 164
  //   registers, timed only at Qwen3 M = 8, 54.8 -> 45.6 us).
  // - GEMM v19: INT4's 2-deep tile where it runs one wave and the 4-deep one more; MXFP4's 64-channel
  //   tile (8x256/1x4x1/2/r, bf16 activations) where it runs fewer waves than 8x128/1x4x1/2/r, up to
  //   kMxfp4AltMaxWaves of the latter (gemm_alt_fewer_waves).
  // - GEMM v20: MXFP4 (bf16 activations) takes the 4-deep ring where K is whole passes of 2 K tiles
  //   (gemm_mx_pass_scales), ahead of v19's rule; under /o4 since GEMM v21.
  // - Session 25 (bench/results/2026-12-02-h200-block24.md, call 1): 24-row blocks (plan::choose_block_m,
  //   4-bit codes near 16 rows per expert) run the direct tile 24x128/1x4x1/4/r (223 registers, 2 CTAs
  //   per SM, no spills), the fastest of ten 16- to 32-row tiles at Qwen3 M = 256 for MXFP4 and INT4
  //   (2-deep 24-row tiles: 99.1 / 62.0 us MXFP4 against 92.7 / 59.6). 16-row MXFP4 / NVFP4 blocks
  //   run the direct 16x128/1x4x1/2/r: gpt-oss-120b M = 256 GEMM1 415.6 us against 494.3 for
  //   16x128/1x4x1/4, GEMM2 216.9 against 260.8; INT4 keeps 16x128/1x4x1/4 (Qwen3 M = 256: 111.7 /
  //   66.6 against the direct tile's 126.7 / 77.5).
  // - Session 26 (bench/results/2026-12-03-h200-block144.md, call 1): 144-row blocks (plan::choose_block_m,
  //   near 128 or 256 rows per expert) run 144x256/1x8x1/4/p. gpt-oss-120b M = 4096 GEMM1 / GEMM2 1322 / 756 us
  //   against 1603 / 867 for 128x256/1x8x1/4/p; Qwen3-30B-A3B M = 2048 MXFP4 237 / 155 against 298 / 186,
  //   M = 4096 475 / 294 against 488 / 303 (INT4 448 / 289 against 474 / 305). 144x128 tiles: 40-50% slower.
  //   80- and 96-row blocks (near 64 rows per expert) run 80x256/1x8x1/6/p and 96x256/1x8x1/6/p (call 5):
  //   gpt-oss-120b M = 2048 893 / 499 us against 1159 / 618 (64x256/1x8x1/8/p), Qwen3 M = 1024 167 / 110
  //   against 219 / 132; the 4-stage rings within 1-4%, 96 rows 5-7% behind 80 there.
  // - Session 39 (bench/results/2026-12-04-h200-mma-order.md, call 1): the warp-specialized tiles read their
  //   tokens in the MMA's K order (`/t`: wgmma on the copy ring's staging, no permute warps); every tile timed
  //   against its permuting twin of the same ring: Qwen3-30B-A3B M = 4096 GEMM1 / GEMM2 144x256/1x8x1/4/p INT4
  //   443-457 -> 402-404 / 286-292 -> 258-264 us, MXFP4 443-458 -> 385-392 / 287-295 -> 252-260; gpt-oss-120b
  //   M = 1024 48x512/1x8x1/4/p 636-640 -> 610-614 / 322-324 -> 307-312, M = 2048 80x256/1x8x1/6/p/s 812-829 ->
  //   719-746 / 433-439 -> 391-399. Where the input cannot come in that order gemm_plan runs the twin.
  const bool four_bit = dtype_bits(weight_format_code_dtype(format)) == 4;
  const bool int4 = format == WeightFormat::int4;
  const char* text;
  if (block_m <= 8) {
    if (num_slots > kFewRoutedRows) {
      if (int4) {
        text = alt_fewer_waves ? "8x128/1x4x1/2/r" : "8x128/1x4x1/4/o4/r";
      } else if (format == WeightFormat::mxfp4 && mx_pass_scales) {
        text = "8x128/1x4x1/4/o4/r";
      } else {
        text = format == WeightFormat::mxfp4 && alt_fewer_waves ? "8x256/1x4x1/2/r" : "8x128/1x4x1/2/r";
      }
    } else if (few_ctas) {
      text = int4 ? "8x32/1x1x4/4/o4/r" : "8x32/1x1x4/2/r";
    } else {
      text = "8x64/1x2x2/2/r";
    }
  } else if (block_m <= 16) {
    if (num_slots <= kFewRoutedRows) {
      text = int4 ? "16x64/1x4x2/8" : "16x64/1x4x4/8";
    } else if (four_bit) {
      text = int4 ? "16x128/1x4x1/4" : "16x128/1x4x1/2/r";
    } else {
      text = "16x64/1x4x1/6/p";
    }
  } else if (block_m <= 24) {
    text = four_bit ? "24x128/1x4x1/4/r" : "24x128/1x4x1/2/r";
  } else if (block_m <= 32) {
    text = four_bit ? "32x128/1x8x1/4/o3" : "32x128/1x8x1/4";
  } else if (block_m <= 48) {
    text = "48x256/1x8x1/8/p/t";
  } else if (block_m <= 64) {
    text = "64x256/1x8x1/8/p/t";
  } else if (block_m <= 80) {
    text = "80x256/1x8x1/6/p/t";
  } else if (block_m <= 96) {
    text = "96x256/1x8x1/6/p/t";
  } else if (block_m <= 128) {
    text = "128x256/1x8x1/4/p/t";
  } else {
    text = "144x256/1x8x1/4/p/t";
  }
  return parse_gemm_tile(text);
}

GemmTile parse_gemm_tile(const std::string& text) {
  GemmTile t;
  char x1 = 0, slash1 = 0, x2 = 0, x3 = 0, slash2 = 0, rest = 0;
  std::istringstream in(text);
  in >> t.block_m >> x1 >> t.block_n >> slash1 >> t.warps_m >> x2 >> t.warps_n >> x3 >> t.warps_k >> slash2 >> t.stages;
  bool ok = in && x1 == 'x' && slash1 == '/' && x2 == 'x' && x3 == 'x' && slash2 == '/';
  // Optional suffixes, each once and in this order: /kN (split_k), /oN (min_ctas), /w (wgmma),
  // /p (warp-specialized) or /r (direct loads into registers); /s (persistent) after /p only, /t (tokens
  // in the MMA's K order) after /p or /p/s.
  char last = 0;
  for (char slash = 0, key = 0; ok && (in >> slash);) {
    ok = slash == '/' && (in >> key) && last != 'w' && last != 'r' && last != 't' &&
         (last != 'p' || key == 's' || key == 't') && (last != 's' || key == 't');
    if (!ok) break;
    if (key == 's') {
      ok = last == 'p';
      t.persistent = true;
    } else if (key == 't') {
      ok = last == 'p' || last == 's';
      t.mma_order_tokens = true;
    } else if (key == 'r') {
      t.direct = true;
    } else if (key == 'w' || key == 'p') {
      // /p: warp-specialized; wgmma consumers from 48 tokens, mma.sync ones below.
      t.producer = key == 'p';
      t.wgmma = key == 'w' || t.block_m >= 48;
    } else {
      int value = 0;
      ok = (in >> value) && ((key == 'k' && last == 0) || (key == 'o' && last != 'o'));
      if (ok) (key == 'k' ? t.split_k : t.min_ctas) = value;
    }
    last = key;
  }
  if (!ok || (in >> rest))
    throw Error("GEMM tile '" + text +
                "' is not BMxBN/WMxWNxWK/S[/kN][/oN][/w, /p[/s][/t] or /r] (e.g. 16x128/1x4x2/4, 64x128/1x4x1/4/w or "
                "128x256/1x8x1/4/p)");
  return t;
}

std::vector<GemmTile> gemm_tile_candidates() {
  std::vector<GemmTile> tiles;
  for (const char* text : {"8x32/1x1x4/16", "8x32/1x2x4/16", "8x32/1x2x2/16", "16x128/1x4x1/4", "8x64/1x4x1/4", "8x64/1x4x2/8", "8x64/1x4x4/8", "8x128/1x4x1/4", "8x128/1x8x1/4", "16x32/1x2x4/8", "16x64/1x4x1/4", "16x64/1x4x1/8", "16x64/1x4x2/8", "16x64/1x4x4/8",
                           "16x128/1x8x1/4", "16x128/1x8x2/8", "32x64/1x4x1/6", "32x128/1x8x1/4", "32x128/1x4x2/8",
                           "64x64/1x4x1/4", "64x128/1x4x1/4", "64x128/1x8x1/4", "64x128/1x8x2/4", "64x256/2x4x1/3",
                           // K split over clusters of 2 or 4 CTAs, and deeper rings for the 8-row tile
                           "8x128/1x4x1/8", "8x128/1x4x1/4/k2", "8x128/1x4x1/4/k4", "8x128/1x8x1/4/k2",
                           "8x32/1x1x4/16/k2", "8x32/1x1x4/16/k4", "8x32/1x1x1/8/k4", "16x64/1x4x1/4/k2",
                           "16x64/1x4x1/8/k2", "64x128/1x4x1/4/k2",
                           // registers capped for more CTAs per SM (the v5 ncu profiles: register-bound occupancy)
                           "8x128/1x4x1/4/o6", "8x128/1x4x1/4/o8", "16x64/1x4x1/4/o8", "16x64/1x4x1/4/o1", "64x128/1x4x1/4/o3",
                           "32x128/1x8x1/4/o2", "32x128/1x8x1/4/o3",
                           // Hopper warpgroup MMA (GEMM v5)
                           "64x64/1x4x1/4/w", "64x128/1x4x1/4/w", "64x128/1x4x1/6/w", "64x256/1x4x1/4/w",
                           "64x128/1x4x1/4/o2/w",
                           // warp-specialized wgmma (GEMM v7) and the 128-token mma.sync tile it falls back to
                           "128x256/1x8x1/4/p", "128x256/1x8x1/3/p", "128x128/1x8x1/4/p", "64x256/1x8x1/4/p", "64x256/1x8x1/6/p",
                           "128x256/1x8x1/5/p", "64x256/1x8x1/8/p",
                           "128x128/2x4x1/4",
                           // warp-specialized mma.sync: a copy warp (GEMM v8)
                           "8x128/1x4x1/4/p", "8x128/1x4x1/6/p", "8x256/1x8x1/6/p", "16x64/1x4x1/4/p", "16x64/1x4x1/6/p",
                           "16x64/1x4x1/8/p", "16x128/1x8x1/6/p", "32x128/1x8x1/4/p", "8x128/1x8x1/4/p",
                           // direct loads into registers (GEMM v13)
                           "8x128/1x4x1/2/r", "8x128/1x4x1/4/r", "8x64/1x2x2/4/r", "8x64/1x2x2/2/r", "8x256/1x8x1/4/r", "8x64/1x4x1/2/r", "8x32/1x1x4/2/r", "8x128/1x4x1/4/o4/r", "8x32/1x1x4/4/o4/r",
                           "16x128/1x4x1/2/r",
                           // 24 and 32 token rows (session 25: M = 256 on Qwen3, ~16 rows per expert)
                           "24x128/1x4x1/4/r", "24x128/1x4x1/2/r", "24x64/1x4x1/2/r", "24x128/1x8x1/2/r", "32x64/1x4x1/2/r",
                           "32x128/1x4x1/2/r",
                           "16x64/1x4x1/2/r",
                           // 144 token rows (session 26: ~128 or ~256 rows per expert, M = 4096 on gpt-oss-120b
                           // and Qwen3), and the mma.sync tile they run as without wgmma (mma_sync_tile_of)
                           "144x256/1x8x1/4/p", "144x256/1x8x1/3/p", "144x128/1x8x1/4/p",
                           "144x128/2x4x1/4",
                           // 80 and 96 token rows (session 26: ~64 rows per expert, gpt-oss-120b M = 2048, Qwen3 M = 1024)
                           "80x256/1x8x1/6/p", "80x256/1x8x1/4/p", "96x256/1x8x1/6/p", "96x256/1x8x1/4/p",
                           "80x128/2x4x1/4", "96x128/2x4x1/4",
                           // persistent warp-specialized tiles (session 28), rings that fit 8-bit codes too
                           "80x256/1x8x1/5/p/s", "128x256/1x8x1/3/p/s", "64x256/1x8x1/6/p/s", "96x256/1x8x1/4/p/s",
                           // 48 token rows (session 30: ~32 rows per expert, gpt-oss-120b M = 1024, Qwen3 M = 512),
                           // and the mma.sync tile they run as without wgmma (mma_sync_tile_of)
                           "48x256/1x8x1/8/p", "48x256/1x8x1/6/p", "48x256/1x8x1/6/p/s", "48x128/1x4x1/4",
                           // 512 channels, MX weights only (session 37: even with the 256-channel tiles at best; the
                           // 6-stage and 64-row ones spill and lose 13-32%)
                           "48x512/1x8x1/4/p/s", "48x512/1x8x1/4/p",
                           // tokens in the MMA's K order (session 39), and the deeper rings the permuted token tiles
                           // left no room for (those that fit 8-bit codes)
                           "48x256/1x8x1/8/p/t", "48x256/1x8x1/6/p/s/t", "64x256/1x8x1/8/p/t", "80x256/1x8x1/6/p/t",
                           "80x256/1x8x1/8/p/t", "80x256/1x8x1/6/p/s/t", "96x256/1x8x1/6/p/t", "128x256/1x8x1/4/p/t",
                           "128x256/1x8x1/6/p/t", "144x256/1x8x1/4/p/t", "144x256/1x8x1/6/p/t", "144x256/1x8x1/3/p/s/t",
                           "48x512/1x8x1/4/p/t", "48x512/1x8x1/6/p/t",
                           // 64 channels per warp, MXFP4's alternative many-rows tile (GEMM v19)
                           "8x256/1x4x1/2/r"})
    tiles.push_back(parse_gemm_tile(text));
  return tiles;
}

int64_t gemm_static_smem_bytes(const GemmTile& tile) {
  // Row maps and the block's expert; producer tiles add the copy warps' row pointers and the
  // mbarriers (wgmma: a landed and a staged one per stage, a permuted and a retired one per
  // permuted token buffer; mma.sync: a full and an empty one per stage). NOTE: with ptxas's
  // padding (ptxas -v, sm_90a, session 10): 80, 272 and 528 bytes for 8-, 32- and 64-row tiles;
  // 1280 for 64x256/8/p, 2176 for 128x256/4/p and 2304 for 128x256/5/p, which the producer term
  // bounds with its 128 bytes of slack (2312 for the last). Since then the warp-specialized tiles
  // hold the block's row scales (4 bytes a row, FP8 per-token activations) and the e4m3 body's
  // wide-tile bits (32 bytes): ptxas 2688 for a row-scaled 128x256/4/p, 2816 for e4m3 128x128/4/p
  // and 1536 for e4m3 64x128/8/p, bounded here by 2832, 2832 and 1648 (session 24 review).
  // Persistent tiles hold two buffers of row maps and experts, and two mbarriers per buffer.
  // Direct tiles hold the block's row scales too (session 31; counted for every config: 4 bytes a row).
  const int64_t rows = 2 * int64_t{tile.block_m} * 4 + 16;
  if (tile.direct) return rows + 4 * int64_t{tile.block_m};
  if (tile.producer && !tile.wgmma) return rows + 16 * int64_t{tile.stages} + 16;  // a full and an empty mbarrier per stage
  const int64_t persistent = tile.persistent ? rows + 32 : 0;
  return rows + persistent + (tile.producer ? 12 * int64_t{tile.block_m} + 24 * int64_t{tile.stages} + 160 : 0);
}

int64_t gemm_smem_bytes(const GemmTile& tile, const WeightDesc& w, GemmInput input) {
  const int code_bits = dtype_bits(weight_format_code_dtype(w.format));
  const int64_t acc_per_thread = int64_t{tile.block_m / tile.warps_m / 8} * (tile.block_n / tile.warps_n / 16) * 4;
  const int64_t reduce = int64_t{tile.threads() - tile.threads() / tile.warps_k} * acc_per_thread * 4;
  const int64_t out_tile = int64_t{tile.block_m} * (tile.block_n * 2 + 16);
  if (tile.direct) return reduce + out_tile;  // mirror of MoeGemmDirectShape: the epilogue only
  if (tile.producer && tile.wgmma) {
    // Mirror of MoeGemmWsShape: stages of [staging tokens][codes] and 3 permuted token tiles, or the out tile.
    // e4m3 tokens: 128 k in the same bytes, and the codes of 128 k (MoeGemmWsShape::kTileK).
    // Persistent: the out tile past the ring.
    const int64_t tile_k = input == GemmInput::row_scaled_e4m3 ? 128 : 64;
    // 512 channels: each stage also holds a 4-byte word of MX scales per channel (kStagedScales).
    const int64_t staged_scales = tile.block_n == 512 ? int64_t{tile.block_n} * 4 : 0;
    const int64_t tokens = int64_t{tile.block_m} * 64 * 2,
                  stage = tokens + int64_t{tile.block_n} * (tile_k * code_bits / 8) + staged_scales;
    // Tokens in the MMA's order: no permuted tiles, and 1 KB of slack to start the ring on a 1024-byte boundary.
    const int64_t ring = tile.stages * stage + (tile.mma_order_tokens ? 0 : 3 * tokens),
                  out = int64_t{tile.block_m} * (tile.block_n * 2 + 16), slack = tile.mma_order_tokens ? 1024 : 0;
    return slack + (tile.persistent ? ring + out : std::max(ring, out));
  }
  const int64_t a_stage = int64_t{tile.block_m} * (64 * 2 + (tile.wgmma ? 0 : 16));  // wgmma rows are unpadded
  const int64_t b_stage = int64_t{tile.block_n} * (64 * code_bits / 8);
  // wgmma: two buffers of the permuted tokens after the ring (MoeGemmShape::kPermOffset).
  const int64_t ring = tile.stages * (a_stage + b_stage) + (tile.wgmma ? 2 * int64_t{tile.block_m} * 64 * 2 : 0);
  const int64_t epilogue = reduce + out_tile;
  const int64_t split = tile.split_k > 1 ? int64_t{tile.threads() / tile.warps_k} * acc_per_thread * 4 : 0;
  return std::max({ring, epilogue, split});
}

std::vector<std::string> gemm_tile_reasons(const GemmTile& tile, const WeightDesc& w) {
  std::vector<std::string> r;
  auto bad = [&](const std::string& what) { r.push_back("GEMM tile " + tile.to_string() + ": " + what); };
  if (!plan::is_gpu_block_m(tile.block_m))
    bad(std::string("block_m must be ") + plan::kGpuBlockMs);
  else if (tile.block_m == 24 && !tile.direct)
    bad("24-row blocks run direct (/r) tiles only");
  if (tile.block_n != 32 && tile.block_n != 64 && tile.block_n != 128 && tile.block_n != 256 && tile.block_n != 512)
    bad("block_n must be 32, 64, 128, 256 or 512");
  else if (tile.block_n == 512 && !(tile.producer && tile.wgmma))
    bad("512 channels: warp-specialized wgmma (/p, 48+ tokens) tiles only");
  // NOTE: sizes far outside the legal ones stop here: the arithmetic below (threads, shared memory) is in int.
  if (tile.block_m < 1 || tile.block_m > 1024 || tile.block_n < 1 || tile.block_n > 1024) return r;
  if (tile.warps_m < 1 || tile.warps_n < 1 || tile.warps_k < 1 || tile.warps_m > 16 || tile.warps_n > 16 ||
      tile.warps_k > 16 || tile.threads() > 512) {
    bad("needs 1 to 16 warps");
    return r;  // the sizes below divide by the warp counts
  }
  {
    if (tile.block_m % (8 * tile.warps_m) != 0) bad("block_m is not a multiple of 8 x warps_m");
    if (tile.block_n % (16 * tile.warps_n) != 0) bad("block_n is not a multiple of 16 x warps_n");
  }
  if (tile.warps_k != 1 && tile.warps_k != 2 && tile.warps_k != 4) bad("warps_k must be 1, 2 or 4");
  else if (!tile.direct && (tile.stages % tile.warps_k != 0 || tile.stages / tile.warps_k < 2))
    bad("stages must be a multiple of warps_k, at least twice it");
  if (tile.split_k != 1 && tile.split_k != 2 && tile.split_k != 4) bad("split_k must be 1, 2 or 4");
  if (tile.min_ctas < 0 || tile.min_ctas > 16 || tile.min_ctas * tile.threads() > 2048)
    bad("min_ctas must be 0 to 16, with at most 2048 threads per SM");
  if (tile.direct) {
    if (tile.block_m > 32 || tile.warps_m != 1 || tile.split_k != 1 || tile.wgmma ||
        tile.producer || tile.stages % 2 != 0 || tile.stages > 8)
      bad("direct (/r) tiles have 8, 16, 24 or 32 tokens, warps 1xNxK, no split K, and 2, 4, 6 or 8 stages (K tiles in "
          "each lane's register ring)");
    // NOTE: the ring is registers (fully unrolled): a lane holds 16 (4-bit) or 32 (8-bit) bytes per
    // 16-channel tile and stage; past 256 bytes it would spill (the planner's rings hold 128-256).
    const bool four_bit = dtype_bits(weight_format_code_dtype(w.format)) == 4;
    const int64_t ring_bytes = int64_t{tile.block_n / tile.warps_n / 16} * (four_bit ? 16 : 32) * tile.stages;
    if (ring_bytes > 256)
      bad("a direct (/r) tile's register ring holds " + std::to_string(ring_bytes) +
          " bytes of codes per lane (channels per warp / 16 x 16 or 32 bytes x stages); at most 256");
  } else if (tile.producer && !tile.wgmma) {
    if (tile.block_m > 32 || tile.warps_m != 1 || tile.warps_k != 1 || tile.split_k != 1 || tile.stages > 8)
      bad("warp-specialized mma.sync (/p) tiles have up to 32 tokens, warps 1xNx1, at most 8 stages and no split K");
  } else if (tile.producer) {
    // NOTE: every GPU block size from 48 up (is_gpu_block_m above); below 48 /p is the mma.sync copy-warp tile.
    if (tile.block_m < 48 || (tile.block_n != 128 && tile.block_n != 256 && tile.block_n != 512) || tile.warps_m != 1 ||
        tile.warps_n != 8 || tile.warps_k != 1 || tile.split_k != 1 || tile.min_ctas != 0 || tile.stages < 3 || tile.stages > 8)
      bad("warp-specialized (/p) tiles are (48, 64, 80, 96, 128 or 144) x (128, 256 or 512) with consumer warps 1x8x1, 3 "
          "to 8 stages, no split K and no /o");
    // NOTE: a consumer holds four 64-channel tiles' accumulators at 512 channels (moe_gemm_ws.cuh).
    if (tile.block_n == 512 && tile.block_m > 64) bad("512-channel warp-specialized (/p) tiles have 48 or 64 tokens");
    // NOTE: the copy warps stage the MX scales (one byte per 32 k) in 4-byte words per channel and K tile.
    if (tile.block_n == 512 && w.format != WeightFormat::mxfp4 && w.format != WeightFormat::mxfp8)
      bad("512-channel tiles take MX weights (MXFP4, MXFP8) only, not " + std::string(moeq::to_string(w.format)));
    else if (tile.block_n == 512 && w.k % 64 != 0)
      bad("512-channel tiles need K % 64 == 0 (K = " + std::to_string(w.k) + ")");
  }
  if (tile.persistent && !(tile.producer && tile.wgmma)) bad("persistent (/s) tiles are warp-specialized wgmma (/p) tiles");
  if (tile.mma_order_tokens && !(tile.producer && tile.wgmma))
    bad("tokens in the MMA's K order (/t) take warp-specialized wgmma (/p) tiles");
  // NOTE: the order permutes whole 64-k tiles (mma_order_position).
  else if (tile.mma_order_tokens && w.k % 64 != 0)
    bad("tokens in the MMA's K order (/t) need K % 64 == 0 (K = " + std::to_string(w.k) + ")");
  if (!tile.direct && !tile.producer && tile.wgmma &&
      (tile.block_m != 64 || tile.warps_m != 1 || tile.warps_n != 4 || tile.warps_k != 1 || tile.split_k != 1 ||
       tile.block_n % 64 != 0))
    bad("wgmma tiles are 64 x (64, 128 or 256) with warps 1x4x1 and no split K");
  // NOTE: the K loop is unrolled once per ring step (stages / warps_k), so that is capped at 8;
  // 16 stages serve 4 K groups with 4 steps in the ring (deep prefetch where few CTAs run).
  if (tile.stages < 2 || tile.stages > 16) bad("stages must be 2 to 16");
  else if (tile.stages / tile.warps_k > 8) bad("stages / warps_k (ring steps) must be at most 8");
  // NOTE: 227 KB is the sm_90 opt-in limit; sm_80 allows 163 KB and sm_89 99 KB (the launch
  // checks the device's own limit).
  if (tile.stages < 1) return r;
  // NOTE: min_ctas only caps the registers; where that many CTAs need more shared memory than an
  // SM has (8-bit codes), fewer run, as without it.
  if (gemm_smem_bytes(tile, w) + gemm_static_smem_bytes(tile) > 227 * 1024) bad("needs more than 227 KB of shared memory");
  return r;
}

std::vector<std::string> moe_gemm_reasons(const WeightDesc& w, DType act_dtype) {
  std::vector<std::string> r;
  if (w.k % 32 != 0) r.push_back("K = " + std::to_string(w.k) + " is not a multiple of 32 (the GPU GEMM reads 16-byte chunks)");
  if (w.n % 2 != 0) r.push_back("N = " + std::to_string(w.n) + " is odd (the GPU GEMM stores channel pairs)");
  if (act_dtype != DType::bf16 && act_dtype != DType::f16)
    r.push_back("act_dtype = " + std::string(moeq::to_string(act_dtype)) + " is not bf16 or f16");
  if (w.num_experts * w.n * w.k > (int64_t{1} << 40)) r.push_back("the weights exceed 2^40 elements");
  return r;
}

bool gemm_takes_e4m3(const WeightDesc& w, const GemmTile& tile, int sm, bool prepared_codes) {
  if (w.format == WeightFormat::fp8_channel) return tile.direct && sm >= 89;
  if (w.format != WeightFormat::mxfp4 || prepared_codes || sm < 90) return false;
  // NOTE: 128 channels (one 64-channel MMA tile per consumer): the e4m3 consumers hold a partial
  // beside their accumulators, and with 256 channels the copy warps' 16 code copies per K tile
  // spilled (ptxas: 52-60 bytes at 64 x 256).
  // NOTE: the e4m3 ring holds twice the codes per stage; a 16-bit tile's legality does not imply it fits.
  return tile.producer && tile.wgmma && !tile.persistent && tile.block_n == 128 &&
         (tile.block_m == 64 || tile.block_m == 128) &&
         w.k % 128 == 0 && w.k <= 32768 &&
         gemm_smem_bytes(tile, w, GemmInput::row_scaled_e4m3) + gemm_static_smem_bytes(tile) <= 227 * 1024;
}

namespace {

// What gemm_takes_e4m3 admits, for the errors that name a refused config.
constexpr const char* kE4m3Rule =
    "e4m3 activations need FP8 per-channel weights on a direct tile (sm_89+) or canonical MXFP4 codes on a "
    "warp-specialized tile of 64 or 128 tokens and 128 channels (sm_90+, K % 128 == 0, its ring within 227 KB)";

}  // namespace

GemmTile e4m3_tile_of(const GemmTile& tile) {
  GemmTile t = tile;
  if (t.producer && t.wgmma) t.block_n = 128;
  t.persistent = false;        // the e4m3 consumers run one tile per CTA
  t.mma_order_tokens = false;  // and read permuted e4m3 tokens
  return t;
}

int device_sm() { return this_device().cc_major * 10 + this_device().cc_minor; }

bool gemm_folds_mx_scales(const WeightDesc& w, DType act_dtype, const GemmTile& tile, bool prepared_codes,
                          GemmInput input) {
  // NOTE: mirrors the kernels: moe_gemm_ws.cuh takes the word with either code layout; the voting
  // tiles (kVoteFold in moe_gemm.cuh and moe_gemm_direct.cuh) vote only on prepared codes and never
  // with wgmma; e4m3 input has no bf16 multiply.
  if (w.format != WeightFormat::mxfp4 || act_dtype != DType::bf16 || input == GemmInput::row_scaled_e4m3) return false;
  return tile.wgmma ? tile.producer : prepared_codes;
}

jit::KernelSpec moe_gemm_kernel_spec(const WeightDesc& w, DType act_dtype, const GemmTile& tile, bool prepared_codes,
                                     GemmInput input, bool mx_scales_at_most_two) {
  // NOTE: any arch that has the instruction: the caller checks the device (gemm_takes_e4m3).
  if (input == GemmInput::row_scaled_e4m3 && !gemm_takes_e4m3(w, tile, 90, prepared_codes))
    throw Error(std::string("moe_gemm: ") + kE4m3Rule + ", not " + std::string(moeq::to_string(w.format)) +
                (prepared_codes ? " (prepared codes)" : "") + " on " + tile.to_string() + " (K = " + std::to_string(w.k) +
                ")");
  // NOTE: only INT formats have a choice of scale dtype and zero points; the others always get
  // the same text, so they share one compiled kernel.
  const bool is_int = w.format == WeightFormat::int4 || w.format == WeightFormat::int8;
  std::ostringstream s;
  s << "#include \"moeq_dev/format/weights.cuh\"\n"
    << "struct MoeGemmCfg {\n"
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
  s << "};\n"
    << "#include \"moeq_dev/kernels/moe_gemm.cuh\"\n"
    << "static_assert(moeq_dev::MoeGemmKernel<MoeGemmCfg>::Shape::kSmemBytes == " << gemm_smem_bytes(tile, w, input)
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

std::vector<GemmTile> planner_tiles(WeightFormat format) {
  std::vector<GemmTile> tiles;
  for (int64_t block_m : plan::kGpuBlockSizes)
    for (int64_t rows : {kFewRoutedRows, kFewRoutedRows + 1, kTileForAnyRows})
      for (bool few_ctas : {false, true})
        for (bool alt_fewer_waves : {false, true})
          for (bool mx_pass_scales : {false, true}) {
            const GemmTile t = gemm_tile_for(format, static_cast<int>(block_m), rows, few_ctas, alt_fewer_waves, mx_pass_scales);
            const bool seen =
                std::any_of(tiles.begin(), tiles.end(), [&](const GemmTile& o) { return o.to_string() == t.to_string(); });
            if (!seen) tiles.push_back(t);
          }
  return tiles;
}

std::vector<jit::KernelSpec> moe_gemm_kernel_specs() {
  std::vector<jit::KernelSpec> specs;
  auto add = [&](const WeightDesc& w, DType act, const GemmTile& tile, bool prepared,
                 GemmInput input = GemmInput::values, bool mx_fold = false) {
    jit::KernelSpec spec = moe_gemm_kernel_spec(w, act, tile, prepared, input, mx_fold);
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
    if (!tile.direct || std::find(depths.begin(), depths.end(), tile.stages) != depths.end()) continue;
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
  return specs;
}

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

namespace {

CUfunction gemm_function(const WeightDesc& w, DType act_dtype, const GemmTile& tile, bool prepared, bool segments,
                         GemmInput input, bool mx_scales_at_most_two) {
  static std::mutex mutex;
  static std::unordered_map<uint64_t, CUfunction> table;
  const uint64_t key = gemm_config_key(w, act_dtype, tile, prepared, segments, input, mx_scales_at_most_two);
  std::lock_guard<std::mutex> lock(mutex);
  if (auto it = table.find(key); it != table.end()) return it->second;
  const int64_t smem = gemm_smem_bytes(tile, w, input), static_smem = gemm_static_smem_bytes(tile);
  if (const int max_smem = this_device().max_smem_per_block_optin; !segments && smem + static_smem > max_smem)
    throw Error("moe_gemm: tile " + tile.to_string() + " needs " + std::to_string(smem + static_smem) +
                " bytes of shared memory; this device allows " + std::to_string(max_smem));
  const CUfunction f = jit::kernel_cache().function(
      segments ? moe_gemm_segments_kernel_spec(w, act_dtype, tile, prepared, input)
               : moe_gemm_kernel_spec(w, act_dtype, tile, prepared, input, mx_scales_at_most_two));
  // NOTE: the 48 KB default covers static plus dynamic shared memory.
  if (!segments && smem + static_smem > 48 * 1024)
    check(driver().cuFuncSetAttribute(f, kFuncAttributeMaxDynamicSharedBytes, static_cast<int>(smem)),
          "cuFuncSetAttribute(max dynamic shared memory)");
  table.emplace(key, f);
  return f;
}

}  // namespace

void load_moe_gemm(const WeightDesc& w, DType act_dtype, const GemmTile& requested, GemmInput input) {
  const GemmTile tile = tile_for_device(requested);
  // NOTE: where the tile is its own unaligned-scales tile, the second pass finds every key loaded.
  for (const GemmTile& runs : {tile, unaligned_scales_tile(tile)})
    for (bool prepared : {false, true})
      if (input != GemmInput::row_scaled_e4m3 || gemm_takes_e4m3(w, runs, 90, prepared))
        for (bool mx_fold : {false, true})  // where the word changes nothing, the same key: loaded once
          gemm_function(w, act_dtype, runs, prepared, false, input, mx_fold);
  gemm_function(w, act_dtype, tile, false, true, input);
  if (tile.mma_order_tokens) load_moe_gemm(w, act_dtype, permuting_tile(tile, w), input);
}

int64_t gemm_block_m(int64_t planned_block_m) {
  if (planned_block_m == 48) return 64;
  if (planned_block_m > 64 && !device_has_wgmma()) return 64;
  return planned_block_m;
}

GemmTile tile_for_device(GemmTile tile) {
  if (this_device().cc_major < 9) tile.split_k = 1;  // clusters are sm_90+; the sums are the same tile's
  return device_has_wgmma() ? tile : mma_sync_tile_of(tile);
}

GemmTile permuting_tile(GemmTile tile, const WeightDesc& w) {
  if (!tile.mma_order_tokens) return tile;
  tile.mma_order_tokens = false;
  // NOTE: the permuted token tiles need shared memory the `/t` ring does not: fewer stages where they would not fit.
  while (tile.stages > 3 && gemm_smem_bytes(tile, w) + gemm_static_smem_bytes(tile) > 227 * 1024) --tile.stages;
  return tile;
}

GemmTile unaligned_scales_tile(GemmTile tile) {
  if (tile.block_n == 512) tile.block_n = 256;
  return tile;
}

GemmTile tile_for_scales(GemmTile tile, CUdeviceptr scales) { return scales % 4 != 0 ? unaligned_scales_tile(tile) : tile; }

GemmTile mma_sync_tile_of(GemmTile tile) {
  if (tile.producer && !tile.wgmma) {
    tile.producer = false;  // the same tile with the copies shared by every warp
  } else if (tile.producer) {
    // The same M block on mma.sync: 64 tokens and 32 channels per warp (v6's 64-row tile); 80-144
    // tokens in two warps along M (80 or 96 in one warp took 232-255 registers, spilling, ptxas sm_80).
    tile.block_n = 128;
    tile.warps_m = tile.block_m >= 80 ? 2 : 1;
    tile.warps_n = 4;
    tile.stages = 4;
    tile.producer = false;
  }
  tile.wgmma = false;
  tile.persistent = false;
  tile.mma_order_tokens = false;
  return tile;
}

void moe_gemm(const MoeGemmArgs& a, CUstream stream) {
  const WeightDesc& w = a.weights_desc;
  auto reasons = moe_gemm_reasons(w, a.act_dtype);
  for (auto& reason : gemm_tile_reasons(a.tile, w)) reasons.push_back(reason);
  const GemmTile tile = tile_for_scales(tile_for_device(a.tile), a.weights.scales);
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

  const GemmInput input = a.a_e4m3 ? GemmInput::row_scaled_e4m3
                          : a.a_row_scales != 0 ? GemmInput::row_scaled_values
                                                : GemmInput::values;
  const CUfunction f = gemm_function(w, a.act_dtype, tile, a.prepared_codes, false, input, a.mx_scales_at_most_two);
  const int64_t smem = gemm_smem_bytes(tile, w, input);
  LaunchShape shape;
  shape.grid_x = static_cast<unsigned>(m_blocks);
  shape.grid_y = static_cast<unsigned>((w.n + tile.block_n - 1) / tile.block_n);
  if (tile.persistent) {
    // One CTA per SM (a warp-specialized CTA takes an SM's registers), each looping over the tiles.
    const int64_t tiles = int64_t{shape.grid_x} * shape.grid_y;
    const int64_t ctas = a.max_ctas > 0 ? std::min<int64_t>(a.max_ctas, this_device().num_sms) : this_device().num_sms;
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
