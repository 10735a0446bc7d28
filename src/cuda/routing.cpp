// Host side of the id routing kernels: checks, the choice of path (fused, count + scatter,
// chunked) and the launches for the indexed, contiguous and masked layouts.
#include "cuda/routing.hpp"

#include <algorithm>
#include <string>

#include "cuda/folded_quantizer.hpp"
#include "cuda/launch.hpp"
#include "cuda/routing_kernels.hpp"
#include "moeq/error.hpp"

namespace moeq::cuda {

using routing_detail::Config;
using routing_detail::Kernel;
using routing_detail::chunk_place_smem_bytes;
using routing_detail::function_of;
using routing_detail::fused_smem_bytes;
using routing_detail::kInt32Max;
using routing_detail::kMaxSmemBytes;
using routing_detail::require;
using routing_detail::require_ptr;
using routing_detail::threads_of;


namespace {

// Values of moeq_dev::RouteLayout.
constexpr int32_t kLayoutIndexed = 0, kLayoutContiguous = 1, kLayoutBatched = 2;

void check_ids(const RouteIds& ids) {
  require(ids.ids_dtype == DType::i32 || ids.ids_dtype == DType::i64,
          "topk_ids dtype = " + std::string(to_string(ids.ids_dtype)) + " is not i32 or i64");
  require(ids.num_tokens >= 0, "num_tokens = " + std::to_string(ids.num_tokens) + " is negative");
  require(ids.top_k >= 1, "top_k = " + std::to_string(ids.top_k) + " must be at least 1");
  require(ids.num_experts >= 1 && ids.num_experts <= 4096,
          "num_experts = " + std::to_string(ids.num_experts) + " is outside [1, 4096]");
  require(ids.num_global_experts >= 1 && ids.num_global_experts <= kInt32Max,
          "num_global_experts = " + std::to_string(ids.num_global_experts) + " is outside [1, 2^31)");
  require(ids.expert_map != 0 || ids.num_global_experts == ids.num_experts,
          "num_global_experts = " + std::to_string(ids.num_global_experts) + " differs from num_experts = " +
              std::to_string(ids.num_experts) + " but no expert_map is given");
  require(ids.num_slots() <= kInt32Max,
          "num_slots = " + std::to_string(ids.num_slots()) + " does not fit the int32 slot indices");
  if (ids.num_slots() > 0) require_ptr(ids.topk_ids, "topk_ids");
}

// The quantizer `fold` (if active) in a routing launch of config / shape: its CTAs after the
// routing's, the kernel argument that tells them apart.
FoldedQuantizerArgs add_fold(const FoldedQuantizer& fold, Config& config, LaunchShape& shape) {
  FoldedQuantizerArgs args = fold.args;
  args.first_block = shape.grid_x;  // the routing's CTAs; a CTA index never reaches it without a fold
  if (!fold.active()) return args;
  require(shape.block_x == static_cast<unsigned>(kRouteFirstKernelThreads),
          "a quantizer folds into a routing kernel of " + std::to_string(kRouteFirstKernelThreads) + " threads");
  require(fold.dtype == DType::bf16 || fold.dtype == DType::f16,
          "folded quantizer dtype = " + std::string(to_string(fold.dtype)) + " is not bf16 or f16");
  config.fold_format = fold.format;
  config.fold_values_out = fold.values_out;
  config.fold_order_rows = fold.order_rows;
  config.dtype = fold.dtype;
  // Timing diagnostics only (GEMM1's input is then never written): env MOEQ_DIAG_FOLD_CTAS=0 keeps
  // the folded kernel but launches none of the quantizer's CTAs, to tell the two halves' times apart.
  static const bool quantizer_ctas = !env_is_zero("MOEQ_DIAG_FOLD_CTAS");
  if (quantizer_ctas) shape.grid_x += static_cast<unsigned>(fold.blocks);
  return args;
}

// route_count for any layout: block_m = 1 gives unpadded offsets.
void launch_count(const RouteIds& ids, int32_t layout, int32_t block_m, int32_t num_blocks, int32_t max_tokens,
                  CUdeviceptr local_ids, CUdeviceptr expert_ids, CUdeviceptr num_tokens_padded,
                  CUdeviceptr offsets, CUdeviceptr counts, const FoldedQuantizer& fold, CUstream stream) {
  Config config;
  config.kernel = Kernel::kRouteCount;
  config.ids_int64 = ids.ids_dtype == DType::i64;
  LaunchShape shape;
  shape.block_x = static_cast<unsigned>(threads_of(config.kernel));
  shape.smem_bytes = static_cast<unsigned>((2 * ids.num_experts + 1) * sizeof(int32_t));
  const FoldedQuantizerArgs fold_args = add_fold(fold, config, shape);
  const auto num_slots = static_cast<int32_t>(ids.num_slots());
  const auto num_global = static_cast<int32_t>(ids.num_global_experts);
  const auto num_experts = static_cast<int32_t>(ids.num_experts);
  launch(function_of(config), shape, stream, ids.topk_ids, ids.expert_map, num_slots, num_global, num_experts,
         layout, block_m, num_blocks, max_tokens, local_ids, ids.error_flags, expert_ids, num_tokens_padded,
         offsets, counts, fold_args);
}

// route_fused for the indexed (block_m, capacity) or contiguous (block_m 1) layout.
void launch_fused(const RouteIds& ids, int32_t layout, int32_t block_m, int32_t capacity, CUdeviceptr local_ids,
                  CUdeviceptr sorted_ids, CUdeviceptr expert_ids, CUdeviceptr num_tokens_padded,
                  CUdeviceptr offsets, CUdeviceptr inv_permuted_idx, CUdeviceptr permuted_src,
                  const FoldedQuantizer& fold, CUstream stream) {
  Config config;
  config.kernel = Kernel::kRouteFused;
  config.ids_int64 = ids.ids_dtype == DType::i64;
  LaunchShape shape;
  shape.block_x = static_cast<unsigned>(threads_of(config.kernel));
  shape.smem_bytes = static_cast<unsigned>(fused_smem_bytes(ids.num_experts));
  const FoldedQuantizerArgs fold_args = add_fold(fold, config, shape);
  const auto num_slots = static_cast<int32_t>(ids.num_slots());
  const auto num_global = static_cast<int32_t>(ids.num_global_experts);
  const auto num_experts = static_cast<int32_t>(ids.num_experts);
  launch(function_of(config), shape, stream, ids.topk_ids, ids.expert_map, num_slots, num_global, num_experts,
         layout, block_m, capacity, local_ids, ids.error_flags, sorted_ids, expert_ids, num_tokens_padded, offsets,
         inv_permuted_idx, permuted_src, fold_args);
}

bool use_fused(const RouteIds& ids, RoutingPath path) {
  if (path == RoutingPath::kTwoKernel || path == RoutingPath::kChunked) return false;
  const bool fits = fused_path_fits(ids.num_experts);
  if (path == RoutingPath::kFused) {
    require(fits, "num_experts = " + std::to_string(ids.num_experts) + " is too large for the fused routing kernel");
    return true;
  }
  return fits && ids.num_slots() <= kFusedMaxSlots;
}

// kChunked: requires chunk_counts and an E that fits; kAuto: from kChunkedMinSlots where it can.
bool use_chunked(const RouteIds& ids, RoutingPath path, CUdeviceptr chunk_counts) {
  const bool fits = chunked_path_fits(ids.num_experts);
  if (path == RoutingPath::kChunked) {
    require(fits, "num_experts = " + std::to_string(ids.num_experts) + " is too large for the chunked routing kernels");
    require_ptr(chunk_counts, "chunk_counts (the chunked routing path's scratch)");
    return true;
  }
  return path == RoutingPath::kAuto && fits && chunk_counts != 0 && ids.num_slots() >= kChunkedMinSlots;
}

// A layout's outputs, which route_scatter or route_chunk_place write (route_count or
// route_chunk_place the per-layout tables); the layout's unused ones stay 0.
struct LayoutOutputs {
  int32_t layout = 0, block_m = 1, capacity = 0, max_tokens = 0;
  CUdeviceptr expert_ids = 0, num_tokens_padded = 0, sorted_ids = 0;
  CUdeviceptr offsets = 0, inv_permuted_idx = 0, permuted_src = 0;
  CUdeviceptr batched_rows = 0, slot_of_row = 0, counts = 0;
};

void launch_chunked(const RouteIds& ids, CUdeviceptr local_ids, CUdeviceptr chunk_counts, const LayoutOutputs& a,
                    const FoldedQuantizer& fold, CUstream stream) {
  const int64_t chunk_slots = route_chunk_slots(ids.num_slots());
  const auto num_chunks = static_cast<unsigned>(route_num_chunks(ids.num_slots()));
  LaunchShape shape;
  shape.grid_x = num_chunks;
  const auto num_slots = static_cast<int32_t>(ids.num_slots());
  const auto num_global = static_cast<int32_t>(ids.num_global_experts);
  const auto num_experts = static_cast<int32_t>(ids.num_experts);
  const auto chunk = static_cast<int32_t>(chunk_slots);

  Config count;
  count.kernel = Kernel::kRouteChunkCount;
  count.ids_int64 = ids.ids_dtype == DType::i64;
  shape.block_x = static_cast<unsigned>(threads_of(count.kernel));
  shape.smem_bytes = static_cast<unsigned>((ids.num_experts + 1) * sizeof(int32_t));
  const FoldedQuantizerArgs fold_args = add_fold(fold, count, shape);
  launch(function_of(count), shape, stream, ids.topk_ids, ids.expert_map, num_slots, num_global, num_experts, chunk,
         local_ids, ids.error_flags, chunk_counts, fold_args);

  Config place;
  shape.grid_x = num_chunks;
  place.kernel = Kernel::kRouteChunkPlace;
  shape.block_x = static_cast<unsigned>(threads_of(place.kernel));
  shape.smem_bytes = static_cast<unsigned>(chunk_place_smem_bytes(ids.num_experts));
  launch(function_of(place), shape, stream, local_ids, chunk_counts, num_slots, num_experts, a.layout, a.block_m,
         a.capacity, chunk, a.max_tokens, ids.error_flags, a.sorted_ids, a.expert_ids, a.num_tokens_padded, a.offsets,
         a.inv_permuted_idx, a.permuted_src, a.batched_rows, a.slot_of_row, a.counts);
}

void launch_scatter(const RouteIds& ids, CUdeviceptr local_ids, const LayoutOutputs& a, CUstream stream) {
  Config config;
  config.kernel = Kernel::kRouteScatter;
  LaunchShape shape;
  shape.grid_x = static_cast<unsigned>(ids.num_experts + 1);
  shape.block_x = static_cast<unsigned>(threads_of(config.kernel));
  const auto num_slots = static_cast<int32_t>(ids.num_slots());
  const auto num_experts = static_cast<int32_t>(ids.num_experts);
  launch(function_of(config), shape, stream, local_ids, num_slots, num_experts, a.layout, a.block_m, a.capacity,
         a.expert_ids, a.num_tokens_padded, a.sorted_ids, a.offsets, a.inv_permuted_idx, a.permuted_src,
         a.max_tokens, a.batched_rows, a.slot_of_row);
}

}  // namespace
std::string describe_routing_errors(int flags) {
  std::string text;
  const auto add = [&](int bit, const char* what) {
    if ((flags & bit) != 0) text += (text.empty() ? "" : "; ") + std::string(what);
  };
  add(kRoutingErrorBadTopkId, "a topk id is outside [-1, num_global_experts)");
  add(kRoutingErrorBadExpertMap, "an expert_map value is outside [-1, num_experts)");
  add(kRoutingErrorBatchedOverflow,
      "an expert received more than max_tokens_per_expert rows, or an expert_num_tokens value is outside [0, "
      "max_tokens_per_expert]");
  return text;
}

// One thread per bucket (E experts + the non-local slots), and the default shared-memory limit.
bool fused_path_fits(int64_t num_experts) {
  // NOTE: a folded FP8 per-token quantizer adds 512 bytes of static shared memory (ptxas -v,
  // sm_90a: 2 * 32 words for each of its 16-byte and scalar bodies; its CTAs take the launch's
  // dynamic size too): kept free for it, with no slack left. A new static array in
  // quantize_fp8_token_rows must raise this.
  constexpr int64_t kFoldedQuantizerSmemBytes = 512;
  return num_experts + 1 <= threads_of(Kernel::kRouteFused) &&
         fused_smem_bytes(num_experts) + kFoldedQuantizerSmemBytes <= kMaxSmemBytes;
}
bool chunked_path_fits(int64_t num_experts) {
  return num_experts + 1 <= threads_of(Kernel::kRouteChunkPlace) &&
         chunk_place_smem_bytes(num_experts) <= kMaxSmemBytes;
}

int64_t route_chunk_slots(int64_t num_slots) {
  const int64_t per_chunk = (num_slots + kMaxRouteChunks - 1) / kMaxRouteChunks;
  return std::max<int64_t>(1, (per_chunk + kRouteChunkUnit - 1) / kRouteChunkUnit) * kRouteChunkUnit;
}
int64_t route_num_chunks(int64_t num_slots) {
  return std::max<int64_t>(1, (num_slots + route_chunk_slots(num_slots) - 1) / route_chunk_slots(num_slots));
}
bool takes_chunked_path(const RouteIds& ids, CUdeviceptr chunk_counts) {
  return use_chunked(ids, RoutingPath::kAuto, chunk_counts);
}
int64_t route_chunk_counts_elems(int64_t num_slots, int64_t num_experts) {
  return route_num_chunks(num_slots) * (num_experts + 1);
}

bool aligns_in_one_kernel(const RouteIds& ids) { return use_fused(ids, RoutingPath::kAuto); }

void map_and_align(const RouteIds& ids, int64_t block_m, const AlignOutputs& out, CUstream stream,
                   RoutingPath path) {
  check_ids(ids);
  require(block_m >= 1 && block_m <= 1024, "block_m = " + std::to_string(block_m) + " is outside [1, 1024]");
  const int64_t capacity = align_capacity(ids.num_slots(), ids.num_experts, block_m);
  require(capacity <= kInt32Max, "align capacity " + std::to_string(capacity) + " does not fit the int32 sorted_ids");
  if (ids.num_slots() > 0) require_ptr(out.local_ids, "local_ids");
  for (const auto& [ptr, name] : {std::pair{out.sorted_ids, "sorted_ids"}, {out.expert_ids, "expert_ids"},
                                  {out.num_tokens_padded, "num_tokens_padded"}})
    require_ptr(ptr, name);
  if (use_fused(ids, path)) {
    launch_fused(ids, kLayoutIndexed, static_cast<int32_t>(block_m), static_cast<int32_t>(capacity), out.local_ids,
                 out.sorted_ids, out.expert_ids, out.num_tokens_padded, 0, 0, 0, out.quantizer, stream);
    return;
  }
  LayoutOutputs outputs;
  outputs.layout = kLayoutIndexed;
  outputs.block_m = static_cast<int32_t>(block_m);
  outputs.capacity = static_cast<int32_t>(capacity);
  outputs.expert_ids = out.expert_ids;
  outputs.num_tokens_padded = out.num_tokens_padded;
  outputs.sorted_ids = out.sorted_ids;
  if (use_chunked(ids, path, out.chunk_counts)) {
    launch_chunked(ids, out.local_ids, out.chunk_counts, outputs, out.quantizer, stream);
    return;
  }
  launch_count(ids, kLayoutIndexed, outputs.block_m, static_cast<int32_t>(capacity / block_m), 0, out.local_ids,
               out.expert_ids, out.num_tokens_padded, 0, 0, out.quantizer, stream);
  launch_scatter(ids, out.local_ids, outputs, stream);
}

void permute_indices(const RouteIds& ids, const PermuteOutputs& out, CUstream stream, RoutingPath path) {
  check_ids(ids);
  require_ptr(out.offsets, "offsets");
  if (ids.num_slots() > 0)
    for (const auto& [ptr, name] : {std::pair{out.local_ids, "local_ids"}, {out.inv_permuted_idx, "inv_permuted_idx"},
                                    {out.permuted_src, "permuted_src"}})
      require_ptr(ptr, name);
  if (use_fused(ids, path)) {
    launch_fused(ids, kLayoutContiguous, 1, 0, out.local_ids, 0, 0, 0, out.offsets, out.inv_permuted_idx,
                 out.permuted_src, out.quantizer, stream);
    return;
  }
  LayoutOutputs outputs;
  outputs.layout = kLayoutContiguous;
  outputs.offsets = out.offsets;
  outputs.inv_permuted_idx = out.inv_permuted_idx;
  outputs.permuted_src = out.permuted_src;
  if (use_chunked(ids, path, out.chunk_counts)) {
    launch_chunked(ids, out.local_ids, out.chunk_counts, outputs, out.quantizer, stream);
    return;
  }
  launch_count(ids, kLayoutContiguous, 1, 0, 0, out.local_ids, 0, 0, out.offsets, 0, out.quantizer, stream);
  launch_scatter(ids, out.local_ids, outputs, stream);
}

void batched_ranks(const RouteIds& ids, int64_t max_tokens_per_expert, const BatchedOutputs& out,
                   CUstream stream, RoutingPath path) {
  check_ids(ids);
  require(max_tokens_per_expert >= 0 && ids.num_experts * max_tokens_per_expert <= kInt32Max,
          "num_experts * max_tokens_per_expert = " + std::to_string(ids.num_experts * max_tokens_per_expert) +
              " is negative or does not fit the int32 row indices");
  require_ptr(out.counts, "counts");
  if (ids.num_slots() > 0)
    for (const auto& [ptr, name] : {std::pair{out.local_ids, "local_ids"}, {out.batched_rows, "batched_rows"}})
      require_ptr(ptr, name);
  const auto max_tokens = static_cast<int32_t>(max_tokens_per_expert);
  require(path != RoutingPath::kFused, "the fused routing kernel has no batched layout");
  LayoutOutputs outputs;
  outputs.layout = kLayoutBatched;
  outputs.max_tokens = max_tokens;
  outputs.batched_rows = out.batched_rows;
  outputs.slot_of_row = out.slot_of_row;
  outputs.counts = out.counts;
  if (use_chunked(ids, path, out.chunk_counts)) {
    launch_chunked(ids, out.local_ids, out.chunk_counts, outputs, FoldedQuantizer{}, stream);
    return;
  }
  launch_count(ids, kLayoutBatched, 1, 0, max_tokens, out.local_ids, 0, 0, 0, out.counts, FoldedQuantizer{}, stream);
  launch_scatter(ids, out.local_ids, outputs, stream);
}

}  // namespace moeq::cuda
