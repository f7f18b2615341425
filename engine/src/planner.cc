// The memory planner: greedy by size, best fit (TFLite ArenaPlanner; Pisarchyk & Lee 2020). Requests
// are placed largest first; each goes into the smallest gap between already-placed requests whose
// lifetimes overlap its own, else above the highest of them. Deterministic for a given input; every
// offset and size a multiple of kArenaAlignment; bad requests (first > last, overflow) are an Error.
#include "planner.h"

#include <algorithm>
#include <limits>
#include <numeric>
#include <string>

#include "infer/error.h"

namespace infer::detail {
namespace {

uint64_t align_up(uint64_t bytes, size_t index) {
  if (bytes > std::numeric_limits<uint64_t>::max() - (kArenaAlignment - 1))
    throw Error("memory planner: request " + std::to_string(index) + " of " + std::to_string(bytes) +
                " bytes is too large");
  return (bytes + kArenaAlignment - 1) / kArenaAlignment * kArenaAlignment;
}

uint64_t checked_add(uint64_t a, uint64_t b, const char* what) {
  if (a > std::numeric_limits<uint64_t>::max() - b)
    throw Error(std::string("memory planner: ") + what + " overflows 64 bits");
  return a + b;
}

bool lifetimes_overlap(const PlanRequest& a, const PlanRequest& b) {
  return a.first <= b.last && b.first <= a.last;
}

// Largest sum of aligned sizes live at one step. The maximum is reached at some request's first
// step (the live set only grows there), so only those steps are examined: a sweep over sorted
// start and end events.
uint64_t lower_bound(const std::vector<PlanRequest>& requests, const std::vector<uint64_t>& sizes) {
  struct Event {
    int step;
    int order;  // 0 = start before 1 = end at the same step: a request ending at t is live at t
    uint64_t bytes;
  };
  std::vector<Event> events;
  for (size_t i = 0; i < requests.size(); ++i) {
    if (sizes[i] == 0) continue;
    events.push_back({requests[i].first, 0, sizes[i]});
    events.push_back({requests[i].last, 1, sizes[i]});
  }
  std::sort(events.begin(), events.end(), [](const Event& a, const Event& b) {
    return a.step != b.step ? a.step < b.step : a.order < b.order;
  });
  uint64_t live = 0, best = 0;
  for (const Event& e : events) {
    if (e.order == 0) {
      live += e.bytes;  // cannot overflow: bounded by naive_bytes, checked by the caller
      best = std::max(best, live);
    } else {
      live -= e.bytes;
    }
  }
  return best;
}

}  // namespace

MemoryPlan plan_memory(const std::vector<PlanRequest>& requests) {
  const size_t n = requests.size();
  MemoryPlan plan;
  plan.offsets.assign(n, 0);

  std::vector<uint64_t> sizes(n);
  for (size_t i = 0; i < n; ++i) {
    const PlanRequest& r = requests[i];
    if (r.first > r.last)
      throw Error("memory planner: request " + std::to_string(i) + " has first step " +
                  std::to_string(r.first) + " after its last step " + std::to_string(r.last));
    sizes[i] = align_up(r.bytes, i);
    plan.report.naive_bytes = checked_add(plan.report.naive_bytes, sizes[i], "the naive total");
  }
  plan.report.lower_bound_bytes = lower_bound(requests, sizes);

  // Largest first; ties by first step, then by index, so the plan is a function of the input only.
  std::vector<size_t> order(n);
  std::iota(order.begin(), order.end(), size_t{0});
  std::sort(order.begin(), order.end(), [&](size_t a, size_t b) {
    if (requests[a].bytes != requests[b].bytes) return requests[a].bytes > requests[b].bytes;
    if (requests[a].first != requests[b].first) return requests[a].first < requests[b].first;
    return a < b;
  });

  std::vector<size_t> placed;  // indices already given an offset
  std::vector<size_t> neighbours;
  for (size_t i : order) {
    if (sizes[i] == 0) continue;  // takes no space; offset stays 0

    // Placed requests alive at the same time, in offset order.
    neighbours.clear();
    for (size_t j : placed)
      if (lifetimes_overlap(requests[i], requests[j])) neighbours.push_back(j);
    std::sort(neighbours.begin(), neighbours.end(), [&](size_t a, size_t b) {
      return plan.offsets[a] != plan.offsets[b] ? plan.offsets[a] < plan.offsets[b] : a < b;
    });

    // Walk the gaps between them; keep the smallest that fits. `end` is the highest end so far, so
    // neighbours that overlap each other in memory (allowed: their lifetimes are disjoint) are fine.
    uint64_t end = 0;
    uint64_t best_offset = 0, best_gap = std::numeric_limits<uint64_t>::max();
    bool found = false;
    for (size_t j : neighbours) {
      if (plan.offsets[j] > end) {
        uint64_t gap = plan.offsets[j] - end;
        if (gap >= sizes[i] && gap < best_gap) {
          best_gap = gap;
          best_offset = end;
          found = true;
        }
      }
      end = std::max(end, plan.offsets[j] + sizes[j]);
    }
    plan.offsets[i] = found ? best_offset : end;
    plan.report.arena_bytes =
        std::max(plan.report.arena_bytes, checked_add(plan.offsets[i], sizes[i], "the arena size"));
    placed.push_back(i);
  }
  return plan;
}

}  // namespace infer::detail
