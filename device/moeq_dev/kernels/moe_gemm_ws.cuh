#pragma once
// The warp-specialized MoE GEMM body (GEMM v7, sm_90a, `/p` tiles): the same product as
// kernels/moe_gemm_sync.cuh (same operand roles, K order, scales and epilogue), with the work split
// by role instead of every warp doing all of it:
// - warpgroup 0, the producer (setmaxnreg down to kProducerRegisters): its copy warps (0-1) copy
//   each K tile's gathered token rows (16-byte cp.async into a swizzled staging area) and weight
//   codes into a stage of the copy ring, up to kStages tiles ahead, and have the stage's `landed`
//   mbarrier completed by the copies themselves (cp.async.mbarrier.arrive); its permute warps
//   (2-3) wait for `landed` and for a free permuted-token buffer (`retired`), move the tokens into
//   the core matrices wgmma reads (move_token_unit), fence them for the async proxy and arrive on
//   the buffer's `permuted` mbarrier and on the stage's `staged` one (its tokens are read);
// - warpgroups 1 and 2, the consumers (setmaxnreg up to kConsumerRegisters), each own half of
//   the block's channels: per K tile they wait for `permuted`, read their codes from the stage,
//   dequantize them into A fragments (two k16 steps at a time), give the stage back (`staged`,
//   one arrival per consumer warp) and issue wgmma m64nBMk16 with all BM tokens as B; a tile's
//   permuted buffer goes back to the permute warps (`retired`) once its MMAs have completed,
//   which the consumer learns while it issues the next tile's first MMAs (wgmma.wait_group 1).
// With the copies and the permute off the consumers, their only waits are the MMAs themselves
// and the `permuted` barrier; two consumer warpgroups per SM take turns at the tensor cores.
// PERF: GEMM v6's one-warpgroup wgmma tile issued 38 instructions per HGMMA (copies, permute,
// proxy fence, dequantization and MMA all on the same warps; ncu: tensor pipe 28% at M = 4096).
// Scales: the consumers load their rows' raw scale bits from global memory into a register ring
// and decode them per tile: kStages - 1 tiles ahead, or for MX and NVFP4 scales on an even ring in
// two groups of kStages / 2 tiles with one wait per group (the ring's NOTE in kernels/moe_gemm_ws_consumers.cuh).
// Cfg::kActE4m3 (MXFP4 x FP8 per token): the same producer over e4m3 token codes (128 k per
// tile), other consumers (kernels/moe_gemm_ws_e4m3.cuh).
// Cfg::kMmaOrderTokens (`/t` tiles): the token rows come with each 64-k tile (e4m3: 128-k tile) already in
// the consumers' K order (moeq_dev::mma_order_position: the permutation the permute warps apply), so
// wgmma reads the copy ring's staging itself through 128-byte-swizzled descriptors: no permute
// warps, no permuted buffers, and a stage goes back to the copy warps once the MMAs that read its
// tokens have completed.
// Cfg::kPersistent (`/s` tiles): one resident CTA per SM loops over output tiles (M block major
// within an N block, the launch grid's order), its rings and barrier phases running on across
// tiles: the copy warps fill the next tile's rows (two row buffers, `rows_full` / `rows_empty`
// mbarriers) and stages while the consumers finish this tile's MMAs and epilogue, which writes
// an out tile of its own past the ring.
// NOTE: NVRTC-safe: no standard headers.
#include "moeq_dev/format/prepared.cuh"
#include "moeq_dev/kernels/moe_gemm_common.cuh"
#include "moeq_dev/kernels/moe_gemm_ws_consumers.cuh"
#include "moeq_dev/kernels/moe_gemm_ws_e4m3.cuh"
#include "moeq_dev/kernels/moe_gemm_ws_producer.cuh"
#include "moeq_dev/kernels/moe_gemm_ws_shape.cuh"
#include "moeq_dev/ptx/mbarrier.cuh"
#include "moeq_dev/ptx/mma.cuh"

namespace moeq_dev {

template <class Cfg>
__device__ __forceinline__ void moe_gemm_ws_block(const MoeGemmParams& p) {
  using S = MoeGemmWsShape<Cfg>;
  constexpr int BM = S::kBlockM, BN = S::kBlockN, kStages = S::kStages;

  extern __shared__ __align__(128) unsigned char smem_unaligned[];
  // S::kAlignSlack: the ring from the first 1024-byte boundary (dynamic shared memory follows the static).
  unsigned char* const smem = smem_unaligned + bytes_to_boundary<S::kAlignSlack>(smem_address(smem_unaligned));
  constexpr bool kPersistent = S::kPersistent;
  constexpr int kRowBuffers = S::kRowBuffers;
  // Row buffer b of the block rows: row_src_buffers + b BM (persistent tiles alternate two).
  __shared__ int row_src_buffers[kRowBuffers * BM];
  // Copy warps: the activations of row r (padding rows: row 0, whose products land in output
  // columns nobody stores), stored thread-major: copy thread tid's rows tid / 8 + 8 j at
  // (tid / 8) BM / 8 + j, so it loads 2 of them per 16-byte shared load.
  __shared__ __align__(16) const unsigned short* row_ptr[(S::kCopyThreads / 8) * S::kRowPtrStride];
  __shared__ int row_dst_buffers[kRowBuffers * BM];
  __shared__ int block_expert_buffers[kRowBuffers];
  // Cfg::kRowScales: each row's A-row scale, fetched by the consumers before their main loop.
  // PERF: read in the epilogue (after the main loop, two dependent global loads with the
  // contiguous layout's a_scale_rows) they cost the Qwen3 MXFP4 x FP8-per-token GEMMs at M = 4096
  // +107 us (GEMM1) and +38 us (GEMM2) against MXFP8 activations on the same tile (ncu,
  // bench/results/2026-12-02-h200-e4m3-direct.md); here they land while the first stage does.
  __shared__ float block_row_scales[Cfg::kRowScales ? BM : 1];
  // Cfg::kActE4m3: the K tiles that need one pass per MX group (moe_gemm_ws_e4m3_consumers), and with MMA-order
  // tokens each row's base, one slot per row buffer (the producer's scan, e4m3_scan_block).
  constexpr bool kE4m3Scan = Cfg::kActE4m3 && S::kMmaOrder;
  __shared__ unsigned wide_tiles[Cfg::kActE4m3 ? kRowBuffers * kE4m3WideWords : 1];
  __shared__ unsigned char e4m3_row_bases[kE4m3Scan ? kRowBuffers * BN : 1];
  constexpr int kPermBuffers = S::kPermBuffers;
  // landed and staged (kStages each: copies done, stage free), permuted and retired (kPermBuffers
  // each: tokens permuted, buffer free); persistent: rows_full and rows_empty (one per row buffer:
  // a tile's rows written by the copy warps, read by the consumers' epilogue).
  constexpr int kRowBarriers = kPersistent ? 2 * kRowBuffers : 0;
  // kE4m3Scan: scanned (one per row buffer: the slot's scan written by the producer's scan warps).
  constexpr int kScanBarriers = kE4m3Scan ? kRowBuffers : 0;
  __shared__ __align__(8) unsigned long long barriers[2 * kStages + 2 * kPermBuffers + kRowBarriers + kScanBarriers];

  const int tid = threadIdx.x;
  constexpr int kCopyThreads = S::kCopyThreads;
  const unsigned landed0 = smem_address(&barriers[0]), staged0 = landed0 + 8 * kStages,
                 permuted0 = staged0 + 8 * kStages, retired0 = permuted0 + 8 * kPermBuffers,
                 rows_full0 = retired0 + 8 * kPermBuffers, rows_empty0 = rows_full0 + 8 * kRowBuffers,
                 scanned0 = rows_full0 + 8 * kRowBarriers;
  if (tid == 0) {
#pragma unroll
    for (int s = 0; s < kStages; ++s) {
      // Every copy thread's cp.async (cp.async.mbarrier.arrive), and the expect_tx arrival of each
      // bulk-copy lane.
      mbarrier_init(landed0 + 8 * s, kCopyThreads + (S::kBulkCodes ? 2 * S::kBulkLanes : 0));
      // Every permute thread once its tokens are read, one lane per consumer warp once its codes are
      // (S::kMmaOrder: one lane per consumer warp once the MMAs that read the stage have completed).
      mbarrier_init(staged0 + 8 * s, (S::kMmaOrder ? 0 : 128 - kCopyThreads) + 4 * S::kConsumers);
    }
#pragma unroll
    for (int b = 0; b < kPermBuffers; ++b) {
      mbarrier_init(permuted0 + 8 * b, 128 - kCopyThreads);  // every permute thread, after its share
      mbarrier_init(retired0 + 8 * b, 4 * S::kConsumers);    // one lane per consumer warp
    }
    if constexpr (kPersistent) {
#pragma unroll
      for (int b = 0; b < kRowBuffers; ++b) {
        mbarrier_init(rows_full0 + 8 * b, kCopyThreads);        // every copy thread, after its rows
        mbarrier_init(rows_empty0 + 8 * b, 4 * S::kConsumers);  // one lane per consumer warp, after its stores
      }
    }
#pragma unroll
    for (int b = 0; b < kScanBarriers; ++b) mbarrier_init(scanned0 + 8 * b, 128 - kCopyThreads);  // every scan thread
    if constexpr (S::kBulkCodes) fence_mbarrier_init();  // the bulk copies complete through the async proxy
  }
  if (Cfg::kActE4m3 && tid < kE4m3WideWords) wide_tiles[tid] = 0;  // seen after load_block_rows' barrier

  // This CTA's output tiles: tile i is the grid's tile first_tile + i tile_step (M block
  // (first_tile + i tile_step) % m_blocks, N block the quotient); one, the launch grid's own, unless
  // persistent. Every thread derives the same sequence from the device-side block count.
  const int N = p.n, K = p.k;
  int m_blocks, first_tile, tile_step, num_tiles;
  if constexpr (kPersistent) {
    // NOTE: never past the blocks the routing buffers hold, as the one-tile grid never is.
    m_blocks = min(device_m_blocks<BM>(p), p.max_m_blocks);
    const int all_tiles = m_blocks * ((N + BN - 1) / BN);
    first_tile = blockIdx.x;
    tile_step = gridDim.x;
    num_tiles = first_tile < all_tiles ? (all_tiles - first_tile + tile_step - 1) / tile_step : 0;
    if (num_tiles == 0) return;  // before any barrier: the whole CTA
    __syncthreads();             // the mbarriers' initialization
  } else {
    m_blocks = gridDim.x;
    // NOTE: m_blocks, not gridDim.x again: so ptxas orders these reads as it did before the roles became
    // functions (the same machine code, scripts/dev/compare_kernel_text.py).
    first_tile = blockIdx.x + blockIdx.y * m_blocks;
    tile_step = 1;
    num_tiles = 1;
    if (!load_block_rows<BM, S::kThreads>(p, blockIdx.x, tid, row_src_buffers, row_dst_buffers, block_expert_buffers))
      return;
  }
  const int tiles_n16 = (N + 15) / 16, tiles_k = (K + S::kTileK - 1) / S::kTileK;
  const long long row_bytes = static_cast<long long>(K) * S::kCodeBits / 8;
  const unsigned smem_base = smem_address(smem);
  const WsCta<Cfg> cta{p, tid, smem, smem_base, row_src_buffers, row_dst_buffers, block_expert_buffers, row_ptr,
                       block_row_scales, wide_tiles, e4m3_row_bases, landed0, staged0, permuted0, retired0, rows_full0,
                       rows_empty0, scanned0,
                       first_tile, tile_step, m_blocks, num_tiles, N, K, tiles_n16, tiles_k, row_bytes};
  if (tid < 128) {
    // NOTE: one setmaxnreg for the producer warpgroup's warps, whichever role they take: PTX asks that every warp
    // of a warpgroup execute the same setmaxnreg instruction. The 16-bit kernels' machine code is unchanged by it
    // (80x256/6/p/t, session 64); on the e4m3 `/s/t` tiles ptxas keeps 3 of the copy warps' shared addresses in
    // local memory (12 bytes, loaded once per output tile).
    setmaxnreg_dec<S::kProducerRegisters>();
    if (kE4m3Scan && tid >= kCopyThreads) moe_gemm_ws_scan_warps<Cfg>(cta);
    else moe_gemm_ws_producer<Cfg>(cta);
    return;
  }
  moe_gemm_ws_consumers<Cfg>(cta);
}

}  // namespace moeq_dev
