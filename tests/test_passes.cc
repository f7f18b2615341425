// Graph passes (engine/src/passes.h): each pass on small built graphs (node lists, fused names,
// activations, folded constants, no dangling ids: validate_graph after every run), the cases where
// nothing may fuse, and numerics: a session with passes on equals one with passes off (rel err
// <= 1e-5, every output finite) on lenet5, dcgan, the non-fusing graphs and every zoo model. NaN
// poisoning of kernel outputs lives in the kernel tests; here two whole sessions are compared.
#include <doctest/doctest.h>

#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>

#include <fmt/format.h>
#include <fmt/ranges.h>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include "graph.h"
#include "infer/infer.h"
#include "infer/kernel.h"
#include "models/zoo.h"
#include "layout.h"
#include "kernels/reference/reference.h"
#include "passes.h"
#include "test_util.h"

using namespace infer;
using infer::test::random_vector;
using infer::test::rel_error;
using infer::test::pass_line;

namespace {

// "name:op" per node, e.g. {"conv:conv_pool2d", "fc:dense"}.
std::vector<std::string> node_list(const detail::Graph& g) {
  std::vector<std::string> out;
  for (const detail::Node& n : g.nodes) out.push_back(n.name + ":" + op_name(n.op()));
  return out;
}

std::vector<std::string> node_list(const Session& s) {
  std::vector<std::string> out;
  for (const NodeInfo& n : s.nodes()) out.push_back(n.name + ":" + n.op);
  return out;
}

const detail::Node& node_named(const detail::Graph& g, const std::string& name) {
  for (const detail::Node& n : g.nodes)
    if (n.name == name) return n;
  FAIL("no node named " << name);
  return g.nodes.front();
}

ActivationKind act_of(const detail::Node& n) { return fused_activation(n.params).kind; }

PassOptions all(bool on) {
  PassOptions p;
  p.set_all(on);
  return p;
}

detail::Graph passed(const Model& m, std::vector<std::string>* log = nullptr,
                     const PassOptions& options = {}) {
  detail::Graph g = detail::run_passes(m.graph(), options, log);
  detail::validate_graph(g);
  return g;
}

std::vector<Tensor> random_inputs(const Session& s, uint64_t seed) {
  std::vector<Tensor> in;
  for (const TensorInfo& t : s.inputs())
    in.emplace_back(t.shape, random_vector(static_cast<size_t>(shape_numel(t.shape)), seed++));
  return in;
}

// Runs the model with passes on and off on `backend` and compares every output.
void check_on_equals_off(const Model& m, const std::string& backend, int64_t batch = 1,
                         const std::vector<std::string>& expect_nodes = {}) {
  SessionOptions on, off;
  on.backend = off.backend = backend;
  on.batch = off.batch = batch;
  off.passes = all(false);
  Session fused(m, on), plain(m, off);
  if (!expect_nodes.empty()) {
    const std::string got = fmt::format("{}", fmt::join(node_list(fused), " "));
    CAPTURE(got);
    CHECK(node_list(fused) == expect_nodes);
  }
  CHECK(plain.nodes().size() == m.num_nodes());
  const std::vector<Tensor> in = random_inputs(plain, 7);
  const std::vector<Tensor> a = fused.run(in), b = plain.run(in);
  REQUIRE(a.size() == b.size());
  for (size_t k = 0; k < a.size(); ++k) {
    CAPTURE(k);
    CHECK(a[k].shape == b[k].shape);
    CHECK(infer::test::all_finite(a[k].data));
    CHECK(rel_error(a[k].data, b[k].data) <= 1e-5);
  }
}

std::vector<float> positive_vector(size_t n, uint64_t seed) { return random_vector(n, seed, 0.5f, 1.5f); }

// BatchNorm parameters [C] (scale, bias, mean, var) as constants; returns their ids.
std::vector<int> bn_params(ModelBuilder& b, const std::string& name, int64_t c, uint64_t seed) {
  return {b.constant(name + ".scale", {c}, random_vector(size_t(c), seed)),
          b.constant(name + ".bias", {c}, random_vector(size_t(c), seed + 1)),
          b.constant(name + ".mean", {c}, random_vector(size_t(c), seed + 2)),
          b.constant(name + ".var", {c}, positive_vector(size_t(c), seed + 3))};
}

int batchnorm(ModelBuilder& b, const std::string& name, int x, int64_t c, uint64_t seed,
              ActivationKind act = ActivationKind::None) {
  BatchNormParams p;
  p.epsilon = 1e-3f;
  p.activation.kind = act;
  std::vector<int> in = {x};
  for (int id : bn_params(b, name, c, seed)) in.push_back(id);
  return b.node(name, p, in);
}

int conv(ModelBuilder& b, const std::string& name, int x, int64_t cin, int64_t cout, int k, int pad,
         bool bias, uint64_t seed, ActivationKind act = ActivationKind::None) {
  Conv2DParams p;
  p.pad = {pad, pad, pad, pad};
  p.activation.kind = act;
  std::vector<int> in = {x, b.constant(name + ".w", {cout, cin, k, k},
                                       random_vector(size_t(cout * cin * k * k), seed))};
  if (bias) in.push_back(b.constant(name + ".b", {cout}, random_vector(size_t(cout), seed + 1)));
  return b.node(name, p, in);
}

int avgpool(ModelBuilder& b, const std::string& name, int x, int k, int stride, int pad = 0) {
  Pool2DParams p;
  p.kind = PoolKind::Average;
  p.kernel_h = p.kernel_w = k;
  p.stride_h = p.stride_w = stride;
  p.pad = {pad, pad, pad, pad};
  return b.node(name, p, {x});
}

int act(ModelBuilder& b, const std::string& name, int x, ActivationKind kind) {
  ActivationParams p;
  p.activation.kind = kind;
  return b.node(name, p, {x});
}

// The pass log line of pass `name` ("" when the session logged none).

}  // namespace

TEST_CASE("PassOptions: names, set by name, unknown names are errors") {
  CHECK(PassOptions::names() == std::vector<std::string>{"fold_batchnorm", "fuse_conv_avgpool",
                                                         "fuse_activation", "channels_last",
                                                         "fold_width", "fuse_conv_residual",
                                                         "fuse_squeeze_excite", "fuse_prelu",
                                                         "fuse_depthwise_pointwise",
                                                         "fuse_quantized_conv2d", "fuse_input_epilogue",
                                                         "quantized_activations", "fuse_quantized_add"});
  PassOptions p;
  CHECK(p.fuse_input_epilogue);
  p.apply("fuse_input_epilogue=off");
  CHECK_FALSE(p.enabled("fuse_input_epilogue"));
  p.set_all(true);
  CHECK(p.fuse_input_epilogue);
  for (const std::string& name : PassOptions::names()) CHECK(p.enabled(name));
  CHECK(p.fold_batchnorm);
  CHECK(p.fuse_conv_avgpool);
  CHECK(p.fuse_activation);
  CHECK(p.channels_last);
  CHECK(p.fold_width);
  p.set("fold_width", false);
  CHECK_FALSE(p.fold_width);
  CHECK_FALSE(p.enabled("fold_width"));
  CHECK(p.enabled("channels_last"));
  CHECK_FALSE(p.enabled("no_such_pass"));
  p.set("fuse_conv_avgpool", false);
  CHECK_FALSE(p.fuse_conv_avgpool);
  CHECK(p.fold_batchnorm);
  p.set_all(false);
  for (const std::string& name : PassOptions::names()) CHECK_FALSE(p.enabled(name));
  CHECK_FALSE(p.quantized_activations);
  CHECK_FALSE(p.fold_batchnorm);
  p.set("fold_batchnorm", true);
  CHECK(p.fold_batchnorm);
  CHECK_THROWS_WITH_AS(p.set("fuse_everything", false),
                       doctest::Contains("unknown graph pass 'fuse_everything'"), Error);
  // The CLIs' NAME=on|off form.
  PassOptions q;
  q.apply("fold_width=off");
  CHECK_FALSE(q.fold_width);
  q.apply("fold_width=on");
  CHECK(q.fold_width);
  CHECK_THROWS_WITH_AS(q.apply("fold_width"), doctest::Contains("expected NAME=off or NAME=on"), Error);
  CHECK_THROWS_WITH_AS(q.apply("fold_width=maybe"), doctest::Contains("expected NAME=off or NAME=on"), Error);
  CHECK_THROWS_WITH_AS(q.apply("nope=on"), doctest::Contains("unknown graph pass 'nope'"), Error);
}

TEST_CASE("fold_batchnorm: conv2d (no bias) + BN(relu) -> one conv2d with the BN's relu and a bias") {
  ModelBuilder b("conv_bn");
  int x = b.input("x", {-1, 3, 7, 7});
  int c = conv(b, "conv", x, 3, 5, 3, 1, false, 1);
  int y = batchnorm(b, "bn", c, 5, 10, ActivationKind::Relu);
  b.output(y);
  Model m = Model::from_bytes(b.finish(), "conv_bn.fb");
  const detail::Graph& original = m.graph();
  REQUIRE(original.values[1].name == "conv.w");
  const std::vector<float> weight_before(original.values[1].data, original.values[1].data + 5 * 3 * 9);

  std::vector<std::string> log;
  detail::Graph g = passed(m, &log);
  CHECK(node_list(g) == std::vector<std::string>{"conv:conv2d"});
  const detail::Node& n = g.nodes[0];
  CHECK(n.fused == std::vector<std::string>{"bn"});
  CHECK(act_of(n) == ActivationKind::Relu);
  REQUIRE(n.inputs.size() == 3);  // a bias was created
  CHECK(g.values[size_t(n.inputs[2])].shape == Shape{5});
  CHECK(g.values[size_t(n.outputs[0])].name == m.outputs()[0].name);  // output keeps its name
  // x, folded weight, folded bias, y: the old weight, BN parameters and the conv output are gone.
  CHECK(g.values.size() == 4);
  REQUIRE(log.size() == 3);
  CHECK(log[0] == "fold_batchnorm: 1 BatchNorm node folded into conv2d");
  CHECK(log[1] == "fuse_conv_avgpool: no conv2d + average pool pair to rewrite");
  CHECK(log[2] == "fuse_activation: no activation to fuse");
  // The model's (file-backed) weights are untouched.
  CHECK(std::memcmp(weight_before.data(), m.graph().values[1].data, weight_before.size() * 4) == 0);
  check_on_equals_off(m, "reference", 2, {"conv:conv2d"});
}

TEST_CASE("fold_batchnorm: conv_transpose2d with C_in != C_out (weight [C_in,C_out,KH,KW]) and dense") {
  ModelBuilder b("tconv_dense_bn");
  int x = b.input("z", {-1, 4, 3, 3});
  ConvTranspose2DParams tp;
  tp.stride_h = tp.stride_w = 2;
  tp.pad = {1, 1, 1, 1};
  int tw = b.constant("t.w", {4, 6, 4, 4}, random_vector(4 * 6 * 16, 3));
  int tb = b.constant("t.b", {6}, random_vector(6, 4));
  int t = b.node("tconv", tp, {x, tw, tb});
  t = batchnorm(b, "bn1", t, 6, 20);
  t = act(b, "relu1", t, ActivationKind::Relu);
  int f = b.node("flatten", FlattenParams{}, {t});
  const int64_t features = 6 * 6 * 6;
  int dw = b.constant("fc.w", {7, features}, random_vector(size_t(7 * features), 5));
  int d = b.node("fc", DenseParams{}, {f, dw});
  d = batchnorm(b, "bn2", d, 7, 30, ActivationKind::Tanh);
  b.output(d);
  Model m = Model::from_bytes(b.finish(), "tconv_dense_bn.fb");

  std::vector<std::string> log;
  detail::Graph g = passed(m, &log);
  CHECK(node_list(g) ==
        std::vector<std::string>{"tconv:conv_transpose2d", "flatten:flatten", "fc:dense"});
  CHECK(node_named(g, "tconv").fused == std::vector<std::string>{"bn1", "relu1"});
  CHECK(act_of(node_named(g, "tconv")) == ActivationKind::Relu);
  CHECK(node_named(g, "fc").fused == std::vector<std::string>{"bn2"});
  CHECK(act_of(node_named(g, "fc")) == ActivationKind::Tanh);
  CHECK(log[0] == "fold_batchnorm: 2 BatchNorm nodes folded into conv_transpose2d (1), dense (1)");
  CHECK(log[2] == "fuse_activation: 1 activation node fused into conv_transpose2d");
  check_on_equals_off(m, "reference", 3);

  SUBCASE("each pass can be switched off alone") {
    PassOptions no_fold;
    no_fold.fold_batchnorm = false;
    log.clear();
    detail::Graph h = passed(m, &log, no_fold);
    CHECK(log[0] == "fold_batchnorm: off");
    // relu1 fuses into bn1 instead; bn2 keeps its own tanh.
    CHECK(node_list(h) == std::vector<std::string>{"tconv:conv_transpose2d", "bn1:batchnorm",
                                                   "flatten:flatten", "fc:dense", "bn2:batchnorm"});
    CHECK(node_named(h, "bn1").fused == std::vector<std::string>{"relu1"});
    PassOptions no_act;
    no_act.fuse_activation = false;
    CHECK(node_list(passed(m, nullptr, no_act)).size() == 4);
    CHECK(node_list(passed(m, nullptr, all(false))) == node_list(m.graph()));
  }
}

TEST_CASE("fuse_conv_avgpool + fuse_activation: conv -> avgpool 2 -> tanh becomes one conv_pool2d") {
  ModelBuilder b("conv_pool");
  int x = b.input("x", {-1, 2, 9, 9});
  int c = conv(b, "conv", x, 2, 4, 3, 1, true, 1);
  int p = avgpool(b, "pool", c, 2, 2);  // 9 -> 4: the odd row and column are dropped
  int y = act(b, "tanh", p, ActivationKind::Tanh);
  b.output(y);
  Model m = Model::from_bytes(b.finish(), "conv_pool.fb");

  std::vector<std::string> log;
  detail::Graph g = passed(m, &log);
  REQUIRE(node_list(g) == std::vector<std::string>{"conv:conv_pool2d"});
  const auto& params = std::get<ConvPool2DParams>(g.nodes[0].params);
  CHECK(params.pool == 2);
  CHECK(params.conv.pad.top == 1);
  CHECK(params.conv.activation.kind == ActivationKind::Tanh);
  CHECK(g.nodes[0].fused == std::vector<std::string>{"pool", "tanh"});
  CHECK(log[1] == "fuse_conv_avgpool: 1 conv2d + average pool pair rewritten into conv_pool2d");
  CHECK(log[2] == "fuse_activation: 1 activation node fused into conv_pool2d");
  check_on_equals_off(m, "reference", 2);
}

TEST_CASE("grouped and dilated conv2d: BN folds per output channel, avgpool is not fused into them") {
  ModelBuilder b("grouped");
  int x = b.input("x", {-1, 4, 11, 11});
  Conv2DParams dw;  // depthwise with multiplier 2, no bias: BN folds, activation moves up
  dw.groups = 4;
  dw.pad = {1, 1, 1, 1};
  int c1 = b.node("dw", dw, {x, b.constant("dw.w", {8, 1, 3, 3}, random_vector(72, 1))});
  int n1 = batchnorm(b, "bn", c1, 8, 20, ActivationKind::Relu);
  Conv2DParams dil;  // grouped + dilated, then an average pool conv_pool2d cannot take
  dil.groups = 2;
  dil.dilation_h = dil.dilation_w = 2;
  dil.pad = {2, 2, 2, 2};
  int c2 = b.node("dil", dil, {n1, b.constant("dil.w", {6, 4, 3, 3}, random_vector(216, 2)),
                               b.constant("dil.b", {6}, random_vector(6, 3))});
  int p = avgpool(b, "pool", c2, 2, 2);
  b.output(p);
  Model m = Model::from_bytes(b.finish(), "grouped.fb");
  std::vector<std::string> log;
  detail::Graph g = passed(m, &log);
  CHECK(node_list(g) == std::vector<std::string>{"dw:conv2d", "dil:conv2d", "pool:pool2d"});
  CHECK(act_of(node_named(g, "dw")) == ActivationKind::Relu);
  CHECK(std::get<Conv2DParams>(node_named(g, "dw").params).groups == 4);
  CHECK(log[1] == "fuse_conv_avgpool: no conv2d + average pool pair to rewrite");
  check_on_equals_off(m, "reference", 2);
  check_on_equals_off(m, "cpu", 2);
}

TEST_CASE("grouped and dilated conv_transpose2d: BN folds per output channel of each group") {
  // weight [C_in, C_out/groups, KH, KW]: dim 1 is the channel within the group, so the BN scale of
  // output channel (ci / (C_in/G)) * (C_out/G) + c multiplies w[ci][c]
  ModelBuilder b("grouped_tconv");
  int x = b.input("x", {-1, 6, 5, 4});
  ConvTranspose2DParams g3;  // groups 3, two outputs each, dilated, no bias
  g3.groups = 3;
  g3.stride_h = g3.stride_w = 2;
  g3.dilation_h = 2;
  g3.pad = {1, 1, 1, 0};
  g3.output_padding_h = 1;
  int t1 = b.node("g3", g3, {x, b.constant("g3.w", {6, 2, 3, 3}, random_vector(108, 1))});
  int n1 = batchnorm(b, "bn1", t1, 6, 20, ActivationKind::Relu);
  ConvTranspose2DParams dw;  // depthwise-transposed with a bias
  dw.groups = 6;
  dw.stride_h = dw.stride_w = 2;
  dw.pad = {1, 1, 1, 1};
  int t2 = b.node("dw", dw, {n1, b.constant("dw.w", {6, 1, 4, 4}, random_vector(96, 2)),
                             b.constant("dw.b", {6}, random_vector(6, 3))});
  b.output(batchnorm(b, "bn2", t2, 6, 30));
  Model m = Model::from_bytes(b.finish(), "grouped_tconv.fb");
  std::vector<std::string> log;
  detail::Graph g = passed(m, &log);
  CHECK(node_list(g) == std::vector<std::string>{"g3:conv_transpose2d", "dw:conv_transpose2d"});
  CHECK(act_of(node_named(g, "g3")) == ActivationKind::Relu);
  CHECK(log[0] == "fold_batchnorm: 2 BatchNorm nodes folded into conv_transpose2d");
  check_on_equals_off(m, "reference", 2);
  check_on_equals_off(m, "cpu", 2);
}

TEST_CASE("fuse_activation: into dense, add and a BatchNorm that follows a pool (not foldable)") {
  ModelBuilder b("act_targets");
  int x = b.input("x", {-1, 3, 6, 6});
  Pool2DParams maxp;  // max 2x2
  int p = b.node("pool", maxp, {x});
  int n = batchnorm(b, "bn", p, 3, 40);  // after a pool: must not be folded
  n = act(b, "relu", n, ActivationKind::Relu);
  int s = b.node("add", AddParams{}, {n, p});
  s = act(b, "leaky", s, ActivationKind::LeakyRelu);
  int f = b.node("flatten", FlattenParams{}, {s});
  int dw = b.constant("fc.w", {5, 27}, random_vector(5 * 27, 9));
  int db = b.constant("fc.b", {5}, random_vector(5, 10));
  int d = b.node("fc", DenseParams{}, {f, dw, db});
  d = act(b, "sigmoid", d, ActivationKind::Sigmoid);
  b.output(d);
  Model m = Model::from_bytes(b.finish(), "act_targets.fb");

  std::vector<std::string> log;
  detail::Graph g = passed(m, &log);
  CHECK(node_list(g) == std::vector<std::string>{"pool:pool2d", "bn:batchnorm", "add:add",
                                                 "flatten:flatten", "fc:dense"});
  CHECK(act_of(node_named(g, "bn")) == ActivationKind::Relu);
  CHECK(act_of(node_named(g, "add")) == ActivationKind::LeakyRelu);
  CHECK(act_of(node_named(g, "fc")) == ActivationKind::Sigmoid);
  CHECK(log[0] == "fold_batchnorm: no BatchNorm to fold");
  CHECK(log[2] == "fuse_activation: 3 activation nodes fused into batchnorm (1), add (1), dense (1)");
  check_on_equals_off(m, "reference", 2);
}

// Issue 28 must 4: a PRelu whose slopes are one value ([1], or [C] all equal) becomes a LeakyRelu
// epilogue of the conv2d, conv_transpose2d or dense before it, so every variant of every backend runs
// it fused; a per-channel one (distinct slopes) stays a prelu node. Both compute what the unfused graph
// does on the reference and the cpu backend, in NCHW and where channels_last makes the graph NHWC.
TEST_CASE("fuse_activation: PRelu with one slope fuses as LeakyRelu into conv2d, conv_transpose2d, dense") {
  ModelBuilder b("prelu_fusion");
  int x = b.input("x", {-1, 3, 7, 6});
  int c1 = conv(b, "c1", x, 3, 5, 3, 1, true, 60);
  c1 = b.node("p1", PReluParams{}, {c1, b.constant("p1.slope", {1}, {0.25f})});
  int c2 = conv(b, "c2", c1, 5, 4, 3, 1, true, 62);
  c2 = b.node("p2", PReluParams{}, {c2, b.constant("p2.slope", {4}, {0.1f, 0.2f, -0.3f, 1.5f})});
  ConvTranspose2DParams tp;
  tp.stride_h = tp.stride_w = 2;
  tp.pad = {1, 1, 1, 1};
  int t = b.node("t", tp, {c2, b.constant("t.w", {4, 3, 4, 4}, random_vector(4 * 3 * 16, 64)),
                          b.constant("t.b", {3}, random_vector(3, 65))});
  t = b.node("p3", PReluParams{}, {t, b.constant("p3.slope", {3}, {0.5f, 0.5f, 0.5f})});
  int f = b.node("flatten", FlattenParams{}, {t});
  int d = b.node("fc", DenseParams{}, {f, b.constant("fc.w", {6, 3 * 14 * 12}, random_vector(6 * 3 * 14 * 12, 66))});
  d = b.node("p4", PReluParams{}, {d, b.constant("p4.slope", {6}, {0.1f, 0.2f, 0.3f, 0.4f, 0.5f, 0.6f})});
  b.output(d);
  Model m = Model::from_bytes(b.finish(), "prelu_fusion.fb");

  std::vector<std::string> log;
  detail::Graph g = passed(m, &log);
  CHECK(node_list(g) == std::vector<std::string>{"c1:conv2d", "c2:conv2d", "p2:prelu", "t:conv_transpose2d",
                                                 "flatten:flatten", "fc:dense", "p4:prelu"});
  const Activation a1 = fused_activation(node_named(g, "c1").params);
  CHECK(a1.kind == ActivationKind::LeakyRelu);
  CHECK(a1.alpha == 0.25f);
  const Activation a3 = fused_activation(node_named(g, "t").params);
  CHECK(a3.kind == ActivationKind::LeakyRelu);
  CHECK(a3.alpha == 0.5f);
  CHECK(act_of(node_named(g, "c2")) == ActivationKind::None);
  CHECK(act_of(node_named(g, "fc")) == ActivationKind::None);
  CHECK(log[2] == "fuse_activation: 2 activation nodes fused into conv2d (1), conv_transpose2d (1)");
  check_on_equals_off(m, "reference", 2);
  check_on_equals_off(m, "cpu", 3);
}

// Issue 28 must 4, the per-channel part: the fuse_prelu backend pass makes a PRelu with distinct
// slopes the per-channel PRelu epilogue of the conv2d / dense before it (slope as the last input, a
// zero bias added to a producer without one) where a variant of the session's backend that declares
// KernelVariant::fuses_prelu runs the merged node; the values are the unfused graph's on the reference
// and the cpu backend. Where --kernel forces a variant without the flag, or the producer's best
// variant does not fuse, the PRelu stays a node.
TEST_CASE("fuse_prelu: per-channel PRelu fuses into conv2d and dense where a variant applies it") {
  ModelBuilder b("prelu_channels");
  int x = b.input("x", {-1, 3, 9, 7});
  int c1 = conv(b, "c1", x, 3, 5, 3, 1, false, 70);  // no bias: the pass adds a zero one
  c1 = b.node("p1", PReluParams{}, {c1, b.constant("p1.slope", {5}, {0.1f, -0.2f, 0.f, 1.5f, 0.3f})});
  int c2 = conv(b, "c2", c1, 5, 4, 1, 0, true, 72);
  c2 = b.node("p2", PReluParams{}, {c2, b.constant("p2.slope", {4}, {0.25f, 0.5f, 0.75f, -1.f})});
  int f = b.node("flatten", FlattenParams{}, {c2});
  int d = b.node("fc", DenseParams{}, {f, b.constant("fc.w", {6, 4 * 9 * 7}, random_vector(6 * 4 * 9 * 7, 74)),
                                        b.constant("fc.b", {6}, random_vector(6, 75))});
  d = b.node("p3", PReluParams{}, {d, b.constant("p3.slope", {6}, {0.1f, 0.2f, 0.3f, 0.4f, 0.5f, 0.6f})});
  b.output(d);
  const Model m = Model::from_bytes(b.finish(), "prelu_channels.fb");

  for (const std::string backend : {"reference", "cpu"}) {
    CAPTURE(backend);
    SessionOptions o;
    o.backend = backend;
    Session s(m, o);
    CHECK(pass_line(s, "fuse_prelu") == "fuse_prelu: 3 per-channel PRelu nodes fused into conv2d (2), dense (1)");
    CHECK(node_list(s) == std::vector<std::string>{"c1:conv2d", "c2:conv2d", "flatten:flatten", "fc:dense"});
    CHECK(s.nodes()[0].fused == std::vector<std::string>{"p1"});
    SessionOptions off = o;
    off.passes.fuse_prelu = false;
    Session plain(m, off);
    CHECK(pass_line(plain, "fuse_prelu") == "fuse_prelu: off");
    CHECK(plain.nodes().size() == 7);
    const std::vector<Tensor> in = random_inputs(plain, 11);
    const std::vector<Tensor> a = s.run(in), e = plain.run(in);
    CHECK(infer::test::all_finite(a[0].data));
    CHECK(rel_error(a[0].data, e[0].data) <= 1e-5);
  }
  check_on_equals_off(m, "cpu", 2);

  // The graph pass with a predicate that takes only dense (as a backend whose conv2d variants declare
  // no prelu epilogue would): the conv2d PReLUs stay nodes.
  std::vector<std::string> log;
  detail::Graph g = detail::fuse_prelu(passed(m), [](const detail::Graph&, const detail::Node& n) {
    return n.op() == OpType::Dense;
  }, &log);
  CHECK(log.back() == "fuse_prelu: 1 per-channel PRelu node fused into dense");
  CHECK(node_list(g) == std::vector<std::string>{"c1:conv2d", "p1:prelu", "c2:conv2d", "p2:prelu",
                                                 "flatten:flatten", "fc:dense"});
  CHECK(g.values.size() == passed(m).values.size() - 1);  // the refused zero bias is compacted away
}

TEST_CASE("fuse_prelu: conv_transpose2d fuses only where its best variant applies the epilogue") {
  ModelBuilder b("prelu_tconv");
  int x = b.input("x", {1, 6, 5, 5});
  ConvTranspose2DParams tp;
  tp.stride_h = tp.stride_w = 2;
  tp.pad = {1, 1, 1, 1};
  int t = b.node("t", tp, {x, b.constant("t.w", {6, 4, 4, 4}, random_vector(6 * 4 * 16, 80)),
                          b.constant("t.b", {4}, random_vector(4, 81))});
  t = b.node("p", PReluParams{}, {t, b.constant("p.slope", {4}, {0.1f, -0.2f, 0.3f, 0.f})});
  b.output(t);
  const Model m = Model::from_bytes(b.finish(), "prelu_tconv.fb");
  // reference: fused. cpu: segregated_unified (no prelu epilogue) is the default at the CPU's own
  // level, so the PRelu stays a node there; forcing segregated_gemm (which has one) fuses it.
  SessionOptions ref;
  ref.backend = "reference";
  CHECK(node_list(Session(m, ref)) == std::vector<std::string>{"t:conv_transpose2d"});
  SessionOptions cpu;
  cpu.backend = "cpu";
  cpu.cpu_isa = cpu_isa_supported();
  Session top(m, cpu);
  CHECK(node_list(top) == std::vector<std::string>{"t:conv_transpose2d", "p:prelu"});
  CHECK(top.nodes()[0].variant == "segregated_unified");
  SessionOptions forced = cpu;
  forced.kernels = {{"conv_transpose2d", "segregated_gemm"}};
  Session f(m, forced);
  CHECK(node_list(f) == std::vector<std::string>{"t:conv_transpose2d"});
  CHECK(pass_line(f, "fuse_prelu") == "fuse_prelu: 1 per-channel PRelu node fused into conv_transpose2d");
  const std::vector<Tensor> in = random_inputs(top, 5);
  CHECK(rel_error(f.run(in)[0].data, top.run(in)[0].data) <= 1e-5);
}

// Issue 14 must 3: convolution + bias + any of the new activations. Every activation case of
// test_util.h (each kind; ReLU6 = Clip(0, 6); HardSigmoid with two parameter sets) fuses into conv2d,
// conv_transpose2d, conv_pool2d (after the pooling), add and dense with its alpha and beta, and the
// fused session computes what the unfused one does on the reference and the cpu backend.
TEST_CASE("fuse_activation: every activation kind into conv2d, conv_transpose2d, conv_pool2d, add, dense") {
  for (int i = 0; i < infer::test::kActivationCases; ++i) {
    const Activation a = infer::test::activation_case(i);
    if (a.kind == ActivationKind::None) continue;
    const std::string kind = activation_name(a.kind);
    CAPTURE(kind);
    CAPTURE(i);
    ModelBuilder b("acts");
    auto activation = [&](const std::string& name, int x) {
      ActivationParams p;
      p.activation = a;
      return b.node(name, p, {x});
    };
    // exp grows fast and sqrt needs x >= 0: an abs before sqrt, small weights before exp.
    const float scale = a.kind == ActivationKind::Exp ? 0.01f : 1.f;
    auto weight = [&](const std::string& name, Shape s, uint64_t seed) {
      std::vector<float> w = random_vector(size_t(shape_numel(s)), seed);
      for (float& v : w) v *= scale;
      return b.constant(name, s, w);
    };
    auto domain = [&](const std::string& name, int x) {
      if (a.kind != ActivationKind::Sqrt) return x;
      ActivationParams p;
      p.activation.kind = ActivationKind::Abs;
      return b.node(name, p, {x});
    };
    int x = b.input("x", {-1, 3, 8, 8});
    Conv2DParams cp;
    cp.pad = {1, 1, 1, 1};
    int c = b.node("conv1", cp, {x, weight("conv1.w", {4, 3, 3, 3}, 1), weight("conv1.b", {4}, 2)});
    c = activation("act1", domain("abs1", c));
    ConvTranspose2DParams tp;
    tp.stride_h = tp.stride_w = 2;
    tp.pad = {1, 1, 1, 1};
    int t = b.node("tconv", tp, {c, weight("tconv.w", {4, 3, 4, 4}, 3), weight("tconv.b", {3}, 4)});
    t = activation("act2", domain("abs2", t));
    int c2 = b.node("conv2", cp, {t, weight("conv2.w", {3, 3, 3, 3}, 5), weight("conv2.b", {3}, 6)});
    Pool2DParams avg;
    avg.kind = PoolKind::Average;
    int p = b.node("pool", avg, {c2});
    p = activation("act3", domain("abs3", p));
    int r = b.node("add", AddParams{}, {p, b.node("pool_x", avg, {t})});
    r = activation("act4", domain("abs4", r));
    int f = b.node("flatten", FlattenParams{}, {r});
    int d = b.node("fc", DenseParams{}, {f, weight("fc.w", {5, 3 * 8 * 8}, 7), weight("fc.b", {5}, 8)});
    d = activation("act5", domain("abs5", d));
    b.output(d);
    Model m = Model::from_bytes(b.finish(), "acts.fb");
    std::vector<std::string> log;
    detail::Graph g = passed(m, &log);
    if (a.kind != ActivationKind::Sqrt) {
      CHECK(node_list(g) == std::vector<std::string>{"conv1:conv2d", "tconv:conv_transpose2d", "conv2:conv_pool2d",
                                                     "pool_x:pool2d", "add:add", "flatten:flatten", "fc:dense"});
      CHECK(log[2] == "fuse_activation: 5 activation nodes fused into conv2d (1), conv_transpose2d (1), "
                      "conv_pool2d (1), add (1), dense (1)");
      for (const char* name : {"conv1", "tconv", "conv2", "add", "fc"}) {
        CAPTURE(name);
        const Activation got = fused_activation(node_named(g, name).params);
        CHECK(got.kind == a.kind);
        CHECK(got.alpha == a.alpha);
        CHECK(got.beta == a.beta);
      }
    }
    check_on_equals_off(m, "reference", 2);
    check_on_equals_off(m, "cpu", 3);
  }
}

TEST_CASE("no fusion where it would change the result or lose a tensor") {
  SUBCASE("conv output read twice") {
    ModelBuilder b("read_twice");
    int x = b.input("x", {-1, 2, 6, 6});
    int c = conv(b, "conv", x, 2, 2, 3, 1, true, 1);
    int r = act(b, "relu", c, ActivationKind::Relu);
    int q = avgpool(b, "pool", c, 2, 2);  // a second reader of conv's output
    int n = batchnorm(b, "bn", c, 2, 50);  // and a third
    int s = b.node("add", AddParams{}, {r, n});
    b.output(s);
    b.output(q);
    Model m = Model::from_bytes(b.finish(), "read_twice.fb");
    detail::Graph g = passed(m);
    CHECK(node_list(g) == node_list(m.graph()));
    check_on_equals_off(m, "reference", 2);
  }
  SUBCASE("average pool with padding, or with kernel != stride, or max pool") {
    ModelBuilder b("pool_kinds");
    int x = b.input("x", {-1, 2, 8, 8});
    int c1 = conv(b, "conv1", x, 2, 3, 3, 1, true, 1);
    int p1 = avgpool(b, "padded", c1, 2, 2, 1);
    int c2 = conv(b, "conv2", p1, 3, 3, 1, 0, true, 3);
    int p2 = avgpool(b, "overlap", c2, 3, 2);
    int c3 = conv(b, "conv3", p2, 3, 3, 1, 0, true, 5);
    Pool2DParams maxp;
    int p3 = b.node("max", maxp, {c3});
    b.output(p3);
    Model m = Model::from_bytes(b.finish(), "pool_kinds.fb");
    CHECK(node_list(passed(m)) == node_list(m.graph()));
    check_on_equals_off(m, "reference", 2);
  }
  SUBCASE("relu between conv and avgpool: the relu fuses, the pool stays") {
    ModelBuilder b("relu_pool");
    int x = b.input("x", {-1, 2, 8, 8});
    int c = conv(b, "conv", x, 2, 3, 3, 1, true, 1);
    int r = act(b, "relu", c, ActivationKind::Relu);
    int p = avgpool(b, "pool", r, 2, 2);
    b.output(p);
    Model m = Model::from_bytes(b.finish(), "relu_pool.fb");
    detail::Graph g = passed(m);
    CHECK(node_list(g) == std::vector<std::string>{"conv:conv2d", "pool:pool2d"});
    CHECK(act_of(g.nodes[0]) == ActivationKind::Relu);
    check_on_equals_off(m, "reference", 2);
  }
  SUBCASE("conv with a fused relu is neither folded with BN nor fused with a pool") {
    ModelBuilder b("conv_relu_bn");
    int x = b.input("x", {-1, 2, 8, 8});
    int c = conv(b, "conv", x, 2, 3, 3, 1, true, 1, ActivationKind::Relu);
    int n = batchnorm(b, "bn", c, 3, 60);
    int c2 = conv(b, "conv2", n, 3, 3, 3, 1, true, 2, ActivationKind::Relu);
    int p = avgpool(b, "pool", c2, 2, 2);
    b.output(p);
    Model m = Model::from_bytes(b.finish(), "conv_relu_bn.fb");
    CHECK(node_list(passed(m)) == node_list(m.graph()));
    check_on_equals_off(m, "reference", 2);
  }
  SUBCASE("an intermediate that is a graph output is kept") {
    ModelBuilder b("output_kept");
    int x = b.input("x", {-1, 2, 6, 6});
    int c = conv(b, "conv", x, 2, 2, 3, 1, false, 1);
    int n = batchnorm(b, "bn", c, 2, 70);
    int r = act(b, "relu", n, ActivationKind::Relu);
    b.output(c);
    b.output(r);
    Model m = Model::from_bytes(b.finish(), "output_kept.fb");
    detail::Graph g = passed(m);
    // bn cannot fold (conv's output is a graph output), but relu still fuses into bn.
    CHECK(node_list(g) == std::vector<std::string>{"conv:conv2d", "bn:batchnorm"});
    CHECK(g.values[size_t(g.outputs[0])].name == m.outputs()[0].name);
    CHECK(g.values[size_t(g.outputs[1])].name == m.outputs()[1].name);
    check_on_equals_off(m, "reference", 2);
  }
}

TEST_CASE("lenet5 and dcgan: the expected fused graphs, equal outputs on the reference backend") {
  const Model lenet = Model::from_bytes(zoo::build("lenet5").finish(), "lenet5.fb");
  check_on_equals_off(lenet, "reference", 2,
                      {"conv1:conv_pool2d", "conv2:conv_pool2d", "flatten:flatten", "fc1:dense",
                       "fc2:dense", "fc3:dense"});
  detail::Graph g = passed(lenet);
  CHECK(node_named(g, "conv1").fused == std::vector<std::string>{"pool1", "tanh1"});
  CHECK(act_of(node_named(g, "conv2")) == ActivationKind::Tanh);
  CHECK(act_of(node_named(g, "fc3")) == ActivationKind::None);

  const Model dcgan = Model::from_bytes(zoo::build("dcgan").finish(), "dcgan.fb");
  std::vector<std::string> log;
  g = passed(dcgan, &log);
  CHECK(log[0] == "fold_batchnorm: 4 BatchNorm nodes folded into conv_transpose2d");
  CHECK(log[2] == "fuse_activation: 5 activation nodes fused into conv_transpose2d");
  CHECK(node_named(g, "tconv2").fused == std::vector<std::string>{"bn2", "relu2"});
  CHECK(act_of(node_named(g, "tconv5")) == ActivationKind::Tanh);
  check_on_equals_off(dcgan, "reference", 1,
                      {"tconv1:conv_transpose2d", "tconv2:conv_transpose2d",
                       "tconv3:conv_transpose2d", "tconv4:conv_transpose2d",
                       "tconv5:conv_transpose2d"});
}

TEST_CASE("session and profile report what the passes did") {
  const Model lenet = Model::from_bytes(zoo::build("lenet5").finish(), "lenet5.fb");
  Session s(lenet, SessionOptions{});
  // Three graph passes, then the backend passes: channels_last keeps LeNet-5 NCHW on the cpu backend
  // (no depthwise convolution to switch at) and fold_width finds no folded kernel there. The cpu
  // backend logs fuse_depthwise_pointwise last (no other backend runs it).
  const bool cpu = s.backend() == "cpu";
  REQUIRE(s.passes().size() == (cpu ? 9u : 8u));
  if (cpu) CHECK(s.passes()[8] == "fuse_depthwise_pointwise: no depthwise + 1x1 conv2d pair to fuse");
  CHECK(s.passes()[5] == "fuse_conv_residual: no conv2d + residual add to fuse");
  CHECK(s.passes()[6] == "fuse_squeeze_excite: no squeeze-excitation block to fuse");
  CHECK(s.passes()[7] == "fuse_prelu: no per-channel PRelu to fuse");
  CHECK(s.passes()[3] == "channels_last: 0 node(s) run NHWC, 0 layout conversion(s)");
  CHECK(s.passes()[4] == "fold_width: no convolution width-folded");
  CHECK(s.nodes()[0].layout == Layout::NCHW);
  CHECK(s.passes()[1] == "fuse_conv_avgpool: 2 conv2d + average pool pairs rewritten into conv_pool2d");
  CHECK(s.nodes()[0].fused == std::vector<std::string>{"pool1", "tanh1"});
  const Profile p = s.profile(random_inputs(s, 3), 1);
  CHECK(p.passes == s.passes());
  CHECK(p.nodes[0].fused == std::vector<std::string>{"pool1", "tanh1"});
  const std::string table = p.table();
  CHECK(table.find("Graph passes") != std::string::npos);
  CHECK(table.find("pool1+tanh1") != std::string::npos);
  CHECK(p.json().find("\"passes\"") != std::string::npos);

  SessionOptions off;
  off.passes = all(false);
  Session plain(lenet, off);
  std::vector<std::string> all_off{"fold_batchnorm: off",    "fuse_conv_avgpool: off",   "fuse_activation: off",
                                   "channels_last: off",     "fold_width: off",          "fuse_conv_residual: off",
                                   "fuse_squeeze_excite: off", "fuse_prelu: off"};
  if (plain.backend() == "cpu") all_off.push_back("fuse_depthwise_pointwise: off");
  CHECK(plain.passes() == all_off);
  CHECK(plain.nodes().size() == lenet.num_nodes());
}

// Classifiers at small image sizes, generators at full size; backend "cpu" picks the fast kernels
// where they exist (the reference ones otherwise), so the fused kernels are exercised too.
TEST_CASE("every zoo model: passes on equal passes off") {
  for (const std::string& name : zoo::names()) {
    CAPTURE(name);
    zoo::ZooOptions options;
    if (name == "lenet5") options.image_size = 28;
    if (name == "alexnet") options.image_size = 63;
    if (name == "vgg11" || name == "vgg16") options.image_size = 32;
    const Model m = Model::from_bytes(zoo::build(name, options).finish(), name + ".fb");
    check_on_equals_off(m, "cpu");
  }
}

// The CLI switches: --no-fuse turns every pass off, --pass NAME=off|on one (after --no-fuse); bad
// names and states are usage errors (exit 1).
TEST_CASE("infer CLI: --no-fuse and --pass") {
  namespace fs = std::filesystem;
  const fs::path dir = fs::path(INFER_BINARY_DIR) / ("test_passes_tmp_" + std::to_string(::getpid()));
  fs::create_directories(dir);
  const std::string model = (dir / "lenet5.fb").string();
  zoo::build("lenet5").save(model);
  auto cli = [&](const std::string& args, std::string* out) {
    const std::string log = (dir / "out.txt").string();
    const std::string cmd =
        std::string(INFER_BIN) + " --model " + model + " " + args + " > " + log + " 2>&1";
    const int status = std::system(cmd.c_str());
    std::ifstream f(log);
    std::stringstream text;
    text << f.rdbuf();
    *out = text.str();
    return WIFEXITED(status) ? WEXITSTATUS(status) : -1;
  };
  std::string out;
  CHECK(cli("--backend reference --profile --runs 1", &out) == 0);
  CHECK(out.find("conv_pool2d") != std::string::npos);
  CHECK(out.find("pool1+tanh1") != std::string::npos);
  CHECK(cli("--backend reference --profile --runs 1 --no-fuse", &out) == 0);
  CHECK(out.find("conv_pool2d") == std::string::npos);
  CHECK(out.find("fuse_conv_avgpool: off") != std::string::npos);
  CHECK(cli("--backend reference --profile --runs 1 --no-fuse --pass fuse_activation=on", &out) == 0);
  CHECK(out.find("fuse_activation: 2 activation nodes fused into dense") != std::string::npos);
  CHECK(cli("--backend reference --profile --runs 1 --pass fuse_conv_avgpool=off", &out) == 0);
  CHECK(out.find("fuse_conv_avgpool: off") != std::string::npos);
  CHECK(out.find("fuse_activation: 2 activation nodes fused into dense") != std::string::npos);
  CHECK(cli("--pass bogus=off", &out) == 1);
  CHECK(out.find("unknown graph pass 'bogus'") != std::string::npos);
  CHECK(cli("--pass fold_batchnorm=maybe", &out) == 1);
  CHECK(out.find("expected NAME=off or NAME=on") != std::string::npos);
  fs::remove_all(dir);
}

// ResNet's basic block tail: conv -> (+ shortcut) -> relu. The add (with the relu fused into it) goes
// into the conv's GEMM on the cpu backend; the conv may be either input of the add, the merged node
// runs at the add's place, and a conv without bias gets a zero one. Not fused: a conv with its own activation, a conv
// read twice, a broadcasting add.
TEST_CASE("fuse_conv_residual: conv + residual add on cpu, same values, shown in the profile") {
  ModelBuilder b("resblock");
  const int x = b.input("x", {-1, 4, 7, 9});
  const int c1 = conv(b, "conv1", x, 4, 4, 3, 1, true, 1);  // shortcut added second
  int y = b.node("add1", AddParams{}, {c1, x});
  y = act(b, "relu1", y, ActivationKind::Relu);
  const int c2 = conv(b, "conv2", y, 4, 4, 3, 1, true, 3);
  const int sc = conv(b, "short", y, 4, 4, 1, 0, false, 5);  // no bias: gets a zero one
  BinaryParams badd;  // a binary add of equal shapes fuses too: the first input's conv takes the other
  int z = b.node("add2", badd, {sc, c2});
  const int c3 = conv(b, "conv3", z, 4, 4, 3, 1, true, 7, ActivationKind::Relu);  // own activation
  z = b.node("add3", AddParams{}, {c3, z});
  const int c4 = conv(b, "conv4", z, 4, 4, 1, 0, true, 9);
  const int g = b.constant("gate", {1, 4, 1, 1}, {1.f, 2.f, 3.f, 4.f});
  BinaryParams bc;  // broadcasting: not a residual
  z = b.node("add4", bc, {c4, g});
  b.output(z);
  const Model m = Model::from_bytes(b.finish(), "resblock.fb");

  for (const char* backend : {"cpu", "reference"}) {
    CAPTURE(backend);
    check_on_equals_off(m, backend, 3,
                        {"conv1:conv2d", "conv2:conv2d", "short:conv2d", "conv3:conv2d", "add3:add",
                         "conv4:conv2d", "add4:binary"});
  }
  SessionOptions cpu;
  cpu.backend = "cpu";  // the pass's backend (auto would pick cuda on a GPU machine)
  Session s(m, cpu);
  CHECK(s.passes()[5] == "fuse_conv_residual: 2 conv2d + residual add pairs fused");
  CHECK(s.nodes()[0].fused == std::vector<std::string>{"add1", "relu1"});
  CHECK(s.nodes()[0].variant == "im2col_gemm");
  CHECK(s.nodes()[2].fused == std::vector<std::string>{"add2"});
  const Profile prof = s.profile(random_inputs(s, 3), 1);
  CHECK(prof.table().find("add1+relu1") != std::string::npos);

  SessionOptions off = cpu;
  off.passes.fuse_conv_residual = false;
  Session plain(m, off);
  CHECK(plain.passes()[5] == "fuse_conv_residual: off");
  CHECK(plain.nodes().size() == 9);
  // The fused conv has no file form.
  Conv2DParams fused;
  fused.add_residual = true;
  ModelBuilder nb("n");
  const int nx = nb.input("x", {-1, 1, 3, 3});
  CHECK_THROWS_AS(nb.node("c", fused, {nx, nb.constant("w", {1, 1, 1, 1}, {1.f})}), Error);
}

// The channels_last pass on a generator: its latent z [N, 100, 1, 1] is the same bytes in both layouts,
// so the projection (equal priority in both) takes the layout its reader strictly prefers and reads z
// without a conversion; before, it stayed NCHW and a transpose ran between it and the next layer.
TEST_CASE("channels_last: a [N, C, 1, 1] input is read unconverted; its reader follows the next layer") {
  const Model m = Model::from_bytes(zoo::build("dcgan").finish(), "dcgan");
  const detail::Graph g = passed(m);
  REQUIRE(g.nodes.size() >= 2);
  REQUIRE(g.nodes[0].op() == OpType::ConvTranspose2D);
  std::vector<detail::LayoutSupport> support(g.nodes.size());
  for (size_t i = 0; i < g.nodes.size(); ++i)
    support[i] = i == 0 ? detail::LayoutSupport{60, 60} : detail::LayoutSupport{10, 50};
  std::vector<std::string> log;
  const detail::Graph out = detail::assign_layouts(g, support, &log);
  CHECK(out.nodes[0].layout == Layout::NHWC);
  CHECK(out.nodes[0].inputs[0] == g.nodes[0].inputs[0]);  // z itself, no converted copy
  int conversions = 0;
  for (const detail::Node& n : out.nodes) conversions += n.op() == OpType::Layout;
  CHECK(conversions == 1);  // the image output back to NCHW only
  REQUIRE(log.size() == 1);
  CHECK(log[0].find("1 layout conversion(s) (nchw for output") != std::string::npos);
  // the next layer preferring NCHW: the projection keeps z's NCHW
  for (size_t i = 1; i < g.nodes.size(); ++i) support[i] = {50, 10};
  const detail::Graph nchw = detail::assign_layouts(g, support, nullptr);
  for (const detail::Node& n : nchw.nodes) CHECK(n.layout == Layout::NCHW);
}

// fuse_input_epilogue (cuda's pass; here with no predicate, so everywhere): in EB-GAN only tconv7 ->
// conv8 is a producer -> conv2d pair; tconv7 loses its bias and ReLU, conv8 reads relu(x + b) with
// tconv7's bias as its input 3.
TEST_CASE("fuse_input_epilogue: the producer's bias and activation become the conv2d reader's input epilogue") {
  const Model m = Model::from_bytes(zoo::build("ebgan").finish(), "ebgan");
  const detail::Graph g = passed(m);
  const detail::Node& t7 = node_named(g, "tconv7");
  REQUIRE(t7.inputs.size() == 3);
  const int bias7 = t7.inputs[2];
  std::vector<std::string> log;
  const detail::Graph out = detail::fuse_input_epilogue(g, nullptr, &log);
  detail::validate_graph(out);
  REQUIRE(log.size() == 1);
  CHECK(log[0] == "fuse_input_epilogue: 1 bias + activation epilogue moved into the reading conv2d (tconv7 -> conv8)");
  const detail::Node& bare = node_named(out, "tconv7");
  CHECK(bare.inputs.size() == 2);
  CHECK(act_of(bare) == ActivationKind::None);
  const detail::Node& c8 = node_named(out, "conv8");
  const auto& p = std::get<Conv2DParams>(c8.params);
  CHECK(p.input_epilogue);
  CHECK(p.input_activation.kind == ActivationKind::Relu);
  CHECK(p.activation.kind == ActivationKind::Tanh);
  REQUIRE(c8.inputs.size() == 4);
  CHECK(c8.inputs[3] == bias7);
  CHECK(out.nodes.size() == g.nodes.size());
  // a predicate that refuses: nothing moves
  const detail::Graph kept = detail::fuse_input_epilogue(
      g, [](const detail::Graph&, const detail::Node&, const detail::Node&) { return false; }, &log);
  CHECK(log.back() == "fuse_input_epilogue: no producer epilogue to move into a conv2d");
  CHECK(std::get<Conv2DParams>(node_named(kept, "conv8").params).input_epilogue == false);
  // no file form
  Conv2DParams fused;
  fused.input_epilogue = true;
  auto build = [&] {
    ModelBuilder b("fused");
    const int x = b.input("x", {1, 2, 4, 4});
    b.output(b.node("c", fused,
                    {x, b.constant("w", {1, 2, 1, 1}, std::vector<float>(2, 1.f)),
                     b.constant("b", {1}, std::vector<float>(1, 0.f)), b.constant("bin", {2}, std::vector<float>(2, 0.f))}));
    return b.finish();
  };
  CHECK_THROWS_WITH_AS(build(), doctest::Contains("input_epilogue is engine-internal"), Error);
}

// The reference conv2d with an input epilogue equals the plain one on act(x + b_in[c]) computed by hand
// (NCHW, two images, odd sizes, padding, a leaky ReLU so negative values matter).
TEST_CASE("reference conv2d: the input epilogue reads act(x + b_in[c])") {
  const Shape xs{2, 3, 5, 7}, ws{4, 3, 3, 3}, ys{2, 4, 5, 7};
  const std::vector<float> x = random_vector(2 * 3 * 5 * 7, 71), w = random_vector(4 * 3 * 9, 72),
                           b = random_vector(4, 73), bin = random_vector(3, 74);
  Conv2DParams p;
  p.pad = {1, 1, 1, 1};
  p.activation.kind = ActivationKind::Tanh;
  std::vector<float> xe(x.size()), want(static_cast<size_t>(shape_numel(ys))), got(want.size(), NAN);
  for (size_t i = 0; i < x.size(); ++i) {
    const float v = x[i] + bin[(i / 35) % 3];
    xe[i] = v < 0.f ? 0.2f * v : v;
  }
  ref::conv2d(p, xe.data(), xs, w.data(), ws, b.data(), want.data(), ys);
  Conv2DParams q = p;
  q.input_epilogue = true;
  q.input_activation = {ActivationKind::LeakyRelu, 0.2f, 0.f};
  const NodeDesc node{q, {xs, ws, {4}, {3}}, {ys}, {nullptr, w.data(), b.data(), bin.data()}};
  const KernelVariant* v = KernelRegistry::global().find("cpu", "conv2d", "reference");
  REQUIRE(v != nullptr);
  CHECK(v->fuses_input_epilogue);
  v->run(KernelCall{node, {x.data(), w.data(), b.data(), bin.data()}, {got.data()}});
  for (size_t i = 0; i < want.size(); ++i) CHECK(got[i] == doctest::Approx(want[i]).epsilon(1e-6));
  // every other cpu conv2d variant refuses the node (variant_applies: fuses_input_epilogue)
  for (const KernelVariant* other : KernelRegistry::global().variants("cpu", "conv2d"))
    if (other->name != "reference") CHECK_FALSE(variant_applies(*other, node));
}
