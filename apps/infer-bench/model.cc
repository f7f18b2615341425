// `infer-bench model FILE`: the whole model with the engine's default choices (passes and kernel
// heuristic), the same with every graph pass off, then for every op in the planned graph each other
// applicable variant of the chosen backend forced for all nodes of that op, one op at a time; ratios
// against the default; --kernel choices hold in all of them ("default" is then the plan with them).
// `infer-bench weights` dumps a model's constants as .npy files named after their tensors, so another
// framework can load the same weights.
#include <cstdio>
#include <filesystem>
#include <map>
#include <set>

#include "bench.h"
#include "npy.h"

namespace infer::bench {

int run_model(const ModelBenchOptions& options, const RunSettings& settings, const std::string& json_path) {
  const Model model = Model::load(options.file);
  SessionOptions session_options;
  session_options.backend = settings.backend;
  session_options.precision = settings.precision;
  session_options.autotune = settings.autotune;
  session_options.plan_cache = settings.plan_cache;
  session_options.batch = options.batch;
  session_options.passes = settings.passes;  // the printed plan is the timed default's (--pass, --kernel)
  session_options.kernels = options.kernels;
  Session session(model, session_options);
  const std::vector<Tensor> inputs = random_inputs(session, settings.seed);

  // The default plan: which variants each op uses (in execution order of first appearance).
  std::vector<std::string> ops;
  std::map<std::string, std::map<std::string, int>> used;
  for (const NodeInfo& n : session.nodes()) {
    if (!used.count(n.op)) ops.push_back(n.op);
    ++used[n.op][n.variant];
  }

  std::vector<VariantResult> results;
  results.push_back(bench_one(model, options.batch, "default", options.kernels, inputs, settings));
  if (options.no_passes)
    results.push_back(bench_one(model, options.batch, "no passes", options.kernels, inputs, settings, false));
  if (options.variants) {
    for (const std::string& op : ops) {
      for (const std::string& v : candidate_variants(settings.backend, op, settings.with_reference)) {
        const auto& counts = used[op];
        if (counts.size() == 1 && counts.begin()->first == v) continue;  // already the default
        std::map<std::string, std::string> forced = options.kernels;
        forced[op] = v;
        results.push_back(bench_one(model, options.batch, op + "=" + v, forced, inputs, settings));
      }
    }
  }
  fill_speedups(results, "default");

  const int threads = apply_threads(0);
  std::printf("model %s (%s)  batch %lld  nodes %zu  runs %d (warm-up %d)  %s\n", options.file.c_str(),
              model.name().c_str(), static_cast<long long>(options.batch), session.nodes().size(),
              settings.runs, settings.warmup, run_context(threads, settings, session.device()).c_str());
  std::printf("default kernels:");
  for (const std::string& op : ops) {
    std::printf(" %s=", op.c_str());
    bool first = true;
    for (const auto& [variant, count] : used[op]) {
      std::printf("%s%s(%d)", first ? "" : "+", variant.c_str(), count);
      first = false;
    }
  }
  std::printf("\n%s", results_table(results, "default").c_str());

  if (!options.dump_dir.empty()) {
    std::filesystem::create_directories(options.dump_dir);
    const std::vector<Tensor> outputs = session.run(inputs);
    for (size_t i = 0; i < inputs.size(); ++i)
      write_npy(options.dump_dir + "/input_" + std::to_string(i) + ".npy", inputs[i]);
    for (size_t i = 0; i < outputs.size(); ++i)
      write_npy(options.dump_dir + "/output_" + std::to_string(i) + ".npy", outputs[i]);
    std::printf("wrote %zu inputs and %zu outputs to %s\n", inputs.size(), outputs.size(),
                options.dump_dir.c_str());
  }

  if (!json_path.empty()) {
    nlohmann::json j{{"command", "model"},  {"file", options.file},   {"model", model.name()},
                     {"batch", options.batch}, {"runs", settings.runs}, {"warmup", settings.warmup},
                     {"environment", environment(threads, settings, session.device())}};
    j["nodes"] = nlohmann::json::array();
    for (const NodeInfo& n : session.nodes())
      j["nodes"].push_back({{"name", n.name}, {"op", n.op}, {"variant", n.variant}, {"fused", n.fused},
                            {"output_shape", n.output_shape}, {"workspace_bytes", n.workspace_bytes}});
    j["results"] = nlohmann::json::array();
    for (const VariantResult& r : results) j["results"].push_back(to_json(r));
    write_json(json_path, j);
  }
  if (!results.front().ran) throw Error(options.file + ": the default session failed: " + results.front().note);
  return 0;
}

int dump_weights(const std::string& file, const std::string& dir) {
  const Model model = Model::load(file);
  std::filesystem::create_directories(dir);
  int count = 0;
  for (const ModelConstant& v : model.constants()) {
    std::string name = v.name;
    for (char& c : name)
      if (c == '/' || c == '\\') c = '_';  // a tensor name never escapes the directory
    if (name.empty() || name == "." || name == "..") name = "constant_" + std::to_string(count);
    const size_t n = static_cast<size_t>(shape_numel(v.shape));
    write_npy(dir + "/" + name + ".npy", Tensor(v.shape, std::vector<float>(v.data, v.data + n)));
    ++count;
  }
  std::printf("wrote %d constants of %s to %s\n", count, file.c_str(), dir.c_str());
  return 0;
}

}  // namespace infer::bench
