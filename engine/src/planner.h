// The memory planner: lifetimes over a graph's execution order, then offsets in one arena by
// greedy-by-size best fit (TFLite ArenaPlanner; Pisarchyk & Lee 2020), each block 256-byte aligned.
// Node workspaces are tensors living for their node only. Knows the graph's order, sizes and
// lifetimes, nothing of kernels (only the workspace bytes they ask for).
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "graph.h"
#include "infer/profile.h"
#include "plan.h"

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

// The arena plan of a graph (plan.h): lifetimes over its execution order (graph.nodes in order, as
// TFLite's ArenaPlanner takes its execution plan), graph inputs from step -1 and graph outputs to
// step n (the number of nodes), one request per activation some node touches, of value_bytes(id)
// bytes (asked once per such value, in id order), and one per non-empty workspace_bytes[step];
// offsets from plan_memory. Plan::tensors lists those values by id, then the workspaces by step;
// Plan::live_bytes the activation bytes live at each step; the report's arena, naive, lower-bound and
// workspace bytes (weights and prepared bytes are the caller's). Errors name the node at fault.
Plan plan_arena(const Graph& graph, const std::function<uint64_t(int value)>& value_bytes,
                const std::vector<uint64_t>& workspace_bytes);

// Bytes of a tensor of `shape` stored as `element` bytes per value (4, or 2 under fp16); an Error
// prefixed by `what` for a negative dimension or a size beyond 64 bits.
uint64_t tensor_bytes(const Shape& shape, uint64_t element, const std::string& what);

// Bytes of the weights as a backend holds them: every constant a node reads, once, at `element`
// bytes per value.
uint64_t weight_bytes(const Graph& graph, uint64_t element);

}  // namespace infer::detail
