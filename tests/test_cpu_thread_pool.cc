// The CPU kernels' thread team (kernels/cpu/thread_pool.h): parallel_for visits every index exactly
// once on any thread count and chunking, gives each thread a distinct id below the count, runs
// nested and concurrent loops (another caller while the team is busy) serially but completely, and
// keeps working across many short loops with workers that have fallen asleep in between.
#include <doctest/doctest.h>

#include <omp.h>

#include <atomic>
#include <chrono>
#include <cstdint>
#include <thread>
#include <vector>

#include "kernels/cpu/thread_pool.h"

using infer::cpu::GuidedChunks;
using infer::cpu::parallel_for;

namespace {

// parallel_for over n indices with the given thread cap; every index's visit count, the ids seen.
void check_cover(int64_t n, int threads) {
  std::vector<std::atomic<int>> seen(static_cast<size_t>(n));
  std::vector<std::atomic<int>> ids(64);
  parallel_for(
      n, true,
      [&](int64_t b, int64_t e, int t) {
        REQUIRE(b < e);
        REQUIRE(t >= 0);
        REQUIRE(t < 64);
        ids[static_cast<size_t>(t)].fetch_add(1);
        for (int64_t i = b; i < e; ++i) seen[static_cast<size_t>(i)].fetch_add(1);
      },
      threads);
  for (int64_t i = 0; i < n; ++i) REQUIRE(seen[static_cast<size_t>(i)].load() == 1);
  const int cap = threads > 0 ? std::min(threads, omp_get_max_threads()) : omp_get_max_threads();
  for (int t = std::max(cap, 1); t < 64; ++t) CHECK(ids[static_cast<size_t>(t)].load() == 0);
}

}  // namespace

TEST_CASE("GuidedChunks hands out [0, n) in shrinking chunks, each index once") {
  for (int threads : {1, 2, 3, 8})
    for (int64_t n : {1, 2, 7, 100, 1001}) {
      GuidedChunks c(n, threads);
      int64_t b = 0, e = 0, expect = 0, prev = n + 1;
      while (c.next(b, e)) {
        CHECK(b == expect);
        CHECK(e > b);
        CHECK(e - b <= prev);  // never grows
        prev = e - b;
        expect = e;
      }
      CHECK(expect == n);
    }
  GuidedChunks two(100, 2);
  int64_t b = 0, e = 0;
  REQUIRE(two.next(b, e));
  CHECK(e - b == 50);  // the first thread takes half
}

TEST_CASE("parallel_for covers every index exactly once") {
  for (int threads : {0, 1, 2, 3, 4})
    for (int64_t n : {1, 2, 3, 17, 1000, 100003}) check_cover(n, threads);
  int calls = 0;
  parallel_for(0, true, [&](int64_t, int64_t, int) { ++calls; });
  CHECK(calls == 0);
  // not parallel: one chunk on the caller
  parallel_for(10, false, [&](int64_t b, int64_t e, int t) {
    ++calls;
    CHECK(b == 0);
    CHECK(e == 10);
    CHECK(t == 0);
  });
  CHECK(calls == 1);
}

TEST_CASE("parallel_for with more threads than the machine, many short loops, sleeping workers") {
  const int saved = omp_get_max_threads();
  omp_set_num_threads(6);
  for (int rep = 0; rep < 2000; ++rep) check_cover(1 + rep % 13, 0);
  // let the workers fall asleep (past their spin), then wake them with a loop
  std::this_thread::sleep_for(std::chrono::milliseconds(5));
  check_cover(1000, 0);
  omp_set_num_threads(saved);
}

TEST_CASE("nested and concurrent parallel_for run completely") {
  const int saved = omp_get_max_threads();
  omp_set_num_threads(4);
  std::atomic<int64_t> sum{0};
  parallel_for(8, true, [&](int64_t b, int64_t e, int) {
    for (int64_t i = b; i < e; ++i)
      parallel_for(100, true, [&](int64_t b2, int64_t e2, int) {
        for (int64_t j = b2; j < e2; ++j) sum.fetch_add(i * 100 + j);
      });
  });
  CHECK(sum.load() == 799 * 800 / 2);
  // four callers at once: one gets the team, the others run serially; every loop completes
  std::vector<std::thread> callers;
  std::vector<int64_t> sums(4, 0);
  for (int c = 0; c < 4; ++c)
    callers.emplace_back([&, c] {
      omp_set_num_threads(4);
      for (int rep = 0; rep < 200; ++rep) {
        std::atomic<int64_t> s{0};
        parallel_for(1000, true, [&](int64_t b, int64_t e, int) {
          for (int64_t i = b; i < e; ++i) s.fetch_add(i);
        });
        sums[static_cast<size_t>(c)] += s.load();
      }
    });
  for (auto& t : callers) t.join();
  for (int c = 0; c < 4; ++c) CHECK(sums[static_cast<size_t>(c)] == 200 * (999 * 1000 / 2));
  omp_set_num_threads(saved);
}
