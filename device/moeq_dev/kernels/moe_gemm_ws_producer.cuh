#pragma once
// The producer warpgroup of the warp-specialized MoE GEMM tile (kernels/moe_gemm_ws.cuh describes the roles):
// its copy warps fill the ring's stages with each K tile's gathered token rows and weight codes (and, at 512
// channels, the MX scales); its permute warps move the staged tokens into the core matrices wgmma reads, unless
// the tokens come in the MMA's K order (S::kMmaOrder).
// NOTE: NVRTC-safe: no standard headers.
#include "moeq_dev/kernels/moe_gemm_activation_epilogue.cuh"
#include "moeq_dev/kernels/moe_gemm_common.cuh"
#include "moeq_dev/kernels/moe_gemm_ws_e4m3.cuh"
#include "moeq_dev/kernels/moe_gemm_ws_shape.cuh"
#include "moeq_dev/ptx/cp_async.cuh"
#include "moeq_dev/ptx/mbarrier.cuh"
#include "moeq_dev/ptx/mma.cuh"
#include "moeq_dev/ptx/wgmma.cuh"

namespace moeq_dev {

template <class Cfg>
__device__ __forceinline__ void moe_gemm_ws_producer(const WsCta<Cfg>& cta) {
  // NOTE: the shared state under the names it had when the roles were one function (moe_gemm_ws_block); the
  // machine code is the same (scripts/dev/compare_kernel_text.py, session 42).
  using S = MoeGemmWsShape<Cfg>;
  constexpr int BM = S::kBlockM, BN = S::kBlockN, BK = S::kBlockK, kStages = S::kStages;
  constexpr bool kPersistent = S::kPersistent;
  constexpr bool kHalves = gemm_pairs_gate_up_halves<Cfg>();  // the activation epilogue's [gate | up] rows
  constexpr int kRowBuffers = S::kRowBuffers, kPermBuffers = S::kPermBuffers, kCopyThreads = S::kCopyThreads;
  const MoeGemmParams& p = cta.p;
  const int tid = cta.tid, N = cta.n, K = cta.k, num_tiles = cta.num_tiles, tiles_n16 = cta.tiles_n16,
            tiles_k = cta.tiles_k;
  const long long row_bytes = cta.row_bytes;
  const unsigned smem_base = cta.smem_base;
  int* const row_src_buffers = cta.row_src_buffers;
  int* const row_dst_buffers = cta.row_dst_buffers;
  int* const block_expert_buffers = cta.block_expert_buffers;
  const unsigned short** const row_ptr = cta.row_ptr;
  const unsigned landed0 = cta.landed0, staged0 = cta.staged0, permuted0 = cta.permuted0, retired0 = cta.retired0,
                 rows_full0 = cta.rows_full0, rows_empty0 = cta.rows_empty0;
  auto m_block_of = [&](int i) { return cta.m_block_of(i); };
  auto n0_of = [&](int i) { return cta.n0_of(i); };
  auto codes_of = [&](int e) { return cta.codes_of(e); };
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
    static_assert(BM % kRowsPerPass == 0, "whole rows per copy thread");
    constexpr int kCodeChunks = S::kBulkCodes ? 0 : S::kCodeBytes / 16 / kCopyThreads;
    constexpr int kChunksPerUnit = Cfg::kPreparedCodes ? S::kPreparedBlockBytes / 16 : S::kCodeRowBytes / 16;
    static_assert(kCopyThreads % kChunksPerUnit == 0, "whole blocks or rows per pass of the copy threads");
    constexpr int code_index_step = kCopyThreads / kChunksPerUnit;
    const int code_index_end = Cfg::kPreparedCodes ? tiles_n16 : N;
    // [gate | up] rows paired (the activation epilogue, epilogue_weight_row): the code chunk from which a thread's
    // units are up rows, and the units (16-channel blocks or rows) between a gate row and its up row less BN / 2.
    constexpr int kHalfUnits = Cfg::kPreparedCodes ? BN / 32 : BN / 2;
    static_assert(!kHalves || kHalfUnits % code_index_step == 0, "each copy thread's chunks split at the half");
    constexpr int kHalfChunk = kHalfUnits / code_index_step;
    const int half_units = Cfg::kPreparedCodes ? (N / 2 - BN / 2) / 16 : N / 2 - BN / 2;
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
        row_ptr[(r % kRowsPerPass) * S::kRowPtrStride + r / kRowsPerPass] = row;
      }
      named_barrier_sync(1, kCopyThreads);
      const int n0 = n0_of(i);
      const unsigned char* codes_e = codes_of(block_expert_buffers[buf]);  // copy thread 0's, seen after the barrier
      // 16-channel block (prepared) or row (canonical) of code chunk j: code_index + j code_index_step, and with
      // [gate | up] rows paired (kHalves: the block's gate rows from n0 / 2, then the same up rows, as
      // epilogue_weight_row) half_units more from chunk kHalfChunk on. Gate rows past I read up rows (their outputs are
      // never stored); up rows past N are not read.
      const int code_index = (Cfg::kPreparedCodes ? (kHalves ? n0 / 32 : n0 / 16) : (kHalves ? n0 / 2 : n0)) +
                             tid / kChunksPerUnit;
      const unsigned char* code_base = codes_e + code_index * unit_bytes + (tid % kChunksPerUnit) * 16;
      // The bulk lane's 16-channel block, [gate | up] paired as above.
      const int bulk_weight_block =
          kHalves ? n0 / 32 + bulk_block + (bulk_block >= BN / 32 ? half_units : 0) : n0 / 16 + bulk_block;
      const unsigned bulk_bytes = bulk_lane && bulk_weight_block < tiles_n16 ? S::kPreparedBlockBytes : 0;
      const unsigned char* bulk_src =
          codes_e + static_cast<long long>(bulk_bytes != 0 ? bulk_weight_block : 0) * tiles_k * S::kPreparedBlockBytes;
      const unsigned row_ptr_base = smem_address(&row_ptr[(tid / 8) * S::kRowPtrStride]);
      // S::kStagedScales: the scales of this thread's first channel (weight row n0 + tid, or n0 / 2 + tid with
      // [gate | up] rows paired; MX: K / 32 a row) and the bytes to its next (kCopyThreads channels on).
      const long long scale_groups = K / 32;
      const unsigned char* scale_row =
          static_cast<const unsigned char*>(p.scaling.scales) +
          (static_cast<long long>(block_expert_buffers[buf]) * N + (kHalves ? n0 / 2 : n0) + tid) * scale_groups;
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
        // (48-, 80- and 144-row blocks end on one pair: 6, 10 or 18 rows per copy thread; a 24-row block has 3.)
#pragma unroll
        for (int jb = 0; jb < kTokenChunks; jb += 4) {
          const int copies = jb + 4 <= kTokenChunks ? 4 : kTokenChunks - jb;
          const uint4 two_a = lds_128(row_ptr_base + jb * 8);
          const uint4 two_b = copies > 2 ? lds_128(row_ptr_base + jb * 8 + 16) : make_uint4(0, 0, 0, 0);
          const unsigned long long ptrs[4] = {two_a.x | static_cast<unsigned long long>(two_a.y) << 32,
                                              two_a.z | static_cast<unsigned long long>(two_a.w) << 32,
                                              two_b.x | static_cast<unsigned long long>(two_b.y) << 32,
                                              two_b.z | static_cast<unsigned long long>(two_b.w) << 32};
#pragma unroll
          for (int u = 0; u < copies; ++u)
            if constexpr (!(WsDiag<Cfg>::value & kWsSkipTokenCopies)) cp_async_16(token_dst + (jb + u) * kRowsPerPass * 128,
                        reinterpret_cast<const unsigned short*>(ptrs[u]) + k, k_valid);
        }
        const bool code_k_valid = it * S::kTileK + code_k < K;
        if constexpr (S::kStagedScales || S::kMinCtasPerSm == 2) {
          // NOTE: running pointers whose steps ptxas cannot hoist (opaque_step): with the 16 code and 8
          // scale copies' pointers precomputed, the producer spilled at kProducerRegisters (ptxas, session 37);
          // at 32 registers (two CTAs an SM) the precomputed code pointers alone spilled, 11 reloads per copy
          // thread and K tile (ptxas, session 41).
          const unsigned char* from = code_base + it * kCodeTileBytes;
          const long long code_step = opaque_step(code_stride);
#pragma unroll
          for (int j = 0; j < kCodeChunks; ++j) {
            if constexpr (kHalves)
              if (j == kHalfChunk) from += half_units * unit_bytes;
            const int unit = code_index + j * code_index_step + (kHalves && j >= kHalfChunk ? half_units : 0);
            const bool valid = code_k_valid && unit < code_index_end;
            if constexpr (!(WsDiag<Cfg>::value & kWsSkipCodeCopies))
              cp_async_16(base + S::kCodeOffset + (tid + j * kCopyThreads) * 16, valid ? from : p.codes, valid);
            from += code_step;
          }
          if constexpr (S::kStagedScales) {
            // Channel tid + kCopyThreads u of the block: the aligned word holding its scale bytes 2 it and
            // 2 it + 1 (K / 32 scales a row, even, so the pair never straddles a word); only the pair is
            // read (a word past the tensor's end is never touched).
            const unsigned char* pair = scale_row + 2 * it;
            const long long scale_step = opaque_step(scale_stride);
#pragma unroll
            for (int u = 0; u < BN / kCopyThreads; ++u) {
              // [gate | up] rows paired: channels BN / 2 on are the up rows, N / 2 - BN / 2 rows further.
              constexpr int kHalfU = BN / 2 / kCopyThreads;
              if constexpr (kHalves)
                if (u == kHalfU) pair += static_cast<long long>(N / 2 - BN / 2) * scale_groups;
              const int row = kHalves ? n0 / 2 + tid + u * kCopyThreads + (u >= kHalfU ? N / 2 - BN / 2 : 0)
                                      : n0 + tid + u * kCopyThreads;
              const int misalign = static_cast<int>(reinterpret_cast<unsigned long long>(pair) & 2u);
              const bool valid = row < N;
              cp_async_4(base + S::kScaleOffset + (tid + u * kCopyThreads) * 4, pair - misalign, valid ? misalign + 2 : 0);
              pair += scale_step;
            }
          }
        } else {
#pragma unroll
          for (int j = 0; j < kCodeChunks; ++j) {
            const int half_jump = kHalves && j >= kHalfChunk ? half_units : 0;
            const bool valid = code_k_valid && code_index + j * code_index_step + half_jump < code_index_end;
            const unsigned char* from =
                valid ? code_base + j * code_stride + half_jump * unit_bytes + it * kCodeTileBytes : p.codes;
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
}

// The producer warpgroup's two scan warps (Cfg::kActE4m3 with MMA-order tokens, whose tokens need no permute
// warps): each output tile's row bases and wide K tiles into its row-buffer slot (e4m3_scan_block), as soon as the
// consumers' epilogue of the slot's last tile has passed (they read the slot until then). The tile's expert is read
// from the routing buffers, not from the copy warps' row buffer, so the scan runs a tile ahead of the consumers.
// PERF: waiting for the copy warps' rows (rows_full), the scan started only ~6 K tiles before the consumers needed
// it, and the consumers waited for it: 3.9% of the warp samples of the Qwen3 MXFP4 x FP8 GEMM1 at M = 4096 (ncu
// source counters, H100).
// NOTE: a function of its own, entered before moe_gemm_ws_producer: as a third branch of it, ptxas spilled 12 bytes
// of the copy warps' addresses (sm_90a, 128x128/6/p/s/t).
template <class Cfg>
__device__ __forceinline__ void moe_gemm_ws_scan_warps(const WsCta<Cfg>& cta) {
  using S = MoeGemmWsShape<Cfg>;
  constexpr int kRowBuffers = S::kRowBuffers, kThreads = 128 - S::kCopyThreads;
  const int stid = cta.tid - S::kCopyThreads;
  for (int i = 0; i < cta.num_tiles; ++i) {
    const int buf = i % kRowBuffers;
    if (i >= kRowBuffers) mbarrier_wait(cta.rows_empty0 + 8 * buf, ((i / kRowBuffers) - 1) & 1);
    e4m3_scan_block<S::kBlockN>(cta.p, block_expert_of(cta.p, cta.m_block_of(i)), cta.n0_of(i), cta.tiles_k, stid,
                                kThreads, 4, cta.e4m3_row_bases + buf * S::kBlockN, cta.wide_tiles + buf * kE4m3WideWords);
    mbarrier_arrive(cta.scanned0 + 8 * buf);
  }
}

}  // namespace moeq_dev
