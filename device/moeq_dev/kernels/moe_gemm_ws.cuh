#pragma once
// The warp-specialized MoE GEMM body (GEMM v7, sm_90a, `/p` tiles): the same product as
// kernels/moe_gemm.cuh (same operand roles, K order, scales and epilogue), with the work split
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
// two groups of kStages / 2 tiles with one wait per group (the ring's NOTE below).
// Cfg::kActE4m3 (MXFP4 x FP8 per token): the same producer over e4m3 token codes (128 k per
// tile), other consumers (kernels/moe_gemm_ws_e4m3.cuh).
// Cfg::kMmaOrderTokens (`/t` tiles): the token rows come with each 64-k tile already in the
// consumers' K order (moeq_dev::mma_order_position: the permutation the permute warps apply), so
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
#include "moeq_dev/kernels/moe_gemm_ws_e4m3.cuh"
#include "moeq_dev/ptx/cp_async.cuh"
#include "moeq_dev/ptx/mbarrier.cuh"
#include "moeq_dev/ptx/mma.cuh"
#include "moeq_dev/ptx/wgmma.cuh"

namespace moeq_dev {

// Timing-only diagnostics (MOEQ_DIAG_WS, docs/env.md; the results are wrong): bits of the work the
// warp-specialized tile leaves out, to bound what each part costs inside it. 1: the permute warps move no
// tokens; 2: the consumers pass code words as A fragments (no dequantization); 4: no scale loads; 8: no
// wgmma issued (the fragments are still computed); 16: the copy warps copy no tokens; 32: no codes.
// Cfg::kDiagWs where the config names it, else 0.
enum : int {
  kWsSkipPermute = 1, kWsSkipDequant = 2, kWsSkipScales = 4, kWsSkipMma = 8, kWsSkipTokenCopies = 16, kWsSkipCodeCopies = 32
};
template <class C, class = void>
struct WsDiag {
  static constexpr int value = 0;
};
template <class C>
struct WsDiag<C, decltype(void(C::kDiagWs))> {
  static constexpr int value = C::kDiagWs;
};

// The value x, which ptxas cannot see as loop-invariant: a step added inside a loop instead of
// multiples of it hoisted into registers.
__device__ __forceinline__ long long opaque_step(long long x) {
  long long y;
  asm volatile("mov.b64 %0, %1;" : "=l"(y) : "l"(x));
  return y;
}

// Bytes from a shared-memory address to the next multiple of kBoundary (0: none asked).
template <int kBoundary>
__device__ __forceinline__ unsigned bytes_to_boundary(unsigned address) {
  if constexpr (kBoundary == 0) {
    return 0;
  } else {
    return (kBoundary - (address & (kBoundary - 1))) & (kBoundary - 1);
  }
}

template <class Cfg>
struct MoeGemmWsShape {
  static constexpr int kBlockM = Cfg::kBlockM, kBlockN = Cfg::kBlockN, kBlockK = 64, kStages = Cfg::kStages;
  // Codes per K tile: 64 (16-bit tokens, 128 bytes per row), or 128 e4m3 tokens in the same 128
  // bytes (Cfg::kActE4m3, kernels/moe_gemm_ws_e4m3.cuh).
  static constexpr int kTileK = Cfg::kActE4m3 ? 128 : kBlockK;
  static constexpr int kConsumers = 2;  // warpgroups, each half of the channels
  static constexpr int kThreads = 128 * (1 + kConsumers);
  static constexpr int kMinCtasPerSm = 1;  // __launch_bounds__: 168 registers at launch, before setmaxnreg
  static constexpr int kProducerRegisters = 56, kConsumerRegisters = 224;  // 128 x 56 + 256 x 224 <= 65536
  static constexpr int kConsumerN = kBlockN / kConsumers;
  static constexpr int kTilesN = kConsumerN / 64;  // 64-channel wgmma tiles per consumer
  static constexpr int kTilesM = kBlockM / 8;      // 8-token accumulator groups
  static constexpr int kCodeBits = WeightFormatTraits<Cfg::kFormat>::kCodeBits;
  static constexpr int kCodeRowBytes = kTileK * kCodeBits / 8;  // canonical: one channel's codes of a K tile
  static constexpr int kPreparedBlockBytes = kCodeBits * 128;   // prepared: 16 channels x 64 k
  static constexpr int kTokenBytes = kBlockM * kBlockK * 2;     // staging, and again permuted
  static constexpr int kCodeBytes = kBlockN * kCodeRowBytes;
  // The copy ring's stage: [staging tokens][codes], free again once the permute warps have read
  // its tokens and the consumers its codes; after the kStages stages, kPermBuffers permuted token
  // tiles, each held until the wgmma that read it has completed.
  // PERF: with the permuted tokens inside the stage (GEMM v7), a stage stayed taken until the
  // next tile's wgmma retired it, so 4 stages kept ~1.5 tiles of copies in flight and the
  // consumers waited on their stages ~45% of their stall samples (ncu, M = 4096, call C of
  // bench/results/2026-12-01-h200-gemm-v11.md).
  // Cfg::kMmaOrderTokens: none (wgmma reads the stage), and the stages start on a 1024-byte boundary (the
  // 128-byte swizzle repeats every 8 rows of 128 bytes, and the staging's chunk order is the swizzle's only
  // where a stage's address bits 7-9 are its row's r % 8), for which the ring takes 1 KB of slack.
  static constexpr bool kMmaOrder = Cfg::kMmaOrderTokens;
  static constexpr int kPermBuffers = kMmaOrder ? 0 : 3;
  static constexpr int kAlignSlack = kMmaOrder ? 1024 : 0;
  static constexpr int kCodeOffset = kTokenBytes;
  // 512 channels (MX weights, K % 64 == 0): the copy warps also stage each K tile's scales, a 4-byte
  // word per channel holding its two scale bytes (at byte 0 or 2), so the consumers keep no scale
  // ring or row pointers in registers.
  // PERF: with a register ring the 512-channel consumers spilled (ptxas: 40-120 local stores with a
  // 2-tile ring at 48 and 64 tokens, session 37; 264-388 bytes with the kStages-deep ring, session 34).
  static constexpr bool kStagedScales = kBlockN == 512;
  static constexpr int kScaleOffset = kTokenBytes + kCodeBytes;
  static constexpr int kScaleBytes = kStagedScales ? kBlockN * 4 : 0;
  static constexpr int kStageBytes = kTokenBytes + kCodeBytes + kScaleBytes;
  static constexpr int kPermutedOffset = kStages * kStageBytes;  // buffer b at kPermutedOffset + b * kTokenBytes
  // Producer warps 0-1 copy, 2-3 permute.
  static constexpr int kCopyThreads = 64;
  // Prepared 8-bit codes go by one bulk copy per 16-channel block and K tile (every block exists
  // in full, zero-padded past K), issued by kBulkLanes lanes of each copy warp; 4-bit and
  // canonical codes, and the tokens, by 16-byte cp.async.
  // PERF: with 16-byte copies for the codes too, the two copy warps bounded the FP8-block tile at
  // M = 4096: they seldom waited for a free stage, yet the permute warps waited for `landed` and
  // the consumers for `permuted` ~27% of their samples (ncu, call A of
  // bench/results/2026-12-01-h200-gemm-v12.md). Bulk copies: Qwen3 FP8-block GEMM1 M = 4096
  // 583 -> 517 us, GEMM2 355 -> 327; for 4-bit codes (half the bytes, 512-byte copies) they lost
  // 6-12% (INT4 GEMM1 M = 1024 200 -> 225 us), so those keep cp.async (call D there).
  static constexpr bool kBulkCodes = Cfg::kPreparedCodes && kCodeBits == 8;
  static constexpr int kCodeBlocks = kBlockN / 16, kBulkLanes = kCodeBlocks / 2;
  static constexpr int kOutRowBytes = kBlockN * 2 + 16;
  static constexpr int kRingBytes = kStages * kStageBytes + kPermBuffers * kTokenBytes;
  static_assert(!kMmaOrder || kStageBytes % 1024 == 0, "MMA-order stages on 1024-byte boundaries");
  static constexpr int kEpilogueBytes = kBlockM * kOutRowBytes;
  // Persistent: the out tile past the ring (the producer fills the next tile's stages meanwhile),
  // and two buffers of block rows; else the out tile reuses the drained ring.
  static constexpr bool kPersistent = Cfg::kPersistent;
  static constexpr int kRowBuffers = kPersistent ? 2 : 1;
  static constexpr int kEpilogueOffset = kPersistent ? kRingBytes : 0;
  static constexpr int kSmemBytes =
      kAlignSlack + (kPersistent ? kRingBytes + kEpilogueBytes : (kRingBytes > kEpilogueBytes ? kRingBytes : kEpilogueBytes));
  static_assert(Cfg::kWgmma && Cfg::kWarpsM == 1 && Cfg::kWarpsN == 8 && Cfg::kWarpsK == 1 && Cfg::kSplitK == 1,
                "producer tiles: two consumer warpgroups of 4 warps along N, wgmma, no split K");
  // NOTE: the e4m3 consumers hold a partial beside the accumulators (gemm_takes_e4m3).
  static_assert(!Cfg::kActE4m3 || (Cfg::kFormat == WeightFormatId::kMxfp4 && !Cfg::kPreparedCodes && Cfg::kRowScales &&
                                   kBlockN == 128),
                "e4m3 activations on producer tiles: canonical MXFP4 codes, row scales, 128 channels");
  // PERF: 80, 96 and 144 tokens: rows per expert near 64, 128 or 256 (gpt-oss-120b at M = 2048 and 4096,
  // Qwen3-30B-A3B at M = 4096) fill one or two such blocks where 64- and 128-row ones pad about half
  // the experts to a block more (plan::choose_block_m).
  // 48 tokens: ~32 rows per expert (gpt-oss-120b at M = 1024, Qwen3-30B-A3B at M = 512), which a 64-row
  // block holds too, but with a third of its MMAs, token copies and permutes on padding.
  static_assert(kBlockM == 48 || kBlockM == 64 || kBlockM == 80 || kBlockM == 96 || kBlockM == 128 || kBlockM == 144,
                "producer tiles: 48, 64, 80, 96, 128 or 144 tokens (the wgmma N)");
  static_assert(!Cfg::kActE4m3 || kBlockM == 64 || kBlockM == 128, "e4m3 activations on producer tiles: 64 or 128 tokens");
  static_assert(!kPersistent || !Cfg::kActE4m3, "persistent producer tiles: 16-bit activations");
  static_assert(!kMmaOrder || !Cfg::kActE4m3, "MMA-order tokens: 16-bit activations");
  // 512 channels: four 64-channel tiles per consumer, so up to 64 tokens (128 accumulators a thread).
  static_assert(kBlockN == 128 || kBlockN == 256 ||
                    (kBlockN == 512 && kBlockM <= 64 && !Cfg::kActE4m3 &&
                     (Cfg::kFormat == WeightFormatId::kMxfp4 || Cfg::kFormat == WeightFormatId::kMxfp8)),
                "producer tiles: 128 or 256 channels, or 512 (staged MX scales) with up to 64 tokens");
  static_assert(kStages >= 3 && kStages <= 8, "producer tiles: 3 to 8 stages");
};

template <class Cfg>
__device__ __forceinline__ void moe_gemm_ws_block(const MoeGemmParams& p) {
  using S = MoeGemmWsShape<Cfg>;
  constexpr int BM = S::kBlockM, BN = S::kBlockN, BK = S::kBlockK, kStages = S::kStages;
  constexpr int kTilesN = S::kTilesN, kTilesM = S::kTilesM;
  constexpr bool kFourBit = S::kCodeBits == 4;

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
  __shared__ __align__(16) const unsigned short* row_ptr[BM];
  __shared__ int row_dst_buffers[kRowBuffers * BM];
  __shared__ int block_expert_buffers[kRowBuffers];
  // Cfg::kRowScales: each row's A-row scale, fetched by the consumers before their main loop.
  // PERF: read in the epilogue (after the main loop, two dependent global loads with the
  // contiguous layout's a_scale_rows) they cost the Qwen3 MXFP4 x FP8-per-token GEMMs at M = 4096
  // +107 us (GEMM1) and +38 us (GEMM2) against MXFP8 activations on the same tile (ncu,
  // bench/results/2026-12-02-h200-e4m3-direct.md); here they land while the first stage does.
  __shared__ float block_row_scales[Cfg::kRowScales ? BM : 1];
  // Cfg::kActE4m3: the K tiles that need one pass per MX group (moe_gemm_ws_e4m3_consumers).
  __shared__ unsigned wide_tiles[Cfg::kActE4m3 ? kE4m3WideWords : 1];
  constexpr int kPermBuffers = S::kPermBuffers;
  // landed and staged (kStages each: copies done, stage free), permuted and retired (kPermBuffers
  // each: tokens permuted, buffer free); persistent: rows_full and rows_empty (one per row buffer:
  // a tile's rows written by the copy warps, read by the consumers' epilogue).
  constexpr int kRowBarriers = kPersistent ? 2 * kRowBuffers : 0;
  __shared__ __align__(8) unsigned long long barriers[2 * kStages + 2 * kPermBuffers + kRowBarriers];

  const int tid = threadIdx.x;
  constexpr int kCopyThreads = S::kCopyThreads;
  const unsigned landed0 = smem_address(&barriers[0]), staged0 = landed0 + 8 * kStages,
                 permuted0 = staged0 + 8 * kStages, retired0 = permuted0 + 8 * kPermBuffers,
                 rows_full0 = retired0 + 8 * kPermBuffers, rows_empty0 = rows_full0 + 8 * kRowBuffers;
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
    first_tile = blockIdx.x + blockIdx.y * gridDim.x;
    tile_step = 1;
    num_tiles = 1;
    if (!load_block_rows<BM, S::kThreads>(p, blockIdx.x, tid, row_src_buffers, row_dst_buffers, block_expert_buffers))
      return;
  }
  auto m_block_of = [&](int i) { return (first_tile + i * tile_step) % m_blocks; };
  auto n0_of = [&](int i) { return (first_tile + i * tile_step) / m_blocks * BN; };
  const int tiles_n16 = (N + 15) / 16, tiles_k = (K + S::kTileK - 1) / S::kTileK;
  const long long row_bytes = static_cast<long long>(K) * S::kCodeBits / 8;
  auto codes_of = [&](int e) {
    return Cfg::kPreparedCodes ? p.codes + static_cast<long long>(e) * tiles_n16 * tiles_k * S::kPreparedBlockBytes
                               : p.codes + static_cast<long long>(e) * N * row_bytes;
  };
  const unsigned smem_base = smem_address(smem);

  if (tid < 128) {
    // ---- Producer ----
    setmaxnreg_dec<S::kProducerRegisters>();
    if (tid < kCopyThreads) {
      // Copy warps. Token chunk j of this thread: row tid / 8 + kRowsPerPass j, 16-byte chunk
      // tid % 8 (a warp copies 4 whole rows: 4 global lines per instruction). Code chunk j
      // (without bulk copies): chunk tid + kCopyThreads j of the stage's codes, which is chunk
      // tid's plus j whole 16-channel blocks (prepared) or rows (canonical), so one base pointer
      // and one stride serve them all.
      // NOTE: the producer runs on kProducerRegisters (setmaxnreg): per-row 64-bit pointers kept
      // across the K loop spilled (ptxas -v), so they live in shared memory (row_ptr).
      const int chunk = tid % 8;
      constexpr int kRowsPerPass = kCopyThreads / 8, kTokenChunks = BM / kRowsPerPass;
      static_assert(kRowsPerPass % 8 == 0, "a copy thread's rows share r % 8 (its swizzle)");
      static_assert(kTokenChunks % 2 == 0, "row pointers read in pairs (16-byte shared loads)");
      constexpr int kCodeChunks = S::kBulkCodes ? 0 : S::kCodeBytes / 16 / kCopyThreads;
      constexpr int kChunksPerUnit = Cfg::kPreparedCodes ? S::kPreparedBlockBytes / 16 : S::kCodeRowBytes / 16;
      static_assert(kCopyThreads % kChunksPerUnit == 0, "whole blocks or rows per pass of the copy threads");
      constexpr int code_index_step = kCopyThreads / kChunksPerUnit;
      const int code_index_end = Cfg::kPreparedCodes ? tiles_n16 : N;
      const long long unit_bytes = Cfg::kPreparedCodes ? static_cast<long long>(tiles_k) * S::kPreparedBlockBytes : row_bytes;
      const long long code_stride = code_index_step * unit_bytes;  // bytes between chunks j and j + 1 (same K tile)
      // Canonical codes of a partial last K tile: this thread's chunks start at code k code_k.
      const int code_k = Cfg::kPreparedCodes ? 0 : (tid % kChunksPerUnit) * (128 / S::kCodeBits);
      constexpr int kCodeTileBytes = Cfg::kPreparedCodes ? S::kPreparedBlockBytes : S::kCodeRowBytes;
      // Bulk copies: lane l < kBulkLanes of copy warp w copies 16-channel block w kBulkLanes + l
      // (blocks past N are not copied: their channels' products are never stored).
      // NOTE: few live registers: the producer runs on kProducerRegisters.
      const int bulk_block = (tid / 32) * S::kBulkLanes + tid % 32;
      const bool bulk_lane = S::kBulkCodes && tid % 32 < S::kBulkLanes;
      const unsigned bulk_dst = smem_base + S::kCodeOffset + bulk_block * S::kPreparedBlockBytes;
      // NOTE: a_row_stride counts elements: 2 bytes, or 1 (e4m3). The copies below address the
      // same bytes either way (chunk c of tile it: byte 128 it + 16 c of the row).
      constexpr int kActBytes = Cfg::kActE4m3 ? 1 : 2;
      for (int i = 0; i < num_tiles; ++i) {
        const int buf = i % kRowBuffers;
        const int* row_src = row_src_buffers + buf * BM;
        if constexpr (kPersistent) {
          // Tile i's rows into buffer buf, once the consumers' epilogue of tile i - 2 has read it and
          // every copy thread has issued tile i - 1's copies (their row pointers are rewritten below).
          if (i >= kRowBuffers) mbarrier_wait(rows_empty0 + 8 * buf, ((i / kRowBuffers) - 1) & 1);
          if (i > 0) named_barrier_sync(1, kCopyThreads);
          fill_block_rows<BM, kCopyThreads>(p, m_block_of(i), tid, row_src_buffers + buf * BM,
                                            row_dst_buffers + buf * BM, block_expert_buffers + buf);
          mbarrier_arrive(rows_full0 + 8 * buf);
        }
        // NOTE: a copy thread reads back only the rows it wrote (tid + kCopyThreads j).
        for (int r = tid; r < BM; r += kCopyThreads) {
          const int src = row_src[r];
          const long long row_elements = src >= 0 ? static_cast<long long>(src) * p.a_row_stride : 0;
          const unsigned short* row;
          if constexpr (Cfg::kActE4m3) {
            row = reinterpret_cast<const unsigned short*>(reinterpret_cast<const unsigned char*>(p.a) + row_elements);
          } else {
            row = p.a + row_elements;
          }
          row_ptr[(r % kRowsPerPass) * kTokenChunks + r / kRowsPerPass] = row;
        }
        named_barrier_sync(1, kCopyThreads);
        const int n0 = n0_of(i);
        const unsigned char* codes_e = codes_of(block_expert_buffers[buf]);  // copy thread 0's, seen after the barrier
        // 16-channel block (prepared) or row (canonical) of code chunk j: code_index + j code_index_step.
        const int code_index = (Cfg::kPreparedCodes ? n0 / 16 : n0) + tid / kChunksPerUnit;
        const unsigned char* code_base = codes_e + code_index * unit_bytes + (tid % kChunksPerUnit) * 16;
        const unsigned bulk_bytes = bulk_lane && n0 / 16 + bulk_block < tiles_n16 ? S::kPreparedBlockBytes : 0;
        const unsigned char* bulk_src =
            codes_e + static_cast<long long>(bulk_bytes != 0 ? n0 / 16 + bulk_block : 0) * tiles_k * S::kPreparedBlockBytes;
        const unsigned row_ptr_base = smem_address(&row_ptr[(tid / 8) * kTokenChunks]);
        // S::kStagedScales: the scales of this thread's first channel (n0 + tid; MX: K / 32 a row) and the
        // bytes to its next (kCopyThreads channels on).
        const long long scale_groups = K / 32;
        const unsigned char* scale_row =
            static_cast<const unsigned char*>(p.scaling.scales) +
            (static_cast<long long>(block_expert_buffers[buf]) * N + n0 + tid) * scale_groups;
        const long long scale_stride = kCopyThreads * scale_groups;
        for (int it = 0; it < tiles_k; ++it) {
          const int g = i * tiles_k + it;  // K tiles through the ring so far
          const int stage = g % kStages;
          if (g >= kStages) mbarrier_wait(staged0 + 8 * stage, ((g / kStages) - 1) & 1);
          const unsigned base = smem_base + stage * S::kStageBytes;
          if (bulk_lane) {
            // NOTE: each lane expects its own bytes before its copy can complete them.
            mbarrier_arrive_expect_tx(landed0 + 8 * stage, bulk_bytes);
            if (bulk_bytes != 0)
              cp_async_bulk_to_shared(bulk_dst + stage * S::kStageBytes, bulk_src + static_cast<long long>(it) * S::kPreparedBlockBytes,
                                      S::kPreparedBlockBytes, landed0 + 8 * stage);
          }
          const int k = it * BK + chunk * 8;     // in 16-bit units of the row
          const bool k_valid = k * (2 / kActBytes) < K;  // the partial last K tile zero-fills
          // NOTE: r % 8 = (tid / 8) % 8 for every j (kRowsPerPass is a multiple of 8).
          const unsigned token_dst = base + (tid / 8) * 128 + ((chunk ^ ((tid / 8) % 8)) * 16);
          // PERF: 4 row pointers loaded before their 4 copies: one shared-load latency per 4 copies
          // (one per copy, GEMM v7 run 4: the copy warps issued at 0.14 IPC on short-scoreboard stalls).
          // (48-, 80- and 144-row blocks end on one pair: 6, 10 or 18 rows per copy thread.)
  #pragma unroll
          for (int jb = 0; jb < kTokenChunks; jb += 4) {
            const int pairs = jb + 4 <= kTokenChunks ? 2 : 1;
            const uint4 two_a = lds_128(row_ptr_base + jb * 8);
            const uint4 two_b = pairs == 2 ? lds_128(row_ptr_base + jb * 8 + 16) : make_uint4(0, 0, 0, 0);
            const unsigned long long ptrs[4] = {two_a.x | static_cast<unsigned long long>(two_a.y) << 32,
                                                two_a.z | static_cast<unsigned long long>(two_a.w) << 32,
                                                two_b.x | static_cast<unsigned long long>(two_b.y) << 32,
                                                two_b.z | static_cast<unsigned long long>(two_b.w) << 32};
  #pragma unroll
            for (int u = 0; u < 2 * pairs; ++u)
              if constexpr (!(WsDiag<Cfg>::value & kWsSkipTokenCopies)) cp_async_16(token_dst + (jb + u) * kRowsPerPass * 128,
                          reinterpret_cast<const unsigned short*>(ptrs[u]) + k, k_valid);
          }
          const bool code_k_valid = it * S::kTileK + code_k < K;
          if constexpr (S::kStagedScales) {
            // NOTE: running pointers whose steps ptxas cannot hoist (opaque_step): with the 16 code and 8
            // scale copies' pointers precomputed, the producer spilled at kProducerRegisters (ptxas, session 37).
            const unsigned char* from = code_base + it * kCodeTileBytes;
            const long long code_step = opaque_step(code_stride);
  #pragma unroll
            for (int j = 0; j < kCodeChunks; ++j) {
              const bool valid = code_k_valid && code_index + j * code_index_step < code_index_end;
              if constexpr (!(WsDiag<Cfg>::value & kWsSkipCodeCopies))
                cp_async_16(base + S::kCodeOffset + (tid + j * kCopyThreads) * 16, valid ? from : p.codes, valid);
              from += code_step;
            }
            // Channel tid + kCopyThreads u of the block: the aligned word holding its scale bytes 2 it and
            // 2 it + 1 (K / 32 scales a row, even, so the pair never straddles a word); only the pair is
            // read (a word past the tensor's end is never touched).
            const unsigned char* pair = scale_row + 2 * it;
            const long long scale_step = opaque_step(scale_stride);
  #pragma unroll
            for (int u = 0; u < BN / kCopyThreads; ++u) {
              const int misalign = static_cast<int>(reinterpret_cast<unsigned long long>(pair) & 2u);
              const bool valid = n0 + tid + u * kCopyThreads < N;
              cp_async_4(base + S::kScaleOffset + (tid + u * kCopyThreads) * 4, pair - misalign, valid ? misalign + 2 : 0);
              pair += scale_step;
            }
          } else {
  #pragma unroll
            for (int j = 0; j < kCodeChunks; ++j) {
              const bool valid = code_k_valid && code_index + j * code_index_step < code_index_end;
              const unsigned char* from = valid ? code_base + j * code_stride + it * kCodeTileBytes : p.codes;
              if constexpr (!(WsDiag<Cfg>::value & kWsSkipCodeCopies)) cp_async_16(base + S::kCodeOffset + (tid + j * kCopyThreads) * 16, from, valid);
            }
          }
          // The barrier's phase completes when every copy thread's copies so far have landed.
          cp_async_mbarrier_arrive(landed0 + 8 * stage);
        }
      }
    } else if constexpr (!S::kMmaOrder) {
      // Permute warps: they issue no cp.async, so their proxy fence waits for nothing but their
      // own stores. PERF: GEMM v6's fence on the copying threads compiled to a MEMBAR that waited
      // for their prefetches in flight (ncu long-scoreboard stalls; 2-8% of the time).
      // Units (row r, step pair sp) of permute_token_tile, with the addresses that do not change
      // from tile to tile computed once: the thread's rows are ptid + 64 i, all with r % 8 = x.
      // PERF: permute_token_tile's per-tile address arithmetic (and spills at 56 registers) cost
      // 165 instructions per tile and warp (ncu, GEMM v7 run 2); this is ~45.
      // An 80- or 144-row block's last pass has 16 rows (the first half of the first permute warp), a
      // 96-row block's 32, a 48-row block's only pass 48.
      constexpr int kPermuteThreads = 128 - kCopyThreads, kRowPasses = (BM + kPermuteThreads - 1) / kPermuteThreads;
      static_assert(kPermuteThreads == 64 && BM % 16 == 0, "64 permute threads, rows in whole quarter warps");
      const int ptid = tid - kCopyThreads, x = ptid % 8;
      unsigned read_offset[2][4];  // step pair sp, thread chunk tt: chunk 2 tt + sp of row ptid
#pragma unroll
      for (int sp = 0; sp < 2; ++sp)
#pragma unroll
        for (int tt = 0; tt < 4; ++tt) read_offset[sp][tt] = ptid * 128 + (((2 * tt + sp) ^ x) * 16);
      const unsigned write_offset = (ptid / 8) * 1024 + x * 16;
      // K tiles of every output tile in one run: the ring's stages and buffers do not restart.
      for (int g = 0; g < num_tiles * tiles_k; ++g) {
        const int stage = g % kStages, buffer = g % kPermBuffers;
        const unsigned base = smem_base + stage * S::kStageBytes;
        const unsigned permuted = smem_base + S::kPermutedOffset + buffer * S::kTokenBytes;
        mbarrier_wait(landed0 + 8 * stage, (g / kStages) & 1);
        if (g >= kPermBuffers) mbarrier_wait(retired0 + 8 * buffer, ((g / kPermBuffers) - 1) & 1);
#pragma unroll
        for (int sp = 0; sp < 2; ++sp)
#pragma unroll
          for (int pass = 0; pass < kRowPasses; ++pass) {
            // Row ptid + 64 pass: 64 rows = 8 KB of staging and 8 token groups = 8 KB permuted further.
            if (BM % kPermuteThreads != 0 && pass == kRowPasses - 1 && ptid >= BM % kPermuteThreads) continue;
            unsigned read[4];
#pragma unroll
            for (int tt = 0; tt < 4; ++tt) read[tt] = base + read_offset[sp][tt] + pass * 8192;
            if constexpr (!(WsDiag<Cfg>::value & kWsSkipPermute))
              move_token_unit(read, permuted + write_offset + pass * 8192 + sp * 512);
          }
        // NOTE: st.shared writes through the generic proxy, wgmma reads through the async one.
        // PERF: every permute thread arrives; one lane per warp after a __syncwarp was even at M = 1024 and up to
        // 1-4% slower at M = 4096 (session 37, call 5 of bench/results/2026-12-04-h200-wide-tiles.md).
        fence_proxy_async_shared();
        mbarrier_arrive(permuted0 + 8 * buffer);
        mbarrier_arrive(staged0 + 8 * stage);  // its staging reads are done: their values were stored
      }
    }
    return;
  }

  // ---- Consumers ----
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
    const int e = block_expert_buffers[0], n0 = n0_of(0);
    const int *row_src = row_src_buffers, *row_dst = row_dst_buffers;
    fetch_row_scales(row_src);
    float acc[kTilesN][kTilesM][4];
    moe_gemm_ws_e4m3_consumers<Cfg, S>(p, e, n0, tiles_k, smem_base, staged0, permuted0, retired0, wide_tiles, ctid,
                                       channel_of, acc);
    named_barrier_sync(2, 128 * S::kConsumers);
    write_output_tile<Cfg>(p, e, n0, acc, smem, S::kOutRowBytes, 0, t, channel_of, row_src, block_row_scales);
    named_barrier_sync(2, 128 * S::kConsumers);
    store_output_rows<BM, BN, 128 * S::kConsumers>(p, smem, S::kOutRowBytes, row_dst, n0, ctid);
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
      const LaneScaleRows<Cfg, kTilesN> scale_rows(p.scaling, e, n0, N, K, channel_of);
      // Fp8BlockFoldable: one multiply per pair instead of two where every scale of this CTA's
      // channel blocks allows it. Every warp reads the same scales, so all take the same path (the
      // warps of a warpgroup must issue the same wgmma instructions).
      bool fold_scales = false;
      if constexpr (Fp8BlockFoldable<Cfg>::value) {
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
      // their staged word (its scales start there: (n0 + channel) K / 32 = 2 mod 4); odd tiles flip it.
      unsigned staged_halves = 0;
      if constexpr (S::kStagedScales)
    #pragma unroll
        for (int nt = 0; nt < kTilesN; ++nt)
    #pragma unroll
          for (int r = 0; r < 2; ++r)
            staged_halves |= ((static_cast<unsigned>(n0 + channel_of(nt, r)) * static_cast<unsigned>(K / 32) >> 1) & 1u)
                             << (2 * nt + r);
      // MX and NVFP4 scales (new ones every K tile) on an even ring: the scale slots run in two groups
      // of kScaleGroup tiles; at a group's first tile the consumer waits once for the group's scales,
      // then issues the other group's (kScaleGroup tiles ahead), and decodes the group's tiles with no
      // further wait. Otherwise each tile's scales load kStages - 1 tiles ahead.
      // NOTE: ptxas gives every scale load of the loop one scoreboard, so a decode waits for all the
      // loads in flight: with a load per tile, each tile's decode waited for the scales issued the tile
      // before (ncu, gpt-oss-120b GEMM2 M = 1024 on 48x256/1x8x1/6/p/s: ~10% of the consumers' stall
      // samples on the decode's first use, long scoreboard).
      // PERF: grouped, gpt-oss-120b MXFP4 GEMM1 / GEMM2 -10.4% / -11.5% at M = 1024, -4.7% / -7.8% at
      // M = 2048 (step -8.4% / -4.1%); Qwen3-30B-A3B MXFP4 M = 1024 +1.0% / +0.9%; INT4-g128 and
      // FP8-block (a scale per 128 k: one load in two hits the same word) lost 1-1.7% at Qwen3 M = 4096,
      // so they keep the per-tile ring (bench/results/2026-12-04-h200-ws-scales.md, call 4).
      constexpr WeightFormatId kF = Cfg::kFormat;
      constexpr bool kGroupedScales = !S::kStagedScales && kStages % 2 == 0 &&
                                      (kF == WeightFormatId::kMxfp4 || kF == WeightFormatId::kMxfp8 || kF == WeightFormatId::kNvfp4);
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
      // A fragments of k16 steps 2h and 2h + 1 (the K order of kernels/moe_gemm.cuh: lane t's
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
      write_output_tile<Cfg>(p, e, n0, acc, out_tile, S::kOutRowBytes, 0, t, channel_of, row_src,
                             Cfg::kRowScales ? block_row_scales : nullptr);
      named_barrier_sync(2, 128 * S::kConsumers);
      store_output_rows<BM, BN, 128 * S::kConsumers>(p, out_tile, S::kOutRowBytes, row_dst, n0, ctid);
      if constexpr (kPersistent) {
        // This warp's reads of the tile's rows are done: the copy warps may refill the row buffer.
        __syncwarp();
        if (lane == 0) mbarrier_arrive(rows_empty0 + 8 * buf);
      }
    }
  }
}

}  // namespace moeq_dev
