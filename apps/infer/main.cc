// `infer`: run or profile a model file from the command line (see `infer --help`); `infer eval` (eval.cc)
// evaluates a classifier on an IDX data set, or a generator (eval_generator.cc); `infer quantize`
// (quantize.cc) writes an int8 QDQ model. Exit codes: 0 done,
// 1 usage error (CLI11's message), 2 anything else, printed as exactly one line "error: <message>" on
// stderr. Nothing escapes main(): every exception is caught here.
#include <CLI/CLI.hpp>
#include <spdlog/sinks/stdout_color_sinks.h>
#include <spdlog/spdlog.h>

#include <cstdio>
#include <exception>
#include <memory>
#include <string>

#include "cli.h"
#include "kernel_choice.h"

namespace {

int fail(const std::string& message) {
  std::string line = message;
  for (char& c : line)
    if (c == '\n' || c == '\r') c = ' ';  // one line, whatever the message holds
  std::fprintf(stderr, "error: %s\n", line.c_str());
  return 2;
}

}  // namespace

int main(int argc, char** argv) {
  infer::cli::Options o;
  std::vector<std::string> kernel_choices;
  std::vector<std::string> pass_choices;
  bool no_fuse = false;

  CLI::App app{"Run or profile an infer model (.fb)", "infer"};
  app.set_version_flag("--version", std::string("infer ") + infer::version());
  app.add_option("--model", o.model, "Model file (.fb); required unless a subcommand runs")
      ->option_text("FILE");
  app.add_option("--out", o.out,
                 "Output file: a PNG grid for a generator, else .npy (several outputs: FILE_<i>.ext). "
                 "Written to a temporary file and renamed, so it is replaced only on success")
      ->option_text("FILE");
  app.add_option("--input", o.inputs,
                 "Input file per model input, in order: .npy (float32/64/16), or an image "
                 "(PNG/JPEG/BMP, resized and normalised as the model's metadata says)")
      ->option_text("FILE ...");
  app.add_option("--batch", o.batch,
                 "Batch size of random and image inputs, 1 to 65536 (default: a .npy input's batch, else the "
                 "model's: 1, or the fixed batch it was built at)")
      ->check(CLI::Range(int64_t(1), int64_t(65536)).description(""))
      ->option_text("N");
  app.add_option("--seed", o.seed, "Seed of the random input when no --input is given (default 1)")
      ->option_text("N");
  infer::cli::add_backend_option(app, o.backend);
  infer::cli::add_precision_option(app, o.precision,
                                   "fp32 (default, strict), tf32 or fp16 (half storage, fp32 "
                                   "accumulation); tf32 and fp16 need cuda; int8: quantize the model in memory "
                                   "first as infer quantize does (see --calib), the rest in fp16 on cuda, fp32 on cpu",
                                   &o.int8);
  const auto calib = infer::cli::add_calib_options(app, o.calib, o.calib_samples);
  app.add_flag("--autotune", o.autotune,
               "Choose kernel variants by timing: per node, then kept only if the whole forward gets faster");
  app.add_option("--plan-cache", o.plan_cache,
                 "JSON file of autotuned plans: use this graph's if there, else add it (with --autotune)")
      ->option_text("FILE");
  infer::cli::add_max_memory_option(app, o.max_memory);
  infer::cli::add_cpu_isa_option(app, o.cpu_isa);
  app.add_option("--device", o.device, "cuda: the GPU to run on, 0 to 65535 (default: 0, or the current one)")
      ->check(CLI::Range(0, 65535).description(""))
      ->option_text("N");
  auto* runs = app.add_option("--runs", o.runs, "Runs, 1 to 1000000 (default 1; profiling: 10)")
                   ->check(CLI::Range(1, 1000000).description(""))
                   ->option_text("N");
  app.add_flag("--profile", o.profile, "Print the per-node profile table");
  app.add_option("--profile-json", o.profile_json, "Write the profile as JSON")->option_text("FILE");
  app.add_option("--trace", o.trace, "Write a Chrome trace (chrome://tracing, ui.perfetto.dev)")
      ->option_text("FILE");
  app.add_option("--kernel", kernel_choices,
                 "Force a kernel variant, e.g. conv_transpose2d=reference, or on one node by name, e.g. "
                 "conv2d:conv1_1=cudnn_folded (repeatable; -v lists the variant each node runs)")
      ->check(CLI::Validator([](std::string& t) { return infer::cli::check_kernel_choice(t); }, ""))
      ->option_text("OP[:NODE]=VAR ...");
  app.add_flag("--no-fuse", no_fuse, "Run no graph pass (no BatchNorm folding, no fusion)");
  std::string pass_names;  // from PassOptions::names(): the help lists every pass there is
  for (const std::string& n : infer::PassOptions::names()) pass_names += (pass_names.empty() ? "" : ", ") + n;
  app.add_option("--pass", pass_choices,
                 "Switch one graph pass on or off: " + pass_names + " (repeatable, applied after --no-fuse)")
      ->option_text("NAME=on|off ...");
  app.add_flag("-v,--verbose", o.verbose, "Debug logging: kernel per node, timings, memory");
  infer::cli::EvalOptions eval_options;
  CLI::App* eval = infer::cli::add_eval_command(app, eval_options);
  infer::cli::QuantizeOptions quantize_options;
  CLI::App* quantize = infer::cli::add_quantize_command(app, quantize_options);

  try {
    app.parse(argc, argv);
    if (eval->parsed()) {
      infer::cli::check_eval_usage(eval_options);
      infer::cli::check_calib_usage(eval_options.int8, {eval->get_option("--calib"), eval->get_option("--calib-samples")});
    }
    if (!eval->parsed() && !quantize->parsed() && o.model.empty()) throw CLI::RequiredError("--model");
    o.runs_given = runs->count() > 0;
    if (!eval->parsed() && !quantize->parsed()) infer::cli::check_calib_usage(o.int8, calib);
    try {
      o.kernels = infer::cli::kernel_choice_map(kernel_choices);
    } catch (const infer::Error& e) {
      throw CLI::ValidationError("--kernel", e.what());
    }
    if (no_fuse) o.passes.set_all(false);
    for (const std::string& choice : pass_choices) {
      try {
        o.passes.apply(choice);
      } catch (const infer::Error& e) {
        throw CLI::ValidationError("--pass", e.what());
      }
    }
  } catch (const CLI::ParseError& e) {
    const int code = app.exit(e);  // prints help, the version, or the usage error
    return code == 0 ? 0 : 1;
  }

  try {
    // Logs go to stderr so stdout stays the command's results; errors are printed by fail() alone.
    auto logger = std::make_shared<spdlog::logger>(
        "infer", std::make_shared<spdlog::sinks::stderr_color_sink_mt>());
    logger->set_pattern("[%l] %v");
    spdlog::set_default_logger(logger);
    spdlog::set_level(o.verbose ? spdlog::level::debug : spdlog::level::warn);
    if (eval->parsed()) return infer::cli::run_eval(eval_options);
    if (quantize->parsed()) return infer::cli::run_quantize(quantize_options);
    return infer::cli::run(o);
  } catch (const std::exception& e) {
    // infer::Error and everything else (bad_alloc, filesystem errors): one line, exit 2.
    std::fflush(stdout);
    return fail(e.what());
  } catch (...) {
    std::fflush(stdout);
    return fail("unknown failure");
  }
}
