// The channels_last pass: chooses the memory layout (NCHW or NHWC) of every node's 4-D activations for
// the whole graph, from what the backend's kernel variants offer, and inserts `layout` conversion nodes
// only where a tensor's layout changes. Graph inputs and outputs stay NCHW (the user-visible order).
#pragma once

#include <string>
#include <vector>

#include "graph.h"

namespace infer::detail {

// For one node: the best default-heuristic priority among the backend's variants that apply to it in
// each layout; -1 where none does.
struct LayoutSupport {
  int nchw = -1, nhwc = -1;
  int of(Layout l) const { return l == Layout::NHWC ? nhwc : nchw; }
};

// support[i] for graph.nodes[i]. A node keeps the layout of its (first 4-D) data input when a variant
// runs it there at least as well as in the other layout, and switches only when the other layout's
// best variant is strictly preferred (so element-wise ops and pooling follow their producer, and a
// convolution switches where a channels-last kernel outranks the NCHW ones). Each switch reads a
// converted copy (one per value and layout); NHWC graph outputs get a final conversion back to NCHW.
// A [N, C, 1, 1] activation is the same bytes in both layouts: never converted, and a node whose 4-D
// inputs are all such takes the layout its first reader strictly prefers when it runs there as well.
// Appends one line to `log`.
Graph assign_layouts(Graph graph, const std::vector<LayoutSupport>& support,
                     std::vector<std::string>* log = nullptr);

}  // namespace infer::detail
