// infer::Profile: what a profiling run measured, per node and in total, plus the memory plan. Printed as
// an aligned table (TFLite benchmark_model style), written as JSON, or as a Chrome trace (traceEvents)
// that loads in ui.perfetto.dev and chrome://tracing.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "infer/ops.h"

namespace infer {

// The memory planner's report for one session (bytes).
struct MemoryReport {
  uint64_t arena_bytes = 0;        // the one activation arena (offsets by greedy-by-size best fit)
  uint64_t naive_bytes = 0;        // every activation and workspace in its own allocation
  uint64_t lower_bound_bytes = 0;  // largest set of simultaneously live tensors
  uint64_t workspace_bytes = 0;    // sum of node workspaces (they live inside the arena)
  uint64_t weight_bytes = 0;       // constants as the backend holds them (float32, or half under fp16)
  uint64_t prepared_bytes = 0;     // weights re-laid out by kernels at creation (sub-kernels, fused filters)
  // cuda only (0 on cpu): the device memory in use (cudaMemGetInfo: total - free, every process on
  // the GPU included) at its highest seen at creation and during runs, and the device's total.
  uint64_t device_peak_bytes = 0;
  uint64_t device_total_bytes = 0;
};

struct NodeProfile {
  std::string name;
  std::string op;                   // op_name()
  std::string variant;              // the kernel variant that ran, e.g. "reference"
  std::vector<std::string> fused;   // names of source nodes merged into this one by graph passes
  std::string activation;           // fused activation name, "none" if none
  std::string layout = "nchw";      // memory order of its 4-D activations: "nchw" or "nhwc"
  std::string isa;                  // cpu: "avx512", "avx2", "baseline" or "openblas" (NodeInfo::isa)
  Shape output_shape;
  double flops = 0;                 // multiply-add counted as 2
  double bytes = 0;                 // inputs + weights read, outputs written
  double time_ms = 0;               // median over runs
  double start_ms = 0;              // median start within a run (for the trace)
  uint64_t live_bytes = 0;          // activation bytes live while the node runs
  uint64_t workspace_bytes = 0;
};

struct Profile {
  std::string model;
  std::string backend;
  std::string device;     // "NVIDIA H100 80GB HBM3 (sm_90, 132 SMs)" or the CPU model
  std::string precision;  // "fp32", "tf32", "fp16"
  int64_t batch = 1;
  int runs = 0;
  double total_ms = 0;  // median of whole runs
  std::vector<NodeProfile> nodes;
  MemoryReport memory;
  std::vector<std::string> passes;  // what each graph pass did, e.g. "fuse_activation: 2 ... fused into dense"

  std::string table() const;         // per-node table, top nodes by time, summary by op, totals
  std::string json() const;          // everything above as one JSON object
  std::string chrome_trace() const;  // {"traceEvents": [...]} with one complete event per node
};

}  // namespace infer
