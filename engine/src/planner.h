// The memory planner: lifetimes over execution order, then offsets in one arena by greedy-by-size best
// fit (TFLite ArenaPlanner; Pisarchyk & Lee 2020), each block 256-byte aligned. Node workspaces are
// tensors living for their node only. Pure arithmetic: knows sizes and lifetimes, nothing of kernels.
#pragma once

#include <cstdint>
#include <vector>

#include "infer/profile.h"

namespace infer::detail {

constexpr uint64_t kArenaAlignment = 256;

struct PlanRequest {
  uint64_t bytes = 0;
  int first = 0;  // first step that uses it (the producer; -1 for graph inputs)
  int last = 0;   // last step that reads it (num_steps for graph outputs)
};

struct MemoryPlan {
  std::vector<uint64_t> offsets;  // one per request, multiples of kArenaAlignment
  MemoryReport report;            // arena, naive and lower-bound bytes (weight bytes left 0)
};

// Requests with bytes == 0 get offset 0 and take no space.
MemoryPlan plan_memory(const std::vector<PlanRequest>& requests);

}  // namespace infer::detail
