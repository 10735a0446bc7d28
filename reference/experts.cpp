#include "reference/experts.hpp"

#include <algorithm>

#include "common/parallel.hpp"
#include "reference/activation.hpp"
#include "reference/quantize.hpp"
#include "reference/routing.hpp"
#include "reference/scalars.hpp"

namespace moeq::ref {
namespace {

int64_t stride_or(int64_t stride, int64_t fallback) { return stride > 0 ? stride : fallback; }

// Rows of each local expert, in the order the layout visits them.
using ExpertRows = std::vector<std::vector<RowPair>>;

// GEMM1 -> activation -> GEMM2 over the rows each expert owns; the rows of GEMM1's input
// (`a1`) and of every intermediate are given per expert by rows1 (GEMM1) and rows2 (GEMM2).
void run_chain(const StepArgs& args, const StepBuffers& buf, const ActivationRows& hidden_rows,
               int64_t gemm1_input_rows, int64_t rows, const ExpertRows& rows1,
               const ExpertRows& rows2, void* down, int64_t down_row_stride) {
  const ExpertsDesc& d = *args.desc;
  const WeightDesc w13 = d.w13(), w2 = d.w2();
  const DType c = d.act_dtype;
  // NOTE: each expert writes only its own rows, and each row's sums run in the same order on any
  // thread, so the experts split across threads with no effect on the bytes.
  std::vector<int64_t> busy1, busy2;
  for (int64_t e = 0; e < d.num_experts; ++e) {
    if (!rows1[e].empty()) busy1.push_back(e);
    if (!rows2[e].empty()) busy2.push_back(e);
  }

  ActivationRows a1 = hidden_rows;
  if (d.act_format != ActFormat::none) {
    quantize_stage(d.act_format, c, hidden_rows.data, hidden_rows.row_stride, gemm1_input_rows,
                   d.hidden_size, buf.quanted_gate_up_input, buf.quanted_gate_up_scales);
    a1 = {d.act_format, c, buf.quanted_gate_up_input, 0, buf.quanted_gate_up_scales, d.hidden_size};
  }
  parallel_for(static_cast<int64_t>(busy1.size()), args.threads, [&](int64_t i) {
    std::vector<float> scratch;
    gemm_rows(w13, *args.w13, busy1[i], a1, rows1[busy1[i]], buf.gate_up_output, c, d.gemm1_n(), scratch);
  });

  activation_stage(d.activation, d.interleaved_gate_up, c, buf.gate_up_output, rows,
                   d.intermediate_size, buf.activation_output);

  ActivationRows a2{ActFormat::none, c, buf.activation_output, d.intermediate_size, nullptr,
                    d.intermediate_size};
  if (d.act_format != ActFormat::none) {
    quantize_stage(d.act_format, c, buf.activation_output, d.intermediate_size, rows,
                   d.intermediate_size, buf.quanted_down_input, buf.quanted_down_scales);
    a2 = {d.act_format, c, buf.quanted_down_input, 0, buf.quanted_down_scales, d.intermediate_size};
  }
  parallel_for(static_cast<int64_t>(busy2.size()), args.threads, [&](int64_t i) {
    std::vector<float> scratch;
    gemm_rows(w2, *args.w2, busy2[i], a2, rows2[busy2[i]], down, c, down_row_stride, scratch);
  });
}

}  // namespace

void decode_row(const ActivationRows& a, int64_t row, float* out) {
  if (a.format == ActFormat::none) {
    for (int64_t k = 0; k < a.cols; ++k) out[k] = load_float(a.dtype, a.data, row * a.row_stride + k);
    return;
  }
  const auto* codes = static_cast<const uint8_t*>(a.data) + act_code_bytes(a.format, row, a.cols);
  const auto* scales = static_cast<const uint8_t*>(a.scales) + act_scale_bytes(a.format, row, a.cols);
  dequantize_activation(a.format, codes, scales, 1, a.cols, out);
}

// PERF: rows in blocks of kGemmRowBlock against each weight row: the weight row is read once per
// block, and the block's sums are independent chains (one fp32 chain per row was bound by the add
// latency). Each (row, n) sum is still the same sequence of operations, so the bytes do not change.
constexpr size_t kGemmRowBlock = 4;

void gemm_rows(const WeightDesc& wd, const WeightView& w, int64_t e, const ActivationRows& a,
               const std::vector<RowPair>& rows, void* c, DType c_dtype, int64_t c_row_stride,
               std::vector<float>& scratch) {
  const size_t K = static_cast<size_t>(wd.k);
  scratch.resize(static_cast<size_t>(wd.n) * K + static_cast<size_t>(wd.n) + kGemmRowBlock * K);
  float* weights = scratch.data();
  float* bias = weights + wd.n * wd.k;
  float* xs = bias + wd.n;
  dequantize_expert(wd, w, e, weights);
  bias_expert(wd, w, e, bias);
  for (size_t r0 = 0; r0 < rows.size(); r0 += kGemmRowBlock) {
    const size_t count = std::min(kGemmRowBlock, rows.size() - r0);
    const float* x[kGemmRowBlock];
    for (size_t u = 0; u < kGemmRowBlock; ++u) {
      x[u] = xs + (u < count ? u : 0) * K;  // a short block repeats its first row, its sums unused
      if (u < count) decode_row(a, rows[r0 + u].src, xs + u * K);
    }
    for (int64_t n = 0; n < wd.n; ++n) {
      const float* wrow = weights + n * wd.k;
      float acc[kGemmRowBlock] = {};
      for (size_t k = 0; k < K; ++k)
        for (size_t u = 0; u < kGemmRowBlock; ++u) acc[u] += x[u][k] * wrow[k];
      for (size_t u = 0; u < count; ++u) store_float(c_dtype, c, rows[r0 + u].dst * c_row_stride + n, acc[u] + bias[n]);
    }
  }
}

void activation_stage(const ActivationParams& p, bool interleaved, DType dtype, const void* in,
                      int64_t rows, int64_t intermediate, void* out) {
  const int64_t n_in = is_gated(p.kind) ? 2 * intermediate : intermediate;
  std::vector<float> row_in(static_cast<size_t>(n_in)), row_out(static_cast<size_t>(intermediate));
  for (int64_t r = 0; r < rows; ++r) {
    for (int64_t j = 0; j < n_in; ++j) row_in[j] = load_float(dtype, in, r * n_in + j);
    apply_activation(p, interleaved, row_in.data(), 1, intermediate, row_out.data());
    for (int64_t j = 0; j < intermediate; ++j) store_float(dtype, out, r * intermediate + j, row_out[j]);
  }
}

void quantize_stage(ActFormat f, DType dtype, const void* in, int64_t in_row_stride, int64_t rows,
                    int64_t cols, uint8_t* codes, void* scales) {
  std::vector<float> row(static_cast<size_t>(cols));
  for (int64_t r = 0; r < rows; ++r) {
    for (int64_t k = 0; k < cols; ++k) row[k] = load_float(dtype, in, r * in_row_stride + k);
    quantize_activation(f, row.data(), 1, cols, codes + act_code_bytes(f, r, cols),
                        static_cast<uint8_t*>(scales) + act_scale_bytes(f, r, cols));
  }
}

void run_indexed(const StepArgs& args, const StepBuffers& buf) {
  const ExpertsDesc& d = *args.desc;
  const ExpertsInputs& in = *args.inputs;
  const int64_t M = in.num_tokens, slots = M * d.top_k, E = d.num_experts;
  const auto local = to_local_expert_ids(in.topk_ids, in.topk_ids_dtype, M, d.top_k,
                                         d.global_experts(), in.expert_map, E);
  std::copy(local.begin(), local.end(), buf.local_ids);
  align(buf.local_ids, slots, E, args.block_m, buf.sorted_ids, buf.expert_ids, buf.num_tokens_padded);

  // GEMM1 gathers hidden row s / top_k and writes row s; GEMM2 reads and writes row s.
  ExpertRows rows1(E), rows2(E);
  for (int64_t i = 0; i < *buf.num_tokens_padded; ++i) {
    const int64_t s = buf.sorted_ids[i];
    if (s >= slots) continue;  // padding
    const int64_t e = buf.expert_ids[i / args.block_m];
    rows1[e].push_back({s / d.top_k, s});
    rows2[e].push_back({s, s});
  }
  const ActivationRows hidden{ActFormat::none, d.act_dtype, in.hidden, stride_or(in.hidden_row_stride, d.hidden_size),
                              nullptr, d.hidden_size};
  run_chain(args, buf, hidden, M, slots, rows1, rows2, buf.down_output, d.hidden_size);

  const auto src = reduce_rows_indexed(buf.local_ids, slots);
  topk_reduce(buf.down_output, d.act_dtype, d.hidden_size, d.hidden_size, src.data(), in.topk_weights,
              in.topk_weights_dtype, M, d.top_k, args.output.out, d.act_dtype,
              stride_or(args.output.row_stride, d.hidden_size));
}

void run_contiguous(const StepArgs& args, const StepBuffers& buf) {
  const ExpertsDesc& d = *args.desc;
  const ExpertsInputs& in = *args.inputs;
  const int64_t M = in.num_tokens, slots = M * d.top_k, E = d.num_experts, K = d.hidden_size;
  const auto local = to_local_expert_ids(in.topk_ids, in.topk_ids_dtype, M, d.top_k,
                                         d.global_experts(), in.expert_map, E);
  std::copy(local.begin(), local.end(), buf.local_ids);
  permute_indices(buf.local_ids, slots, E, buf.expert_offsets, buf.inv_permuted_idx, buf.permuted_src);
  const int64_t elem = dtype_bytes(d.act_dtype, 1);
  permute_rows(in.hidden, stride_or(in.hidden_row_stride, K) * elem, K * elem, buf.permuted_src,
               buf.expert_offsets[E], d.top_k, buf.permuted_hidden, K * elem);

  // Expert e owns rows [offsets[e], offsets[e+1]) of every intermediate.
  ExpertRows rows(E);
  for (int64_t e = 0; e < E; ++e)
    for (int64_t r = buf.expert_offsets[e]; r < buf.expert_offsets[e + 1]; ++r) rows[e].push_back({r, r});
  const ActivationRows hidden{ActFormat::none, d.act_dtype, buf.permuted_hidden, K, nullptr, K};
  run_chain(args, buf, hidden, slots, slots, rows, rows, buf.down_output, K);

  const auto src = reduce_rows_contiguous(buf.local_ids, buf.inv_permuted_idx, slots);
  topk_reduce(buf.down_output, d.act_dtype, K, K, src.data(), in.topk_weights, in.topk_weights_dtype,
              M, d.top_k, args.output.out, d.act_dtype, stride_or(args.output.row_stride, K));
}

void run_masked(const StepArgs& args, const StepBuffers& buf) {
  const ExpertsDesc& d = *args.desc;
  const ExpertsInputs& in = *args.inputs;
  const int64_t E = d.num_experts, T = in.max_tokens_per_expert, K = d.hidden_size;
  ExpertRows rows(E);
  for (int64_t e = 0; e < E; ++e) {
    const int64_t count = in.expert_num_tokens_dtype == DType::i64
                              ? static_cast<const int64_t*>(in.expert_num_tokens)[e]
                              : static_cast<const int32_t*>(in.expert_num_tokens)[e];
    for (int64_t i = 0; i < count; ++i) rows[e].push_back({e * T + i, e * T + i});
  }
  // NOTE: GEMM2 writes straight into the caller's [E, T, K] output: it is the result.
  const ActivationRows hidden{ActFormat::none, d.act_dtype, in.hidden, stride_or(in.hidden_row_stride, K),
                              nullptr, K};
  run_chain(args, buf, hidden, E * T, E * T, rows, rows, args.output.out,
            stride_or(args.output.row_stride, K));
}

}  // namespace moeq::ref
