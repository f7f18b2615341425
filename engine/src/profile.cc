// Profile's three renderings: table() in the style of TFLite's benchmark_model (run order, top by
// time, summary by op, totals, memory), json() with every field, and chrome_trace() with one complete
// ("X") event per node for ui.perfetto.dev / chrome://tracing. Pure formatting: no measurement here.
#include "infer/profile.h"

#include <algorithm>
#include <map>
#include <numeric>
#include <string>
#include <vector>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

namespace infer {
namespace {

// A text table whose columns are as wide as their widest cell; numbers right-aligned.
class TextTable {
 public:
  struct Column {
    std::string header;
    bool right = true;
  };
  explicit TextTable(std::vector<Column> columns) : columns_(std::move(columns)) {}
  void add(std::vector<std::string> row) { rows_.push_back(std::move(row)); }

  std::string str() const {
    std::vector<size_t> width(columns_.size());
    for (size_t c = 0; c < columns_.size(); ++c) width[c] = columns_[c].header.size();
    for (const auto& row : rows_)
      for (size_t c = 0; c < row.size() && c < width.size(); ++c)
        width[c] = std::max(width[c], row[c].size());
    std::string out;
    auto line = [&](const std::vector<std::string>& cells) {
      std::string text;
      for (size_t c = 0; c < columns_.size(); ++c) {
        const std::string cell = c < cells.size() ? cells[c] : "";
        if (c) text += "  ";
        text += columns_[c].right ? fmt::format("{:>{}}", cell, width[c])
                                  : fmt::format("{:<{}}", cell, width[c]);
      }
      while (!text.empty() && text.back() == ' ') text.pop_back();
      out += text + "\n";
    };
    std::vector<std::string> headers;
    for (const Column& c : columns_) headers.push_back(c.header);
    line(headers);
    for (const auto& row : rows_) line(row);
    return out;
  }

 private:
  std::vector<Column> columns_;
  std::vector<std::vector<std::string>> rows_;
};

std::string section(const std::string& title) {
  return fmt::format("\n============================== {} ==============================\n", title);
}

// Rate in units per second (giga) from an amount and a time in ms; 0 when the time is not positive.
double giga_per_s(double amount, double ms) { return ms > 0 ? amount / ms / 1e6 : 0.0; }

double percent(double part, double whole) { return whole > 0 ? 100.0 * part / whole : 0.0; }

std::string kib(uint64_t bytes) { return fmt::format("{:.1f}", static_cast<double>(bytes) / 1024.0); }

std::string mib(uint64_t bytes) {
  return fmt::format("{:.2f}", static_cast<double>(bytes) / (1024.0 * 1024.0));
}

std::string join(const std::vector<std::string>& parts, const char* sep) {
  std::string out;
  for (const std::string& p : parts) out += (out.empty() ? "" : sep) + p;
  return out;
}

}  // namespace

std::string Profile::table() const {
  double sum_ms = 0, sum_flops = 0, sum_bytes = 0;
  for (const NodeProfile& n : nodes) {
    sum_ms += n.time_ms;
    sum_flops += n.flops;
    sum_bytes += n.bytes;
  }

  std::string out = fmt::format(
      "Profile of '{}' on {}: batch {}, {} run(s), median run {:.3f} ms, {} node(s)\n", model,
      backend, batch, runs, total_ms, nodes.size());
  if (!device.empty()) out += fmt::format("Device: {}, precision {}\n", device, precision);

  out += section("Run order");
  TextTable order({{"node", false}, {"op", false}, {"variant", false}, {"act", false},
                   {"layout", false}, {"isa", false}, {"output", false}, {"time ms"}, {"%"}, {"cum %"}, {"MFLOPs"}, {"GFLOP/s"},
                   {"GB/s"}, {"live KiB"}, {"ws KiB"}, {"fused", false}});
  double cumulative = 0;
  for (const NodeProfile& n : nodes) {
    cumulative += n.time_ms;
    order.add({n.name, n.op, n.variant, n.activation, n.layout, n.isa.empty() ? "-" : n.isa, shape_str(n.output_shape),
               fmt::format("{:.4f}", n.time_ms), fmt::format("{:.2f}", percent(n.time_ms, sum_ms)),
               fmt::format("{:.2f}", percent(cumulative, sum_ms)),
               fmt::format("{:.3f}", n.flops / 1e6),
               fmt::format("{:.2f}", giga_per_s(n.flops, n.time_ms)),
               fmt::format("{:.2f}", giga_per_s(n.bytes, n.time_ms)), kib(n.live_bytes),
               kib(n.workspace_bytes), join(n.fused, "+")});
  }
  out += order.str();

  if (!passes.empty()) {  // what the graph passes did to produce the nodes above
    out += section("Graph passes");
    for (const std::string& line : passes) out += line + "\n";
  }

  out += section("Top by time");
  std::vector<size_t> by_time(nodes.size());
  std::iota(by_time.begin(), by_time.end(), size_t{0});
  std::stable_sort(by_time.begin(), by_time.end(),
                   [&](size_t a, size_t b) { return nodes[a].time_ms > nodes[b].time_ms; });
  if (by_time.size() > 10) by_time.resize(10);
  TextTable top({{"node", false}, {"op", false}, {"variant", false}, {"time ms"}, {"%"},
                 {"GFLOP/s"}, {"GB/s"}});
  for (size_t i : by_time) {
    const NodeProfile& n = nodes[i];
    top.add({n.name, n.op, n.variant, fmt::format("{:.4f}", n.time_ms),
             fmt::format("{:.2f}", percent(n.time_ms, sum_ms)),
             fmt::format("{:.2f}", giga_per_s(n.flops, n.time_ms)),
             fmt::format("{:.2f}", giga_per_s(n.bytes, n.time_ms))});
  }
  out += top.str();

  out += section("Summary by op");
  struct OpSum {
    int count = 0;
    double ms = 0, flops = 0;
    size_t first_seen = 0;
  };
  std::map<std::string, OpSum> ops;
  for (size_t i = 0; i < nodes.size(); ++i) {
    auto [it, inserted] = ops.try_emplace(nodes[i].op);
    if (inserted) it->second.first_seen = i;
    it->second.count += 1;
    it->second.ms += nodes[i].time_ms;
    it->second.flops += nodes[i].flops;
  }
  std::vector<std::pair<std::string, OpSum>> op_rows(ops.begin(), ops.end());
  std::stable_sort(op_rows.begin(), op_rows.end(), [](const auto& a, const auto& b) {
    if (a.second.ms != b.second.ms) return a.second.ms > b.second.ms;
    return a.second.first_seen < b.second.first_seen;
  });
  TextTable by_op({{"op", false}, {"count"}, {"time ms"}, {"%"}, {"MFLOPs"}, {"GFLOP/s"}});
  for (const auto& [op, s] : op_rows)
    by_op.add({op, std::to_string(s.count), fmt::format("{:.4f}", s.ms),
               fmt::format("{:.2f}", percent(s.ms, sum_ms)), fmt::format("{:.3f}", s.flops / 1e6),
               fmt::format("{:.2f}", giga_per_s(s.flops, s.ms))});
  out += by_op.str();

  out += section("Totals");
  out += fmt::format("nodes: {}   sum of node medians: {:.4f} ms   median run: {:.4f} ms\n",
                     nodes.size(), sum_ms, total_ms);
  out += fmt::format("MFLOPs: {:.3f}   GFLOP/s: {:.2f}   MB moved: {:.3f}   GB/s: {:.2f}\n",
                     sum_flops / 1e6, giga_per_s(sum_flops, sum_ms), sum_bytes / 1e6,
                     giga_per_s(sum_bytes, sum_ms));

  out += section("Memory");
  TextTable mem({{"", false}, {"bytes"}, {"MiB"}});
  auto mem_row = [&](const char* what, uint64_t bytes) {
    mem.add({what, std::to_string(bytes), mib(bytes)});
  };
  mem_row("arena", memory.arena_bytes);
  mem_row("naive (one allocation each)", memory.naive_bytes);
  mem_row("lower bound (max live)", memory.lower_bound_bytes);
  mem_row("workspaces (in the arena)", memory.workspace_bytes);
  mem_row("weights", memory.weight_bytes);
  if (memory.prepared_bytes) mem_row("prepared weights (sub-kernels, fused filters)", memory.prepared_bytes);
  if (memory.device_total_bytes) {
    mem_row("device in use, peak (cudaMemGetInfo)", memory.device_peak_bytes);
    mem_row("device total", memory.device_total_bytes);
  }
  out += mem.str();
  return out;
}

std::string Profile::json() const {
  nlohmann::ordered_json j;
  j["model"] = model;
  j["backend"] = backend;
  j["device"] = device;
  j["precision"] = precision;
  j["batch"] = batch;
  j["runs"] = runs;
  j["total_ms"] = total_ms;
  j["passes"] = passes;
  nlohmann::ordered_json list = nlohmann::ordered_json::array();
  for (const NodeProfile& n : nodes) {
    nlohmann::ordered_json node;
    node["name"] = n.name;
    node["op"] = n.op;
    node["variant"] = n.variant;
    node["fused"] = n.fused;
    node["activation"] = n.activation;
    node["layout"] = n.layout;
    node["isa"] = n.isa;
    node["output_shape"] = n.output_shape;
    node["flops"] = n.flops;
    node["bytes"] = n.bytes;
    node["time_ms"] = n.time_ms;
    node["start_ms"] = n.start_ms;
    node["live_bytes"] = n.live_bytes;
    node["workspace_bytes"] = n.workspace_bytes;
    list.push_back(std::move(node));
  }
  j["nodes"] = std::move(list);
  j["memory"] = {{"arena_bytes", memory.arena_bytes},
                 {"naive_bytes", memory.naive_bytes},
                 {"lower_bound_bytes", memory.lower_bound_bytes},
                 {"workspace_bytes", memory.workspace_bytes},
                 {"weight_bytes", memory.weight_bytes},
                 {"prepared_bytes", memory.prepared_bytes},
                 {"device_peak_bytes", memory.device_peak_bytes},
                 {"device_total_bytes", memory.device_total_bytes}};
  // Node names come from model files: replace invalid UTF-8 rather than throw while printing.
  return j.dump(2, ' ', false, nlohmann::ordered_json::error_handler_t::replace);
}

std::string Profile::chrome_trace() const {
  using json = nlohmann::ordered_json;
  json events = json::array();
  events.push_back({{"name", "process_name"}, {"ph", "M"}, {"pid", 1}, {"tid", 1},
                    {"args", {{"name", fmt::format("infer {} ({}, batch {})", model, backend, batch)}}}});
  events.push_back({{"name", "thread_name"}, {"ph", "M"}, {"pid", 1}, {"tid", 1},
                    {"args", {{"name", "nodes"}}}});
  // Start and duration are medians taken independently, so consecutive events may overlap by a
  // hair; one thread's slices must not overlap in Perfetto, so a start never precedes the previous end.
  double previous_end_us = 0;
  for (const NodeProfile& n : nodes) {
    double ts = std::max(n.start_ms * 1000.0, previous_end_us);
    double dur = std::max(n.time_ms * 1000.0, 0.0);
    previous_end_us = ts + dur;
    events.push_back({{"name", n.name}, {"cat", n.op}, {"ph", "X"}, {"ts", ts}, {"dur", dur},
                      {"pid", 1}, {"tid", 1},
                      {"args", {{"variant", n.variant},
                                {"shape", shape_str(n.output_shape)},
                                {"layout", n.layout},
                                {"isa", n.isa},
                                {"fused", n.fused},
                                {"flops", n.flops}}}});
  }
  json trace = {{"traceEvents", std::move(events)}, {"displayTimeUnit", "ms"}};
  return trace.dump(1, ' ', false, json::error_handler_t::replace);
}

}  // namespace infer
