#pragma once
// The mma.sync MoE GEMM tile's shape (kernels/moe_gemm_sync.cuh): warps, ring, scale ring and the
// shared-memory layout per Cfg, and the static_asserts that bound the configs it takes.
// NOTE: NVRTC-safe: no standard headers.
#include "moeq_dev/format/weights_fragment.cuh"

namespace moeq_dev {

template <class Cfg>
struct MoeGemmShape {
  static constexpr int kBlockM = Cfg::kBlockM, kBlockN = Cfg::kBlockN, kBlockK = 64;
  static constexpr int kWarpsM = Cfg::kWarpsM, kWarpsN = Cfg::kWarpsN, kWarpsK = Cfg::kWarpsK;
  static constexpr int kStages = Cfg::kStages, kSplitK = Cfg::kSplitK, kMinCtasPerSm = Cfg::kMinCtasPerSm;
  // Warp-specialized mma.sync tiles (kProducer without kWgmma): one more warp, the producer, which
  // alone issues the ring's copies (moe_gemm_block).
  static constexpr bool kCopyWarp = Cfg::kProducer && !Cfg::kWgmma;
  static constexpr int kComputeThreads = 32 * kWarpsM * kWarpsN * kWarpsK;
  static constexpr int kThreads = kComputeThreads + (kCopyWarp ? 32 : 0);
  static constexpr int kCopyThreads = kCopyWarp ? 32 : kThreads;
  // Scale-ring slots: one per ring step, or for copy-warp tiles 4 (3) where the stages are a
  // multiple of 4 (3): the scales of 3 (2) tiles ahead cover their load latency, and deeper rings
  // cost 4 registers per slot and 16-channel tile.
  // PERF: with one slot per stage the copy-warp 8x128 INT4 tile ran 20-23% slower at 6 and 8
  // stages than at 4, with 3-4 slots 12% (runs 5 and 6 of bench/results/2026-11-30-h200-gemm-v8.md).
  static constexpr int kScaleSlots = !kCopyWarp              ? kStages / kWarpsK
                                     : kStages % 4 == 0 ? 4
                                     : kStages % 3 == 0 ? 3
                                                        : kStages;
  static constexpr int kWarpM = kBlockM / kWarpsM, kWarpN = kBlockN / kWarpsN;
  static constexpr int kTilesM = kWarpM / 8, kTilesN = kWarpN / 16;  // 8 tokens, 16 channels
  static constexpr int kCodeBits = WeightFormatTraits<Cfg::kFormat>::kCodeBits;
  static constexpr int kCodeRowBytes = kBlockK * kCodeBits / 8;  // 32 or 64
  static constexpr int kCodeChunksPerRow = kCodeRowBytes / 16;
  static constexpr int kCodesPerChunk = 128 / kCodeBits;
  // NOTE: 16 bytes of padding per A row: the 8 lanes of a quarter warp (rows g, g + 1) hit
  // distinct banks with 16-byte loads. The output tile pads its rows the same way.
  static constexpr bool kWgmma = Cfg::kWgmma;
  // wgmma: unpadded rows with XOR-swizzled chunks instead (see the permute).
  static constexpr int kARowBytes = kWgmma ? kBlockK * 2 : kBlockK * 2 + 16;
  static constexpr int kAStageBytes = kBlockM * kARowBytes;
  static constexpr int kStageBytes = kAStageBytes + kBlockN * kCodeRowBytes;
  static constexpr int kAccPerThread = kTilesN * kTilesM * 4;
  static constexpr int kReduceBytes = kWarpsK > 1 ? (kThreads - kThreads / kWarpsK) * kAccPerThread * 4 : 0;
  static constexpr int kOutRowBytes = kBlockN * 2 + 16;
  static constexpr int kEpilogueBytes = kReduceBytes + kBlockM * kOutRowBytes;
  // Split K: ranks > 0 leave their K group 0's sums here for rank 0 to read.
  static constexpr int kSplitBytes = kSplitK > 1 ? kThreads / kWarpsK * kAccPerThread * 4 : 0;
  // wgmma: two buffers of the tokens in core-matrix order (8 token groups x 4 steps x 2 halves)
  // after the ring.
  static constexpr int kPermOffset = kStages * kStageBytes;
  static constexpr int kPermBufferBytes = kWgmma ? kBlockM * kBlockK * 2 : 0;
  static constexpr int kRingBytes = kPermOffset + 2 * kPermBufferBytes;
  static constexpr int kRingOrEpilogue = kRingBytes > kEpilogueBytes ? kRingBytes : kEpilogueBytes;
  static constexpr int kSmemBytes = kRingOrEpilogue > kSplitBytes ? kRingOrEpilogue : kSplitBytes;
  static_assert(kBlockM % (8 * kWarpsM) == 0 && kBlockN % (16 * kWarpsN) == 0, "warp tile shape");
  static_assert(kWarpsK == 1 || kWarpsK == 2 || kWarpsK == 4, "1, 2 or 4 K groups");
  static_assert(kSplitK == 1 || kSplitK == 2 || kSplitK == 4, "1, 2 or 4 CTAs along K");
  static_assert(!Cfg::kActE4m3, "e4m3 activations: the direct-load body only");
  static_assert(!kWgmma || (kBlockM == 64 && kWarpsM == 1 && kWarpsN == 4 && kWarpsK == 1 && kSplitK == 1 &&
                            kBlockN % 64 == 0),
                "wgmma tiles: 64 tokens, one warpgroup of 4 warps, 64-channel MMA tiles");
  static_assert(kStages % kWarpsK == 0 && kStages / kWarpsK >= 2, "at least two ring steps of kWarpsK tiles");
  static_assert(!kCopyWarp || (kBlockM <= 32 && kWarpsM == 1 && kWarpsK == 1 && kSplitK == 1),
                "warp-specialized mma.sync tiles: up to 32 tokens, warps along N only, no split K");
};

}  // namespace moeq_dev
