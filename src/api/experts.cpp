// Experts: plan once, then apply. Today the CPU backend runs the reference stages in the
// planned workspaces; the CUDA backend plugs in at resolve_backend / apply.
#include "moeq/experts.hpp"

#include "api/cuda_backend.hpp"
#include "api/step_plan.hpp"
#include "api/validate.hpp"
#include "common/parallel.hpp"
#include "cuda/routing.hpp"
#include "moeq/error.hpp"
#include "plan/legality.hpp"
#include "plan/workspace.hpp"
#include "reference/experts.hpp"

namespace moeq {
namespace {

// `cuda` was checked by legality; `auto` takes the GPU when there is one that runs the layer.
Backend resolve_backend(const ExpertsDesc& desc, const Options& options) {
  if (options.backend != Backend::auto_select) return options.backend;
  Options cuda_options = options;
  cuda_options.backend = Backend::cuda;
  return plan::cuda_reasons(desc, cuda_options).empty() ? Backend::cuda : Backend::cpu;
}

template <typename T>
T* buffer_ptr(const plan::WorkspacePlan& plan, const char* name, void* ws1, void* ws2) {
  const auto* b = plan.find(name);
  if (b == nullptr) return nullptr;
  auto* base = static_cast<uint8_t*>(b->workspace == 1 ? ws1 : ws2);
  return reinterpret_cast<T*>(base + b->offset_bytes);
}

ref::StepBuffers step_buffers(const plan::WorkspacePlan& plan, void* ws1, void* ws2) {
  ref::StepBuffers s;
  s.quanted_gate_up_input = buffer_ptr<uint8_t>(plan, "quanted_gate_up_input", ws1, ws2);
  s.quanted_gate_up_scales = buffer_ptr<void>(plan, "quanted_gate_up_input.scales", ws1, ws2);
  s.gate_up_output = buffer_ptr<void>(plan, "gate_up_output", ws1, ws2);
  s.activation_output = buffer_ptr<void>(plan, "activation_output", ws1, ws2);
  s.quanted_down_input = buffer_ptr<uint8_t>(plan, "quanted_down_input", ws1, ws2);
  s.quanted_down_scales = buffer_ptr<void>(plan, "quanted_down_input.scales", ws1, ws2);
  s.down_output = buffer_ptr<void>(plan, "down_output", ws1, ws2);
  s.permuted_hidden = buffer_ptr<void>(plan, "permuted_hidden", ws1, ws2);
  s.local_ids = buffer_ptr<int32_t>(plan, "local_ids", ws1, ws2);
  s.sorted_ids = buffer_ptr<int32_t>(plan, "sorted_ids", ws1, ws2);
  s.expert_ids = buffer_ptr<int32_t>(plan, "expert_ids", ws1, ws2);
  s.num_tokens_padded = buffer_ptr<int32_t>(plan, "num_tokens_padded", ws1, ws2);
  s.expert_offsets = buffer_ptr<int64_t>(plan, "expert_offsets", ws1, ws2);
  s.inv_permuted_idx = buffer_ptr<int32_t>(plan, "inv_permuted_idx", ws1, ws2);
  s.permuted_src = buffer_ptr<int32_t>(plan, "permuted_src", ws1, ws2);
  return s;
}

// The CUDA device whose GEMMs run the plan, or null (the CPU backend).
const cuda::DeviceInfo* plan_device(Backend backend) {
  return backend == Backend::cuda ? &cuda::process_device_info() : nullptr;
}

}  // namespace

struct Experts::Impl {
  ExpertsDesc desc;
  Options options;
  Backend backend;
  TuningTable tuning;  // effective_tuning

  const cuda::DeviceInfo* device() const { return plan_device(backend); }
  plan::PlanShape shape_for(int64_t num_tokens, int64_t tokens_per_expert, bool batched) const {
    return api::step_shape(desc, options, tuning, device(), num_tokens, tokens_per_expert, batched);
  }
};

Experts::Experts(const ExpertsDesc& desc, const Options& options) {
  plan::require_implementable(desc, options);
  const Backend backend = resolve_backend(desc, options);
  impl_ = std::make_unique<Impl>(Impl{desc, options, backend, api::effective_tuning(desc, options, plan_device(backend))});
}

Experts::~Experts() = default;
Experts::Experts(Experts&&) noexcept = default;
Experts& Experts::operator=(Experts&&) noexcept = default;

const Experts::Impl& Experts::impl() const {
  if (impl_ == nullptr) throw Error("Experts: this object was moved from; use the one it was moved to");
  return *impl_;
}

const ExpertsDesc& Experts::desc() const { return impl().desc; }
const Options& Experts::options() const { return impl().options; }
Backend Experts::backend() const { return impl().backend; }

Layout Experts::layout_for(int64_t num_tokens, bool batched) const {
  if (!batched && num_tokens < 0) throw Error("layout_for: num_tokens = " + std::to_string(num_tokens) + " is negative");
  return plan::choose_layout(impl().desc, impl().options.layout, num_tokens, batched);
}

WorkspaceSizes Experts::workspace_bytes(int64_t num_tokens, int64_t batched_tokens_per_expert) const {
  const bool batched = batched_tokens_per_expert > 0;
  // NOTE: a negative T is checked as batched input, so its message names it.
  api::validate_token_counts(impl().desc, num_tokens, batched_tokens_per_expert, batched_tokens_per_expert != 0,
                             "workspace_bytes", "batched_tokens_per_expert");
  const Layout layout = impl().options.layout;
  if (!batched && layout == Layout::masked)
    throw Error("workspace_bytes: layout = masked needs batched_tokens_per_expert (T) > 0");
  // NOTE: as apply refuses batched input under these layouts, so that no size is given for a step that cannot run.
  if (batched && layout != Layout::auto_select && layout != Layout::masked)
    throw Error("workspace_bytes: layout = " + std::string(to_string(layout)) + " cannot take batched input (T = " +
                std::to_string(batched_tokens_per_expert) + "); use masked or auto");
  const auto plan = plan::plan_workspaces(impl().desc, impl().shape_for(num_tokens, batched_tokens_per_expert, batched));
  return {plan.workspace1_bytes, plan.workspace2_bytes};
}

std::string describe_input_errors(int32_t bits) { return cuda::describe_routing_errors(bits); }

void Experts::warm_up() const {
  if (impl().backend == Backend::cuda) api::warm_up_cuda(impl().desc, impl().tuning, impl().options.fp8_tensor_cores, impl().options.fp8_wgmma);
}

void Experts::warm_up(const WeightView& w13, const WeightView& w2) const {
  if (impl().backend == Backend::cuda)
    api::warm_up_cuda(impl().desc, impl().tuning, impl().options.fp8_tensor_cores, impl().options.fp8_wgmma, &w13,
                      &w2);
}

void Experts::apply(const WeightView& w13, const WeightView& w2, const ExpertsInputs& inputs,
                    const ExpertsOutput& output, void* workspace1, void* workspace2, void* stream) const {
  const ExpertsDesc& d = impl().desc;
  const bool batched = inputs.is_batched();
  const bool explicit_masked = impl().options.layout == Layout::masked;
  if (explicit_masked && !batched)
    throw Error("layout = masked needs batched input (expert_num_tokens and [E, T, K] hidden)");
  api::validate_token_counts(d, inputs.num_tokens, inputs.max_tokens_per_expert, batched, "apply");
  api::validate_workspaces(workspace1, workspace2);
  const auto shape = impl().shape_for(inputs.num_tokens, inputs.max_tokens_per_expert, batched);
  if (batched && impl().options.layout != Layout::auto_select && !explicit_masked)
    throw Error(std::string("layout = ") + std::string(to_string(impl().options.layout)) +
                " cannot take batched input; use masked or auto");
  for (const WeightView* v : {&w13, &w2})
    if (v->code_layout != CodeLayout::prepared && v->code_layout != CodeLayout::canonical)
      throw Error(std::string(v == &w13 ? "w13" : "w2") + ": code_layout = " +
                  std::to_string(static_cast<int>(v->code_layout)) + " is neither canonical nor prepared");
  const bool on_gpu = impl().backend == Backend::cuda;
  if (on_gpu) {
    api::validate_device_inputs(d, shape.layout, inputs, output);
    api::validate_device_weights(d.w13(), w13, "w13");
    api::validate_device_weights(d.w2(), w2, "w2");
  } else {
    for (const WeightView* v : {&w13, &w2})
      if (v->code_layout == CodeLayout::prepared)
        throw Error(std::string(v == &w13 ? "w13" : "w2") +
                    ": code_layout = prepared needs the CUDA backend (the CPU backend reads canonical codes)");
    api::validate_inputs(d, shape.layout, inputs, output);
    validate_weights(d.w13(), w13, "w13");
    validate_weights(d.w2(), w2, "w2");
  }
  const int64_t rows = batched ? d.num_experts * inputs.max_tokens_per_expert : inputs.num_tokens;
  if (rows == 0) return;

  const auto plan = plan::plan_workspaces(d, shape);
  if (plan.workspace1_bytes > 0 && workspace1 == nullptr) throw Error("workspace1 is null but the plan needs " + std::to_string(plan.workspace1_bytes) + " bytes");
  if (plan.workspace2_bytes > 0 && workspace2 == nullptr) throw Error("workspace2 is null but the plan needs " + std::to_string(plan.workspace2_bytes) + " bytes");
  api::validate_workspace_ranges(workspace1, plan.workspace1_bytes, workspace2, plan.workspace2_bytes);
  if (on_gpu) {
    api::apply_cuda(d, shape, plan, w13, w2, inputs, output, workspace1, workspace2, stream);
    return;
  }

  const int threads = impl().options.cpu_threads > 0 ? impl().options.cpu_threads : hardware_threads();
  ref::StepArgs args{&d, &w13, &w2, &inputs, output, shape.block_m, threads};
  const auto buffers = step_buffers(plan, workspace1, workspace2);
  switch (shape.layout) {
    case Layout::indexed: ref::run_indexed(args, buffers); break;
    case Layout::contiguous: ref::run_contiguous(args, buffers); break;
    case Layout::masked: ref::run_masked(args, buffers); break;
    case Layout::auto_select: throw Error("internal: layout was not resolved");
  }
}

std::string Experts::explain(int64_t num_tokens) const {
  api::validate_token_counts(impl().desc, num_tokens, 0, false, "explain");
  if (impl().options.layout == Layout::masked)
    throw Error("explain: layout = masked plans batched input, sized by T, not by num_tokens");
  return api::explain_step(impl().desc, impl().options, impl().tuning, impl().backend, impl().device(), num_tokens);
}

}  // namespace moeq
