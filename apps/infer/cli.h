// Shared declarations of the `infer` command-line tool: its parsed options, the model metadata it
// understands (docs/format.md: task, labels, input.mean/std/size, output.range, latent.dim) and the
// steps main() runs. Every step reports bad input as infer::Error; main() turns that into exit code 2.
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <utility>
#include <vector>

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
  int64_t batch = 1;
  uint64_t seed = 1;
  std::string backend = "auto";
  Precision precision = Precision::FP32;  // --precision fp32|tf32|fp16
  bool autotune = false;                  // --autotune
  int runs = 1;
  bool runs_given = false;  // --runs on the command line (profiling defaults to 10)
  bool profile = false;
  std::string profile_json;
  std::string trace;
  std::map<std::string, std::string> kernels;  // --kernel op=variant
  PassOptions passes;                          // --no-fuse, --pass NAME=off
  bool verbose = false;
  uint64_t max_memory = 0;  // --max-memory (0: only the memory available is checked)

  bool profiling() const { return profile || !profile_json.empty() || !trace.empty(); }
};

// The metadata keys apps use, parsed and checked; absent keys keep these defaults.
struct AppMetadata {
  std::string task;                 // "classifier", "generator" or "" (anything else)
  std::vector<std::string> labels;  // one per class, from the newline-separated "labels"
  std::vector<float> mean, std;     // per channel, on pixels / 255
  std::optional<std::pair<int64_t, int64_t>> input_size;  // H, W
  float range_lo = -1.f, range_hi = 1.f;                  // a generator's output range
  int64_t latent_dim = 0;                                 // 0 = not given
};

// Options shared by `infer` and `infer eval` (options.cc), with readable help text.
CLI::Option* add_precision_option(CLI::App& app, Precision& target, const std::string& help);
CLI::Option* add_backend_option(CLI::App& app, std::string& target);
CLI::Option* add_max_memory_option(CLI::App& app, uint64_t& target);

// Reads and validates the metadata of `model` (loaded from `path`, named in messages).
AppMetadata read_metadata(const Model& model, const std::string& path);

// Session inputs from the --input files, or seeded random ones when none are given. Prints what it
// used to stdout.
std::vector<Tensor> make_inputs(const Options& options, const AppMetadata& meta, const Session& session);

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

// `infer eval` (eval.cc): a classifier's accuracy on IDX images + labels.
struct EvalOptions {
  std::string model, images, labels;
  int64_t batch = 256;
  std::string backend = "auto";
  Precision precision = Precision::FP32;
  std::string predictions;  // optional: one uint8 predicted class per image
  uint64_t max_memory = 0;  // --max-memory
};

// Adds the `eval` subcommand to `app`, parsing into `options`.
CLI::App* add_eval_command(CLI::App& app, EvalOptions& options);

// Runs the evaluation; returns the exit code (0); throws infer::Error for anything wrong.
int run_eval(const EvalOptions& options);

}  // namespace infer::cli
