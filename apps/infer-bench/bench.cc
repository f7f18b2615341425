// infer-bench's shared pieces (see bench.h): timing, random data, one-op models, the variant loop,
// tables and JSON. On cpu, timing is wall-clock (std::chrono::steady_clock) around the whole
// Session::run, input copy-in and output copy-out included, as an application sees it. On cuda it is
// Session::benchmark: device time per forward between CUDA events around CUDA-graph replays, without
// host copies (what TensorRT's trtexec reports as "GPU Compute Time"), since a host round trip per run
// would hide sub-millisecond kernels behind PCIe and synchronisation latency.
#include "bench.h"

#include <omp.h>
#include <cblas.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <ctime>
#include <fstream>
#include <random>
#include <sstream>

#include <fmt/format.h>

#include "npy.h"
#include "infer/kernel.h"

namespace infer::bench {

int apply_threads(int n) {
  if (n > 0) {
    omp_set_num_threads(n);
    openblas_set_num_threads(n);
  }
  return omp_get_max_threads();
}

Precision parse_precision(const std::string& text) {
  for (Precision p : {Precision::FP32, Precision::TF32, Precision::FP16})
    if (text == precision_name(p)) return p;
  throw Error("unknown precision '" + text + "' (choices: fp32, tf32, fp16)");
}

std::string timing_name(const std::string& backend) {
  return backend == "cuda" ? "cuda_events_graph_replay" : "steady_clock_run";
}

std::string timing_description(const std::string& backend) {
  if (backend == "cuda")
    return "Session::benchmark: device time per forward, CUDA events around CUDA-graph replays, inputs "
           "copied in once, no host copies (trtexec's GPU Compute Time)";
  return "std::chrono::steady_clock around Session::run (input copy-in and output copy-out included)";
}

Stats time_runs(Session& session, const std::vector<Tensor>& inputs, const RunSettings& settings) {
  std::vector<double> ms;
  if (session.backend() == "cuda") {
    ms = session.benchmark(inputs, settings.runs, settings.warmup);
  } else {
    for (int i = 0; i < settings.warmup; ++i) session.run(inputs);
    ms.reserve(static_cast<size_t>(settings.runs));
    for (int i = 0; i < settings.runs; ++i) {
      const auto t0 = std::chrono::steady_clock::now();
      session.run(inputs);
      const auto t1 = std::chrono::steady_clock::now();
      ms.push_back(std::chrono::duration<double, std::milli>(t1 - t0).count());
    }
  }
  Stats s;
  s.runs = settings.runs;
  if (ms.empty()) return s;
  std::sort(ms.begin(), ms.end());
  const size_t mid = ms.size() / 2;
  s.median_ms = ms.size() % 2 ? ms[mid] : 0.5 * (ms[mid - 1] + ms[mid]);
  s.min_ms = ms.front();
  s.max_ms = ms.back();
  return s;
}

std::vector<float> random_values(size_t n, uint64_t seed, float scale) {
  std::mt19937_64 rng(seed);
  std::uniform_real_distribution<float> magnitude(0.01f, 1.f);
  std::vector<float> v(n);
  for (float& x : v) {
    const float m = magnitude(rng) * scale;
    x = (rng() & 1) ? m : -m;
  }
  return v;
}

Tensor random_tensor(const Shape& shape, uint64_t seed) {
  return Tensor(shape, random_values(static_cast<size_t>(shape_numel(shape)), seed));
}

std::vector<Tensor> random_inputs(const Session& session, uint64_t seed) {
  std::vector<Tensor> inputs;
  for (const TensorInfo& info : session.inputs()) inputs.push_back(random_tensor(info.shape, seed++));
  return inputs;
}

Shape parse_shape(const std::string& text) {
  Shape shape;
  std::string part;
  std::stringstream in(text);
  while (std::getline(in, part, 'x')) {
    const bool digits = !part.empty() && part.size() <= 9 &&
                        std::all_of(part.begin(), part.end(), [](char c) { return c >= '0' && c <= '9'; });
    if (!digits || std::stoll(part) <= 0)
      throw Error("bad shape '" + text + "': expected positive integers joined by 'x', e.g. 1x64x32x32");
    shape.push_back(std::stoll(part));
  }
  if (shape.empty() || text.back() == 'x')
    throw Error("bad shape '" + text + "': expected positive integers joined by 'x', e.g. 1x64x32x32");
  return shape;
}

namespace {

Conv2DParams conv_params(const OpSpec& s) {
  Conv2DParams p;
  p.stride_h = p.stride_w = s.stride;
  p.pad = {s.padding, s.padding, s.padding, s.padding};
  return p;
}

}  // namespace

Model build_op_model(const OpSpec& spec, uint64_t seed) {
  return Model::from_bytes(build_op_file(spec, seed), "<infer-bench " + spec.op + ">");
}

std::vector<uint8_t> build_op_file(const OpSpec& spec, uint64_t seed) {
  const bool dense = spec.op == "dense";
  if (spec.input.size() != (dense ? 2u : 4u))
    throw Error(spec.op + ": --input must have " + (dense ? "2 dims (NxF)" : "4 dims (NxCxHxW)") +
                ", got " + shape_str(spec.input));
  const bool has_weights = spec.op != "pool2d";
  if (has_weights && spec.out_channels <= 0)
    throw Error(spec.op + ": --out-channels must be given and > 0");
  const int64_t c_in = spec.input[1];

  ModelBuilder b("bench_" + spec.op);
  b.set_producer("infer-bench");
  Shape in_shape = spec.input;
  in_shape[0] = -1;
  const int x = b.input("x", in_shape);

  // Constants: weight then bias, scaled by 1/sqrt(fan-in) so activations stay O(1).
  auto add_weights = [&](Shape w_shape, int64_t fan_in, int64_t c_out) {
    std::vector<int> ids{x};
    const float scale = 1.f / std::sqrt(static_cast<float>(std::max<int64_t>(fan_in, 1)));
    ids.push_back(b.constant("weight", w_shape,
                             random_values(static_cast<size_t>(shape_numel(w_shape)), seed + 100, scale)));
    if (spec.bias)
      ids.push_back(b.constant("bias", {c_out}, random_values(static_cast<size_t>(c_out), seed + 101, 0.1f)));
    return ids;
  };
  const int64_t k = spec.kernel, co = spec.out_channels;
  int y = -1;
  if (spec.op == "conv2d") {
    y = b.node("conv", conv_params(spec), add_weights({co, c_in, k, k}, c_in * k * k, co));
  } else if (spec.op == "conv_transpose2d") {
    ConvTranspose2DParams p;
    p.stride_h = p.stride_w = spec.stride;
    p.pad = {spec.padding, spec.padding, spec.padding, spec.padding};
    p.output_padding_h = p.output_padding_w = spec.output_padding;
    y = b.node("tconv", p, add_weights({c_in, co, k, k}, c_in * k * k, co));
  } else if (spec.op == "conv_pool2d") {
    ConvPool2DParams p;
    p.conv = conv_params(spec);
    p.pool = spec.pool;
    y = b.node("conv_pool", p, add_weights({co, c_in, k, k}, c_in * k * k, co));
  } else if (spec.op == "dense") {
    y = b.node("dense", DenseParams{}, add_weights({co, c_in}, c_in, co));
  } else if (spec.op == "pool2d") {
    if (spec.pool_kind != "max" && spec.pool_kind != "avg")
      throw Error("pool2d: --pool-kind must be max or avg, got '" + spec.pool_kind + "'");
    Pool2DParams p;
    p.kind = spec.pool_kind == "max" ? PoolKind::Max : PoolKind::Average;
    p.kernel_h = p.kernel_w = spec.kernel;
    p.stride_h = p.stride_w = spec.stride;
    p.pad = {spec.padding, spec.padding, spec.padding, spec.padding};
    y = b.node("pool", p, {x});
  } else {
    throw Error("unknown op '" + spec.op + "' (choices: conv2d, conv_transpose2d, conv_pool2d, dense, pool2d)");
  }
  b.output(y);
  return b.finish();
}

std::vector<std::string> candidate_variants(const std::string& backend, const std::string& op,
                                            bool with_reference) {
  std::vector<std::string> names;
  for (const KernelVariant* v : KernelRegistry::global().variants(backend, op))
    if (with_reference || v->name != "reference") names.push_back(v->name);
  return names;
}

VariantResult bench_one(const Model& model, int64_t batch, const std::string& label,
                        const std::map<std::string, std::string>& kernels,
                        const std::vector<Tensor>& inputs, const RunSettings& settings, bool passes) {
  VariantResult r;
  r.label = label;
  r.kernels = kernels;
  SessionOptions options;
  options.backend = settings.backend;
  options.precision = settings.precision;
  options.autotune = settings.autotune;
  options.plan_cache = settings.plan_cache;  // timed as a user would run it: the cached plan if there
  options.batch = batch;
  options.kernels = kernels;
  options.passes = settings.passes;
  if (!passes) options.passes.fold_batchnorm = options.passes.fuse_conv_avgpool =
      options.passes.fuse_activation = false;
  try {
    Session session(model, options);
    r.device = session.device();
    for (const NodeInfo& n : session.nodes()) {
      r.workspace_bytes += n.workspace_bytes;
      r.node_variants.push_back(n.variant);
      r.node_layouts.push_back(layout_name(n.layout));
    }
    r.stats = time_runs(session, inputs, settings);
    // FLOPs from the engine's cost model (one profiled run; the same for every variant).
    bool has_layout_nodes = false;
    for (const NodeInfo& n : session.nodes()) has_layout_nodes = has_layout_nodes || n.op == "layout";
    const Profile profile = session.profile(inputs, has_layout_nodes ? std::min(settings.runs, 10) : 1);
    for (const NodeProfile& n : profile.nodes) {
      r.flops += n.flops;
      if (n.op == "layout") r.layout_ms += n.time_ms;
    }
    r.ran = true;
    if (r.stats.median_ms > 0) r.gflops = r.flops / (r.stats.median_ms * 1e6);
  } catch (const Error& e) {
    r.note = e.what();
  }
  return r;
}

std::string device_of(const std::vector<VariantResult>& results) {
  for (const VariantResult& r : results)
    if (!r.device.empty()) return r.device;
  return "";
}

std::string fill_speedups(std::vector<VariantResult>& results, const std::string& baseline) {
  const VariantResult* base = nullptr;
  for (const VariantResult& r : results)
    if (r.ran && r.label == baseline) base = &r;
  for (const VariantResult& r : results)
    if (!base && r.ran) base = &r;
  if (!base) return "";
  const double t = base->stats.median_ms;
  for (VariantResult& r : results)
    r.speedup = r.ran && r.stats.median_ms > 0 ? t / r.stats.median_ms : 0;
  return base->label;
}

std::string results_table(const std::vector<VariantResult>& results, const std::string& baseline) {
  size_t width = 7;
  for (const VariantResult& r : results) width = std::max(width, r.label.size());
  std::string out = fmt::format("{:<{}}  {:>10}  {:>10}  {:>10}  {:>8}  {:>12}  {:>12}\n", "variant", width,
                                "median ms", "min ms", "max ms", "GFLOP/s", "vs " + baseline, "workspace B");
  for (const VariantResult& r : results) {
    if (!r.ran) {
      out += fmt::format("{:<{}}  not run: {}\n", r.label, width, r.note);
      continue;
    }
    out += fmt::format("{:<{}}  {:>10.3f}  {:>10.3f}  {:>10.3f}  {:>8.2f}  {:>11.2f}x  {:>12}\n", r.label,
                       width, r.stats.median_ms, r.stats.min_ms, r.stats.max_ms, r.gflops, r.speedup,
                       r.workspace_bytes);
  }
  return out;
}

nlohmann::json to_json(const Stats& s) {
  return {{"median_ms", s.median_ms}, {"min_ms", s.min_ms}, {"max_ms", s.max_ms}, {"runs", s.runs}};
}

nlohmann::json to_json(const VariantResult& r) {
  nlohmann::json j{{"label", r.label}, {"kernels", r.kernels}, {"ran", r.ran}};
  if (!r.ran) {
    j["note"] = r.note;
    return j;
  }
  j["time"] = to_json(r.stats);
  j["flops"] = r.flops;
  j["gflops"] = r.gflops;
  j["speedup"] = r.speedup;
  j["workspace_bytes"] = r.workspace_bytes;
  j["node_variants"] = r.node_variants;
  j["node_layouts"] = r.node_layouts;
  j["layout_ms"] = r.layout_ms;
  return j;
}

void write_json(const std::string& path, const nlohmann::json& j) {
  const std::string text = j.dump(2) + "\n";
  write_file_atomic(path, std::vector<uint8_t>(text.begin(), text.end()));
}

nlohmann::json environment(int threads, const RunSettings& settings, const std::string& device) {
  std::string cpu = "unknown";
  std::ifstream cpuinfo("/proc/cpuinfo");
  for (std::string line; std::getline(cpuinfo, line);) {
    if (line.rfind("model name", 0) == 0 && line.find(':') != std::string::npos) {
      cpu = line.substr(line.find(':') + 2);
      break;
    }
  }
  std::string load;
  std::ifstream loadavg("/proc/loadavg");
  std::getline(loadavg, load);
  char when[32];
  const std::time_t now = std::time(nullptr);
  std::tm tm{};
  gmtime_r(&now, &tm);
  std::strftime(when, sizeof when, "%Y-%m-%dT%H:%M:%SZ", &tm);
  return {{"threads", threads},
          {"cpu", cpu},
          {"loadavg", load},
          {"utc", when},
          {"infer_version", version()},
          {"backend", settings.backend},
          {"precision", precision_name(settings.precision)},
          {"autotune", settings.autotune},
          {"device", device},
          {"timing", timing_name(settings.backend)},
          {"timing_description", timing_description(settings.backend)}};
}

std::string run_context(int threads, const RunSettings& settings, const std::string& device) {
  const char* autotune = settings.autotune ? "  autotune" : "";
  if (settings.backend == "cpu") return fmt::format("threads {}{}", threads, autotune);
  return fmt::format("backend {}  precision {}{}  device {}  timing: {}", settings.backend,
                     precision_name(settings.precision), autotune,
                     device.empty() ? "(no session created)" : device, timing_name(settings.backend));
}

}  // namespace infer::bench
