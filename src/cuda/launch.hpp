#pragma once
// One kernel launch through the driver API: grid, block, dynamic shared memory, stream and
// the kernel's parameters by value (each argument's address goes into the parameter array); on
// sm_90 with programmatic stream serialization (programmatic_launch(), driver.hpp).
#include "cuda/driver.hpp"

namespace moeq::cuda {

struct LaunchShape {
  unsigned grid_x = 1, grid_y = 1, grid_z = 1;
  unsigned block_x = 1, block_y = 1, block_z = 1;
  unsigned smem_bytes = 0;
  unsigned cluster_z = 1;  // > 1: thread-block clusters of that many CTAs along z (sm_90; divides grid_z)
  // false: never with programmatic stream serialization (the kernel starts once the one before it
  // has finished), where a call site measured the early start to cost more than it hides.
  bool programmatic = true;
};

template <typename... Args>
void launch(CUfunction function, const LaunchShape& s, CUstream stream, const Args&... args) {
  if (omitted_by_diagnostics(function)) return;
  void* params[] = {const_cast<void*>(static_cast<const void*>(&args))..., nullptr};
  const bool dependent = s.programmatic && programmatic_launch(function);
  if (s.cluster_z == 1 && !dependent) {
    check(driver().cuLaunchKernel(function, s.grid_x, s.grid_y, s.grid_z, s.block_x, s.block_y, s.block_z,
                                  s.smem_bytes, stream, params, nullptr),
          "cuLaunchKernel");
    return;
  }
  LaunchAttribute attrs[2];
  unsigned num_attrs = 0;
  if (s.cluster_z > 1) {
    attrs[num_attrs].id = kLaunchAttributeClusterDimension;
    attrs[num_attrs++].value.cluster_dim = {1, 1, s.cluster_z};
  }
  if (dependent) {
    attrs[num_attrs].id = kLaunchAttributeProgrammaticStreamSerialization;
    attrs[num_attrs++].value.programmatic_stream_serialization_allowed = 1;
  }
  LaunchConfig config;
  config.grid_x = s.grid_x;
  config.grid_y = s.grid_y;
  config.grid_z = s.grid_z;
  config.block_x = s.block_x;
  config.block_y = s.block_y;
  config.block_z = s.block_z;
  config.shared_bytes = s.smem_bytes;
  config.stream = stream;
  config.attrs = attrs;
  config.num_attrs = num_attrs;
  check(driver().cuLaunchKernelEx(&config, function, params, nullptr), "cuLaunchKernelEx");
}

}  // namespace moeq::cuda
