// The dlopen'ed driver: its ABI constants match cuda.h, it reports why it is unavailable, and on a
// GPU a JIT-compiled conversion kernel matches the reference codecs bit for bit.
#include <gtest/gtest.h>
#include <unistd.h>

#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <limits>
#include <random>
#include <regex>
#include <string>
#include <vector>

#include "cuda/driver.hpp"
#include "jit/compiler.hpp"
#include "jit/nvrtc.hpp"
#include "moeq/error.hpp"
#include "reference/formats.hpp"

namespace {

namespace fs = std::filesystem;
namespace cu = moeq::cuda;

std::string find_cuda_header() {
  for (const char* var : {"CUDA_HOME", "CUDA_PATH"}) {
    if (const char* root = std::getenv(var); root != nullptr && fs::exists(fs::path(root) / "include/cuda.h")) {
      return (fs::path(root) / "include/cuda.h").string();
    }
  }
  return fs::exists("/usr/local/cuda/include/cuda.h") ? "/usr/local/cuda/include/cuda.h" : "";
}

// Host-only: our hand-written enum values against the toolkit's header, read as text.
TEST(DriverAbi, ConstantsMatchCudaHeader) {
  const std::string path = find_cuda_header();
  if (path.empty()) GTEST_SKIP() << "no cuda.h to compare with";
  std::ifstream file(path);
  const std::string header((std::istreambuf_iterator<char>(file)), std::istreambuf_iterator<char>());
  const auto value_of = [&](const std::string& name) -> long {
    std::smatch match;
    const std::regex pattern("\\b" + name + "\\s*=\\s*(0x[0-9a-fA-F]+|[0-9]+)");
    if (!std::regex_search(header, match, pattern)) return -1;
    return std::stol(match[1].str(), nullptr, 0);
  };
  const struct {
    const char* name;
    long ours;
  } constants[] = {
      {"CUDA_SUCCESS", cu::kSuccess},
      {"CU_DEVICE_ATTRIBUTE_MAX_THREADS_PER_BLOCK", cu::device_attr::kMaxThreadsPerBlock},
      {"CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT", cu::device_attr::kMultiprocessorCount},
      {"CU_DEVICE_ATTRIBUTE_L2_CACHE_SIZE", cu::device_attr::kL2CacheSize},
      {"CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR", cu::device_attr::kComputeCapabilityMajor},
      {"CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR", cu::device_attr::kComputeCapabilityMinor},
      {"CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_BLOCK_OPTIN",
       cu::device_attr::kMaxSharedMemoryPerBlockOptin},
      {"CU_FUNC_ATTRIBUTE_MAX_THREADS_PER_BLOCK", cu::func_attr::kMaxThreadsPerBlock},
      {"CU_FUNC_ATTRIBUTE_SHARED_SIZE_BYTES", cu::func_attr::kSharedSizeBytes},
      {"CU_FUNC_ATTRIBUTE_NUM_REGS", cu::func_attr::kNumRegs},
      {"CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES", cu::func_attr::kMaxDynamicSharedSizeBytes},
      {"CU_LAUNCH_ATTRIBUTE_CLUSTER_DIMENSION", cu::kLaunchAttributeClusterDimension},
      {"CU_LAUNCH_ATTRIBUTE_PROGRAMMATIC_STREAM_SERIALIZATION", cu::kLaunchAttributeProgrammaticStreamSerialization},
      {"CU_STREAM_NON_BLOCKING", cu::kStreamNonBlocking},
      {"CU_EVENT_DEFAULT", cu::kEventDefault},
      {"CU_EVENT_DISABLE_TIMING", cu::kEventDisableTiming},
      {"CU_STREAM_CAPTURE_MODE_GLOBAL", cu::kStreamCaptureModeGlobal},
      {"CU_STREAM_CAPTURE_MODE_THREAD_LOCAL", cu::kStreamCaptureModeThreadLocal},
      {"CU_STREAM_CAPTURE_MODE_RELAXED", cu::kStreamCaptureModeRelaxed},
  };
  for (const auto& c : constants) EXPECT_EQ(value_of(c.name), c.ours) << c.name << " in " << path;
}

TEST(Driver, ReportsWhyItIsUnavailable) {
  std::string why;
  if (cu::driver_available(&why)) {
    EXPECT_GE(cu::device_count(), 0);
    return;
  }
  EXPECT_FALSE(why.empty());
  EXPECT_EQ(cu::device_count(), 0);
  try {
    cu::driver();
    FAIL() << "driver() returned without a driver";
  } catch (const moeq::Error& error) {
    EXPECT_NE(std::string(error.what()).find(why), std::string::npos) << error.what();
  }
  std::printf("driver unavailable: %s\n", why.c_str());
}

const char* kConvertSource = R"(#include "moeq_dev/ptx/cvt.cuh"
struct ConvertCfg { static constexpr int kThreads = 256; };
extern "C" __global__ void __launch_bounds__(ConvertCfg::kThreads)
moeq_test_convert(const float* in, unsigned short* bf16_out, unsigned short* f16_out,
                  float* bf16_decoded, float* f16_decoded, int n) {
  const int i = blockIdx.x * ConvertCfg::kThreads + threadIdx.x;
  if (i >= n) return;
  bf16_out[i] = moeq_dev::f32_to_bf16_rn(in[i]);
  f16_out[i] = moeq_dev::f32_to_f16_rn(in[i]);
  bf16_decoded[i] = moeq_dev::bf16_to_f32(bf16_out[i]);
  f16_decoded[i] = moeq_dev::f16_to_f32(f16_out[i]);
}
)";

uint32_t bits_of(float x) {
  uint32_t bits;
  std::memcpy(&bits, &x, sizeof(bits));
  return bits;
}

// Bit-equal, except that any NaN equals any NaN (decoders widen NaN payloads differently).
bool same_value_bits(float got, float want) {
  return std::isnan(want) ? std::isnan(got) : bits_of(got) == bits_of(want);
}

TEST(DriverGpu, ConvertsOneMillionFloatsBitExact) {
  if (cu::device_count() == 0) GTEST_SKIP() << "no CUDA device";
  std::string why;
  if (!moeq::jit::nvrtc_available(&why)) GTEST_SKIP() << "NVRTC not available: " << why;

  const cu::DeviceInfo info = cu::current_device_info();
  std::printf("device %d: %s, sm_%d%d, %d SMs, %lld MiB L2, %d KiB smem/block (optin)\n", info.ordinal,
              info.name.c_str(), info.cc_major, info.cc_minor, info.num_sms,
              static_cast<long long>(info.l2_bytes >> 20), info.max_smem_per_block_optin >> 10);
  EXPECT_GT(info.num_sms, 0);
  EXPECT_GT(info.l2_bytes, 0);

  std::string dir = (fs::temp_directory_path() / "moeq_gpu_test_XXXXXX").string();
  ASSERT_NE(::mkdtemp(dir.data()), nullptr);
  moeq::jit::JitOptions options;
  options.cache_dir = dir;
  const moeq::jit::KernelSpec spec{"moeq_test_convert", kConvertSource};
  moeq::jit::KernelCache cold(options);
  const moeq::jit::LoadedKernel& cold_kernel = cold.load(spec);
  moeq::jit::KernelCache warm(options);  // a second process: the disk cache is warm
  const moeq::jit::LoadedKernel& kernel = warm.load(spec);
  EXPECT_EQ(cold_kernel.cubin.origin, moeq::jit::CubinOrigin::kCompiled);
  EXPECT_EQ(kernel.cubin.origin, moeq::jit::CubinOrigin::kDisk);
  std::printf("%s: cold compile %.1f ms, warm disk load %.3f ms, module load %.3f ms\n",
              to_string(moeq::jit::current_arch()).c_str(), cold_kernel.cubin.compile_ms,
              kernel.cubin.lookup_ms, kernel.module_load_ms);
  fs::remove_all(dir);
  int num_regs = 0;
  cu::check(cu::driver().cuFuncGetAttribute(&num_regs, cu::func_attr::kNumRegs, kernel.function),
            "cuFuncGetAttribute");
  EXPECT_GT(num_regs, 0);

  // Specials first, then random bit patterns: every exponent, subnormals, infs and NaNs.
  constexpr int kNumElems = 1 << 20;
  std::vector<float> input(kNumElems);
  const float specials[] = {0.0f, -0.0f, 1.0f, -1.0f, 65504.0f, 65520.0f, 1e-8f, 3.0e38f,
                            std::numeric_limits<float>::infinity(), -std::numeric_limits<float>::infinity(),
                            std::numeric_limits<float>::denorm_min(), std::numeric_limits<float>::min()};
  std::mt19937 rng(1234);
  for (int i = 0; i < kNumElems; ++i) {
    const uint32_t bits = rng();
    std::memcpy(&input[i], &bits, sizeof(bits));
  }
  std::copy(std::begin(specials), std::end(specials), input.begin());

  cu::DeviceBuffer in = cu::DeviceBuffer::from_host(input);
  cu::DeviceBuffer bf16(kNumElems * sizeof(uint16_t)), f16(kNumElems * sizeof(uint16_t));
  cu::DeviceBuffer bf16_decoded(kNumElems * sizeof(float)), f16_decoded(kNumElems * sizeof(float));
  for (cu::DeviceBuffer* poisoned : {&bf16, &f16, &bf16_decoded, &f16_decoded}) poisoned->fill_bytes(0xFF);
  cu::CUdeviceptr ptrs[] = {in.ptr(), bf16.ptr(), f16.ptr(), bf16_decoded.ptr(), f16_decoded.ptr()};
  int n = kNumElems;
  void* params[] = {&ptrs[0], &ptrs[1], &ptrs[2], &ptrs[3], &ptrs[4], &n};
  cu::Stream stream;
  cu::Event start, stop;
  start.record(stream.get());
  cu::check(cu::driver().cuLaunchKernel(kernel.function, kNumElems / 256, 1, 1, 256, 1, 1, 0, stream.get(),
                                        params, nullptr),
            "cuLaunchKernel");
  stop.record(stream.get());
  stream.synchronize();
  std::printf("kernel: %.3f ms for %d elements\n", cu::Event::elapsed_ms(start, stop), kNumElems);

  const auto got_bf16 = bf16.to_host<uint16_t>(kNumElems);
  const auto got_f16 = f16.to_host<uint16_t>(kNumElems);
  const auto got_bf16_decoded = bf16_decoded.to_host<float>(kNumElems);
  const auto got_f16_decoded = f16_decoded.to_host<float>(kNumElems);
  // NOTE: cvt.rn.{bf16,f16}.f32 turn every NaN into the canonical NaN 0x7FFF (sign and payload
  // dropped; measured on an H200); reference/formats.hpp encodes NaN the same way.
  constexpr uint16_t kCanonicalNan = 0x7FFF;
  int num_mismatches = 0;
  int num_nans = 0;
  for (int i = 0; i < kNumElems && num_mismatches < 10; ++i) {
    bool ok = same_value_bits(got_bf16_decoded[i], moeq::ref::bf16_to_f32(got_bf16[i])) &&
              same_value_bits(got_f16_decoded[i], moeq::ref::f16_to_f32(got_f16[i]));
    const uint16_t want_bf16 = moeq::ref::f32_to_bf16(input[i]);
    const uint16_t want_f16 = moeq::ref::f32_to_f16(input[i]);
    if (std::isnan(input[i])) {
      ++num_nans;
      ok = ok && got_bf16[i] == kCanonicalNan && got_f16[i] == kCanonicalNan && want_bf16 == kCanonicalNan &&
           want_f16 == kCanonicalNan;
    } else {
      ok = ok && got_bf16[i] == want_bf16 && got_f16[i] == want_f16;
    }
    if (!ok) {
      ++num_mismatches;
      ADD_FAILURE() << "input bits 0x" << std::hex << bits_of(input[i]) << ": bf16 0x" << got_bf16[i]
                    << " (want 0x" << want_bf16 << "), f16 0x" << got_f16[i] << " (want 0x" << want_f16
                    << ")";
    }
  }
  EXPECT_GT(num_nans, 0) << "random bits should include NaNs";
  std::printf("%d elements: non-NaN bit-exact against moeq::ref, %d NaN inputs -> 0x7FFF\n", kNumElems, num_nans);
}

// The graph entry points (CUDA-graph safety of apply() depends on them): capture a memset and a
// device-to-device copy, replay twice.
TEST(DriverGpu, StreamCaptureReplaysAsAGraph) {
  if (cu::device_count() == 0) GTEST_SKIP() << "no CUDA device";
  const cu::Driver& d = cu::driver();
  constexpr size_t kNumBytes = 1 << 16;
  cu::DeviceBuffer src(kNumBytes), dst(kNumBytes);
  dst.fill_bytes(0);
  cu::Stream stream;
  cu::check(d.cuStreamBeginCapture_v2(stream.get(), cu::kStreamCaptureModeThreadLocal), "cuStreamBeginCapture");
  cu::check(d.cuMemsetD8Async(src.ptr(), 0x5A, kNumBytes, stream.get()), "cuMemsetD8Async");
  cu::check(d.cuMemcpyDtoDAsync_v2(dst.ptr(), src.ptr(), kNumBytes, stream.get()), "cuMemcpyDtoDAsync");
  cu::CUgraph graph = nullptr;
  cu::check(d.cuStreamEndCapture(stream.get(), &graph), "cuStreamEndCapture");
  cu::CUgraphExec exec = nullptr;
  cu::check(d.cuGraphInstantiateWithFlags(&exec, graph, 0), "cuGraphInstantiateWithFlags");
  EXPECT_EQ(dst.to_host<uint8_t>(kNumBytes), std::vector<uint8_t>(kNumBytes, 0)) << "capture ran nothing";
  for (int replay = 0; replay < 2; ++replay) cu::check(d.cuGraphLaunch(exec, stream.get()), "cuGraphLaunch");
  stream.synchronize();
  EXPECT_EQ(dst.to_host<uint8_t>(kNumBytes), std::vector<uint8_t>(kNumBytes, 0x5A));
  cu::check(d.cuGraphExecDestroy(exec), "cuGraphExecDestroy");
  cu::check(d.cuGraphDestroy(graph), "cuGraphDestroy");
}

}  // namespace
