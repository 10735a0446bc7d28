#include "jit/cache.hpp"

#include <fcntl.h>
#include <unistd.h>

#include <array>
#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <deque>
#include <filesystem>
#include <fstream>
#include <map>
#include <set>

#include "common/embedded.hpp"
#include "common/sha256.hpp"
#include "moeq/error.hpp"

namespace moeq::jit {
namespace fs = std::filesystem;
namespace {

constexpr char kLayoutVersion[] = "v2";  // bump when the file format or key recipe changes
constexpr std::array<char, 8> kMagic = {'M', 'O', 'E', 'Q', 'C', 'U', 'B', '1'};
// magic (8) + payload size (8, native endian: the cache is per machine) + SHA-256 (32).
constexpr size_t kHeaderBytes = 8 + 8 + 32;

bool is_truthy(const char* value) {
  if (value == nullptr) return false;
  const std::string v = value;
  return !(v.empty() || v == "0" || v == "false" || v == "off" || v == "no");
}

std::string non_empty(const char* value) { return value != nullptr ? value : ""; }

void add_field(Sha256& hasher, std::string_view tag, std::string_view bytes) {
  // Tag and length prefix make the encoding unambiguous: no two ingredient lists collide by
  // shifting bytes from one field into the next.
  hasher.update(tag);
  hasher.update("\0", 1);
  const uint64_t size = bytes.size();
  std::array<uint8_t, 8> size_le;
  for (int i = 0; i < 8; ++i) size_le[i] = static_cast<uint8_t>(size >> (8 * i));
  hasher.update(size_le.data(), size_le.size());
  hasher.update(bytes);
}

bool valid_key(const std::string& key) {
  if (key.size() != 64) return false;
  for (char c : key) {
    if (!((c >= '0' && c <= '9') || (c >= 'a' && c <= 'f'))) return false;
  }
  return true;
}

bool write_all(int fd, const void* data, size_t num_bytes) {
  const auto* bytes = static_cast<const uint8_t*>(data);
  while (num_bytes > 0) {
    const ssize_t written = ::write(fd, bytes, num_bytes);
    if (written < 0 && errno == EINTR) continue;
    if (written <= 0) return false;
    bytes += written;
    num_bytes -= static_cast<size_t>(written);
  }
  return true;
}

}  // namespace

// ---- options ----

JitOptions jit_options_from_env(const EnvLookup& getenv_fn) {
  JitOptions options;
  if (const std::string dir = non_empty(getenv_fn("MOEQ_CACHE_DIR")); !dir.empty()) {
    options.cache_dir = dir;
  } else if (const std::string xdg = non_empty(getenv_fn("XDG_CACHE_HOME")); !xdg.empty()) {
    options.cache_dir = xdg + "/moeq";
  } else if (const std::string home = non_empty(getenv_fn("HOME")); !home.empty()) {
    options.cache_dir = home + "/.cache/moeq";
  } else {
    // NOTE: no home (a bare container user): a per-user folder under /tmp still shares the cache.
    options.cache_dir = "/tmp/moeq-cache-" + std::to_string(::getuid());
  }
  options.disable_cache = is_truthy(getenv_fn("MOEQ_DISABLE_CACHE"));
  options.dump_dir = non_empty(getenv_fn("MOEQ_DUMP_DIR"));
  options.ptxas_verbose = is_truthy(getenv_fn("MOEQ_PTXAS_VERBOSE"));
  return options;
}

namespace {
std::mutex g_options_mutex;
// NOTE: a deque never moves its elements, so references handed out stay valid after overrides.
std::deque<JitOptions> g_options_history;
}  // namespace

const JitOptions& jit_options() {
  std::lock_guard<std::mutex> lock(g_options_mutex);
  if (g_options_history.empty()) {
    g_options_history.push_back(jit_options_from_env([](const char* name) { return std::getenv(name); }));
  }
  return g_options_history.back();
}

void override_jit_options(const JitOptions& options) {
  std::lock_guard<std::mutex> lock(g_options_mutex);
  g_options_history.push_back(options);
}

// ---- keys ----

std::string cache_key(const CacheKeyInputs& inputs) {
  Sha256 hasher;
  add_field(hasher, "source", inputs.source);
  add_field(hasher, "headers", inputs.headers_hash);
  add_field(hasher, "nvrtc", std::to_string(inputs.nvrtc_version));
  add_field(hasher, "num_options", std::to_string(inputs.options.size()));
  for (const std::string& option : inputs.options) add_field(hasher, "option", option);
  add_field(hasher, "arch", inputs.arch);
  add_field(hasher, "abi", inputs.abi);
  return to_hex(hasher.finish());
}

namespace {

// The paths of the `#include "path"` lines of `text` (a '#', optional blanks, "include", blanks,
// then a quoted path), in order of appearance.
std::vector<std::string_view> quoted_includes(std::string_view text) {
  std::vector<std::string_view> paths;
  size_t line_start = 0;
  while (line_start < text.size()) {
    size_t line_end = text.find('\n', line_start);
    if (line_end == std::string_view::npos) line_end = text.size();
    std::string_view line = text.substr(line_start, line_end - line_start);
    line_start = line_end + 1;
    const auto skip_blanks = [&line] {
      while (!line.empty() && (line.front() == ' ' || line.front() == '\t')) line.remove_prefix(1);
    };
    skip_blanks();
    if (line.empty() || line.front() != '#') continue;
    line.remove_prefix(1);
    skip_blanks();
    if (line.substr(0, 7) != "include") continue;
    line.remove_prefix(7);
    skip_blanks();
    if (line.empty() || line.front() != '"') continue;
    line.remove_prefix(1);
    const size_t close = line.find('"');
    if (close != std::string_view::npos) paths.push_back(line.substr(0, close));
  }
  return paths;
}

}  // namespace

std::string included_headers_hash(std::string_view source) {
  // PERF: once per process for each distinct list of direct includes (the generated sources of a
  // kernel family share theirs): a walk over the headers they reach and one SHA-256 of their text.
  static std::mutex mutex;
  static const std::map<std::string_view, const EmbeddedFile*> by_path = [] {
    std::map<std::string_view, const EmbeddedFile*> files;
    for (const EmbeddedFile& file : embedded_device_headers()) files.emplace(file.path, &file);
    return files;
  }();
  static std::map<std::string, std::string> hash_of_includes;  // joined direct includes -> hash
  const std::vector<std::string_view> direct = quoted_includes(source);
  std::string joined;
  for (std::string_view path : direct) joined.append(path).push_back('\n');
  std::lock_guard<std::mutex> lock(mutex);
  if (auto it = hash_of_includes.find(joined); it != hash_of_includes.end()) return it->second;

  std::set<std::string_view> reached;
  std::vector<std::string_view> pending(direct.begin(), direct.end());
  while (!pending.empty()) {
    const std::string_view path = pending.back();
    pending.pop_back();
    const auto file = by_path.find(path);
    if (file == by_path.end() || !reached.insert(file->first).second) continue;
    for (std::string_view next : quoted_includes(file->second->data)) pending.push_back(next);
  }
  Sha256 hasher;
  for (std::string_view path : reached) {
    add_field(hasher, "path", path);  // relative ("moeq_dev/ptx/cvt.cuh"), never absolute
    add_field(hasher, "data", by_path.at(path)->data);
  }
  const std::string hash = to_hex(hasher.finish());
  hash_of_includes.emplace(joined, hash);
  return hash;
}

// ---- Cache ----

Cache::Cache(std::string dir, bool disk_enabled) : dir_(std::move(dir)), disk_enabled_(disk_enabled) {}

std::string Cache::entry_path(const std::string& key) const {
  if (!valid_key(key)) throw Error("cache key '" + key + "' is not 64 lowercase hex digits");
  return dir_ + "/" + kLayoutVersion + "/" + key.substr(0, 2) + "/" + key + ".cubin";
}

const std::vector<uint8_t>* Cache::find(const std::string& key, bool* from_disk) {
  if (from_disk != nullptr) *from_disk = false;
  {
    std::lock_guard<std::mutex> lock(mutex_);
    if (auto it = memory_.find(key); it != memory_.end()) return &it->second;
  }
  if (!disk_enabled_) return nullptr;
  std::optional<std::vector<uint8_t>> loaded = load_from_disk(key);  // no lock held during I/O
  if (!loaded) return nullptr;
  if (from_disk != nullptr) *from_disk = true;
  std::lock_guard<std::mutex> lock(mutex_);
  return &memory_.try_emplace(key, std::move(*loaded)).first->second;
}

const std::vector<uint8_t>& Cache::insert(const std::string& key, std::vector<uint8_t> cubin) {
  if (disk_enabled_ && !store_to_disk(key, cubin)) ++disk_write_failures_;
  std::lock_guard<std::mutex> lock(mutex_);
  return memory_.try_emplace(key, std::move(cubin)).first->second;
}

std::optional<std::vector<uint8_t>> Cache::load_from_disk(const std::string& key) const {
  std::ifstream file(entry_path(key), std::ios::binary);
  if (!file) return std::nullopt;
  std::vector<uint8_t> bytes((std::istreambuf_iterator<char>(file)), std::istreambuf_iterator<char>());
  if (bytes.size() < kHeaderBytes || std::memcmp(bytes.data(), kMagic.data(), kMagic.size()) != 0) {
    return std::nullopt;
  }
  uint64_t payload_bytes = 0;
  std::memcpy(&payload_bytes, bytes.data() + 8, sizeof(payload_bytes));
  if (payload_bytes != bytes.size() - kHeaderBytes) return std::nullopt;  // truncated or padded
  const Sha256::Digest digest = sha256(bytes.data() + kHeaderBytes, payload_bytes);
  if (std::memcmp(digest.data(), bytes.data() + 16, digest.size()) != 0) return std::nullopt;
  return std::vector<uint8_t>(bytes.begin() + kHeaderBytes, bytes.end());
}

bool Cache::store_to_disk(const std::string& key, const std::vector<uint8_t>& cubin) const {
  const fs::path final_path = entry_path(key);
  std::error_code ec;
  fs::create_directories(final_path.parent_path(), ec);
  if (ec) return false;

  // NOTE: the temp file lives in the destination folder so rename(2) never crosses filesystems,
  // and mkstemp makes its name unique across threads and processes.
  std::string temp_path = final_path.string() + ".tmp.XXXXXX";
  const int fd = ::mkstemp(temp_path.data());
  if (fd < 0) return false;

  std::array<uint8_t, kHeaderBytes> header{};
  std::memcpy(header.data(), kMagic.data(), kMagic.size());
  const uint64_t payload_bytes = cubin.size();
  std::memcpy(header.data() + 8, &payload_bytes, sizeof(payload_bytes));
  const Sha256::Digest digest = sha256(cubin.data(), cubin.size());
  std::memcpy(header.data() + 16, digest.data(), digest.size());

  bool ok = write_all(fd, header.data(), header.size()) && write_all(fd, cubin.data(), cubin.size());
  ok = ok && ::fsync(fd) == 0;  // the bytes reach the disk before the name points at them
  ok = (::close(fd) == 0) && ok;
  // NOTE: rename(2) replaces the destination atomically: readers see the old complete file or
  // the new one, never a partial one. Racing writers of one key write identical bytes, so the
  // loser being replaced (or replacing) is a success; a corrupted entry is replaced the same way.
  ok = ok && ::rename(temp_path.c_str(), final_path.c_str()) == 0;
  if (!ok) ::unlink(temp_path.c_str());
  return ok;
}

CacheInfo Cache::info() const {
  CacheInfo info;
  info.dir = dir_;
  std::error_code ec;
  const fs::path root = fs::path(dir_) / kLayoutVersion;
  if (!fs::is_directory(root, ec)) return info;
  for (auto it = fs::recursive_directory_iterator(root, ec); !ec && it != fs::recursive_directory_iterator();
       it.increment(ec)) {
    if (it->is_regular_file(ec) && it->path().extension() == ".cubin") {
      ++info.num_entries;
      info.num_bytes += it->file_size(ec);
    }
  }
  return info;
}

void Cache::clear() {
  std::error_code ec;
  fs::remove_all(fs::path(dir_) / kLayoutVersion, ec);
  // NOTE: the in-memory cubins stay: lookups and loaded kernels hold pointers into them for the
  // life of the process.
}

}  // namespace moeq::jit
