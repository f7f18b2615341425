// onnx2fb: converts an ONNX model (torch.onnx.export; opsets 7-18) into an infer .fb model.
//   onnx2fb model.onnx out.fb [--name N] [--metadata k=v]... [--fp16]
// Exit status: 0 done, 1 usage error (reported by CLI11), 2 anything the importer or the engine refuses
// (unsupported ops, malformed protobuf, bad weights), reported as one `error: ...` line on stderr.
// The converted bytes are loaded back before they are written (temporary + rename), so a 0 exit means a
// model infer accepts, and a failure never replaces an existing output.
#include <exception>
#include <iostream>
#include <string>
#include <utility>
#include <vector>

#include <CLI/CLI.hpp>

#include "atomic_file.h"
#include "infer/infer.h"
#include "onnx_import.h"

int main(int argc, char** argv) {
  CLI::App app{"Converts an ONNX model into an infer .fb model."};
  std::string in, out;
  infer::onnx_import::ImportOptions options;
  std::vector<std::string> metadata;
  bool fp16 = false;

  app.add_option("model", in, "the .onnx file (external data is read relative to its folder)")
      ->required()
      ->option_text("FILE");
  app.add_option("out", out,
                 "the .fb file to write (through a temporary file renamed into place on success)")
      ->required()
      ->option_text("FILE");
  app.add_option("--name", options.name, "model name (default: the ONNX file's stem)")
      ->option_text("NAME");
  const CLI::Validator key_value(
      [](std::string& value) {
        const size_t eq = value.find('=');
        if (eq == std::string::npos || eq == 0) return "must be KEY=VALUE, not '" + value + "'";
        return std::string();
      },
      "", "key_value");
  app.add_option("--metadata", metadata,
                 "extra metadata KEY=VALUE (repeatable; wins over the ONNX metadata_props)")
      ->check(key_value)
      ->take_first()
      ->multi_option_policy(CLI::MultiOptionPolicy::TakeAll)
      ->option_text("KEY=VALUE ...");
  app.add_flag("--fp16", fp16, "store weights as float16");

  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    const int code = app.exit(e);
    return code == 0 ? 0 : 1;
  }

  try {
    for (const std::string& kv : metadata) {
      const size_t eq = kv.find('=');
      options.metadata.emplace_back(kv.substr(0, eq), kv.substr(eq + 1));
    }
    options.weight_dtype = fp16 ? infer::DType::F16 : infer::DType::F32;
    // The bytes are loaded back before anything is written: a file infer would refuse never replaces
    // an existing one (atomic_file.h: temporary, fsync, rename).
    const std::vector<uint8_t> bytes = infer::onnx_import::import_file(in, options).finish();
    const infer::Model model = infer::Model::from_bytes(bytes, out);
    infer::write_file_atomic(out, bytes);
    std::cout << "onnx2fb: wrote " << out << " (" << model.name() << ": " << model.num_nodes()
              << " nodes, " << model.weight_bytes() << " weight bytes, " << bytes.size()
              << " bytes)\n";
    const std::string fixed = model.meta("batch.fixed");
    if (!fixed.empty())
      std::cout << "onnx2fb: note: the model keeps its exported batch " << model.inputs()[0].shape[0]
                << " (infer --batch takes no other): " << fixed << "\n";
    return 0;
  } catch (const std::exception& e) {
    // infer::Error, and also a failed allocation or file-system call: one line, never a crash.
    std::string message = e.what();
    for (char& c : message)
      if (c == '\n' || c == '\r') c = ' ';  // one line, whatever names the ONNX file holds
    std::cerr << "error: " << message << "\n";
    return 2;
  }
}
