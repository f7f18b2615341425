// Autotune: chooses each node's variant by what the whole forward costs, not by a node timed alone
// (issue 31 must 3). Per-node timing proposes; the proposal is then replayed as a whole plan against
// the default plan and node by node, so the result is never slower than the default as measured.
// Knows kernel choices and the caller's "rebuild with this choice and time it"; never the planner.
#pragma once

#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "backend.h"
#include "executor.h"
#include "kernel_selection.h"
#include "plan_cache.h"

namespace infer::detail {

// Switches step i of `choice` to `variant`, prepared now on `backend` (prepared sizes updated).
void set_variant(KernelChoice& choice, size_t i, const KernelVariant* variant, const NodeDesc& desc,
                 Backend& backend);

// Rebuilds the session with `choice` (its plan, arena, calls and capture) and returns the median
// milliseconds of the whole forward.
using TimePlan = std::function<double(const KernelChoice& choice)>;

struct AutotuneReport {
  double default_ms = 0, tuned_ms = 0;
  int proposed = 0;  // nodes whose fastest variant timed alone differs from the default
  int changed = 0;   // nodes the chosen plan runs with another variant than the default
  int trials = 0;    // whole-forward timings
  std::string summary() const;  // one line for Session::passes()
};

struct AutotuneResult {
  KernelChoice choice;
  AutotuneReport report;
};

// From the session as built with the default choice `current` (`calls` and `arena` are its): times
// every applicable variant of each node with more than one (forced nodes excepted; one warm-up, the
// median of three calls, each with its own workspace) to propose the fastest per node; then times the
// whole forward with the default and with the proposal, and toggles each differing node on the better
// of the two (largest per-node gain first), keeping a change only when the whole forward gets at least
// 0.5% faster. The session is left built with the returned choice (the last time_plan call).
AutotuneResult autotune(const KernelSelector& selector, const Graph& graph, const std::vector<NodeDesc>& descs,
                        const std::vector<KernelCall>& calls, Backend& backend, DeviceBuffer& arena,
                        const KernelChoice& current, const TimePlan& time_plan);

// The cached plan's variants applied to `current` (each prepared), or nullopt when the entry names a
// node the graph lacks, lacks one of its nodes, or names a variant that this session may not run
// there (a warning says which; the caller then plans as if there were no entry). Forced nodes keep
// their forced variant.
std::optional<KernelChoice> apply_cached_plan(const CachedPlan& cached, const KernelSelector& selector,
                                              const Graph& graph, const std::vector<NodeDesc>& descs,
                                              Backend& backend, const KernelChoice& current);

// What a session asks of choose_plan.
struct ChoosePlanRequest {
  const KernelSelector& selector;
  const Graph& graph;
  const std::vector<NodeDesc>& descs;
  const std::vector<TensorInfo>& inputs;
  const KernelChoice& current;  // the default choice (the session's: choose_plan copies it first)
  bool autotune = false;
  std::string plan_cache;  // SessionOptions::plan_cache
  PlanKeyParts key;
};

// The session's plan: the cache's entry for it when there is one (nothing timed), else autotune's when
// asked (whole forwards timed on seeded inputs in [-1, 1): warm-up, then the median of runs that take
// about 0.2 s, 5 to 50), saved to the cache when one is named; else the default. `use_and_build`
// makes the session run a choice (kernels, plan, arena, calls, capture); it is called at least once
// and last with the choice made. Returns a line for Session::passes() ("" for the default).
std::string choose_plan(const ChoosePlanRequest& request, Executor& executor,
                        const std::function<void(KernelChoice)>& use_and_build);

}  // namespace infer::detail
