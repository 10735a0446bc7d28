#pragma once
// The JIT's knobs (read from the environment once) and its content-addressed CUBIN cache:
// an in-memory map in front of a disk directory shared by every process of the user.
#include <atomic>
#include <cstdint>
#include <functional>
#include <mutex>
#include <optional>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

namespace moeq::jit {

// Every knob of the JIT; docs/env.md lists them with their environment variables.
struct JitOptions {
  std::string cache_dir;       // MOEQ_CACHE_DIR, else $XDG_CACHE_HOME/moeq, else ~/.cache/moeq
  bool disable_cache = false;  // MOEQ_DISABLE_CACHE: no disk reads or writes (memory map only)
  std::string dump_dir;        // MOEQ_DUMP_DIR: write each compile's .cu, .cubin and .log there
  bool ptxas_verbose = false;  // MOEQ_PTXAS_VERBOSE: compile with ptxas -v and print its log
};

// Looks an environment variable up; nullptr when unset. std::getenv by default.
using EnvLookup = std::function<const char*(const char*)>;
JitOptions jit_options_from_env(const EnvLookup& getenv_fn);

// The process's options: read from the environment on the first call only.
// NOTE: the returned reference stays valid for the life of the process, across overrides.
const JitOptions& jit_options();
// Replaces the process's options (tests, or an embedding application at start-up).
void override_jit_options(const JitOptions& options);

// Everything a CUBIN depends on, and nothing else: no paths, no mtimes.
struct CacheKeyInputs {
  std::string_view source;        // the generated translation unit
  std::string_view headers_hash;  // included_headers_hash(source)
  int nvrtc_version = 0;
  std::vector<std::string> options;
  std::string_view arch;          // "sm_90a"
  std::string_view abi = MOEQ_VERSION;
};
// 64 lowercase hex digits (SHA-256 over every ingredient, each tagged and length-prefixed).
std::string cache_key(const CacheKeyInputs& inputs);
// SHA-256 of the embedded device headers `source` reaches through `#include "path"` lines, directly
// or through each other (relative path + contents, in path order): the headers part of a cache key.
// NOTE: every include line counts, whatever #if surrounds it: a superset of what NVRTC reads, so an
// edit to a header a kernel cannot see leaves its CUBIN cached, and no edit it can see does.
std::string included_headers_hash(std::string_view source);

struct CacheInfo {
  size_t num_entries = 0;
  uint64_t num_bytes = 0;  // on disk, headers included
  std::string dir;
};

// Layout: <dir>/v1/<key[0:2]>/<key>.cubin, each file = 48-byte header (magic, payload size,
// SHA-256 of the payload) + the CUBIN. Safe across threads and processes.
class Cache {
 public:
  explicit Cache(std::string dir, bool disk_enabled = true);

  // Memory first, then disk (a valid disk entry is kept in memory). nullptr on a miss.
  // The pointee lives as long as the Cache (until clear()).
  const std::vector<uint8_t>* find(const std::string& key, bool* from_disk = nullptr);
  // Keeps `cubin` in memory and writes it to disk; returns the kept bytes (the first stored
  // ones when two threads race). NOTE: a disk write failure only loses the disk copy (and is
  // counted: disk_write_failures).
  const std::vector<uint8_t>& insert(const std::string& key, std::vector<uint8_t> cubin);

  // The disk tier alone. A missing, short, corrupted or foreign file is a miss.
  std::optional<std::vector<uint8_t>> load_from_disk(const std::string& key) const;
  // Atomic: unique temp file in the entry's folder, fsync, rename(2). Concurrent writers of one
  // key all succeed. Returns false (never throws) when the disk is not writable.
  bool store_to_disk(const std::string& key, const std::vector<uint8_t>& cubin) const;

  std::string entry_path(const std::string& key) const;
  CacheInfo info() const;
  void clear();  // removes <dir>/v1 (never anything else in dir); the in-memory entries stay

  const std::string& dir() const { return dir_; }
  bool disk_enabled() const { return disk_enabled_; }
  // insert()'s disk writes that failed so far (`moeq compile` exists to fill the disk: it fails on them).
  size_t disk_write_failures() const { return disk_write_failures_.load(); }

 private:
  std::string dir_;
  bool disk_enabled_;
  std::atomic<size_t> disk_write_failures_{0};
  mutable std::mutex mutex_;
  std::unordered_map<std::string, std::vector<uint8_t>> memory_;  // NOTE: node-stable values
};

}  // namespace moeq::jit
