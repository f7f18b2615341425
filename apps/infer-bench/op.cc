// `infer-bench op OP ...`: one op, one model, every applicable variant of that op on the chosen backend
// (--backend cpu|cuda) forced in turn (or one named variant), timed on the same seeded input; ratios
// against a baseline variant.
#include <cstdio>

#include "bench.h"
#include "npy.h"  // write_file_atomic

namespace infer::bench {

int run_op(const OpSpec& spec, const std::string& variant, const std::string& baseline,
           const RunSettings& settings, const std::string& json_path, const std::string& save_path) {
  const std::vector<uint8_t> file = build_op_file(spec, settings.seed);
  if (!save_path.empty()) write_file_atomic(save_path, file);
  const Model model = Model::from_bytes(file, "<infer-bench " + spec.op + ">");
  std::vector<std::string> variants;
  if (variant.empty() || variant == "all") {
    variants = candidate_variants(settings.backend, spec.op, settings.with_reference);
  } else {
    variants = {variant};
  }
  if (variants.empty())
    throw Error("no " + settings.backend + " kernel variant is registered for op '" + spec.op + "'");

  const int64_t batch = spec.input[0];
  Shape input_shape = spec.input;
  const std::vector<Tensor> inputs{random_tensor(input_shape, settings.seed)};

  std::vector<VariantResult> results;
  for (const std::string& v : variants)
    results.push_back(bench_one(model, batch, v, {{spec.op, v}}, inputs, settings));
  const std::string base = fill_speedups(results, baseline);

  const int threads = apply_threads(0);
  const std::string device = device_of(results);
  std::printf("op %s  input %s  out %lld  kernel %d  stride %d  padding %d", spec.op.c_str(),
              shape_str(spec.input).c_str(), static_cast<long long>(spec.out_channels), spec.kernel,
              spec.stride, spec.padding);
  if (spec.op == "conv_transpose2d") std::printf("  output_padding %d", spec.output_padding);
  if (spec.op == "conv_pool2d") std::printf("  pool %d", spec.pool);
  std::printf("\nruns %d (warm-up %d)  %s\n", settings.runs, settings.warmup,
              run_context(threads, settings, device).c_str());
  std::printf("%s", results_table(results, base.empty() ? "-" : base).c_str());

  if (!json_path.empty()) {
    nlohmann::json j{{"command", "op"},
                     {"op", spec.op},
                     {"input", spec.input},
                     {"out_channels", spec.out_channels},
                     {"kernel", spec.kernel},
                     {"stride", spec.stride},
                     {"padding", spec.padding},
                     {"output_padding", spec.output_padding},
                     {"pool", spec.pool},
                     {"baseline", base},
                     {"runs", settings.runs},
                     {"warmup", settings.warmup},
                     {"environment", environment(threads, settings, device)}};
    j["results"] = nlohmann::json::array();
    for (const VariantResult& r : results) j["results"].push_back(to_json(r));
    write_json(json_path, j);
  }
  bool any = false;
  for (const VariantResult& r : results) any = any || r.ran;
  if (!any) throw Error("no variant of '" + spec.op + "' could run: " + results.front().note);
  return 0;
}

}  // namespace infer::bench
