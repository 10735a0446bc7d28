#include "cuda/prepare.hpp"

#include <algorithm>
#include <cstdint>
#include <string>
#include <vector>

#include "cuda/launch.hpp"
#include "moeq/error.hpp"

namespace moeq::cuda {

jit::KernelSpec prepare_kernel_spec() {
  return {"moeq_prepare_codes", "#include \"moeq_dev/format/prepared.cuh\"\n"};
}

void prepare_codes(const WeightDesc& d, const void* canonical, void* prepared, CUstream stream) {
  if (canonical == nullptr || prepared == nullptr) throw Error("prepare_codes: a pointer is null");
  if ((reinterpret_cast<uintptr_t>(canonical) | reinterpret_cast<uintptr_t>(prepared)) % 16 != 0)
    throw Error("prepare_codes: the canonical and prepared codes must be 16-byte aligned");
  ensure_context();
  const int bits = dtype_bits(weight_format_code_dtype(d.format));
  const long long words = prepared_code_bytes(d) / 4;
  if (words == 0) return;
  const int n = static_cast<int>(d.n), k = static_cast<int>(d.k);
  const int tiles_n = static_cast<int>((d.n + 15) / 16), tiles_k = static_cast<int>((d.k + 63) / 64);
  const auto* in = static_cast<const unsigned char*>(canonical);
  auto* out = static_cast<unsigned*>(prepared);
  static const CUfunction f = jit::kernel_cache().function(prepare_kernel_spec());
  LaunchShape shape;
  shape.block_x = 256;
  shape.grid_x = static_cast<unsigned>((words + 255) / 256);
  const int e2m1 = d.format == WeightFormat::mxfp4 || d.format == WeightFormat::nvfp4;
  launch(f, shape, stream, in, out, words, bits, e2m1, n, k, tiles_n, tiles_k);
}

uint8_t max_device_byte(const void* bytes, int64_t count, CUstream stream) {
  uint8_t largest = 0;
  if (count <= 0) return largest;
  ensure_context();
  check(driver().cuStreamSynchronize(stream), "cuStreamSynchronize");
  constexpr int64_t kChunkBytes = int64_t{16} << 20;
  std::vector<uint8_t> chunk(static_cast<size_t>(std::min(count, kChunkBytes)));
  const CUdeviceptr base = reinterpret_cast<uintptr_t>(bytes);
  for (int64_t offset = 0; offset < count; offset += kChunkBytes) {
    const int64_t n = std::min(kChunkBytes, count - offset);
    check(driver().cuMemcpyDtoH_v2(chunk.data(), base + static_cast<CUdeviceptr>(offset), static_cast<size_t>(n)),
          "cuMemcpyDtoH");
    largest = std::max(largest, *std::max_element(chunk.begin(), chunk.begin() + n));
  }
  return largest;
}

}  // namespace moeq::cuda
