#pragma once
// The warp-specialized MoE GEMM tile's shape (kernels/moe_gemm_ws.cuh): shared-memory layout, register
// budgets, ring and copy geometry per Cfg, the timing-only diagnostics, two small helpers of its body, and
// WsCta, what its roles (producer, consumers) share.
// NOTE: NVRTC-safe: no standard headers.
#include "moeq_dev/kernels/moe_gemm_common.cuh"

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
  // __launch_bounds__: one CTA an SM starts on 168 registers a thread (65536 / 384, in steps of 8), two
  // (`/o2`) on 80 (65536 / 768); setmaxnreg then moves the producer's spare ones to the consumers, within
  // what the CTA holds: 128 x 56 + 256 x 224 = 384 x 168, and 128 x 32 + 256 x 104 = 384 x 80.
  // PERF: two CTAs an SM for the 16-32-token tiles, which one CTA left latency-bound (~2000 cycles per K
  // tile against ~1000 for their bytes, session 40): one CTA's waits overlap the other's MMAs.
  static constexpr int kMinCtasPerSm = Cfg::kMinCtasPerSm == 2 ? 2 : 1;
  static constexpr int kProducerRegisters = kMinCtasPerSm == 2 ? 32 : 56;
  static constexpr int kConsumerRegisters = kMinCtasPerSm == 2 ? 104 : 224;
  static_assert(128 * kProducerRegisters + 256 * kConsumerRegisters <=
                    kThreads * (65536 / (kThreads * kMinCtasPerSm) / 8 * 8),
                "setmaxnreg: the warpgroups' registers within what the CTA starts with");
  static_assert(Cfg::kMinCtasPerSm == 0 || Cfg::kMinCtasPerSm == 2, "producer tiles: one CTA an SM, or two (/o2)");
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
  // The copy warps' row pointers (moe_gemm_ws_block's row_ptr): each copy thread's start on a 16-byte boundary
  // (an even stride), so a 24-row block gives each 3 and a stride of 4.
  static constexpr int kRowPtrStride = (kBlockM / (kCopyThreads / 8) + 1) / 2 * 2;
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
  // 16, 24 and 32 tokens (MMA-order tokens only): ~8-24 rows per expert (Qwen3-30B-A3B at M = 256, gpt-oss-120b
  // at M = 512), where each expert's weights pass through the tile about once and the direct tiles (/r) hold every
  // token fragment in registers, per warp.
  static_assert(kBlockM == 48 || kBlockM == 64 || kBlockM == 80 || kBlockM == 96 || kBlockM == 128 || kBlockM == 144 ||
                    (kMmaOrder && (kBlockM == 16 || kBlockM == 24 || kBlockM == 32)),
                "producer tiles: 48, 64, 80, 96, 128 or 144 tokens (the wgmma N), or 16, 24, 32 with MMA-order tokens");
  static_assert(!Cfg::kActE4m3 || kBlockM == 64 || kBlockM == 128, "e4m3 activations on producer tiles: 64 or 128 tokens");
  static_assert(!kPersistent || !Cfg::kActE4m3 || kMmaOrder, "persistent producer tiles: 16-bit activations, or e4m3 on `/t`");
  // 512 channels: four 64-channel tiles per consumer, so up to 64 tokens (128 accumulators a thread).
  static_assert(kBlockN == 128 || kBlockN == 256 ||
                    (kBlockN == 512 && kBlockM <= 64 && !Cfg::kActE4m3 &&
                     (Cfg::kFormat == WeightFormatId::kMxfp4 || Cfg::kFormat == WeightFormatId::kMxfp8)),
                "producer tiles: 128 or 256 channels, or 512 (staged MX scales) with up to 64 tokens");
  static_assert(kStages >= 3 && kStages <= 8, "producer tiles: 3 to 8 stages");
};

// What the roles of a warp-specialized CTA share (moe_gemm_ws_block builds it, moe_gemm_ws_producer and
// moe_gemm_ws_consumers read it): the parameters, the ring and the row buffers in shared memory, the
// mbarriers' addresses and the CTA's output tiles.
template <class Cfg>
struct WsCta {
  using S = MoeGemmWsShape<Cfg>;
  const MoeGemmParams& p;
  int tid;
  unsigned char* smem;  // the ring, from its S::kAlignSlack boundary
  unsigned smem_base;   // smem's shared-memory address
  int* row_src_buffers;  // kRowBuffers x BM: the block rows' source rows
  int* row_dst_buffers;  // and their output rows
  int* block_expert_buffers;  // kRowBuffers: each buffer's expert
  const unsigned short** row_ptr;  // the copy warps' token row pointers (BM, thread-major)
  float* block_row_scales;  // Cfg::kRowScales: BM A-row scales
  unsigned* wide_tiles;     // Cfg::kActE4m3: the K tiles of one pass per MX group (MMA-order tokens: a slot per row buffer)
  unsigned char* e4m3_row_bases;  // Cfg::kActE4m3, MMA-order tokens: BN row bases per row buffer
  unsigned landed0, staged0, permuted0, retired0, rows_full0, rows_empty0, scanned0;  // each barrier array's first
  // Output tile i of the CTA is the grid's tile first_tile + i tile_step: M block (first_tile + i tile_step) %
  // m_blocks, N block the quotient.
  int first_tile, tile_step, m_blocks, num_tiles;
  int n, k;  // p.n and p.k
  int tiles_n16, tiles_k;
  long long row_bytes;  // one channel's canonical codes

  __device__ __forceinline__ int m_block_of(int i) const { return (first_tile + i * tile_step) % m_blocks; }
  __device__ __forceinline__ int n0_of(int i) const { return (first_tile + i * tile_step) / m_blocks * S::kBlockN; }
  // Expert e's codes.
  __device__ __forceinline__ const unsigned char* codes_of(int e) const {
    return Cfg::kPreparedCodes ? p.codes + static_cast<long long>(e) * tiles_n16 * tiles_k * S::kPreparedBlockBytes
                               : p.codes + static_cast<long long>(e) * n * row_bytes;
  }
};

}  // namespace moeq_dev
