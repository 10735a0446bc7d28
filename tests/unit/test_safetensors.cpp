#include "io/safetensors.hpp"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <chrono>

#include <cstring>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <random>

#include "moeq/error.hpp"

namespace moeq::io {
namespace {

using ::testing::AllOf;
using ::testing::HasSubstr;
namespace fs = std::filesystem;

std::vector<uint8_t> pattern_bytes(size_t n, uint8_t seed) {
  std::vector<uint8_t> out(n);
  for (size_t i = 0; i < n; ++i) out[i] = static_cast<uint8_t>(seed + 31 * i);
  return out;
}

Tensor make_tensor(std::string name, DType dtype, std::vector<int64_t> shape, uint8_t seed = 1) {
  Tensor t{std::move(name), dtype, std::move(shape), {}};
  t.data = pattern_bytes(static_cast<size_t>(dtype_bytes(dtype, t.numel())), seed);
  return t;
}

SafetensorsFile sample_file() {
  SafetensorsFile file;
  file.metadata = {{"format", "pt"}, {"quant", "mxfp4"}};
  file.add(make_tensor("w13.weight", DType::bf16, {4, 8}, 1));
  file.add(make_tensor("scale", DType::f32, {3}, 2));
  file.add(make_tensor("empty", DType::f16, {0, 5}, 3));
  file.add(make_tensor("codes", DType::e4m3, {2, 3, 2}, 4));
  file.add(make_tensor("codes5", DType::e5m2, {7}, 5));
  file.add(make_tensor("bytes", DType::u8, {5}, 6));
  file.add(make_tensor("ids", DType::i32, {2, 2}, 7));
  file.add(make_tensor("offsets", DType::i64, {3}, 8));
  file.add(make_tensor("scalar", DType::f32, {}, 9));
  return file;
}

// An encoder independent of the one under test: the header text is written by hand.
std::vector<uint8_t> encode(const std::string& header, const std::vector<uint8_t>& data) {
  std::vector<uint8_t> out;
  uint64_t n = header.size();
  for (int i = 0; i < 8; ++i) out.push_back(static_cast<uint8_t>(n >> (8 * i)));
  out.insert(out.end(), header.begin(), header.end());
  out.insert(out.end(), data.begin(), data.end());
  return out;
}

SafetensorsFile parse(const std::vector<uint8_t>& bytes, std::string origin = "model.safetensors") {
  return parse_safetensors(bytes.data(), bytes.size(), std::move(origin));
}

std::string parse_error(const std::vector<uint8_t>& bytes) {
  try {
    parse(bytes);
  } catch (const Error& e) {
    return e.what();
  }
  ADD_FAILURE() << "parse did not throw";
  return {};
}

std::string header_error(const std::string& header, size_t data_size = 64) {
  return parse_error(encode(header, std::vector<uint8_t>(data_size)));
}

void expect_same(const SafetensorsFile& a, const SafetensorsFile& b) {
  EXPECT_EQ(a.metadata, b.metadata);
  ASSERT_EQ(a.tensors.size(), b.tensors.size());
  for (size_t i = 0; i < a.tensors.size(); ++i) {
    SCOPED_TRACE(a.tensors[i].name);
    EXPECT_EQ(a.tensors[i].name, b.tensors[i].name);
    EXPECT_EQ(a.tensors[i].dtype, b.tensors[i].dtype);
    EXPECT_EQ(a.tensors[i].shape, b.tensors[i].shape);
    EXPECT_EQ(a.tensors[i].data, b.tensors[i].data);
  }
}

class TempDir {
 public:
  TempDir() {
    std::random_device rd;
    path_ = fs::temp_directory_path() / ("moeq_safetensors_" + std::to_string(rd()));
    fs::create_directories(path_);
  }
  ~TempDir() { fs::remove_all(path_); }
  const fs::path& path() const { return path_; }
  size_t entry_count() const { return static_cast<size_t>(std::distance(fs::directory_iterator(path_), {})); }

 private:
  fs::path path_;
};

TEST(Safetensors, DTypeNamesRoundTrip) {
  for (DType t : {DType::bf16, DType::f16, DType::f32, DType::e4m3, DType::e5m2, DType::u8, DType::i32, DType::i64})
    EXPECT_EQ(parse_safetensors_dtype(safetensors_dtype_name(t)), t) << to_string(t);
  EXPECT_EQ(safetensors_dtype_name(DType::bf16), "BF16");
  EXPECT_EQ(safetensors_dtype_name(DType::e4m3), "F8_E4M3");
  EXPECT_EQ(safetensors_dtype_name(DType::e2m1), "");
  EXPECT_EQ(parse_safetensors_dtype("bf16"), std::nullopt);
  EXPECT_EQ(parse_safetensors_dtype("F64"), std::nullopt);
}

TEST(Safetensors, RoundTripKeepsEveryTensorAndMetadata) {
  SafetensorsFile original = sample_file();
  SafetensorsFile back = parse(serialize_safetensors(original));
  expect_same(original, back);
  EXPECT_EQ(back.origin, "model.safetensors");
  EXPECT_EQ(back.get("empty").numel(), 0);
  EXPECT_TRUE(back.get("empty").data.empty());
  EXPECT_EQ(back.get("scalar").numel(), 1);
}

TEST(Safetensors, SerializedLayoutFollowsTheFormat) {
  std::vector<uint8_t> bytes = serialize_safetensors(sample_file());
  uint64_t header_size = 0;
  for (int i = 7; i >= 0; --i) header_size = (header_size << 8) | bytes[i];
  EXPECT_EQ(header_size % 8, 0u);
  std::string header(bytes.begin() + 8, bytes.begin() + 8 + static_cast<std::ptrdiff_t>(header_size));
  EXPECT_EQ(header.front(), '{');
  EXPECT_THAT(header, HasSubstr(R"("w13.weight":{"data_offsets":[0,64],"dtype":"BF16","shape":[4,8]})"));
  EXPECT_THAT(header, HasSubstr(R"("__metadata__":{"format":"pt","quant":"mxfp4"})"));
  EXPECT_EQ(serialize_safetensors(sample_file()), bytes) << "serialization must be deterministic";
}

TEST(Safetensors, ParsesHandBuiltFileInDataOrder) {
  std::vector<uint8_t> data = {1, 2, 3, 4};
  float values[2] = {1.5f, -2.0f};
  const auto* raw = reinterpret_cast<const uint8_t*>(values);
  data.insert(data.end(), raw, raw + sizeof(values));
  std::string header =
      R"({"b":{"dtype":"F32","shape":[2],"data_offsets":[4,12]},)"
      R"("__metadata__":{"format":"pt"},)"
      R"( "a" : {"shape":[2,2],"data_offsets":[0,4],"dtype":"U8"},)"
      R"("z":{"dtype":"I64","shape":[0],"data_offsets":[12,12]}}    )";
  SafetensorsFile file = parse(encode(header, data));

  ASSERT_EQ(file.tensors.size(), 3u);
  EXPECT_EQ(file.tensors[0].name, "a");
  EXPECT_EQ(file.tensors[1].name, "b");
  EXPECT_EQ(file.tensors[2].name, "z");
  EXPECT_EQ(file.metadata, (std::map<std::string, std::string>{{"format", "pt"}}));
  EXPECT_EQ(file.get("a").dtype, DType::u8);
  EXPECT_EQ(file.get("a").shape, (std::vector<int64_t>{2, 2}));
  EXPECT_EQ(file.get("a").data, (std::vector<uint8_t>{1, 2, 3, 4}));
  const Tensor& b = file.get("b");
  ASSERT_EQ(b.data.size(), sizeof(values));
  float read[2];
  std::memcpy(read, b.data.data(), sizeof(read));
  EXPECT_EQ(read[0], 1.5f);
  EXPECT_EQ(read[1], -2.0f);
  EXPECT_TRUE(file.get("z").data.empty());
}

TEST(Safetensors, FindGetAndAdd) {
  SafetensorsFile file = sample_file();
  EXPECT_NE(file.find("scale"), nullptr);
  EXPECT_EQ(file.find("nope"), nullptr);
  file.origin = "experts.safetensors";
  try {
    file.get("nope");
    ADD_FAILURE() << "get did not throw";
  } catch (const Error& e) {
    EXPECT_STREQ(e.what(), "tensor 'nope' is missing from experts.safetensors");
  }
  EXPECT_THROW(file.add(make_tensor("scale", DType::f32, {1})), Error);
  EXPECT_THROW(file.add(make_tensor("__metadata__", DType::f32, {1})), Error);
}

TEST(Safetensors, RejectsShortFileAndBadHeaderLength) {
  EXPECT_THAT(parse_error({1, 2, 3}), AllOf(HasSubstr("model.safetensors"), HasSubstr("3 bytes")));
  std::vector<uint8_t> too_long = encode("{}", {});
  too_long[0] = 200;
  EXPECT_THAT(parse_error(too_long), AllOf(HasSubstr("model.safetensors"), HasSubstr("header length 200")));
  std::vector<uint8_t> absurd = encode("{}", {});
  absurd[7] = 0x7f;
  EXPECT_THAT(parse_error(absurd), HasSubstr("limit"));
}

TEST(Safetensors, RejectsHeaderThatIsNotAJsonObject) {
  EXPECT_THAT(header_error(R"({"a": )"), AllOf(HasSubstr("model.safetensors"), HasSubstr("not valid JSON")));
  EXPECT_THAT(header_error(R"([1, 2])"), AllOf(HasSubstr("[1,2]"), HasSubstr("not a JSON object")));
  EXPECT_THAT(header_error("{\"\xff\": 1}"), HasSubstr("not valid JSON"));
}

TEST(Safetensors, RejectsMissingOrMistypedFields) {
  EXPECT_THAT(header_error(R"({"w": 5})"), AllOf(HasSubstr("'w'"), HasSubstr("5, not an object")));
  EXPECT_THAT(header_error(R"({"w": {"shape": [2], "data_offsets": [0, 2]}})"),
              AllOf(HasSubstr("'w'"), HasSubstr("\"dtype\"")));
  EXPECT_THAT(header_error(R"({"w": {"dtype": "U8", "data_offsets": [0, 2]}})"),
              AllOf(HasSubstr("'w'"), HasSubstr("\"shape\"")));
  EXPECT_THAT(header_error(R"({"w": {"dtype": "U8", "shape": [2]}})"),
              AllOf(HasSubstr("'w'"), HasSubstr("\"data_offsets\"")));
  EXPECT_THAT(header_error(R"({"w": {"dtype": 7, "shape": [2], "data_offsets": [0, 2]}})"),
              AllOf(HasSubstr("'w'"), HasSubstr("dtype is 7")));
  EXPECT_THAT(header_error(R"({"w": {"dtype": "U8", "shape": "2", "data_offsets": [0, 2]}})"),
              AllOf(HasSubstr("'w'"), HasSubstr("shape is \"2\"")));
  EXPECT_THAT(header_error(R"({"w": {"dtype": "U8", "shape": [2.5], "data_offsets": [0, 2]}})"),
              AllOf(HasSubstr("'w'"), HasSubstr("2.5")));
  EXPECT_THAT(header_error(R"({"w": {"dtype": "U8", "shape": [2], "data_offsets": [0]}})"),
              AllOf(HasSubstr("'w'"), HasSubstr("data_offsets [0]")));
  EXPECT_THAT(header_error(R"({"w": {"dtype": "U8", "shape": [2], "data_offsets": [0, "2"]}})"),
              AllOf(HasSubstr("'w'"), HasSubstr("[0,\"2\"]")));
  EXPECT_THAT(header_error(R"({"w": {"dtype": "U8", "shape": [2], "data_offsets": [-1, 1]}})"),
              AllOf(HasSubstr("'w'"), HasSubstr("[-1,1]")));
}

TEST(Safetensors, RejectsBadValues) {
  EXPECT_THAT(header_error(R"({"w": {"dtype": "F64", "shape": [2], "data_offsets": [0, 16]}})"),
              AllOf(HasSubstr("model.safetensors"), HasSubstr("'w'"), HasSubstr("\"F64\"")));
  EXPECT_THAT(header_error(R"({"w": {"dtype": "U8", "shape": [2, -3], "data_offsets": [0, 2]}})"),
              AllOf(HasSubstr("'w'"), HasSubstr("negative dimension -3")));
  EXPECT_THAT(header_error(R"({"w": {"dtype": "U8", "shape": [2], "data_offsets": [4, 2]}})"),
              AllOf(HasSubstr("'w'"), HasSubstr("[4, 2]")));
  EXPECT_THAT(header_error(R"({"w": {"dtype": "U8", "shape": [8], "data_offsets": [60, 68]}})"),
              AllOf(HasSubstr("'w'"), HasSubstr("[60, 68]"), HasSubstr("64-byte data section")));
  EXPECT_EQ(header_error(R"({"w13.weight": {"dtype": "BF16", "shape": [4, 8], "data_offsets": [0, 100]}})", 128),
            "model.safetensors: tensor 'w13.weight' data_offsets [0, 100] hold 100 bytes but shape [4, 8] of BF16 "
            "needs 64");
  EXPECT_THAT(header_error(R"({"w": {"dtype": "U8", "shape": [4611686018427387904, 4], "data_offsets": [0, 2]}})"),
              AllOf(HasSubstr("'w'"), HasSubstr("too large")));
}

TEST(Safetensors, RejectsOverlapsAndDuplicates) {
  EXPECT_THAT(header_error(R"({"a": {"dtype": "U8", "shape": [8], "data_offsets": [0, 8]},)"
                           R"( "b": {"dtype": "U8", "shape": [8], "data_offsets": [4, 12]}})"),
              AllOf(HasSubstr("'a' [0, 8]"), HasSubstr("'b' [4, 12]"), HasSubstr("overlap")));
  EXPECT_THAT(header_error(R"({"a": {"dtype": "U8", "shape": [8], "data_offsets": [0, 8]},)"
                           R"( "e": {"dtype": "U8", "shape": [0], "data_offsets": [3, 3]}})"),
              AllOf(HasSubstr("'e' [3, 3]"), HasSubstr("overlap")));
  EXPECT_THAT(header_error(R"({"a": {"dtype": "U8", "shape": [8], "data_offsets": [0, 8]},)"
                           R"( "a": {"dtype": "U8", "shape": [8], "data_offsets": [8, 16]}})"),
              AllOf(HasSubstr("'a'"), HasSubstr("twice")));
}

TEST(Safetensors, RejectsBadMetadata) {
  EXPECT_THAT(header_error(R"({"__metadata__": {"format": "pt", "version": 3}})"),
              AllOf(HasSubstr("'version'"), HasSubstr("3, not a string")));
  EXPECT_THAT(header_error(R"({"__metadata__": ["pt"]})"), AllOf(HasSubstr("__metadata__"), HasSubstr("[\"pt\"]")));
}

TEST(Safetensors, EveryTruncationThrows) {
  std::vector<uint8_t> bytes = serialize_safetensors(sample_file());
  for (size_t cut = 0; cut < bytes.size(); ++cut) {
    std::vector<uint8_t> prefix(bytes.begin(), bytes.begin() + static_cast<std::ptrdiff_t>(cut));
    EXPECT_THROW(parse(prefix), Error) << "cut at " << cut << " of " << bytes.size();
  }
}

// Corrupted bytes must either parse or raise Error; never crash or read out of bounds.
TEST(Safetensors, CorruptedBytesParseOrThrow) {
  const std::vector<uint8_t> clean = serialize_safetensors(sample_file());
  std::mt19937 rng(1234);
  for (int trial = 0; trial < 2000; ++trial) {
    std::vector<uint8_t> bytes = clean;
    for (int flips = 1 + trial % 3; flips > 0; --flips)
      bytes[rng() % bytes.size()] = static_cast<uint8_t>(rng());
    try {
      parse(bytes);
    } catch (const Error&) {
    }
  }
}

TEST(Safetensors, SerializeRejectsInconsistentTensors) {
  SafetensorsFile file;
  Tensor short_data = make_tensor("w", DType::bf16, {4, 8});
  short_data.data.pop_back();
  file.tensors.push_back(short_data);
  EXPECT_THROW(serialize_safetensors(file), Error);

  file.tensors = {make_tensor("packed", DType::e2m1, {4})};
  try {
    serialize_safetensors(file);
    ADD_FAILURE() << "serialize did not throw";
  } catch (const Error& e) {
    EXPECT_THAT(e.what(), AllOf(HasSubstr("'packed'"), HasSubstr("e2m1")));
  }

  file.tensors = {make_tensor("a", DType::u8, {1}), make_tensor("a", DType::u8, {1})};
  EXPECT_THROW(serialize_safetensors(file), Error);
}

TEST(Safetensors, WriteThenReadBack) {
  TempDir dir;
  std::string path = (dir.path() / "experts.safetensors").string();
  SafetensorsFile original = sample_file();
  write_safetensors(path, original);
  SafetensorsFile back = read_safetensors(path);
  expect_same(original, back);
  EXPECT_EQ(back.origin, path);
  EXPECT_EQ(dir.entry_count(), 1u) << "no temporary file may stay behind";

  // Overwriting replaces the whole file.
  SafetensorsFile smaller;
  smaller.add(make_tensor("only", DType::i32, {2}));
  write_safetensors(path, smaller);
  expect_same(smaller, read_safetensors(path));
}

TEST(Safetensors, FailedWriteLeavesExistingFileUntouched) {
  TempDir dir;
  std::string path = (dir.path() / "experts.safetensors").string();
  write_safetensors(path, sample_file());
  SafetensorsFile invalid;
  invalid.tensors.push_back(make_tensor("w", DType::u4, {2}));
  EXPECT_THROW(write_safetensors(path, invalid), Error);
  expect_same(sample_file(), read_safetensors(path));
  EXPECT_EQ(dir.entry_count(), 1u);
}

TEST(Safetensors, WriteIntoMissingFolderNamesThePath) {
  TempDir dir;
  std::string path = (dir.path() / "missing" / "experts.safetensors").string();
  try {
    write_safetensors(path, sample_file());
    ADD_FAILURE() << "write did not throw";
  } catch (const Error& e) {
    EXPECT_THAT(e.what(), HasSubstr(path));
  }
  EXPECT_FALSE(fs::exists(dir.path() / "missing"));
}

TEST(Safetensors, ReadMissingOrCorruptFileNamesThePath) {
  TempDir dir;
  std::string missing = (dir.path() / "absent.safetensors").string();
  EXPECT_THROW(
      {
        try {
          read_safetensors(missing);
        } catch (const Error& e) {
          EXPECT_THAT(e.what(), HasSubstr(missing));
          throw;
        }
      },
      Error);

  std::string corrupt = (dir.path() / "corrupt.safetensors").string();
  std::ofstream(corrupt, std::ios::binary) << "abc";
  try {
    read_safetensors(corrupt);
    ADD_FAILURE() << "read did not throw";
  } catch (const Error& e) {
    EXPECT_THAT(e.what(), HasSubstr(corrupt));
  }
}

// Found by fuzzing: a deeply nested value quoted in a message overflowed the stack, and the duplicate-key check
// took quadratic time (40000 entries: over a minute).
TEST(Safetensors, HostileHeadersFailFastWithAMessage) {
  const std::string deep = "{\"x\": " + std::string(100000, '[') + std::string(100000, ']') + "}";
  EXPECT_THAT(header_error(deep), testing::HasSubstr("an array of 1 items"));

  std::string many = "{";
  for (int i = 0; i < 40000; ++i)
    many += (i ? "," : "") + std::string("\"t") + std::to_string(i) + "\": {\"dtype\": \"U8\", \"shape\": [0], \"data_offsets\": [0, 0]}";
  const auto start = std::chrono::steady_clock::now();
  try {
    parse(encode(many + "}", {}));
  } catch (const Error&) {
  }
  EXPECT_LT(std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count(), 10.0);
  EXPECT_THAT(header_error(many + ", \"t7\": {\"dtype\": \"U8\", \"shape\": [0], \"data_offsets\": [0, 0]}}"),
              testing::HasSubstr("tensor 't7' appears twice in the header"));
}

}  // namespace
}  // namespace moeq::io
