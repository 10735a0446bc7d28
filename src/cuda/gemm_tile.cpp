// GemmTile's text form and the tuning candidates.
#include "cuda/gemm_tile.hpp"

#include <sstream>

#include "moeq/error.hpp"

namespace moeq::cuda {

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
      t.wgmma = true;  // 16-32 tokens too: /p/t is always the wgmma body
    } else if (key == 'r') {
      t.direct = true;
    } else if (key == 'w' || key == 'p') {
      // /p: warp-specialized; wgmma consumers from 48 tokens (and with /t), mma.sync ones below.
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
                           // deeper rings and more warps where few experts' weights stream over a long K (session 48:
                           // Mixtral-8x7B MXFP4 M = 1 GEMM2 35.9 -> 25.7 us on the 8-deep ring); 4-bit codes only past 4 deep
                           "8x32/1x1x4/6/r", "8x32/1x1x4/8/r", "8x32/1x2x4/4/r", "8x64/1x2x2/8/r", "8x128/1x4x1/8/r",
                           "16x128/1x4x1/4/r", "16x128/1x4x1/8/r", "16x64/1x4x1/4/r", "16x64/1x2x2/4/r",
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
                           // the warp-specialized wgmma body at 16-32 tokens (session 40: ~8-24 rows per expert)
                           "16x512/1x8x1/8/p/t", "24x256/1x8x1/8/p/t", "24x512/1x8x1/6/p/t", "24x512/1x8x1/8/p/t",
                           "24x512/1x8x1/6/p/s/t", "32x512/1x8x1/8/p/t",
                           // and two CTAs an SM of it (session 41: one CTA of it was latency-bound), with the same
                           // shapes on one CTA for the A/B
                           "16x128/1x8x1/8/o2/p/t", "24x128/1x8x1/4/o2/p/t", "24x128/1x8x1/8/o2/p/t",
                           "32x128/1x8x1/8/o2/p/t", "24x256/1x8x1/4/o2/p/t", "24x128/1x8x1/8/p/t", "24x256/1x8x1/4/p/t",
                           // 64 channels per warp, MXFP4's alternative many-rows tile (GEMM v19)
                           "8x256/1x4x1/2/r"})
    tiles.push_back(parse_gemm_tile(text));
  return tiles;
}

}  // namespace moeq::cuda
