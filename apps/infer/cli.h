// Shared declarations of the `infer` command-line tool: its parsed options, the model metadata it
// understands (docs/format.md: task, labels, input.mean/std/size, output.range, latent.dim) and the
// steps main() runs. Every step reports bad input as infer::Error; main() turns that into exit code 2.
#pragma once

#include <cstdint>
#include <cstdio>
#include <map>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "app_metadata.h"
#include "atomic_file.h"
#include "infer/infer.h"

namespace CLI {
class App;
class Option;
}

namespace infer::cli {

struct Options {
  std::string model;
  std::string out;
  std::vector<std::string> inputs;  // one file per model input, in order (.npy or an image)
  int64_t batch = 0;  // --batch (0: not given: a .npy input's batch, else the model's own)
  uint64_t seed = 1;
  std::string backend = "auto";
  Precision precision = Precision::FP32;  // --precision fp32|tf32|fp16 (int8: the float parts' precision)
  bool int8 = false;                      // --precision int8: quantized in memory before the run
  std::string calib;                      // --calib DATA (with int8; "": random)
  int64_t calib_samples = 128;            // --calib-samples N
  bool autotune = false;                  // --autotune
  std::string plan_cache;                 // --plan-cache FILE
  int runs = 1;
  bool runs_given = false;  // --runs on the command line (profiling defaults to 10)
  bool profile = false;
  std::string profile_json;
  std::string trace;
  std::map<std::string, std::string> kernels;  // --kernel op=variant or op:node=variant
  PassOptions passes;                          // --no-fuse, --pass NAME=off
  bool verbose = false;
  uint64_t max_memory = 0;  // --max-memory (0: only the memory available is checked)
  std::string cpu_isa;      // --cpu-isa avx512|avx2|baseline ("": INFER_CPU_ISA or the CPU's best)
  int device = -1;          // --device N: the GPU a cuda session runs on (-1: the current one, 0)

  bool profiling() const { return profile || !profile_json.empty() || !trace.empty(); }
};

// Options shared by `infer` and `infer eval` (options.cc), with readable help text.
// With `int8`, the name int8 is accepted too: it sets *int8 and leaves target FP32.
CLI::Option* add_precision_option(CLI::App& app, Precision& target, const std::string& help,
                                  bool* int8 = nullptr);
CLI::Option* add_backend_option(CLI::App& app, std::string& target);
// --calib DATA and --calib-samples N, the calibration of --precision int8; check_calib_usage after
// parsing: a usage error when either was given without int8.
std::pair<CLI::Option*, CLI::Option*> add_calib_options(CLI::App& app, std::string& calib, int64_t& samples);
void check_calib_usage(bool int8, const std::pair<CLI::Option*, CLI::Option*>& options);
CLI::Option* add_max_memory_option(CLI::App& app, uint64_t& target);
CLI::Option* add_cpu_isa_option(CLI::App& app, std::string& target);

// The .npy --input files, read before the session exists: the batch they hold is the session's (as
// ONNX Runtime takes it from the input). A per-sample array (the input's shape without its batch
// dimension) is one sample. An Error when one matches its model input in no batch, when they hold
// different batches, or when --batch asks for another.
struct NpyInputs {
  std::vector<std::optional<Tensor>> tensors;  // per --input file; empty for an image
  int64_t batch = 0;                           // their batch; 0 when no .npy input carries one
};
NpyInputs read_npy_inputs(const Options& options, const Model& model);

// Session inputs from the --input files (the .npy ones as read above), or seeded random ones when
// none are given. Prints what it used to stdout.
std::vector<Tensor> make_inputs(const Options& options, const AppMetadata& meta, const Session& session,
                                NpyInputs npy);

// The file an output goes to: --out itself for a single output, else --out with _<index> before the
// extension.
std::string output_path(const std::string& out, size_t index, size_t count);

// Whether output `index` is written as a PNG grid (a generator's image) rather than .npy.
bool is_image_output(const Options& options, const AppMetadata& meta, const TensorInfo& info);

// Stages every output's file (PNG grid or .npy) in `files` (renamed into place by its commit()) and
// returns the lines to print once they are.
std::vector<std::string> stage_outputs(const Options& options, const AppMetadata& meta,
                                       const Session& session, const std::vector<Tensor>& outputs,
                                       StagedWrites& files);

// Prints a classifier's top-5 classes with probabilities for every batch row.
void print_top5(const AppMetadata& meta, const Session& session, const std::vector<Tensor>& outputs);

// Prints each output's shape and first values (for models that are neither classifier nor generator).
void print_summary(const Session& session, const std::vector<Tensor>& outputs);

// The whole command after parsing: load, check paths, build the session, run / profile, write.
// Returns the process exit code (0); throws infer::Error for anything wrong.
int run(const Options& options);

// `infer eval` (eval.cc): a classifier's accuracy on IDX images + labels; with --features
// (eval_generator.cc) a generator's (or an IDX image set's) Fréchet distance and class coverage.
struct EvalOptions {
  std::string model, images, labels;
  int64_t batch = 256;
  std::string backend = "auto";
  Precision precision = Precision::FP32;
  bool int8 = false;            // --precision int8: --model quantized in memory first (never --features)
  std::string calib;            // --calib DATA ("": random, seed --seed + 1)
  int64_t calib_samples = 128;  // --calib-samples N
  std::string predictions;  // optional: one uint8 predicted class per image
  uint64_t max_memory = 0;  // --max-memory
  // Generator evaluation (--features given): --model is a generator, or --generated an IDX file.
  std::string features;       // the classifier whose hidden layer gives the features
  std::string generated;      // IDX images evaluated in place of a generator's samples
  std::string feature_node;   // "" = the input of the classifier's last dense node
  int64_t samples = 10000;
  uint64_t seed = 1;
  bool json = false;
};

// Adds the `eval` subcommand to `app`, parsing into `options`.
CLI::App* add_eval_command(CLI::App& app, EvalOptions& options);

// The option combinations CLI11 cannot express (which mode needs what); throws CLI11's usage errors,
// so main() answers them with exit code 1. Call after parsing when `eval` was given.
void check_eval_usage(const EvalOptions& options);

// Runs the evaluation; returns the exit code (0); throws infer::Error for anything wrong.
int run_eval(const EvalOptions& options);
int run_generator_eval(const EvalOptions& options);  // eval_generator.cc
// --precision int8 in eval: --model quantized in memory (quantize_for_run; calibration lines to stderr
// under --json), `precision` set for its session; else the model and o.precision as they are.
Model quantize_for_eval(const EvalOptions& options, Model model, const AppMetadata& meta, Precision& precision);

// `infer quantize` (quantize.cc): post-training static int8 quantization into a QDQ model.
struct QuantizeOptions {
  std::string model, calib, out, report;
  std::string method = "minmax";        // minmax | percentile | entropy
  double percentile = 99.99;
  std::string activation_type = "u8";  // u8 | i8
  bool reduce_range = false;             // 7-bit weights
  int64_t samples = 1000, batch = 32, report_samples = 256;
  std::vector<std::string> exclude;
  uint64_t seed = 1;
  std::string backend = "auto";
  std::string cpu_isa;
  std::FILE* log = stdout;  // where the calibration lines go (stderr under `infer eval --json`)
};
CLI::App* add_quantize_command(CLI::App& app, QuantizeOptions& options);
int run_quantize(const QuantizeOptions& options);
// The QDQ model run_quantize would write for `model`, in memory (what `infer --precision int8` runs);
// prints the calibration lines. Throws infer::Error as run_quantize does.
std::vector<uint8_t> quantize_to_bytes(const QuantizeOptions& options, const Model& model, const AppMetadata& meta);
// --precision int8 (`infer`, `infer eval`): the QuantizeOptions of a run's --calib ("": random) and
// --calib-samples, its random samples drawn with the run's seed + 1 (not the run's own input).
QuantizeOptions int8_calibration(const std::string& model, const std::string& calib, int64_t samples,
                                 uint64_t seed, const std::string& backend);
// `model` quantized in memory by quantize_to_bytes (options from int8_calibration), or as it is when it
// holds Q / DQ nodes already (one line to options.log either way); `precision` becomes that of the float
// parts: fp16 where the session will run on cuda (the int8 kernels fuse in NHWC, which fp16 runs), else fp32.
Model quantize_for_run(const QuantizeOptions& options, Model model, const AppMetadata& meta, Precision& precision);

// What eval needs of a classifier: one input [-1, 1, H, W] (IDX images are grayscale), one output
// [-1, classes], task "classifier", at most one mean/std value. Error naming `path` otherwise.
struct ClassifierGeometry {
  int64_t height, width, classes;
};
ClassifierGeometry check_classifier(const Model& model, const AppMetadata& meta, const std::string& path);

// The label of class c ("Ankle boot"), or its index when the metadata has none.
std::string label_of(const AppMetadata& meta, int64_t c);

}  // namespace infer::cli
