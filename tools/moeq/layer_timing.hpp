#pragma once
// Timing the whole experts step (moeq::Experts::apply: routing, GEMM1, activation, GEMM2, reduce)
// under a CUDA graph, as an engine replays it; shared by `moeq bench --kernel layer`.
#include <cstdint>
#include <string>

#include "cuda/driver.hpp"
#include "moeq/experts.hpp"

namespace moeq::cli {

struct LayerTiming {
  double us = 0;      // median time of one apply
  double bytes = 0;   // both GEMMs' weights of the distinct experts touched + hidden in + output out
  double flops = 0;   // 2 * M * top_k * (N13 * K + K * I)
  int weight_copies = 0;
  std::string plan;   // backend, layout and block size (Experts::explain)
};

// apply on M tokens of a random routing (seeded by M), indexed input, weights in `codes` layout
// rotated over enough copies of the whole layer that every replay reads DRAM; one graph holds
// `iterations` applies (rounded up to whole rotations), the median of `trials` replays.
LayerTiming time_experts_layer(const ExpertsDesc& d, const Options& options, int64_t M, int64_t l2_bytes,
                               int iterations, int trials, cuda::CUstream stream,
                               CodeLayout codes = CodeLayout::prepared);

}  // namespace moeq::cli
