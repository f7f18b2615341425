// Parsing of the model metadata the apps use (docs/format.md). Values are strict: a number list must be
// numbers separated by commas, a size two positive integers; anything else is an infer::Error naming
// the file and the key, because a silently ignored mean or range would give plausible wrong results.
#include <spdlog/spdlog.h>

#include <cerrno>
#include <cmath>
#include <cstdlib>

#include "app_metadata.h"
#include "infer/error.h"

namespace infer::cli {
namespace {

std::string trim(const std::string& s) {
  size_t b = s.find_first_not_of(" \t\r\n");
  if (b == std::string::npos) return "";
  size_t e = s.find_last_not_of(" \t\r\n");
  return s.substr(b, e - b + 1);
}

std::vector<std::string> split(const std::string& s, char sep) {
  std::vector<std::string> parts;
  size_t start = 0;
  while (true) {
    size_t end = s.find(sep, start);
    parts.push_back(s.substr(start, end == std::string::npos ? std::string::npos : end - start));
    if (end == std::string::npos) break;
    start = end + 1;
  }
  return parts;
}

class MetaReader {
 public:
  MetaReader(const Model& model, const std::string& path) : model_(model), path_(path) {}

  bool has(const std::string& key) const { return model_.metadata().count(key) != 0; }
  std::string get(const std::string& key) const { return model_.meta(key); }

  [[noreturn]] void bad(const std::string& key, const std::string& expected) const {
    throw Error("model '" + path_ + "': metadata '" + key + "' must be " + expected + ", got '" +
                get(key) + "'");
  }

  std::vector<double> numbers(const std::string& key) const {
    std::vector<double> values;
    for (const std::string& part : split(get(key), ',')) {
      const std::string text = trim(part);
      char* end = nullptr;
      errno = 0;
      double v = text.empty() ? 0 : std::strtod(text.c_str(), &end);
      if (text.empty() || *end != '\0' || errno == ERANGE || !std::isfinite(v))
        bad(key, "comma-separated numbers");
      values.push_back(v);
    }
    return values;
  }

 private:
  const Model& model_;
  const std::string& path_;
};

}  // namespace

AppMetadata read_metadata(const Model& model, const std::string& path) {
  const MetaReader m(model, path);
  AppMetadata meta;

  if (m.has("task")) {
    meta.task = trim(m.get("task"));
    if (meta.task != "classifier" && meta.task != "generator") {
      spdlog::warn("model '{}': unknown task '{}' (expected classifier or generator); ignoring it", path,
                   meta.task);
      meta.task.clear();
    }
  }

  if (m.has("labels")) {
    meta.labels = split(m.get("labels"), '\n');
    for (auto& label : meta.labels)
      if (!label.empty() && label.back() == '\r') label.pop_back();
    if (!meta.labels.empty() && meta.labels.back().empty()) meta.labels.pop_back();  // final newline
  }

  for (const char* key : {"input.mean", "input.std"}) {
    if (!m.has(key)) continue;
    std::vector<float>& dst = std::string(key) == "input.mean" ? meta.mean : meta.std;
    for (double v : m.numbers(key)) dst.push_back(float(v));
  }
  for (float s : meta.std)
    if (s == 0) m.bad("input.std", "non-zero numbers");

  if (m.has("input.size")) {
    std::vector<double> hw = m.numbers("input.size");
    if (hw.size() != 2) m.bad("input.size", "\"H,W\"");
    for (double v : hw)
      if (v < 1 || v > 65536 || v != std::floor(v)) m.bad("input.size", "two positive integers \"H,W\"");
    meta.input_size = std::make_pair(int64_t(hw[0]), int64_t(hw[1]));
  }

  if (m.has("output.range")) {
    std::vector<double> range = m.numbers("output.range");
    if (range.size() != 2 || !(range[0] < range[1])) m.bad("output.range", "\"lo,hi\" with lo < hi");
    meta.range_lo = float(range[0]);
    meta.range_hi = float(range[1]);
    if (!(meta.range_lo < meta.range_hi)) m.bad("output.range", "\"lo,hi\" with lo < hi");
  }

  if (m.has("latent.dim")) {
    std::vector<double> dim = m.numbers("latent.dim");
    if (dim.size() != 1 || dim[0] < 1 || dim[0] > 1e9 || dim[0] != std::floor(dim[0]))
      m.bad("latent.dim", "a positive integer");
    meta.latent_dim = int64_t(dim[0]);
  }
  return meta;
}

}  // namespace infer::cli
