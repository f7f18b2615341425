// The plan cache (plan_cache.h): a JSON file {"format": "infer-plan-cache", "version": 1, "plans":
// [{"key", "about", "default_ms", "tuned_ms", "variants": {node: variant}}]} read and written with
// nlohmann-json. Writes go to FILE.tmp and are renamed over FILE, so a crash never leaves half a file;
// a file that is not a plan cache is never overwritten.
#include "plan_cache.h"

#include <cstdio>
#include <filesystem>
#include <fstream>
#include <sstream>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "infer/error.h"
#include "infer/version.h"

namespace infer::detail {
namespace {

constexpr const char* kFormat = "infer-plan-cache";
constexpr int kVersion = 1;

uint64_t fnv1a(const std::string& s) {
  uint64_t h = 1469598103934665603ull;
  for (unsigned char c : s) {
    h ^= c;
    h *= 1099511628211ull;
  }
  return h;
}

std::string shapes_str(const std::vector<Shape>& shapes) {
  std::string out;
  for (const Shape& s : shapes) out += shape_str(s) + ";";
  return out;
}

// The file's JSON, or nullopt when it does not exist; an Error when it is not a plan cache.
std::optional<nlohmann::json> read_cache(const std::string& path) {
  std::error_code ec;
  if (!std::filesystem::exists(path, ec)) return std::nullopt;
  std::ifstream in(path, std::ios::binary);
  if (!in) throw Error("plan cache " + path + ": cannot be read");
  nlohmann::json j = nlohmann::json::parse(in, nullptr, /*allow_exceptions=*/false);
  if (j.is_discarded()) throw Error("plan cache " + path + ": not JSON (not a file --plan-cache wrote)");
  if (!j.is_object() || j.value("format", "") != kFormat || !j.contains("plans") || !j["plans"].is_array())
    throw Error("plan cache " + path + ": not an infer plan cache (no \"format\": \"" + kFormat + "\")");
  if (j.value("version", 0) != kVersion)
    throw Error(fmt::format("plan cache {}: version {}, this build reads version {}", path,
                            j.value("version", 0), kVersion));
  return j;
}

}  // namespace

std::string plan_key(const Graph& graph, const std::vector<NodeDesc>& descs, const PlanKeyParts& parts) {
  std::ostringstream s;
  s << "infer " << version() << "|" << parts.backend << "|" << parts.device << "|"
    << precision_name(parts.precision) << "|" << parts.batch << "|" << parts.cpu_isa << "|";
  for (const auto& [k, v] : parts.forced) s << k << "=" << v << ",";
  for (size_t i = 0; i < graph.nodes.size() && i < descs.size(); ++i)
    s << "\n" << graph.nodes[i].name << "|" << op_name(graph.nodes[i].op()) << "|"
      << layout_name(descs[i].layout) << "|" << shapes_str(descs[i].input_shapes) << "|"
      << shapes_str(descs[i].output_shapes);
  return fmt::format("{:016x}", fnv1a(s.str()));
}

std::optional<CachedPlan> load_plan(const std::string& path, const std::string& key) {
  std::optional<nlohmann::json> j = read_cache(path);
  if (!j) return std::nullopt;
  for (const nlohmann::json& e : (*j)["plans"]) {
    if (!e.is_object() || e.value("key", "") != key) continue;
    CachedPlan plan;
    plan.key = key;
    plan.default_ms = e.value("default_ms", 0.0);
    plan.tuned_ms = e.value("tuned_ms", 0.0);
    if (!e.contains("variants") || !e["variants"].is_object())
      throw Error("plan cache " + path + ": entry " + key + " has no \"variants\" object");
    for (const auto& [node, variant] : e["variants"].items()) {
      if (!variant.is_string())
        throw Error("plan cache " + path + ": entry " + key + ", node '" + node + "': variant is not a string");
      plan.variants[node] = variant.get<std::string>();
    }
    return plan;
  }
  return std::nullopt;
}

void save_plan(const std::string& path, const CachedPlan& plan, const std::map<std::string, std::string>& about) {
  nlohmann::json j = read_cache(path).value_or(
      nlohmann::json{{"format", kFormat}, {"version", kVersion}, {"plans", nlohmann::json::array()}});
  nlohmann::json entry{{"key", plan.key}, {"about", about}, {"default_ms", plan.default_ms},
                       {"tuned_ms", plan.tuned_ms}, {"variants", plan.variants}};
  nlohmann::json plans = nlohmann::json::array();
  for (nlohmann::json& e : j["plans"])
    if (!(e.is_object() && e.value("key", "") == plan.key)) plans.push_back(std::move(e));
  plans.push_back(std::move(entry));
  j["plans"] = std::move(plans);
  const std::string tmp = path + ".tmp";
  {
    std::ofstream out(tmp, std::ios::binary | std::ios::trunc);
    if (!out) throw Error("plan cache " + path + ": cannot write " + tmp);
    out << j.dump(1) << "\n";
    if (!out.flush()) throw Error("plan cache " + path + ": cannot write " + tmp);
  }
  std::error_code ec;
  std::filesystem::rename(tmp, path, ec);
  if (ec) {
    const std::string why = ec.message();
    std::filesystem::remove(tmp, ec);
    throw Error("plan cache " + path + ": cannot replace it (" + why + ")");
  }
}

}  // namespace infer::detail
