// What a GEMM tile needs (shared memory) and allows (legality, e4m3 input, the MX fold), and the tiles
// it runs as where it cannot run itself.
#include "cuda/gemm_tile.hpp"

#include <algorithm>
#include <string>

#include "plan/legality.hpp"

namespace moeq::cuda {

int64_t gemm_static_smem_bytes(const GemmTile& tile, GemmInput input) {
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
  // Direct tiles hold the block's row scales too (session 31; counted for every config: 4 bytes a row), and those
  // quantizing their rows each row's amax bits (4 bytes a row; ptxas 144 for 8 rows, session 69).
  const int64_t rows = 2 * int64_t{tile.block_m} * 4 + 16;
  if (tile.direct) return rows + (input == GemmInput::quantized_rows ? 8 : 4) * int64_t{tile.block_m};
  if (tile.producer && !tile.wgmma) return rows + 16 * int64_t{tile.stages} + 16;  // a full and an empty mbarrier per stage
  const int64_t persistent = tile.persistent ? rows + 32 : 0;
  // The copy warps' row pointers: 8 bytes a row, each thread's on a 16-byte boundary (rows rounded up to 16).
  const int64_t row_pointers = 8 * ((int64_t{tile.block_m} + 15) / 16 * 16);
  // e4m3 consumers on MMA-order tokens: per row buffer the scan warps' slot (a base per channel, the wide-tile
  // bits, its `scanned` mbarrier). ptxas: 2816 for 128x128/4/p/t, 4096 for 128x128/6/p/s/t, 2304 for 64x128/6/p/s/t
  // (session 64), against 3000, 4288 and 2720 here.
  const int64_t e4m3_scan = input == GemmInput::row_scaled_e4m3 && tile.mma_order_tokens
                                ? (tile.persistent ? 2 : 1) * int64_t{tile.block_n + 32 + 8}
                                : 0;
  return rows + persistent + e4m3_scan +
         (tile.producer ? row_pointers + 4 * int64_t{tile.block_m} + 24 * int64_t{tile.stages} + 160 : 0);
}

bool gemm_self_routes(const GemmTile& tile, GemmInput input) {
  return tile.direct && tile.block_m == 8 && (input == GemmInput::values || input == GemmInput::quantized_rows);
}

bool gemm_fuses_activation(const GemmTile& tile, GemmInput input, const EpilogueActivation& activation) {
  if (input != GemmInput::values) return false;
  if (tile.direct) return tile.block_m == 8 && tile.block_n % 32 == 0;
  (void)activation;  // every kind and row layout: [gate | up] rows load paired (epilogue_weight_row)
  return tile.producer && tile.wgmma;
}

bool gemm_quantizes_rows(const GemmTile& tile, const WeightDesc& w) {
  return tile.direct && !tile.mma_order_tokens && w.k % 8 == 0 &&
         gemm_staged_rows_bytes(tile, w, GemmInput::quantized_rows) <= kMaxStagedRowsBytes;
}

int64_t gemm_staged_rows_bytes(const GemmTile& tile, const WeightDesc& w, GemmInput input) {
  if (!tile.direct || input != GemmInput::quantized_rows) return 0;
  return int64_t{tile.block_m} * ((w.k + 63) / 64 * 64 + 8) * 2;
}

int64_t gemm_smem_bytes(const GemmTile& tile, const WeightDesc& w, GemmInput input) {
  const int code_bits = dtype_bits(weight_format_code_dtype(w.format));
  const int64_t acc_per_thread = int64_t{tile.block_m / tile.warps_m / 8} * (tile.block_n / tile.warps_n / 16) * 4;
  const int64_t reduce = int64_t{tile.threads() - tile.threads() / tile.warps_k} * acc_per_thread * 4;
  const int64_t out_tile = int64_t{tile.block_m} * (tile.block_n * 2 + 16);
  // Mirror of MoeGemmDirectShape (the epilogue), and the staged rows past it.
  if (tile.direct) return reduce + out_tile + gemm_staged_rows_bytes(tile, w, input);
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
  else if (tile.block_m == 24 && !tile.direct && !tile.mma_order_tokens)
    bad("24-row blocks run direct (/r) or warp-specialized MMA-order (/p/t) tiles only");
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
    // NOTE: every GPU block size from 48 up (is_gpu_block_m above), and 16-32 with /t; below 48 /p without /t is
    // the mma.sync copy-warp tile.
    if ((tile.block_m < 48 && !tile.mma_order_tokens) || (tile.block_n != 128 && tile.block_n != 256 && tile.block_n != 512) || tile.warps_m != 1 ||
        tile.warps_n != 8 || tile.warps_k != 1 || tile.split_k != 1 || (tile.min_ctas != 0 && tile.min_ctas != 2) ||
        tile.stages < 3 || tile.stages > 8)
      bad("warp-specialized (/p) tiles are (48, 64, 80, 96, 128 or 144; 16, 24 or 32 with /t) x (128, 256 or 512) with "
          "consumer warps 1x8x1, 3 to 8 stages, no split K and no /o but /o2");
    // NOTE: two CTAs an SM give the consumers 104 registers a thread (moe_gemm_ws_shape.cuh): up to 24 accumulators a
    // thread (tokens x channels / 256) without spills; 32 x 256 (32) spilled in the consumers (ptxas, session 41).
    if (tile.min_ctas == 2 && (tile.block_m > 32 || tile.block_m * tile.block_n > 24 * 256 || tile.persistent))
      bad("two CTAs an SM (/o2) on warp-specialized (/p) tiles take up to 24 x 256 or 32 x 128 tokens x channels, "
          "not persistent");
    // NOTE: a consumer holds four 64-channel tiles' accumulators at 512 channels (moe_gemm_ws_consumers.cuh).
    if (tile.block_n == 512 && tile.block_m > 64) bad("512-channel warp-specialized (/p) tiles have up to 64 tokens");
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
  // NOTE: an sm_90 SM has 228 KB, of which each resident CTA also takes 1 KB (the CUDA occupancy rules).
  else if (tile.producer && tile.wgmma && tile.min_ctas == 2 &&
           2 * (gemm_smem_bytes(tile, w) + gemm_static_smem_bytes(tile) + 1024) > 228 * 1024)
    bad("two CTAs an SM (/o2) need at most 113 KB of shared memory each; this tile takes " +
        std::to_string((gemm_smem_bytes(tile, w) + gemm_static_smem_bytes(tile) + 1023) / 1024) + " KB (fewer stages)");
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
  // NOTE: persistent only with MMA-order tokens (the consumers carry one ring state, a stage being its token buffer).
  // NOTE: an even ring: the consumers' two fragment sets alternate with the K tile, unrolled over the stages.
  return tile.producer && tile.wgmma && (!tile.persistent || tile.mma_order_tokens) && tile.block_n == 128 &&
         tile.stages % 2 == 0 &&
         (tile.block_m == 64 || tile.block_m == 128) &&
         w.k % 128 == 0 && w.k <= 32768 &&
         gemm_smem_bytes(tile, w, GemmInput::row_scaled_e4m3) +
                 gemm_static_smem_bytes(tile, GemmInput::row_scaled_e4m3) <=
             227 * 1024;
}

GemmTile e4m3_tile_of(const GemmTile& tile) {
  GemmTile t = tile;
  if (t.producer && t.wgmma) t.block_n = 128;
  t.persistent = t.persistent && t.mma_order_tokens;  // persistent e4m3 consumers read MMA-order tokens only
  return t;
}

bool gemm_folds_mx_scales(const WeightDesc& w, DType act_dtype, const GemmTile& tile, bool prepared_codes,
                          GemmInput input) {
  // NOTE: mirrors the kernels: moe_gemm_ws_consumers.cuh takes the word with either code layout; the voting
  // tiles (kVoteFold in moe_gemm_sync.cuh and moe_gemm_direct.cuh) vote only on prepared codes and never
  // with wgmma; e4m3 input has no bf16 multiply.
  if (w.format != WeightFormat::mxfp4 || act_dtype != DType::bf16 || input == GemmInput::row_scaled_e4m3) return false;
  return tile.wgmma ? tile.producer : prepared_codes;
}

namespace {

// The direct tile (/r) of a 16-, 24- or 32-row block: what runs a warp-specialized tile of that block where its
// tokens cannot come in the MMA's order (the permute warps take rows in multiples of 16; 48 is their least) or
// there is no wgmma. Its ring holds 2 stages, or 4 for 24 rows of 4-bit codes (gemm_tile_for's 24-row tile).
GemmTile direct_tile_of_block(int block_m, bool four_bit) {
  return parse_gemm_tile(std::to_string(block_m) + "x128/1x4x1/" + (block_m == 24 && four_bit ? "4" : "2") + "/r");
}

}  // namespace

GemmTile permuting_tile(GemmTile tile, const WeightDesc& w) {
  if (!tile.mma_order_tokens) return tile;
  if (tile.block_m < 48) return direct_tile_of_block(tile.block_m, dtype_bits(weight_format_code_dtype(w.format)) == 4);
  tile.mma_order_tokens = false;
  // NOTE: the permuted token tiles need shared memory the `/t` ring does not: fewer stages where they would not fit.
  while (tile.stages > 3 && gemm_smem_bytes(tile, w) + gemm_static_smem_bytes(tile) > 227 * 1024) --tile.stages;
  return tile;
}

bool gemm_runs_permuting_twin(const GemmTile& tile, GemmInput input) {
  return tile.mma_order_tokens && input != GemmInput::row_scaled_e4m3;
}

GemmTile unaligned_scales_tile(GemmTile tile) {
  if (tile.block_n == 512) tile.block_n = 256;
  return tile;
}

GemmTile mma_sync_tile_of(GemmTile tile) {
  if (tile.producer && !tile.wgmma) {
    tile.producer = false;  // the same tile with the copies shared by every warp
  } else if (tile.producer && tile.block_m < 48) {
    return direct_tile_of_block(tile.block_m, false);
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

}  // namespace moeq::cuda
