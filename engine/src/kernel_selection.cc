// Kernel selection (kernel_selection.h): forced variants checked against the registry and the default
// heuristic (highest priority among the applicable variants, ties to the registry's order); autotune
// is autotune.cc's. Every choice is logged at debug level.
#include "kernel_selection.h"

#include <mutex>

#include <fmt/format.h>
#include <spdlog/spdlog.h>

#include "infer/error.h"
#include "infer/openblas.h"

namespace infer::detail {
namespace {

std::string all_op_names() {
  std::string out;
  for (int i = 0; i < kNumOpTypes; ++i) {
    if (i) out += ", ";
    out += op_name(static_cast<OpType>(i));
  }
  return out;
}

bool is_op_name(const std::string& name) {
  for (int i = 0; i < kNumOpTypes; ++i)
    if (name == op_name(static_cast<OpType>(i))) return true;
  return false;
}

}  // namespace

NodeDesc describe_node(const Graph& graph, const std::vector<Shape>& shapes, size_t i,
                       Precision precision, CpuIsa isa) {
  const Node& node = graph.nodes[i];
  NodeDesc desc{node.params, {}, {}, {}, precision, node.layout, isa};
  for (int id : node.inputs) {
    if (id < 0 || static_cast<size_t>(id) >= graph.values.size())
      throw Error(node_where(graph, i) + ": input value id " + std::to_string(id) + " out of range");
    const Value& v = graph.values[static_cast<size_t>(id)];
    desc.input_shapes.push_back(shapes[static_cast<size_t>(id)]);
    desc.constants.push_back(v.data);
  }
  for (int id : node.outputs) {
    if (id < 0 || static_cast<size_t>(id) >= graph.values.size())
      throw Error(node_where(graph, i) + ": output value id " + std::to_string(id) + " out of range");
    desc.output_shapes.push_back(shapes[static_cast<size_t>(id)]);
  }
  return desc;
}

// Forced variants are checked up front, whether or not the model has the op.
KernelSelector::KernelSelector(std::string kernel_backend, std::string backend_name, bool reference_only,
                               const PassOptions& passes, const std::map<std::string, std::string>& kernels)
    : kernel_backend_(std::move(kernel_backend)),
      backend_name_(std::move(backend_name)),
      reference_only_(reference_only),
      passes_(passes) {
  const KernelRegistry& registry = KernelRegistry::global();
  for (const auto& [key, name] : kernels) {
    const size_t colon = key.find(':');  // "op:node": one node, by name
    const std::string op = key.substr(0, colon);
    if (!is_op_name(op))
      throw Error("kernels: unknown op '" + op + "' (ops: " + all_op_names() + ")");
    if (colon != std::string::npos && colon + 1 == key.size())
      throw Error("kernels: '" + key + "' names no node (op:node=variant)");
    const KernelVariant* v = registry.find(kernel_backend_, op, name);
    if (!v || !allowed(*v))
      throw Error(fmt::format("kernels: op '{}' has no variant '{}' on backend {} (variants: {})", op,
                              name, backend_name_, variant_list(op)));
    if (colon == std::string::npos)
      forced_[op] = v;
    else
      forced_node_[key.substr(colon + 1)] = {op, v};
  }
}

const KernelVariant* KernelSelector::forced_for(const Node& node) const {
  const std::string op = op_name(node.op());
  if (auto it = forced_node_.find(node.name); it != forced_node_.end() && it->second.first == op)
    return it->second.second;
  if (auto it = forced_.find(op); it != forced_.end()) return it->second;
  return nullptr;
}

std::vector<const KernelVariant*> KernelSelector::candidates_for(const std::string& op) const {
  if (auto it = forced_.find(op); it != forced_.end()) return {it->second};
  return KernelRegistry::global().variants(kernel_backend_, op);
}

std::vector<const KernelVariant*> KernelSelector::candidates_for(const Node& node) const {
  if (const KernelVariant* v = forced_for(node)) return {v};
  return KernelRegistry::global().variants(kernel_backend_, op_name(node.op()));
}

bool KernelSelector::some_variant_runs(const std::vector<const KernelVariant*>& candidates,
                                       const NodeDesc& desc) const {
  for (const KernelVariant* v : candidates)
    if (allowed(*v) && v->run && variant_applies(*v, desc)) return true;
  return false;
}

std::string KernelSelector::variant_list(const std::string& op) const {
  std::string out;
  for (const KernelVariant* v : KernelRegistry::global().variants(kernel_backend_, op)) {
    if (!allowed(*v)) continue;
    if (!out.empty()) out += ", ";
    out += v->name;
  }
  return out.empty() ? "none" : out;
}

void KernelSelector::check_forced_nodes(const Graph& graph) const {
  for (const auto& [name, f] : forced_node_) {
    bool found = false;
    for (const Node& node : graph.nodes)
      found = found || (node.name == name && op_name(node.op()) == f.first);
    if (!found)
      throw Error(fmt::format("kernels: no {} node named '{}' in the graph (after its passes; -v lists them)",
                              f.first, name));
  }
}

NodeInfo node_info(const Node& node, const NodeDesc& desc, const KernelVariant& variant,
                   const std::string& kernel_backend, CpuIsa isa) {
  NodeInfo ni;
  ni.name = node.name;
  ni.op = op_name(node.op());
  ni.variant = variant.name;
  ni.fused = node.fused;
  ni.layout = node.layout;
  if (kernel_backend == "cpu")
    ni.isa = variant.isa == KernelVariant::Isa::PerIsa     ? cpu_isa_name(isa)
             : variant.isa == KernelVariant::Isa::OpenBlas ? "openblas"
                                                          : "baseline";
  ni.output_shape = desc.output_shapes.empty() ? Shape{} : desc.output_shapes[0];
  ni.workspace_bytes = variant.workspace_bytes ? variant.workspace_bytes(desc) : 0;
  return ni;
}

void warn_openblas_above_cap(const std::string& backend, const std::vector<const KernelVariant*>& variants,
                             CpuIsa isa) {
  if (backend != "cpu") return;
  int n = 0;
  for (const KernelVariant* v : variants) n += v && v->isa == KernelVariant::Isa::OpenBlas ? 1 : 0;
  if (n == 0 || openblas_isa() <= isa) return;
  const std::string note = fmt::format(
      "openblas: {} node(s) run OpenBLAS's {} kernels, which need more than the session's {} level (it "
      "picks its own at load): start with OPENBLAS_CORETYPE={} to cap them too",
      n, openblas_core(), cpu_isa_name(isa), isa == CpuIsa::Avx2 ? "Haswell" : "Prescott");
  static std::once_flag warned;
  std::call_once(warned, [&] { spdlog::warn("{}", note); });
}

KernelChoice select_kernels(const KernelSelector& selector, const Graph& graph,
                            const std::vector<NodeDesc>& descs, Backend& backend) {
  const KernelRegistry& registry = KernelRegistry::global();
  KernelChoice choice;
  for (size_t i = 0; i < descs.size(); ++i) {
    const NodeDesc& desc = descs[i];
    const std::string op = op_name(graph.nodes[i].op());
    const KernelVariant* chosen = selector.forced_for(graph.nodes[i]);
    if (chosen) {
      if (!variant_applies(*chosen, desc))
        throw Error(fmt::format("kernels: variant '{}' of {} does not apply to {} ({})", chosen->name,
                                op, node_where(graph, i), layout_name(desc.layout)));
    } else {
      int best = 0;
      for (const KernelVariant* v : registry.variants(selector.kernel_backend(), op)) {
        if (!selector.allowed(*v) || !variant_applies(*v, desc)) continue;
        const int p = KernelSelector::priority(*v, desc);
        if (!chosen || p > best) {  // strictly greater: ties keep the registry's order
          chosen = v;
          best = p;
        }
      }
      if (!chosen)
        throw Error(fmt::format("{}: no applicable kernel variant on backend {} (variants: {})",
                                node_where(graph, i), selector.backend_name(), selector.variant_list(op)));
    }
    if (!chosen->run)
      throw Error(fmt::format("{}: kernel variant '{}' has no run function", node_where(graph, i),
                              chosen->name));
    spdlog::debug("{}: kernel variant {}, layout {}", node_where(graph, i), chosen->name,
                  layout_name(desc.layout));
    if (selector.forced_for(graph.nodes[i])) choice.forced_step.insert(i);
    choice.variants.push_back(chosen);
    const uint64_t before = backend.allocated_bytes();
    choice.prepared.push_back(chosen->prepare ? chosen->prepare(desc) : nullptr);
    choice.prepared_size.push_back(backend.allocated_bytes() - before);
    choice.prepared_bytes += choice.prepared_size.back();
  }
  return choice;
}

}  // namespace infer::detail
