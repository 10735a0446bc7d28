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
// the e4m3 codes relative to the row's largest exponent m of the tile (format/e2m1_e4m3.cuh:
// exact while the four exponents lie within 12 binades), the tile's products land in a zeroed
// partial and are promoted into the fp32 accumulators once per tile with 2^(m - 133):
// FP8 tensor-core sums stay within 128 k (the promotion interval DeepGEMM uses for the same
// reason: the e4m3 MMA's internal accumulation keeps fewer bits than fp32).
// Tiles where some row's exponents spread wider (or hold the NaN scale 0xFF) are found before
// the main loop (a bit per K tile in shared memory, the same for every consumer warp, so the
// warpgroups issue the same MMAs) and run one pass per group, each promoted with its own scale.
// S::kMmaOrder (`/t` tiles): the token codes come with each 128-k tile already in that K order
// (format/mma_order.cuh, e4m3_mma_order_position: the same 4-byte-unit permutation the permute
// warps apply), so wgmma reads the copy ring's 128-byte-swizzled staging itself (MMA j at byte
// 32 j of each row, as the 16-bit `/t` tile's k16 step j), the consumers wait for `landed`, and a
// stage goes back to the copy warps once the MMAs that read its tokens have completed.
// S::kPersistent (`/s`, with `/t` only): the caller loops over output tiles; the ring's stage, phase and
// descriptor (E4m3Ring) run on from tile to tile, and each tile scans its own rows' wide K tiles.
// PERF: Qwen3 MXFP4 x FP8 per token at M = 4096 (H100, bench/results/2026-12-07-h100-s63-e4m3-mma-order.md): whole
// steps 1141.7 us on `/p` -> 1094.6 on `/p/t` -> 1091.7 on `/p/s/t` (GEMM2 475.9 -> 432.0 us; GEMM1 610.7 ->
// 610.6, against the 16-bit values path's 423.9). GEMM1 issues at the values path's rate (IPC 1.5) for 44%
// longer: the consumers' decode and promotion bound it, not the token path. The persistent stage taken from the
// ring's buffer instead of computed per K tile: st6 steps 1096.4 -> 1083.5 us.
// NOTE: NVRTC-safe: no standard headers.
#include "moeq_dev/format/e2m1_e4m3.cuh"
#include "moeq_dev/format/ue8m0.cuh"
#include "moeq_dev/kernels/moe_gemm_common.cuh"
#include "moeq_dev/ptx/mbarrier.cuh"
#include "moeq_dev/ptx/wgmma.cuh"

namespace moeq_dev {

// K tiles per CTA the wide-tile bits cover (K <= 32768; the host admits no larger K).
constexpr int kE4m3WideWords = 8;

// 2^(m - 133): the promotion factor of a tile whose row's largest scale exponent is m (the codes
// carry 2^(e - m + 12 - 6) of each group's 2^(e - 127)); fp32 subnormal below m = 7.
__device__ __forceinline__ float e4m3_fold_scale(int m) {
  return __uint_as_float(m >= 7 ? static_cast<unsigned>(m - 6) << 23 : 1u << (m + 16));
}

// Where the consumers' token ring stands: the buffer the next K tile reads (a permuted buffer, or with
// MMA-order tokens its stage), its phase and its wgmma descriptor. Persistent tiles carry it across tiles.
struct E4m3Ring {
  int buffer;
  unsigned parity;
  unsigned long long descriptor;
};

template <class S>
__device__ __forceinline__ unsigned long long e4m3_first_descriptor(unsigned smem_base) {
  return S::kMmaOrder ? wgmma_descriptor_swizzle128(smem_base)
                      : wgmma_descriptor(smem_base + S::kPermutedOffset, 128, 1024);
}

template <class S>
__device__ __forceinline__ E4m3Ring e4m3_ring_start(unsigned smem_base) {
  return {0, 0u, e4m3_first_descriptor<S>(smem_base)};
}

// One output tile's main loop. clear_wide: zero the wide-tile bits first (a persistent tile after the first: every consumer has passed
// the previous tile's epilogue barriers, so none reads them any more).
template <class Cfg, class S, class ChannelOf>
__device__ __forceinline__ void moe_gemm_ws_e4m3_consumers(const MoeGemmParams& p, int e, int n0, int tiles_k,
                                                           E4m3Ring& ring, bool clear_wide,
                                                           unsigned smem_base, unsigned landed0, unsigned staged0,
                                                           unsigned permuted0, unsigned retired0, unsigned* wide_tiles, int ctid,
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

  // The wide tiles: some row of the block has group exponents more than 12 binades apart there.
  // (row, tile) pairs past N are copies of row N - 1 (the lanes' rows below), which is in this block.
  // PERF: kScanBatch pairs' loads in flight per thread: one pair per iteration waited for its
  // loads each time (a global latency per pair, 8 pairs per thread at Qwen3's K = 2048).
  constexpr int kScanBatch = 8;
  if (clear_wide) {
    if (ctid < kE4m3WideWords) wide_tiles[ctid] = 0;
    named_barrier_sync(3, kConsumerThreads);
  }
  const int pairs = S::kBlockN * tiles_k;
  for (int first = ctid; first < pairs; first += kConsumerThreads * kScanBatch) {
    unsigned char v[kScanBatch][4];
#pragma unroll
    for (int u = 0; u < kScanBatch; ++u) {
      const int i = first + u * kConsumerThreads, row = i / tiles_k, tile = i - row * tiles_k;
      const bool valid = i < pairs && n0 + row < N;
      const unsigned char* s = scales + (valid ? static_cast<long long>(n0 + row) * groups_k + 4 * tile : 0);
#pragma unroll
      for (int q = 0; q < 4; ++q) v[u][q] = valid ? s[q] : 0;
    }
#pragma unroll
    for (int u = 0; u < kScanBatch; ++u) {
      int lo = 255, hi = 0;
#pragma unroll
      for (int q = 0; q < 4; ++q) {
        lo = min(lo, static_cast<int>(v[u][q]));
        hi = max(hi, static_cast<int>(v[u][q]));
      }
      const int tile = (first + u * kConsumerThreads) % tiles_k;
      if (hi == static_cast<int>(kUe8m0NanCode) || hi - lo > kE2m1E4m3MaxShift)
        atomicOr(&wide_tiles[tile >> 5], 1u << (tile & 31));
    }
  }
  named_barrier_sync(3, kConsumerThreads);

  // This lane's group (t) of row channel_of(nt, r) in tile j: scale_offset[nt][r] + 4 j.
  int scale_offset[kTilesN][2];
#pragma unroll
  for (int nt = 0; nt < kTilesN; ++nt)
#pragma unroll
    for (int r = 0; r < 2; ++r) scale_offset[nt][r] = min(n0 + channel_of(nt, r), N - 1) * groups_k + t;
  // The exponents of this lane's group of rows g and g + 8 in tile j (0 past the last tile), kept
  // as loaded until used: tile j + 1's (`ready`, decoded during iteration j) and tile j + 2's
  // (`pending`, loaded during iteration j - 1 and waited for one tile later).
  // PERF: packed into one word as they arrived, each tile's loads were waited for at once (a
  // global latency per K tile and consumer warp); a ring of kStages of them spilled (ptxas).
  using Exponents = unsigned char[2];
  auto load_exponents = [&](int j, Exponents& slot) {
#pragma unroll
    for (int r = 0; r < 2; ++r) slot[r] = j < tiles_k ? scales[scale_offset[0][r] + 4 * j] : 0;
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
  float partial[kTilesM][4];  // one 64-channel tile's products of a K tile (or of one group)

  // A narrow tile's A fragments (MMA j: rows g / g + 8, k halves) and its rows' promotion scales.
  struct Fragments {
    unsigned a[4][4];
    float scale[2];
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
  // tokens too, once the tile's MMAs have completed: the arrival at the end of the tile instead).
  auto release_stage = [&](int q) {
    if constexpr (!kMmaOrder) {
      __syncwarp();
      if (lane == 0) mbarrier_arrive(staged0 + 8 * q);
    }
  };
  // Decodes 8 codes per word into fragments: each row's groups relative to the row's largest
  // exponent of the tile (narrow tiles), or, for pass `group` of a wide tile, this lane's words at
  // 2^0 if it owns that group and zeros otherwise, with the group's own scale.
  auto decode = [&](const uint4 (&words)[2], const Exponents& exponents, int group, Fragments& f) {
    E2m1E4m3Table table[2];
#pragma unroll
    for (int r = 0; r < 2; ++r) {
      const int exponent = exponents[r];
      if (group < 0) {
        int m = max(exponent, __shfl_xor_sync(0xFFFFFFFFu, exponent, 1));
        m = max(m, __shfl_xor_sync(0xFFFFFFFFu, m, 2));
        table[r] = e2m1_e4m3_table(exponent - m + kE2m1E4m3MaxShift);
        f.scale[r] = e4m3_fold_scale(m);
      } else {
        table[r] = e2m1_e4m3_table(6);
        f.scale[r] = ue8m0_to_f32(__shfl_sync(0xFFFFFFFFu, exponent, (lane & ~3) | group));
      }
    }
    const bool mine = group < 0 || t == group;
    const unsigned w[2][4] = {{words[0].x, words[0].y, words[0].z, words[0].w},
                              {words[1].x, words[1].y, words[1].z, words[1].w}};
#pragma unroll
    for (int mma = 0; mma < 4; ++mma)
#pragma unroll
      for (int r = 0; r < 2; ++r) e2m1x8_to_e4m3(mine ? w[r][mma] : 0u, table[r], f.a[mma][r], f.a[mma][r + 2]);
  };
  // The 4 MMAs of a K tile into the zeroed partial (not waited for).
  // PERF: without the operand fences ptxas moved fragment writes (the `current = next` copies)
  // between the MMAs and injected a warpgroup.arrive before 3 of every 4 (ptxas C7519, 12 sites).
  auto fence_operands = [&](Fragments& f) {
#pragma unroll
    for (int j = 0; j < 4; ++j)
#pragma unroll
      for (int i = 0; i < 4; ++i) wgmma_fence_operand(f.a[j][i]);
#pragma unroll
    for (int mt = 0; mt < kTilesM; ++mt)
#pragma unroll
      for (int i = 0; i < 4; ++i) wgmma_fence_operand(partial[mt][i]);
  };
  auto issue = [&](Fragments& f, unsigned long long descriptor) {
    fence_operands(f);
    wgmma_fence();  // the fragments were written, and the partial read, by ordinary instructions
#pragma unroll
    for (int j = 0; j < 4; ++j)
      // Permuted: core matrices of MMA j start at 256 j; kMmaOrder: MMA j is bytes 32 j of each
      // 128-byte (swizzled) row.
      wgmma_m64k32_e4m3_rs<BM>(reinterpret_cast<float(&)[BM / 2]>(partial), f.a[j],
                               wgmma_descriptor_advance(descriptor, j * (kMmaOrder ? 32 : 256)), j > 0);
    wgmma_commit();
    fence_operands(f);
  };
  auto promote = [&](const float (&scale)[2]) {
#pragma unroll
    for (int mt = 0; mt < kTilesM; ++mt)
#pragma unroll
      for (int i = 0; i < 4; ++i) acc[0][mt][i] = fmaf(partial[mt][i], scale[i >> 1], acc[0][mt][i]);
  };
  const auto is_wide = [&](int j) { return ((wide_tiles[j >> 5] >> (j & 31)) & 1u) != 0; };

  // Software-pipelined: tile j's MMAs run while this warpgroup decodes tile j + 1 (into `next`,
  // since the MMAs read `current`'s registers until they complete); then the wait, the promotion.
  // PERF: decode, MMAs, wait and promotion in turn ran the Qwen3 MXFP4 x FP8 GEMM1 at M = 4096 in
  // 670 us against the 16-bit tile's 526 (ncu, bench/results/2026-12-02-h200-e4m3-ws.md).
  // Wide tiles are not decoded ahead: they run their passes in turn.
  const unsigned long long first_descriptor = e4m3_first_descriptor<S>(smem_base);
  unsigned long long descriptor = ring.descriptor;
  int buffer = ring.buffer;
  unsigned buffer_parity = ring.parity;
  Fragments current;
  if (tiles_k > 0 && !is_wide(0)) {
    uint4 words[2];
    Exponents first;
    load_exponents(0, first);
    // The ring stage of tile 0: 0, or where the persistent ring stands (its buffer: a stage per token buffer).
    const int stage0 = S::kPersistent ? buffer : 0;
    load_words(stage0, buffer, buffer_parity, words);
    decode(words, first, -1, current);
    release_stage(stage0);
  }
  for (int j0 = 0; j0 < tiles_k; j0 += kStages) {
#pragma unroll
    for (int qq = 0; qq < kStages; ++qq) {
      const int j = j0 + qq;
      // The ring stage of tile j: qq (j0 is a multiple of kStages), or persistent the ring's buffer.
      const int q = S::kPersistent ? buffer : qq;
      if (j < tiles_k) {
        const int next_stage = q + 1 == kStages ? 0 : q + 1;
        const int next_buffer = buffer + 1 == kBuffers ? 0 : buffer + 1;
        const unsigned next_parity = next_buffer == 0 ? buffer_parity ^ 1u : buffer_parity;
        const bool next_narrow = j + 1 < tiles_k && !is_wide(j + 1);
        if (!is_wide(j)) {
          issue(current, descriptor);
          Fragments next;
          if (next_narrow) {
            uint4 words[2];
            load_words(next_stage, next_buffer, next_parity, words);
            decode(words, ready, -1, next);
            release_stage(next_stage);
          }
          wgmma_wait<0>();
          promote(current.scale);
          if (next_narrow) current = next;
        } else {
          uint4 words[2];
          Exponents exponents;  // waited for here: wide tiles are the slow path
          load_exponents(j, exponents);
          load_words(q, buffer, buffer_parity, words);
          for (int group = 0; group < 4; ++group) {
            Fragments pass;
            decode(words, exponents, group, pass);
            if (group == 0) release_stage(q);  // every code word has been read into a fragment
            issue(pass, descriptor);
            wgmma_wait<0>();
            promote(pass.scale);
          }
          if (next_narrow) {
            load_words(next_stage, next_buffer, next_parity, words);
            decode(words, ready, -1, current);
            release_stage(next_stage);
          }
        }
#pragma unroll
        for (int r = 0; r < 2; ++r) ready[r] = pending[r];
        load_exponents(j + 3, pending);
        // Every MMA of tile j has completed (wait_group 0): its permuted tokens go back (kMmaOrder:
        // its stage, codes and tokens).
        __syncwarp();
        if (lane == 0) mbarrier_arrive((kMmaOrder ? staged0 : retired0) + 8 * buffer);
        descriptor = next_buffer == 0 ? first_descriptor : wgmma_descriptor_advance(descriptor, kBufferBytes);
        buffer = next_buffer;
        buffer_parity = next_parity;
      }
    }
  }
  ring = {buffer, buffer_parity, descriptor};
}

}  // namespace moeq_dev
