#pragma once
// A parallel loop over [0, n) on plain std::threads: problem generation and batch JIT compiles.
#include <cstdint>
#include <functional>

namespace moeq {

// Calls body(i) once for each i in [0, n) on up to `threads` threads (this one included), each
// taking the next unclaimed index, so items of uneven cost balance. Returns after every call has
// finished; if calls threw, rethrows the exception of the lowest index (and the rest are lost).
// A thread that cannot be started leaves its share to the others.
void parallel_for(int64_t n, int threads, const std::function<void(int64_t)>& body);

// std::thread::hardware_concurrency(), at least 1.
int hardware_threads();

}  // namespace moeq
