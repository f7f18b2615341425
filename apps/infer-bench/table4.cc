// `infer-bench --table4`: the transposed-convolution layers of Table 4 of the unified kernel-segregation
// paper (Tida et al.; docs/design.md lists them: input NxNxC_in, kernel 4x4, stride 2, padding 1, output
// 2Nx2NxC_out, no bias) with every conv_transpose2d variant of the chosen backend (--backend cpu|cuda,
// --precision): per-layer median time, speedup of each
// variant over `conventional`, per-model totals, and the memory column: the bytes of the zero-upsampled
// and padded input the conventional method allocates (segregated variants allocate none of it), as the
// conventional kernel sizes it (conv_transpose2d_upsampled_bytes), checked against the paper's
// formula (one float32 sample, whatever the backend and precision: the paper's column); the whole
// workspace each variant asks for (on this backend, in this precision) is reported beside it.
#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <map>

#include <fmt/format.h>

#include "bench.h"
#include "infer/cpu_isa.h"
#include "infer/kernel.h"

namespace infer::bench {

namespace {

struct Layer {
  std::string model;
  int n;  // input height = width
  int c_in, c_out;
};

const std::vector<Layer>& table4_layers() {
  static const std::vector<Layer> layers{
      {"DCGAN", 4, 1024, 512},  {"DCGAN", 8, 512, 256},    {"DCGAN", 16, 256, 128},
      {"DCGAN", 32, 128, 3},    {"ArtGAN", 4, 512, 256},   {"ArtGAN", 8, 256, 128},
      {"ArtGAN", 16, 128, 128}, {"ArtGAN", 32, 128, 3},    {"GP-GAN", 4, 512, 256},
      {"GP-GAN", 8, 256, 128},  {"GP-GAN", 16, 128, 64},   {"GP-GAN", 32, 64, 3},
      {"EB-GAN", 4, 2048, 1024}, {"EB-GAN", 8, 1024, 512}, {"EB-GAN", 16, 512, 256},
      {"EB-GAN", 32, 256, 128}, {"EB-GAN", 64, 128, 64},   {"EB-GAN", 128, 64, 64}};
  return layers;
}

// The paper's memory column, independently of the kernel: the input after zero insertion ((N-1)*s + 1
// per side) and padding by k-1-p on each side (plus output_padding), float32, one sample.
uint64_t paper_upsampled_bytes(const OpSpec& s) {
  const int64_t n = s.input[2];
  const int64_t side = (n - 1) * s.stride + 1 + 2 * (s.kernel - 1 - s.padding) + s.output_padding;
  return static_cast<uint64_t>(s.input[1] * side * side * 4);
}

// The buffer the conventional kernel allocates (one sample; reused across the batch).
uint64_t kernel_upsampled_bytes(const OpSpec& s) {
  ConvTranspose2DParams p;
  p.stride_h = p.stride_w = s.stride;
  p.pad = {s.padding, s.padding, s.padding, s.padding};
  p.output_padding_h = p.output_padding_w = s.output_padding;
  return conv_transpose2d_upsampled_bytes(p, s.input, {s.input[1], s.out_channels, s.kernel, s.kernel});
}

// --memory-only: what the variant's workspace_bytes() asks for on this layer, straight from the
// registry (no model, no weight preparation: the column costs nothing to compute). The weight is
// zeros: applicability and workspace depend on shapes, not values.
VariantResult workspace_only(const OpSpec& s, const std::string& variant, const RunSettings& settings) {
  VariantResult r;
  r.label = variant;
  const KernelVariant* v = KernelRegistry::global().find(settings.backend, "conv_transpose2d", variant);
  if (!v) {
    r.note = "no " + settings.backend + " conv_transpose2d variant named '" + variant + "'";
    return r;
  }
  ConvTranspose2DParams p;
  p.stride_h = p.stride_w = s.stride;
  p.pad = {s.padding, s.padding, s.padding, s.padding};
  p.output_padding_h = p.output_padding_w = s.output_padding;
  const int64_t ho = (s.input[2] - 1) * s.stride - 2 * s.padding + s.kernel + s.output_padding;
  const Shape w_shape{s.input[1], s.out_channels, s.kernel, s.kernel};
  const std::vector<float> weight(static_cast<size_t>(shape_numel(w_shape)));
  NodeDesc node;
  node.params = p;
  node.input_shapes = {s.input, w_shape};
  node.output_shapes = {{s.input[0], s.out_channels, ho, ho}};
  node.constants = {nullptr, weight.data()};
  node.precision = settings.precision;
  if (v->applicable && !v->applicable(node)) {
    r.note = "not applicable";
    return r;
  }
  r.workspace_bytes = v->workspace_bytes ? v->workspace_bytes(node) : 0;
  r.ran = true;
  return r;
}

// conventional first (the baseline), then the segregated variants, then the rest in registry order.
std::vector<std::string> table_order(std::vector<std::string> v) {
  auto rank = [](const std::string& name) {
    return name == "conventional" ? 0 : name.rfind("segregated", 0) == 0 ? 1 : 2;
  };
  std::stable_sort(v.begin(), v.end(), [&](const std::string& a, const std::string& b) { return rank(a) < rank(b); });
  return v;
}

std::string ms(double v) { return fmt::format("{:.3f}", v); }

// INFER_CPU_ISA caps infer's own kernels only: the OpenBLAS variants (conventional, segregated_gemm,
// gemm_col2im, flipped_conv) run the kernels OpenBLAS picked when it loaded: its own choice for this
// CPU, or OPENBLAS_CORETYPE's (Haswell: AVX2, Prescott: SSE3). One line saying which, so a table
// compares like with like or says that it does not.
std::string isa_levels_line() {
  const CpuIsa level = cpu_isa_default(), cpu = cpu_isa_supported();
  const char* coretype = std::getenv("OPENBLAS_CORETYPE");
  const std::string blas = coretype && *coretype
                               ? fmt::format("OPENBLAS_CORETYPE={}", coretype)
                               : fmt::format("its own choice for this CPU ({}); OPENBLAS_CORETYPE=Haswell or "
                                             "Prescott holds it to AVX2 or SSE",
                                             cpu_isa_name(cpu));
  return fmt::format("ISA: infer's kernels {} (CPU {}); the OpenBLAS variants' kernels: {}", cpu_isa_name(level),
                     cpu_isa_name(cpu), blas);
}

}  // namespace

int run_table4(const Table4Options& options, const RunSettings& settings, const std::string& json_path) {
  std::vector<std::string> variants = options.variants;
  if (variants.empty())
    variants = table_order(candidate_variants(settings.backend, "conv_transpose2d", settings.with_reference));
  if (variants.empty()) throw Error("no " + settings.backend + " conv_transpose2d variant is registered");
  const std::string baseline = "conventional";
  for (const std::string& m : options.models) {
    bool known = false;
    for (const Layer& l : table4_layers()) known = known || l.model == m;
    if (!known) throw Error("--model '" + m + "' is not a Table-4 row (DCGAN, ArtGAN, GP-GAN, EB-GAN)");
  }
  const int threads = apply_threads(0);

  nlohmann::json j{{"command", "table4"},  {"batch", options.batch},    {"runs", settings.runs},
                   {"warmup", settings.warmup}, {"memory_only", options.memory_only},
                   {"variants", variants}, {"baseline", baseline}};
  std::string device;  // of the first session created (none in --memory-only)
  j["layers"] = nlohmann::json::array();

  struct Totals {
    std::map<std::string, double> ms;   // per variant, over layers where it ran
    std::map<std::string, uint64_t> workspace;  // summed workspace bytes per variant
    std::map<std::string, int> layers_run;
    uint64_t upsampled = 0;
    int layers = 0;
  };
  std::vector<std::string> model_order;
  bool mismatches = false;  // kernel's upsampled buffer != the paper's formula somewhere
  std::map<std::string, Totals> totals;

  // cpu: threads; cuda: backend and precision (the device follows at the end, once a session has said
  // which it is).
  const std::string where =
      settings.backend == "cpu"
          ? fmt::format("threads {}", threads)
          : fmt::format("backend {}  precision {}", settings.backend, precision_name(settings.precision));
  std::printf("Table 4 transposed-conv layers: kernel 4x4, stride 2, padding 1, batch %lld, %s, %s\n",
              static_cast<long long>(options.batch),
              options.memory_only ? "memory only"
                                  : fmt::format("runs {} (warm-up {})", settings.runs, settings.warmup).c_str(),
              where.c_str());
  std::string header = fmt::format("{:<7} {:>16} {:>16}", "model", "input NxNxC_in", "output");
  if (!options.memory_only)
    for (const std::string& v : variants) header += fmt::format(" {:>24}", v + " ms (x)");
  header += fmt::format(" {:>12}", "upsampled B");
  for (const std::string& v : variants) header += fmt::format(" {:>24}", v + " wksp B");
  std::printf("%s\n", header.c_str());
  const std::string isa_line = settings.backend == "cpu" ? isa_levels_line() : std::string();

  for (const Layer& l : table4_layers()) {
    if (!options.models.empty() &&
        std::find(options.models.begin(), options.models.end(), l.model) == options.models.end())
      continue;
    OpSpec spec;
    spec.op = "conv_transpose2d";
    spec.input = {options.batch, l.c_in, l.n, l.n};
    spec.out_channels = l.c_out;
    spec.kernel = 4;
    spec.stride = 2;
    spec.padding = 1;
    spec.bias = false;
    std::vector<VariantResult> results;
    if (options.memory_only) {
      for (const std::string& v : variants) results.push_back(workspace_only(spec, v, settings));
    } else {
      const Model model = build_op_model(spec, settings.seed);
      const std::vector<Tensor> inputs{random_tensor(spec.input, settings.seed)};
      for (const std::string& v : variants)
        results.push_back(bench_one(model, options.batch, v, {{"conv_transpose2d", v}}, inputs, settings));
    }
    if (!options.memory_only) fill_speedups(results, baseline);
    if (device.empty()) device = device_of(results);

    const uint64_t upsampled = kernel_upsampled_bytes(spec), paper = paper_upsampled_bytes(spec);
    if (upsampled != paper) mismatches = true;

    if (!totals.count(l.model)) model_order.push_back(l.model);
    Totals& t = totals[l.model];
    ++t.layers;
    t.upsampled += upsampled;
    for (const VariantResult& r : results)
      if (r.ran) {
        t.ms[r.label] += r.stats.median_ms;
        t.workspace[r.label] += r.workspace_bytes;
        ++t.layers_run[r.label];
      }

    std::string row = fmt::format("{:<7} {:>16} {:>16}", l.model,
                                  fmt::format("{}x{}x{}", l.n, l.n, l.c_in),
                                  fmt::format("{}x{}x{}", 2 * l.n, 2 * l.n, l.c_out));
    if (!options.memory_only)
      for (const VariantResult& r : results)
        row += fmt::format(" {:>24}", r.ran ? fmt::format("{} ({:.2f}x)", ms(r.stats.median_ms), r.speedup)
                                            : std::string("n/a"));
    row += fmt::format(" {:>12}", upsampled == paper ? std::to_string(upsampled)
                                                     : fmt::format("{}!={}", upsampled, paper));
    for (const VariantResult& r : results)
      row += fmt::format(" {:>24}", r.ran ? std::to_string(r.workspace_bytes) : std::string("n/a"));
    std::printf("%s\n", row.c_str());

    nlohmann::json lj{{"model", l.model}, {"n", l.n}, {"c_in", l.c_in}, {"c_out", l.c_out},
                      {"input", spec.input}, {"upsampled_bytes", upsampled},
                      {"paper_upsampled_bytes", paper}};
    lj["results"] = nlohmann::json::array();
    for (const VariantResult& r : results) lj["results"].push_back(to_json(r));
    j["layers"].push_back(lj);
  }

  // Per-model totals: summed medians, speedup of each variant's total over conventional's.
  std::printf("\ntotals per model\n");
  j["totals"] = nlohmann::json::array();
  for (const std::string& m : model_order) {
    const Totals& t = totals[m];
    nlohmann::json tj{{"model", m}, {"layers", t.layers}, {"upsampled_bytes", t.upsampled}};
    std::string line = fmt::format("{:<7} upsampled {:>10} B", m, t.upsampled);
    const bool have_base = t.layers_run.count(baseline) && t.layers_run.at(baseline) == t.layers;
    tj["variants"] = nlohmann::json::object();
    for (const std::string& v : variants) {
      if (!t.layers_run.count(v) || t.layers_run.at(v) != t.layers) {
        line += fmt::format(" | {} n/a", v);
        continue;
      }
      nlohmann::json vj{{"workspace_bytes", t.workspace.at(v)}};
      line += fmt::format(" | {}: workspace {} B", v, t.workspace.at(v));
      if (!options.memory_only) {
        const double total = t.ms.at(v);
        const double speedup = have_base && total > 0 ? t.ms.at(baseline) / total : 0;
        vj["total_ms"] = total;
        vj["speedup"] = speedup;
        line += fmt::format(", {} ms ({:.2f}x)", ms(total), speedup);
      }
      tj["variants"][v] = vj;
    }
    std::printf("%s\n", line.c_str());
    j["totals"].push_back(tj);
  }
  if (settings.backend != "cpu") std::printf("%s\n", run_context(threads, settings, device).c_str());
  if (!isa_line.empty()) std::printf("%s\n", isa_line.c_str());
  j["environment"] = environment(threads, settings, device);
  if (settings.backend == "cpu") {
    const char* coretype = std::getenv("OPENBLAS_CORETYPE");
    j["environment"]["openblas_coretype"] = coretype ? coretype : "";
    j["environment"]["cpu_isa"] = cpu_isa_name(cpu_isa_default());
    j["environment"]["cpu_isa_supported"] = cpu_isa_name(cpu_isa_supported());
  }
  j["upsampled_matches_paper"] = !mismatches;
  if (!json_path.empty()) write_json(json_path, j);
  if (mismatches) throw Error("the conventional kernel's upsampled buffer differs from the paper's formula (marked '!=')");
  return 0;
}

}  // namespace infer::bench
