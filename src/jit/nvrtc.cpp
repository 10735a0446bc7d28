#include "jit/nvrtc.hpp"

#include <dlfcn.h>

#include <chrono>
#include <cstddef>
#include <initializer_list>
#include <type_traits>

#include "common/embedded.hpp"
#include "moeq/error.hpp"

namespace moeq::jit {
namespace {

using nvrtcResult = int;
using nvrtcProgram = struct _nvrtcProgram*;
constexpr nvrtcResult kNvrtcSuccess = 0;  // NVRTC_SUCCESS

struct Nvrtc {
  const char* (*nvrtcGetErrorString)(nvrtcResult result);
  nvrtcResult (*nvrtcVersion)(int* major, int* minor);
  nvrtcResult (*nvrtcCreateProgram)(nvrtcProgram* program, const char* source, const char* name,
                                    int num_headers, const char* const* headers,
                                    const char* const* include_names);
  nvrtcResult (*nvrtcDestroyProgram)(nvrtcProgram* program);
  nvrtcResult (*nvrtcCompileProgram)(nvrtcProgram program, int num_options, const char* const* options);
  nvrtcResult (*nvrtcGetCUBINSize)(nvrtcProgram program, size_t* num_bytes);
  nvrtcResult (*nvrtcGetCUBIN)(nvrtcProgram program, char* cubin);
  nvrtcResult (*nvrtcGetProgramLogSize)(nvrtcProgram program, size_t* num_bytes);
  nvrtcResult (*nvrtcGetProgramLog)(nvrtcProgram program, char* log);
};

struct LoadedNvrtc {
  Nvrtc fns{};
  bool ok = false;
  int version = 0;
  std::string why;
};

// NOTE: newest first; the sonames a toolkit or the nvidia-cuda-nvrtc wheel installs, then the
// toolkit's default location for processes whose loader path does not include it.
constexpr const char* kLibraryCandidates[] = {
    "libnvrtc.so.13", "libnvrtc.so.12", "libnvrtc.so",
    "/usr/local/cuda/lib64/libnvrtc.so.13", "/usr/local/cuda/lib64/libnvrtc.so.12",
    "/usr/local/cuda/lib64/libnvrtc.so"};

LoadedNvrtc load_nvrtc() {
  LoadedNvrtc loaded;
  void* library = nullptr;
  std::string tried;
  for (const char* candidate : kLibraryCandidates) {
    library = dlopen(candidate, RTLD_NOW | RTLD_LOCAL);  // NOTE: never closed; process lifetime
    if (library != nullptr) break;
    tried += tried.empty() ? candidate : std::string(", ") + candidate;
  }
  if (library == nullptr) {
    loaded.why = "cannot load NVRTC (tried " + tried + "): no CUDA toolkit on the loader path";
    return loaded;
  }
  std::string missing;
  const auto resolve = [&](auto& slot, const char* name) {
    if (void* symbol = dlsym(library, name)) {
      slot = reinterpret_cast<std::remove_reference_t<decltype(slot)>>(symbol);
    } else {
      missing += missing.empty() ? name : std::string(", ") + name;
    }
  };
  Nvrtc& n = loaded.fns;
  resolve(n.nvrtcGetErrorString, "nvrtcGetErrorString");
  resolve(n.nvrtcVersion, "nvrtcVersion");
  resolve(n.nvrtcCreateProgram, "nvrtcCreateProgram");
  resolve(n.nvrtcDestroyProgram, "nvrtcDestroyProgram");
  resolve(n.nvrtcCompileProgram, "nvrtcCompileProgram");
  resolve(n.nvrtcGetCUBINSize, "nvrtcGetCUBINSize");
  resolve(n.nvrtcGetCUBIN, "nvrtcGetCUBIN");
  resolve(n.nvrtcGetProgramLogSize, "nvrtcGetProgramLogSize");
  resolve(n.nvrtcGetProgramLog, "nvrtcGetProgramLog");
  if (!missing.empty()) {
    loaded.why = "the NVRTC library lacks " + missing;
    return loaded;
  }
  int major = 0;
  int minor = 0;
  if (n.nvrtcVersion(&major, &minor) != kNvrtcSuccess) {
    loaded.why = "nvrtcVersion failed";
    return loaded;
  }
  loaded.version = major * 1000 + minor * 10;
  loaded.ok = true;
  return loaded;
}

const LoadedNvrtc& loaded_nvrtc() {
  static const LoadedNvrtc loaded = load_nvrtc();  // NOTE: thread-safe (magic statics)
  return loaded;
}

const Nvrtc& nvrtc() {
  const LoadedNvrtc& loaded = loaded_nvrtc();
  if (!loaded.ok) throw Error("NVRTC unavailable: " + loaded.why);
  return loaded.fns;
}

// The embedded device headers as NUL-terminated strings, in the form nvrtcCreateProgram takes.
struct HeaderTable {
  std::vector<std::string> names;
  std::vector<std::string> contents;
  std::vector<const char*> name_ptrs;
  std::vector<const char*> content_ptrs;
};

const HeaderTable& device_header_table() {
  static const HeaderTable table = [] {
    HeaderTable t;
    for (const EmbeddedFile& file : embedded_device_headers()) {
      t.names.emplace_back(file.path);
      t.contents.emplace_back(file.data);
    }
    for (size_t i = 0; i < t.names.size(); ++i) {
      t.name_ptrs.push_back(t.names[i].c_str());
      t.content_ptrs.push_back(t.contents[i].c_str());
    }
    return t;
  }();
  return table;
}

std::string joined(const std::vector<std::string>& options) {
  std::string out;
  for (const std::string& option : options) out += (out.empty() ? "" : " ") + option;
  return out;
}

// Destroys the program on every exit path.
struct ProgramGuard {
  const Nvrtc& fns;
  nvrtcProgram program = nullptr;
  ~ProgramGuard() {
    if (program != nullptr) fns.nvrtcDestroyProgram(&program);
  }
};

}  // namespace

bool nvrtc_available(std::string* why) {
  const LoadedNvrtc& loaded = loaded_nvrtc();
  if (!loaded.ok && why != nullptr) *why = loaded.why;
  return loaded.ok;
}

int nvrtc_version() {
  nvrtc();  // throws with the reason when unavailable
  return loaded_nvrtc().version;
}

std::string arch_name(int sm, bool arch_specific) {
  return "sm_" + std::to_string(sm) + (arch_specific ? "a" : "");
}

std::vector<std::string> nvrtc_options(int sm, bool arch_specific,
                                       const std::vector<std::string>& extra_options) {
  std::vector<std::string> options = {
      "-std=c++17",
      "--gpu-architecture=" + arch_name(sm, arch_specific),
      "-default-device",  // NOTE: helpers need no __device__ on every function
      "-lineinfo",        // source lines in profiles and sanitizer reports; no effect on SASS
  };
  options.insert(options.end(), extra_options.begin(), extra_options.end());
  return options;
}

CompileResult compile_to_cubin(const std::string& source, const std::string& name, int sm,
                               bool arch_specific, const std::vector<std::string>& extra_options) {
  const Nvrtc& fns = nvrtc();
  const HeaderTable& headers = device_header_table();
  const std::vector<std::string> options = nvrtc_options(sm, arch_specific, extra_options);
  std::vector<const char*> option_ptrs;
  for (const std::string& option : options) option_ptrs.push_back(option.c_str());

  const auto fail = [&](const std::string& what, nvrtcResult result, const std::string& log) {
    throw Error("NVRTC " + what + " of kernel '" + name + "' for " + arch_name(sm, arch_specific) +
                " failed: " + fns.nvrtcGetErrorString(result) + "\noptions: " + joined(options) +
                "\nconfiguration (generated source):\n" + source + "\nlog:\n" + log);
  };

  const auto start = std::chrono::steady_clock::now();
  ProgramGuard guard{fns};
  const std::string file_name = name + ".cu";
  if (const nvrtcResult result = fns.nvrtcCreateProgram(
          &guard.program, source.c_str(), file_name.c_str(), static_cast<int>(headers.names.size()),
          headers.content_ptrs.data(), headers.name_ptrs.data());
      result != kNvrtcSuccess) {
    fail("program creation", result, "");
  }
  const nvrtcResult compiled =
      fns.nvrtcCompileProgram(guard.program, static_cast<int>(option_ptrs.size()), option_ptrs.data());

  CompileResult out;
  size_t log_bytes = 0;
  if (fns.nvrtcGetProgramLogSize(guard.program, &log_bytes) == kNvrtcSuccess && log_bytes > 1) {
    out.log.resize(log_bytes);
    fns.nvrtcGetProgramLog(guard.program, out.log.data());
    out.log.resize(log_bytes - 1);  // drop the terminating NUL
  }
  if (compiled != kNvrtcSuccess) fail("compilation", compiled, out.log);

  size_t cubin_bytes = 0;
  if (const nvrtcResult result = fns.nvrtcGetCUBINSize(guard.program, &cubin_bytes);
      result != kNvrtcSuccess || cubin_bytes == 0) {
    fail("CUBIN size query", result, out.log);
  }
  out.cubin.resize(cubin_bytes);
  if (const nvrtcResult result =
          fns.nvrtcGetCUBIN(guard.program, reinterpret_cast<char*>(out.cubin.data()));
      result != kNvrtcSuccess) {
    fail("CUBIN retrieval", result, out.log);
  }
  out.compile_ms =
      std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start).count();
  return out;
}

}  // namespace moeq::jit
