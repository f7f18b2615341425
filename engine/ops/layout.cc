// layout: engine-internal (the channels_last pass; no file form). Copies a 4-D activation from one
// memory layout to the other; shape and values stay the same, 0 FLOPs. Its reference kernel runs in
// either node layout (it reads `from` and writes `to`).
#include "engine/ops/op_util.h"

namespace infer::detail {

namespace {

std::vector<Shape> shape(const std::string& where, const OpParams&, const Inputs& in,
                         const std::vector<bool>*) {
  in.expect_count(1, 1);
  if (in[0].size() != 4) fail(where, "layout conversion needs a 4-D input, got " + shape_str(in[0]));
  return {in[0]};
}

}  // namespace

constinit const OpDef layout_op{
    .shape = shape,
    .reference = ref::run_layout,
    .reference_any_layout = true,
};

}  // namespace infer::detail
