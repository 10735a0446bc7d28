#include "io/verify.hpp"

#include <cmath>
#include <cstdint>

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

std::string VerifyCase::label() const {
  return desc.to_string() + " " + std::string(to_string(layout)) + " M=" + std::to_string(num_tokens) +
         (ep_size > 1 ? " ep=" + std::to_string(ep_size) : "");
}

VerifyResult verify_on_gpu(const VerifyCase& c, const Options& base_options) {
  GenerateOptions g;
  g.num_tokens = c.num_tokens;
  g.seed = c.seed;
  g.ep_size = c.ep_size;
  g.batched = c.layout == Layout::masked;
  const HostProblem p = generate_problem(c.desc, g);
  const ExpertsDesc& d = p.desc;
  Options options = base_options;
  options.layout = c.layout;
  options.backend = Backend::cuda;
  const Experts experts(d, options);

  const DeviceProblem dev = upload_problem(p);
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
  const auto want = batched ? ref::oracle_experts_batched(d, p.w13->view(), p.w2->view(), p.inputs())
                            : ref::oracle_experts(d, p.w13->view(), p.w2->view(), p.inputs());
  const int64_t K = d.hidden_size;
  double err2 = 0, ref2 = 0, max_err = 0, max_ref = 0;
  for (int64_t row = 0; row < p.output_rows(); ++row) {
    if (batched && row % p.max_tokens_per_expert >= p.expert_num_tokens[row / p.max_tokens_per_expert]) continue;
    for (int64_t col = 0; col < K; ++col) {
      const double got = ref::load_float(d.act_dtype, r.output.data(), row * K + col), w = want[row * K + col];
      if (!std::isfinite(got) && std::isfinite(w)) r.finite = false;
      err2 += (got - w) * (got - w);
      ref2 += w * w;
      max_err = std::max(max_err, std::fabs(got - w));
      max_ref = std::max(max_ref, std::fabs(w));
    }
  }
  r.rel_err = ref2 > 0 ? std::sqrt(err2 / ref2) : std::sqrt(err2);
  r.max_err_fraction = max_ref > 0 ? max_err / max_ref : max_err;
  const double bound = d.act_format == ActFormat::none ? 1e-2 : 2e-2;
  r.passed = r.finite && r.rel_err <= bound && r.max_err_fraction <= 0.05;
  return r;
}

}  // namespace moeq::io
