// Property tests of the reference routing (CONTRACT §3): every index the GPU kernels will be
// compared against exactly. Expected values come from brute-force constructions written here.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <limits>
#include <random>
#include <string>
#include <vector>

#include "moeq/error.hpp"
#include "reference/formats.hpp"
#include "reference/routing.hpp"

namespace {

using moeq::DType;
using namespace moeq::ref;

template <typename Fn>
std::string error_of(Fn&& fn) {
  try {
    fn();
  } catch (const moeq::Error& e) {
    return e.what();
  }
  return "<no error>";
}

std::vector<int32_t> random_local_ids(std::mt19937& rng, int64_t num_slots, int64_t num_experts,
                                      bool with_non_local) {
  std::uniform_int_distribution<int32_t> expert(0, static_cast<int32_t>(num_experts) - 1);
  std::bernoulli_distribution dropped(0.3);
  std::vector<int32_t> ids(num_slots);
  for (auto& id : ids) id = with_non_local && dropped(rng) ? -1 : expert(rng);
  return ids;
}

int64_t count_of(const std::vector<int32_t>& local, int32_t e) {
  int64_t n = 0;
  for (int32_t id : local) n += id == e;
  return n;
}

// ---- to_local_expert_ids ----

TEST(RoutingLocalIds, MapsI32AndI64ThroughExpertMap) {
  const std::vector<int32_t> map = {2, -1, 0, 1};  // 4 global experts, 3 local
  const std::vector<int32_t> ids32 = {0, 1, 2, 3, -1, 2};
  const std::vector<int64_t> ids64(ids32.begin(), ids32.end());
  const std::vector<int32_t> expected = {2, -1, 0, 1, -1, 0};
  EXPECT_EQ(to_local_expert_ids(ids32.data(), DType::i32, 3, 2, 4, map.data(), 3), expected);
  EXPECT_EQ(to_local_expert_ids(ids64.data(), DType::i64, 3, 2, 4, map.data(), 3), expected);
  EXPECT_EQ(to_local_expert_ids(ids32.data(), DType::i32, 2, 3, 4, nullptr, 4),
            (std::vector<int32_t>{0, 1, 2, 3, -1, 2}));
}

TEST(RoutingLocalIds, RejectsOutOfRangeIdsAndMapValues) {
  std::vector<int32_t> ids32(5 * 2, 7);
  ids32[3 * 2 + 1] = 301;
  EXPECT_EQ(error_of([&] { to_local_expert_ids(ids32.data(), DType::i32, 5, 2, 256, nullptr, 256); }),
            "topk_ids[3,1] = 301 is outside [-1, 256)");
  ids32[3 * 2 + 1] = 256;  // the first id past the range
  EXPECT_EQ(error_of([&] { to_local_expert_ids(ids32.data(), DType::i32, 5, 2, 256, nullptr, 256); }),
            "topk_ids[3,1] = 256 is outside [-1, 256)");
  std::vector<int64_t> ids64(4 * 3, 1);
  ids64[2 * 3 + 0] = -2;
  EXPECT_EQ(error_of([&] { to_local_expert_ids(ids64.data(), DType::i64, 4, 3, 16, nullptr, 16); }),
            "topk_ids[2,0] = -2 is outside [-1, 16)");
  ids64[2 * 3 + 0] = int64_t{1} << 40;  // must not be truncated to a valid int32
  EXPECT_EQ(error_of([&] { to_local_expert_ids(ids64.data(), DType::i64, 4, 3, 16, nullptr, 16); }),
            "topk_ids[2,0] = 1099511627776 is outside [-1, 16)");

  std::vector<int32_t> map(12, -1);
  map[5] = 9;
  const std::vector<int32_t> ids = {0};
  EXPECT_EQ(error_of([&] { to_local_expert_ids(ids.data(), DType::i32, 1, 1, 12, map.data(), 8); }),
            "expert_map[5] = 9 is outside [-1, 8)");
  for (int32_t bad : {8, -2}) {  // both edges
    map[5] = bad;
    EXPECT_EQ(error_of([&] { to_local_expert_ids(ids.data(), DType::i32, 1, 1, 12, map.data(), 8); }),
              "expert_map[5] = " + std::to_string(bad) + " is outside [-1, 8)");
  }
  EXPECT_NE(error_of([&] { to_local_expert_ids(ids.data(), DType::f32, 1, 1, 12, nullptr, 12); }),
            "<no error>");
}

// ---- align (indexed layout) ----

struct AlignResult {
  std::vector<int32_t> sorted_ids;  // the used part, num_tokens_padded entries
  std::vector<int32_t> expert_ids;  // the used blocks
};

AlignResult brute_force_align(const std::vector<int32_t>& local, int64_t num_experts, int64_t block_m) {
  AlignResult r;
  const auto pad = static_cast<int32_t>(local.size());
  for (int32_t e = 0; e < num_experts; ++e) {
    for (size_t f = 0; f < local.size(); ++f)
      if (local[f] == e) r.sorted_ids.push_back(static_cast<int32_t>(f));
    while (r.sorted_ids.size() % block_m != 0) r.sorted_ids.push_back(pad);
    while (r.expert_ids.size() * block_m < r.sorted_ids.size()) r.expert_ids.push_back(e);
  }
  return r;
}

// First violated property of an align output, or "" when all hold.
std::string align_violation(const std::vector<int32_t>& local, int64_t num_experts, int64_t block_m,
                            const std::vector<int32_t>& sorted, const std::vector<int32_t>& experts,
                            int64_t padded, int64_t capacity) {
  const auto n = static_cast<int64_t>(local.size());
  int64_t expected_padded = 0;
  for (int32_t e = 0; e < num_experts; ++e)
    expected_padded += (count_of(local, e) + block_m - 1) / block_m * block_m;
  if (padded != expected_padded) return "num_tokens_padded " + std::to_string(padded);
  if (padded > capacity) return "capacity exceeded";
  std::vector<int> seen(n, 0);
  int64_t previous_slot = -1, previous_expert = -1, pads_in_expert = 0;
  for (int64_t i = 0; i < padded; ++i) {
    const int32_t e = experts[i / block_m], s = sorted[i];
    if (e < 0 || e >= num_experts) return "block " + std::to_string(i / block_m) + " has no expert";
    if (e != previous_expert) {
      if (e < previous_expert) return "experts out of order at entry " + std::to_string(i);
      previous_expert = e, previous_slot = -1, pads_in_expert = 0;
    }
    if (s == n) {
      if (++pads_in_expert >= block_m) return "a whole block of padding at entry " + std::to_string(i);
      continue;
    }
    if (s < 0 || s > n) return "bad value at entry " + std::to_string(i);
    if (pads_in_expert > 0) return "slot after padding at entry " + std::to_string(i);
    if (local[s] != e) return "slot " + std::to_string(s) + " in a block of expert " + std::to_string(e);
    if (s <= previous_slot) return "unsorted at entry " + std::to_string(i);
    previous_slot = s;
    ++seen[s];
  }
  for (int64_t f = 0; f < n; ++f)
    if (seen[f] != (local[f] >= 0 ? 1 : 0)) return "slot " + std::to_string(f) + " seen " + std::to_string(seen[f]);
  for (int64_t i = padded; i < capacity; ++i)
    if (sorted[i] != n) return "tail entry " + std::to_string(i) + " is not num_slots";
  for (int64_t b = padded / block_m; b < capacity / block_m; ++b)
    if (experts[b] != -1) return "unused block " + std::to_string(b) + " is not -1";
  return "";
}

constexpr int32_t kGuard = 0x5A5A5A5A;
constexpr int64_t kGuardEntries = 8;

// Runs align into guarded buffers and checks it against brute force and every property.
void check_align(const std::vector<int32_t>& local, int64_t num_experts, int64_t block_m) {
  const auto n = static_cast<int64_t>(local.size());
  const int64_t capacity = align_capacity(n, num_experts, block_m);
  ASSERT_EQ(capacity % block_m, 0);
  std::vector<int32_t> sorted(capacity + kGuardEntries, kGuard);
  std::vector<int32_t> experts(capacity / block_m + kGuardEntries, kGuard);
  int32_t padded = -7;
  align(local.data(), n, num_experts, block_m, sorted.data(), experts.data(), &padded);
  const AlignResult expected = brute_force_align(local, num_experts, block_m);
  ASSERT_EQ(padded, static_cast<int64_t>(expected.sorted_ids.size()));
  EXPECT_TRUE(std::equal(expected.sorted_ids.begin(), expected.sorted_ids.end(), sorted.begin()));
  EXPECT_TRUE(std::equal(expected.expert_ids.begin(), expected.expert_ids.end(), experts.begin()));
  EXPECT_EQ(align_violation(local, num_experts, block_m, sorted, experts, padded, capacity), "");
  for (int64_t i = 0; i < kGuardEntries; ++i) {
    EXPECT_EQ(sorted[capacity + i], kGuard) << "sorted_ids written past capacity";
    EXPECT_EQ(experts[capacity / block_m + i], kGuard) << "expert_ids written past capacity";
  }
}

TEST(RoutingAlign, SmallCaseByHand) {
  const std::vector<int32_t> local = {1, 0, 1, -1, 0, 2};
  ASSERT_EQ(align_capacity(6, 3, 4), 16);
  // Fewer slots than experts: at most one padded block per slot (M = 1, top_k = 8, E = 128).
  EXPECT_EQ(align_capacity(8, 128, 8), 64);
  EXPECT_EQ(align_capacity(0, 128, 16), 0);
  // Segment tables: one partial block per non-empty segment at most.
  EXPECT_EQ(segment_capacity(5, 128, 8), 1 + 5);
  EXPECT_EQ(segment_capacity(100, 4, 16), 7 + 4);
  EXPECT_EQ(segment_capacity(0, 4, 16), 0);
  std::vector<int32_t> sorted(16), experts(4);
  int32_t padded = 0;
  align(local.data(), 6, 3, 4, sorted.data(), experts.data(), &padded);
  EXPECT_EQ(padded, 12);
  EXPECT_EQ(sorted, (std::vector<int32_t>{1, 4, 6, 6, 0, 2, 6, 6, 5, 6, 6, 6, 6, 6, 6, 6}));
  EXPECT_EQ(experts, (std::vector<int32_t>{0, 1, 2, -1}));
}

TEST(RoutingAlign, RandomCasesMatchBruteForce) {
  std::mt19937 rng(20240611);
  for (int64_t m : {0, 1, 7, 129, 1000})
    for (int64_t top_k : {1, 2, 8})
      for (int64_t e : {1, 7, 8, 256})
        for (int64_t bm : {16, 24, 64, 80, 96, 128, 144})
          for (bool non_local : {false, true}) {
            SCOPED_TRACE("M=" + std::to_string(m) + " top_k=" + std::to_string(top_k) + " E=" +
                         std::to_string(e) + " BM=" + std::to_string(bm) + " non_local=" + std::to_string(non_local));
            check_align(random_local_ids(rng, m * top_k, e, non_local), e, bm);
          }
}

TEST(RoutingAlign, WorstCasesStayWithinCapacity) {
  for (int64_t e : {1, 7, 256})
    for (int64_t bm : {16, 128, 144}) {
      SCOPED_TRACE("E=" + std::to_string(e) + " BM=" + std::to_string(bm));
      check_align(std::vector<int32_t>(8000, static_cast<int32_t>(e - 1)), e, bm);  // one expert
      std::vector<int32_t> one_each(e), spill(e * (bm + 1));
      for (int32_t i = 0; i < e; ++i) one_each[i] = i;
      for (size_t f = 0; f < spill.size(); ++f) spill[f] = static_cast<int32_t>(f % e);
      check_align(one_each, e, bm);  // every expert pads BM-1 entries: exactly the capacity
      check_align(spill, e, bm);     // every expert spills one slot into a new block
    }
}

TEST(RoutingAlign, RejectsBadLocalIds) {
  const std::vector<int32_t> local = {0, 1, 5};
  std::vector<int32_t> sorted(64), experts(64);
  int32_t padded = 0;
  EXPECT_EQ(error_of([&] { align(local.data(), 3, 3, 4, sorted.data(), experts.data(), &padded); }),
            "local_ids[2] = 5 is outside [-1, 3)");
}

// ---- permute (grouped contiguous layout) ----

std::string permute_violation(const std::vector<int32_t>& local, int64_t num_experts,
                              const std::vector<int64_t>& offsets, const std::vector<int32_t>& inv,
                              const std::vector<int32_t>& src) {
  const auto n = static_cast<int64_t>(local.size());
  if (offsets[0] != 0) return "offsets[0] != 0";
  for (int32_t e = 0; e < num_experts; ++e)
    if (offsets[e + 1] - offsets[e] != count_of(local, e)) return "offsets wrong at " + std::to_string(e);
  const int64_t valid = offsets[num_experts];
  if (valid != n - count_of(local, -1)) return "offsets[E] != local rows";
  std::vector<int> hit(n, 0);
  std::vector<int64_t> last_row(num_experts + 1, -1);  // per expert, and non-local at E
  for (int64_t f = 0; f < n; ++f) {
    const int64_t r = inv[f], key = local[f] >= 0 ? local[f] : num_experts;
    if (r < 0 || r >= n || hit[r]++) return "inv is not a permutation at slot " + std::to_string(f);
    if (r <= last_row[key]) return "not stable at slot " + std::to_string(f);
    last_row[key] = r;
    if (local[f] >= 0 && (r < offsets[key] || r >= offsets[key + 1] || src[r] != f))
      return "local slot " + std::to_string(f) + " misplaced";
    if (local[f] < 0 && r < valid) return "non-local slot " + std::to_string(f) + " among local rows";
  }
  for (int64_t r = valid; r < n; ++r)
    if (src[r] != n) return "permuted_src past offsets[E] is not num_slots at " + std::to_string(r);
  return "";
}

TEST(RoutingPermute, SmallCaseByHand) {
  const std::vector<int32_t> local = {1, 0, 1, -1, 0, 2};
  std::vector<int64_t> offsets(4);
  std::vector<int32_t> inv(6), src(6);
  permute_indices(local.data(), 6, 3, offsets.data(), inv.data(), src.data());
  EXPECT_EQ(offsets, (std::vector<int64_t>{0, 2, 4, 5}));
  EXPECT_EQ(inv, (std::vector<int32_t>{2, 0, 3, 5, 1, 4}));
  EXPECT_EQ(src, (std::vector<int32_t>{1, 4, 0, 2, 5, 6}));
}

TEST(RoutingPermute, RandomCasesHoldPropertiesAndMoveRowsByValue) {
  std::mt19937 rng(77);
  constexpr int32_t kSentinel = -99, kHiddenPad = -2;
  constexpr int64_t kCols = 5, kHiddenStride = 7, kPermutedStride = 6;
  for (int64_t m : {0, 1, 7, 129, 1000})
    for (int64_t top_k : {1, 2, 8})
      for (int64_t e : {1, 7, 8, 256})
        for (int mode = 0; mode < 3; ++mode) {  // all local, some non-local, all to the last expert
          SCOPED_TRACE("M=" + std::to_string(m) + " top_k=" + std::to_string(top_k) + " E=" +
                       std::to_string(e) + " mode=" + std::to_string(mode));
          const int64_t n = m * top_k;
          std::vector<int32_t> local = random_local_ids(rng, n, e, mode == 1);
          if (mode == 2)
            for (auto& id : local) id = id % 3 == 0 ? -1 : static_cast<int32_t>(e - 1);
          std::vector<int64_t> offsets(e + 1, -5);
          std::vector<int32_t> inv(n, -5), src(n, -5);
          permute_indices(local.data(), n, e, offsets.data(), inv.data(), src.data());
          ASSERT_EQ(permute_violation(local, e, offsets, inv, src), "");

          std::vector<int32_t> hidden(m * kHiddenStride, kHiddenPad);
          for (int64_t t = 0; t < m; ++t)
            for (int64_t c = 0; c < kCols; ++c) hidden[t * kHiddenStride + c] = static_cast<int32_t>(t);
          std::vector<int32_t> permuted(n * kPermutedStride, kSentinel);
          permute_rows(hidden.data(), kHiddenStride * 4, kCols * 4, src.data(), offsets[e], top_k,
                       permuted.data(), kPermutedStride * 4);
          int64_t wrong = 0;
          for (int64_t r = 0; r < n; ++r)
            for (int64_t c = 0; c < kPermutedStride; ++c) {
              const bool written = r < offsets[e] && c < kCols;
              wrong += permuted[r * kPermutedStride + c] != (written ? src[r] / top_k : kSentinel);
            }
          EXPECT_EQ(wrong, 0);
        }
}

// ---- batched (masked) layout ----

TEST(RoutingBatched, DispatchOrderCountsAndRows) {
  const std::vector<int32_t> local = {1, 0, 1, -1, 0, 2};
  std::vector<int32_t> counts(3, -5), slot_of_row(9, -5);
  batched_dispatch(local.data(), 6, 3, 3, counts.data(), slot_of_row.data());
  EXPECT_EQ(counts, (std::vector<int32_t>{2, 2, 1}));
  EXPECT_EQ(slot_of_row, (std::vector<int32_t>{1, 4, -1, 0, 2, -1, 5, -1, -1}));
  EXPECT_EQ(reduce_rows_batched(local.data(), 6, 3, 3), (std::vector<int32_t>{3, 0, 4, -1, 1, 6}));

  std::vector<int32_t> untouched(3, -5);
  EXPECT_EQ(error_of([&] { batched_dispatch(local.data(), 6, 3, 1, untouched.data(), slot_of_row.data()); }),
            "expert 0 receives 2 rows but max_tokens_per_expert is 1");
  EXPECT_EQ(untouched, (std::vector<int32_t>{-5, -5, -5}));
  const std::vector<int32_t> crowded = {2, 2, 2, 2, 2, -1, 0};
  EXPECT_EQ(error_of([&] { reduce_rows_batched(crowded.data(), 7, 3, 4); }),
            "expert 2 receives 5 rows but max_tokens_per_expert is 4");
}

TEST(RoutingBatched, RandomDispatchAgreesWithReduceRows) {
  std::mt19937 rng(5);
  for (int64_t e : {1, 7, 256}) {
    const int64_t n = 129 * 8, t = n;  // T = n always fits
    const std::vector<int32_t> local = random_local_ids(rng, n, e, true);
    std::vector<int32_t> counts(e), slot_of_row(e * t);
    batched_dispatch(local.data(), n, e, t, counts.data(), slot_of_row.data());
    const std::vector<int32_t> rows = reduce_rows_batched(local.data(), n, e, t);
    for (int32_t x = 0; x < e; ++x) EXPECT_EQ(counts[x], count_of(local, x));
    for (int64_t f = 0; f < n; ++f)
      if (local[f] >= 0) {
        ASSERT_EQ(slot_of_row[rows[f]], f);
      }
    for (int64_t r = 0; r < e * t; ++r) {
      const int64_t expert = r / t, i = r % t;
      ASSERT_EQ(slot_of_row[r] >= 0, i < counts[expert]);
      if (i > 0 && i < counts[expert]) {
        ASSERT_LT(slot_of_row[r - 1], slot_of_row[r]);
      }
    }
  }
}

TEST(RoutingBatched, CombineIsTheWeightedSum) {
  // M=2, top_k=3, E=2, T=3, K=2. Token 0 -> experts {1, 0, -1}, token 1 -> {0, 1, 1}.
  const std::vector<int32_t> local = {1, 0, -1, 0, 1, 1};
  const std::vector<float> weights = {0.5f, 0.25f, NAN, 2.0f, 1.0f, 4.0f};
  const float nan = std::numeric_limits<float>::quiet_NaN();
  // Row (e, i): expert 0 receives slots 1, 3; expert 1 receives slots 0, 4, 5. (0, 2) is never read.
  const std::vector<float> down = {10, 20, 30, 40, nan, nan,  // expert 0
                                   1, 2, 3, 4, 5, 6};         // expert 1
  std::vector<float> out(4, -1.0f);
  combine_batched(down.data(), DType::f32, 3, 2, local.data(), weights.data(), DType::f32, 2, 3, 2, out.data());
  EXPECT_EQ(out, (std::vector<float>{0.5f * 1 + 0.25f * 10, 0.5f * 2 + 0.25f * 20,
                                     2.0f * 30 + 1.0f * 3 + 4.0f * 5, 2.0f * 40 + 1.0f * 4 + 4.0f * 6}));
}

// ---- topk_reduce ----

uint16_t encode16(DType dtype, float x) { return dtype == DType::bf16 ? f32_to_bf16(x) : f32_to_f16(x); }

// Stores fp32 values as `dtype` (values are chosen exactly representable where that matters).
std::vector<unsigned char> encode(DType dtype, const std::vector<float>& values) {
  std::vector<unsigned char> bytes(values.size() * (dtype == DType::f32 ? 4 : 2));
  for (size_t i = 0; i < values.size(); ++i) {
    if (dtype == DType::f32) {
      std::memcpy(&bytes[i * 4], &values[i], 4);
    } else {
      const uint16_t bits = encode16(dtype, values[i]);
      std::memcpy(&bytes[i * 2], &bits, 2);
    }
  }
  return bytes;
}

struct ReduceCase {
  int64_t tokens = 0, top_k = 0, cols = 0;
  std::vector<int32_t> rows;   // indexed layout: slot f reads row f, -1 when masked
  std::vector<float> weights;  // NaN where masked
  std::vector<float> down;     // [tokens*top_k, cols]; NaN rows where masked
};

// Multiples of 1/64 and 1/32: exact in bf16 and f16, and every fp32 sum below is exact too.
ReduceCase exact_case(std::mt19937& rng) {
  ReduceCase c{37, 4, 19, {}, {}, {}};
  std::uniform_int_distribution<int> w(0, 64), d(-128, 128), masked(0, 3);
  for (int64_t f = 0; f < c.tokens * c.top_k; ++f) {
    const bool skip = masked(rng) == 0 || f / c.top_k == 5;  // token 5 has no local slot
    c.rows.push_back(skip ? -1 : static_cast<int32_t>(f));
    c.weights.push_back(skip ? NAN : static_cast<float>(w(rng)) / 64);
    for (int64_t col = 0; col < c.cols; ++col) c.down.push_back(skip ? NAN : static_cast<float>(d(rng)) / 32);
  }
  return c;
}

TEST(RoutingTopkReduce, EveryDtypeMatchesFloat64AndMaskedNaNNeverLeaks) {
  std::mt19937 rng(9);
  const ReduceCase c = exact_case(rng);
  constexpr int64_t kOutStride = 21;
  for (DType wd : {DType::f32, DType::bf16, DType::f16})
    for (DType dd : {DType::f32, DType::bf16, DType::f16})
      for (DType od : {DType::f32, DType::bf16, DType::f16}) {
        SCOPED_TRACE(std::string(to_string(wd)) + " " + std::string(to_string(dd)) + " " + std::string(to_string(od)));
        const auto weights = encode(wd, c.weights), down = encode(dd, c.down);
        const size_t elem = od == DType::f32 ? 4 : 2;
        std::vector<unsigned char> out(c.tokens * kOutStride * elem, 0xFF);  // NaN in every dtype
        topk_reduce(down.data(), dd, c.cols, c.cols, c.rows.data(), weights.data(), wd, c.tokens, c.top_k,
                    out.data(), od, kOutStride);
        int64_t wrong = 0;
        for (int64_t t = 0; t < c.tokens; ++t)
          for (int64_t col = 0; col < kOutStride; ++col) {
            double sum = 0;
            for (int64_t k = 0; k < c.top_k; ++k)
              if (c.rows[t * c.top_k + k] >= 0)
                sum += double{c.weights[t * c.top_k + k]} * c.down[(t * c.top_k + k) * c.cols + col];
            const auto expected = encode(od, {static_cast<float>(sum)});
            const unsigned char* got = &out[(t * kOutStride + col) * elem];
            if (col >= c.cols) wrong += got[0] != 0xFF;  // the stride gap is not written
            else wrong += std::memcmp(got, expected.data(), elem) != 0;  // token 5: +0.0 exactly
          }
        EXPECT_EQ(wrong, 0);
      }
}

TEST(RoutingTopkReduce, AccumulatesInIncreasingKWithOneRounding) {
  std::mt19937 rng(11);
  std::normal_distribution<float> normal(0.0f, 1.0f);
  const int64_t tokens = 64, top_k = 8, cols = 33, n = tokens * top_k;
  std::vector<int32_t> rows(n);
  std::vector<float> weights(n), down(n * cols);
  for (int64_t f = 0; f < n; ++f) rows[f] = f % 5 == 2 ? -1 : static_cast<int32_t>(n - 1 - f);
  for (auto& w : weights) w = normal(rng);
  for (auto& d : down) d = normal(rng) * 100.0f;
  std::vector<float> out(tokens * cols);
  topk_reduce(down.data(), DType::f32, cols, cols, rows.data(), weights.data(), DType::f32, tokens, top_k,
              out.data(), DType::f32, cols);
  int64_t not_bit_exact = 0;
  for (int64_t t = 0; t < tokens; ++t)
    for (int64_t col = 0; col < cols; ++col) {
      float acc = 0.0f;
      double exact = 0.0, magnitude = 0.0;
      for (int64_t k = 0; k < top_k; ++k) {
        const int64_t f = t * top_k + k;
        if (rows[f] < 0) continue;
        acc = std::fma(weights[f], down[rows[f] * cols + col], acc);
        exact += double{weights[f]} * down[rows[f] * cols + col];
        magnitude += std::fabs(double{weights[f]} * down[rows[f] * cols + col]);
      }
      const float got = out[t * cols + col];
      not_bit_exact += std::memcmp(&got, &acc, 4) != 0;
      EXPECT_NEAR(got, exact, 1e-6 * magnitude);
    }
  EXPECT_EQ(not_bit_exact, 0);

  // Increasing k gives (1 + 1e8) - 1e8 = 0; any other order gives 1.
  const std::vector<int32_t> three = {0, 1, 2};
  const std::vector<float> ones = {1, 1, 1}, cancel = {1.0f, 1e8f, -1e8f};
  float single = -1.0f;
  topk_reduce(cancel.data(), DType::f32, 1, 1, three.data(), ones.data(), DType::f32, 1, 3, &single, DType::f32, 1);
  EXPECT_EQ(single, 0.0f);
  // 1 + 3 * 2^-9 rounds once to bf16 1 + 2^-7; rounding every step would leave 1.
  const std::vector<int32_t> four = {0, 1, 2, 3};
  const std::vector<float> small = {1.0f, 0x1p-9f, 0x1p-9f, 0x1p-9f}, ones4 = {1, 1, 1, 1};
  uint16_t bf = 0;
  topk_reduce(small.data(), DType::f32, 1, 1, four.data(), ones4.data(), DType::f32, 1, 4, &bf, DType::bf16, 1);
  EXPECT_EQ(bf, f32_to_bf16(1.0f + 0x1p-7f));
  EXPECT_EQ(error_of([&] { topk_reduce(small.data(), DType::i32, 1, 1, four.data(), ones4.data(), DType::f32,
                                       1, 4, &bf, DType::bf16, 1); }),
            "down dtype = i32 is not f32, bf16 or f16");
}

// The three layouts put the same per-slot rows in different places; reductions must agree bit for bit.
TEST(RoutingTopkReduce, AllLayoutsGiveIdenticalOutputs) {
  std::mt19937 rng(3);
  std::normal_distribution<float> normal(0.0f, 1.0f);
  const int64_t tokens = 50, top_k = 4, experts = 8, cols = 16, n = tokens * top_k, t_max = n;
  const std::vector<int32_t> local = random_local_ids(rng, n, experts, true);
  std::vector<float> weights(n), slot_rows(n * cols);
  for (auto& w : weights) w = normal(rng);
  for (auto& v : slot_rows) v = normal(rng);
  const float nan = std::numeric_limits<float>::quiet_NaN();

  std::vector<int64_t> offsets(experts + 1);
  std::vector<int32_t> inv(n), src(n);
  permute_indices(local.data(), n, experts, offsets.data(), inv.data(), src.data());
  const std::vector<int32_t> rows_indexed = reduce_rows_indexed(local.data(), n);
  const std::vector<int32_t> rows_contiguous = reduce_rows_contiguous(local.data(), inv.data(), n);
  const std::vector<int32_t> rows_batched = reduce_rows_batched(local.data(), n, experts, t_max);
  std::vector<float> indexed(n * cols, nan), contiguous(n * cols, nan), batched(experts * t_max * cols, nan);
  for (int64_t f = 0; f < n; ++f) {
    if (local[f] < 0) {
      EXPECT_TRUE(rows_indexed[f] == -1 && rows_contiguous[f] == -1 && rows_batched[f] == -1);
      continue;
    }
    for (int64_t c = 0; c < cols; ++c) {
      indexed[rows_indexed[f] * cols + c] = slot_rows[f * cols + c];
      contiguous[rows_contiguous[f] * cols + c] = slot_rows[f * cols + c];
      batched[rows_batched[f] * cols + c] = slot_rows[f * cols + c];
    }
  }
  auto reduce = [&](const std::vector<float>& down, const std::vector<int32_t>& rows) {
    std::vector<uint16_t> out(tokens * cols);
    topk_reduce(down.data(), DType::f32, cols, cols, rows.data(), weights.data(), DType::f32, tokens, top_k,
                out.data(), DType::bf16, cols);
    return out;
  };
  const std::vector<uint16_t> from_indexed = reduce(indexed, rows_indexed);
  EXPECT_EQ(from_indexed, reduce(contiguous, rows_contiguous));
  EXPECT_EQ(from_indexed, reduce(batched, rows_batched));
  std::vector<float> combined(tokens * cols);
  combine_batched(batched.data(), DType::f32, t_max, cols, local.data(), weights.data(), DType::f32, tokens,
                  top_k, experts, combined.data());
  for (size_t i = 0; i < combined.size(); ++i) ASSERT_EQ(f32_to_bf16(combined[i]), from_indexed[i]);
}

}  // namespace
