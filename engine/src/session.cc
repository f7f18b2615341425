// Session: binds a model to a backend, a precision and a batch; a facade over the engine's modules in
// the order data flows. Creation does all that does not depend on input values (passes, shapes, kernel
// choice and plan: default, cached or autotuned, the arena, the calls, the CUDA-graph capture); run()
// only stages inputs in, replays and stages outputs out, allocating nothing but the returned Tensors.
// profile() times node by node. Inputs at another batch (batch.h) run on a session planned for it once.
#include "infer/session.h"

#include <algorithm>
#include <map>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include <fmt/format.h>

#include "autotune.h"
#include "backend.h"
#include "backend_passes.h"
#include "batch.h"
#include "cost.h"
#include "executor.h"
#include "graph.h"
#include "infer/error.h"
#include "kernel_selection.h"
#include "passes.h"
#include "plan.h"
#include "planner.h"
#include "session_io.h"
#include "shape_inference.h"

namespace infer {

struct Session::Impl {
  // The model's graph as loaded (shared with the sessions of other batches) and the options: what a
  // session at another batch is planned from; batch_inputs: which inputs carry the batch.
  std::shared_ptr<const detail::Graph> model;
  SessionOptions options;
  std::vector<bool> batch_inputs;
  std::map<int64_t, std::unique_ptr<Impl>> other_batches;  // planned for inputs at another batch

  std::shared_ptr<const detail::Graph> graph;  // our own copy, rewritten by the passes
  std::string backend_name;                    // "cpu", "cuda" or "reference", as reported
  int64_t batch = 1;
  Precision precision = Precision::FP32;
  CpuIsa cpu_isa = CpuIsa::Baseline;  // cpu kernels' instruction-set level (NodeDesc::isa)
  uint64_t element_bytes = 4;         // of every activation and constant: 2 under fp16

  std::vector<Shape> shapes;  // concrete shape of every value
  std::vector<TensorInfo> inputs, outputs;
  std::vector<NodeInfo> nodes;
  std::vector<std::string> pass_log;  // one line per graph pass (Session::passes())
  // Owns the backend: declared before what the backend allocated (prepared weights), so it goes last.
  std::unique_ptr<detail::Executor> executor;
  // Per node (step), in execution order; the executor's calls refer to `descs`, filled once.
  std::vector<NodeDesc> descs;
  std::vector<detail::NodeCost> costs;
  detail::KernelChoice kernels;
  detail::Plan plan;

  Impl(std::shared_ptr<const detail::Graph> model_graph, const SessionOptions& session_options);
  // The session that runs `in`: this one, or the one planned (once) for their batch when every input
  // that carries the batch has this session's shape but another leading size. Checks them (caller
  // names the call in messages).
  Impl& for_inputs(const std::vector<TensorView>& in, const char* caller);

 private:
  void select_kernels(const detail::KernelSelector& selector);
  void use_choice(detail::KernelChoice choice);  // kernels and what nodes report
  void build();  // plan, arena, calls, capture
};

namespace {

Session::Impl& checked(const std::unique_ptr<Session::Impl>& impl) {
  if (!impl) throw Error("infer::Session: use of a moved-from session");
  return *impl;
}

}  // namespace

// The default variant of every node (kernel_selection.h), prepared, with what the profile reports.
void Session::Impl::select_kernels(const detail::KernelSelector& selector) {
  for (size_t i = 0; i < graph->nodes.size(); ++i)
    descs.push_back(detail::describe_node(*graph, shapes, i, precision, cpu_isa));
  selector.check_forced_nodes(*graph);
  detail::Backend& backend = executor->backend();
  use_choice(detail::select_kernels(selector, *graph, descs, backend));
  for (const NodeDesc& d : descs) costs.push_back(detail::node_cost(d));
}

void Session::Impl::use_choice(detail::KernelChoice choice) {
  kernels = std::move(choice);
  nodes.clear();
  for (size_t i = 0; i < descs.size(); ++i)
    nodes.push_back(detail::node_info(graph->nodes[i], descs[i], *kernels.variants[i],
                                      executor->backend().name(), cpu_isa));
}

// The plan of the graph as it now is, with the variants now chosen (activations at element_bytes per
// value, 1 where stored_8bit; each node's workspace, the weights as this backend holds them, the
// prepared bytes), its arena and calls, and the capture.
void Session::Impl::build() {
  std::vector<uint64_t> workspaces;
  for (const NodeInfo& n : nodes) workspaces.push_back(n.workspace_bytes);
  plan = detail::plan_arena(*graph, [&](int id) {
    const detail::Value& v = graph->values[static_cast<size_t>(id)];
    return detail::tensor_bytes(shapes[static_cast<size_t>(id)], v.stored_8bit ? 1 : element_bytes,
                                graph->origin + ": value '" + v.name + "'");
  }, workspaces);
  plan.report.prepared_bytes = kernels.prepared_bytes;
  plan.report.weight_bytes = detail::weight_bytes(*graph, element_bytes);
  executor->build(*graph, plan, descs, kernels.variants, kernels.prepared, inputs, outputs,
                  options.max_memory_bytes);
  executor->capture();
}

Session::Impl::Impl(std::shared_ptr<const detail::Graph> model_graph, const SessionOptions& session_options)
    : model(std::move(model_graph)), options(session_options), batch_inputs(detail::batch_inputs(*model)) {
  // Passes rewrite our copy; the Model (and its mmapped weights) stays untouched.
  detail::Graph own = *model;
  detail::add_extra_outputs(own, options.extra_outputs);
  batch = detail::resolve_batch(own, options.batch);
  detail::free_batch(own, batch);  // a model built at a fixed batch, asked for another
  graph = std::make_shared<const detail::Graph>(
      detail::run_passes(std::move(own), options.passes, &pass_log));

  precision = options.precision;
  detail::OpenedBackend opened = detail::open_backend(options.backend, precision, options.device);
  backend_name = opened.name;
  executor = std::make_unique<detail::Executor>(std::move(opened.backend));
  detail::Backend& backend = executor->backend();
  const detail::DeviceScope on_device(backend);  // uploads, plan and capture on the session's GPU
  element_bytes = precision == Precision::FP16 ? 2 : 4;
  cpu_isa = cpu_isa_default();
  if (options.cpu_isa) cpu_isa = std::min(cpu_isa, *options.cpu_isa);

  shapes = detail::infer_shapes(*graph, batch);  // one per value, by construction
  auto info = [&](int id, const char* what) {
    if (id < 0 || static_cast<size_t>(id) >= graph->values.size())
      throw Error(fmt::format("{}: {} value id {} out of range", graph->origin, what, id));
    const detail::Value& v = graph->values[static_cast<size_t>(id)];
    return TensorInfo{v.name, shapes[static_cast<size_t>(id)], v.dtype};
  };
  for (int id : graph->inputs) inputs.push_back(info(id, "input"));
  for (int id : graph->outputs) outputs.push_back(info(id, "output"));

  const detail::KernelSelector selector(backend.name(), backend_name, opened.reference_only, options.passes,
                                        options.kernels);
  detail::ShapedGraph shaped{graph, std::move(shapes), batch};
  const std::vector<std::string> fusion_log =
      detail::run_backend_passes(shaped, {selector, options.passes, precision, cpu_isa}, pass_log);
  graph = shaped.graph;
  shapes = std::move(shaped.shapes);

  select_kernels(selector);
  const std::string tuned = detail::choose_plan(  // the default, cached or autotuned plan, built
      {selector, *graph, descs, inputs, kernels, options.autotune, options.plan_cache,
       {backend_name, backend.device(), precision, batch, backend.name() == "cpu" ? cpu_isa_name(cpu_isa) : "",
        options.kernels}},
      *executor, [&](detail::KernelChoice choice) { use_choice(std::move(choice)); build(); });
  if (!tuned.empty()) pass_log.push_back(tuned);
  detail::warn_openblas_above_cap(backend.name(), kernels.variants, cpu_isa);
  pass_log.push_back(detail::fold_width_log(*graph, kernels.variants, options.passes));
  pass_log.insert(pass_log.end(), fusion_log.begin(), fusion_log.end());  // last: PassOptions says why
  executor->note_device_memory(plan.report);
}

Session::Impl& Session::Impl::for_inputs(const std::vector<TensorView>& in, const char* caller) {
  const int64_t b = detail::batch_of_inputs(in, inputs, batch_inputs);
  if (b == 0 || b == batch) {
    detail::check_inputs(in, inputs, caller);
    return *this;
  }
  auto it = other_batches.find(b);
  if (it == other_batches.end()) {
    SessionOptions o = options;
    o.batch = b;
    try {
      it = other_batches.emplace(b, std::make_unique<Impl>(model, o)).first;
    } catch (const Error& e) {
      throw Error(
          fmt::format("{}: inputs at batch {} (the session's is {}): {}", caller, b, batch, e.what()));
    }
  }
  detail::check_inputs(in, it->second->inputs, caller);
  return *it->second;
}

// --- Session ---------------------------------------------------------------------------------------

Session::Session(const Model& model, SessionOptions options)
    : impl_(std::make_unique<Impl>(std::make_shared<const detail::Graph>(model.graph()), options)) {}
Session::~Session() {
  if (impl_) {  // frees the session's device memory, streams and graphs on its own GPU
    const detail::DeviceScope on_device(impl_->executor->backend());
    impl_.reset();
  }
}
Session::Session(Session&&) noexcept = default;
Session& Session::operator=(Session&&) noexcept = default;

std::vector<Tensor> Session::run(const std::vector<Tensor>& inputs) {
  const detail::DeviceScope on_device(checked(impl_).executor->backend());
  const std::vector<TensorView> in = detail::input_views(inputs, checked(impl_).inputs, "run");
  Impl& s = checked(impl_).for_inputs(in, "run");
  std::vector<Tensor> out = detail::make_outputs(s.outputs);
  s.executor->execute(in, detail::output_spans(out), nullptr);
  return out;
}

void Session::run_into(const std::vector<TensorView>& inputs, const std::vector<TensorSpan>& outputs) {
  const detail::DeviceScope on_device(checked(impl_).executor->backend());
  Impl& s = checked(impl_).for_inputs(inputs, "run_into");
  detail::check_outputs(outputs, s.outputs, "run_into");
  s.executor->execute(inputs, outputs, nullptr);
}

std::vector<Shape> Session::output_shapes(const std::vector<TensorView>& inputs) {
  const detail::DeviceScope on_device(checked(impl_).executor->backend());
  const Impl& s = checked(impl_).for_inputs(inputs, "output_shapes");
  std::vector<Shape> shapes;
  for (const TensorInfo& t : s.outputs) shapes.push_back(t.shape);
  return shapes;
}

Profile Session::profile(const std::vector<Tensor>& inputs, int runs) {
  if (runs < 1) throw Error("profile: runs must be >= 1, got " + std::to_string(runs));
  const detail::DeviceScope on_device(checked(impl_).executor->backend());
  const std::vector<TensorView> in = detail::input_views(inputs, checked(impl_).inputs, "profile");
  Impl& s = checked(impl_).for_inputs(in, "profile");
  std::vector<Tensor> out = detail::make_outputs(s.outputs);
  const detail::RunTimes times = s.executor->profile(in, detail::output_spans(out), runs);
  s.executor->note_device_memory(s.plan.report);

  Profile p;
  p.model = s.graph->name;
  p.backend = s.backend_name;
  p.device = s.executor->backend().device();
  p.precision = precision_name(s.precision);
  p.batch = s.batch;
  p.runs = runs;
  p.total_ms = times.total_ms;
  p.memory = s.plan.report;
  p.passes = s.pass_log;
  for (size_t i = 0; i < s.nodes.size(); ++i) {
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
    np.time_ms = times.node_ms[i];
    np.start_ms = times.start_ms[i];
    np.live_bytes = s.plan.live_bytes[i];
    np.workspace_bytes = info.workspace_bytes;
    p.nodes.push_back(std::move(np));
  }
  return p;
}

std::vector<double> Session::benchmark(const std::vector<Tensor>& inputs, int runs, int warmup) {
  if (runs < 1) throw Error("benchmark: runs must be >= 1, got " + std::to_string(runs));
  if (warmup < 0) throw Error("benchmark: warmup must be >= 0, got " + std::to_string(warmup));
  const detail::DeviceScope on_device(checked(impl_).executor->backend());
  const std::vector<TensorView> in = detail::input_views(inputs, checked(impl_).inputs, "benchmark");
  Impl& s = checked(impl_).for_inputs(in, "benchmark");
  std::vector<double> ms = s.executor->benchmark(in, runs, warmup);
  s.executor->note_device_memory(s.plan.report);
  return ms;
}

const std::string& Session::backend() const { return checked(impl_).backend_name; }
Precision Session::precision() const { return checked(impl_).precision; }
CpuIsa Session::cpu_isa() const { return checked(impl_).cpu_isa; }
const std::string& Session::device() const { return checked(impl_).executor->backend().device(); }
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

std::vector<int64_t> planned_batches(const Session& session) {
  if (!session.impl()) throw Error("planned_batches: use of a moved-from session");
  std::vector<int64_t> out{session.impl()->batch};
  for (const auto& entry : session.impl()->other_batches) out.push_back(entry.first);
  return out;
}

}  // namespace detail

// Device I/O: the backend copies inputs in from device memory (checking every pointer); outputs go to
// new device allocations (one per output per call) or through the host staging of run(). The forward
// is the same replay as run().
std::vector<DeviceTensor> Session::run_device(const std::vector<const float*>& inputs) {
  Impl& s = checked(impl_);
  const detail::DeviceScope on_device(s.executor->backend());
  s.executor->forward_device(inputs, "run_device");
  detail::Backend& backend = s.executor->backend();
  std::vector<DeviceTensor> out;
  for (size_t k = 0; k < s.outputs.size(); ++k) {
    const Shape& shape = s.outputs[k].shape;
    std::shared_ptr<detail::DeviceBuffer> buffer =
        backend.allocate(static_cast<uint64_t>(shape_numel(shape)) * sizeof(float));
    auto* data = static_cast<float*>(buffer->data());
    backend.copy_output_device(k, data);
    out.push_back({shape, std::shared_ptr<float>(buffer, data), backend.device_ordinal()});
  }
  backend.synchronize();
  return out;
}

std::vector<Tensor> Session::run_device_to_host(const std::vector<const float*>& inputs) {
  Impl& s = checked(impl_);
  const detail::DeviceScope on_device(s.executor->backend());
  s.executor->forward_device(inputs, "run_device_to_host");
  std::vector<Tensor> out = detail::make_outputs(s.outputs);
  detail::Backend& backend = s.executor->backend();
  backend.download_outputs();
  backend.synchronize();
  for (size_t k = 0; k < out.size(); ++k) backend.read_output(k, out[k].data.data());
  return out;
}

}  // namespace infer
