// The batch a session runs at (batch.h): the model's own by default, another where the graph allows,
// and a one-line reason where it does not.
#include "batch.h"

#include <algorithm>
#include <string>

#include <fmt/format.h>

#include "infer/error.h"

namespace infer::detail {
namespace {

const Value& value(const Graph& g, int id) { return g.values.at(static_cast<size_t>(id)); }

bool has_batch_dimension(const Graph& g) {
  for (int id : g.inputs) {
    const Shape& s = value(g, id).shape;
    if (!s.empty() && s[0] == -1) return true;
  }
  return false;
}

}  // namespace

int64_t resolve_batch(const Graph& graph, int64_t requested) {
  if (requested < 0)
    throw Error("batch must be >= 1 (or 0: the model's own), got " + std::to_string(requested));
  if (requested > 0) return requested;
  if (graph.inputs.empty() || has_batch_dimension(graph)) return 1;
  const Shape& first = value(graph, graph.inputs[0]).shape;
  return first.empty() || first[0] < 1 ? 1 : first[0];
}

void free_batch(Graph& graph, int64_t batch) {
  if (graph.inputs.empty() || has_batch_dimension(graph)) return;
  const Value& first = value(graph, graph.inputs[0]);
  if (!first.shape.empty() && first.shape[0] == batch) return;
  auto refuse = [&](const std::string& why) {
    throw Error(fmt::format("{}: batch {} cannot apply: the model has no batch dimension (input '{}' is {}, "
                            "with no leading -1){}",
                            graph.origin, batch, first.name, shape_str(first.shape), why));
  };
  const auto it = graph.metadata.find("batch.fixed");  // why its producer kept it (onnx2fb writes it)
  const std::string fixed = it == graph.metadata.end() ? std::string() : it->second;
  if (first.shape.empty() || !fixed.empty())
    refuse("; it runs only at the size it was built with" +
           (fixed.empty() ? "" : " (batch.fixed: " + fixed + ")"));
  for (int id : graph.inputs) {
    const Value& v = value(graph, id);
    if (v.shape.empty() || v.shape[0] != first.shape[0])
      refuse(fmt::format(" and input '{}' is {}: inputs of different leading sizes have no one batch", v.name,
                         shape_str(v.shape)));
  }
  for (Value& v : graph.values)
    if (!v.is_constant() && !v.shape.empty()) v.shape[0] = -1;
  for (auto* infos : {&graph.input_infos, &graph.output_infos})
    for (TensorInfo& t : *infos)
      if (!t.shape.empty()) t.shape[0] = -1;
}

std::vector<bool> batch_inputs(const Graph& graph) {
  const bool any = has_batch_dimension(graph);
  std::vector<bool> out;
  for (int id : graph.inputs) {
    const Shape& s = value(graph, id).shape;
    out.push_back(!s.empty() && (!any || s[0] == -1));
  }
  return out;
}

int64_t batch_of_inputs(const std::vector<TensorView>& in, const std::vector<TensorInfo>& want,
                        const std::vector<bool>& carries) {
  if (in.size() != want.size() || carries.size() != want.size()) return 0;
  int64_t batch = 0;
  for (size_t k = 0; k < in.size(); ++k) {
    const Shape& got = in[k].shape;
    const Shape& w = want[k].shape;
    if (!carries[k]) {
      if (got != w) return 0;
      continue;
    }
    if (got.size() != w.size() || got.empty() || got[0] < 1 || (batch && got[0] != batch) ||
        !std::equal(w.begin() + 1, w.end(), got.begin() + 1))
      return 0;
    batch = got[0];
  }
  return batch;
}

}  // namespace infer::detail
