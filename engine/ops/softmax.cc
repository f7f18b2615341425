// softmax: numerically stable softmax along one axis that keeps the batch (1 <= axis < rank). Cost:
// 3 FLOPs per element (max, exp-and-sum, divide).
#include "engine/ops/op_util.h"

namespace infer::detail {

namespace {

OpParams read(const fb::Node& node, const std::string&) {
  return SoftmaxParams{node.options_as_Softmax()->axis()};
}

FbOptions write(flatbuffers::FlatBufferBuilder& fbb, const OpParams& params) {
  return {fb::Op::Softmax, fb::CreateSoftmax(fbb, std::get<SoftmaxParams>(params).axis).Union()};
}

std::vector<Shape> shape(const std::string& where, const OpParams& params, const Inputs& in,
                         const std::vector<bool>*) {
  in.expect_count(1, 1);
  check_axis(where, std::get<SoftmaxParams>(params).axis, in[0].size());
  return {in[0]};
}

double flops(const NodeDesc& node) { return 3.0 * numel_f(output_shape(node)); }

}  // namespace

constinit const OpDef softmax_op{
    .read = read,
    .write = write,
    .shape = shape,
    .flops = flops,
    .reference = ref::run_softmax,
};

}  // namespace infer::detail
