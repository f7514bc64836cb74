// libtorch's autocast state for one device type, which tch 0.26 cannot set:
// its `autocast` turns on CUDA autocast with libtorch's default float16 and
// has no way to choose bfloat16 or the CPU. Used by src/autocast.rs; device
// types and dtypes are c10's numbering (DeviceType, ScalarType).

#include <ATen/autocast_mode.h>

#include "guarded.h"

extern "C" {

const char* btl_autocast_error() { return btl::last_error.c_str(); }

int btl_autocast_state(int device_type, bool* enabled, int* dtype) {
  return btl::guarded([&] {
    const auto device = static_cast<c10::DeviceType>(device_type);
    *enabled = at::autocast::is_autocast_enabled(device);
    *dtype = static_cast<int>(at::autocast::get_autocast_dtype(device));
  });
}

// Enters an autocast region the way torch.autocast's __enter__ does.
int btl_autocast_enter(int device_type, int dtype) {
  return btl::guarded([&] {
    const auto device = static_cast<c10::DeviceType>(device_type);
    at::autocast::set_autocast_dtype(device, static_cast<c10::ScalarType>(dtype));
    at::autocast::set_autocast_enabled(device, true);
    at::autocast::increment_nesting();
  });
}

// Leaves it as torch.autocast's __exit__ does: the weights cast for the
// region are dropped when the outermost region ends (they would be stale
// after an optimizer step), and the previous state comes back.
int btl_autocast_exit(int device_type, bool was_enabled, int was_dtype) {
  return btl::guarded([&] {
    const auto device = static_cast<c10::DeviceType>(device_type);
    if (at::autocast::decrement_nesting() == 0) {
      at::autocast::clear_cache();
    }
    at::autocast::set_autocast_enabled(device, was_enabled);
    at::autocast::set_autocast_dtype(device, static_cast<c10::ScalarType>(was_dtype));
  });
}

}  // extern "C"
