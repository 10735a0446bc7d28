// A user's program: one INT8 x bf16 experts step through the public API alone (<moeq/experts.hpp>), on the CPU
// backend, checked against its closed form. Exit 0 and "ok" when right.
//
// Every w13 and w2 weight is 1/64 (code 129 - zero point 128, per-channel scale 1/64) and every activation 1:
// GEMM1 gives gate = up = K / 64 = 2, SiLU-and-multiply 2 silu(2), GEMM2 I / 64 times that: so each token's
// output is 2 silu(2) = 3.5232 times the sum of its top-k weights on local experts (bf16 roundings aside).
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <vector>

#include <moeq/experts.hpp>

namespace {

uint16_t to_bf16(float f) {
  uint32_t bits;
  std::memcpy(&bits, &f, 4);
  return static_cast<uint16_t>((bits + 0x7fff + ((bits >> 16) & 1)) >> 16);
}

float from_bf16(uint16_t h) {
  const uint32_t bits = static_cast<uint32_t>(h) << 16;
  float f;
  std::memcpy(&f, &bits, 4);
  return f;
}

struct Weights {
  std::vector<uint8_t> codes;
  std::vector<float> scales;
  moeq::WeightView view() const {
    moeq::WeightView v;
    v.codes = codes.data();
    v.scales = scales.data();
    return v;
  }
};

Weights ones_over_64(const moeq::WeightDesc& w) {
  Weights out;
  out.codes.assign(static_cast<size_t>(w.code_bytes()), 129);
  out.scales.assign(static_cast<size_t>(w.scale_elems()), 1.0f / 64);
  return out;
}

}  // namespace

int main() {
  moeq::ExpertsDesc desc;
  desc.num_experts = 4;
  desc.hidden_size = 128;       // K
  desc.intermediate_size = 64;  // I
  desc.top_k = 2;
  desc.weight_format = moeq::WeightFormat::int8;
  desc.group_size = 0;  // one scale per channel
  desc.scale_dtype = moeq::DType::f32;
  moeq::Options options;
  options.backend = moeq::Backend::cpu;
  if (const auto reasons = moeq::can_implement(desc, options); !reasons.empty()) {
    std::printf("can_implement: %s\n", reasons.front().c_str());
    return 1;
  }
  const moeq::Experts experts(desc, options);
  const Weights w13 = ones_over_64(desc.w13()), w2 = ones_over_64(desc.w2());

  const int64_t M = 3, K = desc.hidden_size;
  const std::vector<uint16_t> hidden(static_cast<size_t>(M * K), to_bf16(1.0f));
  const std::vector<int32_t> ids = {0, 1, 2, 3, 1, -1};  // token 2's second slot: no expert
  const std::vector<float> weights = {0.25f, 0.75f, 0.5f, 0.5f, 0.5f, 0.0f};
  std::vector<uint16_t> out(static_cast<size_t>(M * K), 0xffff);  // NaN until written
  moeq::ExpertsInputs inputs;
  inputs.hidden = hidden.data();
  inputs.num_tokens = M;
  inputs.topk_ids = ids.data();
  inputs.topk_weights = weights.data();

  const moeq::WorkspaceSizes sizes = experts.workspace_bytes(M);
  std::vector<unsigned char> ws1(static_cast<size_t>(sizes.workspace1_bytes) + 16),
      ws2(static_cast<size_t>(sizes.workspace2_bytes) + 16);
  const auto aligned = [](std::vector<unsigned char>& v) {
    return reinterpret_cast<void*>((reinterpret_cast<uintptr_t>(v.data()) + 15) / 16 * 16);
  };
  experts.apply(w13.view(), w2.view(), inputs, {out.data()}, aligned(ws1), aligned(ws2));

  const double act = 2.0 * 2.0 / (1.0 + std::exp(-2.0));
  const double routed[M] = {1.0, 1.0, 0.5};
  for (int64_t t = 0; t < M; ++t)
    for (int64_t k = 0; k < K; ++k) {
      const double got = from_bf16(out[static_cast<size_t>(t * K + k)]), want = act * routed[t];
      if (!(std::fabs(got - want) <= 0.02 * want)) {
        std::printf("out[%lld, %lld] = %g, want %g\n", static_cast<long long>(t), static_cast<long long>(k), got, want);
        return 1;
      }
    }
  std::printf("ok: moeq %s, out[0, 0] = %g (closed form %g)\n", MOEQ_VERSION, from_bf16(out[0]), act);
  return 0;
}
