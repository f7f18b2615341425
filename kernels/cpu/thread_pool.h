// parallel_for: the CPU kernels' own persistent team of threads, for the channels-last (mobile) path
// whose nodes are tens of microseconds long. Its workers wait for the next loop spinning (pause +
// sched_yield, so a runnable thread of anyone else gets the core) for up to kSpinMicros before they
// sleep on a condition variable; at batch 1 the next node comes within microseconds, so they never
// sleep inside a run. OpenMP under OMP_WAIT_POLICY=passive sleeps at once and each region's wake-up
// costs ~7 us plus a late second thread (docs/kernels.md "CPU: the kernels' thread team"). One loop at
// a time: a second caller (another session's thread) or a nested call runs its loop on its own thread.
#pragma once

#include <algorithm>
#include <atomic>
#include <cstdint>

namespace infer::cpu {

// The threads a kernel may use: omp_get_max_threads() of the calling thread (infer's --threads and
// SessionOptions set it through omp_set_num_threads), so one setting governs both kinds of kernel.
int team_threads();

// Runs fn(ctx, 0) on the caller and fn(ctx, t) on each worker t in 1 .. threads-1 that joins before
// the caller's own call has returned; returns when every call has. So fn must share out the work
// dynamically (GuidedChunks): the caller's call alone must be able to finish it. A nested call, or one
// while the team serves another caller, runs fn(ctx, 0) alone.
void team_run(int threads, void (*fn)(void*, int), void* ctx);

// Hands out [0, n) in chunks of half the remaining work per thread and more (libgomp's guided schedule
// with a minimum chunk of 1): the thread that starts first takes a large share, a late one the rest.
class GuidedChunks {
 public:
  GuidedChunks(int64_t n, int threads) : n_(n), threads_(std::max(threads, 1)) {}
  bool next(int64_t& begin, int64_t& end) {
    int64_t b = next_.load(std::memory_order_relaxed);
    for (;;) {
      if (b >= n_) return false;
      const int64_t chunk = std::max<int64_t>(1, (n_ - b + threads_ - 1) / threads_);
      if (next_.compare_exchange_weak(b, b + chunk, std::memory_order_relaxed)) {
        begin = b, end = b + chunk;
        return true;
      }
    }
  }

 private:
  const int64_t n_;
  const int threads_;
  std::atomic<int64_t> next_{0};
};

// body(begin, end, thread) over chunks of [0, n), on up to team_threads() threads when `parallel`
// (else on the caller alone, as one chunk); `thread` < the thread count, for per-thread buffers.
template <class F>
void parallel_for(int64_t n, bool parallel, F&& body, int max_threads = 0) {
  if (n <= 0) return;
  int threads = parallel ? team_threads() : 1;
  if (max_threads > 0) threads = std::min(threads, max_threads);
  threads = static_cast<int>(std::min<int64_t>(threads, n));
  if (threads <= 1) {
    body(int64_t{0}, n, 0);
    return;
  }
  GuidedChunks chunks(n, threads);
  auto task = [&](int t) {
    int64_t b, e;
    while (chunks.next(b, e)) body(b, e, t);
  };
  using Task = decltype(task);
  team_run(threads, [](void* c, int t) { (*static_cast<Task*>(c))(t); }, &task);
}

}  // namespace infer::cpu
