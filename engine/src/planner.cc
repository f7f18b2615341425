// The memory planner: greedy by size, best fit (TFLite ArenaPlanner; Pisarchyk & Lee 2020). Requests
// are placed largest first; each goes into the smallest gap between already-placed requests whose
// lifetimes overlap its own, else above the highest of them. Deterministic for a given input; every
// offset and size a multiple of kArenaAlignment; bad requests (first > last, overflow) are an Error.
// plan_arena turns a graph's execution order into those requests (lifetimes, workspaces).
#include "planner.h"

#include <algorithm>
#include <limits>
#include <numeric>
#include <set>
#include <string>

#include <fmt/format.h>

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

uint64_t tensor_bytes(const Shape& shape, uint64_t element, const std::string& what) {
  uint64_t n = 1;
  for (int64_t d : shape) {
    if (d < 0) throw Error(what + ": negative dimension in shape " + shape_str(shape));
    if (d != 0 && n > std::numeric_limits<uint64_t>::max() / 4 / static_cast<uint64_t>(d))
      throw Error(what + ": shape " + shape_str(shape) + " is too large");
    n *= static_cast<uint64_t>(d);
  }
  return n * element;
}

// Lifetimes over execution order (graph inputs from step -1, graph outputs to step n), one request
// per activation and per non-empty workspace, then offsets from plan_memory.
Plan plan_arena(const Graph& graph, const std::function<uint64_t(int value)>& value_bytes,
                const std::vector<uint64_t>& workspace_bytes) {
  Plan plan;
  const int n = static_cast<int>(graph.nodes.size());
  const size_t num_values = graph.values.size();
  constexpr int kUnset = std::numeric_limits<int>::min();
  std::vector<int> first(num_values, kUnset), last(num_values, kUnset);

  auto activation = [&](int id, const std::string& what) -> size_t {
    const Value& v = graph.values[static_cast<size_t>(id)];
    if (v.is_constant()) throw Error(what + " is the constant '" + v.name + "'");
    return static_cast<size_t>(id);
  };
  for (size_t k = 0; k < graph.inputs.size(); ++k) {
    size_t id = activation(graph.inputs[k], fmt::format("{}: input {}", graph.origin, k));
    first[id] = last[id] = -1;
  }
  for (int step = 0; step < n; ++step) {
    const Node& node = graph.nodes[static_cast<size_t>(step)];
    for (int id : node.inputs) {
      if (graph.values[static_cast<size_t>(id)].is_constant()) continue;
      if (first[static_cast<size_t>(id)] == kUnset)
        throw Error(fmt::format("{}: reads '{}' before any node writes it", node_where(graph, step),
                                graph.values[static_cast<size_t>(id)].name));
      last[static_cast<size_t>(id)] = std::max(last[static_cast<size_t>(id)], step);
    }
    for (int id : node.outputs) {
      size_t v = activation(id, node_where(graph, step) + ": output");
      if (first[v] != kUnset)
        throw Error(fmt::format("{}: writes '{}', which is already written", node_where(graph, step),
                                graph.values[v].name));
      first[v] = last[v] = step;
    }
  }
  for (size_t k = 0; k < graph.outputs.size(); ++k) {
    size_t id = activation(graph.outputs[k], fmt::format("{}: output {}", graph.origin, k));
    if (first[id] == kUnset)
      throw Error(fmt::format("{}: output {} '{}' is never written", graph.origin, k, graph.values[id].name));
    last[id] = n;
  }

  std::vector<PlanRequest> requests;
  for (size_t id = 0; id < num_values; ++id) {
    if (first[id] == kUnset) continue;  // constants and values no node touches
    const Value& v = graph.values[id];
    const uint64_t bytes = value_bytes(static_cast<int>(id));
    requests.push_back({bytes, first[id], last[id]});
    plan.tensors.push_back({v.name, 0, bytes, first[id], last[id], false, v.layout, static_cast<int>(id)});
  }
  uint64_t workspace_total = 0;
  for (int step = 0; step < n; ++step) {
    const uint64_t ws = workspace_bytes.at(static_cast<size_t>(step));
    if (ws == 0) continue;
    workspace_total += ws;
    requests.push_back({ws, step, step});
    plan.tensors.push_back(
        {graph.nodes[static_cast<size_t>(step)].name + ":workspace", 0, ws, step, step, true});
  }

  MemoryPlan mp = plan_memory(requests);
  for (size_t k = 0; k < plan.tensors.size(); ++k) plan.tensors[k].offset = mp.offsets[k];
  plan.report = mp.report;
  plan.report.workspace_bytes = workspace_total;

  plan.live_bytes.assign(static_cast<size_t>(n), 0);
  for (const PlannedTensor& t : plan.tensors) {
    if (t.workspace) continue;
    for (int step = std::max(t.first, 0); step <= std::min(t.last, n - 1); ++step)
      plan.live_bytes[static_cast<size_t>(step)] += t.bytes;
  }
  return plan;
}

uint64_t weight_bytes(const Graph& graph, uint64_t element) {
  std::set<int> constants;
  for (const Node& node : graph.nodes)
    for (int id : node.inputs)
      if (graph.values[static_cast<size_t>(id)].is_constant()) constants.insert(id);
  uint64_t bytes = 0;
  for (int id : constants)
    bytes += element * static_cast<uint64_t>(shape_numel(graph.values[static_cast<size_t>(id)].shape));
  return bytes;
}

}  // namespace infer::detail
