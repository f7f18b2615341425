// What the CLI does with a session's outputs: a generator's images become one PNG grid, every other
// output a .npy file (several outputs: <out>_<index>.<ext>), staged until the command succeeded; a classifier's top-5 classes are printed
// per batch row, with softmax applied unless the model already ends in one.
#include <fmt/core.h>

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <numeric>

#include "cli.h"
#include "image_io.h"
#include "npy.h"

namespace infer::cli {
namespace fs = std::filesystem;

std::string output_path(const std::string& out, size_t index, size_t count) {
  if (count <= 1) return out;
  const fs::path p(out);
  fs::path name = p.stem();
  name += "_" + std::to_string(index);
  name += p.extension();
  return (p.parent_path() / name).string();
}

bool is_image_output(const Options& options, const AppMetadata& meta, const TensorInfo& info) {
  // --out x.npy asks for a generator's raw values instead of a picture.
  const std::string ext = fs::path(options.out).extension().string();
  return meta.task == "generator" && info.shape.size() == 4 &&
         (info.shape[1] == 1 || info.shape[1] == 3) && ext != ".npy" && ext != ".NPY";
}

std::vector<std::string> stage_outputs(const Options& options, const AppMetadata& meta,
                                       const Session& session, const std::vector<Tensor>& outputs,
                                       StagedWrites& files) {
  std::vector<std::string> lines;
  for (size_t i = 0; i < outputs.size(); ++i) {
    const std::string path = output_path(options.out, i, outputs.size());
    const TensorInfo& info = session.outputs()[i];
    if (is_image_output(options, meta, info)) {
      files.add(path, encode_png_grid(outputs[i], meta.range_lo, meta.range_hi));
      const GridLayout g = grid_layout(info.shape[0], info.shape[2], info.shape[3]);
      lines.push_back(fmt::format("wrote {}: {} image(s) {}x{}x{} as a {}x{} grid, values {},{} -> 0..255",
                                  path, info.shape[0], info.shape[1], info.shape[2], info.shape[3],
                                  g.rows, g.columns, meta.range_lo, meta.range_hi));
    } else {
      files.add(path, encode_npy(outputs[i]));
      lines.push_back(fmt::format("wrote {}: output '{}' {}", path, info.name, shape_str(outputs[i].shape)));
    }
  }
  return lines;
}

void print_top5(const AppMetadata& meta, const Session& session, const std::vector<Tensor>& outputs) {
  // Softmax is the model's last node when it already outputs probabilities.
  const bool has_softmax = !session.nodes().empty() && session.nodes().back().op == "softmax";
  for (size_t o = 0; o < outputs.size(); ++o) {
    const Tensor& out = outputs[o];
    if (out.shape.size() != 2 || out.shape[1] < 1) {
      fmt::print("output '{}' {}: not [batch, classes], no top-5\n", session.outputs()[o].name,
                 shape_str(out.shape));
      continue;
    }
    const int64_t rows = out.shape[0], classes = out.shape[1];
    if (!meta.labels.empty() && int64_t(meta.labels.size()) != classes)
      fmt::print("note: the model has {} labels for {} classes; unlabelled classes show their index\n",
                 meta.labels.size(), classes);
    for (int64_t r = 0; r < rows; ++r) {
      const float* logits = out.data.data() + r * classes;
      std::vector<double> prob(logits, logits + classes);
      if (!has_softmax) {
        double peak = -HUGE_VAL;
        for (double p : prob)
          if (p > peak) peak = p;  // NaN never compares greater, so it cannot become the peak
        if (!std::isfinite(peak)) peak = 0;
        double sum = 0;
        for (double& p : prob) sum += (p = std::exp(p - peak));
        for (double& p : prob) p /= sum;
      }
      std::vector<int64_t> order(static_cast<size_t>(classes));
      std::iota(order.begin(), order.end(), 0);
      const size_t k = std::min<size_t>(5, order.size());
      // Highest probability first, ties by class index; NaN ranks last (and keeps the order strict).
      auto key = [&](int64_t c) { return std::isnan(prob[c]) ? -HUGE_VAL : prob[c]; };
      std::partial_sort(order.begin(), order.begin() + k, order.end(), [&](int64_t a, int64_t b) {
        return key(a) > key(b) || (key(a) == key(b) && a < b);
      });
      fmt::print("row {}: top-{}{}\n", r, k, outputs.size() > 1 ? " of output " + std::to_string(o) : "");
      for (size_t i = 0; i < k; ++i) {
        const int64_t c = order[i];
        // "label (index)", or just the index when there is no label or the label is the index.
        std::string label = std::to_string(c);
        if (size_t(c) < meta.labels.size() && !meta.labels[c].empty() && meta.labels[c] != label)
          label = meta.labels[c] + " (" + label + ")";
        fmt::print("  {}. {:<24} {:.4f}\n", i + 1, label, prob[c]);
      }
    }
  }
}

void print_summary(const Session& session, const std::vector<Tensor>& outputs) {
  for (size_t i = 0; i < outputs.size(); ++i) {
    fmt::print("output '{}' {}:", session.outputs()[i].name, shape_str(outputs[i].shape));
    for (size_t j = 0; j < outputs[i].data.size() && j < 8; ++j) fmt::print(" {:.5g}", outputs[i].data[j]);
    fmt::print("{}\n", outputs[i].data.size() > 8 ? " ..." : "");
  }
}

}  // namespace infer::cli
