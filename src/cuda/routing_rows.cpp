// Host side of the row kernels: permute_rows (contiguous layout's gather), the weighted top-k
// reduction, and the masked layout's combine through it.
#include <string>

#include "cuda/launch.hpp"
#include "cuda/routing.hpp"
#include "cuda/routing_kernels.hpp"

namespace moeq::cuda {

using routing_detail::Config;
using routing_detail::Kernel;
using routing_detail::ceil_div;
using routing_detail::function_of;
using routing_detail::kInt32Max;
using routing_detail::kMaxSmemBytes;
using routing_detail::require;
using routing_detail::require_ptr;
using routing_detail::threads_for;
using routing_detail::threads_of;


void permute_rows(const PermuteRows& rows, CUdeviceptr permuted_src, CUdeviceptr offsets, int64_t num_experts,
                  int64_t num_slots, int64_t top_k, CUstream stream) {
  require(rows.row_bytes >= 0 && rows.row_bytes <= kInt32Max,
          "row_bytes = " + std::to_string(rows.row_bytes) + " is outside [0, 2^31)");
  require(rows.hidden_row_stride_bytes >= rows.row_bytes && rows.permuted_row_stride_bytes >= rows.row_bytes,
          "row strides must be at least row_bytes = " + std::to_string(rows.row_bytes));
  require(top_k >= 1, "top_k = " + std::to_string(top_k) + " must be at least 1");
  if (num_slots == 0 || rows.row_bytes == 0) return;
  for (const auto& [ptr, name] : {std::pair{rows.hidden, "hidden"}, {rows.permuted, "permuted"},
                                  {permuted_src, "permuted_src"}, {offsets, "offsets"}})
    require_ptr(ptr, name);
  // 16-byte vectors only where every row start is 16-byte aligned; the rest byte by byte.
  const bool aligned = rows.hidden % 16 == 0 && rows.permuted % 16 == 0 && rows.hidden_row_stride_bytes % 16 == 0 &&
                       rows.permuted_row_stride_bytes % 16 == 0;
  const auto vec_bytes = static_cast<int32_t>(aligned ? rows.row_bytes / 16 * 16 : 0);
  Config config;
  config.kernel = Kernel::kPermuteRows;
  const int cta_threads = threads_of(config.kernel);
  const int32_t threads_per_row = threads_for(vec_bytes / 16 + (rows.row_bytes - vec_bytes), cta_threads);
  LaunchShape shape;
  shape.grid_x = ceil_div(num_slots, cta_threads / threads_per_row);
  shape.block_x = static_cast<unsigned>(cta_threads);
  const auto row_bytes = static_cast<int32_t>(rows.row_bytes);
  const auto top_k32 = static_cast<int32_t>(top_k);
  const CUdeviceptr num_valid_rows = offsets + static_cast<CUdeviceptr>(num_experts) * sizeof(int64_t);
  launch(function_of(config), shape, stream, rows.hidden, rows.hidden_row_stride_bytes, rows.permuted,
         rows.permuted_row_stride_bytes, row_bytes, vec_bytes, permuted_src, num_valid_rows, top_k32,
         threads_per_row);
}

void permute(const RouteIds& ids, const PermuteRows& rows, const PermuteOutputs& out, CUstream stream) {
  permute_indices(ids, out, stream);
  permute_rows(rows, out.permuted_src, out.offsets, ids.num_experts, ids.num_slots(), ids.top_k, stream);
}

void topk_reduce(const ReduceArgs& args, CUstream stream) {
  require(args.dtype == DType::bf16 || args.dtype == DType::f16,
          "down/out dtype = " + std::string(to_string(args.dtype)) + " is not bf16 or f16");
  require(args.weights_dtype == DType::f32 || args.weights_dtype == DType::bf16 || args.weights_dtype == DType::f16,
          "topk_weights dtype = " + std::string(to_string(args.weights_dtype)) + " is not f32, bf16 or f16");
  require(args.num_tokens >= 0 && args.top_k >= 1 && args.num_tokens * args.top_k <= kInt32Max,
          "num_tokens = " + std::to_string(args.num_tokens) + ", top_k = " + std::to_string(args.top_k) +
              ": need num_tokens >= 0, top_k >= 1 and num_tokens * top_k < 2^31");
  require(args.cols >= 0 && args.cols <= kInt32Max, "cols = " + std::to_string(args.cols) + " is outside [0, 2^31)");
  require(args.down_row_stride >= args.cols && args.out_row_stride >= args.cols,
          "row strides must be at least cols = " + std::to_string(args.cols));
  if (args.num_tokens == 0 || args.cols == 0) return;
  for (const auto& [ptr, name] : {std::pair{args.down, "down"}, {args.local_ids, "local_ids"},
                                  {args.weights, "topk_weights"}, {args.out, "out"}})
    require_ptr(ptr, name);

  const bool aligned = args.down % 16 == 0 && args.out % 16 == 0 && args.down_row_stride % 8 == 0 &&
                       args.out_row_stride % 8 == 0;
  const auto vec_cols = static_cast<int32_t>(aligned ? args.cols / 8 * 8 : 0);
  Config config;
  config.kernel = Kernel::kTopkReduce;
  config.dtype = args.dtype;
  config.weights_dtype = args.weights_dtype;
  const int cta_threads = threads_of(config.kernel);
  // PERF: K = 2048 bf16 is 256 vectors: one CTA per token, one vector per thread; small K packs
  // several tokens into a CTA so no warp idles.
  const int32_t threads_per_token = threads_for(vec_cols / 8 + (args.cols - vec_cols), cta_threads);
  const int tokens_per_cta = cta_threads / threads_per_token;
  const int64_t smem_bytes = tokens_per_cta * args.top_k * 8;
  require(smem_bytes <= kMaxSmemBytes, "top_k = " + std::to_string(args.top_k) + " is too large for the reduction");
  LaunchShape shape;
  shape.grid_x = ceil_div(args.num_tokens, tokens_per_cta);
  shape.block_x = static_cast<unsigned>(cta_threads);
  shape.smem_bytes = static_cast<unsigned>(smem_bytes);
  const auto cols = static_cast<int32_t>(args.cols);
  const auto num_tokens = static_cast<int32_t>(args.num_tokens);
  const auto top_k = static_cast<int32_t>(args.top_k);
  launch(function_of(config), shape, stream, args.down, args.down_row_stride, args.out, args.out_row_stride, cols,
         vec_cols, args.local_ids, args.row_map, args.weights, num_tokens, top_k, threads_per_token);
}

void combine_batched(CUdeviceptr down, DType dtype, int64_t max_tokens_per_expert, int64_t cols,
                     CUdeviceptr local_ids, CUdeviceptr batched_rows, CUdeviceptr weights, DType weights_dtype,
                     int64_t num_tokens, int64_t top_k, CUdeviceptr out, CUstream stream) {
  require(max_tokens_per_expert >= 0, "max_tokens_per_expert = " + std::to_string(max_tokens_per_expert) +
                                          " is negative");
  if (num_tokens > 0) require_ptr(batched_rows, "batched_rows");
  ReduceArgs args;
  args.down = down;
  args.down_row_stride = cols;
  args.dtype = dtype;
  args.local_ids = local_ids;
  args.row_map = batched_rows;
  args.weights = weights;
  args.weights_dtype = weights_dtype;
  args.num_tokens = num_tokens;
  args.top_k = top_k;
  args.cols = cols;
  args.out = out;
  args.out_row_stride = cols;
  topk_reduce(args, stream);
}

}  // namespace moeq::cuda
