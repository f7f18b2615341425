// The CLI's session inputs: a .npy file (shape [batch, ...] or, at batch 1, the per-sample shape), an
// image for a 4-D input (converted, resized and normalised per the metadata; the batch repeats it), or
// without --input seeded random values: N(0,1) latents for a generator, uniform [-1,1) otherwise.
// The random values come from random_inputs() (apps/common/random_input.h), platform-independent.
#include <fmt/core.h>
#include <spdlog/spdlog.h>

#include <algorithm>
#include <cctype>
#include <cmath>

#include "cli.h"
#include "image_io.h"
#include "npy.h"
#include "random_input.h"

namespace infer::cli {
namespace {

bool has_npy_extension(const std::string& path) {
  if (path.size() < 4) return false;
  std::string ext = path.substr(path.size() - 4);
  for (char& c : ext) c = char(std::tolower(static_cast<unsigned char>(c)));
  return ext == ".npy";
}

Tensor input_from_npy(const std::string& path, const TensorInfo& info, int64_t batch) {
  Tensor t = read_npy(path);
  if (t.shape == info.shape) return t;
  const Shape per_sample(info.shape.begin() + (info.shape.empty() ? 0 : 1), info.shape.end());
  if (batch == 1 && !info.shape.empty() && t.shape == per_sample) {
    t.shape.insert(t.shape.begin(), 1);
    return t;
  }
  std::string expected = shape_str(info.shape);
  if (batch == 1 && !info.shape.empty()) expected += " (or " + shape_str(per_sample) + ")";
  throw Error("input '" + path + "' has shape " + shape_str(t.shape) + ", model input '" + info.name +
              "' needs " + expected);
}

Tensor input_from_image(const std::string& path, const TensorInfo& info, const AppMetadata& meta) {
  if (info.shape.size() != 4)
    throw Error("input '" + path + "' is an image, but model input '" + info.name + "' has shape " +
                shape_str(info.shape) + " (images need a 4-D NCHW input)");
  const int64_t n = info.shape[0], c = info.shape[1], h = info.shape[2], w = info.shape[3];
  if (meta.input_size && (meta.input_size->first != h || meta.input_size->second != w))
    spdlog::warn("metadata input.size {},{} differs from input '{}' ({}); resizing to the input's size",
                 meta.input_size->first, meta.input_size->second, info.name, shape_str(info.shape));
  if (c != 1 && c != 3)
    throw Error("input '" + path + "' is an image, but model input '" + info.name + "' has " +
                std::to_string(c) + " channels (images give 1 or 3)");
  if (h > 65536 || w > 65536)
    throw Error("model input '" + info.name + "' is too large for an image: " + shape_str(info.shape));
  ImageNormalization norm{meta.mean, meta.std};
  Tensor image = load_image(path, int(c), int(h), int(w), norm);
  spdlog::debug("image '{}' -> {} (mean {} values, std {} values)", path, shape_str(image.shape),
                meta.mean.size(), meta.std.size());

  // The batch is the image repeated.
  Tensor t(info.shape);
  for (int64_t i = 0; i < n; ++i)
    std::copy(image.data.begin(), image.data.end(), t.data.begin() + i * int64_t(image.data.size()));
  return t;
}

}  // namespace

std::vector<Tensor> make_inputs(const Options& options, const AppMetadata& meta, const Session& session) {
  const std::vector<TensorInfo>& infos = session.inputs();
  std::vector<Tensor> inputs;

  if (!options.inputs.empty()) {
    if (options.inputs.size() != infos.size())
      throw Error("model '" + options.model + "' has " + std::to_string(infos.size()) + " input(s), " +
                  std::to_string(options.inputs.size()) + " --input file(s) given");
    for (size_t i = 0; i < infos.size(); ++i) {
      const std::string& path = options.inputs[i];
      inputs.push_back(has_npy_extension(path) ? input_from_npy(path, infos[i], session.batch())
                                               : input_from_image(path, infos[i], meta));
      fmt::print("input '{}' {}: from {}\n", infos[i].name, shape_str(infos[i].shape), path);
    }
    return inputs;
  }

  const bool latent = meta.task == "generator";
  inputs = random_inputs(infos, latent, options.seed);
  for (const TensorInfo& info : infos) {
    if (latent && meta.latent_dim && info.shape.size() > 1 &&
        meta.latent_dim != shape_numel(info.shape) / info.shape[0])
      spdlog::warn("metadata latent.dim {} differs from input '{}' ({})", meta.latent_dim, info.name,
                   shape_str(info.shape));
    fmt::print("input '{}' {}: random {} (seed {})\n", info.name, shape_str(info.shape),
               latent ? "latent z ~ N(0,1)" : "uniform [-1,1)", options.seed);
  }
  return inputs;
}

}  // namespace infer::cli
