// infer::Model: a thin, immutable handle on a loaded graph. load() maps the file (loader.cc does the
// verification and validation); from_bytes() keeps the caller's bytes alive for in-place weights.
#include "infer/model.h"

#include "cost.h"
#include "graph.h"
#include "loader.h"
#include "shape_inference.h"

namespace infer {

Model Model::load(const std::string& path) { return Model(detail::load_graph_file(path)); }

Model Model::from_bytes(std::vector<uint8_t> bytes, const std::string& origin) {
  auto owned = std::make_shared<const std::vector<uint8_t>>(std::move(bytes));
  const uint8_t* data = owned->data();
  const size_t size = owned->size();
  return Model(detail::load_graph(std::move(owned), data, size, origin));
}

const std::string& Model::name() const { return graph_->name; }
const std::string& Model::description() const { return graph_->description; }
const std::string& Model::producer() const { return graph_->producer; }
uint32_t Model::format_version() const { return graph_->format_version; }
const std::map<std::string, std::string>& Model::metadata() const { return graph_->metadata; }

std::string Model::meta(const std::string& key, const std::string& fallback) const {
  auto it = graph_->metadata.find(key);
  return it == graph_->metadata.end() ? fallback : it->second;
}

const std::vector<TensorInfo>& Model::inputs() const { return graph_->input_infos; }
const std::vector<TensorInfo>& Model::outputs() const { return graph_->output_infos; }
size_t Model::num_nodes() const { return graph_->nodes.size(); }
std::vector<ModelNode> Model::nodes() const {
  std::vector<ModelNode> out;
  out.reserve(graph_->nodes.size());
  auto names = [&](const std::vector<int>& ids) {
    std::vector<std::string> v;
    for (int id : ids) v.push_back(graph_->values.at(static_cast<size_t>(id)).name);
    return v;
  };
  for (const detail::Node& n : graph_->nodes)
    out.push_back({n.name, op_name(n.op()), names(n.inputs), names(n.outputs), n.params});
  return out;
}
uint64_t Model::weight_bytes() const { return graph_->weight_bytes; }
const detail::Graph& Model::graph() const { return *graph_; }
const std::string& Model::origin() const { return graph_->origin; }

std::vector<ModelConstant> Model::constants() const {
  std::vector<ModelConstant> out;
  for (const detail::Value& v : graph_->values)
    if (v.is_constant()) out.push_back({v.name, v.shape, v.data, v.dequantized.has_value()});
  return out;
}

double Model::flops(int64_t batch) const {
  const std::vector<Shape> shapes = detail::infer_shapes(*graph_, batch);
  double total = 0;
  for (const detail::Node& node : graph_->nodes) {
    NodeDesc d;
    d.params = node.params;
    for (int id : node.inputs) d.input_shapes.push_back(shapes[static_cast<size_t>(id)]);
    for (int id : node.outputs) d.output_shapes.push_back(shapes[static_cast<size_t>(id)]);
    total += detail::node_cost(d).flops;
  }
  return total;
}

}  // namespace infer
