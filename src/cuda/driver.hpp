#pragma once
// The CUDA driver API, loaded with dlopen("libcuda.so.1") on first use, so that the library,
// the CLI and the CPU tests build and run where there is no GPU, no driver and no CUDA headers.
// NOTE: <cuda.h> is never included; the few types, enum values and signatures used are declared
// here with the driver's real ABI names and numbers (checked against CUDA 13.0's cuda.h by
// tests/gpu/test_driver.cpp where that header exists).
#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

namespace moeq::cuda {

using CUresult = int;
using CUdevice = int;
using CUdeviceptr = unsigned long long;
using CUcontext = struct CUctx_st*;
using CUmodule = struct CUmod_st*;
using CUfunction = struct CUfunc_st*;
using CUstream = struct CUstream_st*;
using CUevent = struct CUevent_st*;
using CUgraph = struct CUgraph_st*;
using CUgraphExec = struct CUgraphExec_st*;

constexpr CUresult kSuccess = 0;  // CUDA_SUCCESS

// CUdevice_attribute values used by moeq (the driver's numbers, never renumber).
namespace device_attr {
constexpr int kMaxThreadsPerBlock = 1;                // CU_DEVICE_ATTRIBUTE_MAX_THREADS_PER_BLOCK
constexpr int kMultiprocessorCount = 16;              // CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT
constexpr int kL2CacheSize = 38;                      // CU_DEVICE_ATTRIBUTE_L2_CACHE_SIZE
constexpr int kComputeCapabilityMajor = 75;           // CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR
constexpr int kComputeCapabilityMinor = 76;           // CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR
constexpr int kMaxSharedMemoryPerBlockOptin = 97;     // CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_BLOCK_OPTIN
constexpr int kMaxRegistersPerMultiprocessor = 82;    // CU_DEVICE_ATTRIBUTE_MAX_REGISTERS_PER_MULTIPROCESSOR
}  // namespace device_attr

// CUfunction_attribute values.
namespace func_attr {
constexpr int kMaxThreadsPerBlock = 0;         // CU_FUNC_ATTRIBUTE_MAX_THREADS_PER_BLOCK
constexpr int kSharedSizeBytes = 1;            // CU_FUNC_ATTRIBUTE_SHARED_SIZE_BYTES (static smem)
constexpr int kNumRegs = 4;                    // CU_FUNC_ATTRIBUTE_NUM_REGS
constexpr int kMaxDynamicSharedSizeBytes = 8;  // CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES
}  // namespace func_attr

constexpr unsigned kStreamNonBlocking = 0x1;      // CU_STREAM_NON_BLOCKING
constexpr unsigned kEventDefault = 0x0;           // CU_EVENT_DEFAULT
constexpr unsigned kEventDisableTiming = 0x2;     // CU_EVENT_DISABLE_TIMING
constexpr int kStreamCaptureModeGlobal = 0;       // CU_STREAM_CAPTURE_MODE_GLOBAL
constexpr int kStreamCaptureModeThreadLocal = 1;  // CU_STREAM_CAPTURE_MODE_THREAD_LOCAL
constexpr int kStreamCaptureModeRelaxed = 2;      // CU_STREAM_CAPTURE_MODE_RELAXED

// CUlaunchAttribute and CUlaunchConfig of cuda.h, for cuLaunchKernelEx (thread-block clusters,
// programmatic dependent launch).
constexpr int kLaunchAttributeClusterDimension = 4;                  // CU_LAUNCH_ATTRIBUTE_CLUSTER_DIMENSION
constexpr int kLaunchAttributeProgrammaticStreamSerialization = 6;   // ..._PROGRAMMATIC_STREAM_SERIALIZATION
struct LaunchAttribute {
  int id = 0;
  char pad[4] = {};
  union alignas(8) Value {
    char bytes[64];
    struct {
      unsigned x, y, z;
    } cluster_dim;
    int programmatic_stream_serialization_allowed;
  } value = {};
};
struct LaunchConfig {
  unsigned grid_x = 1, grid_y = 1, grid_z = 1;
  unsigned block_x = 1, block_y = 1, block_z = 1;
  unsigned shared_bytes = 0;
  CUstream stream = nullptr;
  LaunchAttribute* attrs = nullptr;
  unsigned num_attrs = 0;
};
static_assert(sizeof(LaunchAttribute) == 72 && sizeof(LaunchConfig) == 56, "the cuda.h layouts (64-bit)");

// One pointer per driver entry point; each member is named after the exported symbol it holds
// (the versioned `_v2` names where the driver exports several ABI versions).
struct Driver {
  CUresult (*cuInit)(unsigned flags);
  CUresult (*cuDriverGetVersion)(int* version);
  CUresult (*cuGetErrorName)(CUresult error, const char** name);
  CUresult (*cuGetErrorString)(CUresult error, const char** text);
  CUresult (*cuDeviceGet)(CUdevice* device, int ordinal);
  CUresult (*cuDeviceGetCount)(int* count);
  CUresult (*cuDeviceGetAttribute)(int* value, int attribute, CUdevice device);
  CUresult (*cuDeviceGetName)(char* name, int length, CUdevice device);
  CUresult (*cuDevicePrimaryCtxRetain)(CUcontext* context, CUdevice device);
  CUresult (*cuCtxSetCurrent)(CUcontext context);
  CUresult (*cuCtxGetCurrent)(CUcontext* context);
  CUresult (*cuCtxSynchronize)();
  CUresult (*cuModuleLoadData)(CUmodule* module, const void* image);
  CUresult (*cuModuleUnload)(CUmodule module);
  CUresult (*cuModuleGetFunction)(CUfunction* function, CUmodule module, const char* name);
  CUresult (*cuFuncSetAttribute)(CUfunction function, int attribute, int value);
  CUresult (*cuFuncGetAttribute)(int* value, int attribute, CUfunction function);
  CUresult (*cuLaunchKernel)(CUfunction function, unsigned grid_x, unsigned grid_y, unsigned grid_z,
                             unsigned block_x, unsigned block_y, unsigned block_z,
                             unsigned shared_bytes, CUstream stream, void** params, void** extra);
  CUresult (*cuLaunchKernelEx)(const LaunchConfig* config, CUfunction function, void** params, void** extra);
  // Optional (CUDA 12.3+ drivers; null where absent): only MOEQ_PDL_SKIP reads kernel names.
  CUresult (*cuFuncGetName)(const char** name, CUfunction function);
  CUresult (*cuMemAlloc_v2)(CUdeviceptr* ptr, size_t num_bytes);
  CUresult (*cuMemFree_v2)(CUdeviceptr ptr);
  CUresult (*cuMemcpyHtoD_v2)(CUdeviceptr dst, const void* src, size_t num_bytes);
  CUresult (*cuMemcpyDtoH_v2)(void* dst, CUdeviceptr src, size_t num_bytes);
  CUresult (*cuMemcpyDtoDAsync_v2)(CUdeviceptr dst, CUdeviceptr src, size_t num_bytes, CUstream stream);
  CUresult (*cuMemsetD8_v2)(CUdeviceptr dst, unsigned char value, size_t num_bytes);
  CUresult (*cuMemsetD8Async)(CUdeviceptr dst, unsigned char value, size_t num_bytes, CUstream stream);
  CUresult (*cuStreamCreate)(CUstream* stream, unsigned flags);
  CUresult (*cuStreamDestroy_v2)(CUstream stream);
  CUresult (*cuStreamSynchronize)(CUstream stream);
  CUresult (*cuEventCreate)(CUevent* event, unsigned flags);
  CUresult (*cuEventDestroy_v2)(CUevent event);
  CUresult (*cuEventRecord)(CUevent event, CUstream stream);
  CUresult (*cuEventSynchronize)(CUevent event);
  // cuEventElapsedTime_v2 where the driver has it (12.8+), else cuEventElapsedTime: same signature.
  CUresult (*cuEventElapsedTime)(float* milliseconds, CUevent start, CUevent end);
  CUresult (*cuStreamBeginCapture_v2)(CUstream stream, int mode);
  CUresult (*cuStreamEndCapture)(CUstream stream, CUgraph* graph);
  CUresult (*cuGraphInstantiateWithFlags)(CUgraphExec* exec, CUgraph graph, unsigned long long flags);
  CUresult (*cuGraphLaunch)(CUgraphExec exec, CUstream stream);
  CUresult (*cuGraphExecDestroy)(CUgraphExec exec);
  CUresult (*cuGraphDestroy)(CUgraph graph);
};

// True when libcuda.so.1 loads, every entry point resolves and cuInit succeeds; otherwise false
// with the reason in *why (when given). Loads once, thread-safe; never throws.
bool driver_available(std::string* why = nullptr);
// Number of CUDA devices; 0 when there is no driver or no device. Never throws.
int device_count();
// The loaded driver; throws moeq::Error with the reason when it is unavailable.
const Driver& driver();
// Throws moeq::Error "<what>: CUDA_ERROR_NAME (description)" when result is not CUDA_SUCCESS.
void check(CUresult result, const char* what);

// The device moeq uses: env MOEQ_DEVICE (read once), else 0.
int selected_device_ordinal();
// Retains the primary context of the selected device and makes it current on this thread.
// Returns the device. Cheap after the first call.
CUdevice ensure_context();

struct DeviceInfo {
  int ordinal = 0;
  std::string name;
  int cc_major = 0;
  int cc_minor = 0;
  int num_sms = 0;
  int64_t l2_bytes = 0;
  int max_smem_per_block_optin = 0;  // bytes a block may opt into (cuFuncSetAttribute)
  int max_registers_per_sm = 0;
};
// Attributes of the selected device, queried from the driver (never hard-coded).
DeviceInfo current_device_info();
// current_device_info, queried once per process (NOTE: the device is selected once per process).
const DeviceInfo& process_device_info();

// Whether moeq's kernels launch with programmatic stream serialization (each may start while the
// kernel before it runs; its first step waits for that one: device/moeq_dev/ptx/grid_dependency.cuh):
// on sm_90 and later with a driver of CUDA 12.3 or later, unless env MOEQ_PDL is 0 (read once; for
// measuring the launch gaps it hides).
bool programmatic_launch();
// Whether environment variable `name` is exactly "0" (the knobs that switch something off:
// MOEQ_PDL, MOEQ_FOLD, MOEQ_DIAG_FOLD_CTAS); callers read it once.
bool env_is_zero(const char* name);
// Environment variable `name` as a whole decimal integer in [min, max]; `fallback` where it is unset.
// Anything else (junk, out of range) throws an Error naming the variable and its value.
long env_integer(const char* name, long min, long max, long fallback);
// programmatic_launch() for one kernel: false too where env MOEQ_PDL_SKIP (comma-separated entry
// names, e.g. moeq_activation_quantize) names it, so that kernel starts only after the one before it
// has finished (docs/env.md; for measuring which boundaries programmatic dependent launch helps).
bool programmatic_launch(CUfunction function);
// Timing diagnostics only (results are wrong): whether env MOEQ_DIAG_OMIT names this kernel, so that
// launch() skips it. Entries are comma-separated entry names, each optionally `@i%n`: only the
// launches whose running count of that entry (from 0, per process) is i mod n (moeq_moe_gemm@0%2:
// every GEMM1, as each step launches the two GEMMs in order). Read once; counted per call.
bool omitted_by_diagnostics(CUfunction function);
// One MOEQ_DIAG_OMIT entry: the launches of `name` whose running count is residue mod modulus.
struct DiagOmitRule {
  std::string name;
  long long residue = 0, modulus = 1;  // modulus 1: every launch
};
// A comma-separated list of kernel entry names (MOEQ_PDL_SKIP, MOEQ_DIAG_OMIT): each trimmed of
// spaces and tabs, empty entries skipped.
std::vector<std::string> parse_kernel_names(const std::string& list);
// MOEQ_DIAG_OMIT's value as rules (empty entries skipped); moeq::Error naming a malformed entry.
std::vector<DiagOmitRule> parse_diag_omit(const std::string& list);

// Device memory owned by one object; freed on destruction.
class DeviceBuffer {
 public:
  DeviceBuffer() = default;
  explicit DeviceBuffer(size_t num_bytes);
  ~DeviceBuffer();
  DeviceBuffer(DeviceBuffer&& other) noexcept;
  DeviceBuffer& operator=(DeviceBuffer&& other) noexcept;
  DeviceBuffer(const DeviceBuffer&) = delete;
  DeviceBuffer& operator=(const DeviceBuffer&) = delete;

  CUdeviceptr ptr() const { return ptr_; }
  size_t num_bytes() const { return num_bytes_; }

  // Synchronous with every stream (moeq's are non-blocking): each waits for all work queued so
  // far, and the device has the bytes on return. Not for use while a stream is being captured.
  void upload(const void* host, size_t num_bytes);      // from offset 0
  void download(void* host, size_t num_bytes) const;    // from offset 0
  void fill_bytes(uint8_t value);                       // memset of the whole buffer

  template <typename T>
  static DeviceBuffer from_host(const std::vector<T>& values) {
    DeviceBuffer buffer(values.size() * sizeof(T));
    buffer.upload(values.data(), buffer.num_bytes());
    return buffer;
  }
  template <typename T>
  std::vector<T> to_host(size_t num_elems) const {
    std::vector<T> values(num_elems);
    download(values.data(), num_elems * sizeof(T));
    return values;
  }

 private:
  void release() noexcept;

  CUdeviceptr ptr_ = 0;
  size_t num_bytes_ = 0;
};

class Stream {
 public:
  Stream();  // non-blocking with respect to the legacy default stream
  ~Stream();
  Stream(const Stream&) = delete;
  Stream& operator=(const Stream&) = delete;

  CUstream get() const { return stream_; }
  void synchronize() const;

 private:
  CUstream stream_ = nullptr;
};

class Event {
 public:
  explicit Event(bool timing = true);
  ~Event();
  Event(const Event&) = delete;
  Event& operator=(const Event&) = delete;

  CUevent get() const { return event_; }
  void record(CUstream stream);
  void synchronize() const;
  // Milliseconds between two recorded, completed timing events.
  static float elapsed_ms(const Event& start, const Event& end);

 private:
  CUevent event_ = nullptr;
};

}  // namespace moeq::cuda
