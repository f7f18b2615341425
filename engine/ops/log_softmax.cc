// log_softmax: y = x - max - log(sum exp(x - max)) along one axis that keeps the batch
// (1 <= axis < rank; axis 1 of an NCHW tensor is its channels). Shape unchanged. Cost: 4 FLOPs per
// element (max, exp-and-sum, subtract twice), one more than softmax's divide.
#include "engine/ops/op_util.h"

namespace infer::detail {

namespace {

OpParams read(const fb::Node& node, const std::string&) {
  return LogSoftmaxParams{node.options_as_LogSoftmax()->axis()};
}

FbOptions write(flatbuffers::FlatBufferBuilder& fbb, const OpParams& params) {
  return {fb::Op::LogSoftmax, fb::CreateLogSoftmax(fbb, std::get<LogSoftmaxParams>(params).axis).Union()};
}

std::vector<Shape> shape(const std::string& where, const OpParams& params, const Inputs& in,
                         const std::vector<bool>*) {
  in.expect_count(1, 1);
  check_axis(where, std::get<LogSoftmaxParams>(params).axis, in[0].size());
  return {in[0]};
}

double flops(const NodeDesc& node) { return 4.0 * numel_f(output_shape(node)); }

}  // namespace

constinit const OpDef log_softmax_op{
    .read = read,
    .write = write,
    .shape = shape,
    .flops = flops,
    .reference = ref::run_log_softmax,
};

}  // namespace infer::detail
