// The executor: runs a planned graph on its backend. build() checks the memory budget, allocates the
// plan's one arena, makes constants visible, resolves every pointer into one KernelCall per node and
// binds the graph's I/O; capture() records the forward as a CUDA graph where the backend can. A run
// stages inputs in, replays (or calls the kernels in order) and stages outputs out, allocating
// nothing. Knows the plan's offsets and the chosen variants, never how either was chosen.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "backend.h"
#include "infer/kernel.h"
#include "graph.h"
#include "plan.h"

namespace infer::detail {

// Per-node and whole-run times of Executor::profile(), medians over the runs, in milliseconds.
struct RunTimes {
  double total_ms = 0;
  std::vector<double> node_ms, start_ms;  // start_ms: from the start of the run to the node's start
};

class Executor {
 public:
  explicit Executor(std::unique_ptr<Backend> backend) : backend_(std::move(backend)) {}

  Backend& backend() { return *backend_; }
  const Backend& backend() const { return *backend_; }
  const std::vector<KernelCall>& calls() const { return calls_; }
  DeviceBuffer& arena() { return *arena_; }

  // (Re)builds the arena and the calls for `plan` after checking the memory budget (the user's
  // max_memory_bytes, what the device or host has; on the host the float32 copies of `inputs` and
  // `outputs` count). `descs` and `prepared` are per step and must outlive the calls (KernelCall
  // refers to its NodeDesc). A second build (after autotune) frees the first arena before the next.
  void build(const Graph& graph, const Plan& plan, const std::vector<NodeDesc>& descs,
             const std::vector<const KernelVariant*>& variants,
             const std::vector<std::shared_ptr<void>>& prepared, const std::vector<TensorInfo>& inputs,
             const std::vector<TensorInfo>& outputs, uint64_t max_memory_bytes);
  // The forward as one CUDA graph on backends that capture; a kernel that throws while being
  // captured ends the capture before the error leaves.
  void capture();

  // The forward alone: graph replay when captured (and no timer), else every node in order. With a
  // timer: slot i+1 before node i, slot n+1 after the last node.
  void forward(Timer* timer);
  // Copies `in` in, runs the forward, copies out into `out` (already shaped); with a timer, slot 0 is
  // the start (before the upload) and the nodes run one by one (never the captured graph).
  void execute(const std::vector<TensorView>& in, const std::vector<TensorSpan>& out, Timer* timer);
  // One warm-up run, then `runs` timed ones, node by node.
  RunTimes profile(const std::vector<TensorView>& in, const std::vector<TensorSpan>& out, int runs);
  // Inputs copied in once, then `warmup` untimed and `runs` timed forwards; milliseconds per forward.
  std::vector<double> benchmark(const std::vector<TensorView>& in, int runs, int warmup);
  // Device inputs (cuda): copied in from device memory, the forward, outputs left in the arena for
  // copy_output_device() / download_outputs() (both on the backend).
  void forward_device(const std::vector<const float*>& inputs, const char* caller);
  // Raises the report's device peak to what the device uses now, and sets its total.
  void note_device_memory(MemoryReport& report);

 private:
  std::unique_ptr<Backend> backend_;
  std::unique_ptr<DeviceBuffer> arena_;
  std::vector<const KernelVariant*> variants_;
  std::vector<KernelCall> calls_;
  std::vector<void*> value_ptrs_;  // device pointer of every value the nodes use (or nullptr)
  size_t num_inputs_ = 0;
  bool constants_held_ = false;    // build() ran once: the backend holds its weight copies
  bool captured_ = false;          // the forward is a CUDA graph: run() replays it

  void check_memory(const Graph& graph, const Plan& plan, const std::vector<TensorInfo>& inputs,
                    const std::vector<TensorInfo>& outputs, uint64_t max_memory_bytes) const;
};

}  // namespace infer::detail
