// safetensors parsing, validation and serialization, plus the file read / atomic write.
#include "io/safetensors.hpp"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <array>
#include <atomic>
#include <cerrno>
#include <limits>
#include <system_error>
#include <utility>

#include <nlohmann/json.hpp>

#include "common/json_text.hpp"
#include "moeq/error.hpp"

namespace moeq::io {
namespace {

using nlohmann::json;

constexpr uint64_t kMaxHeaderBytes = 100'000'000;
constexpr std::string_view kMetadataKey = "__metadata__";

constexpr std::array<std::pair<DType, std::string_view>, 8> kDTypeNames{{
    {DType::bf16, "BF16"}, {DType::f16, "F16"}, {DType::f32, "F32"}, {DType::e4m3, "F8_E4M3"},
    {DType::e5m2, "F8_E5M2"}, {DType::u8, "U8"}, {DType::i32, "I32"}, {DType::i64, "I64"}}};

[[noreturn]] void fail(std::string_view origin, const std::string& message) {
  throw Error(std::string(origin) + ": " + message);
}

std::string errno_text() { return std::generic_category().message(errno); }

std::string single_quoted(std::string_view name) { return "'" + std::string(name) + "'"; }

std::string format_shape(const std::vector<int64_t>& shape) {
  std::string out = "[";
  for (size_t i = 0; i < shape.size(); ++i) out += (i ? ", " : "") + std::to_string(shape[i]);
  return out + "]";
}

std::string format_range(int64_t begin, int64_t end) {
  return "[" + std::to_string(begin) + ", " + std::to_string(end) + "]";
}

// Offending JSON values are echoed into messages; a corrupt header can hold huge or deeply nested ones.
std::string show(const json& value) { return json_text(value); }

// Bytes that `shape` of `dtype` occupies, or nullopt when a dim is negative or it overflows.
std::optional<int64_t> byte_count(DType dtype, const std::vector<int64_t>& shape) {
  constexpr int64_t kMaxElements = std::numeric_limits<int64_t>::max() / 64;
  int64_t elements = 1;
  for (int64_t dim : shape) {
    if (dim < 0) return std::nullopt;
    if (dim != 0 && elements > kMaxElements / dim) return std::nullopt;
    elements *= dim;
  }
  return dtype_bytes(dtype, elements);
}

std::optional<int64_t> as_int64(const json& value) {
  if (value.is_number_unsigned()) {
    uint64_t u = value.get<uint64_t>();
    if (u > static_cast<uint64_t>(std::numeric_limits<int64_t>::max())) return std::nullopt;
    return static_cast<int64_t>(u);
  }
  if (value.is_number_integer()) return value.get<int64_t>();
  return std::nullopt;
}

json parse_header_json(const uint8_t* text, size_t size, std::string_view origin) {
  json header;
  try {
    header = json::parse(text, text + size);
  } catch (const json::exception& e) {
    fail(origin, std::string("header is not valid JSON (") + e.what() + ")");
  }
  // NOTE: nlohmann keeps one value of a repeated key; a tensor named twice is an error, not the last one.
  bool top_level = false;
  if (const auto key = first_duplicate_key(text, text + size, &top_level)) {
    if (top_level) fail(origin, "tensor " + single_quoted(*key) + " appears twice in the header");
    fail(origin, "header key " + single_quoted(*key) + " appears twice in one object");
  }
  if (!header.is_object()) fail(origin, "header is " + show(header) + ", not a JSON object");
  return header;
}

std::map<std::string, std::string> parse_metadata(const json& value, std::string_view origin) {
  if (!value.is_object()) fail(origin, "__metadata__ is " + show(value) + ", not an object of strings");
  std::map<std::string, std::string> metadata;
  for (const auto& [key, item] : value.items()) {
    if (!item.is_string())
      fail(origin, "__metadata__ value " + single_quoted(key) + " is " + show(item) + ", not a string");
    metadata[key] = item.get<std::string>();
  }
  return metadata;
}

struct TensorEntry {
  std::string name;
  DType dtype = DType::none;
  std::vector<int64_t> shape;
  int64_t begin = 0;
  int64_t end = 0;
};

class EntryParser {
 public:
  EntryParser(std::string_view origin, const std::string& name, int64_t data_size)
      : origin_(origin), name_(name), data_size_(data_size) {}

  TensorEntry parse(const json& entry) const {
    if (!entry.is_object()) error("entry is " + show(entry) + ", not an object");
    TensorEntry out;
    out.name = name_;
    out.dtype = parse_dtype(field(entry, "dtype"));
    out.shape = parse_shape(field(entry, "shape"));
    std::tie(out.begin, out.end) = parse_offsets(field(entry, "data_offsets"));
    check_size(out);
    return out;
  }

 private:
  [[noreturn]] void error(const std::string& message) const {
    fail(origin_, "tensor " + single_quoted(name_) + " " + message);
  }

  const json& field(const json& entry, const char* key) const {
    auto it = entry.find(key);
    if (it == entry.end()) error(std::string("has no \"") + key + "\"");
    return *it;
  }

  DType parse_dtype(const json& value) const {
    if (!value.is_string()) error("dtype is " + show(value) + ", not a string");
    const auto& name = value.get_ref<const std::string&>();
    auto dtype = parse_safetensors_dtype(name);
    if (!dtype) error("dtype \"" + name + "\" is not one moeq reads");
    return *dtype;
  }

  std::vector<int64_t> parse_shape(const json& value) const {
    if (!value.is_array()) error("shape is " + show(value) + ", not an array of integers");
    std::vector<int64_t> shape;
    for (const json& dim : value) {
      auto n = as_int64(dim);
      if (!n) error("shape " + show(value) + " holds " + show(dim) + ", not an integer");
      shape.push_back(*n);
    }
    for (int64_t dim : shape)
      if (dim < 0) error("shape " + format_shape(shape) + " has negative dimension " + std::to_string(dim));
    return shape;
  }

  std::pair<int64_t, int64_t> parse_offsets(const json& value) const {
    std::optional<int64_t> begin, end;
    if (value.is_array() && value.size() == 2) {
      begin = as_int64(value[0]);
      end = as_int64(value[1]);
    }
    if (!begin || !end || *begin < 0 || *end < 0)
      error("data_offsets " + show(value) + " are not two non-negative integers");
    if (*begin > *end) error("data_offsets " + format_range(*begin, *end) + " begin after their end");
    if (*end > data_size_)
      error("data_offsets " + format_range(*begin, *end) + " end beyond the " + std::to_string(data_size_) +
            "-byte data section (truncated file?)");
    return {*begin, *end};
  }

  void check_size(const TensorEntry& entry) const {
    std::string described = "shape " + format_shape(entry.shape) + " of " +
                            std::string(safetensors_dtype_name(entry.dtype));
    auto needed = byte_count(entry.dtype, entry.shape);
    if (!needed) error(described + " is too large");
    int64_t held = entry.end - entry.begin;
    if (held != *needed)
      error("data_offsets " + format_range(entry.begin, entry.end) + " hold " + std::to_string(held) +
            " bytes but " + described + " needs " + std::to_string(*needed));
  }

  std::string_view origin_;
  const std::string& name_;
  int64_t data_size_;
};

// Expects `entries` sorted by (begin, end). Empty tensors may sit at any boundary.
void check_no_overlap(const std::vector<TensorEntry>& entries, std::string_view origin) {
  const TensorEntry* furthest = nullptr;
  for (const TensorEntry& entry : entries) {
    if (furthest && entry.begin < furthest->end)
      fail(origin, "tensors " + single_quoted(furthest->name) + " " + format_range(furthest->begin, furthest->end) +
                       " and " + single_quoted(entry.name) + " " + format_range(entry.begin, entry.end) + " overlap");
    if (!furthest || entry.end > furthest->end) furthest = &entry;
  }
}

uint64_t read_u64_le(const uint8_t* bytes) {
  uint64_t value = 0;
  for (int i = 7; i >= 0; --i) value = (value << 8) | bytes[i];
  return value;
}

void append_u64_le(std::vector<uint8_t>& out, uint64_t value) {
  for (int i = 0; i < 8; ++i) out.push_back(static_cast<uint8_t>(value >> (8 * i)));
}

void check_writable(const Tensor& t, std::string_view origin) {
  auto fail_tensor = [&](const std::string& message) { fail(origin, "tensor " + single_quoted(t.name) + " " + message); };
  if (t.name == kMetadataKey) fail_tensor("uses the reserved name");
  std::string_view dtype_name = safetensors_dtype_name(t.dtype);
  if (dtype_name.empty()) fail_tensor("has dtype " + std::string(to_string(t.dtype)) + ", which safetensors cannot name");
  auto needed = byte_count(t.dtype, t.shape);
  std::string described = "shape " + format_shape(t.shape) + " of " + std::string(dtype_name);
  if (!needed) fail_tensor(described + " is invalid (negative or too large)");
  if (static_cast<int64_t>(t.data.size()) != *needed)
    fail_tensor("holds " + std::to_string(t.data.size()) + " bytes but " + described + " needs " +
                std::to_string(*needed));
}

// Closes the descriptor and removes the temporary file unless the write completed.
class TempFile {
 public:
  explicit TempFile(std::string path) : path_(std::move(path)) {
    fd_ = ::open(path_.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0644);
  }
  ~TempFile() {
    if (fd_ >= 0) ::close(fd_);
    if (!committed_) ::unlink(path_.c_str());
  }
  TempFile(const TempFile&) = delete;
  TempFile& operator=(const TempFile&) = delete;

  bool opened() const { return fd_ >= 0; }
  bool write_all(const std::vector<uint8_t>& bytes) {
    size_t done = 0;
    while (done < bytes.size()) {
      ssize_t n = ::write(fd_, bytes.data() + done, bytes.size() - done);
      if (n < 0 && errno == EINTR) continue;
      if (n <= 0) return false;
      done += static_cast<size_t>(n);
    }
    // Flushed before the rename so a crash cannot leave an empty file under the final name.
    return ::fsync(fd_) == 0;
  }
  bool close_and_rename(const std::string& target) {
    int fd = std::exchange(fd_, -1);
    if (::close(fd) != 0) return false;
    if (::rename(path_.c_str(), target.c_str()) != 0) return false;
    committed_ = true;
    return true;
  }

 private:
  std::string path_;
  int fd_ = -1;
  bool committed_ = false;
};

std::string temp_path_for(const std::string& path) {
  static std::atomic<uint64_t> counter{0};
  return path + ".tmp-" + std::to_string(::getpid()) + "-" + std::to_string(counter++);
}

}  // namespace

int64_t Tensor::numel() const {
  int64_t n = 1;
  for (int64_t dim : shape) n *= dim;
  return n;
}

const Tensor* SafetensorsFile::find(std::string_view name) const {
  for (const Tensor& t : tensors)
    if (t.name == name) return &t;
  return nullptr;
}

const Tensor& SafetensorsFile::get(std::string_view name) const {
  if (const Tensor* t = find(name)) return *t;
  throw Error("tensor " + single_quoted(name) + " is missing from " + origin);
}

void SafetensorsFile::add(Tensor t) {
  if (t.name == kMetadataKey) throw Error("tensor name " + single_quoted(t.name) + " is reserved for metadata");
  if (find(t.name)) throw Error("tensor " + single_quoted(t.name) + " already exists in " + origin);
  tensors.push_back(std::move(t));
}

std::string_view safetensors_dtype_name(DType t) {
  for (const auto& [dtype, name] : kDTypeNames)
    if (dtype == t) return name;
  return {};
}

std::optional<DType> parse_safetensors_dtype(std::string_view name) {
  for (const auto& [dtype, text] : kDTypeNames)
    if (text == name) return dtype;
  return std::nullopt;
}

SafetensorsFile parse_safetensors(const uint8_t* bytes, size_t size, std::string origin) {
  if (size < 8) fail(origin, "file is " + std::to_string(size) + " bytes, too short for the 8-byte header length");
  uint64_t header_size = read_u64_le(bytes);
  if (header_size > kMaxHeaderBytes)
    fail(origin, "header length " + std::to_string(header_size) + " is over the " +
                     std::to_string(kMaxHeaderBytes) + "-byte limit");
  if (header_size > size - 8)
    fail(origin, "header length " + std::to_string(header_size) + " is more than the " +
                     std::to_string(size - 8) + " bytes after it (truncated file?)");

  json header = parse_header_json(bytes + 8, header_size, origin);
  const uint8_t* data = bytes + 8 + header_size;
  const auto data_size = static_cast<int64_t>(size - 8 - header_size);

  SafetensorsFile file;
  file.origin = std::move(origin);
  std::vector<TensorEntry> entries;
  for (const auto& [name, value] : header.items()) {
    if (name == kMetadataKey)
      file.metadata = parse_metadata(value, file.origin);
    else
      entries.push_back(EntryParser(file.origin, name, data_size).parse(value));
  }
  std::stable_sort(entries.begin(), entries.end(), [](const TensorEntry& a, const TensorEntry& b) {
    return std::pair(a.begin, a.end) < std::pair(b.begin, b.end);
  });
  check_no_overlap(entries, file.origin);

  for (TensorEntry& entry : entries) {
    Tensor t;
    t.name = std::move(entry.name);
    t.dtype = entry.dtype;
    t.shape = std::move(entry.shape);
    t.data.assign(data + entry.begin, data + entry.end);
    file.tensors.push_back(std::move(t));
  }
  return file;
}

SafetensorsFile read_safetensors(const std::string& path) {
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) throw Error("cannot open " + path + ": " + errno_text());
  // Closes the file on every path out, the throwing ones (allocation included) too.
  struct CloseOnExit {
    int fd;
    ~CloseOnExit() { ::close(fd); }
  } close_on_exit{fd};
  std::vector<uint8_t> bytes;
  struct stat info {};
  if (::fstat(fd, &info) == 0 && info.st_size > 0) bytes.reserve(static_cast<size_t>(info.st_size));
  std::array<uint8_t, 1 << 16> chunk;
  while (true) {
    ssize_t n = ::read(fd, chunk.data(), chunk.size());
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) throw Error("cannot read " + path + ": " + errno_text());
    if (n == 0) break;
    bytes.insert(bytes.end(), chunk.begin(), chunk.begin() + n);
  }
  return parse_safetensors(bytes.data(), bytes.size(), path);
}

std::vector<uint8_t> serialize_safetensors(const SafetensorsFile& file) {
  json header = json::object();
  if (!file.metadata.empty()) header[std::string(kMetadataKey)] = file.metadata;
  uint64_t offset = 0;
  for (const Tensor& t : file.tensors) {
    check_writable(t, file.origin);
    if (header.contains(t.name)) fail(file.origin, "tensor " + single_quoted(t.name) + " appears twice");
    uint64_t end = offset + t.data.size();
    header[t.name] = json{{"dtype", safetensors_dtype_name(t.dtype)},
                          {"shape", t.shape},
                          {"data_offsets", json::array({offset, end})}};
    offset = end;
  }

  std::string text;
  try {
    text = header.dump();
  } catch (const json::exception& e) {
    fail(file.origin, std::string("cannot encode the header (") + e.what() + ")");
  }
  text.append((8 - text.size() % 8) % 8, ' ');

  std::vector<uint8_t> out;
  out.reserve(8 + text.size() + offset);
  append_u64_le(out, text.size());
  out.insert(out.end(), text.begin(), text.end());
  for (const Tensor& t : file.tensors) out.insert(out.end(), t.data.begin(), t.data.end());
  return out;
}

void write_safetensors(const std::string& path, const SafetensorsFile& file) {
  std::vector<uint8_t> bytes = serialize_safetensors(file);
  TempFile temp(temp_path_for(path));
  if (!temp.opened()) throw Error("cannot write " + path + ": " + errno_text());
  if (!temp.write_all(bytes) || !temp.close_and_rename(path))
    throw Error("cannot write " + path + ": " + errno_text());
}

}  // namespace moeq::io
