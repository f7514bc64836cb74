// What the C++ shims share: no C++ exception crosses into Rust. A call
// returns 0, or 1 with the reason kept for the thread's next
// btl_*_error() call.

#pragma once

#include <exception>
#include <string>

namespace btl {

inline thread_local std::string last_error;

template <typename F>
int guarded(F f) noexcept {
  try {
    f();
    return 0;
  } catch (const std::exception& e) {
    last_error = e.what();
  } catch (...) {
    last_error = "an unknown C++ exception";
  }
  return 1;
}

}  // namespace btl
