// Reference DepthToSpace (PixelShuffle) over NCHW, DCR and CRD: the definition as a loop over output
// elements, each copying the one input element its (channel, row phase, column phase) names.
#include "engine/ops/op_def.h"
#include "kernels/reference/common.h"
#include "kernels/reference/reference.h"

namespace infer::ref {

void depth_to_space(const DepthToSpaceParams& p, const float* x, const Shape& x_shape, float* y,
                    const Shape& y_shape) {
  using namespace detail;
  check_shape("depth_to_space", "input", x_shape, 4);
  check_shape("depth_to_space", "output", y_shape, 4);
  const int64_t b = p.block, N = x_shape[0], C = x_shape[1], H = x_shape[2], W = x_shape[3];
  check_equal("depth_to_space", "output channels", y_shape[1] * b * b, C);
  check_equal("depth_to_space", "output height", y_shape[2], H * b);
  check_equal("depth_to_space", "output width", y_shape[3], W * b);
  const int64_t CO = y_shape[1], HO = H * b, WO = W * b;
  for (int64_t n = 0; n < N; ++n)
    for (int64_t c = 0; c < CO; ++c)
      for (int64_t oy = 0; oy < HO; ++oy)
        for (int64_t ox = 0; ox < WO; ++ox) {
          const int64_t i = oy % b, j = ox % b;
          const int64_t ic = p.mode == DepthToSpaceMode::DCR ? (i * b + j) * CO + c : c * b * b + i * b + j;
          y[((n * CO + c) * HO + oy) * WO + ox] = x[((n * C + ic) * H + oy / b) * W + ox / b];
        }
}


// The reference variant (ref::run_<op>, engine/ops/op_def.h): the KernelCall unpacked into the
// function above; registered from the op table by register.cc.
void run_depth_to_space(const KernelCall& c) {
  depth_to_space(std::get<DepthToSpaceParams>(c.node.params), c.inputs[0], c.node.input_shapes[0], c.outputs[0],
                 c.node.output_shapes[0]);
}

}  // namespace infer::ref
