// The per-node cost model of the profile: floating-point operations and bytes moved, from a node's
// parameters and concrete shapes only (the same numbers whatever kernel variant runs, so GFLOP/s
// compares variants fairly). Conventions are documented in cost.cc.
#pragma once

#include "infer/kernel.h"

namespace infer::detail {

struct NodeCost {
  double flops = 0;  // a multiply-add counts 2
  double bytes = 0;  // every input (activations and constants) read once, every output written once
};

NodeCost node_cost(const NodeDesc& node);

// FLOPs per element of a standalone activation of `kind` (cost.cc says how they are counted).
double activation_flops(ActivationKind kind);

}  // namespace infer::detail
