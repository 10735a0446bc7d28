#include "io/verify.hpp"

#include <cmath>
#include <cstdint>
#include <map>
#include <string>

#include "cuda/driver.hpp"
#include "io/device_problem.hpp"
#include "io/problem.hpp"
#include "moeq/error.hpp"
#include "reference/oracle.hpp"
#include "reference/scalars.hpp"

namespace moeq::io {
namespace {

void* as_ptr(const cuda::DeviceBuffer& b) { return reinterpret_cast<void*>(static_cast<uintptr_t>(b.ptr())); }

}  // namespace

bool OracleComparison::within_contract(ActFormat act) const {
  const double bound = act == ActFormat::none ? 1e-2 : 2e-2;
  return finite && rel_err <= bound && max_err_fraction <= 0.05;
}

OracleComparison compare(DType dtype, const std::vector<uint8_t>& got, const std::vector<double>& want, int64_t cols,
                         const std::function<bool(int64_t)>& row_valid) {
  OracleComparison c;
  double err2 = 0, ref2 = 0, max_ref = 0;
  int64_t exact = 0, total = 0;
  const int64_t rows = cols > 0 ? static_cast<int64_t>(want.size()) / cols : 0;
  for (int64_t row = 0; row < rows; ++row) {
    if (!row_valid(row)) continue;
    for (int64_t col = 0; col < cols; ++col) {
      const double g = ref::load_float(dtype, got.data(), row * cols + col), w = want[row * cols + col];
      if (!std::isfinite(w)) {
        // NOTE: a NaN or infinity the oracle computes too (one in the inputs) is a match, not an error of
        // NaN size: the result must carry the same special value there.
        const bool same = std::isnan(w) ? std::isnan(g) : g == w;
        exact += same;
        ++total;
        if (!same) c.finite = false;
        continue;
      }
      if (!std::isfinite(g)) c.finite = false;
      exact += g == ref::round_to(dtype, static_cast<float>(w));
      ++total;
      err2 += (g - w) * (g - w);
      ref2 += w * w;
      c.max_err = std::max(c.max_err, std::fabs(g - w));
      max_ref = std::max(max_ref, std::fabs(w));
    }
  }
  c.rel_err = ref2 > 0 ? std::sqrt(err2 / ref2) : std::sqrt(err2);
  c.max_err_fraction = max_ref > 0 ? c.max_err / max_ref : c.max_err;
  c.exact_fraction = total > 0 ? static_cast<double>(exact) / static_cast<double>(total) : 1.0;
  return c;
}

std::vector<double> oracle_of(const HostProblem& p) {
  return p.is_batched() ? ref::oracle_experts_batched(p.desc, p.w13->view(), p.w2->view(), p.inputs())
                        : ref::oracle_experts(p.desc, p.w13->view(), p.w2->view(), p.inputs());
}

OracleComparison compare_with_oracle(const HostProblem& p, const std::vector<uint8_t>& got,
                                     const std::vector<double>& oracle) {
  const ExpertsDesc& d = p.desc;
  if (p.is_batched()) {
    const int64_t T = p.max_tokens_per_expert;
    return compare(d.act_dtype, got, oracle, d.hidden_size,
                   [&](int64_t row) { return row % T < p.expert_num_tokens[row / T]; });
  }
  return compare(d.act_dtype, got, oracle, d.hidden_size, [](int64_t) { return true; });
}

OracleComparison compare_with_oracle(const HostProblem& p, const std::vector<uint8_t>& got) {
  return compare_with_oracle(p, got, oracle_of(p));
}

std::string VerifyCase::label() const {
  return desc.to_string() + " " + std::string(to_string(layout)) + " M=" + std::to_string(num_tokens) +
         (ep_size > 1 ? " ep=" + std::to_string(ep_size) : "") + (codes == CodeLayout::prepared ? " prepared" : "");
}

struct GpuVerifier::State {
  VerifyCase c;
  HostProblem p;
  std::map<CodeLayout, DeviceProblem> uploads;  // made on first use, one per code layout
  std::vector<double> oracle;  // [M, K] or [E, T, K]
};

GpuVerifier::GpuVerifier(const VerifyCase& c) : state_(std::make_unique<State>()) {
  GenerateOptions g;
  g.num_tokens = c.num_tokens;
  g.seed = c.seed;
  g.ep_size = c.ep_size;
  g.batched = c.layout == Layout::masked;
  state_->c = c;
  state_->p = generate_problem(c.desc, g);
  if (c.edit) c.edit(state_->p);
  const HostProblem& p = state_->p;
  state_->uploads.emplace(c.codes, upload_problem(p, c.codes));
  state_->oracle = oracle_of(p);
}

GpuVerifier::~GpuVerifier() = default;

VerifyResult GpuVerifier::run(const Options& options) const {
  return run_as(options, state_->c.layout, state_->c.codes);
}

VerifyResult GpuVerifier::run_as(const Options& base_options, Layout layout, CodeLayout codes) const {
  const HostProblem& p = state_->p;
  if ((layout == Layout::masked) != p.is_batched())
    throw Error("internal: layout " + std::string(to_string(layout)) + " cannot run the " +
                (p.is_batched() ? "batched" : "standard") + " problem of " + state_->c.label());
  auto upload = state_->uploads.find(codes);
  if (upload == state_->uploads.end()) upload = state_->uploads.emplace(codes, upload_problem(p, codes)).first;
  const DeviceProblem& dev = upload->second;
  const ExpertsDesc& d = p.desc;
  Options options = base_options;
  options.layout = layout;
  options.backend = Backend::cuda;
  const Experts experts(d, options);
  const bool batched = p.is_batched();
  const WorkspaceSizes ws = experts.workspace_bytes(p.num_tokens, batched ? p.max_tokens_per_expert : 0);
  cuda::DeviceBuffer ws1(std::max<int64_t>(ws.workspace1_bytes, 16)), ws2(std::max<int64_t>(ws.workspace2_bytes, 16));
  const int64_t out_bytes = dtype_bytes(d.act_dtype, p.output_rows() * d.hidden_size);
  cuda::DeviceBuffer out(std::max<int64_t>(out_bytes, 16));
  ws1.fill_bytes(0xFF);  // NaN in every float type, -1 in every index
  ws2.fill_bytes(0xFF);
  out.fill_bytes(0xFF);
  cuda::Stream stream;
  experts.apply(dev.w13, dev.w2, dev.inputs, {as_ptr(out), 0}, as_ptr(ws1), as_ptr(ws2), stream.get());
  stream.synchronize();
  VerifyResult r;
  r.output.resize(static_cast<size_t>(out_bytes));
  if (out_bytes > 0) out.download(r.output.data(), r.output.size());
  r.error = compare_with_oracle(p, r.output, state_->oracle);
  r.passed = r.error.within_contract(d.act_format);
  return r;
}

VerifyResult verify_on_gpu(const VerifyCase& c, const Options& options) { return GpuVerifier(c).run(options); }

}  // namespace moeq::io
