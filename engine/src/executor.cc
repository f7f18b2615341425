// The executor (executor.h): the arena, the pre-built kernel calls, capture and replay, and the timed
// runs behind Session::profile() and benchmark(). Every pointer a kernel sees is resolved in build();
// a run only copies, replays (or calls in order) and synchronizes.
#include "executor.h"

#include <algorithm>
#include <chrono>

#include <fmt/format.h>

#include "infer/error.h"
#include "memory_budget.h"
#include "planner.h"

namespace infer::detail {

// Before the arena exists: refuse a plan larger than the memory there is or the user's limit (a small
// file can declare shapes whose arena is gigabytes). A device with its own memory (total > 0) holds
// the arena, the weight copies and the prepared weights; the host holds the arena on cpu and the
// float32 inputs and outputs of a run.
void Executor::check_memory(const Graph& graph, const Plan& plan, const std::vector<TensorInfo>& inputs,
                            const std::vector<TensorInfo>& outputs, uint64_t max_memory_bytes) const {
  uint64_t used = 0, total = 0;
  backend_->device_memory(&used, &total);
  MemoryNeed need;
  need.arena = plan.report.arena_bytes;
  need.prepared = plan.report.prepared_bytes;
  if (total > 0) {
    need.weights = plan.report.weight_bytes;
    const uint64_t held = need.prepared + (constants_held_ ? need.weights : 0);
    check_memory_budget(need, held, total - std::min(used, total), "free on the device (cudaMemGetInfo)",
                        max_memory_bytes, graph.origin);
    return;
  }
  for (const auto* list : {&inputs, &outputs})
    for (const TensorInfo& t : *list)
      need.io += tensor_bytes(t.shape, sizeof(float), graph.origin + ": '" + t.name + "'");
  check_memory_budget(need, 0, host_available_bytes(), "available on the host (MemAvailable, cgroup limit)",
                      max_memory_bytes, graph.origin);
}

void Executor::build(const Graph& graph, const Plan& plan, const std::vector<NodeDesc>& descs,
                     const std::vector<const KernelVariant*>& variants,
                     const std::vector<std::shared_ptr<void>>& prepared,
                     const std::vector<TensorInfo>& inputs, const std::vector<TensorInfo>& outputs,
                     uint64_t max_memory_bytes) {
  calls_.clear();
  if (captured_) backend_->drop_capture();  // it replays the calls of the arena freed below
  captured_ = false;
  arena_.reset();  // a re-plan (autotune) frees the first arena before taking the second
  check_memory(graph, plan, inputs, outputs, max_memory_bytes);
  arena_ = backend_->allocate(plan.report.arena_bytes);
  auto* base = static_cast<uint8_t*>(arena_->data());
  variants_ = variants;

  value_ptrs_.assign(graph.values.size(), nullptr);
  for (size_t id = 0; id < graph.values.size(); ++id) {
    const Value& v = graph.values[id];
    if (v.is_constant())  // kernels only read constants; KernelCall::inputs is const
      value_ptrs_[id] =
          const_cast<float*>(backend_->constant(v.data, static_cast<size_t>(shape_numel(v.shape))));
  }
  std::vector<void*> workspace_ptrs(graph.nodes.size(), nullptr);
  for (const PlannedTensor& t : plan.tensors) {
    void* ptr = base && t.bytes ? base + t.offset : nullptr;  // empty tensors get no storage
    if (t.workspace)
      workspace_ptrs[static_cast<size_t>(t.first)] = ptr;
    else
      value_ptrs_[static_cast<size_t>(t.value)] = ptr;
  }

  calls_.reserve(descs.size());
  for (size_t i = 0; i < descs.size(); ++i) {
    const Node& node = graph.nodes[i];
    std::vector<const float*> in;
    std::vector<float*> out;
    for (int id : node.inputs) in.push_back(static_cast<const float*>(value_ptrs_[static_cast<size_t>(id)]));
    for (int id : node.outputs) out.push_back(static_cast<float*>(value_ptrs_[static_cast<size_t>(id)]));
    calls_.push_back(KernelCall{descs[i], std::move(in), std::move(out), workspace_ptrs[i], prepared[i].get(),
                                backend_->context()});
  }

  constants_held_ = true;

  std::vector<IoSlot> in_slots, out_slots;
  for (size_t k = 0; k < graph.inputs.size(); ++k)
    in_slots.push_back({value_ptrs_[static_cast<size_t>(graph.inputs[k])],
                        static_cast<size_t>(shape_numel(inputs[k].shape))});
  for (size_t k = 0; k < graph.outputs.size(); ++k)
    out_slots.push_back({value_ptrs_[static_cast<size_t>(graph.outputs[k])],
                         static_cast<size_t>(shape_numel(outputs[k].shape))});
  num_inputs_ = in_slots.size();
  backend_->bind_io(in_slots, out_slots);
}

void Executor::capture() {
  if (!backend_->begin_capture()) return;
  try {
    for (size_t i = 0; i < calls_.size(); ++i) variants_[i]->run(calls_[i]);
    backend_->end_capture();
  } catch (...) {
    backend_->abort_capture();
    throw;
  }
  captured_ = true;
}

void Executor::forward(Timer* timer) {
  if (!timer && captured_ && backend_->replay()) return;
  for (size_t i = 0; i < calls_.size(); ++i) {
    if (timer) timer->mark(static_cast<int>(i) + 1);
    variants_[i]->run(calls_[i]);
  }
  if (timer) timer->mark(static_cast<int>(calls_.size()) + 1);
}

void Executor::execute(const std::vector<TensorView>& in, const std::vector<TensorSpan>& out, Timer* timer) {
  for (size_t k = 0; k < in.size(); ++k) backend_->write_input(k, in[k].data);
  if (timer) timer->mark(0);
  backend_->upload_inputs();
  forward(timer);
  backend_->download_outputs();
  backend_->synchronize();
  for (size_t k = 0; k < out.size(); ++k) backend_->read_output(k, out[k].data);
}

RunTimes Executor::profile(const std::vector<TensorView>& in, const std::vector<TensorSpan>& out, int runs) {
  const size_t n = calls_.size();
  execute(in, out, nullptr);  // warm-up: first-touch page faults, caches, lazy init

  std::unique_ptr<Timer> timer = backend_->make_timer(static_cast<int>(n) + 2);
  std::vector<std::vector<double>> node_ms(n), start_ms(n);
  std::vector<double> total_ms;
  for (int r = 0; r < runs; ++r) {
    auto t0 = std::chrono::steady_clock::now();
    execute(in, out, timer.get());  // synchronizes before returning
    auto t1 = std::chrono::steady_clock::now();
    total_ms.push_back(std::chrono::duration<double, std::milli>(t1 - t0).count());
    for (size_t i = 0; i < n; ++i) {
      int slot = static_cast<int>(i) + 1;
      node_ms[i].push_back(timer->elapsed_ms(slot, slot + 1));
      start_ms[i].push_back(timer->elapsed_ms(0, slot));
    }
  }
  RunTimes times;
  times.total_ms = median(total_ms);
  for (size_t i = 0; i < n; ++i) {
    times.node_ms.push_back(median(node_ms[i]));
    times.start_ms.push_back(median(start_ms[i]));
  }
  return times;
}

std::vector<double> Executor::benchmark(const std::vector<TensorView>& in, int runs, int warmup) {
  for (size_t k = 0; k < in.size(); ++k) backend_->write_input(k, in[k].data);
  backend_->upload_inputs();
  for (int r = 0; r < warmup; ++r) forward(nullptr);
  std::unique_ptr<Timer> timer = backend_->make_timer(runs + 1);
  timer->mark(0);
  for (int r = 0; r < runs; ++r) {
    forward(nullptr);
    timer->mark(r + 1);
  }
  backend_->synchronize();
  std::vector<double> ms;
  for (int r = 0; r < runs; ++r) ms.push_back(timer->elapsed_ms(r, r + 1));
  return ms;
}

void Executor::forward_device(const std::vector<const float*>& inputs, const char* caller) {
  if (inputs.size() != num_inputs_)
    throw Error(fmt::format("{}: expected {} input(s), got {}", caller, num_inputs_, inputs.size()));
  for (size_t k = 0; k < inputs.size(); ++k) backend_->copy_input_device(k, inputs[k]);
  forward(nullptr);
}

void Executor::note_device_memory(MemoryReport& report) {
  uint64_t used = 0, total = 0;
  backend_->device_memory(&used, &total);
  report.device_peak_bytes = std::max(report.device_peak_bytes, used);
  report.device_total_bytes = total;
}

}  // namespace infer::detail
