// The JIT's content-addressed disk cache, host only: keys, atomic stores under thread and process
// races, corruption handling, clear/info, and the environment knobs.
#include <gtest/gtest.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <functional>
#include <map>
#include <string>
#include <thread>
#include <vector>

#include "common/embedded.hpp"
#include "jit/cache.hpp"

namespace {

namespace fs = std::filesystem;
using moeq::jit::Cache;
using moeq::jit::CacheKeyInputs;
using moeq::jit::cache_key;
using moeq::jit::JitOptions;

CacheKeyInputs base_inputs() {
  CacheKeyInputs inputs;
  inputs.source = "struct TileCfg { static constexpr int kBlockM = 64; };";
  static const std::string headers_hash = moeq::jit::included_headers_hash("#include \"moeq_dev/ptx/cvt.cuh\"\n");
  inputs.headers_hash = headers_hash;
  inputs.nvrtc_version = 13000;
  inputs.options = {"-std=c++17", "--gpu-architecture=sm_90a", "-default-device", "-lineinfo"};
  inputs.arch = "sm_90a";
  return inputs;
}

std::vector<uint8_t> fake_cubin(size_t num_bytes, uint8_t seed) {
  std::vector<uint8_t> bytes(num_bytes);
  for (size_t i = 0; i < num_bytes; ++i) bytes[i] = static_cast<uint8_t>(seed + i * 31);
  return bytes;
}

class JitCache : public ::testing::Test {
 protected:
  void SetUp() override {
    std::string pattern = (fs::temp_directory_path() / "moeq_jit_cache_XXXXXX").string();
    ASSERT_NE(::mkdtemp(pattern.data()), nullptr);
    dir_ = pattern;
  }
  void TearDown() override { fs::remove_all(dir_); }

  std::string dir_;
  const std::string key_ = cache_key(base_inputs());
};

TEST_F(JitCache, KeyIsStableAndChangesWithEachIngredient) {
  EXPECT_EQ(key_.size(), 64u);
  EXPECT_EQ(cache_key(base_inputs()), key_) << "same ingredients, same key";

  std::vector<CacheKeyInputs> variants(8, base_inputs());
  variants[0].source = "struct TileCfg { static constexpr int kBlockM = 128; };";
  variants[1].headers_hash = "0000";
  variants[2].nvrtc_version = 12080;
  variants[3].options.push_back("--ptxas-options=-v");
  std::swap(variants[4].options[2], variants[4].options[3]);  // order is part of the command line
  variants[5].arch = "sm_90";
  variants[6].abi = "0.0.0";
  // Bytes moved from one field into the next must not give the same key.
  variants[7].options = {"-std=c++17--gpu-architecture=sm_90a", "", "-default-device", "-lineinfo"};
  std::vector<std::string> keys = {key_};
  for (const CacheKeyInputs& variant : variants) {
    const std::string key = cache_key(variant);
    for (const std::string& seen : keys) EXPECT_NE(key, seen);
    keys.push_back(key);
  }
}

TEST_F(JitCache, NoPathInTheKey) {
  // The key has no path ingredient at all; the header hash uses paths relative to device/.
  ASSERT_FALSE(moeq::embedded_device_headers().empty());
  bool has_cvt = false;
  for (const moeq::EmbeddedFile& file : moeq::embedded_device_headers()) {
    EXPECT_NE(file.path.front(), '/') << file.path;
    EXPECT_EQ(file.path.find(".."), std::string_view::npos) << file.path;
    has_cvt = has_cvt || file.path == "moeq_dev/ptx/cvt.cuh";
  }
  EXPECT_TRUE(has_cvt);
  EXPECT_EQ(moeq::jit::included_headers_hash("#include \"moeq_dev/ptx/cvt.cuh\"\n").size(), 64u);
  // Two caches in different folders name the same entry by the same key.
  const Cache a(dir_ + "/a");
  const Cache b(dir_ + "/b");
  EXPECT_EQ(fs::path(a.entry_path(key_)).filename(), fs::path(b.entry_path(key_)).filename());
  EXPECT_EQ(key_.find(dir_), std::string::npos);
}

// The headers part of a key covers what a source includes, directly or through other headers, and
// nothing else: an edit to an unrelated header keeps a kernel's CUBIN.
TEST(JitCacheHeaders, IncludedHashFollowsIncludesOnly) {
  using moeq::jit::included_headers_hash;
  const std::string none = included_headers_hash("struct A {};");
  EXPECT_EQ(none.size(), 64u);
  EXPECT_EQ(included_headers_hash("struct B { int x; };"), none) << "text outside includes does not count";
  EXPECT_EQ(included_headers_hash("#include \"moeq_dev/no/such_file.cuh\"\n"), none) << "unknown paths are skipped";
  const std::string cvt = included_headers_hash("#include \"moeq_dev/ptx/cvt.cuh\"\n");
  EXPECT_NE(cvt, none);
  EXPECT_EQ(included_headers_hash("  #  include \"moeq_dev/ptx/cvt.cuh\"\nstruct C {};\n"), cvt);
  EXPECT_EQ(included_headers_hash("// #include \"moeq_dev/ptx/cvt.cuh\"\n"), none) << "a comment is not an include";
  // kernels/routing.cuh includes moe/routing.cuh, which includes ptx/cvt.cuh: naming those too
  // changes nothing, and each level differs from the one below.
  const std::string kernels = included_headers_hash("#include \"moeq_dev/kernels/routing.cuh\"\n");
  const std::string moe = included_headers_hash("#include \"moeq_dev/moe/routing.cuh\"\n");
  EXPECT_NE(kernels, moe);
  EXPECT_NE(moe, cvt);
  EXPECT_EQ(included_headers_hash("#include \"moeq_dev/moe/routing.cuh\"\n#include \"moeq_dev/kernels/routing.cuh\"\n"
                                  "#include \"moeq_dev/ptx/cvt.cuh\"\n"),
            kernels);
}

TEST_F(JitCache, StoreLoadRoundTrip) {
  Cache cache(dir_);
  EXPECT_EQ(cache.find(key_), nullptr);
  const std::vector<uint8_t> cubin = fake_cubin(5000, 7);
  EXPECT_EQ(cache.insert(key_, cubin), cubin);

  const std::string expected_path = dir_ + "/v2/" + key_.substr(0, 2) + "/" + key_ + ".cubin";
  EXPECT_EQ(cache.entry_path(key_), expected_path);
  EXPECT_TRUE(fs::is_regular_file(expected_path));
  EXPECT_EQ(fs::file_size(expected_path), cubin.size() + 48);

  bool from_disk = true;
  ASSERT_NE(cache.find(key_, &from_disk), nullptr);
  EXPECT_FALSE(from_disk) << "second lookup in the same cache comes from memory";

  Cache fresh(dir_);  // another process's view: memory empty, disk warm
  const std::vector<uint8_t>* loaded = fresh.find(key_, &from_disk);
  ASSERT_NE(loaded, nullptr);
  EXPECT_TRUE(from_disk);
  EXPECT_EQ(*loaded, cubin);
  EXPECT_THROW(fresh.entry_path("../../etc/passwd"), std::exception);
}

TEST_F(JitCache, ConcurrentWritersFromEightThreads) {
  const std::vector<uint8_t> cubin = fake_cubin(200000, 3);
  std::vector<int> ok(8, 0);
  std::vector<std::thread> writers;
  for (int t = 0; t < 8; ++t) {
    writers.emplace_back([&, t] {
      Cache cache(dir_);  // each thread its own view, as separate processes would have
      bool all = true;
      for (int i = 0; i < 20; ++i) all = cache.store_to_disk(key_, cubin) && all;
      ok[t] = all;
    });
  }
  for (std::thread& writer : writers) writer.join();
  for (int t = 0; t < 8; ++t) EXPECT_TRUE(ok[t]) << "thread " << t;
  EXPECT_EQ(Cache(dir_).load_from_disk(key_), cubin);
  // No temp files left behind.
  EXPECT_EQ(Cache(dir_).info().num_entries, 1u);
  size_t num_files = 0;
  for (const auto& entry : fs::recursive_directory_iterator(dir_)) num_files += entry.is_regular_file();
  EXPECT_EQ(num_files, 1u);
}

TEST_F(JitCache, ConcurrentWritersFromTwoProcesses) {
  const std::vector<uint8_t> cubin = fake_cubin(300000, 9);
  std::vector<pid_t> children;
  for (int p = 0; p < 2; ++p) {
    const pid_t pid = ::fork();
    ASSERT_GE(pid, 0);
    if (pid == 0) {
      // NOTE: the child leaves with _exit so gtest's state is not torn down twice.
      Cache cache(dir_);
      bool all = true;
      for (int i = 0; i < 30; ++i) all = cache.store_to_disk(key_, cubin) && all;
      all = all && cache.load_from_disk(key_) == cubin;
      ::_exit(all ? 0 : 1);
    }
    children.push_back(pid);
  }
  for (pid_t pid : children) {
    int status = 0;
    ASSERT_EQ(::waitpid(pid, &status, 0), pid);
    EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0) << "child " << pid;
  }
  EXPECT_EQ(Cache(dir_).load_from_disk(key_), cubin);
}

TEST_F(JitCache, CorruptedOrTruncatedFileIsAMissAndIsReplaced) {
  const std::vector<uint8_t> cubin = fake_cubin(4096, 1);
  const std::string path = Cache(dir_).entry_path(key_);
  const auto rewrite = [&](const std::function<void(std::string&)>& damage) {
    ASSERT_TRUE(Cache(dir_).store_to_disk(key_, cubin));
    std::ifstream in(path, std::ios::binary);
    std::string bytes((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
    in.close();
    damage(bytes);
    std::ofstream(path, std::ios::binary | std::ios::trunc) << bytes;
  };
  const std::vector<std::function<void(std::string&)>> damages = {
      [](std::string& b) { b.resize(b.size() / 2); },       // truncated payload
      [](std::string& b) { b.resize(20); },                 // truncated header
      [](std::string& b) { b.clear(); },                    // empty file
      [](std::string& b) { b[b.size() - 1] ^= 0x40; },      // one payload bit flipped
      [](std::string& b) { b[0] = 'X'; },                   // foreign file
      [](std::string& b) { b += "trailing"; },              // padded
  };
  for (size_t i = 0; i < damages.size(); ++i) {
    rewrite(damages[i]);
    Cache cache(dir_);
    EXPECT_EQ(cache.load_from_disk(key_), std::nullopt) << "damage " << i;
    EXPECT_EQ(cache.find(key_), nullptr) << "damage " << i;
    cache.insert(key_, cubin);  // what a compile after the miss does
    EXPECT_EQ(Cache(dir_).load_from_disk(key_), cubin) << "damage " << i << " not replaced";
  }
}

TEST_F(JitCache, InfoAndClear) {
  Cache cache(dir_);
  std::vector<CacheKeyInputs> inputs(3, base_inputs());
  inputs[1].arch = "sm_80";
  inputs[2].arch = "sm_89";
  uint64_t payload_bytes = 0;
  for (size_t i = 0; i < inputs.size(); ++i) {
    cache.insert(cache_key(inputs[i]), fake_cubin(1000 * (i + 1), 0));
    payload_bytes += 1000 * (i + 1);
  }
  std::ofstream(dir_ + "/not_ours.txt") << "kept";  // clear() must only remove its own layout
  const moeq::jit::CacheInfo info = cache.info();
  EXPECT_EQ(info.num_entries, 3u);
  EXPECT_EQ(info.num_bytes, payload_bytes + 3 * 48);
  EXPECT_EQ(info.dir, dir_);

  const std::vector<uint8_t>* held = cache.find(key_);
  ASSERT_NE(held, nullptr);
  const std::vector<uint8_t> before = *held;
  cache.clear();
  EXPECT_EQ(cache.info().num_entries, 0u);
  // The memory tier stays: loaded kernels and earlier lookups keep pointers into it.
  EXPECT_EQ(cache.find(key_), held);
  EXPECT_EQ(*held, before);
  EXPECT_EQ(Cache(dir_, true).find(key_), nullptr) << "a fresh process must miss: the disk copy is gone";
  EXPECT_TRUE(fs::exists(dir_ + "/not_ours.txt"));
}

// A directory that cannot hold entries (here a file) loses only the disk copies, and counts them for `moeq compile`.
TEST_F(JitCache, DiskWriteFailuresAreCounted) {
  const std::string file = dir_ + "/a_file";
  { std::ofstream(file) << "x"; }
  Cache cache(file, true);
  EXPECT_NE(&cache.insert(key_, fake_cubin(100, 3)), nullptr);
  EXPECT_NE(cache.find(key_), nullptr) << "memory tier still works";
  EXPECT_EQ(cache.disk_write_failures(), 1u);
  Cache good(dir_, true);
  good.insert(key_, fake_cubin(100, 3));
  EXPECT_EQ(good.disk_write_failures(), 0u);
}

TEST_F(JitCache, DisabledCacheTouchesNoDisk) {
  Cache cache(dir_, /*disk_enabled=*/false);
  cache.insert(key_, fake_cubin(100, 2));
  EXPECT_NE(cache.find(key_), nullptr) << "memory tier still works";
  EXPECT_FALSE(fs::exists(dir_ + "/v2"));
}

TEST(JitOptionsTest, EnvironmentIsParsed) {
  std::map<std::string, std::string> env;
  const auto lookup = [&](const char* name) -> const char* {
    auto it = env.find(name);
    return it == env.end() ? nullptr : it->second.c_str();
  };
  env["HOME"] = "/home/u";
  EXPECT_EQ(moeq::jit::jit_options_from_env(lookup).cache_dir, "/home/u/.cache/moeq");
  env["XDG_CACHE_HOME"] = "/xdg";
  EXPECT_EQ(moeq::jit::jit_options_from_env(lookup).cache_dir, "/xdg/moeq");
  env["MOEQ_CACHE_DIR"] = "/explicit";
  JitOptions options = moeq::jit::jit_options_from_env(lookup);
  EXPECT_EQ(options.cache_dir, "/explicit");
  EXPECT_FALSE(options.disable_cache);
  EXPECT_FALSE(options.ptxas_verbose);
  EXPECT_TRUE(options.dump_dir.empty());

  env["MOEQ_DISABLE_CACHE"] = "1";
  env["MOEQ_PTXAS_VERBOSE"] = "1";
  env["MOEQ_DUMP_DIR"] = "/dump";
  options = moeq::jit::jit_options_from_env(lookup);
  EXPECT_TRUE(options.disable_cache);
  EXPECT_TRUE(options.ptxas_verbose);
  EXPECT_EQ(options.dump_dir, "/dump");
  env["MOEQ_DISABLE_CACHE"] = "0";
  EXPECT_FALSE(moeq::jit::jit_options_from_env(lookup).disable_cache);
}

TEST(JitOptionsTest, OverrideApiIsHonoured) {
  const JitOptions& original = moeq::jit::jit_options();
  const JitOptions saved = original;
  JitOptions custom = saved;
  custom.cache_dir = "/tmp/moeq-override-test";
  moeq::jit::override_jit_options(custom);
  EXPECT_EQ(moeq::jit::jit_options().cache_dir, "/tmp/moeq-override-test");
  EXPECT_EQ(original.cache_dir, saved.cache_dir) << "earlier references stay valid";
  moeq::jit::override_jit_options(saved);
  EXPECT_EQ(moeq::jit::jit_options().cache_dir, saved.cache_dir);
}

}  // namespace
