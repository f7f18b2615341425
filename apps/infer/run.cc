// The `infer` command after parsing: load the model, check every output path before any work (never
// the model or an input file; the directory must exist), quantize it in memory for --precision int8,
// build the session, make the inputs, run or profile, then write and print the results. Output files
// are staged as temporaries and renamed into place together once everything succeeded (atomic_file.h).
#include <fmt/core.h>
#include <spdlog/spdlog.h>

#include <algorithm>
#include <chrono>
#include <filesystem>
#include <system_error>

#include "cli.h"
#include "npy.h"

namespace infer::cli {
namespace {
namespace fs = std::filesystem;

double ms_since(std::chrono::steady_clock::time_point start) {
  return std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start).count();
}

// True when a and b name the same file: the same inode if both exist, else the same normalised path.
bool same_file(const std::string& a, const std::string& b) {
  std::error_code ec;
  if (fs::equivalent(a, b, ec) && !ec) return true;
  const fs::path ca = fs::weakly_canonical(a, ec);
  if (ec) return false;
  const fs::path cb = fs::weakly_canonical(b, ec);
  if (ec) return false;
  return ca == cb;
}

void check_output_paths(const Options& o, const Model& model, const AppMetadata& meta) {
  struct Target {
    std::string path, flag;
  };
  std::vector<Target> targets;
  const size_t n_out = model.outputs().size();
  if (!o.out.empty())
    for (size_t i = 0; i < n_out; ++i) targets.push_back({output_path(o.out, i, n_out), "--out"});
  if (!o.profile_json.empty()) targets.push_back({o.profile_json, "--profile-json"});
  if (!o.trace.empty()) targets.push_back({o.trace, "--trace"});

  std::vector<std::pair<std::string, std::string>> protected_files = {{o.model, "--model"}};
  for (const std::string& in : o.inputs) protected_files.push_back({in, "--input"});

  for (size_t i = 0; i < targets.size(); ++i) {
    const Target& t = targets[i];
    for (const auto& [path, flag] : protected_files)
      if (same_file(t.path, path))
        throw Error(t.flag + " '" + t.path + "' is the " + flag + " file; refusing to overwrite it");
    for (size_t j = 0; j < i; ++j)
      if (same_file(t.path, targets[j].path))
        throw Error(t.flag + " '" + t.path + "' is also the " + targets[j].flag + " file");

    std::error_code ec;
    fs::path dir = fs::path(t.path).parent_path();
    if (dir.empty()) dir = ".";
    if (!fs::is_directory(dir, ec))
      throw Error("cannot write '" + t.path + "': directory '" + dir.string() + "' does not exist");
    if (fs::is_directory(t.path, ec))
      throw Error("cannot write '" + t.path + "': it is a directory");
  }

  if (o.out.empty() && !o.profiling())
    for (const TensorInfo& info : model.outputs())
      if (is_image_output(o, meta, info))
        throw Error("model '" + o.model + "' is a generator: give --out FILE.png for its images");
}

void log_plan(const Session& session) {
  spdlog::debug("session: backend {} ({}), precision {}, batch {}, {} nodes{}", session.backend(),
                session.device(), precision_name(session.precision()), session.batch(),
                session.nodes().size(),
                session.backend() == "cuda" ? ""
                                            : fmt::format(", CPU ISA {} (this CPU supports {})",
                                                          cpu_isa_name(session.cpu_isa()),
                                                          cpu_isa_name(cpu_isa_supported())));
  for (const NodeInfo& n : session.nodes()) {
    std::string fused;
    for (const std::string& f : n.fused) fused += (fused.empty() ? " (fused: " : ", ") + f;
    if (!fused.empty()) fused += ")";
    spdlog::debug("  {:<24} {:<16} {:<36} {:<8} -> {}{}", n.name, n.op, n.variant, n.isa.empty() ? "-" : n.isa,
                  shape_str(n.output_shape), fused);
  }
  const MemoryReport& m = session.memory();
  spdlog::debug("memory: arena {} B, naive {} B, lower bound {} B, workspace {} B, weights {} B, "
                "prepared {} B, device peak {} B of {} B",
                m.arena_bytes, m.naive_bytes, m.lower_bound_bytes, m.workspace_bytes, m.weight_bytes,
                m.prepared_bytes, m.device_peak_bytes, m.device_total_bytes);
}

std::vector<uint8_t> as_bytes(const std::string& text) { return {text.begin(), text.end()}; }

}  // namespace

int run(const Options& o) {
  auto start = std::chrono::steady_clock::now();
  Model model = Model::load(o.model);
  spdlog::debug("loaded '{}': model '{}', {} nodes, {} weight bytes, format {} ({:.1f} ms)", o.model,
                model.name(), model.num_nodes(), model.weight_bytes(), model.format_version(),
                ms_since(start));
  const AppMetadata meta = read_metadata(model, o.model);
  check_output_paths(o, model, meta);
  Precision precision = o.precision;
  if (o.int8) {
    QuantizeOptions q = int8_calibration(o.model, o.calib, o.calib_samples, o.seed, o.backend);
    q.cpu_isa = o.cpu_isa;
    model = quantize_for_run(q, std::move(model), meta, precision);
  }

  SessionOptions session_options;
  session_options.backend = o.backend;
  session_options.precision = precision;
  session_options.autotune = o.autotune;
  session_options.plan_cache = o.plan_cache;
  NpyInputs npy = read_npy_inputs(o, model);
  session_options.batch = o.batch > 0 ? o.batch : npy.batch;  // 0: the model's own
  session_options.kernels = o.kernels;
  session_options.passes = o.passes;
  session_options.max_memory_bytes = o.max_memory;
  session_options.device = o.device;
  if (!o.cpu_isa.empty()) session_options.cpu_isa = parse_cpu_isa(o.cpu_isa);
  start = std::chrono::steady_clock::now();
  Session session(model, session_options);
  spdlog::debug("session created in {:.1f} ms", ms_since(start));
  log_plan(session);
  for (const std::string& line : session.passes()) spdlog::debug("pass {}", line);

  const std::vector<Tensor> inputs = make_inputs(o, meta, session, std::move(npy));

  // Every file is staged (written to a temporary) and renamed into place only once all were written:
  // an error on the way leaves every existing output as it was (atomic_file.h).
  StagedWrites files;
  std::vector<std::string> wrote;
  if (o.profiling()) {
    const int runs = o.runs_given ? o.runs : 10;
    const Profile profile = session.profile(inputs, runs);
    if (o.profile) fmt::print("{}", profile.table());
    if (!o.profile_json.empty()) {
      files.add(o.profile_json, as_bytes(profile.json()));
      wrote.push_back(fmt::format("wrote {}: profile JSON ({} runs)", o.profile_json, runs));
    }
    if (!o.trace.empty()) {
      files.add(o.trace, as_bytes(profile.chrome_trace()));
      wrote.push_back(fmt::format("wrote {}: Chrome trace ({} runs)", o.trace, runs));
    }
    // Profiling alone writes no outputs; --out still gets them from one more run.
    if (o.out.empty()) {
      files.commit();
      for (const std::string& line : wrote) fmt::print("{}\n", line);
      return 0;
    }
  }

  std::vector<Tensor> outputs;
  const int runs = o.profiling() ? 1 : o.runs;
  std::vector<double> times;
  for (int r = 0; r < runs; ++r) {
    start = std::chrono::steady_clock::now();
    outputs = session.run(inputs);
    times.push_back(ms_since(start));
  }
  std::sort(times.begin(), times.end());
  spdlog::debug("run: {} time(s), median {:.3f} ms, min {:.3f} ms", runs, times[times.size() / 2],
                times.front());
  if (outputs.size() != session.outputs().size())
    throw Error("session returned " + std::to_string(outputs.size()) + " outputs for " +
                std::to_string(session.outputs().size()) + " declared");

  if (!o.out.empty()) {
    const std::vector<std::string> lines = stage_outputs(o, meta, session, outputs, files);
    wrote.insert(wrote.end(), lines.begin(), lines.end());
  }
  files.commit();
  for (const std::string& line : wrote) fmt::print("{}\n", line);
  if (meta.task == "classifier")
    print_top5(meta, session, outputs);
  else if (o.out.empty())
    print_summary(session, outputs);
  return 0;
}

}  // namespace infer::cli
