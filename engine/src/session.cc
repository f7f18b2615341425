// Session: binds a model to a backend, a precision and a batch size. Creation does everything that does
// not depend on input values: graph passes, shape inference, kernel selection (forced, by priority, or
// timed with autotune), prepare(), workspace sizes, the memory plan, the one arena allocation, the
// pre-built kernel calls (every pointer resolved) and, on cuda, the capture of the forward into a CUDA
// graph. run() then only stages inputs in, replays (or calls kernels in order) and stages outputs out:
// no allocation but the returned Tensors. profile() calls the nodes one by one with the backend's timer.
#include "infer/session.h"

#include <algorithm>
#include <chrono>
#include <limits>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include <fmt/format.h>
#include <spdlog/spdlog.h>

#include "backend.h"
#include "cost.h"
#include "graph.h"
#include "infer/error.h"
#include "engine/src/kernel_api.h"
#include "layout.h"
#include "memory_budget.h"
#include "plan.h"
#include "passes.h"
#include "planner.h"
#include "shape_inference.h"

namespace infer {

struct Session::Impl {
  std::shared_ptr<const detail::Graph> graph;  // our own copy: the Model may be destroyed
  std::string backend_name;                    // "cpu", "cuda" or "reference", as reported
  bool reference_only = false;
  int64_t batch = 1;
  Precision precision = Precision::FP32;
  CpuIsa cpu_isa = CpuIsa::Baseline;          // cpu kernels' instruction-set level (NodeDesc::isa)
  PassOptions passes;                          // as given: backend passes and requires_pass read it
  std::map<std::string, const KernelVariant*> forced;  // --kernel op=variant, checked
  // --kernel op:node=variant, checked: node name -> (op, variant)
  std::map<std::string, std::pair<std::string, const KernelVariant*>> forced_node;
  uint64_t element_bytes = 4;                  // of every activation and constant: 2 under fp16
  bool captured = false;                       // the forward is a CUDA graph: run() replays it
  std::unique_ptr<detail::Backend> backend;

  std::vector<Shape> shapes;  // concrete shape of every value
  std::vector<TensorInfo> inputs, outputs;
  std::vector<NodeInfo> nodes;

  // Per node (step), in execution order. `calls` refer to `descs` by reference: both are filled once
  // and never resized afterwards.
  std::vector<NodeDesc> descs;
  std::vector<const KernelVariant*> variants;
  std::vector<std::shared_ptr<void>> prepared;
  std::vector<KernelCall> calls;
  std::vector<detail::NodeCost> costs;
  std::vector<uint64_t> live_bytes;  // activation bytes live at each step
  std::vector<std::string> pass_log;  // one line per graph pass (Session::passes())
  std::set<size_t> forced_step;       // steps whose variant --kernel forced (autotune keeps them)
  std::vector<uint64_t> prepared_size;  // device bytes each step's prepare() allocated (cuda)
  uint64_t prepared_bytes_now = 0;      // their sum

  detail::Plan plan;
  std::vector<int> tensor_value;      // per plan.tensors entry: its value id (-1 for workspaces)
  std::unique_ptr<detail::DeviceBuffer> arena;
  uint64_t max_memory_bytes = 0;      // SessionOptions::max_memory_bytes (0: only what is available)
  bool constants_held = false;        // build_calls() ran once: the backend holds its weight copies
  std::vector<void*> value_ptrs;      // device pointer of every value the nodes use (or nullptr)
  std::vector<uint64_t> value_bytes;  // activation bytes of every value (0 for constants)

  Impl(const Model& model, const SessionOptions& options);
  void check_inputs(const std::vector<Tensor>& in, const char* caller) const;
  // Copies in, runs the forward, copies out into `out` (already shaped). With a timer the nodes run one
  // by one (never the captured graph): slot 0 at the start, slot i+1 before node i, slot n+1 after the
  // last node.
  void execute(const std::vector<Tensor>& in, std::vector<Tensor>& out, detail::Timer* timer);
  // The forward alone: graph replay when captured (and no timer), else every node in order.
  void forward(detail::Timer* timer);
  std::vector<Tensor> make_outputs() const;
  void note_device_memory();

 private:
  std::string where(size_t step) const;
  // A variant the session may run: the reference backend offers only "reference", and a variant that
  // belongs to a pass (KernelVariant::requires_pass) only while that pass is on.
  bool allowed(const KernelVariant& v) const {
    return (!reference_only || v.name == "reference") &&
           (v.requires_pass.empty() || passes.enabled(v.requires_pass));
  }
  int priority(const KernelVariant& v, const NodeDesc& d) const {
    return v.priority_for ? v.priority_for(d) : v.priority;
  }
  // The variant --kernel forces on graph node i (by its name, else by its op), or null.
  const KernelVariant* forced_for(size_t i) const {
    const detail::Node& node = graph->nodes[i];
    const std::string op = op_name(node.op());
    if (auto it = forced_node.find(node.name); it != forced_node.end() && it->second.first == op)
      return it->second.second;
    if (auto it = forced.find(op); it != forced.end()) return it->second;
    return nullptr;
  }
  // The variants a node of `op` may get: the forced one (--kernel), else all of this backend's.
  std::vector<const KernelVariant*> candidates_for(const std::string& op) const {
    if (auto it = forced.find(op); it != forced.end()) return {it->second};
    return KernelRegistry::global().variants(backend->name(), op);
  }
  std::vector<const KernelVariant*> candidates_for(size_t i) const {
    if (const KernelVariant* v = forced_for(i)) return {v};
    return KernelRegistry::global().variants(backend->name(), op_name(graph->nodes[i].op()));
  }
  // True when one of `candidates` this session may run applies to `desc` (the backend passes' test).
  bool some_variant_runs(const std::vector<const KernelVariant*>& candidates, const NodeDesc& desc) const {
    for (const KernelVariant* v : candidates)
      if (allowed(*v) && v->run && variant_applies(*v, desc)) return true;
    return false;
  }
  // A backend pass's tail: the rewritten graph replaces ours, is checked, and its shapes are inferred
  // again (the passes add constants); returns the pass's log line.
  std::string adopt(detail::Graph rewritten, const std::vector<std::string>& log, const char* name) {
    graph = std::make_shared<const detail::Graph>(std::move(rewritten));
    detail::validate_graph(*graph);
    shapes = detail::infer_shapes(*graph, batch);
    return log.empty() ? std::string(name) + ": ?" : log.front();
  }
  std::string variant_list(const std::string& op) const;
  NodeDesc describe(size_t step) const;  // the node's NodeDesc from the graph, shapes and precision
  void check_forced(const SessionOptions& options);
  void choose_layouts();
  void select_kernels();
  void log_fold_width();
  void check_fixed_batch(const Model& model) const;
  std::string fuse_residual();
  std::string fuse_squeeze_excite();
  void autotune();
  void plan_memory();
  void check_memory() const;
  void build_calls();
  void capture();
};

namespace {

Session::Impl& checked(const std::unique_ptr<Session::Impl>& impl) {
  if (!impl) throw Error("infer::Session: use of a moved-from session");
  return *impl;
}

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

// Bytes of an activation of `shape` stored as `element` bytes per value (4, or 2 under fp16).
uint64_t activation_bytes(const Shape& shape, uint64_t element, const std::string& what) {
  uint64_t n = 1;
  for (int64_t d : shape) {
    if (d < 0) throw Error(what + ": negative dimension in shape " + shape_str(shape));
    if (d != 0 && n > std::numeric_limits<uint64_t>::max() / 4 / static_cast<uint64_t>(d))
      throw Error(what + ": shape " + shape_str(shape) + " is too large");
    n *= static_cast<uint64_t>(d);
  }
  return n * element;
}

// SessionOptions::extra_outputs appended to the graph's outputs before the passes run: passes never
// fuse a graph output away and the planner keeps outputs alive to the end, so no other module needs
// to know about them.
void add_extra_outputs(detail::Graph& g, const std::vector<std::string>& names) {
  const size_t model_outputs = g.outputs.size();
  for (const std::string& name : names) {
    std::vector<int> ids;
    for (size_t id = 0; id < g.values.size(); ++id)
      if (g.values[id].name == name) ids.push_back(static_cast<int>(id));
    if (ids.empty())
      throw Error(fmt::format("extra output '{}': {} has no value of that name", name, g.origin));
    if (ids.size() > 1)
      throw Error(fmt::format("extra output '{}': {} has {} values of that name", name, g.origin,
                              ids.size()));
    const int id = ids[0];
    if (g.values[static_cast<size_t>(id)].is_constant())
      throw Error(fmt::format("extra output '{}': a constant of {} (weights), not an activation", name,
                              g.origin));
    const auto at = std::find(g.outputs.begin(), g.outputs.end(), id);
    if (at != g.outputs.end())
      throw Error(fmt::format("extra output '{}': {}", name,
                              static_cast<size_t>(at - g.outputs.begin()) < model_outputs
                                  ? "already an output of " + g.origin
                                  : std::string("given twice")));
    g.outputs.push_back(id);
  }
}

double median(std::vector<double> v) {
  if (v.empty()) return 0;
  std::sort(v.begin(), v.end());
  size_t mid = v.size() / 2;
  return v.size() % 2 ? v[mid] : 0.5 * (v[mid - 1] + v[mid]);
}

}  // namespace

std::string Session::Impl::where(size_t step) const {
  const detail::Node& node = graph->nodes[step];
  return fmt::format("{}: node {} '{}' ({})", graph->origin, step, node.name, op_name(node.op()));
}

NodeDesc Session::Impl::describe(size_t i) const {
  const detail::Node& node = graph->nodes[i];
  NodeDesc desc{node.params, {}, {}, {}, precision, node.layout, cpu_isa};
  for (int id : node.inputs) {
    if (id < 0 || static_cast<size_t>(id) >= graph->values.size())
      throw Error(where(i) + ": input value id " + std::to_string(id) + " out of range");
    const detail::Value& v = graph->values[static_cast<size_t>(id)];
    desc.input_shapes.push_back(shapes[static_cast<size_t>(id)]);
    desc.constants.push_back(v.data);
  }
  for (int id : node.outputs) {
    if (id < 0 || static_cast<size_t>(id) >= graph->values.size())
      throw Error(where(i) + ": output value id " + std::to_string(id) + " out of range");
    desc.output_shapes.push_back(shapes[static_cast<size_t>(id)]);
  }
  return desc;
}

// The channels_last pass (engine/src/layout.h) on backends and precisions where a layout other than
// NCHW can pay: cuda in fp16 and tf32 (strict fp32 keeps NCHW, where its tuned kernels live), and cpu
// (fp32; its NHWC variants' priorities make depthwise networks switch, docs/kernels.md). The
// support table asks the registry, per node and layout, for the best priority of an applicable variant
// (only the forced one where --kernel forces the op). Shapes are inferred again for the new values.
void Session::Impl::choose_layouts() {
  if (!passes.channels_last) {
    pass_log.push_back("channels_last: off");
    return;
  }
  if (backend_name == "cuda" ? precision == Precision::FP32 : backend_name != "cpu") {
    pass_log.push_back(fmt::format("channels_last: not used ({} in {} keeps NCHW)", backend_name,
                                   precision_name(precision)));
    return;
  }
  std::vector<detail::LayoutSupport> support(graph->nodes.size());
  for (size_t i = 0; i < graph->nodes.size(); ++i) {
    NodeDesc desc = describe(i);
    const std::vector<const KernelVariant*> candidates = candidates_for(i);
    for (Layout layout : {Layout::NCHW, Layout::NHWC}) {
      desc.layout = layout;
      int best = -1;
      for (const KernelVariant* v : candidates)
        if (allowed(*v) && v->run && variant_applies(*v, desc)) best = std::max(best, priority(*v, desc));
      (layout == Layout::NHWC ? support[i].nhwc : support[i].nchw) = best;
    }
  }
  graph = std::make_shared<const detail::Graph>(detail::assign_layouts(*graph, support, &pass_log));
  detail::validate_graph(*graph);
  shapes = detail::infer_shapes(*graph, batch);
}

// A model whose inputs have no batch dimension (no leading -1) runs only at the size it was built
// with: any other batch fails here, naming the input that fixes it and quoting the model's
// `batch.fixed` metadata (why its producer kept it fixed; onnx2fb writes it), instead of being silently
// ignored (its shapes would stay at the built size while batch() and the profile claimed another).
void Session::Impl::check_fixed_batch(const Model& model) const {
  if (graph->inputs.empty() || batch == 1) return;
  for (int id : graph->inputs) {
    const Shape& s = graph->values[static_cast<size_t>(id)].shape;
    if (!s.empty() && s[0] == -1) return;
  }
  const detail::Value& first = graph->values[static_cast<size_t>(graph->inputs[0])];
  if (!first.shape.empty() && first.shape[0] == batch) return;
  const std::string why = model.meta("batch.fixed");
  throw Error(fmt::format("{}: batch {} cannot apply: the model has no batch dimension (input '{}' is {}, "
                          "with no leading -1); it runs only at the size it was built with{}",
                          graph->origin, batch, first.name, shape_str(first.shape),
                          why.empty() ? std::string() : " (batch.fixed: " + why + ")"));
}

// The fuse_conv_residual backend pass, after shape inference: a conv2d + residual add pair is fused
// where a kernel variant this session may run (the forced one under --kernel) applies to the merged
// node in NCHW (every layout pass starts there): on cpu any conv2d; on cuda ungrouped ones (GEMM,
// cuDNN and direct variants add the residual in their epilogue), grouped ones where cuDNN or direct
// takes them. Shapes are inferred again for the zero biases it adds. Returns its log line.
std::string Session::Impl::fuse_residual() {
  if (!passes.fuse_conv_residual) return "fuse_conv_residual: off";
  const std::vector<const KernelVariant*> candidates = candidates_for("conv2d");
  auto takes = [&](const detail::Graph& g, const detail::Node& conv, int residual, const Activation& act) {
    Conv2DParams p = std::get<Conv2DParams>(conv.params);
    p.add_residual = true;
    p.activation = act;
    NodeDesc desc{p, {}, {}, {}, precision, Layout::NCHW, cpu_isa};
    for (int id : conv.inputs) {
      desc.input_shapes.push_back(shapes.at(static_cast<size_t>(id)));
      desc.constants.push_back(g.values.at(static_cast<size_t>(id)).data);
    }
    std::vector<float> zero_bias;  // the one the pass adds to a conv without bias
    if (conv.inputs.size() == 2) {
      zero_bias.assign(static_cast<size_t>(desc.input_shapes[1].at(0)), 0.f);
      desc.input_shapes.push_back(Shape{desc.input_shapes[1].at(0)});
      desc.constants.push_back(zero_bias.data());
    }
    desc.input_shapes.push_back(shapes.at(static_cast<size_t>(residual)));
    desc.constants.push_back(nullptr);
    desc.output_shapes.push_back(shapes.at(static_cast<size_t>(conv.outputs.at(0))));
    return some_variant_runs(candidates, desc);
  };
  std::vector<std::string> log;
  detail::Graph rewritten = detail::fuse_conv_residual(*graph, takes, &log);
  return adopt(std::move(rewritten), log, "fuse_conv_residual");
}

// The fuse_squeeze_excite backend pass, right after fuse_conv_residual and the same way: a block is
// fused where a squeeze_excite variant this session may run applies to the merged node in NCHW.
std::string Session::Impl::fuse_squeeze_excite() {
  if (!passes.fuse_squeeze_excite) return "fuse_squeeze_excite: off";
  const std::vector<const KernelVariant*> candidates = candidates_for("squeeze_excite");
  auto takes = [&](const detail::Graph& g, const detail::Node& se) {
    NodeDesc desc{se.params, {}, {}, {}, precision, Layout::NCHW, cpu_isa};
    for (int id : se.inputs) {
      const detail::Value& v = g.values.at(static_cast<size_t>(id));
      // zero biases the pass just added have no entry in `shapes` yet: constants keep their shape
      desc.input_shapes.push_back(v.is_constant() ? v.shape : shapes.at(static_cast<size_t>(id)));
      desc.constants.push_back(v.data);
    }
    desc.output_shapes.push_back(shapes.at(static_cast<size_t>(se.outputs.at(0))));
    return some_variant_runs(candidates, desc);
  };
  std::vector<std::string> log;
  detail::Graph rewritten = detail::fuse_squeeze_excite(*graph, takes, &log);
  return adopt(std::move(rewritten), log, "fuse_squeeze_excite");
}

// One pass-log line for fold_width, from the variants chosen (a folded variant requires the pass).
void Session::Impl::log_fold_width() {
  if (!passes.fold_width) {
    pass_log.push_back("fold_width: off");
    return;
  }
  std::string names;
  int count = 0;
  for (size_t i = 0; i < variants.size(); ++i)
    if (variants[i]->requires_pass == "fold_width") {
      names += (count++ ? ", " : "") + graph->nodes[i].name;
    }
  pass_log.push_back(count ? fmt::format("fold_width: {} convolution(s) width-folded ({})", count, names)
                           : "fold_width: no convolution width-folded");
}

std::string Session::Impl::variant_list(const std::string& op) const {
  std::string out;
  for (const KernelVariant* v : KernelRegistry::global().variants(backend->name(), op)) {
    if (!allowed(*v)) continue;
    if (!out.empty()) out += ", ";
    out += v->name;
  }
  return out.empty() ? "none" : out;
}

Session::Impl::Impl(const Model& model, const SessionOptions& options) {
  // Passes rewrite our copy; the Model (and its mmapped weights) stays untouched.
  detail::Graph own = model.graph();
  add_extra_outputs(own, options.extra_outputs);
  graph = std::make_shared<const detail::Graph>(
      detail::run_passes(std::move(own), options.passes, &pass_log));

  std::string chosen = options.backend;
  if (chosen == "auto") {
#ifdef INFER_WITH_CUDA
    chosen = detail::cuda_device_available() ? "cuda" : "cpu";
#else
    chosen = "cpu";
#endif
  }
  precision = options.precision;
  if (precision != Precision::FP32 && precision != Precision::TF32 && precision != Precision::FP16)
    throw Error("unknown precision value " + std::to_string(static_cast<int>(precision)));
  if (chosen == "cpu" || chosen == "reference") {
    backend_name = chosen;
    reference_only = chosen == "reference";
    if (precision != Precision::FP32)
      throw Error(fmt::format("precision {} needs the cuda backend (backend {} runs fp32 only)",
                              precision_name(precision), chosen));
    backend = detail::make_cpu_backend();
  } else if (chosen == "cuda") {
#ifdef INFER_WITH_CUDA
    backend_name = "cuda";
    backend = detail::make_cuda_backend(precision);
#else
    throw Error("this build of infer has no CUDA backend (built without a CUDA toolkit)");
#endif
  } else {
    throw Error("unknown backend '" + options.backend + "' (choices: auto, cpu, cuda, reference)");
  }
  element_bytes = precision == Precision::FP16 ? 2 : 4;
  cpu_isa = cpu_isa_default();
  if (options.cpu_isa) cpu_isa = std::min(cpu_isa, *options.cpu_isa);
  passes = options.passes;
  max_memory_bytes = options.max_memory_bytes;

  if (options.batch < 1)
    throw Error("batch must be >= 1, got " + std::to_string(options.batch));
  batch = options.batch;
  shapes = detail::infer_shapes(*graph, batch);
  if (shapes.size() != graph->values.size())
    throw Error(graph->origin + ": shape inference returned " + std::to_string(shapes.size()) +
                " shapes for " + std::to_string(graph->values.size()) + " values");

  auto info = [&](int id, const char* what) {
    if (id < 0 || static_cast<size_t>(id) >= graph->values.size())
      throw Error(fmt::format("{}: {} value id {} out of range", graph->origin, what, id));
    const detail::Value& v = graph->values[static_cast<size_t>(id)];
    return TensorInfo{v.name, shapes[static_cast<size_t>(id)], v.dtype};
  };
  for (int id : graph->inputs) inputs.push_back(info(id, "input"));
  for (int id : graph->outputs) outputs.push_back(info(id, "output"));
  check_fixed_batch(model);

  check_forced(options);
  const std::string residual_log = fuse_residual();
  const std::string se_log = fuse_squeeze_excite();
  choose_layouts();
  select_kernels();
  plan_memory();
  build_calls();
  if (options.autotune) {
    autotune();  // may change variants: plan and calls again with their workspaces
    plan_memory();
    build_calls();
  }
  log_fold_width();
  pass_log.push_back(residual_log);  // listed last: see PassOptions::fuse_conv_residual
  pass_log.push_back(se_log);
  capture();
  note_device_memory();
}

// Forced variants are checked up front, whether or not the model has the op.
void Session::Impl::check_forced(const SessionOptions& options) {
  const KernelRegistry& registry = KernelRegistry::global();
  const std::string& kernel_backend = backend->name();
  for (const auto& [key, name] : options.kernels) {
    const size_t colon = key.find(':');  // "op:node": one node, by name
    const std::string op = key.substr(0, colon);
    if (!is_op_name(op))
      throw Error("kernels: unknown op '" + op + "' (ops: " + all_op_names() + ")");
    if (colon != std::string::npos && colon + 1 == key.size())
      throw Error("kernels: '" + key + "' names no node (op:node=variant)");
    const KernelVariant* v = registry.find(kernel_backend, op, name);
    if (!v || !allowed(*v))
      throw Error(fmt::format("kernels: op '{}' has no variant '{}' on backend {} (variants: {})", op,
                              name, backend_name, variant_list(op)));
    if (colon == std::string::npos)
      forced[op] = v;
    else
      forced_node[key.substr(colon + 1)] = {op, v};
  }
}

void Session::Impl::select_kernels() {
  const KernelRegistry& registry = KernelRegistry::global();
  const std::string& kernel_backend = backend->name();
  const size_t n = graph->nodes.size();
  descs.reserve(n);
  for (size_t i = 0; i < n; ++i) descs.push_back(describe(i));
  for (const auto& [name, f] : forced_node) {
    bool found = false;
    for (const detail::Node& node : graph->nodes) found = found || (node.name == name && op_name(node.op()) == f.first);
    if (!found)
      throw Error(fmt::format("kernels: no {} node named '{}' in the graph (after its passes; -v lists them)",
                              f.first, name));
  }

  for (size_t i = 0; i < n; ++i) {
    const NodeDesc& desc = descs[i];
    const std::string op = op_name(graph->nodes[i].op());
    const KernelVariant* chosen = forced_for(i);
    if (chosen) {
      if (!variant_applies(*chosen, desc))
        throw Error(fmt::format("kernels: variant '{}' of {} does not apply to {} ({})", chosen->name,
                                op, where(i), layout_name(desc.layout)));
    } else {
      int best = 0;
      for (const KernelVariant* v : registry.variants(kernel_backend, op)) {
        if (!allowed(*v) || !variant_applies(*v, desc)) continue;
        const int p = priority(*v, desc);
        if (!chosen || p > best) {  // strictly greater: ties keep the registry's order
          chosen = v;
          best = p;
        }
      }
      if (!chosen)
        throw Error(fmt::format("{}: no applicable kernel variant on backend {} (variants: {})",
                                where(i), backend_name, variant_list(op)));
    }
    if (!chosen->run)
      throw Error(fmt::format("{}: kernel variant '{}' has no run function", where(i), chosen->name));
    spdlog::debug("{}: kernel variant {}, layout {}", where(i), chosen->name, layout_name(desc.layout));
    if (forced_for(i)) forced_step.insert(i);
    variants.push_back(chosen);
    const uint64_t before = backend->allocated_bytes();
    prepared.push_back(chosen->prepare ? chosen->prepare(desc) : nullptr);
    prepared_size.push_back(backend->allocated_bytes() - before);
    prepared_bytes_now += prepared_size.back();

    const detail::Node& node = graph->nodes[i];
    NodeInfo ni;
    ni.name = node.name;
    ni.op = op;
    ni.variant = chosen->name;
    ni.fused = node.fused;
    ni.layout = node.layout;
    if (kernel_backend == "cpu")
      ni.isa = chosen->isa == KernelVariant::Isa::PerIsa     ? cpu_isa_name(cpu_isa)
               : chosen->isa == KernelVariant::Isa::OpenBlas ? "openblas"
                                                            : "baseline";
    ni.output_shape = desc.output_shapes.empty() ? Shape{} : desc.output_shapes[0];
    ni.workspace_bytes = chosen->workspace_bytes ? chosen->workspace_bytes(desc) : 0;
    nodes.push_back(std::move(ni));
    costs.push_back(detail::node_cost(desc));
  }
}

// Lifetimes over execution order (graph inputs from step -1, graph outputs to step n), one request
// per activation and per non-empty workspace, then offsets from the planner.
void Session::Impl::plan_memory() {
  plan = {};
  tensor_value.clear();
  const int n = static_cast<int>(graph->nodes.size());
  const size_t num_values = graph->values.size();
  constexpr int kUnset = std::numeric_limits<int>::min();
  std::vector<int> first(num_values, kUnset), last(num_values, kUnset);
  value_bytes.assign(num_values, 0);

  auto activation = [&](int id, const std::string& what) -> size_t {
    const detail::Value& v = graph->values[static_cast<size_t>(id)];
    if (v.is_constant()) throw Error(what + " is the constant '" + v.name + "'");
    return static_cast<size_t>(id);
  };
  for (size_t k = 0; k < graph->inputs.size(); ++k) {
    size_t id = activation(graph->inputs[k], fmt::format("{}: input {}", graph->origin, k));
    first[id] = last[id] = -1;
  }
  for (int step = 0; step < n; ++step) {
    const detail::Node& node = graph->nodes[static_cast<size_t>(step)];
    for (int id : node.inputs) {
      if (graph->values[static_cast<size_t>(id)].is_constant()) continue;
      if (first[static_cast<size_t>(id)] == kUnset)
        throw Error(fmt::format("{}: reads '{}' before any node writes it", where(step),
                                graph->values[static_cast<size_t>(id)].name));
      last[static_cast<size_t>(id)] = std::max(last[static_cast<size_t>(id)], step);
    }
    for (int id : node.outputs) {
      size_t v = activation(id, where(step) + ": output");
      if (first[v] != kUnset)
        throw Error(fmt::format("{}: writes '{}', which is already written", where(step),
                                graph->values[v].name));
      first[v] = last[v] = step;
    }
  }
  for (size_t k = 0; k < graph->outputs.size(); ++k) {
    size_t id = activation(graph->outputs[k], fmt::format("{}: output {}", graph->origin, k));
    if (first[id] == kUnset)
      throw Error(fmt::format("{}: output {} '{}' is never written", graph->origin, k,
                              graph->values[id].name));
    last[id] = n;
  }

  std::vector<detail::PlanRequest> requests;
  for (size_t id = 0; id < num_values; ++id) {
    if (first[id] == kUnset) continue;  // constants and values no node touches
    const detail::Value& v = graph->values[id];
    value_bytes[id] =
        activation_bytes(shapes[id], element_bytes, graph->origin + ": value '" + v.name + "'");
    requests.push_back({value_bytes[id], first[id], last[id]});
    plan.tensors.push_back({v.name, 0, value_bytes[id], first[id], last[id], false, v.layout});
    tensor_value.push_back(static_cast<int>(id));
  }
  uint64_t workspace_total = 0;
  for (int step = 0; step < n; ++step) {
    uint64_t ws = nodes[static_cast<size_t>(step)].workspace_bytes;
    if (ws == 0) continue;
    workspace_total += ws;
    requests.push_back({ws, step, step});
    plan.tensors.push_back(
        {graph->nodes[static_cast<size_t>(step)].name + ":workspace", 0, ws, step, step, true});
    tensor_value.push_back(-1);
  }

  detail::MemoryPlan mp = detail::plan_memory(requests);
  for (size_t k = 0; k < plan.tensors.size(); ++k) plan.tensors[k].offset = mp.offsets[k];
  plan.report = mp.report;
  plan.report.workspace_bytes = workspace_total;
  plan.report.prepared_bytes = prepared_bytes_now;

  // Weights as this backend holds them: every constant a node reads, once, as float32 (half in fp16).
  std::set<int> constants;
  for (const detail::Node& node : graph->nodes)
    for (int id : node.inputs)
      if (graph->values[static_cast<size_t>(id)].is_constant()) constants.insert(id);
  for (int id : constants) {
    plan.report.weight_bytes += element_bytes * static_cast<uint64_t>(shape_numel(
                                                    graph->values[static_cast<size_t>(id)].shape));
  }

  live_bytes.assign(static_cast<size_t>(n), 0);
  for (const detail::PlannedTensor& t : plan.tensors) {
    if (t.workspace) continue;
    for (int step = std::max(t.first, 0); step <= std::min(t.last, n - 1); ++step)
      live_bytes[static_cast<size_t>(step)] += t.bytes;
  }
}

// Before the arena exists: refuse a plan larger than the memory there is or the user's limit (a small
// file can declare shapes whose arena is gigabytes). A device with its own memory (total > 0) holds
// the arena, the weight copies and the prepared weights; the host holds the arena on cpu and the
// float32 inputs and outputs of a run.
void Session::Impl::check_memory() const {
  uint64_t used = 0, total = 0;
  backend->device_memory(&used, &total);
  detail::MemoryNeed need;
  need.arena = plan.report.arena_bytes;
  need.prepared = prepared_bytes_now;
  if (total > 0) {
    need.weights = plan.report.weight_bytes;
    const uint64_t held = prepared_bytes_now + (constants_held ? need.weights : 0);
    detail::check_memory_budget(need, held, total - std::min(used, total),
                                "free on the device (cudaMemGetInfo)", max_memory_bytes, graph->origin);
    return;
  }
  for (const auto* list : {&inputs, &outputs})
    for (const TensorInfo& t : *list)
      need.io += activation_bytes(t.shape, sizeof(float), graph->origin + ": '" + t.name + "'");
  detail::check_memory_budget(need, 0, detail::host_available_bytes(),
                              "available on the host (MemAvailable, cgroup limit)", max_memory_bytes,
                              graph->origin);
}

void Session::Impl::build_calls() {
  calls.clear();
  arena.reset();  // an autotuned re-plan frees the first arena before taking the second
  check_memory();
  arena = backend->allocate(plan.report.arena_bytes);
  auto* base = static_cast<uint8_t*>(arena->data());

  value_ptrs.assign(graph->values.size(), nullptr);
  for (size_t id = 0; id < graph->values.size(); ++id) {
    const detail::Value& v = graph->values[id];
    if (v.is_constant())  // kernels only read constants; KernelCall::inputs is const
      value_ptrs[id] = const_cast<float*>(
          backend->constant(v.data, static_cast<size_t>(shape_numel(v.shape))));
  }
  std::vector<void*> workspace_ptrs(graph->nodes.size(), nullptr);
  for (size_t k = 0; k < plan.tensors.size(); ++k) {
    const detail::PlannedTensor& t = plan.tensors[k];
    void* ptr = base && t.bytes ? base + t.offset : nullptr;  // empty tensors get no storage
    if (t.workspace)
      workspace_ptrs[static_cast<size_t>(t.first)] = ptr;
    else
      value_ptrs[static_cast<size_t>(tensor_value[k])] = ptr;
  }

  calls.reserve(descs.size());
  for (size_t i = 0; i < descs.size(); ++i) {
    const detail::Node& node = graph->nodes[i];
    std::vector<const float*> in;
    std::vector<float*> out;
    for (int id : node.inputs)
      in.push_back(static_cast<const float*>(value_ptrs[static_cast<size_t>(id)]));
    for (int id : node.outputs)
      out.push_back(static_cast<float*>(value_ptrs[static_cast<size_t>(id)]));
    calls.push_back(KernelCall{descs[i], std::move(in), std::move(out), workspace_ptrs[i],
                               prepared[i].get(), backend->context()});
  }

  constants_held = true;

  std::vector<detail::IoSlot> in_slots, out_slots;
  for (size_t k = 0; k < graph->inputs.size(); ++k)
    in_slots.push_back({value_ptrs[static_cast<size_t>(graph->inputs[k])],
                        static_cast<size_t>(shape_numel(inputs[k].shape))});
  for (size_t k = 0; k < graph->outputs.size(); ++k)
    out_slots.push_back({value_ptrs[static_cast<size_t>(graph->outputs[k])],
                         static_cast<size_t>(shape_numel(outputs[k].shape))});
  backend->bind_io(in_slots, out_slots);
}

// The forward as one CUDA graph (on backends that capture): kernels are issued once here and replayed
// by every run(). A kernel that throws while being captured ends the capture before the error leaves.
void Session::Impl::capture() {
  if (!backend->begin_capture()) return;
  try {
    for (size_t i = 0; i < calls.size(); ++i) variants[i]->run(calls[i]);
    backend->end_capture();
  } catch (...) {
    backend->abort_capture();
    throw;
  }
  captured = true;
}

void Session::Impl::note_device_memory() {
  uint64_t used = 0, total = 0;
  backend->device_memory(&used, &total);
  plan.report.device_peak_bytes = std::max(plan.report.device_peak_bytes, used);
  plan.report.device_total_bytes = total;
}

// Times every applicable variant of each node with more than one (forced nodes excepted) on the
// session's own arena (zeroed first so that no variant meets NaNs or denormals) and keeps the fastest:
// one warm-up call, then the median of three timed calls. Each candidate gets its own workspace.
void Session::Impl::autotune() {
  constexpr int kTimed = 3;
  const KernelRegistry& registry = KernelRegistry::global();
  backend->zero(arena->data(), static_cast<size_t>(arena->bytes()));
  std::unique_ptr<detail::Timer> timer = backend->make_timer(2 * kTimed);
  for (size_t i = 0; i < calls.size(); ++i) {
    if (forced_step.count(i)) continue;
    const std::string op = op_name(graph->nodes[i].op());
    std::vector<const KernelVariant*> candidates;
    for (const KernelVariant* v : registry.variants(backend->name(), op))
      if (allowed(*v) && variant_applies(*v, descs[i]) && v->run) candidates.push_back(v);
    if (candidates.size() < 2) continue;
    const KernelVariant* best = nullptr;
    std::shared_ptr<void> best_prepared;
    uint64_t best_prep_bytes = 0;
    double best_ms = 0;
    std::string log;
    for (const KernelVariant* v : candidates) {
      const uint64_t before = backend->allocated_bytes();
      std::shared_ptr<void> prep =
          v == variants[i] ? prepared[i] : (v->prepare ? v->prepare(descs[i]) : nullptr);
      const uint64_t prep_bytes = v == variants[i] ? prepared_size[i] : backend->allocated_bytes() - before;
      const size_t ws = v->workspace_bytes ? v->workspace_bytes(descs[i]) : 0;
      std::unique_ptr<detail::DeviceBuffer> workspace = backend->allocate(ws);
      KernelCall call{descs[i], calls[i].inputs, calls[i].outputs, workspace->data(), prep.get(),
                      backend->context()};
      v->run(call);  // warm-up
      for (int r = 0; r < kTimed; ++r) {
        timer->mark(2 * r);
        v->run(call);
        timer->mark(2 * r + 1);
      }
      backend->synchronize();
      std::vector<double> ms;
      for (int r = 0; r < kTimed; ++r) ms.push_back(timer->elapsed_ms(2 * r, 2 * r + 1));
      const double t = median(ms);
      log += fmt::format(" {}={:.4f}ms", v->name, t);
      if (!best || t < best_ms) {
        best = v;
        best_ms = t;
        best_prepared = prep;
        best_prep_bytes = prep_bytes;
      }
    }
    spdlog::debug("{}: autotune:{} -> {}", where(i), log, best->name);
    variants[i] = best;
    prepared[i] = best_prepared;
    prepared_bytes_now = prepared_bytes_now - prepared_size[i] + best_prep_bytes;
    prepared_size[i] = best_prep_bytes;
    nodes[i].variant = best->name;
    nodes[i].workspace_bytes = best->workspace_bytes ? best->workspace_bytes(descs[i]) : 0;
  }
}

void Session::Impl::check_inputs(const std::vector<Tensor>& in, const char* caller) const {
  if (in.size() != inputs.size()) {
    std::string names;
    for (const TensorInfo& t : inputs) names += (names.empty() ? "'" : ", '") + t.name + "'";
    throw Error(fmt::format("{}: expected {} input(s) ({}), got {}", caller, inputs.size(), names,
                            in.size()));
  }
  for (size_t k = 0; k < in.size(); ++k) {
    const TensorInfo& want = inputs[k];
    if (in[k].shape != want.shape)
      throw Error(fmt::format("input {} '{}': expected shape {}, got {}", k, want.name,
                              shape_str(want.shape), shape_str(in[k].shape)));
    const auto numel = static_cast<uint64_t>(shape_numel(want.shape));
    if (in[k].data.size() != numel)
      throw Error(fmt::format("input {} '{}': shape {} needs {} floats, got {}", k, want.name,
                              shape_str(want.shape), numel, in[k].data.size()));
  }
}

std::vector<Tensor> Session::Impl::make_outputs() const {
  std::vector<Tensor> out;
  out.reserve(outputs.size());
  for (const TensorInfo& t : outputs) out.emplace_back(t.shape);
  return out;
}

void Session::Impl::forward(detail::Timer* timer) {
  if (!timer && captured && backend->replay()) return;
  for (size_t i = 0; i < calls.size(); ++i) {
    if (timer) timer->mark(static_cast<int>(i) + 1);
    variants[i]->run(calls[i]);
  }
  if (timer) timer->mark(static_cast<int>(calls.size()) + 1);
}

void Session::Impl::execute(const std::vector<Tensor>& in, std::vector<Tensor>& out,
                            detail::Timer* timer) {
  for (size_t k = 0; k < in.size(); ++k) backend->write_input(k, in[k].data.data());
  if (timer) timer->mark(0);
  backend->upload_inputs();
  forward(timer);
  backend->download_outputs();
  backend->synchronize();
  for (size_t k = 0; k < out.size(); ++k) backend->read_output(k, out[k].data.data());
}

// --- Session ---------------------------------------------------------------------------------------

Session::Session(const Model& model, SessionOptions options)
    : impl_(std::make_unique<Impl>(model, options)) {}
Session::~Session() = default;
Session::Session(Session&&) noexcept = default;
Session& Session::operator=(Session&&) noexcept = default;

std::vector<Tensor> Session::run(const std::vector<Tensor>& inputs) {
  Impl& s = checked(impl_);
  s.check_inputs(inputs, "run");
  std::vector<Tensor> out = s.make_outputs();
  s.execute(inputs, out, nullptr);
  return out;
}

Profile Session::profile(const std::vector<Tensor>& inputs, int runs) {
  Impl& s = checked(impl_);
  if (runs < 1) throw Error("profile: runs must be >= 1, got " + std::to_string(runs));
  s.check_inputs(inputs, "profile");

  const size_t n = s.calls.size();
  std::vector<Tensor> out = s.make_outputs();
  s.execute(inputs, out, nullptr);  // warm-up: first-touch page faults, caches, lazy init

  std::unique_ptr<detail::Timer> timer = s.backend->make_timer(static_cast<int>(n) + 2);
  std::vector<std::vector<double>> node_ms(n), start_ms(n);
  std::vector<double> total_ms;
  for (int r = 0; r < runs; ++r) {
    auto t0 = std::chrono::steady_clock::now();
    s.execute(inputs, out, timer.get());  // synchronizes before returning
    auto t1 = std::chrono::steady_clock::now();
    total_ms.push_back(std::chrono::duration<double, std::milli>(t1 - t0).count());
    for (size_t i = 0; i < n; ++i) {
      int slot = static_cast<int>(i) + 1;
      node_ms[i].push_back(timer->elapsed_ms(slot, slot + 1));
      start_ms[i].push_back(timer->elapsed_ms(0, slot));
    }
  }
  s.note_device_memory();

  Profile p;
  p.model = s.graph->name;
  p.backend = s.backend_name;
  p.device = s.backend->device();
  p.precision = precision_name(s.precision);
  p.batch = s.batch;
  p.runs = runs;
  p.total_ms = median(total_ms);
  p.memory = s.plan.report;
  p.passes = s.pass_log;
  for (size_t i = 0; i < n; ++i) {
    const NodeInfo& info = s.nodes[i];
    NodeProfile np;
    np.name = info.name;
    np.op = info.op;
    np.variant = info.variant;
    np.fused = info.fused;
    np.layout = layout_name(info.layout);
    np.isa = info.isa;
    np.activation = activation_name(fused_activation(s.descs[i].params).kind);
    np.output_shape = info.output_shape;
    np.flops = s.costs[i].flops;
    np.bytes = s.costs[i].bytes;
    np.time_ms = median(node_ms[i]);
    np.start_ms = median(start_ms[i]);
    np.live_bytes = s.live_bytes[i];
    np.workspace_bytes = info.workspace_bytes;
    p.nodes.push_back(std::move(np));
  }
  return p;
}

std::vector<double> Session::benchmark(const std::vector<Tensor>& inputs, int runs, int warmup) {
  Impl& s = checked(impl_);
  if (runs < 1) throw Error("benchmark: runs must be >= 1, got " + std::to_string(runs));
  if (warmup < 0) throw Error("benchmark: warmup must be >= 0, got " + std::to_string(warmup));
  s.check_inputs(inputs, "benchmark");
  for (size_t k = 0; k < inputs.size(); ++k) s.backend->write_input(k, inputs[k].data.data());
  s.backend->upload_inputs();
  for (int r = 0; r < warmup; ++r) s.forward(nullptr);
  std::unique_ptr<detail::Timer> timer = s.backend->make_timer(runs + 1);
  timer->mark(0);
  for (int r = 0; r < runs; ++r) {
    s.forward(nullptr);
    timer->mark(r + 1);
  }
  s.backend->synchronize();
  s.note_device_memory();
  std::vector<double> ms;
  for (int r = 0; r < runs; ++r) ms.push_back(timer->elapsed_ms(r, r + 1));
  return ms;
}

const std::string& Session::backend() const { return checked(impl_).backend_name; }
Precision Session::precision() const { return checked(impl_).precision; }
CpuIsa Session::cpu_isa() const { return checked(impl_).cpu_isa; }
const std::string& Session::device() const { return checked(impl_).backend->device(); }
int64_t Session::batch() const { return checked(impl_).batch; }
const std::vector<TensorInfo>& Session::inputs() const { return checked(impl_).inputs; }
const std::vector<TensorInfo>& Session::outputs() const { return checked(impl_).outputs; }
const std::vector<NodeInfo>& Session::nodes() const { return checked(impl_).nodes; }
const MemoryReport& Session::memory() const { return checked(impl_).plan.report; }
const std::vector<std::string>& Session::passes() const { return checked(impl_).pass_log; }

namespace detail {

const Plan& plan_of(const Session& session) {
  if (!session.impl()) throw Error("plan_of: use of a moved-from session");
  return session.impl()->plan;
}

}  // namespace detail
// Device I/O: the backend copies inputs in from device memory (checking every pointer); outputs go to
// new device allocations (one per output per call) or through the host staging of run(). The forward
// is the same replay as run().
namespace {
void copy_in_device(Session::Impl& s, const std::vector<const float*>& inputs, const char* caller) {
  if (inputs.size() != s.inputs.size())
    throw Error(fmt::format("{}: expected {} input(s), got {}", caller, s.inputs.size(), inputs.size()));
  for (size_t k = 0; k < inputs.size(); ++k) s.backend->copy_input_device(k, inputs[k]);
}
}  // namespace

std::vector<DeviceTensor> Session::run_device(const std::vector<const float*>& inputs) {
  Impl& s = checked(impl_);
  copy_in_device(s, inputs, "run_device");
  s.forward(nullptr);
  std::vector<DeviceTensor> out;
  for (size_t k = 0; k < s.outputs.size(); ++k) {
    const Shape& shape = s.outputs[k].shape;
    std::shared_ptr<detail::DeviceBuffer> buffer =
        s.backend->allocate(static_cast<uint64_t>(shape_numel(shape)) * sizeof(float));
    auto* data = static_cast<float*>(buffer->data());
    s.backend->copy_output_device(k, data);
    out.push_back({shape, std::shared_ptr<float>(buffer, data), s.backend->device_ordinal()});
  }
  s.backend->synchronize();
  return out;
}

std::vector<Tensor> Session::run_device_to_host(const std::vector<const float*>& inputs) {
  Impl& s = checked(impl_);
  copy_in_device(s, inputs, "run_device_to_host");
  std::vector<Tensor> out = s.make_outputs();
  s.forward(nullptr);
  s.backend->download_outputs();
  s.backend->synchronize();
  for (size_t k = 0; k < out.size(); ++k) s.backend->read_output(k, out[k].data.data());
  return out;
}

}  // namespace infer
