#pragma once
// The two consumer warpgroups of the warp-specialized MoE GEMM tile (kernels/moe_gemm_ws.cuh describes the
// roles): per K tile they dequantize their codes into A fragments and issue wgmma with the block's tokens as B,
// then write the output tile; e4m3 tokens take the consumers of kernels/moe_gemm_ws_e4m3.cuh.
// NOTE: NVRTC-safe: no standard headers.
#include "moeq_dev/kernels/moe_gemm_activation_epilogue.cuh"
#include "moeq_dev/kernels/moe_gemm_common.cuh"
#include "moeq_dev/kernels/moe_gemm_ws_e4m3.cuh"
#include "moeq_dev/kernels/moe_gemm_ws_shape.cuh"
#include "moeq_dev/ptx/mbarrier.cuh"
#include "moeq_dev/ptx/wgmma.cuh"

namespace moeq_dev {

template <class Cfg>
__device__ __forceinline__ void moe_gemm_ws_consumers(const WsCta<Cfg>& cta) {
  // NOTE: the shared state under the names it had when the roles were one function (moe_gemm_ws_block); the
  // machine code is the same (scripts/dev/compare_kernel_text.py, session 42).
  using S = MoeGemmWsShape<Cfg>;
  constexpr int BM = S::kBlockM, BN = S::kBlockN, BK = S::kBlockK, kStages = S::kStages;
  constexpr int kTilesN = S::kTilesN, kTilesM = S::kTilesM;
  constexpr bool kFourBit = S::kCodeBits == 4;
  constexpr bool kPersistent = S::kPersistent;
  constexpr bool kHalves = gemm_pairs_gate_up_halves<Cfg>();
  constexpr int kRowBuffers = S::kRowBuffers, kPermBuffers = S::kPermBuffers;
  const MoeGemmParams& p = cta.p;
  const int tid = cta.tid, N = cta.n, K = cta.k, num_tiles = cta.num_tiles, tiles_k = cta.tiles_k;
  unsigned char* const smem = cta.smem;
  const unsigned smem_base = cta.smem_base;
  int* const row_src_buffers = cta.row_src_buffers;
  int* const row_dst_buffers = cta.row_dst_buffers;
  int* const block_expert_buffers = cta.block_expert_buffers;
  float* const block_row_scales = cta.block_row_scales;
  unsigned* const wide_tiles = cta.wide_tiles;
  const unsigned landed0 = cta.landed0, staged0 = cta.staged0, permuted0 = cta.permuted0, retired0 = cta.retired0,
                 rows_full0 = cta.rows_full0, rows_empty0 = cta.rows_empty0;
  auto n0_of = [&](int i) { return cta.n0_of(i); };
  setmaxnreg_inc<S::kConsumerRegisters>();
  const int ctid = tid - 128, consumer = ctid / 128, warp = (ctid / 32) % 4, lane = tid % 32, g = lane / 4, t = lane % 4;
  // Each row's A-row scale, seen by the epilogue after its first named barrier (the previous tile's
  // second one keeps these writes after that tile's epilogue reads).
  auto fetch_row_scales = [&](const int* row_src) {
    if constexpr (Cfg::kRowScales)
      for (int r = ctid; r < BM; r += 128 * S::kConsumers) block_row_scales[r] = a_row_scale(p, row_src[r]);
  };
  // Channel (within the block) of this lane's fragment rows of 64-channel tile nt, half r.
  auto channel_of = [&](int nt, int r) { return consumer * S::kConsumerN + nt * 64 + warp * 16 + g + r * 8; };
  if constexpr (Cfg::kActE4m3) {
    static_assert(!gemm_activation_epilogue<Cfg>(), "the activation epilogue takes 16-bit A");
    // Persistent (`/s/t`): the tiles as the 16-bit loop below runs them (row buffers, rows_full / rows_empty, the out
    // tile past the ring), the ring state carried from tile to tile.
    E4m3Ring ring = e4m3_ring_start<S>(smem_base);
    for (int i = 0; i < num_tiles; ++i) {
      const int buf = i % kRowBuffers;
      if constexpr (kPersistent) mbarrier_wait(rows_full0 + 8 * buf, (i / kRowBuffers) & 1);
      const int e = block_expert_buffers[buf], n0 = n0_of(i);
      const int *row_src = row_src_buffers + buf * BM, *row_dst = row_dst_buffers + buf * BM;
      fetch_row_scales(row_src);
      float acc[kTilesN][kTilesM][4];
      moe_gemm_ws_e4m3_consumers<Cfg, S>(p, e, n0, tiles_k, ring, smem_base, landed0, staged0,
                                         permuted0, retired0, wide_tiles + (S::kMmaOrder ? buf * kE4m3WideWords : 0),
                                         cta.e4m3_row_bases + buf * BN, cta.scanned0 + 8 * buf,
                                         (i / kRowBuffers) & 1, ctid, channel_of, acc);
      unsigned char* out_tile = smem + S::kEpilogueOffset;
      named_barrier_sync(2, 128 * S::kConsumers);
      if constexpr (Cfg::kRowScales) e4m3_scale_token_rows(acc, block_row_scales, t);
      write_output_tile<E4m3EpilogueCfg<Cfg>>(p, e, n0, acc, out_tile, S::kOutRowBytes, 0, t, channel_of, row_src);
      named_barrier_sync(2, 128 * S::kConsumers);
      e4m3_store_output_rows<BM, BN, 128 * S::kConsumers>(p, out_tile, S::kOutRowBytes, row_dst, n0, ctid);
      if constexpr (kPersistent) {
        __syncwarp();
        if (lane == 0) mbarrier_arrive(rows_empty0 + 8 * buf);
      }
    }
  } else {
    // Counted along over every K tile of every output tile: tile j's permuted buffer j % kPermBuffers
    // (S::kMmaOrder: its stage, j % kStages), its phase and its wgmma descriptor.
    // PERF: the descriptor built per tile from the buffer's address cost ~25 uniform-datapath
    // instructions per tile (offline SASS); its address field is advanced instead.
    constexpr int kBuffers = S::kMmaOrder ? kStages : kPermBuffers;
    constexpr int kBufferBytes = S::kMmaOrder ? S::kStageBytes : S::kTokenBytes;
    const unsigned long long first_descriptor = S::kMmaOrder ? wgmma_descriptor_swizzle128(smem_base)
                                                             : wgmma_descriptor(smem_base + S::kPermutedOffset, 128, 1024);
    unsigned long long descriptor = first_descriptor;
    int buffer = 0, last_buffer = 0;
    unsigned buffer_parity = 0;
    for (int i = 0; i < num_tiles; ++i) {
      const int buf = i % kRowBuffers;
      if constexpr (kPersistent) mbarrier_wait(rows_full0 + 8 * buf, (i / kRowBuffers) & 1);
      const int e = block_expert_buffers[buf], n0 = n0_of(i);
      const int *row_src = row_src_buffers + buf * BM, *row_dst = row_dst_buffers + buf * BM;
      const int stage0 = (i * tiles_k) % kStages;  // the ring stage of this tile's first K tile
      fetch_row_scales(row_src);
      // The weight row of a block-relative channel: n0 + c, or [gate | up] rows paired for the activation epilogue
      // (epilogue_weight_row: the gate rows of the block's outputs, then the same up rows), as the copy warps load them.
      auto weight_row = [&](int c) { return epilogue_weight_row<Cfg, BN>(c, n0, N); };
      auto scale_row_of = [&](int nt, int r) {
        if constexpr (kHalves) return weight_row(channel_of(nt, r));
        else return channel_of(nt, r);
      };
      const LaneScaleRows<Cfg, kTilesN> scale_rows(p.scaling, e, kHalves ? 0 : n0, N, K, scale_row_of);
      // Fp8BlockFoldable: one multiply per pair instead of two where every scale of this CTA's
      // channel blocks allows it. Every warp reads the same scales, so all take the same path (the
      // warps of a warpgroup must issue the same wgmma instructions).
      bool fold_scales = false;
      // NOTE: not over [gate | up] halves (two runs of 128-channel blocks): their scales take the unfolded path.
      if constexpr (Fp8BlockFoldable<Cfg>::value && !kHalves) {
        const int blocks_n = (N + 127) / 128, blocks_k = (K + 127) / 128;
        const int first_block = n0 / 128, last_block = (min(n0 + BN, N) - 1) / 128;
        const float* block_scales =
            static_cast<const float*>(p.scaling.scales) + (static_cast<long long>(e) * blocks_n + first_block) * blocks_k;
        bool foldable = true;
        for (int b = lane; b < (last_block - first_block + 1) * blocks_k; b += 32)
          foldable = foldable && fp8_block_scale_foldable(block_scales[b]);
        fold_scales = __all_sync(0xFFFFFFFFu, foldable);
      }
      // 512-channel tiles read their scales from the stage (S::kStagedScales): no ring.
      constexpr int kScaleSlots = S::kStagedScales ? 1 : kStages, kScaleAhead = kScaleSlots - 1;
      LaneScale scale_ring[kScaleSlots][kTilesN][2];
      // The scales of a lane's own 16-code run (16 t) of each row.
      auto load_scales = [&](LaneScale (&slot)[kTilesN][2], int kt) {
        if constexpr (!(WsDiag<Cfg>::value & kWsSkipScales) && !S::kStagedScales) scale_rows.load(slot, 16 * t + kt * BK, K);
      };
      // S::kStagedScales: bit 2 nt + r set where row (nt, r)'s scale pairs of even K tiles sit at byte 2 of
      // their staged word (its scales start there: (weight row) K / 32 = 2 mod 4); odd tiles flip it.
      unsigned staged_halves = 0;
      if constexpr (S::kStagedScales)
    #pragma unroll
        for (int nt = 0; nt < kTilesN; ++nt)
    #pragma unroll
          for (int r = 0; r < 2; ++r)
            staged_halves |= ((static_cast<unsigned>(kHalves ? weight_row(channel_of(nt, r)) : n0 + channel_of(nt, r)) *
                                   static_cast<unsigned>(K / 32) >> 1) & 1u)
                             << (2 * nt + r);
      // MX and NVFP4 scales (new ones every K tile), and INT4 and FP8-block scales on tiles of at most 48
      // rows, on an even ring: the scale slots run in two groups of kScaleGroup tiles; at a group's first
      // tile the consumer waits once for the group's scales, then issues the other group's (kScaleGroup
      // tiles ahead), and decodes the group's tiles with no further wait. Otherwise each tile's scales
      // load kStages - 1 tiles ahead.
      // NOTE: ptxas gives every scale load of the loop one scoreboard, so a decode waits for all the
      // loads in flight: with a load per tile, each tile's decode waited for the scales issued the tile
      // before (ncu, gpt-oss-120b GEMM2 M = 1024 on 48x256/1x8x1/6/p/s: ~10% of the consumers' stall
      // samples on the decode's first use, long scoreboard).
      // PERF: grouped, gpt-oss-120b MXFP4 GEMM1 / GEMM2 -10.4% / -11.5% at M = 1024, -4.7% / -7.8% at
      // M = 2048 (step -8.4% / -4.1%); Qwen3-30B-A3B MXFP4 M = 1024 +1.0% / +0.9%; INT4-g128 and
      // FP8-block (a scale per 128 k: one load in two hits the same word) lost 1-1.7% at Qwen3 M = 4096,
      // so they keep the per-tile ring (bench/results/2026-12-04-h200-ws-scales.md, call 4) on tiles of more
      // than 48 rows. On shorter ones a K tile's MMAs are few, so a decode that waits for the last tile's scale
      // load is a larger share of the tile: grouped there, Qwen3-30B-A3B INT4-g128 GEMM1 / GEMM2 -3.1% / -1.8%
      // at M = 256 and its steps -1.8% to -2.3% at M = 256-640; DeepSeek-V3 FP8-block M = 1024 GEMM2 -0.5%
      // (H100, bench/results/2026-12-07-h100-s61-short-tile-scales.md).
      constexpr WeightFormatId kF = Cfg::kFormat;
      constexpr bool kScalesEveryTile = kF == WeightFormatId::kMxfp4 || kF == WeightFormatId::kMxfp8 || kF == WeightFormatId::kNvfp4;
      constexpr bool kShortTileGroupScales = BM <= 48 && (kF == WeightFormatId::kInt4 || kF == WeightFormatId::kFp8Block);
      constexpr bool kGroupedScales = !S::kStagedScales && kStages % 2 == 0 && (kScalesEveryTile || kShortTileGroupScales);
      constexpr int kScaleGroup = kGroupedScales ? kStages / 2 : 1;
    #pragma unroll
      for (int q = 0; q < (kGroupedScales ? kScaleGroup : kScaleAhead); ++q)
        if (q < tiles_k) load_scales(scale_ring[q], q);

      float acc[kTilesN][kTilesM][4];  // written first by tile 0's first MMAs (accumulate = false)
      if constexpr (WsDiag<Cfg>::value & kWsSkipMma)
    #pragma unroll
        for (int nt = 0; nt < kTilesN; ++nt)
    #pragma unroll
          for (int m = 0; m < kTilesM; ++m)
    #pragma unroll
            for (int c = 0; c < 4; ++c) acc[nt][m][c] = 0.0f;

      // This lane's code words of a tile: prepared, one (4-bit) or two (8-bit) 16-byte loads per
      // 16-channel block; canonical, 8 (4-bit) or 16 (8-bit) bytes of each of its two rows.
      constexpr int kWords = kFourBit ? 4 : 8;
      auto load_codes = [&](unsigned codes, unsigned (&words)[kTilesN][kWords]) {
    #pragma unroll
        for (int nt = 0; nt < kTilesN; ++nt) {
          if constexpr (Cfg::kPreparedCodes) {
            const unsigned block = codes + (channel_of(nt, 0) / 16) * S::kPreparedBlockBytes + lane * 16;
    #pragma unroll
            for (int h = 0; h < kWords / 4; ++h) {
              const uint4 v = lds_128(block + 512 * h);
              words[nt][4 * h] = v.x;
              words[nt][4 * h + 1] = v.y;
              words[nt][4 * h + 2] = v.z;
              words[nt][4 * h + 3] = v.w;
            }
          } else {
    #pragma unroll
            for (int r = 0; r < 2; ++r) {
              const unsigned address = codes + channel_of(nt, r) * S::kCodeRowBytes + t * (S::kCodeRowBytes / 4);
              if constexpr (kFourBit) {
                const uint2 v = lds_64(address);
                words[nt][2 * r] = v.x;
                words[nt][2 * r + 1] = v.y;
              } else {
                const uint4 v = lds_128(address);
                words[nt][4 * r] = v.x;
                words[nt][4 * r + 1] = v.y;
                words[nt][4 * r + 2] = v.z;
                words[nt][4 * r + 3] = v.w;
              }
            }
          }
        }
      };
      // A fragments of k16 steps 2h and 2h + 1 (the K order of kernels/moe_gemm_sync.cuh: lane t's
      // physical k of step s are 16t + 4s + [0, 4)).
      auto fragments = [&](const unsigned (&words)[kTilesN][kWords], int h, const FragmentScale (&decoded)[kTilesN][2],
                           DequantPath kPath, unsigned (&a)[kTilesN][2][4]) {
    #pragma unroll
        for (int nt = 0; nt < kTilesN; ++nt) {
          if constexpr (WsDiag<Cfg>::value & kWsSkipDequant) {
    #pragma unroll
            for (int q = 0; q < 2; ++q)
    #pragma unroll
              for (int pr = 0; pr < 4; ++pr) a[nt][q][pr] = words[nt][(4 * (2 * h + q) + pr) % kWords];
          } else if constexpr (Cfg::kPreparedCodes) {
    #pragma unroll
            for (int q = 0; q < 2; ++q) {
              const int step = 2 * h + q;
    #pragma unroll
              for (int pr = 0; pr < 4; ++pr) {
                if constexpr (kFourBit) {
                  a[nt][q][pr] = dequant_pair4<Cfg>(words[nt][step], pr, decoded[nt][pr & 1], kPath);
                } else {
                  a[nt][q][pr] = dequant_pair8<Cfg>(words[nt][2 * step + (pr >> 1)], pr & 1, decoded[nt][pr & 1], kPath);
                }
              }
            }
          } else if constexpr (kFourBit) {
            unsigned lo[4], hi[4];  // rows g and g + 8: pairs (e0, e1) .. (e6, e7) of k 16t + 8h + [0, 8)
            dequant_word4<Cfg>(words[nt][h], decoded[nt][0], kPath, lo);
            dequant_word4<Cfg>(words[nt][2 + h], decoded[nt][1], kPath, hi);
    #pragma unroll
            for (int q = 0; q < 2; ++q) {
              a[nt][q][0] = lo[2 * q];
              a[nt][q][1] = hi[2 * q];
              a[nt][q][2] = lo[2 * q + 1];
              a[nt][q][3] = hi[2 * q + 1];
            }
          } else {
    #pragma unroll
            for (int q = 0; q < 2; ++q) {
              unsigned lo[2], hi[2];
              dequant_word8<Cfg>(words[nt][2 * h + q], decoded[nt][0], kPath, lo);
              dequant_word8<Cfg>(words[nt][4 + 2 * h + q], decoded[nt][1], kPath, hi);
              a[nt][q][0] = lo[0];
              a[nt][q][1] = hi[0];
              a[nt][q][2] = lo[1];
              a[nt][q][3] = hi[1];
            }
          }
        }
      };

      // The ring, unrolled by kStages so stage and scale-ring indices are compile-time constants;
      // one copy per dequantization path (a constant in each, so no branch per pair).
      auto run_ring = [&](auto path_tag) {
        constexpr DequantPath kPath = decltype(path_tag)::value;
        for (int j0 = 0; j0 < tiles_k; j0 += kStages) {
          #pragma unroll
          for (int q = 0; q < kStages; ++q) {
            const int j = j0 + q;
            if (j < tiles_k) {
              if constexpr (kGroupedScales) {
                if (q % kScaleGroup == 0) {
                  // `after_arrival` is 0 at run time (K < 2^31) but reads this group's first scales, and
                  // the next loads' tile indices take it, so they cannot issue before the group is in.
                  const int after_arrival = static_cast<int>(scale_ring[q][0][0].bits & (static_cast<unsigned>(K) >> 31));
                  #pragma unroll
                  for (int r = 0; r < kScaleGroup; ++r) {
                    const int next = j + kScaleGroup + r + after_arrival;
                    if (next < tiles_k) load_scales(scale_ring[(q + kScaleGroup + r) % kStages], next);
                  }
                }
              }
              FragmentScale decoded[kTilesN][2];
              if constexpr (!S::kStagedScales) {
                #pragma unroll
                for (int nt = 0; nt < kTilesN; ++nt)
                  #pragma unroll
                  for (int r = 0; r < 2; ++r)
                    decoded[nt][r] = decode_lane_scale<Cfg>(scale_ring[q % kScaleSlots][nt][r], p.scaling);
              }
              if constexpr (!kGroupedScales)  // into tile j - 1's slot
                if (j + kScaleAhead < tiles_k) load_scales(scale_ring[(q + kScaleAhead) % kScaleSlots], j + kScaleAhead);
              // The ring stage of tile j (j0 is a multiple of kStages).
              const int stage = kPersistent ? (stage0 + q < kStages ? stage0 + q : stage0 + q - kStages) : q;
              const unsigned base = smem_base + stage * S::kStageBytes;
              // NOTE: the permute warps arrive on `permuted` only after the stage's `landed`, so the
              // codes of stage q have landed too. S::kMmaOrder: buffer == stage, and wgmma (async proxy)
              // reads what cp.async wrote once `landed` completes, with no proxy fence between, as CUTLASS's
              // cp.async-fed GMMA mainloops do (a fence here would also wait for this thread's scale loads).
              // MoeGemmGpu.MmaOrderTokensEqualTheirPermutedTile checks it bit for bit against the fenced path.
              mbarrier_wait((S::kMmaOrder ? landed0 : permuted0) + 8 * buffer, buffer_parity);
              if constexpr (S::kStagedScales) {
                // Lane t's codes 16 t .. 16 t + 15 of the tile are group t / 2 of its pair.
                #pragma unroll
                for (int nt = 0; nt < kTilesN; ++nt)
                  #pragma unroll
                  for (int r = 0; r < 2; ++r) {
                    const unsigned half = (((staged_halves >> (2 * nt + r)) ^ static_cast<unsigned>(j)) & 1u) << 1;
                    LaneScale raw;
                    raw.bits = lds_u8(base + S::kScaleOffset + channel_of(nt, r) * 4 + half + (t >> 1));
                    decoded[nt][r] = decode_lane_scale<Cfg>(raw, p.scaling);
                  }
              }
              unsigned words[kTilesN][kWords];
              load_codes(base + S::kCodeOffset, words);
              #pragma unroll
              for (int h = 0; h < 2; ++h) {
                unsigned a[kTilesN][2][4];
                fragments(words, h, decoded, kPath, a);
                if (h == 1 && !S::kMmaOrder) {
                  // Every code word has been dequantized: the stage goes back to the copy warps.
                  __syncwarp();
                  if (lane == 0) mbarrier_arrive(staged0 + 8 * stage);
                }
                wgmma_fence();  // the A fragments (and the first time the accumulators) come from ordinary instructions
                #pragma unroll
                for (int nt = 0; nt < kTilesN; ++nt)
                  #pragma unroll
                  for (int qq = 0; qq < 2; ++qq)
                    if constexpr (WsDiag<Cfg>::value & kWsSkipMma) {
                      asm volatile("" ::"r"(a[nt][qq][0]), "r"(a[nt][qq][1]), "r"(a[nt][qq][2]), "r"(a[nt][qq][3]));
                    } else
                    // Core matrices of step s start at 256 s; along K (the two halves) 128 bytes apart,
                    // along the tokens (groups of 8) 1024. S::kMmaOrder: step s is bytes 32 s of each
                    // 128-byte (swizzled) row, rows 128 bytes apart, groups of 8 rows 1024.
                    wgmma_m64k16_rs<BM, Cfg::kActBf16>(reinterpret_cast<float(&)[BM / 2]>(acc[nt]), a[nt][qq],
                                                       wgmma_descriptor_advance(descriptor, (2 * h + qq) * (S::kMmaOrder ? 32 : 256)),
                                                       j > 0 || h > 0 || qq > 0);
                wgmma_commit();
                wgmma_wait<1>();
                if (h == 0 && j > 0) {
                  // Tile j - 1's MMAs have completed: its permuted tokens go back to the permute warps
                  // (S::kMmaOrder: its stage to the copy warps).
                  __syncwarp();
                  if (lane == 0) mbarrier_arrive((S::kMmaOrder ? staged0 : retired0) + 8 * last_buffer);
                }
              }
              last_buffer = buffer;
              descriptor = wgmma_descriptor_advance(descriptor, kBufferBytes);
              if (++buffer == kBuffers) {
                buffer = 0;
                buffer_parity ^= 1u;
                descriptor = first_descriptor;
              }
            }
          }
        }
      };
      if constexpr (MxFoldable<Cfg>::value && Cfg::kMxScalesAtMostTwo) {
        // The caller vouches for every scale of the layer (moeq::WeightView::mx_scales_at_most_two):
        // one multiply per pair, decided at compile time.
        // PERF: session 35 decided it in the kernel instead (a vote per scale group, or a scan of the
        // warpgroup's scale rows per output tile): the decision cost more than the fold saves (+5-14%
        // on gpt-oss-120b M = 1024), while the fold alone saves 2-7% (docs/perf-notes.md).
        run_ring(DequantPathTag<DequantPath::kFolded>{});
      } else if (Fp8BlockFoldable<Cfg>::value && fold_scales) {
        if constexpr (Fp8BlockFoldable<Cfg>::value) run_ring(DequantPathTag<DequantPath::kFolded>{});
      } else {
        run_ring(DequantPathTag<WeightsPath<Cfg>::value>{});
      }
      wgmma_wait<0>();
      if constexpr (kPersistent) {
        // The tile's last permuted buffer goes back to the permute warps, or its stage to the copy warps
        // (the next tile's MMAs give back the others as this tile's did).
        __syncwarp();
        if (lane == 0) mbarrier_arrive((S::kMmaOrder ? staged0 : retired0) + 8 * last_buffer);
      }
      // Epilogue, consumers only: the out tile (persistent: its own, past the ring; else the ring,
      // which the other consumer may still be reading until it passes this barrier, the producer
      // being done) is rewritten only once both consumers are past this barrier.
      unsigned char* out_tile = smem + S::kEpilogueOffset;
      named_barrier_sync(2, 128 * S::kConsumers);
      if constexpr (kHalves) {
        write_output_tile_at<Cfg>(p, e, weight_row, acc, out_tile, S::kOutRowBytes, 0, t, channel_of, row_src,
                                  Cfg::kRowScales ? block_row_scales : nullptr);
      } else {
        write_output_tile<Cfg>(p, e, n0, acc, out_tile, S::kOutRowBytes, 0, t, channel_of, row_src,
                               Cfg::kRowScales ? block_row_scales : nullptr);
      }
      named_barrier_sync(2, 128 * S::kConsumers);
      if constexpr (gemm_activation_epilogue<Cfg>()) {
        store_activation_rows<Cfg, BM, BN, 128 * S::kConsumers>(p, out_tile, S::kOutRowBytes, row_dst, n0, ctid);
      } else {
        store_output_rows<BM, BN, 128 * S::kConsumers>(p, out_tile, S::kOutRowBytes, row_dst, n0, ctid);
      }
      if constexpr (kPersistent) {
        // This warp's reads of the tile's rows are done: the copy warps may refill the row buffer.
        __syncwarp();
        if (lane == 0) mbarrier_arrive(rows_empty0 + 8 * buf);
      }
    }
  }
}

}  // namespace moeq_dev
