// plan_broadcast (broadcast.h): pad both input shapes to the output's rank, give each input its memory
// strides (NHWC for 4-D activations of an NHWC node, NCHW otherwise) with 0 on broadcast dims, reorder
// the dims into the output's memory order, drop size-1 dims and merge neighbours that stay contiguous
// for both inputs. The common cases collapse to 1-3 dims: same shape -> [n]; per-channel scale on
// NCHW -> [N, C, HW] with strides [0,1,0]; squeeze-excitation gate -> [NC, HW] with [1,0].
#include "kernels/broadcast.h"

#include <string>

#include "infer/error.h"

namespace infer {
namespace {

// Memory strides of `s` (padded to `rank` with leading 1s) indexed by the NCHW-ordered dims; 0 for
// dims of size 1 so that they broadcast.
void strides_of(const Shape& s, size_t rank, bool nhwc, int64_t* out) {
  Shape p(rank - s.size(), 1);
  p.insert(p.end(), s.begin(), s.end());
  if (nhwc) {  // rank 4: memory order n, h, w, c
    out[1] = 1;
    out[3] = p[1];
    out[2] = p[1] * p[3];
    out[0] = p[1] * p[3] * p[2];
  } else {
    int64_t st = 1;
    for (size_t d = rank; d-- > 0;) {
      out[d] = st;
      st *= p[d];
    }
  }
  for (size_t d = 0; d < rank; ++d)
    if (p[d] == 1) out[d] = 0;
}

std::string check(const NodeDesc& node) {
  if (!std::holds_alternative<BinaryParams>(node.params)) return "node is not a binary op";
  if (node.input_shapes.size() != 2 || node.output_shapes.size() != 1)
    return "expected 2 input shapes and 1 output shape";
  const Shape& y = node.output_shapes[0];
  if (y.size() > size_t(BroadcastPlan::kMaxDims))
    return "output " + shape_str(y) + " has more than " + std::to_string(BroadcastPlan::kMaxDims) + " dims";
  for (const Shape& s : node.input_shapes) {
    if (s.size() > y.size()) return "input " + shape_str(s) + " has more dims than output " + shape_str(y);
    const size_t off = y.size() - s.size();
    for (size_t d = 0; d < s.size(); ++d)
      if (s[d] < 0 || (s[d] != y[off + d] && s[d] != 1))
        return "input " + shape_str(s) + " does not broadcast to output " + shape_str(y);
  }
  for (int64_t d : y)
    if (d < 0) return "output " + shape_str(y) + " has a negative dimension";
  return {};
}

}  // namespace

bool broadcast_ok(const NodeDesc& node) { return check(node).empty(); }

BroadcastPlan plan_broadcast(const NodeDesc& node, const char* backend) {
  if (std::string why = check(node); !why.empty())
    throw Error(std::string(backend) + " binary: " + why);
  const Shape& y = node.output_shapes[0];
  const size_t rank = y.size();
  BroadcastPlan plan;
  plan.numel = shape_numel(y);
  if (rank == 0 || plan.numel <= 1) return plan;  // one element (or none): strides 0 read element 0

  const bool nhwc = node.layout == Layout::NHWC && rank == 4;
  auto is_nhwc = [&](size_t i) {
    const bool constant = i < node.constants.size() && node.constants[i] != nullptr;
    return nhwc && !constant && node.input_shapes[i].size() == 4;
  };
  int64_t sa[BroadcastPlan::kMaxDims], sb[BroadcastPlan::kMaxDims];
  strides_of(node.input_shapes[0], rank, is_nhwc(0), sa);
  strides_of(node.input_shapes[1], rank, is_nhwc(1), sb);

  // Output memory order, outermost first.
  size_t order[BroadcastPlan::kMaxDims];
  for (size_t d = 0; d < rank; ++d) order[d] = d;
  if (nhwc) order[0] = 0, order[1] = 2, order[2] = 3, order[3] = 1;

  // Keep dims > 1, merging each into the previous kept one when both inputs stay contiguous across
  // the pair (a broadcast dim merges only with another broadcast dim: 0 == 0 * size).
  int n = 0;
  for (size_t k = 0; k < rank; ++k) {
    const size_t d = order[k];
    if (y[d] == 1) continue;
    if (n > 0 && plan.stride_a[n - 1] == sa[d] * y[d] && plan.stride_b[n - 1] == sb[d] * y[d]) {
      plan.dims[n - 1] *= y[d];
      plan.stride_a[n - 1] = sa[d];
      plan.stride_b[n - 1] = sb[d];
      continue;
    }
    plan.dims[n] = y[d];
    plan.stride_a[n] = sa[d];
    plan.stride_b[n] = sb[d];
    ++n;
  }
  plan.ndim = n;
  return plan;
}

}  // namespace infer
