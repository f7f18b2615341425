// Graph helpers: constants created after loading (passes) own their storage through Graph::storage;
// a node's label for messages.
#include "graph.h"

#include <fmt/format.h>

namespace infer::detail {

int Graph::add_constant(std::string value_name, Shape shape, std::vector<float> data) {
  auto owned = std::make_shared<std::vector<float>>(std::move(data));
  Value v;
  v.name = std::move(value_name);
  v.shape = std::move(shape);
  v.dtype = DType::F32;
  v.data = owned->data();
  storage.push_back(owned);
  values.push_back(std::move(v));
  return static_cast<int>(values.size()) - 1;
}

std::string node_where(const Graph& graph, size_t step) {
  const Node& node = graph.nodes[step];
  return fmt::format("{}: node {} '{}' ({})", graph.origin, step, node.name, op_name(node.op()));
}

}  // namespace infer::detail
