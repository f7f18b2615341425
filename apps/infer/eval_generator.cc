// `infer eval --features CLASSIFIER.fb`: how close a generator's images are to real ones. The samples
// of the --model generator (latents z ~ N(0,1) from --seed: the stream `infer --model G --seed S`
// uses) or the images of an IDX file (--generated) are mapped to the classifier's input as the
// metadata says (output.range -> [0,1], resized by stb like an image file, input.mean/std), and the
// classifier's hidden layer, read through SessionOptions::extra_outputs, gives features of them and
// of the real --images. Reports the Fréchet distance of the two feature sets (apps/common/frechet.h),
// the predicted-class histogram of the generated images with its entropy and the classes under 2%,
// and generated images/s; --json prints one JSON object instead. Same seed, same backend: same bits.
#include <fmt/core.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <nlohmann/json.hpp>
#include <optional>

#include "cli.h"
#include "frechet.h"
#include "idx.h"
#include "image_io.h"
#include "progress.h"
#include "random.h"

namespace infer::cli {
namespace {

constexpr double kDroppedBelow = 0.02;  // a class with a smaller share of the samples counts as dropped

// A model bound to a backend at a batch size, with a second session for a smaller last batch.
class Batched {
 public:
  Batched(const Model& model, SessionOptions options)
      : model_(model), options_(std::move(options)), full_(model_, options_) {}
  Session& full() { return full_; }
  Session& at(int64_t n) {
    if (n == options_.batch) return full_;
    if (!tail_ || tail_->batch() != n) {
      SessionOptions o = options_;
      o.batch = n;
      tail_.emplace(model_, o);
    }
    return *tail_;
  }

 private:
  const Model& model_;
  SessionOptions options_;
  Session full_;
  std::optional<Session> tail_;
};

// The value whose activations are the features: the output of --feature-node, else the data input of
// the classifier's last dense node (LeNet-5: fc2 after its tanh, 84 values).
std::string feature_value(const Model& model, const std::string& path, const std::string& node) {
  const std::vector<ModelNode> nodes = model.nodes();
  if (!node.empty()) {
    std::string names;
    for (const ModelNode& n : nodes) {
      if (n.name == node && !n.outputs.empty()) return n.outputs[0];
      names += (names.empty() ? "" : ", ") + n.name;
    }
    throw Error("--feature-node '" + node + "': model '" + path + "' has no node of that name (nodes: " +
                names + ")");
  }
  for (auto it = nodes.rbegin(); it != nodes.rend(); ++it)
    if (it->op == "dense" && !it->inputs.empty()) return it->inputs[0];
  throw Error("model '" + path + "' has no dense node to take features before; choose the feature "
              "layer with --feature-node");
}

// The classifier run for features: output 0 its class scores, the feature value an extra output
// (output 1), unless the features are the class scores themselves.
struct FeatureExtractor {
  const EvalOptions& o;
  Model model;
  AppMetadata meta;
  ClassifierGeometry g;
  std::string value;
  ImageNormalization norm;
  std::optional<Batched> sessions;
  size_t feature_output = 0;  // index of the feature value among the session's outputs
  int64_t dim = 0;

  explicit FeatureExtractor(const EvalOptions& options)
      : o(options), model(Model::load(o.features)), meta(read_metadata(model, o.features)),
        g(check_classifier(model, meta, o.features)),
        value(feature_value(model, o.features, o.feature_node)), norm{meta.mean, meta.std} {}

  void start(int64_t batch) {
    SessionOptions so;
    so.backend = o.backend;
    so.precision = o.precision;
    so.max_memory_bytes = o.max_memory;
    so.batch = batch;
    if (value != model.outputs()[0].name) {
      so.extra_outputs = {value};
      feature_output = 1;
    }
    sessions.emplace(model, so);
    const Shape& shape = sessions->full().outputs().at(feature_output).shape;
    dim = shape_numel(shape) / batch;
  }

  // Runs `input` ([n, 1, H, W], normalised) and adds its features to `stats` and, when given, its
  // predicted classes (argmax; the first maximum wins, NaN never) to `histogram`.
  void add(const Tensor& input, FeatureStats& stats, std::vector<int64_t>* histogram) {
    const int64_t n = input.shape[0];
    const std::vector<Tensor> out = sessions->at(n).run({input});
    if (out.size() != feature_output + 1 || out[0].numel() != n * g.classes ||
        out[feature_output].numel() != n * dim)
      throw Error("feature model '" + o.features + "' returned unexpected outputs");
    stats.add(out[feature_output].data.data(), n);
    if (!histogram) return;
    for (int64_t r = 0; r < n; ++r) {
      const float* row = out[0].data.data() + r * g.classes;
      int64_t best = 0;
      for (int64_t c = 1; c < g.classes; ++c)
        if (row[c] > row[best] || std::isnan(row[best])) best = c;
      (*histogram)[size_t(best)] += 1;
    }
  }

  // IDX images [first, first + n) as the classifier's input: pixel values 0..255 -> [0, 1], resized
  // when their size differs from the input's, normalised.
  Tensor idx_input(const IdxArray& images, int64_t first, int64_t n) const {
    const int64_t h = images.dims[1], w = images.dims[2];
    Tensor pixels({n, 1, h, w});
    const uint8_t* src = images.data.data() + first * h * w;
    for (int64_t i = 0; i < n * h * w; ++i) pixels.data[size_t(i)] = float(src[i]);
    return images_to_input(pixels, 0.f, 255.f, int(g.height), int(g.width), norm);
  }
};

IdxArray read_images(const std::string& path, const char* what) {
  IdxArray images = read_idx(path);
  if (images.dims.size() != 3)
    throw Error("IDX file '" + path + "' has " + std::to_string(images.dims.size()) +
                " dimensions; images need 3 [N,H,W]");
  if (images.dims[0] < 2)
    throw Error(std::string(what) + " '" + path + "' holds " + std::to_string(images.dims[0]) +
                " image(s); a covariance needs at least 2");
  return images;
}

// The generator: one input (the latent), one output [N, 1, H, W] (the classifier is grayscale).
void check_generator(const Model& model, const AppMetadata& meta, const std::string& path) {
  if (meta.task != "generator")
    throw Error("model '" + path + "' is not a generator (metadata task '" + meta.task +
                "'); eval --features needs one (or --generated images)");
  if (model.inputs().size() != 1 || model.outputs().size() != 1)
    throw Error("generator '" + path + "' has " + std::to_string(model.inputs().size()) + " inputs and " +
                std::to_string(model.outputs().size()) + " outputs; eval needs one of each");
  const Shape& out = model.outputs()[0].shape;
  if (out.size() != 4 || out[1] != 1)
    throw Error("generator '" + path + "' output '" + model.outputs()[0].name + "' is " + shape_str(out) +
                "; eval needs one-channel images [N,1,H,W] for a one-channel classifier");
}

double entropy_bits(const std::vector<int64_t>& histogram, int64_t total) {
  double h = 0;
  for (int64_t c : histogram)
    if (c > 0) {
      const double p = double(c) / double(total);
      h -= p * std::log2(p);
    }
  return h;
}

}  // namespace

int run_generator_eval(const EvalOptions& o) {
  FeatureExtractor fx(o);
  const IdxArray real = read_images(o.images, "--images");

  // The generated side: a generator's samples or an IDX file's images.
  std::optional<Model> generator;
  AppMetadata gmeta;
  Precision gen_precision = o.precision;  // --precision int8: the quantized generator's float parts
  std::optional<IdxArray> fake;
  int64_t count = 0;
  if (!o.model.empty()) {
    generator.emplace(Model::load(o.model));
    gmeta = read_metadata(*generator, o.model);
    check_generator(*generator, gmeta, o.model);
    generator.emplace(quantize_for_eval(o, *generator, gmeta, gen_precision));
    count = o.samples;
  } else {
    fake.emplace(read_images(o.generated, "--generated"));
    count = fake->dims[0];
  }

  const int64_t batch = std::min(o.batch, std::max(count, real.dims[0]));
  fx.start(batch);
  const std::string backend = fx.sessions->full().backend();
  const std::string precision = precision_name(fx.sessions->full().precision());
  const std::string source = generator ? o.model : o.generated;
  if (!o.json) {
    if (generator)
      fmt::print("eval: generator '{}', {} samples (seed {}), backend {} {}, batches of {}\n", o.model,
                 count, o.seed, backend, precision, batch);
    else
      fmt::print("eval: {} images of '{}', backend {} {}, batches of {}\n", count, o.generated, backend,
                 precision, batch);
    fmt::print("features: '{}' of '{}', {} values per image; images -> {}x{}, x = (p - {}) / {}\n",
               fx.value, o.features, fx.dim, fx.g.height, fx.g.width,
               fx.norm.mean.empty() ? 0.f : fx.norm.mean[0], fx.norm.std.empty() ? 1.f : fx.norm.std[0]);
  }

  // Real images first.
  FeatureStats real_stats(fx.dim);
  {
    const int64_t n_real = real.dims[0];
    Progress progress(n_real, "real images");
    for (int64_t first = 0; first < n_real; first += batch) {
      const int64_t n = std::min(batch, n_real - first);
      fx.add(fx.idx_input(real, first, n), real_stats, nullptr);
      progress.update(first + n);
    }
    progress.finish();
  }

  // Then the generated ones, timed.
  FeatureStats fake_stats(fx.dim);
  std::vector<int64_t> histogram(size_t(fx.g.classes), 0);
  std::optional<Batched> gen;
  if (generator) {
    SessionOptions so;
    so.backend = o.backend;
    so.precision = gen_precision;
    so.max_memory_bytes = o.max_memory;
    so.batch = std::min(batch, count);
    gen.emplace(*generator, so);
  }
  SeededRandom random(o.seed);
  Progress progress(count, generator ? "generated" : "images");
  const auto start = std::chrono::steady_clock::now();
  for (int64_t first = 0; first < count; first += batch) {
    const int64_t n = std::min(batch, count - first);
    if (generator) {
      Session& g = gen->at(n);
      Tensor z(g.inputs()[0].shape);
      for (float& v : z.data) v = random.normal();
      const std::vector<Tensor> images = g.run({z});
      fx.add(images_to_input(images.at(0), gmeta.range_lo, gmeta.range_hi, int(fx.g.height),
                             int(fx.g.width), fx.norm),
             fake_stats, &histogram);
    } else {
      fx.add(fx.idx_input(*fake, first, n), fake_stats, &histogram);
    }
    progress.update(first + n);
  }
  const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  progress.finish();

  const FrechetDistance fd = frechet_distance(real_stats, fake_stats);
  const double entropy = entropy_bits(histogram, count);
  const double max_entropy = std::log2(double(fx.g.classes));
  std::vector<int64_t> dropped;
  for (int64_t c = 0; c < fx.g.classes; ++c)
    if (double(histogram[size_t(c)]) < kDroppedBelow * double(count)) dropped.push_back(c);
  const double per_second = double(count) / std::max(seconds, 1e-9);

  if (o.json) {
    nlohmann::json j;
    j["generated"] = {{"source", generator ? "generator" : "images"}, {"path", source}, {"count", count}};
    if (generator) j["generated"]["seed"] = o.seed;
    j["real"] = {{"path", o.images}, {"count", real.dims[0]}};
    j["features"] = {{"model", o.features}, {"value", fx.value}, {"dim", fx.dim}};
    j["backend"] = backend;
    j["precision"] = precision;
    j["batch"] = batch;
    j["frechet_distance"] = fd.distance;
    j["frechet_mean_term"] = fd.mean_term;
    j["frechet_covariance_term"] = fd.cov_term;
    nlohmann::json classes = nlohmann::json::array();
    for (int64_t c = 0; c < fx.g.classes; ++c)
      classes.push_back({{"class", c},
                         {"label", label_of(fx.meta, c)},
                         {"count", histogram[size_t(c)]},
                         {"fraction", double(histogram[size_t(c)]) / double(count)}});
    j["classes"] = classes;
    j["entropy_bits"] = entropy;
    j["max_entropy_bits"] = max_entropy;
    j["classes_under_2_percent"] = dropped;
    j["seconds"] = seconds;
    j["images_per_second"] = per_second;
    fmt::print("{}\n", j.dump(2));
    return 0;
  }

  fmt::print("real: {} images of '{}'\n", real.dims[0], o.images);
  fmt::print("Fréchet distance: {:.4f} (mean term {:.4f}, covariance term {:.4f})\n", fd.distance,
             fd.mean_term, fd.cov_term);
  fmt::print("predicted classes of the {} {}:\n", count, generator ? "generated images" : "--generated images");
  size_t width = 5;
  for (int64_t c = 0; c < fx.g.classes; ++c) width = std::max(width, label_of(fx.meta, c).size());
  for (int64_t c = 0; c < fx.g.classes; ++c)
    fmt::print("{:>3} {:<{}} {:>8} {:>7.2f}%\n", c, label_of(fx.meta, c), width, histogram[size_t(c)],
               100.0 * double(histogram[size_t(c)]) / double(count));
  std::string names;
  for (int64_t c : dropped) names += (names.empty() ? "" : ", ") + label_of(fx.meta, c);
  fmt::print("entropy: {:.4f} bits (uniform over {} classes: {:.4f}); classes under 2%: {}{}\n", entropy,
             fx.g.classes, max_entropy, dropped.size(), dropped.empty() ? "" : " (" + names + ")");
  fmt::print("speed: {:.0f} images/s ({} {} in {:.3f} s: {}mapping to the classifier, features)\n",
             per_second, count, generator ? "generated images" : "images", seconds,
             generator ? "generation, " : "");
  return 0;
}

}  // namespace infer::cli
