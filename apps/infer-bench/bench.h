// infer-bench's shared pieces: run settings (backend, precision), the timer (cpu: std::chrono::steady_clock
// around Session::run; cuda: Session::benchmark, the device time of CUDA-graph replays between CUDA
// events; median/min/max of the timed runs after untimed warm-up runs), seeded non-zero random data,
// one-op models built through the public ModelBuilder, and the loop that forces each kernel variant of an
// op in turn (SessionOptions::kernels) and times it. Variants come from the registry of the chosen
// backend, so new kernels are benchmarked without touching this tool. Results print as aligned tables
// and serialise as JSON.
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "infer/infer.h"

namespace infer::bench {

struct RunSettings {
  int runs = 50;
  int warmup = 5;
  int threads = 0;             // 0: leave OpenMP's / OpenBLAS's defaults (cpu only)
  uint64_t seed = 1;
  bool with_reference = false;  // also time the (slow) reference variants in "all" mode
  std::string backend = "cpu";  // every session's SessionOptions::backend, and the registry looked up
  Precision precision = Precision::FP32;  // every session's SessionOptions::precision (not fp32: cuda)
  bool autotune = false;        // every session's SessionOptions::autotune
  std::string plan_cache;       // --plan-cache: model sessions' SessionOptions::plan_cache
  PassOptions passes;           // --pass NAME=on|off; bench_one(passes = false) still turns the three
                                // graph passes off, the backend passes (channels_last, fold_width) stay
};

// "fp32" / "tf32" / "fp16" -> Precision; Error naming the text otherwise.
Precision parse_precision(const std::string& text);

// How time_runs() times a session of this backend, one word for JSON ("steady_clock_run" on cpu,
// "cuda_events_graph_replay" on cuda) and one sentence for reports.
std::string timing_name(const std::string& backend);
std::string timing_description(const std::string& backend);

// Sets the OpenMP and OpenBLAS thread counts (n > 0); returns the OpenMP count now in effect.
int apply_threads(int n);

struct Stats {
  double median_ms = 0, min_ms = 0, max_ms = 0;
  int runs = 0;
};

// settings.warmup untimed runs, then settings.runs timed ones. cpu: steady_clock around each
// session.run(inputs) (host copies included); cuda: Session::benchmark (inputs copied in once, then
// device time per forward from CUDA events around CUDA-graph replays, no host copies: trtexec's
// "GPU Compute Time").
Stats time_runs(Session& session, const std::vector<Tensor>& inputs, const RunSettings& settings);

// n seeded values, uniform in [-scale, -0.01 scale] U [0.01 scale, scale]: never zero, so no kernel
// can profit from zeros (and a kernel that drops a term changes the result).
std::vector<float> random_values(size_t n, uint64_t seed, float scale = 1.f);
Tensor random_tensor(const Shape& shape, uint64_t seed);
// Random inputs for every input of a session (seed, seed+1, ...).
std::vector<Tensor> random_inputs(const Session& session, uint64_t seed);

// "1x1024x4x4" -> {1,1024,4,4}; Error naming the text when it is not positive integers joined by x.
Shape parse_shape(const std::string& text);

// One op with its parameters, as `infer-bench op` takes it.
struct OpSpec {
  std::string op;              // conv2d, conv_transpose2d, conv_pool2d, dense, pool2d
  Shape input;                 // NCHW (N x F for dense); N is the batch
  int64_t out_channels = 0;    // C_out, or F_out for dense
  int kernel = 3, stride = 1, padding = 0, output_padding = 0;
  int pool = 2;                // conv_pool2d's pool size
  std::string pool_kind = "max";  // pool2d: max | avg
  bool bias = true;
};

// Builds a one-node model (input "x" with a -1 batch, constants "weight" / "bias") with seeded random
// weights scaled by 1/sqrt(fan-in); Error for parameters the op does not accept.
Model build_op_model(const OpSpec& spec, uint64_t seed);
// The same model as a .fb file's bytes (for `infer-bench op --save`, so `infer --profile` can run it).
std::vector<uint8_t> build_op_file(const OpSpec& spec, uint64_t seed);

// The variants of `op` on `backend`, highest priority first; the reference variant only when asked for.
std::vector<std::string> candidate_variants(const std::string& backend, const std::string& op,
                                            bool with_reference);

struct VariantResult {
  std::string label;     // "segregated_gemm", or "op=variant" in model benchmarks
  std::map<std::string, std::string> kernels;  // what was forced ({} = the default choice)
  bool ran = false;
  std::string note;      // why it did not run (not applicable, ...)
  Stats stats;
  double flops = 0;      // of the whole run (the engine's cost model: the same for every variant)
  double gflops = 0;     // flops / median time
  double speedup = 0;    // baseline median / this median (> 1: faster than the baseline)
  uint64_t workspace_bytes = 0;  // sum of node workspaces in this session
  std::vector<std::string> node_variants;  // the variant each node ran, in execution order
  std::vector<std::string> node_layouts;   // the layout of each node ("nchw" / "nhwc")
  // Profiled time of the channels_last pass's layout conversions inside the run (median per node over
  // a profile of min(runs, 10) runs, summed; 0 when there are none): an op benchmark in NHWC converts
  // its NCHW input and output, which the op alone inside a model would not.
  double layout_ms = 0;
  std::string device;    // Session::device() of the session that ran ("" when none was created)
};

// The device of the first result whose session was created ("" when none was).
std::string device_of(const std::vector<VariantResult>& results);

// Creates a session with `kernels` forced (and every graph pass off unless `passes`) and times it; a
// variant that is not applicable (Session creation throws infer::Error) comes back with ran = false
// and the message as note.
VariantResult bench_one(const Model& model, int64_t batch, const std::string& label,
                        const std::map<std::string, std::string>& kernels,
                        const std::vector<Tensor>& inputs, const RunSettings& settings, bool passes = true);

// Fills speedup against the result labelled `baseline` (or the first that ran when empty or absent).
// Returns the label used, "" when nothing ran.
std::string fill_speedups(std::vector<VariantResult>& results, const std::string& baseline);

// The aligned table of results: label, median/min/max ms, GFLOP/s, speedup, workspace.
std::string results_table(const std::vector<VariantResult>& results, const std::string& baseline);

nlohmann::json to_json(const Stats& stats);
nlohmann::json to_json(const VariantResult& result);
// Writes JSON (indented) to path through a temp file; Error when it cannot.
void write_json(const std::string& path, const nlohmann::json& j);

// Environment facts every JSON report carries: threads, CPU model, load average, UTC time, and what
// was measured how: backend, precision, device (Session::device(); "" when no session was created)
// and the timing used (timing_name / timing_description).
nlohmann::json environment(int threads, const RunSettings& settings, const std::string& device);

// The printed run context after "runs N (warm-up W)": "threads N" on cpu; backend, precision, device
// and the timing on cuda.
std::string run_context(int threads, const RunSettings& settings, const std::string& device);

// ---- the subcommands (op.cc, model.cc, table4.cc) ----

// save_path: also write the one-op model there ("" = don't).
int run_op(const OpSpec& spec, const std::string& variant, const std::string& baseline,
           const RunSettings& settings, const std::string& json_path, const std::string& save_path);

struct ModelBenchOptions {
  std::string file;
  int64_t batch = 1;
  bool variants = true;     // also force every other applicable variant per op
  bool no_passes = true;    // also time the plan with the three graph passes off
  std::string dump_dir;     // write input_<i>.npy / output_<i>.npy of the default session here
  std::map<std::string, std::string> kernels;  // --kernel: forced in every session ("default" included)
};
int run_model(const ModelBenchOptions& options, const RunSettings& settings, const std::string& json_path);

// Writes every constant of a model file to DIR/<tensor name>.npy (for side-by-side frameworks).
int dump_weights(const std::string& file, const std::string& dir);

// `infer-bench soak FILE` (soak.cc): settings.warmup runs, then settings.runs runs of one session,
// resident and device memory sampled; Error when either grew by more than max_growth_kib.
struct SoakOptions {
  std::string file;
  int64_t batch = 1;
  uint64_t max_growth_kib = 1024;
};
int run_soak(const SoakOptions& options, const RunSettings& settings);

// `infer-bench peak` (peak.cc): the fp32 multiply-add peak per CPU ISA level, 1 and all threads.
int run_peak(const RunSettings& settings, const std::string& json_path);

struct Table4Options {
  int64_t batch = 1;
  bool memory_only = false;          // the memory column only: no timing
  std::vector<std::string> models;   // rows to run (DCGAN, ArtGAN, GP-GAN, EB-GAN); empty = all
  std::vector<std::string> variants; // conv_transpose2d variants; empty = every non-reference one
};
int run_table4(const Table4Options& options, const RunSettings& settings, const std::string& json_path);

}  // namespace infer::bench
