#pragma once
// One kernel launch through the driver API: grid, block, dynamic shared memory, stream and
// the kernel's parameters by value (each argument's address goes into the parameter array).
#include "cuda/driver.hpp"

namespace moeq::cuda {

struct LaunchShape {
  unsigned grid_x = 1, grid_y = 1, grid_z = 1;
  unsigned block_x = 1, block_y = 1, block_z = 1;
  unsigned smem_bytes = 0;
};

template <typename... Args>
void launch(CUfunction function, const LaunchShape& s, CUstream stream, const Args&... args) {
  void* params[] = {const_cast<void*>(static_cast<const void*>(&args))..., nullptr};
  check(driver().cuLaunchKernel(function, s.grid_x, s.grid_y, s.grid_z, s.block_x, s.block_y, s.block_z,
                                s.smem_bytes, stream, params, nullptr),
        "cuLaunchKernel");
}

}  // namespace moeq::cuda
