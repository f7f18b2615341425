// `infer-bench`: kernel and model benchmarks of the cpu or cuda backend (see `infer-bench --help`).
//   infer-bench op OP --input NxCxHxW --out-channels C --kernel K --stride S --padding P [--variant V|all]
//   infer-bench model FILE [--batch N] [--dump DIR]
//   infer-bench --table4 [--batch N] [--memory-only]
//   infer-bench weights FILE --out DIR
//   infer-bench soak FILE --runs N [--warmup W] [--max-growth-kib K]   (memory flat over many runs)
//   infer-bench peak [--threads N] [--json F]   (fp32 FMA peak per CPU ISA level, 1 and N threads)
// Global options: --backend cpu|cuda (default cpu), --precision fp32|tf32|fp16 (default fp32; tf32 and
// fp16 need cuda), --autotune; --threads is cpu-only.
// Exit codes as `infer`: 0 done, 1 usage error, 2 anything else ("error: <message>" on stderr).
#include <CLI/CLI.hpp>

#include <cstdio>
#include <exception>
#include <string>

#include "bench.h"
#include "kernel_choice.h"

namespace {

int fail(const std::string& message) {
  std::string line = message;
  for (char& c : line)
    if (c == '\n' || c == '\r') c = ' ';
  std::fprintf(stderr, "error: %s\n", line.c_str());
  return 2;
}

}  // namespace

int main(int argc, char** argv) {
  using namespace infer::bench;
  RunSettings settings;
  std::string json_path;
  bool table4 = false;
  Table4Options t4;
  int64_t batch = 1;

  CLI::App app{"Benchmark infer's kernel variants (cpu or cuda) on one op, a model, or the Table-4 layers",
               "infer-bench"};
  app.set_version_flag("--version", std::string("infer-bench ") + infer::version());
  app.require_subcommand(0, 1);
  app.option_defaults()->always_capture_default();  // --help shows every default
  app.add_option("--runs", settings.runs, "Timed runs (median/min/max over them)")
      ->check(CLI::Range(1, 1000000));
  app.add_option("--warmup", settings.warmup, "Untimed runs first")->check(CLI::Range(0, 1000000));
  CLI::Option* threads_option =
      app.add_option("--threads", settings.threads, "cpu only: OpenMP and OpenBLAS threads (default: theirs)")
          ->check(CLI::Range(1, 4096));
  std::string precision = "fp32";
  app.add_option("--backend", settings.backend,
                 "cpu (timing: steady_clock around Session::run) or cuda (timing: device time of CUDA-graph "
                 "replays, Session::benchmark)")
      ->check(CLI::IsMember({"cpu", "cuda"}));
  app.add_option("--precision", precision, "fp32 (strict), tf32 or fp16; tf32 and fp16 need --backend cuda")
      ->check(CLI::IsMember({"fp32", "tf32", "fp16"}));
  app.add_flag("--autotune", settings.autotune,
               "Sessions choose variants by timing (per node, kept only if the whole forward gets faster)");
  app.add_option("--plan-cache", settings.plan_cache,
                 "JSON file of autotuned plans: model sessions use a graph's plan from it, or add it")
      ->option_text("FILE");
  app.add_option("--seed", settings.seed, "Seed of the random weights and inputs");
  std::vector<std::string> pass_choices;
  app.add_option("--pass", pass_choices,
                 "NAME=on|off: switch a pass (e.g. channels_last=off, fold_width=off); op benchmarks keep "
                 "the three graph passes off");
  app.add_flag("--with-reference", settings.with_reference, "Also time the reference kernels in 'all' mode");
  app.add_option("--json", json_path, "Write the results as JSON to this file");
  app.add_option("--batch", batch, "Batch size (model, --table4)")->check(CLI::Range(int64_t(1), int64_t(65536)));
  app.add_flag("--table4", table4, "Run the Table-4 transposed-conv layers with every variant");
  app.add_flag("--memory-only", t4.memory_only, "--table4: the memory column only, no timing");
  app.add_option("--model", t4.models, "--table4: only these rows (DCGAN, ArtGAN, GP-GAN, EB-GAN)");
  app.add_option("--tconv-variant", t4.variants, "--table4: only these conv_transpose2d variants");

  OpSpec spec;
  std::string input_shape, variant = "all", baseline;
  CLI::App* op = app.add_subcommand("op", "Time one op across its kernel variants");
  op->option_defaults()->always_capture_default();
  op->fallthrough();
  op->add_option("op", spec.op, "conv2d, conv_transpose2d, conv_pool2d, dense, pool2d")
      ->required()
      ->check(CLI::IsMember({"conv2d", "conv_transpose2d", "conv_pool2d", "dense", "pool2d"}));
  op->add_option("--input", input_shape, "Input shape NxCxHxW (NxF for dense); N is the batch")->required();
  op->add_option("--out-channels,--out-features", spec.out_channels, "C_out (F_out for dense)");
  op->add_option("--kernel", spec.kernel, "Kernel size (pool2d: window)")->check(CLI::Range(1, 1024));
  op->add_option("--stride", spec.stride, "Stride")->check(CLI::Range(1, 1024));
  op->add_option("--padding", spec.padding, "Padding on every side")->check(CLI::Range(0, 1024));
  op->add_option("--output-padding", spec.output_padding, "conv_transpose2d output padding")
      ->check(CLI::Range(0, 1024));
  op->add_option("--pool", spec.pool, "conv_pool2d: average pool size (= its stride)")->check(CLI::Range(1, 1024));
  op->add_option("--pool-kind", spec.pool_kind, "pool2d: max or avg")->check(CLI::IsMember({"max", "avg"}));
  bool no_bias = false;
  op->add_flag("--no-bias", no_bias, "No bias input");
  op->add_option("--variant", variant, "A kernel variant name, or all (default)");
  op->add_option("--baseline", baseline, "Variant the ratios are against (default: the first)");
  std::string save_path;
  op->add_option("--save", save_path, "Also write the one-op model to this .fb file (for infer --profile)");

  ModelBenchOptions mo;
  bool no_variants = false;
  CLI::App* model = app.add_subcommand("model", "Time a model, then every other variant per op");
  model->fallthrough();
  model->add_option("file", mo.file, "Model file (.fb)")->required();
  model->add_flag("--no-variants", no_variants, "Only the default plan and the same with the graph passes off");
  bool default_only = false;
  model->add_flag("--default-only", default_only, "Only the default plan (implies --no-variants)");
  model->add_option("--dump", mo.dump_dir, "Write the default plan's input_<i>.npy / output_<i>.npy here");
  std::vector<std::string> kernel_choices;
  model->add_option("--kernel", kernel_choices,
                    "Force a kernel variant in every timed session, e.g. conv_transpose2d=reference, or on one "
                    "node by name, e.g. conv2d:conv1_1=cudnn_folded (repeatable; 'default' is then that plan)")
      ->check(CLI::Validator([](std::string& t) { return infer::cli::check_kernel_choice(t); }, ""))
      ->option_text("OP[:NODE]=VAR ...");

  std::string weights_file, weights_dir;
  CLI::App* weights = app.add_subcommand("weights", "Write every constant of a model to DIR/<name>.npy");
  weights->add_option("file", weights_file, "Model file (.fb)")->required();
  weights->add_option("--out", weights_dir, "Directory")->required();

  SoakOptions so;
  CLI::App* soak = app.add_subcommand(
      "soak", "Run one session --runs times after --warmup runs; fail if memory grows (long runs)");
  soak->fallthrough();
  soak->add_option("file", so.file, "Model file (.fb)")->required();
  soak->add_option("--max-growth-kib", so.max_growth_kib,
                   "Resident (and device) memory growth allowed after the warm-up, KiB (default 1024)");

  CLI::App* peak = app.add_subcommand(
      "peak", "The fp32 multiply-add peak of each CPU ISA level this CPU has (a register-only FMA loop), 1 "
              "thread and --threads (default: OpenMP's) threads");
  peak->fallthrough();

  try {
    app.parse(argc, argv);
    if (!table4 && app.get_subcommands().empty())
      throw CLI::RequiredError("a subcommand (op, model, weights, soak, peak) or --table4");
    if (table4 && !app.get_subcommands().empty())
      throw CLI::ValidationError("--table4", "runs on its own, not with a subcommand");
    try {
      mo.kernels = infer::cli::kernel_choice_map(kernel_choices);
    } catch (const infer::Error& e) {
      throw CLI::ValidationError("--kernel", e.what());  // a usage error, as in infer
    }
    if (settings.backend != "cpu" && threads_option->count() > 0)
      throw CLI::ValidationError("--threads", "is cpu-only (OpenMP and OpenBLAS threads)");
    if (settings.backend == "cpu" && precision != "fp32")
      throw CLI::ValidationError("--precision",
                                 precision + " needs --backend cuda (the cpu backend runs fp32)");
    for (const std::string& choice : pass_choices) {
      try {
        settings.passes.apply(choice);
      } catch (const infer::Error& e) {
        throw CLI::ValidationError("--pass", e.what());
      }
    }
  } catch (const CLI::ParseError& e) {
    const int code = app.exit(e);
    return code == 0 ? 0 : 1;
  }

  try {
    settings.precision = parse_precision(precision);
    apply_threads(settings.threads);
    if (table4) {
      t4.batch = batch;
      return run_table4(t4, settings, json_path);
    }
    if (op->parsed()) {
      spec.input = parse_shape(input_shape);
      spec.bias = !no_bias;
      return run_op(spec, variant, baseline, settings, json_path, save_path);
    }
    if (model->parsed()) {
      mo.batch = batch;
      mo.variants = !no_variants && !default_only;
      mo.no_passes = !default_only;
      return run_model(mo, settings, json_path);
    }
    if (peak->parsed()) return run_peak(settings, json_path);
    if (soak->parsed()) {
      so.batch = batch;
      return run_soak(so, settings);
    }
    return dump_weights(weights_file, weights_dir);
  } catch (const std::exception& e) {
    std::fflush(stdout);
    return fail(e.what());
  } catch (...) {
    std::fflush(stdout);
    return fail("unknown failure");
  }
}
