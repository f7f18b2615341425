// Command-line options that `infer` and `infer eval` share, each with a help line a new user can read:
// CLI11 prints a CheckedTransformer over an enum as "ENUM:value in {fp16->,...} OR {, ,}", so the
// choices are written out in the help text and the type column says what to type (NAME, SIZE).
#include <CLI/CLI.hpp>

#include <cctype>
#include <string>

#include "cli.h"

namespace infer::cli {

CLI::Option* add_precision_option(CLI::App& app, Precision& target, const std::string& help, bool* int8) {
  // CLI11 stores an enum through its integer: the name becomes that number, or a readable error.
  const CLI::Validator by_name(
      [int8](std::string& value) {
        std::string name = value;
        for (char& c : name) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
        if (int8) *int8 = name == "int8";
        if (int8 && *int8) name = precision_name(Precision::FP32);
        for (const Precision p : {Precision::FP32, Precision::TF32, Precision::FP16})
          if (name == precision_name(p)) {
            value = std::to_string(static_cast<int>(p));
            return std::string();
          }
        return std::string(int8 ? "must be fp32, tf32, fp16 or int8" : "must be fp32, tf32 or fp16") + ", not '" +
               value + "'";
      },
      "", "precision");
  return app.add_option("--precision", target, help)->transform(by_name)->option_text("NAME");
}

std::pair<CLI::Option*, CLI::Option*> add_calib_options(CLI::App& app, std::string& calib, int64_t& samples) {
  CLI::Option* c = app.add_option("--calib", calib,
                                  "With --precision int8: calibration data as for infer quantize (IDX file, image "
                                  "folder, .npy batch) or 'random' (default: the inputs infer draws, seed --seed + 1)")
                       ->option_text("DATA");
  CLI::Option* n = app.add_option("--calib-samples", samples,
                                  "With --precision int8: calibration samples used at most, 1 to 1000000 (default 128)")
                       ->check(CLI::Range(int64_t(1), int64_t(1000000)).description(""))
                       ->option_text("N");
  return {c, n};
}

void check_calib_usage(bool int8, const std::pair<CLI::Option*, CLI::Option*>& options) {
  if (!int8 && (options.first->count() > 0 || options.second->count() > 0))
    throw CLI::ValidationError("--calib", "--calib and --calib-samples need --precision int8");
}

CLI::Option* add_backend_option(CLI::App& app, std::string& target) {
  return app
      .add_option("--backend", target,
                  "auto (default: cuda when this build has it and a GPU is present, else cpu), cpu, "
                  "cuda, or reference (plain loops, the test oracle)")
      ->check(CLI::IsMember({"cpu", "cuda", "reference", "auto"}).description(""))
      ->option_text("NAME");
}

CLI::Option* add_cpu_isa_option(CLI::App& app, std::string& target) {
  return app
      .add_option("--cpu-isa", target,
                  "cpu: the highest instruction set its kernels may use: avx512, avx2 or baseline "
                  "(default: INFER_CPU_ISA if set, else the best this CPU supports; -v shows it per node)")
      ->check(CLI::IsMember({"avx512", "avx2", "baseline"}, CLI::ignore_case).description(""))
      ->option_text("LEVEL");
}

CLI::Option* add_max_memory_option(CLI::App& app, uint64_t& target) {
  return app
      .add_option("--max-memory", target,
                  "Refuse a session needing more than SIZE bytes (arena, weight copies, prepared "
                  "weights, inputs and outputs): e.g. 512MiB, 2GiB, 3G (k, M, G = powers of 1000)")
      ->check(CLI::Validator(
          [](std::string& value) {
            // AsSizeValue would wrap "-5" around to 2^64 - 5, i.e. no limit at all.
            if (value.find('-') != std::string::npos)
              return "must be a size in bytes such as 2GiB, not '" + value + "'";
            return std::string();
          },
          ""))
      ->transform(CLI::AsSizeValue(true).description(""))
      ->option_text("SIZE");
}

}  // namespace infer::cli
