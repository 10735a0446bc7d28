#include "cuda/driver.hpp"

#include <dlfcn.h>
#include <algorithm>

#include <cerrno>
#include <cstdlib>
#include <initializer_list>
#include <mutex>
#include <string>
#include <unordered_map>
#include <utility>
#include <vector>

#include "moeq/error.hpp"

namespace moeq::cuda {
namespace {

constexpr const char* kDriverLibrary = "libcuda.so.1";

struct LoadedDriver {
  Driver fns{};
  bool resolved = false;  // every entry point found (error names usable even if cuInit failed)
  bool ok = false;        // resolved and cuInit succeeded
  std::string why;        // the reason when !ok
};

// Looks up the first exported name of `names` into `slot`.
template <typename Fn>
bool resolve(void* library, Fn& slot, std::initializer_list<const char*> names, std::string* missing) {
  for (const char* name : names) {
    if (void* symbol = dlsym(library, name)) {
      slot = reinterpret_cast<Fn>(symbol);
      return true;
    }
  }
  if (!missing->empty()) *missing += ", ";
  *missing += *names.begin();
  return false;
}

std::string error_text(const Driver& fns, CUresult result) {
  const char* name = nullptr;
  const char* text = nullptr;
  if (fns.cuGetErrorName == nullptr || fns.cuGetErrorName(result, &name) != kSuccess) name = nullptr;
  if (fns.cuGetErrorString == nullptr || fns.cuGetErrorString(result, &text) != kSuccess) text = nullptr;
  std::string out = name ? name : "CUDA error " + std::to_string(result);
  if (text) out += std::string(" (") + text + ")";
  return out;
}

LoadedDriver load_driver() {
  LoadedDriver loaded;
  // NOTE: never dlclose'd: device memory freed by static destructors still needs the driver.
  void* library = dlopen(kDriverLibrary, RTLD_NOW | RTLD_LOCAL);
  if (library == nullptr) {
    const char* reason = dlerror();
    loaded.why = std::string("cannot load ") + kDriverLibrary + " (no NVIDIA driver installed?): " +
                 (reason ? reason : "unknown dlopen error");
    return loaded;
  }
  Driver& d = loaded.fns;
  std::string missing;
#define MOEQ_RESOLVE(member) resolve(library, d.member, {#member}, &missing)
  MOEQ_RESOLVE(cuInit);
  MOEQ_RESOLVE(cuDriverGetVersion);
  MOEQ_RESOLVE(cuGetErrorName);
  MOEQ_RESOLVE(cuGetErrorString);
  MOEQ_RESOLVE(cuDeviceGet);
  MOEQ_RESOLVE(cuDeviceGetCount);
  MOEQ_RESOLVE(cuDeviceGetAttribute);
  MOEQ_RESOLVE(cuDeviceGetName);
  MOEQ_RESOLVE(cuDevicePrimaryCtxRetain);
  MOEQ_RESOLVE(cuCtxSetCurrent);
  MOEQ_RESOLVE(cuCtxGetCurrent);
  MOEQ_RESOLVE(cuCtxSynchronize);
  MOEQ_RESOLVE(cuModuleLoadData);
  MOEQ_RESOLVE(cuModuleUnload);
  MOEQ_RESOLVE(cuModuleGetFunction);
  MOEQ_RESOLVE(cuFuncSetAttribute);
  MOEQ_RESOLVE(cuFuncGetAttribute);
  MOEQ_RESOLVE(cuLaunchKernel);
  MOEQ_RESOLVE(cuLaunchKernelEx);
  MOEQ_RESOLVE(cuMemAlloc_v2);
  MOEQ_RESOLVE(cuMemFree_v2);
  MOEQ_RESOLVE(cuMemcpyHtoD_v2);
  MOEQ_RESOLVE(cuMemcpyDtoH_v2);
  MOEQ_RESOLVE(cuMemcpyDtoDAsync_v2);
  MOEQ_RESOLVE(cuMemsetD8_v2);
  MOEQ_RESOLVE(cuMemsetD8Async);
  MOEQ_RESOLVE(cuStreamCreate);
  MOEQ_RESOLVE(cuStreamDestroy_v2);
  MOEQ_RESOLVE(cuStreamSynchronize);
  MOEQ_RESOLVE(cuEventCreate);
  MOEQ_RESOLVE(cuEventDestroy_v2);
  MOEQ_RESOLVE(cuEventRecord);
  MOEQ_RESOLVE(cuEventSynchronize);
  MOEQ_RESOLVE(cuStreamBeginCapture_v2);
  MOEQ_RESOLVE(cuStreamEndCapture);
  MOEQ_RESOLVE(cuGraphInstantiateWithFlags);
  MOEQ_RESOLVE(cuGraphLaunch);
  MOEQ_RESOLVE(cuGraphExecDestroy);
  MOEQ_RESOLVE(cuGraphDestroy);
#undef MOEQ_RESOLVE
  std::string optional_missing;
  resolve(library, d.cuFuncGetName, {"cuFuncGetName"}, &optional_missing);
  resolve(library, d.cuEventElapsedTime, {"cuEventElapsedTime_v2", "cuEventElapsedTime"}, &missing);
  if (!missing.empty()) {
    loaded.why = std::string(kDriverLibrary) + " lacks " + missing + " (driver too old?)";
    return loaded;
  }
  loaded.resolved = true;
  if (const CUresult result = d.cuInit(0); result != kSuccess) {
    loaded.why = "cuInit failed: " + error_text(d, result);
    return loaded;
  }
  loaded.ok = true;
  return loaded;
}

const LoadedDriver& loaded_driver() {
  static const LoadedDriver loaded = load_driver();  // NOTE: thread-safe (magic statics)
  return loaded;
}

struct PrimaryContext {
  CUdevice device = 0;
  CUcontext context = nullptr;
};

PrimaryContext retain_primary_context() {
  const Driver& d = driver();
  const int ordinal = selected_device_ordinal();
  const int count = device_count();
  if (ordinal >= count) {
    throw Error("CUDA device " + std::to_string(ordinal) + " (MOEQ_DEVICE) requested, but " +
                std::to_string(count) + " device(s) present");
  }
  PrimaryContext primary;
  check(d.cuDeviceGet(&primary.device, ordinal), "cuDeviceGet");
  // NOTE: the primary context is shared with the CUDA runtime (PyTorch etc.) and never released:
  // it lives as long as the process.
  check(d.cuDevicePrimaryCtxRetain(&primary.context, primary.device), "cuDevicePrimaryCtxRetain");
  return primary;
}

}  // namespace

bool driver_available(std::string* why) {
  const LoadedDriver& loaded = loaded_driver();
  if (!loaded.ok && why != nullptr) *why = loaded.why;
  return loaded.ok;
}

int device_count() {
  const LoadedDriver& loaded = loaded_driver();
  if (!loaded.ok) return 0;
  int count = 0;
  if (loaded.fns.cuDeviceGetCount(&count) != kSuccess) return 0;
  return count;
}

const Driver& driver() {
  const LoadedDriver& loaded = loaded_driver();
  if (!loaded.ok) throw Error("CUDA driver unavailable: " + loaded.why);
  return loaded.fns;
}

void check(CUresult result, const char* what) {
  if (result == kSuccess) return;
  const LoadedDriver& loaded = loaded_driver();
  const std::string text = loaded.resolved ? error_text(loaded.fns, result)
                                           : "CUDA error " + std::to_string(result);
  throw Error(std::string(what) + " failed: " + text);
}

int selected_device_ordinal() {
  static const int ordinal = [] {
    const char* value = std::getenv("MOEQ_DEVICE");
    if (value == nullptr || *value == '\0') return 0;
    char* end = nullptr;
    const long parsed = std::strtol(value, &end, 10);
    if (*end != '\0' || parsed < 0 || parsed > 1024) {
      throw Error(std::string("MOEQ_DEVICE = '") + value + "' is not a device ordinal (0, 1, ...)");
    }
    return static_cast<int>(parsed);
  }();
  return ordinal;
}

CUdevice ensure_context() {
  static const PrimaryContext primary = retain_primary_context();
  const Driver& d = driver();
  CUcontext current = nullptr;
  check(d.cuCtxGetCurrent(&current), "cuCtxGetCurrent");
  if (current != primary.context) check(d.cuCtxSetCurrent(primary.context), "cuCtxSetCurrent");
  return primary.device;
}

namespace {

const char* function_name(CUfunction function, const char* knob) {
  const char* name = nullptr;
  const Driver& d = driver();
  if (d.cuFuncGetName == nullptr || d.cuFuncGetName(&name, function) != kSuccess || name == nullptr)
    throw Error(std::string(knob) + " needs cuFuncGetName (a CUDA 12.3 or later driver)");
  return name;
}

}  // namespace

std::vector<std::string> parse_kernel_names(const std::string& list) {
  std::vector<std::string> names;
  size_t start = 0;
  while (start <= list.size()) {
    const size_t end = std::min(list.find(',', start), list.size());
    const std::string entry = list.substr(start, end - start);
    start = end + 1;
    const size_t first = entry.find_first_not_of(" \t");
    if (first != std::string::npos) names.push_back(entry.substr(first, entry.find_last_not_of(" \t") - first + 1));
  }
  return names;
}

std::vector<DiagOmitRule> parse_diag_omit(const std::string& list) {
  // A whole non-negative decimal number (digits only), else -1.
  const auto number = [](const std::string& text) -> long long {
    if (text.empty() || text.size() > 12 || text.find_first_not_of("0123456789") != std::string::npos) return -1;
    return std::stoll(text);
  };
  std::vector<DiagOmitRule> rules;
  for (const std::string& entry : parse_kernel_names(list)) {
    const auto bad = [&] {
      return Error("MOEQ_DIAG_OMIT entry '" + entry + "': expected NAME or NAME@I%N with 0 <= I < N, each name once");
    };
    DiagOmitRule rule;
    const size_t at = entry.find('@');
    rule.name = entry.substr(0, at);
    if (rule.name.empty()) throw bad();
    if (at != std::string::npos) {
      const std::string when = entry.substr(at + 1);
      const size_t percent = when.find('%');
      if (percent == std::string::npos) throw bad();
      rule.residue = number(when.substr(0, percent));
      rule.modulus = number(when.substr(percent + 1));
      if (rule.residue < 0 || rule.modulus < 1 || rule.residue >= rule.modulus) throw bad();
    }
    for (const DiagOmitRule& other : rules)
      if (other.name == rule.name) throw bad();
    rules.push_back(rule);
  }
  return rules;
}

bool env_is_zero(const char* name) {
  const char* value = std::getenv(name);
  return value != nullptr && std::string(value) == "0";
}

long env_integer(const char* name, long min, long max, long fallback) {
  const char* value = std::getenv(name);
  if (value == nullptr) return fallback;
  char* end = nullptr;
  errno = 0;
  const long v = std::strtol(value, &end, 10);
  const bool starts_as_integer = (value[0] >= '0' && value[0] <= '9') || value[0] == '-';  // strtol skips spaces
  if (!starts_as_integer || end == value || *end != '\0' || errno == ERANGE || v < min || v > max)
    throw Error(std::string(name) + " = '" + value + "' is not an integer in [" + std::to_string(min) + ", " +
                std::to_string(max) + "]");
  return v;
}

bool programmatic_launch() {
  static const bool enabled = [] {
    if (env_is_zero("MOEQ_PDL")) return false;
    // NOTE: the kernels are compiled for the device's own arch (jit/compiler.cpp), so on sm_90 every
    // loaded kernel holds the griddepcontrol.wait the attribute relies on. Stream capture keeps the
    // programmatic edges from driver 12.3 (CUDA 12.3 release notes); older drivers launch without.
    int version = 0;
    check(driver().cuDriverGetVersion(&version), "cuDriverGetVersion");
    return current_device_info().cc_major >= 9 && version >= 12030;
  }();
  return enabled;
}

bool programmatic_launch(CUfunction function) {
  if (!programmatic_launch()) return false;
  static const std::vector<std::string> skip = [] {
    const char* value = std::getenv("MOEQ_PDL_SKIP");
    return parse_kernel_names(value == nullptr ? "" : value);
  }();
  if (skip.empty()) return true;
  static std::mutex mutex;
  static std::unordered_map<CUfunction, bool> verdicts;
  const std::lock_guard<std::mutex> lock(mutex);
  if (const auto known = verdicts.find(function); known != verdicts.end()) return known->second;
  const std::string name = function_name(function, "MOEQ_PDL_SKIP");
  const bool dependent = std::find(skip.begin(), skip.end(), name) == skip.end();
  verdicts.emplace(function, dependent);
  return dependent;
}

bool omitted_by_diagnostics(CUfunction function) {
  static const std::vector<DiagOmitRule> rules = [] {
    const char* value = std::getenv("MOEQ_DIAG_OMIT");
    return parse_diag_omit(value == nullptr ? "" : value);
  }();
  if (rules.empty()) return false;
  static std::mutex mutex;
  static std::unordered_map<CUfunction, const DiagOmitRule*> rule_of;
  static std::unordered_map<std::string, long long> launches;
  const std::lock_guard<std::mutex> lock(mutex);
  auto known = rule_of.find(function);
  if (known == rule_of.end()) {
    const std::string name = function_name(function, "MOEQ_DIAG_OMIT");
    const DiagOmitRule* match = nullptr;
    for (const DiagOmitRule& rule : rules)
      if (rule.name == name) match = &rule;
    known = rule_of.emplace(function, match).first;
  }
  if (known->second == nullptr) return false;
  const DiagOmitRule& rule = *known->second;
  const long long count = launches[rule.name]++;
  return count % rule.modulus == rule.residue;
}

DeviceInfo current_device_info() {
  const CUdevice device = ensure_context();
  const Driver& d = driver();
  const auto attribute = [&](int attr, const char* what) {
    int value = 0;
    check(d.cuDeviceGetAttribute(&value, attr, device), what);
    return value;
  };
  DeviceInfo info;
  info.ordinal = selected_device_ordinal();
  char name[256] = {};
  check(d.cuDeviceGetName(name, sizeof(name) - 1, device), "cuDeviceGetName");
  info.name = name;
  info.cc_major = attribute(device_attr::kComputeCapabilityMajor, "compute capability major");
  info.cc_minor = attribute(device_attr::kComputeCapabilityMinor, "compute capability minor");
  info.num_sms = attribute(device_attr::kMultiprocessorCount, "multiprocessor count");
  info.l2_bytes = attribute(device_attr::kL2CacheSize, "L2 cache size");
  info.max_smem_per_block_optin =
      attribute(device_attr::kMaxSharedMemoryPerBlockOptin, "max shared memory per block (optin)");
  info.max_registers_per_sm = attribute(device_attr::kMaxRegistersPerMultiprocessor, "max registers per multiprocessor");
  return info;
}

const DeviceInfo& process_device_info() {
  static const DeviceInfo device = current_device_info();
  return device;
}

// ---- DeviceBuffer ----

DeviceBuffer::DeviceBuffer(size_t num_bytes) : num_bytes_(num_bytes) {
  ensure_context();
  // NOTE: cuMemAlloc rejects 0 bytes; an empty buffer holds the null pointer.
  if (num_bytes > 0) check(driver().cuMemAlloc_v2(&ptr_, num_bytes), "cuMemAlloc");
}

DeviceBuffer::~DeviceBuffer() { release(); }

DeviceBuffer::DeviceBuffer(DeviceBuffer&& other) noexcept
    : ptr_(std::exchange(other.ptr_, 0)), num_bytes_(std::exchange(other.num_bytes_, 0)) {}

DeviceBuffer& DeviceBuffer::operator=(DeviceBuffer&& other) noexcept {
  if (this != &other) {
    release();
    ptr_ = std::exchange(other.ptr_, 0);
    num_bytes_ = std::exchange(other.num_bytes_, 0);
  }
  return *this;
}

void DeviceBuffer::release() noexcept {
  // NOTE: a destructor must not throw; a failed free (context already torn down) is ignored.
  if (ptr_ != 0) loaded_driver().fns.cuMemFree_v2(ptr_);
  ptr_ = 0;
  num_bytes_ = 0;
}

void DeviceBuffer::upload(const void* host, size_t num_bytes) {
  if (num_bytes > num_bytes_) {
    throw Error("DeviceBuffer::upload of " + std::to_string(num_bytes) + " bytes into a buffer of " +
                std::to_string(num_bytes_));
  }
  if (num_bytes > 0) {
    check(driver().cuCtxSynchronize(), "cuCtxSynchronize");  // no queued kernel still reads the old bytes
    check(driver().cuMemcpyHtoD_v2(ptr_, host, num_bytes), "cuMemcpyHtoD");
    // NOTE: from pageable memory cuMemcpyHtoD returns once the bytes are staged, before the DMA
    // lands, and it orders only the legacy stream; moeq's streams are non-blocking, so a kernel
    // launched next on one of them could read the old bytes (seen: `moeq bench` at M = 4096 read
    // half-uploaded routing ids, session 11). Every DeviceBuffer transfer completes before it returns.
    check(driver().cuCtxSynchronize(), "cuCtxSynchronize");
  }
}

void DeviceBuffer::download(void* host, size_t num_bytes) const {
  if (num_bytes > num_bytes_) {
    throw Error("DeviceBuffer::download of " + std::to_string(num_bytes) + " bytes from a buffer of " +
                std::to_string(num_bytes_));
  }
  if (num_bytes > 0) {
    check(driver().cuCtxSynchronize(), "cuCtxSynchronize");  // work of every stream, not just the legacy one
    check(driver().cuMemcpyDtoH_v2(host, ptr_, num_bytes), "cuMemcpyDtoH");
  }
}

void DeviceBuffer::fill_bytes(uint8_t value) {
  if (num_bytes_ > 0) {
    check(driver().cuCtxSynchronize(), "cuCtxSynchronize");
    check(driver().cuMemsetD8_v2(ptr_, value, num_bytes_), "cuMemsetD8");
    check(driver().cuCtxSynchronize(), "cuCtxSynchronize");  // a memset of device memory is asynchronous
  }
}

// ---- Stream, Event ----

Stream::Stream() {
  ensure_context();
  check(driver().cuStreamCreate(&stream_, kStreamNonBlocking), "cuStreamCreate");
}

Stream::~Stream() {
  if (stream_ != nullptr) loaded_driver().fns.cuStreamDestroy_v2(stream_);
}

void Stream::synchronize() const { check(driver().cuStreamSynchronize(stream_), "cuStreamSynchronize"); }

Event::Event(bool timing) {
  ensure_context();
  check(driver().cuEventCreate(&event_, timing ? kEventDefault : kEventDisableTiming), "cuEventCreate");
}

Event::~Event() {
  if (event_ != nullptr) loaded_driver().fns.cuEventDestroy_v2(event_);
}

void Event::record(CUstream stream) { check(driver().cuEventRecord(event_, stream), "cuEventRecord"); }

void Event::synchronize() const { check(driver().cuEventSynchronize(event_), "cuEventSynchronize"); }

float Event::elapsed_ms(const Event& start, const Event& end) {
  float milliseconds = 0.0f;
  check(driver().cuEventElapsedTime(&milliseconds, start.event_, end.event_), "cuEventElapsedTime");
  return milliseconds;
}

}  // namespace moeq::cuda
