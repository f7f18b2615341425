// Shape inference for whole graphs and single nodes. Each op's shape rule, which is also where its
// parameters are validated (kernel, stride, dilation > 0; 0 <= padding < dilated kernel; groups divide
// the channels; ...), is its OpDef's (engine/ops/<op>.cc), so the loader, the builder and the kernel-call
// checks reject the same things with the same messages. All size arithmetic is bounded: no tensor may
// exceed 2^40 elements, and every product is checked before it is formed.
#include "shape_inference.h"

#include <iterator>
#include <string>

#include "engine/ops/op_util.h"
#include "infer/error.h"

namespace infer::detail {

namespace {

bool same_declared(const Shape& declared, const Shape& computed) {
  if (declared.size() != computed.size()) return false;
  for (size_t i = 0; i < declared.size(); ++i)
    if (declared[i] != computed[i] && !(i == 0 && declared[i] == -1)) return false;
  return true;
}

}  // namespace

std::vector<Shape> infer_node_shapes(const OpParams& params, const std::vector<Shape>& input_shapes,
                                     const std::string& where, const std::vector<bool>* constant,
                                     bool allow_empty) {
  const OpDef& def = op_def(op_type(params));
  const Inputs in(where, input_shapes, def.roles, std::size(def.roles));
  for (size_t i = 0; i < input_shapes.size(); ++i) {
    std::string why;
    if (!bounded(input_shapes[i], &why, allow_empty))
      fail(where, in.label(i) + " has shape " + shape_str(input_shapes[i]) + ": " + why);
  }
  std::vector<Shape> out = def.shape(where, params, in, constant);
  for (const Shape& s : out) {
    std::string why;
    if (!bounded(s, &why, allow_empty)) fail(where, "output shape " + shape_str(s) + ": " + why);
  }
  return out;
}

bool is_parameter_input(OpType op, size_t i) {
  const InputKinds k = op_def(op).inputs;
  return (k == InputKinds::DataThenParams || k == InputKinds::FoldableThenParams) && i >= 1;
}


std::vector<Shape> infer_shapes(const Graph& graph, int64_t batch) {
  if (batch < 1 || batch > kMaxShapeElements)
    fail(graph.origin, "batch must be in [1, 2^40] (got " + std::to_string(batch) + ")");
  const size_t n = graph.values.size();
  std::vector<Shape> shapes(n);
  std::vector<char> known(n, 0);
  auto with_batch = [batch](Shape s) {
    if (!s.empty() && s[0] == -1) s[0] = batch;
    return s;
  };
  for (size_t i = 0; i < n; ++i) {
    shapes[i] = with_batch(graph.values[i].shape);
    known[i] = graph.values[i].is_constant();
  }
  for (int id : graph.inputs) {
    if (id < 0 || static_cast<size_t>(id) >= n)
      fail(graph.origin, "model input " + std::to_string(id) + " is out of range");
    known[static_cast<size_t>(id)] = 1;
  }

  for (size_t k = 0; k < graph.nodes.size(); ++k) {
    const Node& node = graph.nodes[k];
    // The loader names unnamed nodes "node k"; don't say that twice.
    const std::string label = "node " + std::to_string(k);
    const std::string where = graph.origin + ": " + label +
                              (node.name == label ? "" : " '" + node.name + "'") + " (" +
                              op_name(node.op()) + ")";
    std::vector<Shape> in;
    std::vector<bool> constant;
    for (size_t i = 0; i < node.inputs.size(); ++i) {
      const int id = node.inputs[i];
      if (id < 0 || static_cast<size_t>(id) >= n)
        fail(where, "input " + std::to_string(i) + " is tensor " + std::to_string(id) +
                        ", out of range");
      if (!known[static_cast<size_t>(id)])
        fail(where, "input " + std::to_string(i) + " '" + graph.values[static_cast<size_t>(id)].name +
                        "' has no value yet (not a model input, constant or earlier node's output)");
      in.push_back(shapes[static_cast<size_t>(id)]);
      constant.push_back(graph.values[static_cast<size_t>(id)].is_constant());
    }
    std::vector<Shape> out = infer_node_shapes(node.params, in, where, &constant);
    if (out.size() != node.outputs.size())
      fail(where, "has " + std::to_string(node.outputs.size()) + " outputs but " +
                      op_name(node.op()) + " produces " + std::to_string(out.size()));
    for (size_t o = 0; o < out.size(); ++o) {
      const int id = node.outputs[o];
      if (id < 0 || static_cast<size_t>(id) >= n)
        fail(where, "output " + std::to_string(o) + " is tensor " + std::to_string(id) +
                        ", out of range");
      const Value& v = graph.values[static_cast<size_t>(id)];
      if (!same_declared(v.shape, out[o]))
        fail(where, "output " + std::to_string(o) + " '" + v.name + "' is declared " +
                        shape_str(v.shape) + " but the op computes " + shape_str(out[o]));
      shapes[static_cast<size_t>(id)] = out[o];
      known[static_cast<size_t>(id)] = 1;
    }
  }
  return shapes;
}

}  // namespace infer::detail
