// SHA-256 against the FIPS 180-2 test vectors (Appendix B) and the padding boundaries.
#include <gtest/gtest.h>

#include <string>

#include "common/sha256.hpp"

namespace {

using moeq::Sha256;
using moeq::sha256_hex;

TEST(Sha256, Fips180OneBlockMessage) {
  EXPECT_EQ(sha256_hex("abc"), "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad");
}

TEST(Sha256, Fips180MultiBlockMessage) {
  EXPECT_EQ(sha256_hex("abcdbcdecdefdefgefghfghighijhijkijkljklmklmnlmnomnopnopq"),
            "248d6a61d20638b8e5c026930c3e6039a33ce45964ff2167f6ecedd419db06c1");
}

TEST(Sha256, Fips180LongMessage) {
  // One million 'a', fed in uneven pieces to exercise the block buffer.
  Sha256 hasher;
  const std::string piece(997, 'a');
  size_t fed = 0;
  while (fed + piece.size() <= 1000000) {
    hasher.update(piece);
    fed += piece.size();
  }
  hasher.update(std::string(1000000 - fed, 'a'));
  EXPECT_EQ(moeq::to_hex(hasher.finish()),
            "cdc76e5c9914fb9281a1c7e284d73e67f1809a48a497200e046d39ccc7112cd0");
}

TEST(Sha256, EmptyAnd896BitMessages) {
  EXPECT_EQ(sha256_hex(""), "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855");
  EXPECT_EQ(sha256_hex("abcdefghbcdefghicdefghijdefghijkefghijklfghijklmghijklmnhijklmnoijklmnopjklmnopq"
                       "klmnopqrlmnopqrsmnopqrstnopqrstu"),
            "cf5b16a778af8380036ce59e7b0492370b249b11e8f07a51afac45037afee9d1");
}

TEST(Sha256, PaddingBoundaries) {
  // 55 bytes: padding fits one block; 56..63: it spills into a second; 64: a whole block.
  // Expected values from an independent implementation (Python's hashlib).
  const struct {
    size_t length;
    const char* hex;
  } cases[] = {
      {55, "9f4390f8d30c2dd92ec9f095b65e2b9ae9b0a925a5258e241c9f1e910f734318"},
      {56, "b35439a4ac6f0948b6d6f9e3c6af0f5f590ce20f1bde7090ef7970686ec6738a"},
      {63, "7d3e74a05d7db15bce4ad9ec0658ea98e3f06eeecf16b4c6fff2da457ddc2f34"},
      {64, "ffe054fe7ae0cb6dc65c3af9b61d5209f439851db43d0ba5997337df154668eb"},
      {65, "635361c48bb9eab14198e76ea8ab7f1a41685d6ad62aa9146d301d4f17eb0ae0"},
      {119, "31eba51c313a5c08226adf18d4a359cfdfd8d2e816b13f4af952f7ea6584dcfb"},
      {128, "6836cf13bac400e9105071cd6af47084dfacad4e5e302c94bfed24e013afb73e"},
  };
  for (const auto& c : cases) {
    EXPECT_EQ(sha256_hex(std::string(c.length, 'a')), c.hex) << "length " << c.length;
    // The same message one byte at a time.
    Sha256 hasher;
    for (size_t i = 0; i < c.length; ++i) hasher.update("a", 1);
    EXPECT_EQ(moeq::to_hex(hasher.finish()), c.hex) << "length " << c.length << ", bytewise";
  }
}

}  // namespace
