#pragma once
// Timing GPU kernels as `moeq bench` does, shared by bench and tune (bench/README.md): CUDA-event
// medians of back-to-back launches, inputs rotated past 3x the L2, the copy ceilings.
#include <cstdint>
#include <functional>
#include <random>
#include <vector>

#include "cuda/driver.hpp"
#include "cuda/moe_gemm.hpp"
#include "moeq/experts.hpp"

namespace moeq::cli {

// The median of samples (the upper middle one of an even count), as every timing here reports.
double median(std::vector<double> samples);
// Median over trials of the mean time of `iterations` back-to-back launches, in microseconds.
double time_us(const std::function<void(int)>& launch, int iterations, int trials, cuda::CUstream stream);
// Device-to-device copy of 1 GiB, counting bytes read plus bytes written.
double copy_bandwidth_gbs(cuda::CUstream stream);
// The copy ceiling at the size of one GEMM case (sized_copy_gbs in gemm_timing.cpp).
double sized_copy_gbs(double bytes, int64_t l2_bytes, int iterations, int trials, cuda::CUstream stream);
cuda::DeviceBuffer random_bf16(int64_t elems, float scale, std::mt19937& rng);
// Normal values of the given scale in bf16 or f16.
cuda::DeviceBuffer random_16bit(DType dtype, int64_t elems, float scale, std::mt19937& rng);
// Normal(0, 1) values of `dtype`, one device buffer per dtype and size for the process.
const cuda::DeviceBuffer& random_activations(DType dtype, int64_t elems);
// Distinct random experts per token, uniform weights: what a softmax router delivers on average.
std::vector<int32_t> random_routing(int64_t M, int64_t top_k, int64_t E, std::mt19937& rng);
// `copies` device copies of random valid weights of one GEMM (kept for the process).
const std::vector<cuda::GemmWeights>& random_weight_copies(const WeightDesc& w, int copies, std::mt19937& rng,
                                                           bool prepared);

// Whether random_weight_copies' weights take MoeGemmArgs / WeightView::mx_scales_at_most_two: MX
// formats (their scales are 2^-4), unless env MOEQ_MX_SCALES_AT_MOST_TWO=0 (read once) withholds
// it, to time the kernels that multiply twice.
bool random_weights_mx_scales_at_most_two(const WeightDesc& w);

// The planner's block size and tile for one GEMM of the layer at M tokens (no tuning table), as
// Experts::apply picks them in the indexed layout.
int64_t planner_block_m(const ExpertsDesc& d, int64_t M);
cuda::GemmTile planner_gemm_tile(const ExpertsDesc& d, bool second, int64_t M);

struct GemmTiming {
  double us = 0;      // median time of one launch
  double bytes = 0;   // weight bytes of the distinct experts touched + activations read and written
  double flops = 0;   // 2 * M * top_k * N * K
  int weight_copies = 0;
};

// One MoE GEMM (GEMM1 or `second` GEMM2 of the layer, its 16-bit activations) on `tile`, over a
// random routing of M tokens (seeded by M, so every tile of an M sees the same routing), with the
// weights rotated over enough copies that every pass reads DRAM, in `layout` as Experts::apply runs
// it: indexed (sorted ids, rows gathered; GEMM1 reads the M token rows), contiguous (the M * top_k
// rows in per-expert segments) or masked ([E, T, K] with T the largest expert's count).
GemmTiming time_moe_gemm(const ExpertsDesc& d, bool second, int64_t M, const cuda::GemmTile& tile, bool prepared,
                         int64_t l2_bytes, int iterations, int trials, cuda::CUstream stream,
                         Layout layout = Layout::indexed);

}  // namespace moeq::cli
