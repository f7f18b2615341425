// The binary op's broadcast, worked out once on the host for every backend: the output walked in its
// memory order as a few collapsed dims, with each input's element stride per dim (0 where it is
// broadcast). Handles NCHW and NHWC nodes: 4-D activations are in the node's layout, constants always
// in their NCHW order (the channels_last pass never converts constants). Host code only.
#pragma once

#include <cstdint>

#include "infer/kernel.h"

namespace infer {

struct BroadcastPlan {
  static constexpr int kMaxDims = 8;
  int ndim = 1;                 // >= 1; dims[ndim-1] is the innermost (fastest) one
  int64_t dims[kMaxDims] = {1};
  int64_t stride_a[kMaxDims] = {0};  // element strides of input 0; 0 where it is broadcast
  int64_t stride_b[kMaxDims] = {0};  // likewise input 1
  int64_t numel = 1;            // output elements
};

// The plan for a binary node (two inputs, one output, shapes checked: an infer::Error "<backend>
// binary: ..." when they do not broadcast to the output shape or have more than kMaxDims dims).
BroadcastPlan plan_broadcast(const NodeDesc& node, const char* backend);

// True when plan_broadcast accepts the node (for applicable()).
bool broadcast_ok(const NodeDesc& node);

}  // namespace infer
