// The channels_last pass (layout.h). Nodes are visited in execution order with the current layout of
// every value; a node's layout is decided from its data input's layout and the support table, and any
// 4-D data input in the other layout is read through a conversion node placed just before it (shared
// by later readers), except a 1x1-pixel one (the same bytes in both). Constants are never converted:
// kernels that need re-laid-out weights prepare them.
#include "layout.h"

#include <map>
#include <utility>

#include <fmt/format.h>

#include "infer/error.h"

namespace infer::detail {
namespace {

Layout other(Layout l) { return l == Layout::NHWC ? Layout::NCHW : Layout::NHWC; }

bool is_4d_activation(const Graph& g, int id) {
  const Value& v = g.values.at(static_cast<size_t>(id));
  return !v.is_constant() && v.shape.size() == 4;
}

// A 4-D activation of 1x1 pixels ([N, C, 1, 1]: a generator's latent z, a pooled vector) has the same
// bytes in NCHW and NHWC: read in either layout without a conversion, and no layout preference.
bool is_pixel(const Graph& g, int id) {
  const Value& v = g.values.at(static_cast<size_t>(id));
  return is_4d_activation(g, id) && v.shape[2] == 1 && v.shape[3] == 1;
}

}  // namespace

Graph assign_layouts(Graph g, const std::vector<LayoutSupport>& support, std::vector<std::string>* log) {
  if (support.size() != g.nodes.size())
    throw Error(fmt::format("channels_last: {} support entries for {} nodes", support.size(),
                            g.nodes.size()));
  std::vector<Node> out;
  out.reserve(g.nodes.size() + 4);
  std::map<std::pair<int, Layout>, int> converted;  // (value, layout) -> the converted copy's id
  int nhwc_nodes = 0;
  std::vector<std::string> where;  // "nhwc before conv1_1" per conversion, for the log

  auto convert = [&](int id, Layout to, const std::string& reader) {
    auto key = std::make_pair(id, to);
    if (auto it = converted.find(key); it != converted.end()) return it->second;
    Value copy = g.values[static_cast<size_t>(id)];
    const Layout from = copy.layout;
    copy.name += std::string(".") + layout_name(to);
    copy.layout = to;
    g.values.push_back(copy);
    const int new_id = static_cast<int>(g.values.size()) - 1;
    Node n;
    n.name = g.values[static_cast<size_t>(id)].name + ":to_" + layout_name(to);
    n.params = LayoutParams{from, to};
    n.inputs = {id};
    n.outputs = {new_id};
    n.layout = to;
    out.push_back(std::move(n));
    converted[key] = new_id;
    where.push_back(fmt::format("{} before {}", layout_name(to), reader));
    return new_id;
  };

  // For a node whose 4-D inputs are all 1x1: the layout the first reader of its (first, 4-D, not 1x1)
  // output strictly prefers; `fallback` (its input's label) when there is no such output or preference.
  auto reader_preference = [&](size_t i, Layout fallback) {
    if (g.nodes[i].outputs.empty()) return fallback;
    const int out = g.nodes[i].outputs[0];
    if (!is_4d_activation(g, out) || is_pixel(g, out)) return fallback;
    for (size_t j = i + 1; j < g.nodes.size(); ++j)
      for (int id : g.nodes[j].inputs)
        if (id == out)
          return support[j].nhwc > support[j].nchw   ? Layout::NHWC
                 : support[j].nchw > support[j].nhwc ? Layout::NCHW
                                                     : fallback;
    return fallback;
  };

  for (size_t i = 0; i < g.nodes.size(); ++i) {
    Node node = g.nodes[i];
    int first = -1, first_pixel = -1;
    bool touches_4d = false;
    for (int id : node.inputs)
      if (is_4d_activation(g, id)) {
        touches_4d = true;
        int& slot = is_pixel(g, id) ? first_pixel : first;
        if (slot < 0) slot = id;
      }
    for (int id : node.outputs) touches_4d = touches_4d || is_4d_activation(g, id);
    Layout chosen = Layout::NCHW;
    if (touches_4d) {
      // a node whose 4-D inputs are all 1x1 (EB-GAN's projection of z) starts from its reader's
      // preference instead, so a generator's first layer writes the layout its next layer runs in
      const Layout in = first >= 0         ? g.values[static_cast<size_t>(first)].layout
                        : first_pixel >= 0 ? reader_preference(i, g.values[static_cast<size_t>(first_pixel)].layout)
                                           : Layout::NCHW;
      const LayoutSupport& s = support[i];
      chosen = s.of(in) >= 0 && s.of(in) >= s.of(other(in)) ? in
               : s.of(other(in)) >= 0                        ? other(in)
                                                             : Layout::NCHW;
    }
    for (int& id : node.inputs)
      if (is_4d_activation(g, id) && !is_pixel(g, id) && g.values[static_cast<size_t>(id)].layout != chosen)
        id = convert(id, chosen, node.name);
    node.layout = chosen;
    for (int id : node.outputs)
      if (is_4d_activation(g, id)) g.values[static_cast<size_t>(id)].layout = chosen;
    if (touches_4d && chosen == Layout::NHWC) ++nhwc_nodes;
    out.push_back(std::move(node));
  }

  // Graph outputs are NCHW: an NHWC output value is renamed into an internal copy and converted back
  // into the original value (which keeps its name and id) by a last node.
  for (int id : g.outputs) {
    Value& v = g.values[static_cast<size_t>(id)];
    if (v.layout != Layout::NHWC) continue;
    if (is_pixel(g, id)) {  // the same bytes: relabelled, not converted
      v.layout = Layout::NCHW;
      continue;
    }
    Value internal = v;
    internal.name += ".nhwc";
    g.values.push_back(internal);
    const int internal_id = static_cast<int>(g.values.size()) - 1;
    for (Node& n : out) {
      for (int& x : n.inputs)
        if (x == id) x = internal_id;
      for (int& x : n.outputs)
        if (x == id) x = internal_id;
    }
    g.values[static_cast<size_t>(id)].layout = Layout::NCHW;
    Node n;
    n.name = g.values[static_cast<size_t>(id)].name + ":to_nchw";
    n.params = LayoutParams{Layout::NHWC, Layout::NCHW};
    n.inputs = {internal_id};
    n.outputs = {id};
    n.layout = Layout::NCHW;
    out.push_back(std::move(n));
    where.push_back(fmt::format("nchw for output {}", g.values[static_cast<size_t>(id)].name));
  }

  g.nodes = std::move(out);
  if (log) {
    std::string line = fmt::format("channels_last: {} node(s) run NHWC, {} layout conversion(s)",
                                   nhwc_nodes, where.size());
    for (size_t k = 0; k < where.size(); ++k) line += (k ? ", " : " (") + where[k];
    if (!where.empty()) line += ")";
    log->push_back(line);
  }
  return g;
}

}  // namespace infer::detail
