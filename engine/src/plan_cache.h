// The plan cache (SessionOptions::plan_cache, `--plan-cache FILE`): autotune's choice of variant per
// node saved in a JSON file and reused by later sessions of the same graph on the same device, as
// TensorRT's timing cache is, so a server starts without timing anything. An entry is found by a key
// over everything the choice depends on (engine version, backend, device name, precision, batch, CPU
// level, forced kernels, every node's name, op, layout and shapes); a stale entry simply never matches.
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "infer/kernel.h"
#include "graph.h"
#include "infer/session.h"

namespace infer::detail {

struct PlanKeyParts {
  std::string backend, device;
  Precision precision = Precision::FP32;
  int64_t batch = 1;
  std::string cpu_isa;  // "" off the cpu backend
  std::map<std::string, std::string> forced;  // SessionOptions::kernels
};

// 16 hex digits (FNV-1a 64) over the parts and the graph's nodes with their concrete shapes.
std::string plan_key(const Graph& graph, const std::vector<NodeDesc>& descs, const PlanKeyParts& parts);

struct CachedPlan {
  std::string key;
  std::map<std::string, std::string> variants;  // node name -> variant name, every node
  double default_ms = 0, tuned_ms = 0;          // what autotune measured when it saved the plan
};

// The entry of `path` with `key`; nullopt when the file does not exist or has no such entry. A file
// that exists but is not a plan cache (unreadable, not JSON, another format) is an Error naming it.
std::optional<CachedPlan> load_plan(const std::string& path, const std::string& key);

// Adds `plan` to `path` (replacing an entry with its key), writing a temporary file and renaming it;
// a file that exists but is not a plan cache is an Error and stays untouched. `about` is stored for
// people reading the file (model, backend, device, precision, batch).
void save_plan(const std::string& path, const CachedPlan& plan, const std::map<std::string, std::string>& about);

}  // namespace infer::detail
