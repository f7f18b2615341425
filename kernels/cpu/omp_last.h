// MasterLast lets the master thread of an OpenMP parallel region reach the region's closing barrier
// after the other threads, waiting for them with a short, bounded spin (at most 30 microseconds)
// instead of sleeping at the barrier. Under OMP_WAIT_POLICY=passive a thread that waits at a barrier
// sleeps on a futex at once, and on this VM waking it takes tens of microseconds: the master finishing
// its share first and sleeping puts that wake-up on the critical path of every node. The workers'
// own sleep (between regions) is untouched. Use after a `nowait` loop, one arrive() per thread.
// SpinArrival does the same for a barrier inside a region: a bounded spin until all have arrived,
// then `#pragma omp barrier`, which they then reach together.
#pragma once

#include <omp.h>

#include <atomic>
#include <chrono>

namespace infer::cpu {

// Bounded spin until every thread of the team has called arrive() (or kSpin has passed); then the
// caller runs `#pragma omp barrier`, which the threads now reach together.
class SpinArrival {
 public:
  void arrive() {
    const int n = omp_get_num_threads();
    if (n == 1) return;
    count_.fetch_add(1, std::memory_order_acq_rel);
    const auto until = std::chrono::steady_clock::now() + kSpin;
    while (count_.load(std::memory_order_acquire) < n) {
      for (int i = 0; i < 16; ++i) {
#if defined(__x86_64__) || defined(__i386__)
        __builtin_ia32_pause();
#endif
      }
      if (std::chrono::steady_clock::now() >= until) return;
    }
  }

 private:
  // Winograd's two phase barriers, ResNet-50 (08:13 UTC, four alternating pairs): its 16 Winograd
  // nodes 9.33-9.39 ms with the barrier alone, 9.17-9.25 with the spin first.
  static constexpr std::chrono::microseconds kSpin{30};
  std::atomic<int> count_{0};
};

class MasterLast {
 public:
  void arrive() {
    if (omp_get_thread_num() != 0) {
      done_.fetch_add(1, std::memory_order_release);
      return;
    }
    const int others = omp_get_num_threads() - 1;
    if (others == 0) return;
    const auto until = std::chrono::steady_clock::now() + kSpin;
    while (done_.load(std::memory_order_acquire) < others) {
      for (int i = 0; i < 16; ++i) pause();
      if (std::chrono::steady_clock::now() >= until) return;  // still busy (or descheduled): sleep at the barrier
    }
  }

 private:
  static void pause() {
#if defined(__x86_64__) || defined(__i386__)
    __builtin_ia32_pause();
#endif
  }
  // docs/kernels.md "OpenMP schedules": ResNet-50 with no spin 40.2-42.5 ms, 10 us 37.9-42.2, 30 us
  // 37.3-39.2, 100 us 37.7-39.2; under one busy-loop process 30 us was level with none (72-77 ms).
  static constexpr std::chrono::microseconds kSpin{30};
  std::atomic<int> done_{0};
};

}  // namespace infer::cpu
