#include "common/parallel.hpp"

#include <algorithm>
#include <atomic>
#include <exception>
#include <mutex>
#include <thread>
#include <vector>

namespace moeq {

int hardware_threads() { return static_cast<int>(std::max(1u, std::thread::hardware_concurrency())); }

void parallel_for(int64_t n, int threads, const std::function<void(int64_t)>& body) {
  if (n <= 0) return;
  const int64_t num_workers = std::max<int64_t>(1, std::min<int64_t>(threads, n));
  std::atomic<int64_t> next{0};
  std::mutex error_mutex;
  std::exception_ptr error;
  int64_t error_index = n;
  auto work = [&] {
    for (int64_t i = next.fetch_add(1); i < n; i = next.fetch_add(1)) {
      try {
        body(i);
      } catch (...) {
        std::lock_guard<std::mutex> lock(error_mutex);
        if (i < error_index) {
          error_index = i;
          error = std::current_exception();
        }
      }
    }
  };
  std::vector<std::thread> pool;
  pool.reserve(static_cast<size_t>(num_workers - 1));
  for (int64_t w = 1; w < num_workers; ++w) {
    try {
      pool.emplace_back(work);
    } catch (...) {
      break;  // NOTE: the indices are claimed dynamically, so the started workers (and this one) take them all
    }
  }
  work();
  for (auto& th : pool) th.join();
  if (error) std::rethrow_exception(error);
}

}  // namespace moeq
