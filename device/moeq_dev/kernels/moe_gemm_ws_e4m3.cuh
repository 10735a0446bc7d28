#pragma once
// The consumers of the warp-specialized tile (kernels/moe_gemm_ws.cuh) for MXFP4 weights x FP8
// per-token activations on the e4m3 tensor cores (Cfg::kActE4m3; issue 5, M >= 1024): the
// producer stages and permutes the token codes exactly as it does 16-bit tokens (a K tile is
// 128 k of e4m3 in the same 128 bytes per row as 64 k of bf16), the consumers decode their
// canonical e2m1 codes straight into e4m3 A fragments and issue wgmma m64nBMk32 e4m3.
// K order: lane t owns the 32 k [32t, 32t + 32) of each 128-k tile, i.e. exactly MX group t of
// the tile (16 bytes of a canonical code row, one shared load); MMA j takes its word j (codes
// 32t + 8j + [0, 8): fragment k 4t + [0, 4) and 16 + 4t + [0, 4)), which the permuted token core
// matrices match word for word (move_token_unit: core matrix (step j, half h) holds physical k
// 32t + 8j + 4h + [0, 4) at word t).
// Scales: every MMA mixes the tile's four MX groups, so each row's group scales are folded into
// the e4m3 codes relative to the row's base, its largest finite exponent m over all of K (format/e2m1_e4m3.cuh:
// exact for exponents down to m - 12): the products of a window of kE4m3PromoteTiles such tiles sum in a
// partial that is promoted into the fp32 accumulators with 2^(m - 133), one wait per window: the e4m3 MMA's
// internal accumulation keeps fewer bits than fp32 (DeepGEMM promotes every 128 k for that reason).
// Tiles where some row holds an exponent more than 12 binades below its base (or the NaN scale 0xFF) are found
// before the main loop (a bit per K tile in shared memory, the same for every consumer warp, so the
// warpgroups issue the same MMAs) and run one pass per group, each promoted with its own scale.
// S::kMmaOrder (`/t` tiles): the token codes come with each 128-k tile already in that K order
// (format/mma_order.cuh, e4m3_mma_order_position: the same 4-byte-unit permutation the permute
// warps apply), so wgmma reads the copy ring's 128-byte-swizzled staging itself (MMA j at byte
// 32 j of each row, as the 16-bit `/t` tile's k16 step j), the consumers wait for `landed`, and a
// stage goes back to the copy warps once the MMAs that read its tokens have completed.
// S::kPersistent (`/s`, with `/t` only): the caller loops over output tiles; the ring's stage, phase and
// descriptor (E4m3Ring) run on from tile to tile. On `/t` tiles the producer's scan warps (e4m3_scan_block) find
// each output tile's row bases and wide K tiles a tile ahead; `/p` tiles' consumers scan them first.
// PERF: Qwen3 MXFP4 x FP8 per token at M = 4096 (H100, bench/results/2026-12-07-h100-s63-e4m3-mma-order.md): whole
// steps 1141.7 us on `/p` -> 1094.6 on `/p/t` -> 1091.7 on `/p/s/t` (GEMM2 475.9 -> 432.0 us; GEMM1 610.7 ->
// 610.6, against the 16-bit values path's 423.9). GEMM1 issues at the values path's rate (IPC 1.5) for 44%
// longer: the consumers' decode and promotion bound it, not the token path. The persistent stage taken from the
// ring's buffer instead of computed per K tile: st6 steps 1096.4 -> 1083.5 us. Session 64 (H100,
// bench/results/2026-12-07-h100-s64-e4m3-window-scan.md): one base per row over K instead of per tile (no
// shuffles, a promotion window possible) and the scan moved to the producer's idle warps: st6 steps 1079-1092 ->
// 965-979 us (-10 to -11%, old and new in one run); the values path 874-896, bf16 824-866. Session 65 (H200,
// bench/results/2026-12-07-h200-s65-e4m3-decode-epilogue.md): the decode on both pipes and the compact epilogue
// below, steps 955-958 -> 942-945 us; the values path 836-847, bf16 766-789.
// NOTE: NVRTC-safe: no standard headers.
#include "moeq_dev/format/e2m1_e4m3.cuh"
#include "moeq_dev/format/ue8m0.cuh"
#include "moeq_dev/kernels/moe_gemm_common.cuh"
#include "moeq_dev/kernels/moe_gemm_ws_shape.cuh"
#include "moeq_dev/ptx/mbarrier.cuh"
#include "moeq_dev/ptx/wgmma.cuh"

namespace moeq_dev {

// K tiles per CTA the wide-tile bits cover (K <= 32768; the host admits no larger K).
constexpr int kE4m3WideWords = 8;

// Narrow K tiles (128 k each) whose products the e4m3 MMAs sum in the partial before it is promoted into
// the fp32 accumulators: the MMA's own accumulation keeps fewer bits than fp32 (DeepGEMM promotes every 128 k).
#ifndef MOEQ_E4M3_PROMOTE_TILES
#define MOEQ_E4M3_PROMOTE_TILES 1
#endif
constexpr int kE4m3PromoteTiles = MOEQ_E4M3_PROMOTE_TILES;

// 2^(m - 133): the promotion factor of a row whose base (largest scale exponent) is m (the codes
// carry 2^(e - m + 12 - 6) of each group's 2^(e - 127)); fp32 subnormal below m = 7.
__device__ __forceinline__ float e4m3_fold_scale(int m) {
  return __uint_as_float(m >= 7 ? static_cast<unsigned>(m - 6) << 23 : 1u << (m + 16));
}

// One output tile's scan of the scales (MMA-order tiles: the producer warpgroup's two warps that permute tokens on
// `/p` tiles, idle on `/t`, while the consumers run the tile before): each row's base (its largest finite exponent
// over K) into row_bases[row], and the wide K tiles (some row's exponent there more than 12 binades below its base,
// or the NaN scale) into wide. Rows past N are copies of row N - 1, which is in the block. `threads` threads with
// ids stid share it and named barrier `barrier`; each takes rows stid and stid + threads together.
// A K tile's 4 MX groups of a row are one 4-byte word (K % 128 == 0, so rows start on 4-group boundaries), read
// whole where the scales are 4-byte aligned, and compared 4 at a time (byte SIMD).
// PERF: byte loads 8 in flight per thread, one row after the other, made the Qwen3 MXFP4 x FP8 GEMM1 at M = 4096
// 539 -> 653 us (H100 ncu): the consumers waited for the scan of their next tile.
template <int BN>
__device__ __forceinline__ void e4m3_scan_block(const MoeGemmParams& p, int e, int n0, int tiles_k, int stid, int threads,
                                                int barrier, unsigned char* row_bases, unsigned* wide) {
  const int N = p.n, groups_k = 4 * tiles_k;
  const unsigned char* scales = static_cast<const unsigned char*>(p.scaling.scales) + static_cast<long long>(e) * N * groups_k;
  const bool aligned = (reinterpret_cast<unsigned long long>(scales) & 3u) == 0;
  auto word_at = [&](const unsigned char* row, int j) {
    if (aligned) return *reinterpret_cast<const unsigned*>(row + 4 * j);
    return static_cast<unsigned>(row[4 * j]) | static_cast<unsigned>(row[4 * j + 1]) << 8 |
           static_cast<unsigned>(row[4 * j + 2]) << 16 | static_cast<unsigned>(row[4 * j + 3]) << 24;
  };
  if (stid < kE4m3WideWords) wide[stid] = 0;
  named_barrier_sync(barrier, threads);
  constexpr int kBatch = 8;  // K tiles (words) in flight per row
  constexpr unsigned kNanBytes = 0xFFFFFFFFu;  // kUe8m0NanCode in every byte
  for (int r0 = stid; r0 < BN; r0 += 2 * threads) {
    const int rows[2] = {r0, r0 + threads};
    const unsigned char* row[2];
#pragma unroll
    for (int h = 0; h < 2; ++h) row[h] = scales + static_cast<long long>(min(n0 + min(rows[h], BN - 1), N - 1)) * groups_k;
    unsigned largest[2] = {0u, 0u};  // per byte lane, the NaN codes as 0
    for (int j0 = 0; j0 < tiles_k; j0 += kBatch) {
      unsigned w[2][kBatch];
#pragma unroll
      for (int h = 0; h < 2; ++h)
#pragma unroll
        for (int u = 0; u < kBatch; ++u) w[h][u] = j0 + u < tiles_k ? word_at(row[h], j0 + u) : 0u;
#pragma unroll
      for (int h = 0; h < 2; ++h)
#pragma unroll
        for (int u = 0; u < kBatch; ++u) largest[h] = __vmaxu4(largest[h], w[h][u] & ~__vcmpeq4(w[h][u], kNanBytes));
    }
    unsigned below[2];  // the bytes under which a group is wide: max(base - 12, 0) in every byte
#pragma unroll
    for (int h = 0; h < 2; ++h) {
      const unsigned m = __vmaxu4(largest[h], largest[h] >> 16), base = max(m & 0xFFu, (m >> 8) & 0xFFu);
      if (rows[h] < BN) row_bases[rows[h]] = static_cast<unsigned char>(base);
      below[h] = static_cast<unsigned>(max(static_cast<int>(base) - kE2m1E4m3MaxShift, 0)) * 0x01010101u;
    }
    for (int j0 = 0; j0 < tiles_k; j0 += kBatch) {
      unsigned w[2][kBatch];
#pragma unroll
      for (int h = 0; h < 2; ++h)
#pragma unroll
        for (int u = 0; u < kBatch; ++u) w[h][u] = j0 + u < tiles_k ? word_at(row[h], j0 + u) : below[h];
      unsigned bits = 0;  // K tiles j0 + [0, kBatch): within one word (j0 is a multiple of kBatch)
#pragma unroll
      for (int u = 0; u < kBatch; ++u) {
        unsigned flagged = 0;
#pragma unroll
        for (int h = 0; h < 2; ++h) flagged |= __vcmpeq4(w[h][u], kNanBytes) | __vcmpltu4(w[h][u], below[h]);
        bits |= (flagged != 0 ? 1u : 0u) << u;
      }
      if (bits != 0) atomicOr(&wide[j0 >> 5], bits << (j0 & 31));
    }
  }
}

// Where the consumers' token ring stands: the buffer the next K tile reads (a permuted buffer, or with
// MMA-order tokens its stage), its phase and its wgmma descriptor. Persistent tiles carry it across tiles.
struct E4m3Ring {
  int buffer;
  unsigned parity;
  unsigned long long descriptor;
};

// The e4m3 tile's epilogue (moe_gemm_ws_consumers.cuh): each token row's A-row scale (FP8 per token, fetched into
// shared memory before the main loop) multiplied into the accumulators first, then write_output_tile of a config
// without row scales, then e4m3_store_output_rows.
// PERF: write_output_tile's own row-scale read tests block_row_scales for null per value, and ptxas kept the 32
// values' global fallback inline, ~45 instructions apart: the epilogue's straight-line code missed the instruction
// cache at every value, and the Qwen3 MXFP4 x FP8 GEMM1 at M = 4096 spent ~22% of its consumer warps' stall samples
// in the epilogue, most of them `no instruction` (H100 ncu source counters, session 64 call 11). With the decode
// change (format/e2m1_e4m3.cuh) the Qwen3 step went 955-958 -> 942-945 us (H200, session 65): the epilogue's share
// was smaller than its stall samples suggested.
// NOTE: e4m3-only for now: the same fix inside write_output_tile_at and store_output_rows changes every
// warp-specialized kernel, which needs the full GPU suite on a device (docs/perf-notes.md, next after session 65).
template <class Cfg>
struct E4m3EpilogueCfg : Cfg {
  static constexpr bool kRowScales = false;
};

template <int kTilesM>
__device__ __forceinline__ void e4m3_scale_token_rows(float (&acc)[1][kTilesM][4], const float* block_row_scales, int t) {
#pragma unroll
  for (int mt = 0; mt < kTilesM; ++mt) {
    // Tokens mt * 8 + 2t + {0, 1}: values 0, 2 and 1, 3 of the fragment.
    const float even = block_row_scales[mt * 8 + 2 * t], odd = block_row_scales[mt * 8 + 2 * t + 1];
    acc[0][mt][0] *= even;
    acc[0][mt][2] *= even;
    acc[0][mt][1] *= odd;
    acc[0][mt][3] *= odd;
  }
}

// store_output_rows of a full tile (16-byte aligned C, every chunk within N) with every chunk's loads first; else
// store_output_rows itself.
// PERF: store_output_rows' loop (a shared load, then its global store, one chunk an iteration) waited for each load
// (short scoreboard): ~9% of the e4m3 GEMM1's consumer stall samples (same profile as above).
template <int BM, int BN, int T>
__device__ __forceinline__ void e4m3_store_output_rows(const MoeGemmParams& p, const unsigned char* out_tile,
                                                       int out_row_bytes, const int* row_dst, int n0, int tid) {
  constexpr int kChunksOut = BM * (BN / 8), kPerThread = kChunksOut / T;
  static_assert(kChunksOut % T == 0, "every thread stores the same number of chunks");
  const bool aligned = ((reinterpret_cast<unsigned long long>(p.c) | static_cast<unsigned long long>(p.c_row_stride) * 2) & 15) == 0;
  if (!aligned || n0 + BN > p.n) {
    store_output_rows<BM, BN, T>(p, out_tile, out_row_bytes, row_dst, n0, tid);
    return;
  }
  uint4 values[kPerThread];
  int dst[kPerThread];
#pragma unroll
  for (int j = 0; j < kPerThread; ++j) {
    const unsigned c = tid + j * T, token = c / (BN / 8), chunk = c % (BN / 8);
    dst[j] = row_dst[token];
    values[j] = *reinterpret_cast<const uint4*>(out_tile + token * out_row_bytes + chunk * 16);
  }
#pragma unroll
  for (int j = 0; j < kPerThread; ++j) {
    const unsigned chunk = (tid + j * T) % (BN / 8);
    if (dst[j] >= 0)
      *reinterpret_cast<uint4*>(p.c + static_cast<long long>(dst[j]) * p.c_row_stride + n0 + chunk * 8) = values[j];
  }
}

template <class S>
__device__ __forceinline__ unsigned long long e4m3_first_descriptor(unsigned smem_base) {
  return S::kMmaOrder ? wgmma_descriptor_swizzle128(smem_base)
                      : wgmma_descriptor(smem_base + S::kPermutedOffset, 128, 1024);
}

template <class S>
__device__ __forceinline__ E4m3Ring e4m3_ring_start(unsigned smem_base) {
  return {0, 0u, e4m3_first_descriptor<S>(smem_base)};
}

// One output tile's main loop. MMA-order tiles: the scan of the tile's row-buffer slot (row_bases, wide_tiles: the
// slot's), complete once `scanned` (the slot's barrier) reaches `scanned_parity`; permuting tiles (never persistent:
// one tile, its wide-tile bits zeroed at the kernel's start) scan here, into wide_tiles.
template <class Cfg, class S, class ChannelOf>
__device__ __forceinline__ void moe_gemm_ws_e4m3_consumers(const MoeGemmParams& p, int e, int n0, int tiles_k,
                                                           E4m3Ring& ring,
                                                           unsigned smem_base, unsigned landed0, unsigned staged0,
                                                           unsigned permuted0, unsigned retired0, unsigned* wide_tiles,
                                                           const unsigned char* row_bases, unsigned scanned,
                                                           unsigned scanned_parity, int ctid,
                                                           ChannelOf channel_of, float (&acc)[S::kTilesN][S::kTilesM][4]) {
  constexpr int BM = S::kBlockM, kStages = S::kStages, kTilesN = S::kTilesN, kTilesM = S::kTilesM;
  constexpr int kConsumerThreads = 128 * S::kConsumers;
  static_assert(kTilesN == 1, "one 64-channel MMA tile per consumer (a partial beside the accumulators)");
  constexpr bool kMmaOrder = S::kMmaOrder;
  static_assert(!S::kPersistent || kMmaOrder, "persistent e4m3 tiles: MMA-order tokens (a stage is its token buffer)");
  // Token buffers: the permuted ones (kPermBuffers), or with MMA-order tokens the stages themselves.
  constexpr int kBuffers = kMmaOrder ? kStages : S::kPermBuffers;
  constexpr unsigned kBufferBytes = kMmaOrder ? S::kStageBytes : S::kTokenBytes;
  const int N = p.n, K = p.k, groups_k = K / 32;
  const int lane = ctid % 32, t = lane % 4;
  const unsigned char* scales = static_cast<const unsigned char*>(p.scaling.scales) + static_cast<long long>(e) * N * groups_k;

  // Each row's base: its largest finite scale exponent over all of K (rows past N are copies of row N - 1, which
  // is in this block), and the wide K tiles. MMA-order tiles read both from the producer's scan (e4m3_scan_block).
  // PERF: scanned here, per output tile, they cost the Qwen3 MXFP4 x FP8 step at M = 4096 ~70 us (H100, the step
  // with and without the scan: bench/results/2026-12-07-h100-s64-e4m3-window-scan.md).
  // Permuting tiles scan here: lane t of a quad scans tiles t, t + 4, ... of its rows g and g + 8; the quad shares them.
  int scale_row[2];
#pragma unroll
  for (int r = 0; r < 2; ++r) scale_row[r] = min(n0 + channel_of(0, r), N - 1) * groups_k;
  int row_base[2] = {0, 0};
  if constexpr (kMmaOrder) {
    mbarrier_wait(scanned, scanned_parity);
#pragma unroll
    for (int r = 0; r < 2; ++r) row_base[r] = row_bases[channel_of(0, r)];
  } else {
    constexpr int kScanBatch = 4;  // tiles' loads in flight per lane and row
    for (int first = t; first < tiles_k; first += 4 * kScanBatch) {
      unsigned char v[kScanBatch][2][4];
#pragma unroll
      for (int u = 0; u < kScanBatch; ++u)
#pragma unroll
        for (int r = 0; r < 2; ++r)
#pragma unroll
          for (int q = 0; q < 4; ++q) {
            const int tile = first + 4 * u;
            v[u][r][q] = tile < tiles_k ? scales[scale_row[r] + 4 * tile + q] : 0;
          }
#pragma unroll
      for (int u = 0; u < kScanBatch; ++u)
#pragma unroll
        for (int r = 0; r < 2; ++r)
#pragma unroll
          for (int q = 0; q < 4; ++q)
            if (v[u][r][q] != kUe8m0NanCode) row_base[r] = max(row_base[r], static_cast<int>(v[u][r][q]));
    }
#pragma unroll
    for (int r = 0; r < 2; ++r) {
      row_base[r] = max(row_base[r], __shfl_xor_sync(0xFFFFFFFFu, row_base[r], 1));
      row_base[r] = max(row_base[r], __shfl_xor_sync(0xFFFFFFFFu, row_base[r], 2));
    }
    // The wide tiles: some row of the block has a group exponent more than 12 binades below its base there (or
    // the NaN scale). The same bits for every consumer warp, so the warpgroups issue the same MMAs.
    for (int first = t; first < tiles_k; first += 4 * kScanBatch) {
      unsigned char v[kScanBatch][2][4];
#pragma unroll
      for (int u = 0; u < kScanBatch; ++u)
#pragma unroll
        for (int r = 0; r < 2; ++r)
#pragma unroll
          for (int q = 0; q < 4; ++q) {
            const int tile = first + 4 * u;
            v[u][r][q] = tile < tiles_k ? scales[scale_row[r] + 4 * tile + q] : row_base[r];
          }
#pragma unroll
      for (int u = 0; u < kScanBatch; ++u) {
        bool wide = false;
#pragma unroll
        for (int r = 0; r < 2; ++r)
#pragma unroll
          for (int q = 0; q < 4; ++q)
            wide |= v[u][r][q] == kUe8m0NanCode || static_cast<int>(v[u][r][q]) + kE2m1E4m3MaxShift < row_base[r];
        const int tile = first + 4 * u;
        if (wide) atomicOr(&wide_tiles[tile >> 5], 1u << (tile & 31));
      }
    }
    named_barrier_sync(3, kConsumerThreads);
  }
  // A narrow tile's products carry 2^(base - 133) of the row's scale (format/e2m1_e4m3.cuh at shift e - base + 12).
  const float row_scale[2] = {e4m3_fold_scale(row_base[0]), e4m3_fold_scale(row_base[1])};

  // The exponents of this lane's group (t) of rows g and g + 8 in tile j (0 past the last tile), kept
  // as loaded until used: tile j + 1's (`ready`, decoded during iteration j) and tile j + 2's
  // (`pending`, loaded during iteration j - 1 and waited for one tile later).
  // PERF: packed into one word as they arrived, each tile's loads were waited for at once (a
  // global latency per K tile and consumer warp); a ring of kStages of them spilled (ptxas).
  using Exponents = unsigned char[2];
  auto load_exponents = [&](int j, Exponents& slot) {
#pragma unroll
    for (int r = 0; r < 2; ++r) slot[r] = j < tiles_k ? scales[scale_row[r] + 4 * j + t] : 0;
  };
  Exponents ready, pending;
  load_exponents(1, ready);
  load_exponents(2, pending);

#pragma unroll
  for (int nt = 0; nt < kTilesN; ++nt)
#pragma unroll
    for (int mt = 0; mt < kTilesM; ++mt)
#pragma unroll
      for (int i = 0; i < 4; ++i) acc[nt][mt][i] = 0.0f;
  float partial[kTilesM][4];  // one 64-channel tile's products of a window of narrow K tiles (or of one group)

  // A K tile's A fragments (MMA j: rows g / g + 8, k halves).
  struct Fragments {
    unsigned a[4][4];
  };
  // Tile j's code words (rows g, g + 8: this lane's 32 codes of each), from ring stage q, once its
  // permuted buffer is ready (the permute warps arrive on `permuted` only after the stage's
  // `landed`: the codes have landed too); kMmaOrder: once the stage (== buffer) has landed, which
  // wgmma reads with no proxy fence between, as the 16-bit `/t` consumers do (their NOTE).
  auto load_words = [&](int q, int buffer, unsigned parity, uint4 (&words)[2]) {
    mbarrier_wait((kMmaOrder ? landed0 : permuted0) + 8 * buffer, parity);
    const unsigned codes = smem_base + q * S::kStageBytes + S::kCodeOffset;
#pragma unroll
    for (int r = 0; r < 2; ++r) words[r] = lds_128(codes + channel_of(0, r) * S::kCodeRowBytes + 16 * t);
  };
  // The stage goes back to the copy warps once every code word of it has been used (kMmaOrder: its
  // tokens too, once the tile's MMAs have completed: `retire` instead).
  auto release_stage = [&](int q) {
    if constexpr (!kMmaOrder) {
      __syncwarp();
      if (lane == 0) mbarrier_arrive(staged0 + 8 * q);
    }
  };
  // Every MMA that read token buffer b has completed: it goes back (kMmaOrder: its stage, codes and tokens).
  auto retire = [&](int b) {
    __syncwarp();
    if (lane == 0) mbarrier_arrive((kMmaOrder ? staged0 : retired0) + 8 * b);
  };
  // Decodes 8 codes per word into fragments through one table per row: `shift` binades above 2^-6 (narrow
  // tiles: the lane's group exponent less the row's base, plus 12), or, for pass `group` of a wide tile, this
  // lane's words at 2^0 if it owns that group and zeros otherwise.
  auto decode = [&](const uint4 (&words)[2], const int (&shift)[2], bool mine, Fragments& f) {
    const E2m1E4m3Table table[2] = {e2m1_e4m3_table(shift[0]), e2m1_e4m3_table(shift[1])};
    const unsigned w[2][4] = {{words[0].x, words[0].y, words[0].z, words[0].w},
                              {words[1].x, words[1].y, words[1].z, words[1].w}};
#pragma unroll
    for (int mma = 0; mma < 4; ++mma)
#pragma unroll
      for (int r = 0; r < 2; ++r) {
        if constexpr (WsDiag<Cfg>::value & kWsSkipDequant) {
          f.a[mma][r] = w[r][mma];
          f.a[mma][r + 2] = w[r][mma] ^ table[r].lo;
        } else {
          e2m1x8_to_e4m3(mine ? w[r][mma] : 0u, table[r], f.a[mma][r], f.a[mma][r + 2]);
        }
      }
  };
  auto decode_narrow = [&](const uint4 (&words)[2], const Exponents& exponents, Fragments& f) {
    const int shift[2] = {exponents[0] - row_base[0] + kE2m1E4m3MaxShift, exponents[1] - row_base[1] + kE2m1E4m3MaxShift};
    decode(words, shift, true, f);
  };
  // The 4 MMAs of a K tile into the partial (not waited for); accumulate: onto the window's earlier tiles.
  // PERF: without the fragment fences ptxas moved fragment writes between the MMAs and injected a
  // warpgroup.arrive before 3 of every 4 (ptxas C7519, 12 sites). The partial is fenced only where ordinary
  // instructions touch it (the promotion, after wait_group 0): a fence while MMAs that write it are in flight
  // made ptxas wait for them there (C7517) and serialize every wgmma (C7513).
  auto issue = [&](Fragments& f, unsigned long long descriptor, bool accumulate) {
#pragma unroll
    for (int j = 0; j < 4; ++j)
#pragma unroll
      for (int i = 0; i < 4; ++i) wgmma_fence_operand(f.a[j][i]);
    // Timing only: the fragments are still computed (the operand fences above keep them).
    if constexpr (WsDiag<Cfg>::value & kWsSkipMma) return;
    wgmma_fence();  // the fragments were written by ordinary instructions
#pragma unroll
    for (int j = 0; j < 4; ++j)
      // Permuted: core matrices of MMA j start at 256 j; kMmaOrder: MMA j is bytes 32 j of each
      // 128-byte (swizzled) row.
      wgmma_m64k32_e4m3_rs<BM>(reinterpret_cast<float(&)[BM / 2]>(partial), f.a[j],
                               wgmma_descriptor_advance(descriptor, j * (kMmaOrder ? 32 : 256)), accumulate || j > 0);
    wgmma_commit();
  };
  // After wait_group 0. NOTE: the fences keep the reads of the partial below the wait, and the next MMAs' writes
  // of it below these reads.
  auto promote = [&](const float (&scale)[2]) {
#pragma unroll
    for (int mt = 0; mt < kTilesM; ++mt)
#pragma unroll
      for (int i = 0; i < 4; ++i) wgmma_fence_operand(partial[mt][i]);
#pragma unroll
    for (int mt = 0; mt < kTilesM; ++mt)
#pragma unroll
      for (int i = 0; i < 4; ++i) acc[0][mt][i] = fmaf(partial[mt][i], scale[i >> 1], acc[0][mt][i]);
#pragma unroll
    for (int mt = 0; mt < kTilesM; ++mt)
#pragma unroll
      for (int i = 0; i < 4; ++i) wgmma_fence_operand(partial[mt][i]);
  };
  const auto is_wide = [&](int j) { return ((wide_tiles[j >> 5] >> (j & 31)) & 1u) != 0; };

  // Software-pipelined over two fragment sets (tile j's: frag[j % 2], as kStages is even): tile j's MMAs run
  // while this warpgroup decodes tile j + 1, and queue behind tile j - 1's. Narrow tiles share one base per
  // row, so their products sum in the partial over a window of kE4m3PromoteTiles tiles before the wait and
  // the promotion (one FFMA per accumulator); a wide tile runs its passes alone, each waited for and promoted.
  // PERF: one wait and promotion per tile (the row's base per tile) ran the Qwen3 MXFP4 x FP8 GEMM1 at M = 4096
  // in 610.6 us against the 16-bit values path's 423.9 (H100 ncu, bench/results/2026-12-07-h100-s63-e4m3-mma-order.md).
  // With one base per row, windows of 1, 2 and 4 tiles ran the step in 993-995, 1011-1024 and 995-1005 us (the scan
  // still the consumers'), at relative errors 3.83e-3, 4.88e-3 and 5.70e-3 (Qwen3 M = 256): the window is not the
  // bound, so it stays 1, DeepGEMM's 128 k (bench/results/2026-12-07-h100-s64-e4m3-window-scan.md).
  static_assert(kStages % 2 == 0, "tile j's fragments are frag[j % 2] with j % kStages unrolled");
  const unsigned long long first_descriptor = e4m3_first_descriptor<S>(smem_base);
  unsigned long long descriptor = ring.descriptor;
  int buffer = ring.buffer;
  unsigned buffer_parity = ring.parity;
  Fragments frag[2];
  if (tiles_k > 0 && !is_wide(0)) {
    uint4 words[2];
    Exponents first;
    load_exponents(0, first);
    // The ring stage of tile 0: 0, or where the persistent ring stands (its buffer: a stage per token buffer).
    const int stage0 = S::kPersistent ? buffer : 0;
    load_words(stage0, buffer, buffer_parity, words);
    decode_narrow(words, first, frag[0]);
    release_stage(stage0);
  }
  int window = 0;           // narrow tiles in the partial since the last promotion
  int running_buffer = -1;  // the token buffer of the tile before, whose MMAs may still run
  for (int j0 = 0; j0 < tiles_k; j0 += kStages) {
#pragma unroll
    for (int qq = 0; qq < kStages; ++qq) {
      const int j = j0 + qq;
      // The ring stage of tile j: qq (j0 is a multiple of kStages), or persistent the ring's buffer.
      const int q = S::kPersistent ? buffer : qq;
      Fragments& current = frag[qq % 2];
      Fragments& next = frag[(qq + 1) % 2];
      if (j < tiles_k) {
        const int next_stage = q + 1 == kStages ? 0 : q + 1;
        const int next_buffer = buffer + 1 == kBuffers ? 0 : buffer + 1;
        const unsigned next_parity = next_buffer == 0 ? buffer_parity ^ 1u : buffer_parity;
        const bool next_narrow = j + 1 < tiles_k && !is_wide(j + 1);
        if (!is_wide(j)) {
          issue(current, descriptor, window > 0);
          ++window;
          wgmma_wait<1>();  // tile j - 1's MMAs, which read `next`
          if (running_buffer >= 0) retire(running_buffer);
          running_buffer = buffer;
          if (next_narrow) {
            uint4 words[2];
            load_words(next_stage, next_buffer, next_parity, words);
            decode_narrow(words, ready, next);
            release_stage(next_stage);
          }
          if (window == kE4m3PromoteTiles || !next_narrow) {
            wgmma_wait<0>();
            retire(buffer);
            running_buffer = -1;
            promote(row_scale);
            window = 0;
          }
        } else {
          // The tile before promoted and retired (its next was not narrow): the partial is free.
          // NOTE: a no-op wait, but ptxas cannot see the one before through the branches: without it, it
          // serialized every wgmma of the kernel (C7513).
          wgmma_wait<0>();
          uint4 words[2];
          Exponents exponents;  // waited for here: wide tiles are the slow path
          load_exponents(j, exponents);
          load_words(q, buffer, buffer_parity, words);
          const int unshifted[2] = {6, 6};
          for (int group = 0; group < 4; ++group) {
            decode(words, unshifted, t == group, current);
            if (group == 0) release_stage(q);  // every code word has been read into a fragment
            float scale[2];
#pragma unroll
            for (int r = 0; r < 2; ++r) scale[r] = ue8m0_to_f32(__shfl_sync(0xFFFFFFFFu, exponents[r], (lane & ~3) | group));
            issue(current, descriptor, false);
            wgmma_wait<0>();
            promote(scale);
          }
          retire(buffer);
          if (next_narrow) {
            load_words(next_stage, next_buffer, next_parity, words);
            decode_narrow(words, ready, next);
            release_stage(next_stage);
          }
        }
#pragma unroll
        for (int r = 0; r < 2; ++r) ready[r] = pending[r];
        load_exponents(j + 3, pending);
        descriptor = next_buffer == 0 ? first_descriptor : wgmma_descriptor_advance(descriptor, kBufferBytes);
        buffer = next_buffer;
        buffer_parity = next_parity;
      }
    }
  }
  // NOTE: nothing is in flight here (the last tile promotes), but ptxas cannot see that through the loop and
  // otherwise waits before the caller's first use of registers the MMAs wrote (C7517), serializing them (C7513).
  wgmma_wait<0>();
  ring = {buffer, buffer_parity, descriptor};
}

}  // namespace moeq_dev
