// `infer eval`: a classifier's accuracy on an IDX data set (e.g. Fashion-MNIST's t10k files). Images
// are normalised per the model's metadata (x = (p/255 - mean)/std), run in batches of --batch through
// one Session (a second, smaller one for the last partial batch), and the argmax of each row is the
// prediction. Prints accuracy, a confusion matrix with label names and images/s to stdout; a progress
// bar goes to stderr only when stderr is a terminal. Bad files or a model that does not fit the data
// are infer::Errors (main() exits 2). With --features the subcommand evaluates a generator instead
// (eval_generator.cc); this file parses both modes' options. --precision int8 quantizes --model in
// memory first (quantize_for_eval: quantize.cc's calibration and rewrite).
#include <fmt/core.h>
#include <spdlog/spdlog.h>
#include <unistd.h>

#include <CLI/CLI.hpp>
#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <memory>
#include <optional>

#include "cli.h"
#include "idx.h"
#include "npy.h"
#include "progress.h"

namespace infer::cli {
namespace fs = std::filesystem;

ClassifierGeometry check_classifier(const Model& model, const AppMetadata& meta, const std::string& path) {
  if (meta.task != "classifier")
    throw Error("model '" + path + "' is not a classifier (metadata task '" + meta.task +
                "'); eval needs one");
  if (model.inputs().size() != 1 || model.outputs().size() != 1)
    throw Error("model '" + path + "' has " + std::to_string(model.inputs().size()) + " inputs and " +
                std::to_string(model.outputs().size()) + " outputs; eval needs one of each");
  const Shape& in = model.inputs()[0].shape;
  if (in.size() != 4 || in[1] != 1)
    throw Error("model '" + path + "' input '" + model.inputs()[0].name + "' is " + shape_str(in) +
                "; eval needs a one-channel image input [N,1,H,W]");
  const Shape& out = model.outputs()[0].shape;
  if (out.size() != 2 || out[1] < 1)
    throw Error("model '" + path + "' output '" + model.outputs()[0].name + "' is " + shape_str(out) +
                "; eval needs [N, classes]");
  if (meta.mean.size() > 1 || meta.std.size() > 1)
    throw Error("model '" + path + "': input.mean / input.std have more than one value for a "
                "one-channel input");
  return {in[2], in[3], out[1]};
}

std::string label_of(const AppMetadata& meta, int64_t c) {
  if (size_t(c) < meta.labels.size() && !meta.labels[size_t(c)].empty()) return meta.labels[size_t(c)];
  return std::to_string(c);
}

namespace {

// The output must not overwrite an input file, and its directory must exist (checked before work).
void check_predictions_path(const EvalOptions& o) {
  if (o.predictions.empty()) return;
  std::error_code ec;
  for (const std::string& in : {o.model, o.images, o.labels})
    if (fs::equivalent(o.predictions, in, ec))
      throw Error("--predictions '" + o.predictions + "' is an input file; refusing to overwrite it");
  fs::path dir = fs::path(o.predictions).parent_path();
  if (dir.empty()) dir = ".";
  if (!fs::is_directory(dir, ec))
    throw Error("cannot write '" + o.predictions + "': directory '" + dir.string() +
                "' does not exist");
  if (fs::is_directory(o.predictions, ec))
    throw Error("cannot write '" + o.predictions + "': it is a directory");
}

void print_confusion(const AppMetadata& meta, const std::vector<int64_t>& confusion, int64_t classes) {
  size_t name_width = 5;
  for (int64_t c = 0; c < classes; ++c) name_width = std::max(name_width, label_of(meta, c).size());
  const int cell = 6;
  fmt::print("confusion matrix (rows: true class, columns: predicted class index):\n");
  fmt::print("{:>3} {:<{}}", "", "", name_width);
  for (int64_t c = 0; c < classes; ++c) fmt::print("{:>{}}", c, cell);
  fmt::print("{:>9}\n", "recall");
  for (int64_t t = 0; t < classes; ++t) {
    fmt::print("{:>3} {:<{}}", t, label_of(meta, t), name_width);
    int64_t row = 0;
    for (int64_t p = 0; p < classes; ++p) {
      const int64_t n = confusion[size_t(t * classes + p)];
      row += n;
      fmt::print("{:>{}}", n, cell);
    }
    const int64_t hit = confusion[size_t(t * classes + t)];
    if (row > 0)
      fmt::print("{:>8.2f}%\n", 100.0 * double(hit) / double(row));
    else
      fmt::print("{:>9}\n", "-");
  }
}

}  // namespace

CLI::App* add_eval_command(CLI::App& app, EvalOptions& o) {
  CLI::App* eval = app.add_subcommand(
      "eval",
      "Evaluate a classifier on IDX images + labels (gzip or plain: accuracy, confusion matrix), or, "
      "with --features, a generator against real IDX images (Fréchet distance of the classifier's "
      "features, class coverage)");
  eval->add_option("--model", o.model, "Classifier model file (.fb); with --features: the generator")
      ->option_text("FILE");
  eval->add_option("--images", o.images,
                   "IDX images [N,H,W] uint8, required (e.g. t10k-images-idx3-ubyte.gz); with --features: "
                   "the real images")
      ->required()
      ->option_text("FILE");
  auto* labels = eval->add_option("--labels", o.labels,
                                  "IDX labels [N] uint8 (e.g. t10k-labels-idx1-ubyte.gz); classifier only")
                     ->option_text("FILE");
  eval->add_option("--batch", o.batch, "Images per session run, 1 to 65536 (default 256)")
      ->check(CLI::Range(int64_t(1), int64_t(65536)).description(""))
      ->option_text("N");
  add_backend_option(*eval, o.backend);
  add_precision_option(*eval, o.precision,
                       "fp32 (default, strict), tf32 or fp16 (half storage, fp32 accumulation); tf32 "
                       "and fp16 need cuda; int8: --model quantized in memory first as infer quantize does "
                       "(see --calib; never the --features classifier), the rest in fp16 on cuda, fp32 on cpu",
                       &o.int8);
  add_calib_options(*eval, o.calib, o.calib_samples);
  add_max_memory_option(*eval, o.max_memory);
  auto* predictions = eval->add_option("--predictions", o.predictions,
                                       "Write the predicted classes, one uint8 per image; classifier only")
                          ->option_text("FILE");

  auto* features = eval->add_option(
                           "--features", o.features,
                           "Classifier (.fb) whose hidden layer gives the features: evaluates the --model "
                           "generator (or --generated images) against --images")
                       ->option_text("FILE");
  auto* generated = eval->add_option("--generated", o.generated,
                                     "IDX images [N,H,W] uint8 evaluated in place of a generator's samples")
                        ->option_text("FILE");
  auto* node = eval->add_option("--feature-node", o.feature_node,
                                "Feature layer: the output of this node of the --features model "
                                "(default: the input of its last dense node)")
                   ->option_text("NAME");
  auto* samples = eval->add_option("--samples", o.samples, "Images to generate, 2 to 10000000 (default 10000)")
                      ->check(CLI::Range(int64_t(2), int64_t(10000000)).description(""))
                      ->option_text("N");
  auto* seed = eval->add_option("--seed", o.seed, "Seed of the latents z ~ N(0,1) (default 1)")->option_text("N");
  auto* json = eval->add_flag("--json", o.json, "Print the results as one JSON object");
  for (CLI::Option* opt : {generated, node, samples, seed, json}) opt->needs(features);
  labels->excludes(features);
  predictions->excludes(features);
  generated->excludes(samples)->excludes(seed);
  return eval;
}

void check_eval_usage(const EvalOptions& o) {
  if (o.features.empty()) {
    if (o.model.empty()) throw CLI::RequiredError("--model");
    if (o.labels.empty()) throw CLI::RequiredError("--labels (or --features to evaluate a generator)");
    return;
  }
  if (o.model.empty() == o.generated.empty())
    throw CLI::ValidationError("--features", "give either --model (a generator) or --generated (IDX images)");
}

Model quantize_for_eval(const EvalOptions& o, Model model, const AppMetadata& meta, Precision& precision) {
  precision = o.precision;
  if (!o.int8) return model;
  QuantizeOptions q = int8_calibration(o.model, o.calib, o.calib_samples, o.seed, o.backend);
  q.log = o.json ? stderr : stdout;
  return quantize_for_run(q, std::move(model), meta, precision);
}

int run_eval(const EvalOptions& o) {
  if (!o.features.empty()) return run_generator_eval(o);
  const Model loaded = Model::load(o.model);
  const AppMetadata meta = read_metadata(loaded, o.model);
  const ClassifierGeometry g = check_classifier(loaded, meta, o.model);
  check_predictions_path(o);
  if (g.classes > 256 && !o.predictions.empty())
    throw Error("--predictions stores one byte per image; the model has " + std::to_string(g.classes) +
                " classes");

  const IdxArray images = read_idx(o.images);
  const IdxArray labels = read_idx(o.labels);
  if (images.dims.size() != 3)
    throw Error("IDX file '" + o.images + "' has " + std::to_string(images.dims.size()) +
                " dimensions; images need 3 [N,H,W]");
  if (labels.dims.size() != 1)
    throw Error("IDX file '" + o.labels + "' has " + std::to_string(labels.dims.size()) +
                " dimensions; labels need 1 [N]");
  const int64_t count = images.dims[0];
  if (labels.dims[0] != count)
    throw Error("'" + o.images + "' holds " + std::to_string(count) + " images but '" + o.labels +
                "' holds " + std::to_string(labels.dims[0]) + " labels");
  if (images.dims[1] != g.height || images.dims[2] != g.width)
    throw Error("'" + o.images + "' images are " + std::to_string(images.dims[1]) + "x" +
                std::to_string(images.dims[2]) + "; model '" + o.model + "' takes " +
                std::to_string(g.height) + "x" + std::to_string(g.width));
  for (int64_t i = 0; i < count; ++i)
    if (labels.data[size_t(i)] >= g.classes)
      throw Error("'" + o.labels + "': label " + std::to_string(labels.data[size_t(i)]) + " of image " +
                  std::to_string(i) + " is not a class of the model (" + std::to_string(g.classes) +
                  " classes)");

  // x = (p/255 - mean)/std as one multiply-add per pixel, computed as the image loader does.
  const float mean = meta.mean.empty() ? 0.f : meta.mean[0];
  const float stddev = meta.std.empty() ? 1.f : meta.std[0];

  Precision precision = o.precision;
  const Model model = quantize_for_eval(o, loaded, meta, precision);
  const int64_t batch = std::min(o.batch, count);
  SessionOptions so;
  so.backend = o.backend;
  so.precision = precision;
  so.max_memory_bytes = o.max_memory;
  so.batch = batch;
  Session full(model, so);
  std::optional<Session> tail;  // the last partial batch, made when needed
  fmt::print("eval: model '{}' on backend {}, {} images {}x{} in batches of {}\n", o.model,
             full.backend(), count, g.height, g.width, batch);

  const int64_t pixels = g.height * g.width;
  std::vector<uint8_t> predicted(static_cast<size_t>(count));
  std::vector<int64_t> confusion(size_t(g.classes * g.classes), 0);
  int64_t correct = 0;
  Progress progress(count);
  const auto start = std::chrono::steady_clock::now();
  for (int64_t first = 0; first < count; first += batch) {
    const int64_t n = std::min(batch, count - first);
    Session* session = &full;
    if (n != batch) {
      so.batch = n;
      tail.emplace(model, so);
      session = &*tail;
    }
    Tensor input(session->inputs()[0].shape);
    const uint8_t* src = images.data.data() + first * pixels;
    for (int64_t i = 0; i < n * pixels; ++i)
      input.data[size_t(i)] = (float(src[i]) / 255.f - mean) / stddev;
    const std::vector<Tensor> outputs = session->run({input});
    if (outputs.size() != 1 || outputs[0].numel() != n * g.classes)
      throw Error("session returned an unexpected output for batch at image " + std::to_string(first));
    for (int64_t r = 0; r < n; ++r) {
      // The first maximum wins ties; a NaN logit never compares greater, so it is never chosen
      // unless the whole row is NaN (then class 0, counted wrong unless the label is 0).
      const float* row = outputs[0].data.data() + r * g.classes;
      int64_t best = 0;
      for (int64_t c = 1; c < g.classes; ++c)
        if (row[c] > row[best] || std::isnan(row[best])) best = c;
      const int64_t truth = labels.data[size_t(first + r)];
      predicted[size_t(first + r)] = uint8_t(best);
      confusion[size_t(truth * g.classes + best)] += 1;
      correct += best == truth;
    }
    progress.update(first + n);
  }
  const double seconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  progress.finish();

  fmt::print("accuracy: {:.2f}% ({}/{})\n", 100.0 * double(correct) / double(count), correct, count);
  print_confusion(meta, confusion, g.classes);
  fmt::print("speed: {:.0f} images/s ({} images in {:.3f} s, normalisation included)\n",
             double(count) / std::max(seconds, 1e-9), count, seconds);
  if (!o.predictions.empty()) {
    write_file_atomic(o.predictions, predicted);
    fmt::print("wrote {}: {} predicted classes (uint8)\n", o.predictions, count);
  }
  return 0;
}

}  // namespace infer::cli
