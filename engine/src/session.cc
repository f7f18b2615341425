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

#include "backend.h"
#include "backend_passes.h"
#include "cost.h"
#include "graph.h"
#include "infer/error.h"
#include "engine/src/kernel_api.h"
#include "kernel_selection.h"
#include "memory_budget.h"
#include "plan.h"
#include "passes.h"
#include "planner.h"
#include "shape_inference.h"

namespace infer {

struct Session::Impl {
  std::shared_ptr<const detail::Graph> graph;  // our own copy: the Model may be destroyed
  std::string backend_name;                    // "cpu", "cuda" or "reference", as reported
  int64_t batch = 1;
  Precision precision = Precision::FP32;
  CpuIsa cpu_isa = CpuIsa::Baseline;          // cpu kernels' instruction-set level (NodeDesc::isa)
  PassOptions passes;                          // as given: backend passes read it
  uint64_t element_bytes = 4;                  // of every activation and constant: 2 under fp16
  bool captured = false;                       // the forward is a CUDA graph: run() replays it
  std::unique_ptr<detail::Backend> backend;

  std::vector<Shape> shapes;  // concrete shape of every value
  std::vector<TensorInfo> inputs, outputs;
  std::vector<NodeInfo> nodes;

  // Per node (step), in execution order. `calls` refer to `descs` by reference: both are filled once
  // and never resized afterwards.
  std::vector<NodeDesc> descs;
  std::unique_ptr<detail::KernelSelector> selector;  // what this session may run, --kernel checked
  detail::KernelChoice kernels;                       // the variant of each step, prepared
  std::vector<KernelCall> calls;
  std::vector<detail::NodeCost> costs;
  std::vector<std::string> pass_log;  // one line per graph pass (Session::passes())

  detail::Plan plan;
  std::unique_ptr<detail::DeviceBuffer> arena;
  uint64_t max_memory_bytes = 0;      // SessionOptions::max_memory_bytes (0: only what is available)
  bool constants_held = false;        // build_calls() ran once: the backend holds its weight copies
  std::vector<void*> value_ptrs;      // device pointer of every value the nodes use (or nullptr)

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
  void select_kernels();
  void check_fixed_batch(const Model& model) const;
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

}  // namespace

std::string Session::Impl::where(size_t step) const { return detail::node_where(*graph, step); }

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

Session::Impl::Impl(const Model& model, const SessionOptions& options) {
  // Passes rewrite our copy; the Model (and its mmapped weights) stays untouched.
  detail::Graph own = model.graph();
  detail::add_extra_outputs(own, options.extra_outputs);
  graph = std::make_shared<const detail::Graph>(
      detail::run_passes(std::move(own), options.passes, &pass_log));

  precision = options.precision;
  detail::OpenedBackend opened = detail::open_backend(options.backend, precision);
  backend_name = opened.name;
  backend = std::move(opened.backend);
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

  selector = std::make_unique<detail::KernelSelector>(backend->name(), backend_name, opened.reference_only,
                                                      options.passes, options.kernels);
  detail::ShapedGraph shaped{graph, std::move(shapes), batch};
  const std::vector<std::string> fusion_log =
      detail::run_backend_passes(shaped, {*selector, passes, precision, cpu_isa}, pass_log);
  graph = shaped.graph;
  shapes = std::move(shaped.shapes);
  select_kernels();
  plan_memory();
  build_calls();
  if (options.autotune) {
    // may change variants: plan and calls again with their workspaces
    detail::autotune(*selector, *graph, descs, calls, *backend, *arena, kernels, nodes);
    plan_memory();
    build_calls();
  }
  pass_log.push_back(detail::fold_width_log(*graph, kernels.variants, passes));
  pass_log.insert(pass_log.end(), fusion_log.begin(), fusion_log.end());  // last: PassOptions says why
  capture();
  note_device_memory();
}

void Session::Impl::select_kernels() {
  for (size_t i = 0; i < graph->nodes.size(); ++i)
    descs.push_back(detail::describe_node(*graph, shapes, i, precision, cpu_isa));
  selector->check_forced_nodes(*graph);
  kernels = detail::select_kernels(*selector, *graph, descs, *backend);
  for (size_t i = 0; i < descs.size(); ++i) {
    nodes.push_back(detail::node_info(graph->nodes[i], descs[i], *kernels.variants[i], backend->name(), cpu_isa));
    costs.push_back(detail::node_cost(descs[i]));
  }
}

// The plan of the graph as it now is, with the variants now chosen: activations at element_bytes per
// value, each node's workspace, the weights as this backend holds them and the prepared bytes.
void Session::Impl::plan_memory() {
  std::vector<uint64_t> workspaces;
  for (const NodeInfo& n : nodes) workspaces.push_back(n.workspace_bytes);
  plan = detail::plan_arena(*graph, [&](int id) {
    const detail::Value& v = graph->values[static_cast<size_t>(id)];
    return detail::tensor_bytes(shapes[static_cast<size_t>(id)], element_bytes,
                                graph->origin + ": value '" + v.name + "'");
  }, workspaces);
  plan.report.prepared_bytes = kernels.prepared_bytes;
  plan.report.weight_bytes = detail::weight_bytes(*graph, element_bytes);
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
  need.prepared = kernels.prepared_bytes;
  if (total > 0) {
    need.weights = plan.report.weight_bytes;
    const uint64_t held = kernels.prepared_bytes + (constants_held ? need.weights : 0);
    detail::check_memory_budget(need, held, total - std::min(used, total),
                                "free on the device (cudaMemGetInfo)", max_memory_bytes, graph->origin);
    return;
  }
  for (const auto* list : {&inputs, &outputs})
    for (const TensorInfo& t : *list)
      need.io += detail::tensor_bytes(t.shape, sizeof(float), graph->origin + ": '" + t.name + "'");
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
  for (const detail::PlannedTensor& t : plan.tensors) {
    void* ptr = base && t.bytes ? base + t.offset : nullptr;  // empty tensors get no storage
    if (t.workspace)
      workspace_ptrs[static_cast<size_t>(t.first)] = ptr;
    else
      value_ptrs[static_cast<size_t>(t.value)] = ptr;
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
                               kernels.prepared[i].get(), backend->context()});
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
    for (size_t i = 0; i < calls.size(); ++i) kernels.variants[i]->run(calls[i]);
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
    kernels.variants[i]->run(calls[i]);
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
  p.total_ms = detail::median(total_ms);
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
    np.time_ms = detail::median(node_ms[i]);
    np.start_ms = detail::median(start_ms[i]);
    np.live_bytes = s.plan.live_bytes[i];
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
