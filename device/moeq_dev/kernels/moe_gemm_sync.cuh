#pragma once
// The mma.sync body of the quantized MoE GEMM (kernels/moe_gemm.cuh is the entry point and documents
// the product, the layouts and the config): the tiles that are neither warp-specialized wgmma
// (kernels/moe_gemm_ws.cuh) nor direct-load (kernels/moe_gemm_direct.cuh), the 64-row wgmma tiles
// (kWgmma without kProducer) among them.
// Pipeline: a ring of kStages shared-memory stages, each one K tile (64) of the gathered A rows
// and of the raw weight codes in the canonical layout (CONTRACT §4), filled by cp.async
// kStages - 1 tiles ahead; the raw scale bits of a tile are loaded into a register ring at the
// same time and decoded when used. Each warp reads its codes from shared memory and dequantizes
// them straight into MMA fragments (kernels/moe_gemm_sync_stage.cuh): one barrier per K tile.
//
// Operand roles ("swap AB"): the weights are the MMA's A operand (16 output channels x 16 k) and
// the tokens its B operand (16 k x 8 tokens), so D = W * A^T holds 16 channels x 8 tokens. The
// dequantized words land directly in A-fragment registers, token tiles are 8 rows (small M wastes
// less), and the output tile goes through shared memory for 16-byte row stores.
//
// K order inside a tile. The MMA sums over k, so any one permutation of the 64 k of a tile,
// applied to both operands, gives the same products. Lane (g = lane / 4, t = lane % 4) takes the
// 16 consecutive k [16t, 16t + 16) of its rows: for k16 step s, the fragment's logical pairs
// (2t, 2t + 1) and (2t + 8, 2t + 9) are the physical k 16t + 4s + {0, 1} and {2, 3}. A lane then
// loads its 16 codes of a channel with one 8-byte (4-bit) or 16-byte (8-bit) shared load, a
// 16-code run needs one scale, and a token's 16 activations come in two 16-byte loads that are
// already the B fragments of two steps.
// K groups: with kWarpsK > 1 the warps form kWarpsK groups that take turns over the K tiles
// (group j computes tiles j, j + kWarpsK, ...), which divides each warp's serial chain of tiles
// (the latency that bounds small M); the groups' accumulators are added in group order at the
// end, so the result does not depend on timing.
// Split K (kSplitK > 1, sm_90): a cluster of kSplitK CTAs along z shares one output tile, CTA
// rank z taking the K tiles [z T / kSplitK, (z + 1) T / kSplitK); the other ranks hand their
// fp32 sums to rank 0 through distributed shared memory, which adds them in rank order (no
// workspace, no atomics, deterministic). It multiplies the CTAs where too few run (M = 1) or
// where one tile's K chain is long against the waves of CTAs (the last wave running part full).
// wgmma (kWgmma, sm_90a; 64-token blocks of one warpgroup): the same dequantized A fragments
// feed wgmma.mma_async m64n64k16 (A from registers: warp w gives channels 16w .. 16w + 15 of each
// 64-channel tile) with the 64 tokens as B read from shared memory by the tensor cores, which
// removes the token-fragment loads and keeps the MMAs in flight while the next step, and the
// next K tile, is dequantized. B must hold, at the k16 step's logical k, the tokens'
// activations at the permuted physical k above, in core matrices (8 tokens x 8 logical k, 128
// contiguous bytes): pair P = 8t + 2s + h of a token row belongs in core matrix (token group,
// step s, half h) at byte 4t of the token's 16-byte row. The ring stage holds the tokens as
// copied (16-byte chunks, chunk c of row r at c ^ (r % 8): conflict-free reads below); after
// the tile's barrier each thread moves 64 bytes of one row into the core matrices of one of
// two permuted buffers (4 16-byte loads, 4 16-byte stores), then a second barrier. The buffer
// of tile i is rewritten at tile i + 2, once tile i's wgmma group is waited for.
// PERF: GEMM v5 copied the pairs straight from global memory with 4-byte cp.async: 16 copies
// per thread and tile, 1.75x slower than mma.sync at M = 4096.
// NOTE: NVRTC-safe: no standard headers.
#include "moeq_dev/format/prepared.cuh"
#include "moeq_dev/format/weights_fragment.cuh"
#include "moeq_dev/kernels/moe_gemm_common.cuh"
#include "moeq_dev/kernels/moe_gemm_sync_stage.cuh"
#include "moeq_dev/kernels/moe_gemm_sync_shape.cuh"
#include "moeq_dev/ptx/cluster.cuh"
#include "moeq_dev/ptx/cp_async.cuh"
#include "moeq_dev/ptx/mbarrier.cuh"
#include "moeq_dev/ptx/mma.cuh"
#include "moeq_dev/ptx/wgmma.cuh"

namespace moeq_dev {

template <class Cfg>
__device__ __forceinline__ void moe_gemm_block(const MoeGemmParams& p) {
  using S = MoeGemmShape<Cfg>;
  constexpr int BM = S::kBlockM, BN = S::kBlockN, BK = S::kBlockK, T = S::kThreads, kStages = S::kStages;
  // Copies: every thread, or the copy warp alone (S::kCopyWarp), thread copy_tid of kCopyThreads.
  constexpr int kCopyThreads = S::kCopyThreads;
  constexpr int kTilesM = S::kTilesM, kTilesN = S::kTilesN;
  constexpr int kChunksA = BM * (BK / 8), kChunksB = BN * S::kCodeChunksPerRow;
  constexpr int kPerThreadA = (kChunksA + kCopyThreads - 1) / kCopyThreads;
  constexpr int kPerThreadB = (kChunksB + kCopyThreads - 1) / kCopyThreads;
  // The copy warp moves prepared codes with one bulk copy per 16-channel block and K tile (every
  // block exists in full, zero-padded past K); the tokens, and canonical codes (partial tiles
  // zero-filled), go by 16-byte cp.async.
  // PERF: with 16-byte copies for the codes too, the copy warp bounded the 8-warp tiles (8x256
  // INT4 at M = 16 67 us against 55 for 8x128, 16x128 FP8-block 127 against 96; run 4).
  constexpr bool kBulkCodes = S::kCopyWarp && Cfg::kPreparedCodes;
  constexpr int G = S::kWarpsK, kSteps = kStages / G;  // tiles per ring step, steps in the ring

  extern __shared__ __align__(16) unsigned char smem[];
  __shared__ int row_src[BM];
  __shared__ int row_dst[BM];
  __shared__ int block_expert;
  // Copy-warp tiles: per stage a `full` mbarrier (the copy warp's cp.async of the stage have landed)
  // and an `empty` one (every compute warp is done with it).
  __shared__ __align__(8) unsigned long long stage_barriers[S::kCopyWarp ? 2 * kStages : 1];

  const int tid = threadIdx.x;
  const int copy_tid = S::kCopyWarp ? tid - S::kComputeThreads : tid;  // < 0: a compute warp (no copies)
  const unsigned full0 = smem_address(&stage_barriers[0]), empty0 = full0 + 8 * kStages;
  if constexpr (S::kCopyWarp) {
    if (tid == 0) {
#pragma unroll
      for (int s = 0; s < kStages; ++s) {
        // each copy thread's cp.async.mbarrier.arrive, and the expect_tx arrival of the bulk copies
        mbarrier_init(full0 + 8 * s, kBulkCodes ? 33 : 32);
        mbarrier_init(empty0 + 8 * s, S::kComputeThreads / 32);  // one lane per compute warp
      }
      if constexpr (kBulkCodes) fence_mbarrier_init();
    }
  }
  // NOTE: M blocks along x (up to 2^31 - 1 of them); consecutive CTAs then share a weight tile
  // (same expert, same n0) while it is hot in L2.
  const int m_block = blockIdx.x;
  const int n0 = blockIdx.y * BN;
  if (!load_block_rows<BM, T>(p, m_block, tid, row_src, row_dst, &block_expert)) return;

  const int e = block_expert, N = p.n, K = p.k;
  const long long row_bytes = static_cast<long long>(K) * S::kCodeBits / 8;
  constexpr int kPreparedBlockBytes = S::kCodeBits * 128;  // 16 channels x 64 k
  const int tiles_n16 = (N + 15) / 16, tiles_k = (K + BK - 1) / BK;
  const unsigned char* codes_e =
      Cfg::kPreparedCodes ? p.codes + static_cast<long long>(e) * tiles_n16 * tiles_k * kPreparedBlockBytes
                          : p.codes + static_cast<long long>(e) * N * row_bytes;
  const unsigned smem_base = smem_address(smem);
  // This CTA's K tiles [kt_begin, kt_begin + num_k_tiles): all of them unless K is split.
  const int split_rank = S::kSplitK > 1 ? static_cast<int>(cluster_cta_rank()) : 0;
  const int kt_begin = split_rank * tiles_k / S::kSplitK;
  const int num_k_tiles = (split_rank + 1) * tiles_k / S::kSplitK - kt_begin;

  // Copy descriptors: each thread's A and code chunks of a stage, as running pointers that
  // issue_stage advances one K tile per call (it is called for this CTA's K tiles in order).
  // A chunk is copied while k0 < its end; past it it zero-fills and reads nothing. Padding rows
  // and channels past N (end 0) keep a step of 0, so their pointer stays a valid address.
  // NOTE: in a partial last K tile (K % 64 == 32) the chunks past K point up to 64 bytes past
  // their row's end (A: 24 elements; 8-bit codes: 16 bytes), which
  // for the last row of a buffer is past the allocation; nothing is read there (src-size 0) and
  // no later tile uses them.
  // PERF: GEMM v3 recomputed a 64-bit address, a null test and a select per chunk and tile
  // (~14 instructions per chunk in the SASS); this is a compare, a 64-bit add and the copy.
  const unsigned short* a_next[kPerThreadA];
  int a_end[kPerThreadA], a_step[kPerThreadA];
  unsigned a_dst[kPerThreadA];
#pragma unroll
  for (int j = 0; j < kPerThreadA; ++j) {
    // NOTE: compute warps of copy-warp tiles (copy_tid < 0) get chunk 0's descriptors, unused.
    const bool in_tile = copy_tid >= 0 && (kChunksA % kCopyThreads == 0 || copy_tid + j * kCopyThreads < kChunksA);
    const int c = in_tile ? copy_tid + j * kCopyThreads : 0;
    const int r = (in_tile ? c : 0) / (BK / 8), cc = c % (BK / 8);
    const int src = in_tile ? row_src[r] : -1;
    a_end[j] = src >= 0 ? K - cc * 8 : 0;
    a_step[j] = src >= 0 ? BK : 0;
    a_next[j] = (src >= 0 ? p.a + static_cast<long long>(src) * p.a_row_stride + cc * 8 : p.a) + kt_begin * a_step[j];
    a_dst[j] = r * S::kARowBytes + (S::kWgmma ? cc ^ (r % 8) : cc) * 16;
  }
  constexpr int kCodeTileBytes = Cfg::kPreparedCodes ? kPreparedBlockBytes : BK * S::kCodeBits / 8;
  const unsigned char* b_next[kPerThreadB];
  int b_end[kPerThreadB], b_step[kPerThreadB];  // end in codes
  unsigned b_dst[kPerThreadB];
#pragma unroll
  for (int j = 0; j < kPerThreadB; ++j) {
    const bool in_tile = copy_tid >= 0 && (kChunksB % kCopyThreads == 0 || copy_tid + j * kCopyThreads < kChunksB);
    const int c = in_tile ? copy_tid + j * kCopyThreads : 0;
    if constexpr (Cfg::kPreparedCodes) {
      // Chunk c is 16 bytes of 16-channel block c / (block / 16); a block's K tiles are
      // kPreparedBlockBytes apart in memory and every tile exists (zero-padded past K).
      const int blk = c / (kPreparedBlockBytes / 16), within = c % (kPreparedBlockBytes / 16);
      const int j16 = n0 / 16 + blk;
      const bool valid = in_tile && j16 < tiles_n16;
      b_end[j] = valid ? tiles_k * BK : 0;
      b_step[j] = valid ? kCodeTileBytes : 0;
      b_next[j] = (valid ? codes_e + static_cast<long long>(j16) * tiles_k * kPreparedBlockBytes + within * 16 : p.codes) +
                  kt_begin * b_step[j];
      b_dst[j] = S::kAStageBytes + blk * kPreparedBlockBytes + within * 16;
    } else {
      const int r = c / S::kCodeChunksPerRow, cc = c % S::kCodeChunksPerRow;
      const bool valid = in_tile && n0 + r < N;
      b_end[j] = valid ? K - cc * S::kCodesPerChunk : 0;
      b_step[j] = valid ? kCodeTileBytes : 0;
      b_next[j] = (valid ? codes_e + static_cast<long long>(n0 + r) * row_bytes + cc * 16 : p.codes) + kt_begin * b_step[j];
      b_dst[j] = S::kAStageBytes + r * S::kCodeRowBytes + cc * 16;
    }
  }
  auto issue_stage = [&](int stage, int kt) {
    const int k0 = kt * BK;
    const unsigned base = smem_base + stage * S::kStageBytes;
#pragma unroll
    for (int j = 0; j < kPerThreadA; ++j) {
      if (kChunksA % kCopyThreads != 0 && copy_tid + j * kCopyThreads >= kChunksA) continue;
      cp_async_16(base + a_dst[j], a_next[j], k0 < a_end[j]);
      a_next[j] += a_step[j];
    }
    if constexpr (!kBulkCodes) {
#pragma unroll
      for (int j = 0; j < kPerThreadB; ++j) {
        if (kChunksB % kCopyThreads != 0 && copy_tid + j * kCopyThreads >= kChunksB) continue;
        cp_async_16(base + b_dst[j], b_next[j], k0 < b_end[j]);
        b_next[j] += b_step[j];
      }
    }
  };

  unsigned perm_buffer = smem_base + S::kPermOffset;  // wgmma: the permuted tokens of the current tile

  const int warp = tid / 32, lane = tid % 32, g = lane / 4, t = lane % 4;
  const int warp_k = warp / (Cfg::kWarpsM * Cfg::kWarpsN);
  const int warp_mn = warp % (Cfg::kWarpsM * Cfg::kWarpsN);
  const int warp_m = warp_mn / Cfg::kWarpsN, warp_n = warp_mn % Cfg::kWarpsN;
  // Channel (within the block) of this lane's fragment rows of channel tile nt, half r (g, g + 8):
  // a warp's tiles are adjacent, or 64 apart with wgmma (the warpgroup's 64-channel MMA tiles).
  auto lane_channel = [&](int nt, int r) {
    return S::kWgmma ? nt * 64 + warp_n * 16 + g + r * 8 : warp_n * S::kWarpN + nt * 16 + g + r * 8;
  };
  const LaneScaleRows<Cfg, kTilesN> scale_rows(p.scaling, e, n0, N, K, lane_channel);
  const int group_shift = scale_rows.group_shift;
  // Scales on the fp32 accumulators (AccumulatorScaled: INT4 with groups of >= 64, FP8 block):
  // each K tile's MMAs go to fresh tile accumulators, added with the tile's scale per row.
  // PERF: only for warp tiles of <= 2 token tiles, where the 4 FFMA per 16 x 8 tile cost less
  // than the 16 bf16 multiplies per 16-channel tile they save.
  constexpr bool kAccScaleTile = AccumulatorScaled<Cfg>::value && kTilesM <= 2;
  const bool acc_scales = kAccScaleTile && (Cfg::kFormat == WeightFormatId::kFp8Block || group_shift >= 6);
  // The k whose scale a lane loads, within a K tile: its own 16 codes' on the weights; the tile's
  // first k on the accumulators, where every lane multiplies sums over the whole tile.
  // NOTE: not the lane's own k there: in a partial last tile (K % 64 == 32) lanes 2 and 3 are
  // past K and would load no scale (0) for sums that include lanes 0 and 1 (the GPU test's
  // FP8-block K = 352 caught it).
  const int scale_k = acc_scales ? 0 : 16 * t;
  // This warp's scales of each ring step; copy-warp tiles load them kScaleSlots - 1 tiles ahead
  // whatever the stages (S::kScaleSlots).
  LaneScale scale_ring[S::kScaleSlots][kTilesN][2];
  auto load_scales = [&](LaneScale (&slot)[kTilesN][2], int kt) { scale_rows.load(slot, scale_k + kt * BK, K); };

  float acc[kTilesN][kTilesM][4];
  zero_accumulators(acc);

  // Byte offsets (within a stage) of this lane's token rows and code rows.
  const unsigned a_lane = (warp_m * S::kWarpM + g) * S::kARowBytes + t * 32;
  const unsigned b_lane = S::kAStageBytes + t * (S::kCodeRowBytes / 4);  // + the channel's code row

  // B fragments of this lane's token tiles for k16 steps 2h and 2h + 1 (physical k 16t + 8h +
  // [0, 8)): {step 2h: tok[mt][0], tok[mt][1]; step 2h + 1: tok[mt][2], tok[mt][3]}.
  auto load_token_fragments = [&](unsigned base, int h, unsigned (&tok)[kTilesM][4]) {
    if constexpr (!S::kWgmma) {  // with wgmma the tensor cores read the tokens from shared memory
#pragma unroll
      for (int mt = 0; mt < kTilesM; ++mt) {
        const uint4 v = lds_128(base + a_lane + mt * 8 * S::kARowBytes + h * 16);
        tok[mt][0] = v.x;
        tok[mt][1] = v.y;
        tok[mt][2] = v.z;
        tok[mt][3] = v.w;
      }
    }
  };

  // dst[nt] += A fragment `a` (16 channels x k16 step `step`) x the block's tokens: mma.sync per
  // token tile with the token fragments of half q, or one wgmma over all 64 tokens.
  auto multiply = [&](float (&dst)[kTilesM][4], const unsigned (&a)[4], unsigned base, int step,
                      const unsigned (&tok)[kTilesM][4], int q) {
    if constexpr (S::kWgmma) {
      wgmma_fence();  // a (and the first time dst) were written by ordinary instructions
      // Core matrices of step s start at 256 s; along K (the two halves) 128 bytes apart, along
      // the tokens (groups of 8) 1024.
      wgmma_m64k16_rs<64, Cfg::kActBf16>(reinterpret_cast<float(&)[32]>(dst), a,
                                        wgmma_descriptor(perm_buffer + step * 256, 128, 1024));
    } else {
#pragma unroll
      for (int mt = 0; mt < kTilesM; ++mt) mma_m16n8k16<Cfg::kActBf16>(dst[mt], a, tok[mt][2 * q], tok[mt][2 * q + 1]);
    }
  };

  auto compute = [&](DequantPath path, unsigned base, const FragmentScale (&decoded)[kTilesN][2],
                     float (&dst)[kTilesN][kTilesM][4]) {
    multiply_stage<Cfg, S>(path, base, lane, b_lane, decoded, dst, lane_channel, load_token_fragments, multiply);
    // The tile's MMAs stay in flight: they read only registers and the permuted buffer.
    if constexpr (S::kWgmma) wgmma_commit();
  };

  // NOTE: the folded MX path is not taken with wgmma: the vote is per warp, and the 4 warps of a
  // warpgroup must issue the same wgmma instructions (.sync.aligned); the folded and the plain
  // multipliers give the same exact values.
  constexpr bool kVoteFold = Cfg::kPreparedCodes && MxFoldable<Cfg>::value && !S::kWgmma;
  auto compute_stage = [&](int stage, const LaneScale (&scales)[kTilesN][2]) {
    const unsigned base = smem_base + stage * S::kStageBytes;
    multiply_scaled_tile<Cfg, kAccScaleTile, kVoteFold>(scales, p.scaling, acc_scales, acc,
                                         [&](DequantPath path, const FragmentScale (&decoded)[kTilesN][2],
                                             float (&dst)[kTilesN][kTilesM][4]) { compute(path, base, decoded, dst); });
  };

  // The shared ring (the else branch below; every warp copies): kSteps steps of G tiles; step j
  // holds this CTA's tiles jG .. jG + G - 1 in stages (j % kSteps) * G + group. One commit group
  // per step; the loop is unrolled by kSteps so every stage and scale-ring index is a
  // compile-time constant.
  const int num_steps = (num_k_tiles + G - 1) / G;
  if constexpr (S::kCopyWarp) {
    // The copy warp fills stage it % kStages with tile it once the compute warps have released
    // the tile kStages before it; the compute warps wait for each stage's copies on `full`. No
    // CTA barrier in the loop: a compute warp only waits for its own data.
    // PERF: GEMM v7's 8x128 INT4 tile at M = 16 spent ~10% of its stall samples at the per-tile
    // __syncthreads and ~20 instructions per warp and tile issuing its share of the copies (ncu,
    // run 2 of bench/results/2026-11-30-h200-gemm-v8.md).
    if (copy_tid >= 0) {
      // Bulk copies: lane b copies block b of this CTA's channels (blocks past N are skipped; their
      // channels' products are never stored).
      const int code_blocks = min(BN / 16, tiles_n16 - n0 / 16);
      const unsigned char* code_block =
          codes_e + static_cast<long long>(n0 / 16 + (copy_tid < code_blocks ? copy_tid : 0)) * tiles_k * kPreparedBlockBytes;
      for (int it = 0; it < num_k_tiles; ++it) {
        const int stage = it % kStages;
        if (it >= kStages) mbarrier_wait(empty0 + 8 * stage, ((it / kStages) - 1) & 1);
        if constexpr (kBulkCodes) {
          if (copy_tid == 0) mbarrier_arrive_expect_tx(full0 + 8 * stage, code_blocks * kPreparedBlockBytes);
          __syncwarp();  // the bytes are expected before any copy can complete them
          if (copy_tid < code_blocks)
            cp_async_bulk_to_shared(smem_base + stage * S::kStageBytes + S::kAStageBytes + copy_tid * kPreparedBlockBytes,
                                    code_block + static_cast<long long>(kt_begin + it) * kPreparedBlockBytes,
                                    kPreparedBlockBytes, full0 + 8 * stage);
        }
        issue_stage(stage, kt_begin + it);
        cp_async_mbarrier_arrive(full0 + 8 * stage);  // completes when this thread's copies land
      }
    } else {
      constexpr int kSlots = S::kScaleSlots;
#pragma unroll
      for (int q = 0; q < kSlots - 1; ++q)
        if (q < num_k_tiles) load_scales(scale_ring[q], kt_begin + q);
      for (int j0 = 0; j0 < num_k_tiles; j0 += kStages) {
        const unsigned parity = (j0 / kStages) & 1;
#pragma unroll
        for (int q = 0; q < kStages; ++q) {
          const int j = j0 + q;
          if (j < num_k_tiles) {
            // Tile j + kSlots - 1's scales go to the slot of tile j - 1, which is done with it
            // (kStages is a multiple of kSlots, so slot j % kSlots is q % kSlots).
            if (j + kSlots - 1 < num_k_tiles) load_scales(scale_ring[(q + kSlots - 1) % kSlots], kt_begin + j + kSlots - 1);
            mbarrier_wait(full0 + 8 * q, parity);
            compute_stage(q, scale_ring[q % kSlots]);
            __syncwarp();
            if (lane == 0) mbarrier_arrive(empty0 + 8 * q);
          }
        }
      }
    }
  } else {
    auto issue_step = [&](int slot, int j) {
#pragma unroll
      for (int q = 0; q < G; ++q)
        if (j * G + q < num_k_tiles) issue_stage(slot * G + q, kt_begin + j * G + q);
      if (j * G + warp_k < num_k_tiles) load_scales(scale_ring[slot], kt_begin + j * G + warp_k);
    };
#pragma unroll
    for (int j = 0; j < kSteps - 1; ++j) {
      if (j < num_steps) issue_step(j, j);
      cp_async_commit();
    }
    for (int j0 = 0; j0 < num_steps; j0 += kSteps) {
#pragma unroll
      for (int q = 0; q < kSteps; ++q) {
        const int j = j0 + q;
        if (j < num_steps) {
          cp_async_wait<kSteps - 2>();
          if constexpr (S::kWgmma) wgmma_wait<1>();  // tile j - 2's MMAs are done with its buffer
          __syncthreads();  // step j is visible to all; every warp is done with step j - 1's stages
          if constexpr (S::kWgmma) {
            perm_buffer = smem_base + S::kPermOffset + (j % 2) * S::kPermBufferBytes;
            permute_token_tile<BM, T>(smem_base + q * S::kStageBytes, perm_buffer, tid);
            // NOTE: st.shared writes through the generic proxy, wgmma reads shared memory through
            // the async proxy: each thread orders its stores for it before the barrier.
            fence_proxy_async_shared();
          }
          const int next = j + kSteps - 1;
          const int next_slot = (q + kSteps - 1) % kSteps;
          if (next < num_steps) issue_step(next_slot, next);
          cp_async_commit();
          if constexpr (S::kWgmma) __syncthreads();  // the permuted tile is complete
          if (j * G + warp_k < num_k_tiles) compute_stage(q * G + warp_k, scale_ring[q]);
        }
      }
    }
  }
  cp_async_wait<0>();
  if constexpr (S::kWgmma) wgmma_wait<0>();
  __syncthreads();  // the ring is free: the epilogue reuses its shared memory

  // Epilogue. 1) K groups: groups 1.. hand their accumulators to group 0, which adds them in
  // group order (deterministic).
  if constexpr (G > 1) add_k_groups<G, T>(acc, reinterpret_cast<float*>(smem), warp_k, warp_mn * 32 + lane);
  // 2) Split K: rank 0 adds the other ranks' sums (add_split_k_partials); only rank 0 goes on.
  if constexpr (S::kSplitK > 1) {
    add_split_k_partials<S::kSplitK, G, T>(acc, smem, smem_base, split_rank, warp_k, warp_mn * 32 + lane);
    if (split_rank != 0) return;
  }
  // 3) accumulator scales, bias and one rounding into the output tile; 4) rows out.
  unsigned char* out_tile = smem + S::kReduceBytes;
  if (warp_k == 0)
    write_output_tile<Cfg>(p, e, n0, acc, out_tile, S::kOutRowBytes, warp_m * S::kWarpM, t, lane_channel, row_src);
  __syncthreads();
  store_output_rows<BM, BN, T>(p, out_tile, S::kOutRowBytes, row_dst, n0, tid);
}

}  // namespace moeq_dev
