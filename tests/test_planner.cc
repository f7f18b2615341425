// Tests of the memory planner (engine/src/planner.h): a hand-computed plan with exact offsets, edge
// cases (empty requests, bad lifetimes), and >= 200 random request sets checked for the invariants:
// no two live-overlapping requests overlap in memory, aligned offsets, lower bound <= arena <= naive.
#include <doctest/doctest.h>

#include <algorithm>
#include <cstdint>
#include <random>
#include <vector>

#include "infer/error.h"
#include "planner.h"

using infer::detail::kArenaAlignment;
using infer::detail::plan_memory;
using infer::detail::PlanRequest;

namespace {

uint64_t aligned(uint64_t b) { return (b + kArenaAlignment - 1) / kArenaAlignment * kArenaAlignment; }

// The lower bound by brute force over every step (independent of the planner's sweep).
uint64_t brute_lower_bound(const std::vector<PlanRequest>& r) {
  if (r.empty()) return 0;
  int lo = r[0].first, hi = r[0].last;
  for (const auto& q : r) lo = std::min(lo, q.first), hi = std::max(hi, q.last);
  uint64_t best = 0;
  for (int t = lo; t <= hi; ++t) {
    uint64_t live = 0;
    for (const auto& q : r)
      if (q.first <= t && t <= q.last) live += aligned(q.bytes);
    best = std::max(best, live);
  }
  return best;
}

void check_invariants(const std::vector<PlanRequest>& r, const infer::detail::MemoryPlan& plan) {
  REQUIRE(plan.offsets.size() == r.size());
  uint64_t naive = 0, top = 0;
  for (size_t i = 0; i < r.size(); ++i) {
    CHECK(plan.offsets[i] % kArenaAlignment == 0);
    naive += aligned(r[i].bytes);
    if (r[i].bytes == 0) {
      CHECK(plan.offsets[i] == 0);
      continue;
    }
    top = std::max(top, plan.offsets[i] + aligned(r[i].bytes));
    for (size_t j = 0; j < i; ++j) {
      if (r[j].bytes == 0) continue;
      bool live_together = r[i].first <= r[j].last && r[j].first <= r[i].last;
      if (!live_together) continue;
      bool disjoint = plan.offsets[i] + r[i].bytes <= plan.offsets[j] ||
                      plan.offsets[j] + r[j].bytes <= plan.offsets[i];
      CHECK_MESSAGE(disjoint, "requests ", i, " and ", j, " overlap");
    }
  }
  CHECK(plan.report.arena_bytes == top);
  CHECK(plan.report.naive_bytes == naive);
  CHECK(plan.report.lower_bound_bytes == brute_lower_bound(r));
  CHECK(plan.report.arena_bytes >= plan.report.lower_bound_bytes);
  CHECK(plan.report.arena_bytes <= plan.report.naive_bytes);
  CHECK(plan.report.workspace_bytes == 0);
  CHECK(plan.report.weight_bytes == 0);
}

}  // namespace

TEST_CASE("planner: hand-computed chain reuses freed memory") {
  // A chain a -> b -> c -> d (each read by the next step), sizes in bytes:
  //   0: 1000 bytes [-1, 0] (aligned 1024)   1: 3000 bytes [0, 1] (3072)
  //   2: 2000 bytes [1, 2] (2048)            3: 500 bytes  [2, 3] (512)
  // Order by size: 1, 2, 0, 3.
  //   1 -> 0 (nothing placed).
  //   2 overlaps 1 (step 1): no gap below 1, so it goes above: 3072.
  //   0 overlaps 1 (step 0) only: the gap [0, 0) is empty, so above 1: 3072 (2 is not live with 0).
  //   3 overlaps 2 (step 2) only: the gap [0, 3072) below 2 fits 512, so 0.
  // arena = 3072 + 2048 = 5120; naive = 1024 + 3072 + 2048 + 512 = 6656;
  // lower bound = max(step -1: 1024, 0: 4096, 1: 5120, 2: 2560, 3: 512) = 5120.
  std::vector<PlanRequest> r = {{1000, -1, 0}, {3000, 0, 1}, {2000, 1, 2}, {500, 2, 3}};
  auto plan = plan_memory(r);
  CHECK(plan.offsets == std::vector<uint64_t>{3072, 0, 3072, 0});
  CHECK(plan.report.arena_bytes == 5120);
  CHECK(plan.report.naive_bytes == 6656);
  CHECK(plan.report.lower_bound_bytes == 5120);
  check_invariants(r, plan);
}

TEST_CASE("planner: best fit picks the smallest gap that fits") {
  // Two long-lived blocks with gaps between short-lived ones, all placed largest first:
  //   0: 4096 [0, 9] -> 0       1: 2048 [0, 1] -> 4096   2: 1024 [0, 9] -> 6144
  //   3: 768  [0, 9] -> 7168    (above 2)
  //   4: 512  [2, 3]: live with 0, 2, 3 only; gaps: [4096, 6144) of 2048 -> 4096.
  //   5: 256  [2, 3]: live with 0, 2, 3, 4; gaps: [4608, 6144) of 1536 -> 4608.
  std::vector<PlanRequest> r = {{4096, 0, 9}, {2048, 0, 1}, {1024, 0, 9},
                                {768, 0, 9},  {512, 2, 3},  {256, 2, 3}};
  auto plan = plan_memory(r);
  CHECK(plan.offsets == std::vector<uint64_t>{0, 4096, 6144, 7168, 4096, 4608});
  CHECK(plan.report.arena_bytes == 7168 + 768);
  check_invariants(r, plan);

  // Best fit, not first fit: two holes below the top, the lower one larger; the request takes the
  // smaller, higher one.
  //   0: 1024 [0,1] -> 0      1: 768 [0,9] -> 1024    2: 768 [0,9] -> 1792    3: 512 [0,1] -> 2560
  //   5: 256 [0,9] (same size as 4, earlier first step, so placed before it) -> 3072
  //   4: 256 [2,3]: live with 1, 2, 5; holes [0, 1024) and [2560, 3072): the smaller -> 2560.
  std::vector<PlanRequest> s = {{1024, 0, 1}, {768, 0, 9}, {768, 0, 9},
                                {512, 0, 1},  {256, 2, 3}, {256, 0, 9}};
  auto p2 = plan_memory(s);
  CHECK(p2.offsets == std::vector<uint64_t>{0, 1024, 1792, 2560, 2560, 3072});
  CHECK(p2.report.arena_bytes == 3328);
  check_invariants(s, p2);

  std::vector<PlanRequest> t = {{1024, 0, 9}, {256, 0, 9}, {512, 0, 9}, {256, 0, 1},
                                {1024, 0, 1}, {256, 5, 6}};
  // order: 0 (1024, first 0) -> 0, 4 (1024 [0,1]) -> 1024, 2 (512) -> 2048, 1 (256 [0,9]) -> 2560,
  // 3 (256 [0,1]) -> 2816; 5 (256 [5,6]) live with 0, 2, 1: gap [1024, 2048) of 1024 -> 1024.
  auto p3 = plan_memory(t);
  CHECK(p3.offsets == std::vector<uint64_t>{0, 2560, 2048, 2816, 1024, 1024});
  check_invariants(t, p3);
}

TEST_CASE("planner: empty requests, alignment and errors") {
  CHECK(plan_memory({}).report.arena_bytes == 0);
  auto plan = plan_memory({{0, 0, 5}, {1, 0, 5}, {257, 0, 5}});
  CHECK(plan.offsets == std::vector<uint64_t>{0, 512, 0});  // 257 -> 512 bytes first, then 1 -> 256
  CHECK(plan.report.arena_bytes == 768);
  CHECK(plan.report.naive_bytes == 768);
  CHECK(plan.report.lower_bound_bytes == 768);

  CHECK_THROWS_AS(plan_memory({{16, 3, 2}}), infer::Error);
  CHECK_THROWS_AS(plan_memory({{UINT64_MAX, 0, 0}}), infer::Error);
  CHECK_THROWS_AS(plan_memory({{UINT64_MAX / 2, 0, 0}, {UINT64_MAX / 2, 0, 0}, {1024, 0, 0}}),
                  infer::Error);
}

TEST_CASE("planner: deterministic") {
  std::vector<PlanRequest> r = {{512, 0, 3}, {512, 1, 2}, {512, 0, 1}, {512, 2, 4}};
  CHECK(plan_memory(r).offsets == plan_memory(r).offsets);
}

TEST_CASE("planner: invariants on 300 random request sets") {
  std::mt19937_64 rng(12345);
  for (int trial = 0; trial < 300; ++trial) {
    CAPTURE(trial);
    int steps = 1 + static_cast<int>(rng() % 30);
    int count = static_cast<int>(rng() % 60);
    std::vector<PlanRequest> r;
    for (int i = 0; i < count; ++i) {
      PlanRequest q;
      // Mix of tiny, unaligned, exactly-aligned and large sizes, plus some empty ones.
      switch (rng() % 5) {
        case 0: q.bytes = 0; break;
        case 1: q.bytes = 1 + rng() % 300; break;
        case 2: q.bytes = kArenaAlignment * (1 + rng() % 16); break;
        default: q.bytes = rng() % 200000; break;
      }
      q.first = static_cast<int>(rng() % static_cast<uint64_t>(steps + 1)) - 1;
      q.last = q.first + static_cast<int>(rng() % static_cast<uint64_t>(steps + 1 - q.first));
      r.push_back(q);
    }
    auto plan = plan_memory(r);
    check_invariants(r, plan);
  }
}
