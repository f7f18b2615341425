// The CLI's session inputs: a .npy file (shape [batch, ...], whose batch becomes the session's, or the
// per-sample shape: one sample), an image for a 4-D input (converted, resized and normalised per the
// metadata; the batch, --batch or the model's, repeats it), or without --input seeded random values:
// N(0,1) latents for a generator, uniform [-1,1) otherwise. The random values come from
// random_inputs() (apps/common/random_input.h), platform-independent.
#include <fmt/format.h>
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

// A .npy input for model input `info` (declared shape: a leading -1 for the batch, or a fixed size):
// [N, per-sample shape] at any batch N, or the per-sample shape as one sample.
Tensor input_from_npy(const std::string& path, const TensorInfo& info) {
  Tensor t = read_npy(path);
  if (info.shape.empty()) {
    if (t.shape == info.shape) return t;
    throw Error("input '" + path + "' has shape " + shape_str(t.shape) + ", model input '" + info.name +
                "' is a scalar");
  }
  const Shape per_sample(info.shape.begin() + 1, info.shape.end());
  if (t.shape.size() == info.shape.size() && t.shape[0] >= 1 &&
      std::equal(per_sample.begin(), per_sample.end(), t.shape.begin() + 1))
    return t;
  if (t.shape == per_sample) {
    t.shape.insert(t.shape.begin(), 1);
    return t;
  }
  throw Error("input '" + path + "' has shape " + shape_str(t.shape) + ", model input '" + info.name +
              "' needs Nx" + shape_str(per_sample) + " for a batch of N (or " + shape_str(per_sample) +
              " for one sample)");
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

NpyInputs read_npy_inputs(const Options& options, const Model& model) {
  const std::vector<TensorInfo>& infos = model.inputs();
  if (!options.inputs.empty() && options.inputs.size() != infos.size())
    throw Error("model '" + options.model + "' has " + std::to_string(infos.size()) + " input(s), " +
                std::to_string(options.inputs.size()) + " --input file(s) given");
  // The inputs whose leading size is the batch: those with a leading -1, or all when none has one.
  bool any_free = false;
  for (const TensorInfo& info : infos) any_free |= !info.shape.empty() && info.shape[0] == -1;
  NpyInputs npy;
  npy.tensors.resize(options.inputs.size());
  std::string batch_from;
  for (size_t i = 0; i < options.inputs.size(); ++i) {
    const std::string& path = options.inputs[i];
    if (!has_npy_extension(path)) continue;
    npy.tensors[i] = input_from_npy(path, infos[i]);
    if (any_free && infos[i].shape[0] != -1) continue;
    const int64_t batch = npy.tensors[i]->shape[0];
    if (npy.batch && batch != npy.batch)
      throw Error(fmt::format("input '{}' holds a batch of {} but input '{}' one of {}: the .npy inputs give "
                              "the session one batch", path, batch, batch_from, npy.batch));
    npy.batch = batch;
    batch_from = path;
  }
  if (options.batch > 0 && npy.batch > 0 && options.batch != npy.batch)
    throw Error(fmt::format("--batch {} but input '{}' holds a batch of {} (a .npy input's batch is the "
                            "session's; --batch is for random and image inputs)",
                            options.batch, batch_from, npy.batch));
  return npy;
}

std::vector<Tensor> make_inputs(const Options& options, const AppMetadata& meta, const Session& session,
                                NpyInputs npy) {
  const std::vector<TensorInfo>& infos = session.inputs();
  std::vector<Tensor> inputs;

  if (!options.inputs.empty()) {
    for (size_t i = 0; i < infos.size(); ++i) {
      const std::string& path = options.inputs[i];
      inputs.push_back(npy.tensors.at(i) ? std::move(*npy.tensors[i]) : input_from_image(path, infos[i], meta));
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
