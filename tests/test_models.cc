// Every zoo model end to end on the "reference" backend at batch 1 and 3: seeded random inputs give
// finite outputs of the right shape (generators inside [-1, 1]), not constant; each batch-3 row equals
// the batch-1 run of the same input row exactly; and every session's memory plan keeps its invariants
// (no two simultaneously live tensors share bytes; lower bound <= arena <= naive sum). Classifiers run
// at small image sizes; each model is built once. The reference EB-GAN is the slow part (~3.9 G
// multiply-adds per sample).
#include <doctest/doctest.h>

#include <algorithm>
#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "infer/infer.h"
#include "plan.h"
#include "planner.h"
#include "test_util.h"
#include "zoo.h"

using namespace infer;

namespace {

uint64_t aligned(uint64_t bytes) {
  return (bytes + detail::kArenaAlignment - 1) / detail::kArenaAlignment * detail::kArenaAlignment;
}

// The planner's invariants, recomputed here from the plan's tensors alone.
void check_plan(const Session& session) {
  const detail::Plan& plan = detail::plan_of(session);
  const MemoryReport& report = plan.report;
  const int steps = static_cast<int>(session.nodes().size());
  REQUIRE(!plan.tensors.empty());
  CHECK(report.arena_bytes == session.memory().arena_bytes);

  uint64_t naive = 0;
  for (const detail::PlannedTensor& t : plan.tensors) {
    CAPTURE(t.name);
    CHECK(t.offset % detail::kArenaAlignment == 0);
    CHECK(t.first <= t.last);
    CHECK(t.first >= -1);
    CHECK(t.last <= steps);
    CHECK(t.offset + t.bytes <= report.arena_bytes);
    naive += aligned(t.bytes);
  }

  // Graph inputs are live from before the first step, outputs until after the last.
  std::map<std::string, const detail::PlannedTensor*> by_name;
  for (const detail::PlannedTensor& t : plan.tensors) by_name[t.name] = &t;
  for (const TensorInfo& in : session.inputs()) {
    REQUIRE(by_name.count(in.name) == 1);
    CHECK(by_name[in.name]->first == -1);
    CHECK(by_name[in.name]->bytes == static_cast<uint64_t>(shape_numel(in.shape)) * sizeof(float));
  }
  for (const TensorInfo& out : session.outputs()) {
    REQUIRE(by_name.count(out.name) == 1);
    CHECK(by_name[out.name]->last == steps);
    CHECK(by_name[out.name]->bytes == static_cast<uint64_t>(shape_numel(out.shape)) * sizeof(float));
  }

  // No two tensors whose lifetimes overlap (both live at some step) share a byte.
  int clashes = 0;
  std::string first_clash;
  for (size_t i = 0; i < plan.tensors.size(); ++i) {
    for (size_t j = i + 1; j < plan.tensors.size(); ++j) {
      const detail::PlannedTensor& a = plan.tensors[i];
      const detail::PlannedTensor& b = plan.tensors[j];
      if (a.bytes == 0 || b.bytes == 0) continue;
      const bool live_together = a.first <= b.last && b.first <= a.last;
      const bool share_bytes = a.offset < b.offset + b.bytes && b.offset < a.offset + a.bytes;
      if (live_together && share_bytes && clashes++ == 0) first_clash = a.name + " / " + b.name;
    }
  }
  CHECK_MESSAGE(clashes == 0, "live tensors sharing memory, first: " << first_clash);

  // The lower bound: the most bytes (256-byte aligned, as placed) live at any one step.
  uint64_t lower_bound = 0;
  for (int step = -1; step <= steps; ++step) {
    uint64_t live = 0;
    for (const detail::PlannedTensor& t : plan.tensors)
      if (t.first <= step && step <= t.last) live += aligned(t.bytes);
    lower_bound = std::max(lower_bound, live);
  }
  CHECK(report.lower_bound_bytes == lower_bound);
  CHECK(report.naive_bytes == naive);
  CHECK(report.arena_bytes >= lower_bound);
  CHECK(report.arena_bytes <= report.naive_bytes);
  // A chain of layers must reuse memory: the arena is strictly below one-allocation-per-tensor.
  CHECK(report.arena_bytes < report.naive_bytes);
}

// Elements per sample: every dimension after the leading batch dimension.
int64_t per_sample(const Shape& shape) { return shape_numel(Shape(shape.begin() + 1, shape.end())); }

std::vector<float> row(const std::vector<float>& data, int64_t r, int64_t per_row) {
  return std::vector<float>(data.begin() + r * per_row, data.begin() + (r + 1) * per_row);
}

// Builds `name` once, runs it at batch 3 and its rows one by one at batch 1, and checks it all.
void check_model(const std::string& name, int image_size, uint64_t input_seed) {
  CAPTURE(name);
  zoo::ZooOptions zoo_options;
  zoo_options.image_size = image_size;
  const Model model = Model::from_bytes(zoo::build(name, zoo_options).finish(), name);
  const bool generator = model.meta("task") == "generator";
  REQUIRE(model.inputs().size() == 1);
  REQUIRE(model.outputs().size() == 1);

  const int64_t batch = 3;
  Shape in_shape = model.inputs()[0].shape;
  Shape out_shape = model.outputs()[0].shape;
  const int64_t in_per_row = per_sample(in_shape);
  const int64_t out_per_row = per_sample(out_shape);
  REQUIRE(in_per_row > 0);
  REQUIRE(out_per_row > 0);

  SessionOptions options3;
  options3.backend = "reference";
  options3.batch = batch;
  Session session3(model, options3);
  check_plan(session3);

  in_shape[0] = batch;
  const std::vector<float> x = test::random_vector(static_cast<size_t>(batch * in_per_row), input_seed);
  const std::vector<Tensor> out3 = session3.run({Tensor(in_shape, x)});
  REQUIRE(out3.size() == 1);
  const Tensor& y = out3[0];
  out_shape[0] = batch;
  CHECK(y.shape == out_shape);
  REQUIRE(y.data.size() == static_cast<size_t>(batch * out_per_row));
  CHECK(test::all_finite(y.data));

  for (int64_t r = 0; r < batch; ++r) {
    const std::vector<float> yr = row(y.data, r, out_per_row);
    const auto [lo, hi] = std::minmax_element(yr.begin(), yr.end());
    CAPTURE(r);
    CHECK(*hi > *lo);  // not constant
    if (generator) {
      CHECK(*lo >= -1.f);
      CHECK(*hi <= 1.f);
    }
  }
  // Different inputs, different outputs: rows are not mixed up or broadcast.
  CHECK(row(y.data, 0, out_per_row) != row(y.data, 1, out_per_row));
  CHECK(row(y.data, 1, out_per_row) != row(y.data, 2, out_per_row));

  SessionOptions options1 = options3;
  options1.batch = 1;
  Session session1(model, options1);
  check_plan(session1);
  in_shape[0] = 1;
  out_shape[0] = 1;
  for (int64_t r = 0; r < batch; ++r) {
    CAPTURE(r);
    const std::vector<Tensor> out1 = session1.run({Tensor(in_shape, row(x, r, in_per_row))});
    REQUIRE(out1.size() == 1);
    CHECK(out1[0].shape == out_shape);
    // The reference kernels compute each sample independently in the same order: bit-identical.
    CHECK(out1[0].data == row(y.data, r, out_per_row));
  }
}

}  // namespace

TEST_CASE("lenet5 end to end") { check_model("lenet5", 28, 101); }
TEST_CASE("alexnet end to end (63x63)") { check_model("alexnet", 63, 102); }
TEST_CASE("vgg11 end to end (32x32)") { check_model("vgg11", 32, 103); }
TEST_CASE("vgg16 end to end (32x32)") { check_model("vgg16", 32, 104); }
TEST_CASE("dcgan end to end") { check_model("dcgan", 0, 105); }
TEST_CASE("ebgan end to end") { check_model("ebgan", 0, 106); }
