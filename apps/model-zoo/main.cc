// model-zoo: writes a zoo model (models/zoo.h) to a .fb file, or lists the zoo.
//   model-zoo NAME --out FILE [--seed N] [--image-size N] [--fp16]
//             [--weights DIR] [--labels A,B,..] [--description TEXT] [--meta KEY=VALUE]...
//   model-zoo --list
// --weights exports trained weights: every constant is read from DIR/<PyTorch state_dict key>.npy
// (models/README.md); a missing file, a wrong shape, or a parameter file in DIR the model does not use
// (a stem with a '.', e.g. fc4.weight.npy) is an error. The zoo stays I/O free: the arrays are read here.
// Exit status: 0 done, 1 usage error (reported by CLI11), 2 anything infer refuses (unknown model, bad
// image size, unwritable path), reported as one `error: ...` line on stderr.
#include <charconv>
#include <cstdint>
#include <exception>
#include <filesystem>
#include <iostream>
#include <set>
#include <string>
#include <system_error>
#include <vector>

#include <CLI/CLI.hpp>

#include "infer/infer.h"
#include "npy.h"
#include "zoo.h"

namespace {

namespace fs = std::filesystem;

// "key=value" with a non-empty key; CLI11 reports a non-empty return as a usage error.
std::string check_meta(std::string& text) {
  const size_t eq = text.find('=');
  if (eq == std::string::npos || eq == 0) return "expected KEY=VALUE, got '" + text + "'";
  return "";
}

// Labels are stored one per line (docs/format.md); the command line gives them comma-separated.
std::string labels_lines(const std::string& list) {
  std::string lines = list;
  for (char& c : lines)
    if (c == ',') c = '\n';
  return lines;
}

// The WeightSource for --weights DIR: reads DIR/<key>.npy and records which keys were used.
infer::zoo::WeightSource folder_weights(const std::string& dir, std::set<std::string>& used) {
  return [dir, &used](const std::string& key, const infer::Shape&) {
    const fs::path file = fs::path(dir) / (key + ".npy");
    std::error_code ec;
    if (!fs::is_regular_file(file, ec))
      throw infer::Error("--weights '" + dir + "': no '" + file.filename().string() +
                         "' for parameter '" + key + "'");
    used.insert(key);
    return infer::read_npy(file.string());  // the zoo checks the shape
  };
}

// Parameter files (stem with a '.', as PyTorch keys have) in `dir` that the model did not ask for:
// a folder for another architecture must not half-match silently.
void check_all_used(const std::string& dir, const std::set<std::string>& used) {
  for (const fs::directory_entry& e : fs::directory_iterator(dir)) {
    const fs::path p = e.path();
    if (p.extension() != ".npy") continue;
    const std::string stem = p.stem().string();
    if (stem.find('.') != std::string::npos && used.count(stem) == 0)
      throw infer::Error("--weights '" + dir + "': '" + p.filename().string() +
                         "' is not a parameter of this model");
  }
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"Writes a model of the infer zoo (seeded random weights) to a .fb file."};
  std::string name, out;
  uint64_t seed = 1;
  int image_size = 0;
  bool fp16 = false, list = false;
  std::string weights_dir, labels, description;
  std::vector<std::string> meta;

  CLI::Option* name_option =
      app.add_option("name", name, "zoo model: lenet5, alexnet, vgg11, vgg16, dcgan, ebgan")
          ->option_text("NAME");
  CLI::Option* out_option = app.add_option("-o,--out", out, "the .fb file to write")->option_text("FILE");
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
  app.add_option("--weights", weights_dir,
                 "trained weights: a folder of <PyTorch state_dict key>.npy files (models/README.md)")
      ->check(CLI::Validator(CLI::ExistingDirectory).description(""))
      ->option_text("DIR");
  app.add_option("--labels", labels, "metadata 'labels': class names, comma-separated");
  app.add_option("--description", description, "the model's description (replaces the zoo's)");
  app.add_option("--meta", meta, "extra metadata KEY=VALUE (repeatable; replaces the zoo's KEY)")
      ->check(CLI::Validator(check_meta, ""))
      ->option_text("KEY=VALUE ...");
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
    std::set<std::string> used;
    if (!weights_dir.empty()) options.weights = folder_weights(weights_dir, used);

    infer::ModelBuilder builder = infer::zoo::build(name, options);
    if (!weights_dir.empty()) check_all_used(weights_dir, used);
    if (!labels.empty()) builder.set_metadata("labels", labels_lines(labels));
    if (!description.empty()) builder.set_description(description);
    for (const std::string& kv : meta) {
      const size_t eq = kv.find('=');
      builder.set_metadata(kv.substr(0, eq), kv.substr(eq + 1));
    }
    // Loaded back before anything is written (a file infer would refuse never replaces an existing
    // one); every zoo constant is stored as options.weight_dtype, so the parameter count is weight
    // bytes over that size.
    const std::vector<uint8_t> file = builder.finish();
    const infer::Model model = infer::Model::from_bytes(file, out);
    infer::write_file_atomic(out, file);
    const uint64_t parameters = model.weight_bytes() / infer::dtype_size(options.weight_dtype);
    const size_t bytes = file.size();
    std::cout << name << ": wrote " << out << " (" << bytes << " bytes, " << parameters
              << " parameters)\n";
    return 0;
  } catch (const std::exception& e) {
    // infer::Error, and also a failed allocation or file-system call: one line, never a crash.
    std::cerr << "error: " << e.what() << "\n";
    return 2;
  }
}
