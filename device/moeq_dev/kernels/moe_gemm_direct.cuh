#pragma once
// The direct-load body of the MoE GEMM (`/r` tiles, GEMM v13), for blocks of 8 or 16 tokens where
// each weight byte is read once and the time is the weights' transfer.
// No shared-memory ring, no copy warp and no barrier in the K loop: each lane loads its own codes
// of each K tile (16 or 32 bytes per 16-channel tile) and their scales straight into a register
// ring (2 deep: one tile ahead; 4 to 8 deep: groups of kDepth / 2 tiles, each issued as the group
// before it starts), its token fragments with them, then dequantizes into A
// fragments and multiplies with mma.sync exactly as kernels/moe_gemm_sync.cuh does (same operand
// roles, same K order inside a tile, same dequantization paths). Warps meet only in the epilogue.
// Why (docs/perf-notes.md v10-v13): the copy-warp tile's CTAs stream at ~90% of copy while the
// SMs are full, but a CTA does not speed up when it runs alone (its ring is a chain of waits
// between the copy warp and all compute warps), so the last, part-full wave runs slowly.
// PERF: a 2-deep ring beat a 4-deep one that issued a tile per step (Qwen3 GEMM1 FP8-block M = 16
// 75.2 -> 66.3 us, INT4 58.0 -> 49.6; call C of bench/results/2026-12-01-h200-gemm-v13.md): that
// ring waited each step for the tile it had just issued (one scoreboard for every load; the NOTE
// at the deeper ring). Issued in groups, 4 deep wins for INT4 at 4 CTAs per SM (GEMM v16: Qwen3
// GEMM1 M = 16 49.5 -> 45.5 us; bench/results/2026-12-01-h200-gemm-v16.md). A
// per-warp shared-memory ring filled by each lane's cp.async instead (75-86 registers) was no
// faster than the copy-warp tile (call B): each warp also stages its own copy of the tokens.
// Scales: one load per fragment row and K tile in the ring beside the codes, or, for INT4 in groups of
// 128 with K % 256 == 0, one per row and pass of 4 K tiles (kernels/direct_pass_scales.cuh, GEMM v18:
// Qwen3 GEMM1 M = 16 45.6 -> 40.6 us).
// Codes: prepared (format/prepared.cuh): one (4-bit) or two (8-bit) 16-byte loads per 16-channel
// tile and K tile, whole fragment registers; canonical: rows g and g + 8, 8 (4-bit) or 16 (8-bit)
// bytes each, zero past K. Codes bypass L1 (read once); tokens and scales go through it.
// e4m3 activations (Cfg::kActE4m3, FP8 per-channel weights, sm_89+; issue 5 step 2): the token
// codes and the weight codes go straight into mma.sync m16n8k32 e4m3, no decode; the channel scale
// and the token's row scale come in the epilogue. A lane reads the same physical k [16t, 16t + 16)
// of each K tile as above, 16 bytes per token row (half of bf16's); MMA q (0, 1) of a K tile takes
// as logical k 4t..4t+3 the physical 16t + 8q + [0, 4) and as 16 + 4t.. the physical 16t + 8q + 4 +
// [0, 4), for A and B alike, so every physical k of the tile is summed once (e4m3_a_fragment).
#include "moeq_dev/kernels/direct_pass_scales.cuh"
#include "moeq_dev/kernels/direct_row_quantize.cuh"
#include "moeq_dev/kernels/moe_gemm_activation_epilogue.cuh"
#include "moeq_dev/kernels/moe_gemm_common.cuh"
#include "moeq_dev/kernels/moe_gemm_direct_shape.cuh"
#include "moeq_dev/format/weights_fragment.cuh"
#include "moeq_dev/ptx/grid_dependency.cuh"
#include "moeq_dev/ptx/ldg.cuh"
#include "moeq_dev/ptx/mma.cuh"

namespace moeq_dev {

template <class Cfg>
__device__ __forceinline__ void moe_gemm_direct_block(const MoeGemmParams& p) {
  using S = MoeGemmDirectShape<Cfg>;
  constexpr int BM = S::kBlockM, BN = S::kBlockN, BK = S::kBlockK, T = S::kThreads, D = S::kDepth, G = S::kWarpsK;
  constexpr int kTilesM = S::kTilesM, kTilesN = S::kTilesN, kWords = S::kWords;
  constexpr bool kFourBit = S::kCodeBits == 4;
  constexpr int kPreparedBlockBytes = S::kCodeBits * 128;  // 16 channels x 64 k

  extern __shared__ __align__(16) unsigned char smem[];
  __shared__ int row_src[BM];
  __shared__ int row_dst[BM];
  __shared__ int block_expert;
  // Cfg::kRowScales: each row's A-row scale, fetched before the main loop.
  // PERF: read in the epilogue (one or two dependent global loads per row after the last MMA) the
  // row scales cost Qwen3-30B-A3B's M = 256 GEMMs 1.9 / 2.6 us on the 24-row tile (ncu, session 30,
  // bench/results/2026-12-03-h200-block48.md); here the loads overlap the main loop.
  __shared__ float block_row_scales[Cfg::kRowScales ? BM : 1];

  const int tid = threadIdx.x;
  const int m_block = blockIdx.x;
  const int n0 = blockIdx.y * BN;
  // PERF: self-routed (GEMM1 at the smallest M), the rows come from the step's inputs and the weights stream while
  // the routing kernel runs; the wait for it moves to the epilogue.
  constexpr bool self_routed = gemm_self_routed<Cfg>();
  constexpr bool quantizes_rows = gemm_quantizes_rows<Cfg>(), rows_activated = gemm_rows_activated<Cfg>();
  static_assert(!self_routed || !Cfg::kRowScales || (quantizes_rows && !rows_activated),
                "self-routed GEMM1 reads 16-bit activations, or quantizes them itself");
  constexpr bool activation_epilogue = gemm_activation_epilogue<Cfg>();
  static_assert(!activation_epilogue || !Cfg::kRowScales, "the activation epilogue is GEMM1's, over 16-bit A");
  // A GEMM making its FP8 per-token input itself (kernels/direct_row_quantize.cuh): GEMM2 from GEMM1's gate_up rows
  // (rows_activated), a self-routed GEMM1 from the caller's rows; the rows' values staged past the epilogue's shared
  // memory, their scales in block_row_scales.
  static_assert(!quantizes_rows || (Cfg::kRowScales && !Cfg::kActE4m3 && !activation_epilogue &&
                                    (rows_activated ? !self_routed : self_routed)),
                "a GEMM quantizing its rows: 16-bit values with row scales, GEMM2's plain kernel or a self-routed GEMM1");
  if constexpr (self_routed) {
    if (!self_routed_block_rows<BM, T>(p, m_block, tid, row_src, row_dst, &block_expert)) {
      wait_prior_grid();  // NOTE: every CTA waits before it ends, so the grid never completes before the routing
      return;
    }
  } else if (!load_block_rows<BM, T>(p, m_block, tid, row_src, row_dst, &block_expert)) {
    return;
  }
  [[maybe_unused]] unsigned short* const staged = reinterpret_cast<unsigned short*>(smem + S::kSmemBytes);
  if constexpr (Cfg::kRowScales && !quantizes_rows)
    for (int r = tid; r < BM; r += T) block_row_scales[r] = a_row_scale(p, row_src[r]);
  // The rows this tile quantizes itself and their scales: made once the first K tiles' codes and scales are in flight
  // (the rings call it before their first token loads), so that the weights stream meanwhile. Every thread reaches it,
  // whatever its K tiles (its barrier).
  auto make_rows = [&]() {
    if constexpr (quantizes_rows) {
      if constexpr (rows_activated) {
        using Source = ActivationSource<Cfg::kRowsActivation, Cfg::kRowsInterleaved, Cfg::kActBf16>;
        quantize_block_rows_fp8_token<Cfg::kActBf16, BM, T / 32>(Source{p.a, p.k, p.activation}, row_src, p.k, staged,
                                                                 block_row_scales, tid / 32, tid % 32);
      } else {
        quantize_block_rows_fp8_token<Cfg::kActBf16, BM, T / 32>(PlainRowsSource{p.a, p.a_row_stride}, row_src, p.k,
                                                                 staged, block_row_scales, tid / 32, tid % 32);
      }
      __syncthreads();
    }
  };

  const int e = block_expert, N = p.n, K = p.k;
  const int tiles_n16 = (N + 15) / 16, tiles_k = (K + BK - 1) / BK;
  const int warp = tid / 32, lane = tid % 32, g = lane / 4, t = lane % 4;
  const int warp_k = warp / Cfg::kWarpsN, warp_n = warp % Cfg::kWarpsN;
  auto lane_channel = [&](int nt, int r) { return warp_n * (BN / Cfg::kWarpsN) + nt * 16 + g + r * 8; };
  // The weight row of a block-relative channel: n0 + c, or gate and up rows paired (epilogue_weight_row).
  auto weight_row = [&](int c) { return epilogue_weight_row<Cfg, BN>(c, n0, N); };
  auto lane_weight_row = [&](int nt, int r) { return weight_row(lane_channel(nt, r)); };

  // This lane's token rows (padding rows read the block's first row: their columns are never
  // stored, and an MMA column depends only on its own token), at its physical k 16t of the tile.
  constexpr int kTokenBytes = Cfg::kActE4m3 ? 1 : 2;
  // Rows the tile quantized itself: their staged values (padding rows read block row 0's: never stored either).
  const unsigned char* tok_row[kTilesM];
#pragma unroll
  for (int mt = 0; mt < kTilesM; ++mt) {
    if constexpr (quantizes_rows) {
      const int r = row_src[mt * 8 + g] >= 0 ? mt * 8 + g : 0;
      tok_row[mt] = reinterpret_cast<const unsigned char*>(staged + r * staged_row_stride(K) + 16 * t);
    } else {
      int src = row_src[mt * 8 + g];
      if (src < 0) src = row_src[0] >= 0 ? row_src[0] : 0;
      tok_row[mt] = reinterpret_cast<const unsigned char*>(p.a) + (static_cast<long long>(src) * p.a_row_stride + 16 * t) * kTokenBytes;
    }
  }
  // This lane's code pointers per 16-channel tile (rows past N read the last block or row: their
  // products are never stored).
  const long long row_bytes = static_cast<long long>(K) * S::kCodeBits / 8;
  const unsigned char* code_ptr[kTilesN][2];
#pragma unroll
  for (int nt = 0; nt < kTilesN; ++nt) {
    if constexpr (Cfg::kPreparedCodes) {
      const int j16 = min((lane_weight_row(nt, 0) - g) / 16, tiles_n16 - 1);
      code_ptr[nt][0] = p.codes + (static_cast<long long>(e) * tiles_n16 + j16) * tiles_k * kPreparedBlockBytes + lane * 16;
      code_ptr[nt][1] = code_ptr[nt][0] + 512;  // 8-bit: the block's second 512 bytes
    } else {
#pragma unroll
      for (int r = 0; r < 2; ++r) {
        const int n = min(lane_weight_row(nt, r), N - 1);
        code_ptr[nt][r] = p.codes + (static_cast<long long>(e) * N + n) * row_bytes + 16 * t * S::kCodeBits / 8;
      }
    }
  }
  const LaneScaleRows<Cfg, kTilesN> scale_rows(p.scaling, e, 0, N, K, lane_weight_row);
  constexpr bool kAccScaleTile = AccumulatorScaled<Cfg>::value;
  const bool acc_scales = kAccScaleTile && (Cfg::kFormat == WeightFormatId::kFp8Block || scale_rows.group_shift >= 6);
  const int scale_k = acc_scales ? 0 : 16 * t;  // as kernels/moe_gemm_sync.cuh (the partial last tile)

  // A lane's code words of a K tile, in the order kernels/moe_gemm_sync.cuh reads them (canonical
  // 4-bit: row g's two words, then row g + 8's; 8-bit: row g's four, then row g + 8's).
  using CodeWords = unsigned[kTilesN][kWords];
  // 16-bit: tok[mt][h]: B fragments of steps 2h (words 0, 1) and 2h + 1 (words 2, 3): physical k
  // 16t + 8h + [0, 8). e4m3: tok[mt][0] only: words 2q and 2q + 1 are MMA q's b0 and b1.
  using TokenFragments = unsigned[kTilesM][2][4];
  using TileScales = LaneScale[kTilesN][2];
  auto load_codes = [&](CodeWords& words, int kt) {
    const bool in_k = kt * BK + 16 * t < K;
#pragma unroll
    for (int nt = 0; nt < kTilesN; ++nt) {
      if constexpr (Cfg::kPreparedCodes) {
        const unsigned char* src = code_ptr[nt][0] + static_cast<long long>(kt) * kPreparedBlockBytes;
        const uint4 v = ldg_128<false>(src, true);
        words[nt][0] = v.x, words[nt][1] = v.y, words[nt][2] = v.z, words[nt][3] = v.w;
        if constexpr (!kFourBit) {
          const uint4 u = ldg_128<false>(src + 512, true);
          words[nt][4] = u.x, words[nt][5] = u.y, words[nt][6] = u.z, words[nt][7] = u.w;
        }
      } else {
        const long long offset = static_cast<long long>(kt) * BK * S::kCodeBits / 8;
#pragma unroll
        for (int r = 0; r < 2; ++r) {
          if constexpr (kFourBit) {
            const uint2 v = ldg_stream_64(code_ptr[nt][r] + offset, in_k);
            words[nt][2 * r] = v.x, words[nt][2 * r + 1] = v.y;
          } else {
            const uint4 v = ldg_128<false>(code_ptr[nt][r] + offset, in_k);
            words[nt][4 * r] = v.x, words[nt][4 * r + 1] = v.y, words[nt][4 * r + 2] = v.z, words[nt][4 * r + 3] = v.w;
          }
        }
      }
    }
  };
  // whole_tiles (a constant at the call): K is whole K tiles, so no load is predicated (and no
  // fragment zeroed) on the K bound.
  auto load_tokens = [&](TokenFragments& tok, int kt, bool whole_tiles = false) {
    const bool in_k = whole_tiles || kt * BK + 16 * t < K;
#pragma unroll
    for (int mt = 0; mt < kTilesM; ++mt)
#pragma unroll
      for (int h = 0; h < S::kTokenLoads; ++h) {
        const unsigned char* src = tok_row[mt] + (kt * BK + 8 * h) * kTokenBytes;
        // Staged rows hold zeros past K up to whole K tiles: no bound.
        const uint4 v = quantizes_rows ? *reinterpret_cast<const uint4*>(src) : ldg_128<true>(src, in_k);
        tok[mt][h][0] = v.x, tok[mt][h][1] = v.y, tok[mt][h][2] = v.z, tok[mt][h][3] = v.w;
      }
  };

  float acc[kTilesN][kTilesM][4];
  zero_accumulators(acc);

  // One K tile's products: dequantization and MMAs as kernels/moe_gemm_sync.cuh (same helpers, same K
  // order), the token fragments from registers.
  auto multiply = [&](DequantPath path, const CodeWords& words, const FragmentScale (&decoded)[kTilesN][2],
                      const TokenFragments& tok, float (&dst)[kTilesN][kTilesM][4]) {
#pragma unroll
    for (int nt = 0; nt < kTilesN; ++nt)
#pragma unroll
      for (int h = 0; h < 2; ++h) {
        unsigned a[2][4];  // A fragments of steps 2h and 2h + 1
        if constexpr (Cfg::kPreparedCodes) {
#pragma unroll
          for (int q = 0; q < 2; ++q) prepared_a_fragment<Cfg>(words[nt], 2 * h + q, decoded[nt], path, a[q]);
        } else {
          using RowWords = const unsigned(&)[2][kWords / 2];  // rows g and g + 8
          canonical_a_fragments<Cfg>(reinterpret_cast<RowWords>(words[nt])[0], reinterpret_cast<RowWords>(words[nt])[1],
                                     h, decoded[nt], path, a);
        }
#pragma unroll
        for (int q = 0; q < 2; ++q)
#pragma unroll
          for (int mt = 0; mt < kTilesM; ++mt)
            mma_m16n8k16<Cfg::kActBf16>(dst[nt][mt], a[q], tok[mt][h][2 * q], tok[mt][h][2 * q + 1]);
      }
  };
  constexpr bool kVoteFold = Cfg::kPreparedCodes && MxFoldable<Cfg>::value;
  auto compute = [&](const CodeWords& words, const TileScales& scales, const TokenFragments& tok) {
    if constexpr (Cfg::kActE4m3) {
      // Per-channel and row scales in the epilogue: the codes' products straight into acc.
#pragma unroll
      for (int nt = 0; nt < kTilesN; ++nt)
#pragma unroll
        for (int q = 0; q < 2; ++q) {
          unsigned a[4];
          e4m3_a_fragment<Cfg::kPreparedCodes>(words[nt], q, a);
#pragma unroll
          for (int mt = 0; mt < kTilesM; ++mt) mma_m16n8k32_e4m3(acc[nt][mt], a, tok[mt][0][2 * q], tok[mt][0][2 * q + 1]);
        }
    } else {
      multiply_scaled_tile<Cfg, kAccScaleTile, kVoteFold>(
          scales, p.scaling, acc_scales, acc,
          [&](DequantPath path, const FragmentScale (&decoded)[kTilesN][2], float (&dst)[kTilesN][kTilesM][4]) {
            multiply(path, words, decoded, tok, dst);
          });
    }
  };

  // K group warp_k takes the tiles warp_k, warp_k + G, ...: tile j of this warp is warp_k + G j.
  const int my_tiles = tiles_k > warp_k ? (tiles_k - warp_k + G - 1) / G : 0;
  // tokens false: the ring's first tiles where the tile quantizes its rows (make_rows comes between).
  auto load_tile = [&](CodeWords& words, TileScales& scales, TokenFragments& tok, int kt, bool tokens = true) {
    load_codes(words, kt);
    scale_rows.load(scales, scale_k + kt * BK, K);
    if (tokens) load_tokens(tok, kt);
  };
  // Scales per tile: LaneScaleRows::load with each tile's codes, in the ring beside them.
  auto run_tile_scaled_ring = [&]() {
    CodeWords code_ring[D];
    TileScales scale_ring[D];
    if constexpr (D == 2) {
      // Codes and scales one tile ahead, tokens one tile ahead (every warp of the CTA loads the same
      // token bytes: after the first, L1 hits).
      TokenFragments tok[2];
      if (my_tiles > 0) load_tile(code_ring[0], scale_ring[0], tok[0], warp_k, !quantizes_rows);
      make_rows();
      if (quantizes_rows && my_tiles > 0) load_tokens(tok[0], warp_k);
      for (int j0 = 0; j0 < my_tiles; j0 += D) {
#pragma unroll
        for (int q = 0; q < D; ++q) {
          const int j = j0 + q;
          if (j < my_tiles) {
            if (j + 1 < my_tiles) load_tile(code_ring[(q + 1) % D], scale_ring[(q + 1) % D], tok[(q + 1) % 2], warp_k + G * (j + 1));
            compute(code_ring[q], scale_ring[q], tok[q % 2]);
          }
        }
      }
    } else {
      // Deeper rings: the tiles come in groups of P = D / 2, a group's loads issued together as the
      // group before it starts, so a tile's data is in flight for P tiles of compute.
      // NOTE: ptxas gives every load of this loop one scoreboard, and a first use waits for all the
      // loads on it, so a ring that issues one tile per step and reads the tile issued D - 1 steps
      // before waits, at every step, for the tile it has just issued (GEMM v16, docs/perf-notes.md).
      // Here the only waits are at the group starts, before the next group's loads issue:
      // `after_arrival` is 0 at run time (K < 2^31) but reads the group's first code word, and the
      // loads' tile indices and branches take it, so they cannot issue before the group is in.
      constexpr int P = D / 2;
      const unsigned zero_at_run_time = static_cast<unsigned>(K) >> 31;
      TokenFragments tok[D];
#pragma unroll
      for (int r = 0; r < P; ++r)
        if (r < my_tiles) load_tile(code_ring[r], scale_ring[r], tok[r], warp_k + G * r, !quantizes_rows);
      make_rows();
      if constexpr (quantizes_rows)
#pragma unroll
        for (int r = 0; r < P; ++r)
          if (r < my_tiles) load_tokens(tok[r], warp_k + G * r);
      // Two groups per pass (compile-time ring slots); each group is one block from its wait to its
      // last tile, so no path reaches a tile of the group around the wait (ptxas waits again at joins).
      for (int j0 = 0; j0 < my_tiles; j0 += D) {
#pragma unroll
        for (int h = 0; h < 2; ++h) {
          const int jg = j0 + h * P;
          if (jg < my_tiles) {
            const int after_arrival = static_cast<int>(code_ring[h * P][0][0] & zero_at_run_time);
#pragma unroll
            for (int r = 0; r < P; ++r) {
              const int next = jg + P + r + after_arrival, slot = (1 - h) * P + r;
              if (next < my_tiles) load_tile(code_ring[slot], scale_ring[slot], tok[slot], warp_k + G * next);
            }
#pragma unroll
            for (int r = 0; r < P; ++r)
              if (r == 0 || jg + r < my_tiles) compute(code_ring[h * P + r], scale_ring[h * P + r], tok[h * P + r]);
          }
        }
      }
    }
  };

  // Scales per pass of 4 K tiles (kernels/direct_pass_scales.cuh): one load per row and pass,
  // issued with the codes of the pass's first tile, so it waits where those codes do. The passes
  // come in pairs (compile-time words) and the ring slots as in run_tile_scaled_ring.
  // MX only on the 4-deep ring, whose waits come at group starts before the next loads; its 2-deep
  // form waited for the next tile's loads at each pass word's first use (GEMM v19, call 1).
  constexpr bool kPassScales =
      PassScalable<Cfg>::value && G == 1 && (PassScalable<Cfg>::kMx ? D == 4 : (D == 2 || D == 4));
  auto run_pass_scaled_ring = [&]() {
    using PassWords = PassScaleWords<kTilesN>;
    constexpr int L = PassScalable<Cfg>::kTiles;  // K tiles per pass
    // One group per pass (MX on the 4-deep ring): fold_pass_scales serves the group's 2 tiles.
    constexpr bool kPassFold = kVoteFold && PassScalable<Cfg>::kMx && D == 4;
    const int mx_lane_shift = 8 * (t >> 1);
    // pass_scales_fit: K is whole passes, so whole K tiles.
    auto load_codes_tokens = [&](CodeWords& words, TokenFragments& tok, int kt, bool tokens = true) {
      load_codes(words, kt);
      if (tokens) load_tokens(tok, kt, true);
    };
    // The scales go on the accumulators wherever the tile can take them (INT4: acc_scales holds
    // for groups of 128), so the other path is not compiled into this ring.
    auto compute_tile = [&](const CodeWords& words, const PassWords& pass, int q, const TokenFragments& tok) {
      TileScales scales;
      pass_tile_scales<Cfg, kTilesN>(pass, q, mx_lane_shift, scales);
      multiply_scaled_tile<Cfg, kAccScaleTile, kVoteFold>(
          scales, p.scaling, kAccScaleTile, acc,
          [&](DequantPath path, const FragmentScale (&decoded)[kTilesN][2], float (&dst)[kTilesN][kTilesM][4]) {
            multiply(path, words, decoded, tok, dst);
          });
    };
    CodeWords code_ring[D];
    PassWords pass[2];
    if constexpr (D == 2) {
      TokenFragments tok[2];
      if (my_tiles > 0) {
        load_codes_tokens(code_ring[0], tok[0], 0, !quantizes_rows);
        load_pass_scales<Cfg, kTilesN>(scale_rows, 0, pass[0]);
      }
      make_rows();
      if (quantizes_rows && my_tiles > 0) load_tokens(tok[0], 0, true);
      for (int j0 = 0; j0 < my_tiles; j0 += 2 * L) {
#pragma unroll
        for (int q = 0; q < 2 * L; ++q) {
          const int j = j0 + q;
          if (j < my_tiles) {
            if (j + 1 < my_tiles) {
              load_codes_tokens(code_ring[(q + 1) % 2], tok[(q + 1) % 2], j + 1);
              if (q % L == L - 1) load_pass_scales<Cfg, kTilesN>(scale_rows, j + 1, pass[(q / L + 1) % 2]);
            }
            compute_tile(code_ring[q % 2], pass[q / L], q % L, tok[q % 2]);
          }
        }
      }
    } else {
      // As run_tile_scaled_ring's deeper ring (its NOTE on the one scoreboard and `after_arrival`).
      constexpr int P = D / 2;
      const unsigned zero_at_run_time = static_cast<unsigned>(K) >> 31;
      TokenFragments tok[D];
#pragma unroll
      for (int r = 0; r < P; ++r)
        if (r < my_tiles) load_codes_tokens(code_ring[r], tok[r], r, !quantizes_rows);
      if (my_tiles > 0) load_pass_scales<Cfg, kTilesN>(scale_rows, 0, pass[0]);
      make_rows();
      if constexpr (quantizes_rows)
#pragma unroll
        for (int r = 0; r < P; ++r)
          if (r < my_tiles) load_tokens(tok[r], r, true);
      constexpr int kGroupsPerPass = L / P;
      for (int j0 = 0; j0 < my_tiles; j0 += 2 * L) {
#pragma unroll
        for (int gi = 0; gi < 2 * kGroupsPerPass; ++gi) {  // groups of the two passes j0 / L and j0 / L + 1
          const int h = gi % 2, jg = j0 + gi * P, pass_of_group = gi / kGroupsPerPass;
          if (jg < my_tiles) {
            const int after_arrival = static_cast<int>(code_ring[h * P][0][0] & zero_at_run_time);
#pragma unroll
            for (int r = 0; r < P; ++r) {
              const int next = jg + P + r + after_arrival, slot = (1 - h) * P + r;
              if (next < my_tiles) load_codes_tokens(code_ring[slot], tok[slot], next);
            }
            // The next group starts a pass where this one ends one.
            if (gi % kGroupsPerPass == kGroupsPerPass - 1 && jg + P < my_tiles)
              load_pass_scales<Cfg, kTilesN>(scale_rows, jg + P + after_arrival, pass[(pass_of_group + 1) % 2]);
            // MXFP4 (bf16): the fold decided once per pass (here a group), else per tile as elsewhere.
            bool folded_pass = false;
            if constexpr (kPassFold) {
              const PassFoldedScales<kTilesN> fold = fold_pass_scales<kTilesN>(pass[pass_of_group], mx_lane_shift);
              if (Cfg::kMxScalesAtMostTwo || fold.all_foldable) {
                folded_pass = true;
#pragma unroll
                for (int r = 0; r < P; ++r)
                  if (r == 0 || jg + r < my_tiles) {
                    FragmentScale decoded[kTilesN][2];
                    pass_tile_folded<kTilesN>(fold, r, decoded);
                    multiply(DequantPath::kFolded, code_ring[h * P + r], decoded, tok[h * P + r], acc);
                  }
              }
            }
            if (!folded_pass) {
#pragma unroll
              for (int r = 0; r < P; ++r)
                if (r == 0 || jg + r < my_tiles)
                  compute_tile(code_ring[h * P + r], pass[pass_of_group], (gi % kGroupsPerPass) * P + r, tok[h * P + r]);
            }
          }
        }
      }
    }
  };
  if constexpr (kPassScales) {
    if (pass_scales_fit<Cfg>(p.scaling, K, scale_rows.group_shift)) {
      run_pass_scaled_ring();
    } else {
      run_tile_scaled_ring();
    }
  } else {
    run_tile_scaled_ring();
  }

  // Epilogue: K groups added in group order, then the output tile and its rows (moe_gemm_sync.cuh).
  if constexpr (self_routed) wait_prior_grid();
  if constexpr (G > 1) add_k_groups<G, T>(acc, reinterpret_cast<float*>(smem), warp_k, warp_n * 32 + lane);
  unsigned char* out_tile = smem + S::kReduceBytes;
  // NOTE: the main loop has no barrier: this one orders the row scales' stores before their reads.
  if constexpr (Cfg::kRowScales && G == 1) __syncthreads();
  if (warp_k == 0)
    write_output_tile_at<Cfg>(p, e, weight_row, acc, out_tile, S::kOutRowBytes, 0, t, lane_channel, row_src,
                              Cfg::kRowScales ? block_row_scales : nullptr);
  __syncthreads();
  if constexpr (activation_epilogue) {
    store_activation_rows<Cfg, BM, BN, T>(p, out_tile, S::kOutRowBytes, row_dst, n0, tid);
  } else {
    store_output_rows<BM, BN, T>(p, out_tile, S::kOutRowBytes, row_dst, n0, tid);
  }
}

}  // namespace moeq_dev
