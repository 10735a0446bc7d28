#pragma once
// The MoE GEMM kernel's parameter block as the host fills it (the generated source static_asserts
// its size against moeq_dev::MoeGemmParams) and the dtype ids the kernel reads.
#include "moeq/types.hpp"

namespace moeq::cuda {

// Mirror of moeq_dev::MoeGemmParams (kernels/moe_gemm_common.cuh): same members, same order.
struct DeviceScaling {
  const void* scales;
  const float* global_scales;
  const unsigned char* zero_points;
  int group_size;
  int scale_dtype;
  int num_global_scales;
};
struct DeviceGemmParams {
  const void* a;
  long long a_row_stride;
  const unsigned char* codes;
  DeviceScaling scaling;
  const void* bias;
  int bias_dtype;
  int gather;
  void* c;
  long long c_row_stride;
  int n;
  int k;
  const int* sorted_ids;
  const int* expert_ids;
  const int* num_tokens_padded;
  int num_slots;
  int src_row_divisor;
  const int* block_table;
  const int* num_blocks;
  const float* a_row_scales;
  const int* a_scale_rows;
  int a_scale_row_divisor;
  int max_m_blocks;
  const void* topk_ids;
  const int* expert_map;
  int topk_ids_int64;
  int num_global_experts;
  int num_local_experts;
  float activation_swiglu_alpha;  // moeq_dev::ActivationArgs
  float activation_swiglu_limit;
  float activation_silu_clamp;
};

inline int scale_dtype_id(DType t) { return t == DType::bf16 ? 0 : t == DType::f16 ? 1 : 2; }
inline int bias_dtype_id(DType t) { return t == DType::none ? 0 : t == DType::f32 ? 1 : t == DType::bf16 ? 2 : 3; }

}  // namespace moeq::cuda
