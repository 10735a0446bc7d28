// The planner's GEMM tile per regime, with the measurements behind each choice, and the tile as the current
// device runs it (tile_for_device, tile_for_scales, gemm_block_m).
#include "cuda/gemm_planner.hpp"

#include <algorithm>
#include <cmath>

#include "plan/legality.hpp"

namespace moeq::cuda {

bool device_has_wgmma(const DeviceInfo& device) { return device.cc_major == 9 && device.cc_minor == 0; }

namespace {

// The formats whose few-rows tile takes the 8-deep ring: MXFP4 and INT4 (NVFP4's step gained nothing measurable:
// gemm_few_ctas_ring's PERF note). One place for the rule and the tile, so planner_tiles lists it only for them.
bool few_ctas_deep_ring_format(WeightFormat format) {
  return format == WeightFormat::mxfp4 || format == WeightFormat::int4;
}

}  // namespace

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

int gemm_few_ctas_ring(WeightFormat format, int64_t num_slots, int64_t top_k, int64_t num_experts, int64_t n,
                       int64_t k, int num_sms) {
  if (!few_ctas_deep_ring_format(format) || !gemm_few_ctas(num_slots, n, num_sms)) return 0;
  const int64_t tiles_per_k_group = (k + 63) / 64 / 4;  // the few-rows tile's 4 K groups
  const double ctas_per_sm =
      expected_row_blocks(num_slots, top_k, num_experts) * static_cast<double>((n + 31) / 32) / std::max(num_sms, 1);
  return ctas_per_sm <= 2.0 && tiles_per_k_group >= 32 ? 8 : 0;
}

bool gemm_mx_pass_scales(WeightFormat format, DType act_dtype, int64_t k) {
  return format == WeightFormat::mxfp4 && act_dtype == DType::bf16 && k % 128 == 0;
}

GemmTile gemm_tile_for_channels(WeightFormat format, DType act_dtype, int block_m, int64_t num_slots, int64_t top_k,
                                int64_t n, int64_t k, int64_t num_experts) {
  return gemm_tile_for_channels(format, act_dtype, block_m, num_slots, top_k, n, k, num_experts,
                                process_device_info().num_sms);
}

GemmTile gemm_tile_for_channels(WeightFormat format, DType act_dtype, int block_m, int64_t num_slots, int64_t top_k,
                                int64_t n, int64_t k, int64_t num_experts, int num_sms) {
  return gemm_tile_for(format, block_m, num_slots, gemm_few_ctas(num_slots, n, num_sms),
                       gemm_alt_fewer_waves(format, act_dtype, num_slots, top_k, num_experts, n, num_sms),
                       gemm_mx_pass_scales(format, act_dtype, k),
                       gemm_few_ctas_ring(format, num_slots, top_k, num_experts, n, k, num_sms));
}

GemmTile gemm_tile_for(WeightFormat format, int block_m, int64_t num_slots, bool few_ctas, bool alt_fewer_waves,
                       bool mx_pass_scales, int few_ctas_ring) {
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
  //   Session 49: with MXFP4 or INT4 codes and long K groups, the 8-deep ring (gemm_few_ctas_ring).
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
      if (few_ctas_deep_ring_format(format) && few_ctas_ring == 8) {
        text = "8x32/1x1x4/8/r";
      } else {
        text = int4 ? "8x32/1x1x4/4/o4/r" : "8x32/1x1x4/2/r";
      }
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

std::vector<GemmTile> planner_tiles(WeightFormat format) {
  std::vector<GemmTile> tiles;
  for (int64_t block_m : plan::kGpuBlockSizes)
    for (int64_t rows : {kFewRoutedRows, kFewRoutedRows + 1, kTileForAnyRows})
      for (bool few_ctas : {false, true})
        for (bool alt_fewer_waves : {false, true})
          for (bool mx_pass_scales : {false, true})
            for (int ring : {0, 8}) {
              const GemmTile t =
                  gemm_tile_for(format, static_cast<int>(block_m), rows, few_ctas, alt_fewer_waves, mx_pass_scales, ring);
              const bool seen = std::any_of(tiles.begin(), tiles.end(),
                                            [&](const GemmTile& o) { return o.to_string() == t.to_string(); });
              if (!seen) tiles.push_back(t);
            }
  return tiles;
}

int64_t gemm_block_m(int64_t planned_block_m) { return gemm_block_m(planned_block_m, process_device_info()); }

int64_t gemm_block_m(int64_t planned_block_m, const DeviceInfo& device) {
  if (planned_block_m == 48) return 64;
  if (planned_block_m > 64 && !device_has_wgmma(device)) return 64;
  return planned_block_m;
}

GemmTile tile_for_device(GemmTile tile) { return tile_for_device(tile, process_device_info()); }

GemmTile tile_for_device(GemmTile tile, const DeviceInfo& device) {
  if (device.cc_major < 9) tile.split_k = 1;  // clusters are sm_90+; the sums are the same tile's
  return device_has_wgmma(device) ? tile : mma_sync_tile_of(tile);
}

bool scales_off_word_boundary(CUdeviceptr scales) { return scales % 4 != 0; }

GemmTile tile_for_scales(GemmTile tile, CUdeviceptr scales) {
  return scales_off_word_boundary(scales) ? unaligned_scales_tile(tile) : tile;
}

int device_sm() { return device_sm(process_device_info()); }

int device_sm(const DeviceInfo& device) { return device.cc_major * 10 + device.cc_minor; }

}  // namespace moeq::cuda
