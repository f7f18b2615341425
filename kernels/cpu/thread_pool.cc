// The CPU kernels' persistent thread team (thread_pool.h): workers started on first use, kept for the
// process, each spinning for up to kSpinMicros after its last loop before sleeping. A loop is
// published by bumping a generation (one atomic word with its thread count and the workers that
// joined it); the caller runs its share, closes the loop, and waits only for the workers that joined
// before it closed. Constraints: one loop at a time (a mutex, try-locked: a busy team never blocks a
// caller), no allocation per loop, a worker touches a loop's function only after joining it.
#include "kernels/cpu/thread_pool.h"

#include <omp.h>
#include <sched.h>

#include <chrono>
#include <condition_variable>
#include <cstdlib>
#include <mutex>
#include <thread>
#include <vector>

namespace infer::cpu {
namespace {

// How long an idle worker spins before it sleeps. Between two nodes of a run the gap is a few
// microseconds and a single-threaded node tens; 200 us covers both, and caps what an idle team costs
// a busy machine per run (it yields the core to any runnable thread meanwhile).
// INFER_CPU_SPIN_US overrides it (0: sleep at once, as OpenMP's passive policy).
int64_t spin_micros() {
  static const int64_t us = [] {
    const char* s = std::getenv("INFER_CPU_SPIN_US");
    if (!s || !*s) return int64_t{200};
    char* end = nullptr;
    const long long v = std::strtoll(s, &end, 10);
    return end && *end == '\0' && v >= 0 ? static_cast<int64_t>(v) : int64_t{200};
  }();
  return us;
}

void pause_a_little() {
  for (int i = 0; i < 8; ++i) {
#if defined(__x86_64__) || defined(__i386__)
    __builtin_ia32_pause();
#endif
  }
}

thread_local bool inside = false;  // a worker, or a caller inside its loop: a nested loop runs serially

class Team {
 public:
  static Team& get() {
    static Team* team = new Team;  // never destroyed: workers may still sleep at exit
    return *team;
  }

  void run(int threads, void (*fn)(void*, int), void* ctx) {
    if (inside || threads <= 1) return fn(ctx, 0);  // checked first: try_lock by the owner is undefined
    std::unique_lock<std::mutex> busy(busy_, std::try_to_lock);
    if (!busy.owns_lock()) return fn(ctx, 0);
    threads = std::min(threads, kMaxThreads);
    const uint64_t gen = (state_.load(std::memory_order_relaxed) >> kGenShift) + 1;
    grow(threads - 1, gen - 1);
    fn_ = fn, ctx_ = ctx;
    done_.store(0, std::memory_order_relaxed);
    state_.store(gen << kGenShift | uint64_t(threads) << kThreadsShift, std::memory_order_seq_cst);
    if (sleepers_.load(std::memory_order_seq_cst) > 0) {
      std::lock_guard<std::mutex> lock(sleep_mutex_);
      wake_.notify_all();
    }
    inside = true;
    fn(ctx, 0);
    inside = false;
    // close the loop: a worker that has not joined by now stays out (on a busy machine it may not run
    // for milliseconds; the caller's fn has done all the work), and wait for those that joined
    const uint64_t joined = state_.fetch_or(kClosed, std::memory_order_acq_rel) & kJoinedMask;
    for (int i = 0; done_.load(std::memory_order_acquire) < joined; ++i) {
      pause_a_little();
      if (i >= 256) sched_yield();  // a joined worker that was descheduled needs a core
    }
  }

 private:
  // state_: the loop's generation, whether it is closed, its thread count, the workers that joined
  static constexpr int kGenShift = 32, kThreadsShift = 16;
  static constexpr uint64_t kClosed = uint64_t(1) << 31, kJoinedMask = 0xffff;
  static constexpr int kMaxThreads = 255;

  void grow(int workers, uint64_t current) {
    while (static_cast<int>(workers_.size()) < workers) {
      const int id = static_cast<int>(workers_.size()) + 1;
      workers_.emplace_back([this, id, current] { work(id, current); });
      workers_.back().detach();
    }
  }

  // Joins the loop in state s if it is open and has room for worker id; false otherwise.
  bool join(int id, uint64_t s) {
    while (!(s & kClosed) && id < static_cast<int>((s >> kThreadsShift) & 0xff)) {
      if (state_.compare_exchange_weak(s, s + 1, std::memory_order_acq_rel)) return true;
    }
    return false;
  }

  void work(int id, uint64_t seen) {  // seen: the last generation this worker has looked at
    inside = true;
    for (;;) {
      uint64_t s = state_.load(std::memory_order_acquire);
      const auto until = std::chrono::steady_clock::now() + std::chrono::microseconds(spin_micros());
      while ((s >> kGenShift) == seen && std::chrono::steady_clock::now() < until) {
        pause_a_little();
        sched_yield();
        s = state_.load(std::memory_order_acquire);
      }
      if ((s >> kGenShift) == seen) {
        std::unique_lock<std::mutex> lock(sleep_mutex_);
        sleepers_.fetch_add(1, std::memory_order_seq_cst);
        wake_.wait(lock, [&] { return (state_.load(std::memory_order_seq_cst) >> kGenShift) != seen; });
        sleepers_.fetch_sub(1, std::memory_order_seq_cst);
        s = state_.load(std::memory_order_acquire);
      }
      seen = s >> kGenShift;
      if (join(id, s)) {
        fn_(ctx_, id);
        done_.fetch_add(1, std::memory_order_release);
      }
    }
  }

  std::mutex busy_;
  std::vector<std::thread> workers_;
  void (*fn_)(void*, int) = nullptr;
  void* ctx_ = nullptr;
  std::atomic<uint64_t> state_{0};
  std::atomic<uint64_t> done_{0};  // joined workers that have finished the current loop
  std::atomic<int> sleepers_{0};
  std::mutex sleep_mutex_;
  std::condition_variable wake_;
};

}  // namespace

int team_threads() { return std::max(1, omp_get_max_threads()); }

void team_run(int threads, void (*fn)(void*, int), void* ctx) { Team::get().run(threads, fn, ctx); }

}  // namespace infer::cpu
