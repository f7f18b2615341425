// Kernel selection: which registered variant runs each node. Forced variants (--kernel op=variant,
// op:node=variant) are checked up front; other nodes get the applicable variant of highest priority
// (ties keep the registry's order); autotune (autotune.h) may replace them by timing. Only
// what the session may run is offered (the reference backend's "reference" variants; a pass's variants
// while it is on). Knows the registry, node descriptors and allocation counts; never the memory plan.
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "backend.h"
#include "infer/kernel.h"
#include "graph.h"
#include "infer/session.h"

namespace infer::detail {

// The NodeDesc of graph node `step`: its parameters, layout and constants' host data, the concrete
// shapes of its inputs and outputs, and the session's precision and CPU ISA level.
NodeDesc describe_node(const Graph& graph, const std::vector<Shape>& shapes, size_t step,
                       Precision precision, CpuIsa isa);

// What a session may choose from: one backend's variants, less those it may not run, with --kernel's
// forced ones.
class KernelSelector {
 public:
  // kernel_backend: the registry's backend ("cpu" also for the reference backend); backend_name: as
  // reported ("reference"). Checks every forced variant, whether or not the model has the op.
  KernelSelector(std::string kernel_backend, std::string backend_name, bool reference_only,
                 const PassOptions& passes, const std::map<std::string, std::string>& kernels);

  const std::string& kernel_backend() const { return kernel_backend_; }
  const std::string& backend_name() const { return backend_name_; }
  // A variant the session may run: the reference backend offers only "reference", and a variant that
  // belongs to a pass (KernelVariant::requires_pass) only while that pass is on.
  bool allowed(const KernelVariant& v) const {
    return (!reference_only_ || v.name == "reference") &&
           (v.requires_pass.empty() || passes_.enabled(v.requires_pass));
  }
  static int priority(const KernelVariant& v, const NodeDesc& d) {
    return v.priority_for ? v.priority_for(d) : v.priority;
  }
  // The variant --kernel forces on `node` (by its name, else by its op), or null.
  const KernelVariant* forced_for(const Node& node) const;
  // The variants a node of `op` may get: the forced one (--kernel), else all of this backend's.
  std::vector<const KernelVariant*> candidates_for(const std::string& op) const;
  std::vector<const KernelVariant*> candidates_for(const Node& node) const;
  // True when one of `candidates` this session may run applies to `desc` (the backend passes' test).
  bool some_variant_runs(const std::vector<const KernelVariant*>& candidates, const NodeDesc& desc) const;
  // The names of the variants of `op` this session may run, for messages ("none" when there are none).
  std::string variant_list(const std::string& op) const;
  // Throws unless every node --kernel names (op:node=variant) is in `graph`.
  void check_forced_nodes(const Graph& graph) const;

 private:
  std::string kernel_backend_, backend_name_;
  bool reference_only_ = false;
  PassOptions passes_;
  std::map<std::string, const KernelVariant*> forced_;  // --kernel op=variant, checked
  // --kernel op:node=variant, checked: node name -> (op, variant)
  std::map<std::string, std::pair<std::string, const KernelVariant*>> forced_node_;
};

// The kernels of a graph, per step (node in execution order). `prepared` keeps what each variant's
// prepare() returned alive; `prepared_size` is the device memory that took (cuda; 0 on cpu).
struct KernelChoice {
  std::vector<const KernelVariant*> variants;
  std::vector<std::shared_ptr<void>> prepared;
  std::vector<uint64_t> prepared_size;
  uint64_t prepared_bytes = 0;  // their sum
  std::set<size_t> forced_step;  // steps whose variant --kernel forced (autotune keeps them)
};

// The default choice for every node: the forced variant (an Error unless it applies), else the
// applicable one of highest priority (an Error listing the variants when none applies); each is
// prepared once, in step order.
KernelChoice select_kernels(const KernelSelector& selector, const Graph& graph,
                            const std::vector<NodeDesc>& descs, Backend& backend);

// The report of step i's choice: name, op, variant, fused nodes, layout, the ISA the variant runs
// (cpu) and the workspace it asks for.
NodeInfo node_info(const Node& node, const NodeDesc& desc, const KernelVariant& variant,
                   const std::string& kernel_backend, CpuIsa isa);

// Warns (once a process) when OpenBLAS variants among a cpu session's `variants` run OpenBLAS's own
// kernels above `isa` (the session's level caps infer's kernels, not OpenBLAS's), naming the
// OPENBLAS_CORETYPE that caps them too. Not in the pass log: it depends on the machine, not the graph.
void warn_openblas_above_cap(const std::string& backend, const std::vector<const KernelVariant*>& variants,
                             CpuIsa isa);

}  // namespace infer::detail
