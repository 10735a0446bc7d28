// NVRTC compiles against the embedded device headers for every supported arch, with no GPU;
// failures carry the log; the KernelCache serves the second request from memory or disk.
#include <gtest/gtest.h>
#include <unistd.h>

#include <cstdio>
#include <filesystem>
#include <string>
#include <vector>

#include "jit/compiler.hpp"
#include "jit/nvrtc.hpp"
#include "moeq/error.hpp"

namespace {

namespace fs = std::filesystem;
using moeq::jit::Arch;
using moeq::jit::CubinOrigin;
using moeq::jit::KernelCache;
using moeq::jit::KernelSpec;

#define SKIP_WITHOUT_NVRTC()                                                   \
  do {                                                                         \
    std::string why;                                                           \
    if (!moeq::jit::nvrtc_available(&why)) {                                   \
      GTEST_SKIP() << "NVRTC not available: " << why;                          \
    }                                                                          \
  } while (0)

// A kernel that needs an embedded header: `#include "moeq_dev/..."` has no file on disk.
// It uses all four conversions, so each wrapper's PTX is assembled for every arch.
KernelSpec convert_spec(const std::string& entry) {
  return KernelSpec{entry, R"(#include "moeq_dev/ptx/cvt.cuh"
struct ConvertCfg { static constexpr int kThreads = 256; };
extern "C" __global__ void __launch_bounds__(ConvertCfg::kThreads)
)" + entry + R"((const float* in, unsigned short* bf16_out, unsigned short* f16_out, float* decoded, int n) {
  const int i = blockIdx.x * ConvertCfg::kThreads + threadIdx.x;
  if (i >= n) return;
  bf16_out[i] = moeq_dev::f32_to_bf16_rn(in[i]);
  f16_out[i] = moeq_dev::f32_to_f16_rn(in[i]);
  decoded[i] = moeq_dev::bf16_to_f32(bf16_out[i]) + moeq_dev::f16_to_f32(f16_out[i]);
}
)"};
}

bool is_elf(const std::vector<uint8_t>& bytes) {
  return bytes.size() > 4 && bytes[0] == 0x7f && bytes[1] == 'E' && bytes[2] == 'L' && bytes[3] == 'F';
}

class TempDir {
 public:
  TempDir() {
    std::string pattern = (fs::temp_directory_path() / "moeq_jit_test_XXXXXX").string();
    if (::mkdtemp(pattern.data()) != nullptr) path_ = pattern;
  }
  ~TempDir() { fs::remove_all(path_); }
  const std::string& path() const { return path_; }

 private:
  std::string path_;
};

moeq::jit::JitOptions options_in(const std::string& dir) {
  moeq::jit::JitOptions options;
  options.cache_dir = dir;
  return options;
}

TEST(Nvrtc, VersionIsReported) {
  SKIP_WITHOUT_NVRTC();
  const int version = moeq::jit::nvrtc_version();
  EXPECT_GE(version, 12000);
  std::printf("NVRTC %d.%d\n", version / 1000, (version % 1000) / 10);
}

TEST(Nvrtc, CompilesEmbeddedHeaderForEachArch) {
  SKIP_WITHOUT_NVRTC();
  const KernelSpec spec = convert_spec("moeq_test_convert");
  for (const Arch arch : {Arch{80, false}, Arch{89, false}, Arch{90, true}}) {
    const moeq::jit::CompileResult result =
        moeq::jit::compile_to_cubin(spec.source, spec.entry, arch.sm, arch.arch_specific, {});
    EXPECT_TRUE(is_elf(result.cubin)) << to_string(arch);
    EXPECT_GT(result.compile_ms, 0.0);
    std::printf("%s: %zu-byte CUBIN in %.1f ms\n", to_string(arch).c_str(), result.cubin.size(),
                result.compile_ms);
  }
}

TEST(Nvrtc, SyntaxErrorCarriesNameOptionsAndLog) {
  SKIP_WITHOUT_NVRTC();
  const std::string source = "#include \"moeq_dev/ptx/cvt.cuh\"\n"
                             "extern \"C\" __global__ void broken(float* out) {\n"
                             "  out[0] = undeclared_name;\n"
                             "}\n";
  try {
    moeq::jit::compile_to_cubin(source, "moeq_broken_kernel", 90, true, {});
    FAIL() << "a syntax error compiled";
  } catch (const moeq::Error& error) {
    const std::string message = error.what();
    EXPECT_NE(message.find("moeq_broken_kernel"), std::string::npos) << message;
    EXPECT_NE(message.find("--gpu-architecture=sm_90a"), std::string::npos) << message;
    // NVRTC's own log line: file(line): error: ... naming the identifier.
    EXPECT_NE(message.find("moeq_broken_kernel.cu(3): error"), std::string::npos) << message;
    EXPECT_NE(message.find("undeclared_name"), std::string::npos) << message;
  }
}

TEST(Nvrtc, MissingHeaderIsAnError) {
  SKIP_WITHOUT_NVRTC();
  EXPECT_THROW(moeq::jit::compile_to_cubin("#include \"moeq_dev/no_such.cuh\"\n", "moeq_missing", 80,
                                           false, {}),
               moeq::Error);
}

TEST(Nvrtc, SecondRequestIsACacheHit) {
  SKIP_WITHOUT_NVRTC();
  TempDir dir;
  const KernelSpec spec = convert_spec("moeq_test_cache_hit");
  const Arch arch{90, true};

  KernelCache cold(options_in(dir.path()));
  const moeq::jit::CubinLookup first = cold.lookup(spec, arch);
  EXPECT_EQ(first.origin, CubinOrigin::kCompiled);
  EXPECT_TRUE(is_elf(*first.cubin));
  const moeq::jit::CubinLookup second = cold.lookup(spec, arch);
  EXPECT_EQ(second.origin, CubinOrigin::kMemory);
  EXPECT_EQ(second.cubin, first.cubin) << "the same bytes, not a copy";
  EXPECT_TRUE(fs::exists(cold.cache().entry_path(first.key)));

  KernelCache warm(options_in(dir.path()));  // a new process's view of the same disk cache
  const moeq::jit::CubinLookup from_disk = warm.lookup(spec, arch);
  EXPECT_EQ(from_disk.origin, CubinOrigin::kDisk);
  EXPECT_EQ(*from_disk.cubin, *first.cubin);
  std::printf("cold compile %.1f ms, warm disk load %.3f ms, memory hit %.3f ms\n", first.compile_ms,
              from_disk.lookup_ms, second.lookup_ms);

  // Another arch is another entry; another folder gives the same key (no path in the key).
  EXPECT_NE(cold.lookup(spec, Arch{80, false}).key, first.key);
  TempDir other;
  KernelCache elsewhere(options_in(other.path()));
  EXPECT_EQ(elsewhere.lookup(spec, arch).key, first.key);
}

TEST(Nvrtc, LookupAllCompilesEachSourceOnceInOrderAndReportsTheFirstFailure) {
  SKIP_WITHOUT_NVRTC();
  TempDir dir;
  const Arch arch{80, false};
  std::vector<KernelSpec> specs = {convert_spec("moeq_test_all_a"), convert_spec("moeq_test_all_b"),
                                   convert_spec("moeq_test_all_a"), convert_spec("moeq_test_all_c")};
  {
    KernelCache cache(options_in(dir.path()));
    const std::vector<moeq::jit::CubinLookup> results = cache.lookup_all(specs, arch, 3);
    ASSERT_EQ(results.size(), specs.size());
    EXPECT_EQ(results[0].origin, CubinOrigin::kCompiled);
    EXPECT_EQ(results[1].origin, CubinOrigin::kCompiled);
    EXPECT_EQ(results[2].origin, CubinOrigin::kMemory) << "a repeated source is not compiled twice";
    EXPECT_EQ(results[2].cubin, results[0].cubin);
    EXPECT_EQ(results[3].origin, CubinOrigin::kCompiled);
    for (size_t i = 0; i < specs.size(); ++i) {
      EXPECT_EQ(results[i].key, cache.lookup(specs[i], arch).key) << "result " << i << " is spec " << i << "'s";
      EXPECT_TRUE(is_elf(*results[i].cubin));
    }
    // The same bytes as one compile at a time, in a cache of its own.
    TempDir serial_dir;
    KernelCache serial(options_in(serial_dir.path()));
    EXPECT_EQ(*serial.lookup(specs[3], arch).cubin, *results[3].cubin);
  }

  // Two broken specs among good ones: the earlier one's error, and the good ones are still stored.
  specs = {convert_spec("moeq_test_all_d"), KernelSpec{"moeq_broken_first", "this is not CUDA;\n"},
           convert_spec("moeq_test_all_e"), KernelSpec{"moeq_broken_second", "neither is this;\n"}};
  KernelCache cache(options_in(dir.path()));
  try {
    cache.lookup_all(specs, arch, 4);
    FAIL() << "no error";
  } catch (const moeq::Error& e) {
    EXPECT_NE(std::string(e.what()).find("moeq_broken_first"), std::string::npos) << e.what();
  }
  EXPECT_EQ(cache.lookup(specs[2], arch).origin, CubinOrigin::kMemory);
  EXPECT_EQ(cache.lookup(specs[0], arch).origin, CubinOrigin::kMemory);
}

TEST(Nvrtc, DisabledCacheWritesNothing) {
  SKIP_WITHOUT_NVRTC();
  TempDir dir;
  moeq::jit::JitOptions options = options_in(dir.path());
  options.disable_cache = true;
  KernelCache cache(options);
  EXPECT_EQ(cache.lookup(convert_spec("moeq_test_no_disk"), Arch{80, false}).origin, CubinOrigin::kCompiled);
  EXPECT_EQ(cache.cache().info().num_entries, 0u);
}

TEST(Nvrtc, DumpDirAndPtxasVerbose) {
  SKIP_WITHOUT_NVRTC();
  TempDir dir;
  moeq::jit::JitOptions options = options_in(dir.path() + "/cache");
  options.dump_dir = dir.path() + "/dump";
  options.ptxas_verbose = true;
  KernelCache cache(options);
  const moeq::jit::CubinLookup result = cache.lookup(convert_spec("moeq_test_dump"), Arch{90, true});
  const std::string stem = options.dump_dir + "/moeq_test_dump." + result.key.substr(0, 16);
  for (const char* ext : {".cu", ".cubin", ".log"}) EXPECT_TRUE(fs::exists(stem + ext)) << stem << ext;
  EXPECT_GT(fs::file_size(stem + ".log"), 0u) << "ptxas -v writes its resource usage to the log";
}

}  // namespace
