// Timing GPU kernels as `moeq bench` does (tools/moeq/gemm_timing.hpp).
#include "tools/moeq/gemm_timing.hpp"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <map>
#include <numeric>
#include <string>
#include <utility>

#include "cuda/layer_kernels.hpp"
#include "cuda/routing.hpp"
#include "moeq/error.hpp"
#include "plan/workspace.hpp"
#include "reference/formats.hpp"

namespace moeq::cli {

using cuda::CUdeviceptr;
using cuda::DeviceBuffer;

// Median over trials of the mean time of `iterations` back-to-back launches, in microseconds.
double median(std::vector<double> samples) {
  std::sort(samples.begin(), samples.end());
  return samples[samples.size() / 2];
}

double time_us(const std::function<void(int)>& launch, int iterations, int trials, cuda::CUstream stream) {
  for (int i = 0; i < 3; ++i) launch(i);  // warm-up: module load and first-touch stay out
  cuda::Event start, stop;
  std::vector<double> samples;
  for (int t = 0; t < trials; ++t) {
    start.record(stream);
    for (int i = 0; i < iterations; ++i) launch(i);
    stop.record(stream);
    stop.synchronize();
    samples.push_back(1000.0 * cuda::Event::elapsed_ms(start, stop) / iterations);
  }
  return median(std::move(samples));
}

// Device-to-device copy of 1 GiB, counting bytes read plus bytes written.
double copy_bandwidth_gbs(cuda::CUstream stream) {
  const size_t bytes = size_t{1} << 30;
  DeviceBuffer a(bytes), b(bytes);
  a.fill_bytes(0x3c);
  const auto& d = cuda::driver();
  const double us = time_us([&](int) { cuda::check(d.cuMemcpyDtoDAsync_v2(b.ptr(), a.ptr(), bytes, stream), "copy"); },
                            10, 5, stream);
  return 2.0 * static_cast<double>(bytes) / (us * 1e-6) / 1e9;
}

// The copy ceiling at the size of one GEMM case: a device-to-device copy whose traffic equals the
// case's counted bytes (half read, half written), sources and destinations rotated over enough
// buffers that every pass touches more than 3x the L2.
// NOTE: a 1 GiB copy runs at a rate that a 100 MB one does not reach (a plain read of Qwen3
// GEMM1's 135 MB at M = 16 ran at 63% of it: bench/results/2026-12-01-h200-gemm-v9.md, call A),
// so the memory-bound GEMMs are also reported against the copy of their own size.
double sized_copy_gbs(double bytes, int64_t l2_bytes, int iterations, int trials, cuda::CUstream stream) {
  const size_t half = (static_cast<size_t>(bytes / 2.0) + 255) / 256 * 256;
  const int n = static_cast<int>(std::clamp(std::ceil(3.0 * static_cast<double>(l2_bytes) / std::max(bytes, 1.0)), 2.0, 16.0));
  std::vector<DeviceBuffer> from, to;
  for (int i = 0; i < n; ++i) {
    from.emplace_back(half);
    from.back().fill_bytes(0x3c);
    to.emplace_back(half);
  }
  const auto& d = cuda::driver();
  const double us = time_us([&](int i) {
    cuda::check(d.cuMemcpyDtoDAsync_v2(to[i % n].ptr(), from[i % n].ptr(), half, stream), "copy");
  }, iterations, trials, stream);
  return 2.0 * static_cast<double>(half) / (us * 1e-6) / 1e9;
}

DeviceBuffer random_bf16(int64_t elems, float scale, std::mt19937& rng) { return random_16bit(DType::bf16, elems, scale, rng); }

DeviceBuffer random_16bit(DType dtype, int64_t elems, float scale, std::mt19937& rng) {
  std::normal_distribution<float> normal(0.0f, scale);
  std::vector<uint16_t> v(static_cast<size_t>(elems));
  for (auto& x : v) x = dtype == DType::f16 ? ref::f32_to_f16(normal(rng)) : ref::f32_to_bf16(normal(rng));
  return DeviceBuffer::from_host(v);
}

// Normal(0, 1) 16-bit values, one buffer per dtype and size, generated once per process.
// PERF: `moeq tune` times ~150 tiles per M, each call drew its own activations on the host: 67 M
// normals (~0.7 s) per GEMM2 call at DeepSeek-V3's M = 4096.
const DeviceBuffer& random_activations(DType dtype, int64_t elems) {
  // NOTE: never destroyed: device buffers must not be freed after the driver unloads at exit.
  static auto* pool = new std::map<std::pair<int, int64_t>, DeviceBuffer>();
  const auto key = std::make_pair(static_cast<int>(dtype), elems);
  auto it = pool->find(key);
  if (it == pool->end()) {
    std::mt19937 rng(static_cast<unsigned>(elems));
    it = pool->emplace(key, random_16bit(dtype, elems, 1.0f, rng)).first;
  }
  return it->second;
}

// Distinct random experts per token, uniform weights: what a softmax router delivers on average.
std::vector<int32_t> random_routing(int64_t M, int64_t top_k, int64_t E, std::mt19937& rng) {
  std::vector<int32_t> ids(static_cast<size_t>(M * top_k));
  std::vector<int32_t> perm(static_cast<size_t>(E));
  std::iota(perm.begin(), perm.end(), 0);
  for (int64_t t = 0; t < M; ++t) {
    for (int64_t k = 0; k < top_k; ++k) std::swap(perm[k], perm[k + rng() % (E - k)]);
    std::copy(perm.begin(), perm.begin() + top_k, ids.begin() + t * top_k);
  }
  return ids;
}

namespace {
constexpr uint8_t kRandomUe8m0Scale = 123;  // 2^-4
}  // namespace

bool random_weights_mx_scales_at_most_two(const WeightDesc& w) {
  static const bool withheld = cuda::env_is_zero("MOEQ_MX_SCALES_AT_MOST_TWO");
  return !withheld && w.scale_dtype == DType::ue8m0 && kRandomUe8m0Scale <= 128;
}

// Random but valid canonical weights of one GEMM: random code bytes, scales near 2^-4; `copies`
// device copies of the same bytes at distinct addresses (rotating over them defeats L2).
// PERF: generated once per weight shape and kept for the process: the host generator took
// seconds per case at 16 copies of 200 MB.
const std::vector<cuda::GemmWeights>& random_weight_copies(const WeightDesc& w, int copies, std::mt19937& rng,
                                                           bool prepared) {
  struct Pool {
    std::vector<DeviceBuffer> keep;
    std::vector<cuda::GemmWeights> copies;
    std::vector<std::vector<uint8_t>> host;  // codes, scales, global scales, zero points, bias
    std::vector<cuda::GemmWeights> prepared;  // the copies with their codes prepared on the GPU
  };
  // NOTE: never destroyed: device buffers must not be freed after the driver unloads at exit.
  static auto* pools = new std::map<std::string, Pool>();
  const std::string key = std::string(to_string(w.format)) + " " + std::to_string(w.num_experts) + " " +
                          std::to_string(w.n) + " " + std::to_string(w.k) + " " + std::to_string(w.group_size) + " " +
                          std::string(to_string(w.scale_dtype)) + " " + std::to_string(w.has_zero_point) + " " +
                          std::to_string(w.num_global_scales) + " " + std::string(to_string(w.bias_dtype));
  Pool& pool = (*pools)[key];
  if (pool.host.empty()) {
    pool.host.resize(5);

  std::vector<uint8_t> codes(static_cast<size_t>(w.code_bytes()));
  for (size_t i = 0; i < codes.size(); i += 4) {
    const uint32_t r = static_cast<uint32_t>(rng());
    std::memcpy(&codes[i], &r, std::min<size_t>(4, codes.size() - i));
  }
  if (weight_format_code_dtype(w.format) == DType::e4m3)
    for (auto& c : codes) c = (c & 0x7F) == 0x7F ? static_cast<uint8_t>(c & 0xF8) : c;  // no NaN codes
  std::vector<uint8_t> scales(static_cast<size_t>(w.scale_bytes()));
  for (int64_t i = 0; i < w.scale_elems(); ++i) {
    const float s = 0.0625f;
    switch (w.scale_dtype) {
      case DType::ue8m0: scales[i] = kRandomUe8m0Scale; break;
      case DType::e4m3: scales[i] = 0x30; break;  // 0.5
      case DType::f32: std::memcpy(&scales[i * 4], &s, 4); break;
      default: { const uint16_t b = 0x3D80; std::memcpy(&scales[i * 2], &b, 2); }  // bf16 0.0625
    }
  }
  std::vector<float> global(static_cast<size_t>(w.global_scale_elems()), 0.01f);
  std::vector<uint8_t> global_bytes(global.size() * 4);
  if (!global.empty()) std::memcpy(global_bytes.data(), global.data(), global_bytes.size());
  pool.host[0] = std::move(codes);
  pool.host[1] = std::move(scales);
  pool.host[2] = std::move(global_bytes);
  if (w.has_zero_point) {
    std::vector<uint8_t> zero_points(static_cast<size_t>(w.zero_point_bytes()));
    for (auto& z : zero_points) z = static_cast<uint8_t>(rng() % 16);
    pool.host[3] = std::move(zero_points);
  }
  if (w.bias_dtype != DType::none) {
    // Bytes 0x3c: about 0.011 as bf16 or f32 and 1.06 as f16: finite and non-zero in every
    // bias dtype (timing only).
    pool.host[4] = std::vector<uint8_t>(static_cast<size_t>(w.bias_bytes()), 0x3c);
  }
  }
  auto upload = [&](const std::vector<uint8_t>& bytes) -> CUdeviceptr {
    if (bytes.empty()) return 0;
    pool.keep.push_back(DeviceBuffer::from_host(bytes));
    return pool.keep.back().ptr();
  };
  while (static_cast<int>(pool.copies.size()) < copies) {
    cuda::GemmWeights g;
    g.codes = upload(pool.host[0]);
    g.scales = upload(pool.host[1]);
    g.global_scales = upload(pool.host[2]);
    g.zero_points = upload(pool.host[3]);
    g.bias = upload(pool.host[4]);
    pool.copies.push_back(g);
  }
  if (!prepared) return pool.copies;
  while (pool.prepared.size() < pool.copies.size()) {
    cuda::GemmWeights g = pool.copies[pool.prepared.size()];
    pool.keep.emplace_back(static_cast<size_t>(prepared_code_bytes(w)));
    prepare_codes(w, reinterpret_cast<const void*>(g.codes), reinterpret_cast<void*>(pool.keep.back().ptr()));
    g.codes = pool.keep.back().ptr();
    pool.prepared.push_back(g);
  }
  cuda::check(cuda::driver().cuCtxSynchronize(), "cuCtxSynchronize");
  return pool.prepared;
}

int64_t planner_block_m(const ExpertsDesc& d, int64_t M) { return cuda::gemm_block_m(plan::choose_block_m(d, M)); }

cuda::GemmTile planner_gemm_tile(const ExpertsDesc& d, bool second, int64_t M) {
  const WeightDesc w = second ? d.w2() : d.w13();
  return cuda::gemm_tile_for_channels(w.format, d.act_dtype, static_cast<int>(planner_block_m(d, M)), M * d.top_k,
                                      d.top_k, w.n, w.k, d.num_experts);
}

GemmTiming time_moe_gemm(const ExpertsDesc& d, bool second, int64_t M, const cuda::GemmTile& tile, bool prepared,
                         int64_t l2_bytes, int iterations, int trials, cuda::CUstream stream, Layout layout) {
  if (layout != Layout::indexed && layout != Layout::contiguous && layout != Layout::masked)
    throw Error("GEMM timing: layout = " + std::string(to_string(layout)) + " is not indexed, contiguous or masked");
  const WeightDesc w = second ? d.w2() : d.w13();
  const int64_t E = d.num_experts, top_k = d.top_k, slots = M * top_k;
  if (const auto reasons = cuda::gemm_tile_reasons(tile, w); !reasons.empty()) throw Error(reasons.front());
  std::mt19937 rng(99 + static_cast<unsigned>(M));
  const auto ids_host = random_routing(M, top_k, E, rng);
  std::vector<bool> touched(static_cast<size_t>(E), false);
  for (int32_t e : ids_host) touched[e] = true;
  const int64_t experts_touched = std::count(touched.begin(), touched.end(), true);
  const double weight_bytes = static_cast<double>(w.code_bytes() + w.scale_bytes()) / E * experts_touched;
  // The kernel the step runs for this input (cuda::gemm_plan, as the CUDA backend plans it): FP8
  // per-token activations take the row-scale epilogue, on their 16-bit values or as e4m3 codes.
  const cuda::GemmPlan plan = cuda::gemm_plan(d, w, cuda::tile_for_device(tile), cuda::device_sm(), prepared);
  const int64_t a_elem_bytes = plan.input == cuda::GemmInput::row_scaled_e4m3 ? 1 : 2;
  // Rows of A the GEMM reads (GEMM1 of the indexed layout gathers the M token rows).
  const int64_t a_rows = second || layout != Layout::indexed ? slots : M;
  const double act_bytes = static_cast<double>(a_rows * w.k * a_elem_bytes + slots * w.n * 2);
  GemmTiming t;
  t.bytes = weight_bytes + act_bytes;
  t.flops = 2.0 * static_cast<double>(slots) * static_cast<double>(w.n * w.k);

  // Tokens per expert: the segments of the contiguous and masked layouts.
  std::vector<int32_t> counts(static_cast<size_t>(E), 0);
  for (int32_t e : ids_host) ++counts[e];
  const int64_t max_count = *std::max_element(counts.begin(), counts.end());
  const int64_t segment_rows = layout == Layout::masked ? E * max_count : slots;
  DeviceBuffer ids = DeviceBuffer::from_host(ids_host);
  const int64_t cap = cuda::align_capacity(slots, E, tile.block_m);
  DeviceBuffer local_ids(slots * 4), sorted(cap * 4), expert_ids(cap / tile.block_m * 4), padded(4);
  const int64_t max_blocks = cuda::segment_capacity(segment_rows, E, tile.block_m);
  DeviceBuffer block_table(std::max<int64_t>(max_blocks, 1) * 3 * 4), num_blocks(4), error_word(4);
  if (layout == Layout::indexed) {
    cuda::RouteIds route{ids.ptr(), DType::i32, M, top_k, E, 0, E, 0};
    cuda::map_and_align(route, tile.block_m, {local_ids.ptr(), sorted.ptr(), expert_ids.ptr(), padded.ptr()}, stream);
  } else if (layout == Layout::contiguous) {
    std::vector<int64_t> offsets(static_cast<size_t>(E) + 1, 0);
    for (int64_t e = 0; e < E; ++e) offsets[e + 1] = offsets[e] + counts[e];
    DeviceBuffer d_offsets = DeviceBuffer::from_host(offsets);
    cuda::build_segments(w, d.act_dtype, tile, d_offsets.ptr(), 0, DType::i32, 0, E, block_table.ptr(), num_blocks.ptr(),
                         0, stream);
    cuda::check(cuda::driver().cuStreamSynchronize(stream), "cuStreamSynchronize");  // d_offsets dies here
  } else {
    DeviceBuffer d_counts = DeviceBuffer::from_host(counts);
    cuda::check(cuda::driver().cuMemsetD8Async(error_word.ptr(), 0, 4, stream), "cuMemsetD8Async");
    cuda::build_segments(w, d.act_dtype, tile, 0, d_counts.ptr(), DType::i32, max_count, E, block_table.ptr(),
                         num_blocks.ptr(), error_word.ptr(), stream);
    cuda::check(cuda::driver().cuStreamSynchronize(stream), "cuStreamSynchronize");  // d_counts dies here
  }

  t.weight_copies = static_cast<int>(std::clamp(std::ceil(3.0 * static_cast<double>(l2_bytes) / t.bytes), 1.0, 16.0));
  const std::vector<cuda::GemmWeights>& weights = random_weight_copies(w, t.weight_copies, rng, prepared);
  const int64_t act_rows = layout == Layout::masked ? segment_rows : a_rows;
  DeviceBuffer out(segment_rows * w.n * 2);
  cuda::MoeGemmArgs g;
  g.weights_desc = w;
  g.act_dtype = d.act_dtype;
  g.prepared_codes = prepared;
  g.mx_scales_at_most_two = random_weights_mx_scales_at_most_two(w);
  g.c = out.ptr();
  g.c_row_stride = w.n;
  g.tile = plan.tile;
  g.a_e4m3 = plan.input == cuda::GemmInput::row_scaled_e4m3;
  // NOTE: e4m3 codes are one byte, so half as many random 16-bit values fill them. Their bytes may
  // hold NaN codes, which cost the MMAs nothing: this is a timing.
  const DeviceBuffer& act = random_activations(d.act_dtype, g.a_e4m3 ? (act_rows * w.k + 1) / 2 : act_rows * w.k);
  g.a = act.ptr();
  g.a_row_stride = w.k;
  DeviceBuffer row_scales;  // FP8 per token only: 16-bit layers (and `moeq tune`) upload none
  if (plan.input != cuda::GemmInput::values) {
    std::vector<float> row_scales_host(static_cast<size_t>(std::max<int64_t>(act_rows, 1)));
    for (float& x : row_scales_host) x = std::ldexp(1.0f + static_cast<float>(rng() % 1024) / 1024.0f, -8);
    row_scales = DeviceBuffer::from_host(row_scales_host);
    g.a_row_scales = row_scales.ptr();
  }
  g.gather = layout == Layout::indexed;
  if (g.gather) {
    g.sorted_ids = sorted.ptr();
    g.expert_ids = expert_ids.ptr();
    g.num_tokens_padded = padded.ptr();
    g.num_slots = slots;
    g.src_row_divisor = second ? 1 : top_k;
    g.sorted_capacity = cap;
  } else {
    g.block_table = block_table.ptr();
    g.num_blocks = num_blocks.ptr();
    g.max_blocks = max_blocks;
  }
  const int copies = t.weight_copies;
  t.us = time_us([&](int i) {
    g.weights = weights[i % copies];
    cuda::moe_gemm(g, stream);
  }, iterations, trials, stream);
  return t;
}

}  // namespace moeq::cli
