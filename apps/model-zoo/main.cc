// model-zoo: writes a zoo model (models/zoo.h) to a .fb file, or lists the zoo.
//   model-zoo NAME --out FILE [--seed N] [--image-size N] [--fp16]
//   model-zoo --list
// Exit status: 0 done, 1 usage error (reported by CLI11), 2 anything infer refuses (unknown model, bad
// image size, unwritable path), reported as one `error: ...` line on stderr.
#include <charconv>
#include <cstdint>
#include <exception>
#include <filesystem>
#include <iostream>
#include <string>
#include <system_error>

#include <CLI/CLI.hpp>

#include "infer/infer.h"
#include "zoo.h"

int main(int argc, char** argv) {
  CLI::App app{"Writes a model of the infer zoo (seeded random weights) to a .fb file."};
  std::string name, out;
  uint64_t seed = 1;
  int image_size = 0;
  bool fp16 = false, list = false;

  CLI::Option* name_option =
      app.add_option("name", name, "zoo model: lenet5, alexnet, vgg11, vgg16, dcgan, ebgan");
  CLI::Option* out_option = app.add_option("-o,--out", out, "the .fb file to write");
  // CLI11 alone would wrap "-3" around to 2^64 - 3 and saturate a seed past 2^64 - 1.
  const CLI::Validator seed_check(
      [](std::string& value) {
        uint64_t parsed = 0;
        const char* end = value.data() + value.size();
        const auto [ptr, ec] = std::from_chars(value.data(), end, parsed);
        if (value.empty() || ec != std::errc() || ptr != end)
          return "must be an integer from 0 to 2^64 - 1, not '" + value + "'";
        return std::string();
      },
      "", "seed");
  app.add_option("--seed", seed, "weight seed (the same seed writes the same bytes)")
      ->check(seed_check)
      ->capture_default_str();
  app.add_option("--image-size", image_size,
                 "classifiers: input height = width (0 = the architecture's own: 28 lenet5, 224 others)")
      ->capture_default_str();
  app.add_flag("--fp16", fp16, "store weights as float16");
  app.add_flag("--list", list, "print the zoo's model names, one per line")
      ->excludes(name_option)
      ->excludes(out_option);

  try {
    app.parse(argc, argv);
    // NAME and --out are required unless listing; reported like CLI11's own usage errors.
    if (!list && name.empty()) throw CLI::RequiredError("NAME");
    if (!list && out.empty()) throw CLI::RequiredError("--out");
  } catch (const CLI::ParseError& e) {
    const int code = app.exit(e);
    return code == 0 ? 0 : 1;
  }

  try {
    if (list) {
      for (const std::string& n : infer::zoo::names()) std::cout << n << "\n";
      return 0;
    }
    infer::zoo::ZooOptions options;
    options.seed = seed;
    options.image_size = image_size;
    options.weight_dtype = fp16 ? infer::DType::F16 : infer::DType::F32;

    infer::zoo::build(name, options).save(out);

    // Read the file back: it proves the file loads, and gives the parameter count (every zoo constant
    // is stored as options.weight_dtype, so the count is weight bytes over that size).
    const infer::Model model = infer::Model::load(out);
    const uint64_t parameters = model.weight_bytes() / infer::dtype_size(options.weight_dtype);
    const uintmax_t bytes = std::filesystem::file_size(out);
    std::cout << name << ": wrote " << out << " (" << bytes << " bytes, " << parameters
              << " parameters)\n";
    return 0;
  } catch (const std::exception& e) {
    // infer::Error, and also a failed allocation or file-system call: one line, never a crash.
    std::cerr << "error: " << e.what() << "\n";
    return 2;
  }
}
