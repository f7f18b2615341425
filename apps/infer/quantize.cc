// `infer quantize MODEL.fb --calib DATA --out MODEL_int8.fb`: post-training static quantization
// (issue 30, apps/common/quantizer.h). Calibration data: an IDX image file (gzip or plain; normalised
// per the metadata as `infer eval` does), a folder of images, a .npy batch, or `random` (the inputs
// `infer` draws without --input: latents for a generator). The float model runs over it with the
// quantized nodes' data inputs as extra outputs; the QDQ model is written atomically; then both run on
// the first --report-samples samples and the per-layer error (each quantized node's output, errors
// accumulated as they run) is printed and, with --report, written as JSON. quantize_to_bytes is the same
// calibration and rewrite in memory, for `infer --precision int8` (run.cc).
#include <CLI/CLI.hpp>
#include <fmt/format.h>
#include <spdlog/spdlog.h>

#include <algorithm>
#include <cctype>
#include <cmath>
#include <filesystem>
#include <map>
#include <set>
#include <nlohmann/json.hpp>

#include "cli.h"
#include "idx.h"
#include "image_io.h"
#include "infer/version.h"
#include "npy.h"
#include "quantizer.h"
#include "random_input.h"

namespace infer::cli {
namespace fs = std::filesystem;

namespace {

std::string lower(std::string s) {
  for (char& c : s) c = char(std::tolower(static_cast<unsigned char>(c)));
  return s;
}

bool ends_with(const std::string& s, const std::string& tail) {
  return s.size() >= tail.size() && s.compare(s.size() - tail.size(), tail.size(), tail) == 0;
}

// The calibration set as one tensor per model input, [N, per-sample shape...], at most `limit` samples.
std::vector<Tensor> load_calibration(const QuantizeOptions& o, const Model& model, const AppMetadata& meta) {
  const std::vector<TensorInfo>& infos = model.inputs();
  const auto per_sample = [](const TensorInfo& info) { return Shape(info.shape.begin() + 1, info.shape.end()); };
  for (const TensorInfo& info : infos)
    if (info.shape.empty()) throw Error("model input '" + info.name + "' is a scalar; quantize needs batched inputs");
  const auto image_input = [&](const std::string& what) -> const TensorInfo& {
    if (infos.size() != 1 || infos[0].shape.size() != 4)
      throw Error("--calib " + what + " needs a model with one 4-D image input; model '" + o.model + "' has " +
                  std::to_string(infos.size()) + " input(s)" +
                  (infos.size() == 1 ? " of shape " + shape_str(infos[0].shape) : std::string()));
    return infos[0];
  };

  if (o.calib == "random") {
    std::vector<TensorInfo> batched = infos;
    for (TensorInfo& info : batched) info.shape[0] = o.samples;
    fmt::print(o.log, "calibration: {} random samples ({}, seed {})\n", o.samples,
               meta.task == "generator" ? "latent z ~ N(0,1)" : "uniform [-1,1)", o.seed);
    return random_inputs(batched, meta.task == "generator", o.seed);
  }
  std::error_code ec;
  if (fs::is_directory(o.calib, ec)) {
    const TensorInfo& info = image_input("FOLDER");
    std::vector<std::string> files;
    for (const auto& entry : fs::directory_iterator(o.calib, ec)) {
      const std::string ext = lower(entry.path().extension().string());
      if (entry.is_regular_file() && (ext == ".png" || ext == ".jpg" || ext == ".jpeg" || ext == ".bmp"))
        files.push_back(entry.path().string());
    }
    if (ec) throw Error("cannot list calibration folder '" + o.calib + "': " + ec.message());
    std::sort(files.begin(), files.end());
    if (files.empty()) throw Error("calibration folder '" + o.calib + "' holds no .png, .jpg or .bmp image");
    if (int64_t(files.size()) > o.samples) files.resize(size_t(o.samples));
    const int64_t c = info.shape[1], h = info.shape[2], w = info.shape[3];
    if ((c != 1 && c != 3) || h > 65536 || w > 65536)
      throw Error("model input '" + info.name + "' " + shape_str(info.shape) + " does not take images");
    Tensor all({int64_t(files.size()), c, h, w});
    const ImageNormalization norm{meta.mean, meta.std};
    for (size_t i = 0; i < files.size(); ++i) {
      const Tensor image = load_image(files[i], int(c), int(h), int(w), norm);
      std::copy(image.data.begin(), image.data.end(), all.data.begin() + int64_t(i) * c * h * w);
    }
    fmt::print(o.log, "calibration: {} images from '{}'\n", files.size(), o.calib);
    return {std::move(all)};
  }
  if (ends_with(lower(o.calib), ".npy")) {
    if (infos.size() != 1)
      throw Error("--calib FILE.npy needs a model with one input; model '" + o.model + "' has " +
                  std::to_string(infos.size()));
    Tensor t = read_npy(o.calib);
    const Shape want = per_sample(infos[0]);
    if (t.shape.size() != want.size() + 1 || !std::equal(want.begin(), want.end(), t.shape.begin() + 1))
      throw Error("calibration file '" + o.calib + "' has shape " + shape_str(t.shape) + "; model input '" +
                  infos[0].name + "' needs Nx" + shape_str(want));
    if (t.shape[0] > o.samples) {
      t.shape[0] = o.samples;
      t.data.resize(size_t(shape_numel(t.shape)));
    }
    fmt::print(o.log, "calibration: {} samples from '{}'\n", t.shape[0], o.calib);
    return {std::move(t)};
  }
  // Anything else is read as IDX (its own errors name what is wrong with the file).
  const TensorInfo& info = image_input("IDX");
  const IdxArray images = read_idx(o.calib);
  if (images.dims.size() != 3)
    throw Error("IDX file '" + o.calib + "' has " + std::to_string(images.dims.size()) +
                " dimensions; calibration images are [N,H,W]");
  if (info.shape[1] != 1 || images.dims[1] != info.shape[2] || images.dims[2] != info.shape[3])
    throw Error("'" + o.calib + "' images are " + std::to_string(images.dims[1]) + "x" +
                std::to_string(images.dims[2]) + " grayscale; model input '" + info.name + "' is " +
                shape_str(info.shape));
  if (meta.mean.size() > 1 || meta.std.size() > 1)
    throw Error("model '" + o.model + "': input.mean / input.std have more than one value for grayscale images");
  const float mean = meta.mean.empty() ? 0.f : meta.mean[0];
  const float stddev = meta.std.empty() ? 1.f : meta.std[0];
  const int64_t n = std::min(images.dims[0], o.samples), pixels = images.dims[1] * images.dims[2];
  Tensor all({n, 1, images.dims[1], images.dims[2]});
  for (int64_t i = 0; i < n * pixels; ++i)  // as infer eval and the image loader normalise
    all.data[size_t(i)] = (float(images.data[size_t(i)]) / 255.f - mean) / stddev;
  fmt::print(o.log, "calibration: {} images from '{}'\n", n, o.calib);
  return {std::move(all)};
}

// Samples [first, first + n) of each input.
std::vector<Tensor> slice(const std::vector<Tensor>& all, int64_t first, int64_t n) {
  std::vector<Tensor> out;
  for (const Tensor& t : all) {
    Shape s = t.shape;
    s[0] = n;
    const int64_t row = shape_numel(t.shape) / t.shape[0];
    out.emplace_back(s, std::vector<float>(t.data.begin() + first * row, t.data.begin() + (first + n) * row));
  }
  return out;
}

struct LayerError {
  double sum_sq_ref = 0, sum_sq_err = 0, max_abs = 0;
  void add(const Tensor& ref, const Tensor& got) {
    for (size_t i = 0; i < ref.data.size(); ++i) {
      const double d = double(got.data[i]) - double(ref.data[i]);
      sum_sq_ref += double(ref.data[i]) * ref.data[i];
      sum_sq_err += d * d;
      max_abs = std::max(max_abs, std::fabs(d));
    }
  }
  double relative() const { return sum_sq_ref > 0 ? std::sqrt(sum_sq_err / sum_sq_ref) : std::sqrt(sum_sq_err); }
  double sqnr_db() const {
    return sum_sq_err > 0 && sum_sq_ref > 0 ? 10.0 * std::log10(sum_sq_ref / sum_sq_err) : INFINITY;
  }
};

}  // namespace

CLI::App* add_quantize_command(CLI::App& app, QuantizeOptions& o) {
  CLI::App* q = app.add_subcommand(
      "quantize",
      "Post-training static int8 quantization: int8 weights per output channel, activation ranges from a "
      "calibration set, written as a QDQ model; prints the per-layer error against the float model");
  q->add_option("model,--model", o.model, "Float model file (.fb)")->required()->option_text("FILE");
  q->add_option("--calib", o.calib,
                "Calibration data: an IDX image file (e.g. train-images-idx3-ubyte.gz), a folder of images "
                "(.png/.jpg/.bmp, normalised as the metadata says), a .npy batch [N, ...], or 'random' (a "
                "generator's latents)")
      ->required()
      ->option_text("DATA");
  q->add_option("--out", o.out, "The quantized model (.fb), written through a temporary file")
      ->required()
      ->option_text("FILE");
  q->add_option("--method", o.method,
                "Activation ranges: minmax (default), percentile (of |x|, see --percentile) or entropy "
                "(TensorRT's KL-divergence threshold)")
      ->check(CLI::IsMember({"minmax", "percentile", "entropy"}).description(""))
      ->option_text("NAME");
  q->add_option("--percentile", o.percentile, "percentile: the share of |x| kept, 50 to 100 (default 99.99)")
      ->check(CLI::Range(50.0, 100.0).description(""))
      ->option_text("P");
  q->add_option("--activation-type", o.activation_type,
                "u8 (asymmetric, default, as ONNX Runtime's QDQ) or i8 (symmetric)")
      ->check(CLI::IsMember({"u8", "i8"}).description(""))
      ->option_text("TYPE");
  q->add_flag("--reduce-range", o.reduce_range,
              "7-bit weights in [-64, 64] (ONNX Runtime's reduce_range): the CPU's int8 GEMM then runs "
              "vpmaddubsw (AVX2 / AVX-512), twice the multiply-adds an instruction");
  q->add_option("--samples", o.samples, "Calibration samples used at most, 1 to 1000000 (default 1000)")
      ->check(CLI::Range(int64_t(1), int64_t(1000000)).description(""))
      ->option_text("N");
  q->add_option("--batch", o.batch, "Samples per session run, 1 to 65536 (default 32)")
      ->check(CLI::Range(int64_t(1), int64_t(65536)).description(""))
      ->option_text("N");
  q->add_option("--report-samples", o.report_samples,
                "Samples the per-layer error is measured on (the first of the calibration set), 0 to 1000000 "
                "(default 256; 0: no comparison)")
      ->check(CLI::Range(int64_t(0), int64_t(1000000)).description(""))
      ->option_text("N");
  q->add_option("--report", o.report, "Write the ranges and per-layer errors as JSON")->option_text("FILE");
  q->add_option("--exclude", o.exclude, "Keep this node in float (repeatable: one node each)")
      ->allow_extra_args(false)  // a name each time, so a MODEL after it stays positional
      ->option_text("NODE");
  q->add_option("--seed", o.seed, "Seed of --calib random (default 1)")->option_text("N");
  add_backend_option(*q, o.backend);
  add_cpu_isa_option(*q, o.cpu_isa);
  return q;
}

namespace {

// The calibration, ranges and rewrite of `model` as `o` says: what run_quantize writes and reports,
// and what `infer --precision int8` runs (quantize_to_bytes).
struct Calibrated {
  quant::Options qo;
  quant::Plan plan;
  std::vector<Tensor> calib;
  int64_t count = 0;
  std::map<std::string, quant::Observer> observers;
  std::map<std::string, std::pair<float, float>> ranges;
  std::set<std::string> model_outputs;
  SessionOptions so;  // the float model's session (backend, ISA, batch)
  std::vector<uint8_t> bytes;
};

Calibrated calibrate(const QuantizeOptions& o, const Model& model, const AppMetadata& meta) {
  Calibrated c;
  quant::Options& qo = c.qo;
  qo.method = quant::parse_method(o.method);
  qo.percentile = o.percentile;
  qo.activation = o.activation_type == "i8" ? DType::I8 : DType::U8;
  qo.reduce_range = o.reduce_range;
  qo.exclude.insert(o.exclude.begin(), o.exclude.end());
  c.plan = quant::plan(model, qo);
  const quant::Plan& plan = c.plan;
  if (plan.nodes.empty())
    throw Error("model '" + o.model + "' has no conv2d, conv_transpose2d, conv_pool2d or dense node to quantize");

  c.calib = load_calibration(o, model, meta);
  const std::vector<Tensor>& calib = c.calib;
  const int64_t count = c.count = calib[0].shape[0];

  // Float model: every observed value that a node makes is an extra output (model inputs are seen as fed).
  std::set<std::string> model_inputs;
  std::set<std::string>& model_outputs = c.model_outputs;
  for (const TensorInfo& t : model.inputs()) model_inputs.insert(t.name);
  for (const TensorInfo& t : model.outputs()) model_outputs.insert(t.name);
  SessionOptions& so = c.so;
  so.backend = o.backend;
  if (!o.cpu_isa.empty()) so.cpu_isa = parse_cpu_isa(o.cpu_isa);
  so.batch = std::min(o.batch, count);
  for (const std::string& v : plan.activations)
    if (!model_inputs.count(v) && !model_outputs.count(v)) so.extra_outputs.push_back(v);
  std::map<std::string, quant::Observer>& observers = c.observers;
  {
    Session session(model, so);
    struct Source {
      bool input;  // a model input (seen as fed), else one of run()'s outputs
      size_t index;
    };
    std::map<std::string, Source> where;
    for (size_t i = 0; i < session.outputs().size(); ++i) where[session.outputs()[i].name] = {false, i};
    for (size_t i = 0; i < session.inputs().size(); ++i) where.emplace(session.inputs()[i].name, Source{true, i});
    fmt::print(o.log, "calibrating {} value(s) of {} node(s) on backend {}, method {}\n", plan.activations.size(),
               plan.nodes.size(), session.backend(), o.method);
    for (int64_t first = 0; first < count; first += so.batch) {
      const int64_t n = std::min(so.batch, count - first);
      const std::vector<Tensor> inputs = slice(calib, first, n);
      const std::vector<Tensor> outputs = session.run(inputs);
      for (const std::string& v : plan.activations) {
        const Source at = where.at(v);
        const Tensor& t = at.input ? inputs.at(at.index) : outputs.at(at.index);
        observers[v].add(t.data.data(), t.numel());
      }
    }
  }
  for (const std::string& v : plan.activations) {
    const quant::Observer& ob = observers[v];
    if (ob.count() == 0) throw Error("value '" + v + "' held no finite number over the calibration set");
    if (ob.nonfinite()) spdlog::warn("value '{}': {} non-finite values ignored", v, ob.nonfinite());
    c.ranges[v] = ob.range(qo.method, qo.percentile);
  }

  const std::map<std::string, std::string> extra{
      {"quantization", fmt::format("int8 weights per output channel (symmetric{}); {} activations per tensor "
                                   "({}{}, {} calibration samples from {})",
                                   o.reduce_range ? ", 7-bit: reduce_range" : "", o.activation_type, o.method,
                                   qo.method == quant::Method::Percentile ? fmt::format(" {}", o.percentile) : "",
                                   count, fs::path(o.calib).filename().string())}};
  c.bytes = quant::rewrite(model, plan, c.ranges, qo, std::string("infer quantize ") + version(), extra);
  return c;
}

}  // namespace

std::vector<uint8_t> quantize_to_bytes(const QuantizeOptions& o, const Model& model, const AppMetadata& meta) {
  return calibrate(o, model, meta).bytes;
}

QuantizeOptions int8_calibration(const std::string& model, const std::string& calib, int64_t samples,
                                 uint64_t seed, const std::string& backend) {
  QuantizeOptions q;
  q.model = model;
  q.calib = calib.empty() ? "random" : calib;
  q.samples = samples;
  q.seed = seed + 1;
  q.backend = backend;
  return q;
}

Model quantize_for_run(const QuantizeOptions& q, Model model, const AppMetadata& meta, Precision& precision) {
  const bool cuda = q.backend == "cuda" || (q.backend == "auto" && cuda_available());
  precision = cuda ? Precision::FP16 : Precision::FP32;
  for (const ModelNode& n : model.nodes())
    if (n.op == "quantize_linear" || n.op == "dequantize_linear") {
      fmt::print(q.log, "int8: '{}' is quantized already; it runs as it is\n", q.model);
      return model;
    }
  std::vector<uint8_t> bytes = quantize_to_bytes(q, model, meta);
  fmt::print(q.log, "int8: '{}' quantized in memory (as infer quantize --calib {} --samples {}), float parts in {}\n",
             q.model, q.calib, q.samples, precision_name(precision));
  return Model::from_bytes(std::move(bytes), q.model + " (int8)");
}

int run_quantize(const QuantizeOptions& o) {
  const Model model = Model::load(o.model);
  const AppMetadata meta = read_metadata(model, o.model);
  std::error_code ec;
  if (fs::exists(o.out, ec) && fs::equivalent(o.out, o.model, ec))
    throw Error("--out '" + o.out + "' is the model itself; choose another file");
  if (!o.report.empty() && (o.report == o.out || (fs::exists(o.report, ec) && fs::equivalent(o.report, o.model, ec))))
    throw Error("--report '" + o.report + "' is the model or --out; choose another file");

  const Calibrated c = calibrate(o, model, meta);
  const quant::Plan& plan = c.plan;
  const quant::Options& qo = c.qo;
  const std::vector<Tensor>& calib = c.calib;
  const int64_t count = c.count;
  const std::map<std::string, quant::Observer>& observers = c.observers;
  const std::map<std::string, std::pair<float, float>>& ranges = c.ranges;
  const std::set<std::string>& model_outputs = c.model_outputs;
  const SessionOptions& so = c.so;
  const std::vector<uint8_t>& bytes = c.bytes;
  const Model quantized = Model::from_bytes(bytes, o.out);  // what the loader will see, checked first
  write_file_atomic(o.out, bytes);
  fmt::print("wrote '{}': {} node(s) quantized, {} value(s) with Q/DQ, weights {} -> {} bytes\n", o.out,
             plan.nodes.size(), plan.activations.size(), model.weight_bytes(), quantized.weight_bytes());

  nlohmann::json report = {{"model", o.model}, {"out", o.out}, {"method", o.method},
                           {"activation_type", o.activation_type}, {"reduce_range", o.reduce_range},
                           {"calibration_samples", count}};
  if (qo.method == quant::Method::Percentile) report["percentile"] = o.percentile;
  for (const std::string& v : plan.activations) {
    const quant::Observer& ob = observers.at(v);
    const std::pair<float, float>& range = ranges.at(v);
    const quant::QuantParams qp = quant::activation_params(range.first, range.second, qo.activation);
    report["activations"].push_back({{"value", v}, {"min", ob.min()}, {"max", ob.max()},
                                     {"lo", range.first}, {"hi", range.second},
                                     {"scale", qp.scale}, {"zero_point", qp.zero_point}});
  }

  const int64_t compare = std::min(o.report_samples, count);
  if (compare > 0) {
    // Both models with each quantized node's output read back; names are kept by the rewrite.
    SessionOptions co = so;
    co.batch = std::min(o.batch, compare);
    co.extra_outputs.clear();
    std::vector<std::string> names;  // model outputs, then the quantized nodes' outputs
    for (const TensorInfo& t : model.outputs()) names.push_back(t.name);
    for (const quant::Plan::Node& n : plan.nodes)
      if (!model_outputs.count(n.output)) {
        co.extra_outputs.push_back(n.output);
        names.push_back(n.output);
      }
    Session fp32(model, co), int8(quantized, co);
    std::vector<LayerError> errors(names.size());
    for (int64_t first = 0; first < compare; first += co.batch) {
      const std::vector<Tensor> inputs = slice(calib, first, std::min(co.batch, compare - first));
      const std::vector<Tensor> ref = fp32.run(inputs), got = int8.run(inputs);
      for (size_t i = 0; i < names.size(); ++i) errors[i].add(ref.at(i), got.at(i));
    }
    std::map<std::string, const quant::Plan::Node*> by_output;
    for (const quant::Plan::Node& n : plan.nodes) by_output[n.output] = &n;
    // A model node runs in int8 where a quantized_conv2d node has its name, or "<name>:..." (a
    // transposed convolution's stride phases).
    const auto in_int8 = [&](const quant::Plan::Node& q) {
      return std::any_of(int8.nodes().begin(), int8.nodes().end(), [&](const NodeInfo& n) {
        return n.op == "quantized_conv2d" && n.name.compare(0, q.name.size(), q.name) == 0 &&
               (n.name.size() == q.name.size() || n.name[q.name.size()] == ':');
      });
    };
    const auto int8_nodes = std::count_if(plan.nodes.begin(), plan.nodes.end(), in_int8);
    fmt::print("per-layer error over {} sample(s) on backend {}, {} of {} quantized node(s) in int8 kernels, the "
               "rest fake-quantized in float (errors accumulate from the input on):\n",
               compare, int8.backend(), int8_nodes, plan.nodes.size());
    fmt::print("  {:<32} {:<17} {:>12} {:>10} {:>12}\n", "node (output)", "op", "rel. error", "SQNR dB", "max |err|");
    // Printed in execution order of the quantized nodes, then the model outputs that none of them makes.
    std::vector<size_t> order;
    for (const quant::Plan::Node& n : plan.nodes)
      order.push_back(size_t(std::find(names.begin(), names.end(), n.output) - names.begin()));
    for (size_t i = 0; i < names.size(); ++i)
      if (!by_output.count(names[i])) order.push_back(i);
    for (const size_t i : order) {
      const auto node = by_output.find(names[i]);
      const std::string label = node != by_output.end() ? node->second->name : "output " + names[i];
      const std::string op = node != by_output.end() ? node->second->op : "";
      fmt::print("  {:<32} {:<17} {:>12.5f} {:>10.2f} {:>12.5g}\n", label, op, errors[i].relative(),
                 errors[i].sqnr_db(), errors[i].max_abs);
      report["layers"].push_back({{"node", label}, {"value", names[i]}, {"op", op},
                                  {"model_output", node == by_output.end() || model_outputs.count(names[i]) > 0},
                                  {"relative_error", errors[i].relative()},
                                  {"sqnr_db", std::isfinite(errors[i].sqnr_db()) ? nlohmann::json(errors[i].sqnr_db())
                                                                                : nlohmann::json(nullptr)},
                                  {"max_abs_error", errors[i].max_abs}});
    }
    report["report_samples"] = compare;
  }
  if (!o.report.empty()) {
    const std::string text = report.dump(2) + "\n";
    write_file_atomic(o.report, std::vector<uint8_t>(text.begin(), text.end()));
    fmt::print("wrote '{}'\n", o.report);
  }
  return 0;
}

}  // namespace infer::cli
