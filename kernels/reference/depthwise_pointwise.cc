// Reference depthwise_pointwise (the engine-internal node of the fuse_depthwise_pointwise pass): the two
// reference convolutions in sequence, NCHW, the depthwise's output in a temporary buffer (the oracle
// may allocate; the fast kernel keeps it in a per-thread tile). Bit for bit the two unfused nodes.
#include <vector>

#include "engine/ops/op_def.h"
#include "kernels/reference/common.h"
#include "kernels/reference/reference.h"

namespace infer::ref {

// x, dw_weight, dw_bias, pw_weight, pw_bias (+ residual where pointwise.add_residual)
void run_depthwise_pointwise(const KernelCall& c) {
  const auto& p = std::get<DepthwisePointwiseParams>(c.node.params);
  const auto& s = c.node.input_shapes;
  const Shape& y = c.node.output_shapes[0];
  const Shape mid{y[0], s[0][1], y[2], y[3]};
  std::vector<float> t(static_cast<size_t>(shape_numel(mid)));
  conv2d(p.depthwise, c.inputs[0], s[0], c.inputs[1], s[1], c.inputs[2], t.data(), mid);
  conv2d(p.pointwise, t.data(), mid, c.inputs[3], s[3], c.inputs[4], c.outputs[0], y,
         p.pointwise.add_residual ? c.inputs[5] : nullptr);
}

}  // namespace infer::ref
