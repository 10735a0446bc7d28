#pragma once
// Host side of the quantized MoE GEMM (device/moeq_dev/kernels/moe_gemm.cuh), version 1:
// mma.sync m16n8k16 with bf16/f16 activations, weights read in the canonical layout of
// CONTRACT §4 and dequantized on chip. Enqueues only (no sync, no allocation, no compile after
// a config's first use): CUDA-graph safe.
#include <cstdint>
#include <string>
#include <vector>

#include "cuda/driver.hpp"
#include "jit/compiler.hpp"
#include "moeq/types.hpp"
#include "moeq/weights.hpp"

namespace moeq::cuda {

struct GemmTile {
  int block_m = 16;  // rows (tokens) per CTA: 16, 32 or 64
  int block_n = 128;
  int block_k = 64;
  int threads = 128;
  std::string to_string() const;
};

// The tile of a block size: K tile 64.
// PERF: a K tile of 128 (block_m <= 32) was 10-40% slower on the H200 at M = 16-256 (run 4,
// bench/results/2026-11-30-h200-run4.md): 160-232 registers per thread cut the resident CTAs
// more than the larger load batches helped. Only M = 1 gained (57 vs 60 us, GEMM1 INT4).
GemmTile gemm_tile_for(int block_m);

// One GEMM's weights in device memory, canonical layout (WeightDesc documents each tensor).
struct GemmWeights {
  CUdeviceptr codes = 0, scales = 0, global_scales = 0, zero_points = 0, bias = 0;
};

struct MoeGemmArgs {
  WeightDesc weights_desc;
  GemmWeights weights;
  DType act_dtype = DType::bf16;  // A and C
  CUdeviceptr a = 0;
  int64_t a_row_stride = 0;  // elements
  CUdeviceptr c = 0;
  int64_t c_row_stride = 0;  // elements
  GemmTile tile;
  bool gather = true;  // indexed layout; else segments (contiguous, masked)
  // gather: align outputs built with block_m == tile.block_m
  CUdeviceptr sorted_ids = 0, expert_ids = 0, num_tokens_padded = 0;
  int64_t num_slots = 0;         // M * top_k
  int64_t src_row_divisor = 1;   // top_k for GEMM1 (A is [M, K]), 1 for GEMM2
  int64_t sorted_capacity = 0;   // entries of sorted_ids (a multiple of block_m)
  // segments: from build_segments
  CUdeviceptr block_table = 0, num_blocks = 0;
  int64_t max_blocks = 0;
};

// Every reason this GEMM cannot run the weights (K % 32, N % 2, sizes); empty when it can.
std::vector<std::string> moe_gemm_reasons(const WeightDesc& w, DType act_dtype);
void moe_gemm(const MoeGemmArgs& args, CUstream stream);

// Segment table of the contiguous / masked layouts: at most ceil(rows / BM) + E blocks of
// {expert, first row, rows}, int32 x 3 each, plus the count (int32 [1]).
int64_t segment_capacity(int64_t rows, int64_t num_experts, int64_t block_m);
// offsets: int64 [E+1] (contiguous), or 0 with counts [E] (i32/i64) and rows_per_expert = T.
void build_segments(const WeightDesc& w, DType act_dtype, const GemmTile& tile, CUdeviceptr offsets,
                    CUdeviceptr counts, DType counts_dtype, int64_t rows_per_expert, int64_t num_experts,
                    CUdeviceptr block_table, CUdeviceptr num_blocks, CUstream stream);

jit::KernelSpec moe_gemm_kernel_spec(const WeightDesc& w, DType act_dtype, const GemmTile& tile);
// The segment-table builder lives in the same module as the GEMM of that config.
jit::KernelSpec moe_gemm_segments_kernel_spec(const WeightDesc& w, DType act_dtype, const GemmTile& tile);
// Every config the planner can emit: 7 formats with their scale / zero-point / bias / global
// variants, bf16 and f16, block_m 16/32/64, gather and segments.
std::vector<jit::KernelSpec> moe_gemm_kernel_specs();

}  // namespace moeq::cuda
