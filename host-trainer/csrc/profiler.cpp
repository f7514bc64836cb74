// libtorch's own profiler (Kineto), which tch 0.26 does not bind: it records
// the operators a stretch of training runs and, on CUDA, the kernels, copies
// and runtime calls behind them, as torch.profiler does in Python. Used by
// src/profile.rs.

#include <kineto/ActivityType.h>
#include <torch/csrc/autograd/profiler_kineto.h>

#include "guarded.h"

#include <fstream>
#include <memory>
#include <set>
#include <stdexcept>
#include <string>

namespace {

namespace profiler = torch::autograd::profiler;
namespace impl = torch::profiler::impl;

std::set<impl::ActivityType> activities(bool cuda) {
  std::set<impl::ActivityType> set{impl::ActivityType::CPU};
  if (cuda) {
    set.insert(impl::ActivityType::CUDA);
  }
  return set;
}

// The few kinds of event a training step's cost is read from; Kineto's
// numbering differs between releases, its names do not.
const char* kind(uint8_t activity) {
  switch (static_cast<libkineto::ActivityType>(activity)) {
    case libkineto::ActivityType::CPU_OP:
      return "op";
    case libkineto::ActivityType::CONCURRENT_KERNEL:
      return "kernel";
    case libkineto::ActivityType::GPU_MEMCPY:
      return "memcpy";
    case libkineto::ActivityType::GPU_MEMSET:
      return "memset";
    case libkineto::ActivityType::CUDA_RUNTIME:
    case libkineto::ActivityType::CUDA_DRIVER:
      return "runtime";
    case libkineto::ActivityType::CUDA_SYNC:
      return "sync";
    default:
      return "other";
  }
}

// Names of kernels are C++ signatures: tabs and line breaks would split the
// file's fields.
std::string field(std::string text) {
  for (auto& c : text) {
    if (c == '\t' || c == '\n' || c == '\r') {
      c = ' ';
    }
  }
  return text;
}

}  // namespace

extern "C" {

const char* btl_profiler_error() { return btl::last_error.c_str(); }

// Starts recording on this thread and the threads it hands work to
// (autograd's backward included), CUDA activity too when `cuda` is set.
int btl_profiler_start(bool cuda) {
  return btl::guarded([&] {
    const impl::ProfilerConfig config(impl::ProfilerState::KINETO);
    profiler::prepareProfiler(config, activities(cuda));
    profiler::enableProfiler(config, activities(cuda));
  });
}

// Stops recording, writes the Chrome trace to `trace_path` and one line per
// event, "kind<TAB>name<TAB>nanoseconds", to `events_path`.
int btl_profiler_stop(const char* trace_path, const char* events_path) {
  return btl::guarded([&] {
    const auto result = profiler::disableProfiler();
    std::ofstream events(events_path);
    for (const auto& event : result->events()) {
      events << kind(event.activityType()) << '\t' << field(event.name()) << '\t'
             << event.durationNs() << '\n';
    }
    events.close();
    if (!events) {
      throw std::runtime_error(std::string("could not write ") + events_path);
    }
    result->save(trace_path);
  });
}

}  // extern "C"
