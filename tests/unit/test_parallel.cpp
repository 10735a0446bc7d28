// parallel_for: every index once, uneven work balanced, the lowest failing index's error.
#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

#include "common/parallel.hpp"

namespace {

TEST(ParallelFor, EveryIndexRunsExactlyOnceForAnyThreadCount) {
  for (int64_t n : {0, 1, 7, 129}) {
    for (int threads : {1, 2, 3, 8, 200}) {
      std::vector<std::atomic<int>> calls(static_cast<size_t>(n));
      moeq::parallel_for(n, threads, [&](int64_t i) { calls[static_cast<size_t>(i)].fetch_add(1); });
      for (int64_t i = 0; i < n; ++i)
        EXPECT_EQ(calls[static_cast<size_t>(i)].load(), 1) << "n = " << n << ", threads = " << threads << ", i = " << i;
    }
  }
}

TEST(ParallelFor, ZeroOrNegativeThreadsStillRunsEverything) {
  std::atomic<int64_t> sum{0};
  moeq::parallel_for(10, 0, [&](int64_t i) { sum += i; });
  moeq::parallel_for(10, -3, [&](int64_t i) { sum += i; });
  EXPECT_EQ(sum.load(), 90);
}

TEST(ParallelFor, ItemsAreClaimedAsThreadsFreeUp) {
  // Item 0 waits until the other 39 are done: with two threads the other one must take them all,
  // which a static split (even / odd indices) would not do. The wait gives up after 10 s.
  std::atomic<int> others_done{0};
  bool waited_out = false;
  moeq::parallel_for(40, 2, [&](int64_t i) {
    if (i != 0) {
      ++others_done;
      return;
    }
    const auto give_up = std::chrono::steady_clock::now() + std::chrono::seconds(10);
    while (others_done.load() < 39 && std::chrono::steady_clock::now() < give_up)
      std::this_thread::sleep_for(std::chrono::milliseconds(1));
    waited_out = others_done.load() < 39;
  });
  EXPECT_FALSE(waited_out) << "only " << others_done.load() << " of the other 39 items ran while item 0 waited";
}

TEST(ParallelFor, RethrowsTheLowestFailingIndexAfterRunningTheRest) {
  std::atomic<int> ran{0};
  try {
    moeq::parallel_for(50, 4, [&](int64_t i) {
      ++ran;
      if (i == 31 || i == 17 || i == 45) throw std::runtime_error("item " + std::to_string(i));
    });
    FAIL() << "no exception";
  } catch (const std::runtime_error& e) {
    EXPECT_STREQ(e.what(), "item 17");
  }
  EXPECT_EQ(ran.load(), 50);
}

TEST(ParallelFor, HardwareThreadsIsPositive) { EXPECT_GE(moeq::hardware_threads(), 1); }

}  // namespace
