// Tests of Session::profile() and Profile's renderings (engine/src/profile.cc): one entry per node with
// positive medians, costs from the cost model, JSON that parses with every field, a Chrome trace with
// one complete event per node, and a table naming every node. No timing values are asserted.
#include <doctest/doctest.h>

#include <set>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "cost.h"
#include "infer/infer.h"
#include "test_util.h"

using namespace infer;
using infer::test::random_vector;

namespace {

// conv 2->3 k3 (relu fused) -> avgpool 2 -> flatten -> dense 12->5 -> softmax, on 2x6x6.
Model small_model() {
  ModelBuilder b("profiled");
  int x = b.input("image", {-1, 2, 6, 6});
  int w = b.constant("w", {3, 2, 3, 3}, random_vector(54, 1));
  Conv2DParams conv;
  conv.activation.kind = ActivationKind::Relu;
  int c = b.node("conv1", conv, {x, w});
  Pool2DParams pool;
  pool.kind = PoolKind::Average;
  int p = b.node("pool1", pool, {c});
  int f = b.node("flat", FlattenParams{}, {p});
  int dw = b.constant("dw", {5, 12}, random_vector(60, 2));
  int db = b.constant("db", {5}, random_vector(5, 3));
  int d = b.node("fc", DenseParams{}, {f, dw, db});
  int s = b.node("prob", SoftmaxParams{}, {d});
  b.output(s);
  return Model::from_bytes(b.finish(), "profiled.fb");
}

const std::vector<std::string> kNames = {"conv1", "pool1", "flat", "fc", "prob"};

}  // namespace

TEST_CASE("profile: one entry per node with positive medians and the cost model's counts") {
  SessionOptions options;
  options.backend = "cpu";  // "auto" would pick cuda on a GPU machine (test_cuda_models covers it)
  options.batch = 2;
  Session session(small_model(), options);
  Tensor x({2, 2, 6, 6}, random_vector(144, 4));
  Profile p = session.profile({x}, 5);

  CHECK(p.model == "profiled");
  CHECK(p.backend == "cpu");
  CHECK(p.batch == 2);
  CHECK(p.runs == 5);
  CHECK(p.total_ms > 0);
  REQUIRE(p.nodes.size() == kNames.size());
  double previous_start = -1;
  for (size_t i = 0; i < kNames.size(); ++i) {
    const NodeProfile& n = p.nodes[i];
    CAPTURE(n.name);
    CHECK(n.name == kNames[i]);
    CHECK(n.variant == session.nodes()[i].variant);
    CHECK(n.time_ms > 0);
    CHECK(n.start_ms >= 0);
    CHECK(n.start_ms >= previous_start);
    previous_start = n.start_ms;
    CHECK(n.bytes > 0);
    CHECK(n.live_bytes > 0);
  }
  // conv1: 2 samples x 3 out channels x 4x4 outputs x (2 in channels x 3x3) multiply-adds x 2.
  CHECK(p.nodes[0].flops == 2.0 * 3 * 4 * 4 * 2 * 9 * 2);
  CHECK(p.nodes[0].activation == "relu");
  CHECK(p.nodes[0].output_shape == Shape{2, 3, 4, 4});
  // bytes: x (2*2*6*6) + w (54) + y (2*3*4*4) floats.
  CHECK(p.nodes[0].bytes == 4.0 * (144 + 54 + 96));
  CHECK(p.nodes[1].flops == 2.0 * 3 * 2 * 2 * 4);  // one op per window element
  CHECK(p.nodes[2].flops == 0);                     // flatten moves bytes only
  CHECK(p.nodes[3].flops == 2.0 * 2 * 5 * 12);
  CHECK(p.nodes[3].activation == "none");
  // While conv1 runs, its input (576 B) and output (384 B) are live.
  CHECK(p.nodes[0].live_bytes == 576 + 384);
  CHECK(p.memory.arena_bytes == session.memory().arena_bytes);
  CHECK(p.memory.weight_bytes == 4 * (54 + 60 + 5));

  // Profiling does not disturb results.
  auto a = session.run({x});
  session.profile({x}, 1);
  CHECK(session.run({x})[0].data == a[0].data);
}

TEST_CASE("profile: json, chrome trace and table") {
  Session session(small_model());
  Profile p = session.profile({Tensor({1, 2, 6, 6}, random_vector(72, 5))}, 3);

  auto j = nlohmann::json::parse(p.json());
  for (const char* key : {"model", "backend", "batch", "runs", "total_ms", "nodes", "memory"})
    CHECK_MESSAGE(j.contains(key), key);
  CHECK(j["model"] == "profiled");
  CHECK(j["runs"] == 3);
  REQUIRE(j["nodes"].size() == kNames.size());
  for (const auto& n : j["nodes"])
    for (const char* key : {"name", "op", "variant", "fused", "activation", "output_shape", "flops",
                            "bytes", "time_ms", "start_ms", "live_bytes", "workspace_bytes"})
      CHECK_MESSAGE(n.contains(key), key);
  CHECK(j["nodes"][0]["name"] == "conv1");
  CHECK(j["nodes"][0]["output_shape"] == nlohmann::json::array({1, 3, 4, 4}));
  for (const char* key :
       {"arena_bytes", "naive_bytes", "lower_bound_bytes", "workspace_bytes", "weight_bytes"})
    CHECK_MESSAGE(j["memory"].contains(key), key);
  CHECK(j["memory"]["arena_bytes"] == session.memory().arena_bytes);

  auto trace = nlohmann::json::parse(p.chrome_trace());
  REQUIRE(trace.contains("traceEvents"));
  CHECK(trace["displayTimeUnit"] == "ms");
  std::set<std::string> complete, metadata;
  double previous_end = 0;
  for (const auto& e : trace["traceEvents"]) {
    if (e["ph"] == "M") metadata.insert(e["name"].get<std::string>());
    if (e["ph"] != "X") continue;
    complete.insert(e["name"].get<std::string>());
    CHECK(e["pid"] == 1);
    CHECK(e["tid"] == 1);
    CHECK(e["dur"].get<double>() > 0);
    CHECK(e["ts"].get<double>() >= previous_end);  // slices on one thread never overlap
    previous_end = e["ts"].get<double>() + e["dur"].get<double>();
    CHECK(e["args"].contains("variant"));
    CHECK(e["args"].contains("shape"));
    CHECK(e["args"].contains("flops"));
  }
  CHECK(complete == std::set<std::string>(kNames.begin(), kNames.end()));
  CHECK(metadata.count("process_name") == 1);
  CHECK(metadata.count("thread_name") == 1);

  std::string table = p.table();
  for (const std::string& name : kNames) CHECK_MESSAGE(table.find(name) != std::string::npos, name);
  for (const char* section : {"Run order", "Top by time", "Summary by op", "Totals", "Memory"})
    CHECK_MESSAGE(table.find(section) != std::string::npos, section);
  CHECK(table.find(std::to_string(p.memory.arena_bytes)) != std::string::npos);
}

TEST_CASE("profile: renderings of a hand-made profile") {
  Profile p;
  p.model = "m";
  p.backend = "cpu";
  p.runs = 1;
  p.total_ms = 3;
  NodeProfile a;
  a.name = "first";
  a.op = "conv2d";
  a.variant = "reference";
  a.activation = "relu";
  a.output_shape = {1, 8, 4, 4};
  a.flops = 2e6;
  a.bytes = 1e6;
  a.time_ms = 2;
  a.start_ms = 0;
  NodeProfile b = a;
  b.name = "second";
  b.op = "dense";
  b.time_ms = 1;
  b.start_ms = 1.9;  // overlaps `first` by 0.1 ms: the trace must push it back
  p.nodes = {a, b};

  std::string table = p.table();
  CHECK(table.find("66.67") != std::string::npos);   // first: 2 of 3 ms
  CHECK(table.find("100.00") != std::string::npos);  // cumulative
  CHECK(table.find("1x8x4x4") != std::string::npos);
  CHECK(table.find("1.00") != std::string::npos);    // 2e6 FLOPs in 2 ms = 1 GFLOP/s

  auto trace = nlohmann::json::parse(p.chrome_trace());
  std::vector<nlohmann::json> x;
  for (const auto& e : trace["traceEvents"])
    if (e["ph"] == "X") x.push_back(e);
  REQUIRE(x.size() == 2);
  CHECK(x[0]["ts"].get<double>() == 0);
  CHECK(x[0]["dur"].get<double>() == 2000);
  CHECK(x[1]["ts"].get<double>() == 2000);
  CHECK(x[1]["cat"] == "dense");
  CHECK(x[1]["args"]["shape"] == "1x8x4x4");

  // Cost model by hand for a stride-2 transposed conv (DCGAN layer 2, direct scatter form).
  NodeDesc t{ConvTranspose2DParams{}, {{1, 1024, 4, 4}, {1024, 512, 4, 4}}, {{1, 512, 8, 8}}, {}};
  CHECK(detail::node_cost(t).flops == 2.0 * 4 * 4 * 1024 * 512 * 4 * 4);

  // Standalone activations: activation_flops(kind) per element (cost.cc): the old kinds 1, the
  // compound ones one per operation of their formula, none (a copy) 0.
  const auto act_flops = [](ActivationKind kind) {
    ActivationParams ap;
    ap.activation = {kind, 0.f, 6.f};
    return detail::node_cost(NodeDesc{ap, {{2, 3, 4, 5}}, {{2, 3, 4, 5}}, {}}).flops;
  };
  CHECK(act_flops(ActivationKind::Relu) == 120);
  CHECK(act_flops(ActivationKind::Sigmoid) == 120);
  CHECK(act_flops(ActivationKind::Clip) == 2 * 120);
  CHECK(act_flops(ActivationKind::HardSigmoid) == 4 * 120);
  CHECK(act_flops(ActivationKind::HardSwish) == 5 * 120);
  CHECK(act_flops(ActivationKind::Silu) == 2 * 120);
  CHECK(act_flops(ActivationKind::Elu) == 3 * 120);
  CHECK(act_flops(ActivationKind::Exp) == 120);
  CHECK(act_flops(ActivationKind::None) == 0);
}
