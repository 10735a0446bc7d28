#pragma once
// What one experts step runs, decided on the host before any launch: the layout, the block size, the
// tuning entry and, for the CUDA backend, each GEMM's tile and input. Experts::apply runs it,
// Experts::explain words it, and `moeq info -M` prints it for a GPU that need not be present.
#include <cstdint>
#include <string>

#include "cuda/driver.hpp"
#include "cuda/step_plan.hpp"
#include "moeq/experts.hpp"
#include "plan/workspace.hpp"

namespace moeq::api {

// The table the plan follows: the caller's, else on a GPU of compute capability sm_<cc_major><cc_minor> the
// shipped one for this layer where the options leave the choice to moeq (plan::shipped_tuning_for), else none.
// `device` null: the CPU backend (the caller's table, if any).
TuningTable effective_tuning(const ExpertsDesc& desc, const Options& options, const cuda::DeviceInfo* device);

// The step's shape for num_tokens standard rows, or E * T batched (tokens_per_expert = T): the layout the
// options and M give, the tuning entry for its valid_shape_m, and the block size (the entry's, the
// caller's, or the planner's as `device`'s GEMMs run it: cuda::gemm_block_m). `device` null: the CPU backend.
plan::PlanShape step_shape(const ExpertsDesc& desc, const Options& options, const TuningTable& tuning,
                           const cuda::DeviceInfo* device, int64_t num_tokens, int64_t tokens_per_expert,
                           bool batched);
// NOTE: the shape's `tuned` points into `tuning`, which must outlive it: no temporary table.
plan::PlanShape step_shape(const ExpertsDesc& desc, const Options& options, TuningTable&& tuning,
                           const cuda::DeviceInfo* device, int64_t num_tokens, int64_t tokens_per_expert,
                           bool batched) = delete;

// A GEMM's plan in words: "<tile> <what it reads>", e.g. "24x128/1x4x1/4/r bf16".
std::string gemm_plan_text(const ExpertsDesc& desc, const cuda::GemmPlan& plan);

// The two GEMMs' lines of a CUDA plan: "  gemm1 <tile> <input>" with prepared codes, then " (canonical codes:
// <tile> <input>)" where canonical codes plan otherwise (e.g. MXFP4 x FP8 per token on e4m3 wgmma).
std::string step_gemms_text(const ExpertsDesc& desc, const plan::PlanShape& shape, const cuda::DeviceInfo& device);

// Experts::explain's lines for num_tokens standard rows: the layer, the options, the backend, layout and
// block size, the tuning entry, with `device` each GEMM's tile and input (prepared codes, and canonical
// ones where they differ), then the workspaces.
std::string explain_step(const ExpertsDesc& desc, const Options& options, const TuningTable& tuning, Backend backend,
                         const cuda::DeviceInfo* device, int64_t num_tokens);

}  // namespace moeq::api
