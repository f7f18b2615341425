// The memory plan of a session (planner.h's plan_arena), exposed for tests and tools: every activation
// value and node workspace with its arena offset, size and lifetime (steps in execution order; graph
// inputs start at -1, graph outputs end at the number of steps), the activation bytes live at each
// step, and the planner's report. Not part of the stable API.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "infer/profile.h"
#include "infer/session.h"

namespace infer::detail {

struct PlannedTensor {
  std::string name;           // the value's name, or "<node name>:workspace"
  uint64_t offset = 0, bytes = 0;  // bytes as used (the planner rounds up to kArenaAlignment)
  int first = 0, last = 0;
  bool workspace = false;
  Layout layout = Layout::NCHW;  // memory order of a 4-D activation (channels_last pass)
  int value = -1;                // the value's id in the graph; -1 for a workspace
};

struct Plan {
  std::vector<PlannedTensor> tensors;
  std::vector<uint64_t> live_bytes;  // per step: activation bytes live while it runs (the profile's)
  MemoryReport report;
};

const Plan& plan_of(const Session& session);
// The batches a session has planned: its own first, then those Session::run met since, ascending.
std::vector<int64_t> planned_batches(const Session& session);

}  // namespace infer::detail
