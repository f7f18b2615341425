// Resource limits (docs/format.md "Limits"): the session's memory check (engine/src/memory_budget.h)
// refuses a plan larger than SessionOptions::max_memory_bytes or than the memory there is, before the
// arena is allocated; the loader bounds graph sizes. The committed fuzz regressions (fuzz/corpus/model/
// regress_*.fb) are rejected with the same messages as the models built here.
#include <doctest/doctest.h>

#include <cstdint>
#include <fstream>
#include <iterator>
#include <string>
#include <vector>

#include "infer/infer.h"
#include "memory_budget.h"
#include "test_util.h"

using namespace infer;
using doctest::Contains;

namespace {

// conv 1->2 k3 p1 -> relu -> flatten -> dense 72->3: a few KiB of arena.
Model small_model() {
  ModelBuilder b("small");
  const int x = b.input("x", {-1, 1, 6, 6});
  Conv2DParams conv;
  conv.pad = {1, 1, 1, 1};
  int y = b.node("conv", conv, {x, b.constant("conv.w", {2, 1, 3, 3}, test::random_vector(18, 1))});
  y = b.node("relu", ActivationParams{}, {y});
  y = b.node("flat", FlattenParams{}, {y});
  y = b.node("dense", DenseParams{}, {y, b.constant("dense.w", {3, 72}, test::random_vector(216, 2))});
  b.output(y);
  return Model::from_bytes(b.finish(), "small.fb");
}

// A model of ~33 KB whose plan needs about 0.5 TiB: 128 relus of one 2^30-element input, all live
// until an add chain sums them (the fuzzer's finding: small files declaring shapes whose arena is
// gigabytes; Release infer grew to the machine's whole memory and was killed).
std::vector<uint8_t> huge_arena_bytes() {
  ModelBuilder b("huge_arena");
  const int x = b.input("x", {-1, 1024, 1024, 1024});
  std::vector<int> branches;
  for (int i = 0; i < 128; ++i)
    branches.push_back(b.node("relu" + std::to_string(i), ActivationParams{}, {x}));
  int sum = branches[0];
  for (size_t i = 1; i < branches.size(); ++i)
    sum = b.node("add" + std::to_string(i), AddParams{}, {sum, branches[i]});
  b.output(sum);
  return b.finish();
}

std::vector<uint8_t> read_committed(const std::string& name) {
  std::ifstream f(std::string(INFER_SOURCE_DIR) + "/fuzz/corpus/model/" + name, std::ios::binary);
  REQUIRE_MESSAGE(f.good(), "missing committed regression file ", name);
  return {std::istreambuf_iterator<char>(f), std::istreambuf_iterator<char>()};
}

uint64_t meminfo_total() {
  std::ifstream f("/proc/meminfo");
  std::string key, unit;
  uint64_t kib = 0;
  while (f >> key >> kib >> unit)
    if (key == "MemTotal:") return kib * 1024;
  return 0;
}

}  // namespace

TEST_CASE("check_memory_budget: user limit, available memory, bytes already held") {
  detail::MemoryNeed need;
  need.arena = 1000;
  need.weights = 200;
  need.prepared = 30;
  need.io = 4;
  CHECK(need.total() == 1234);
  CHECK_NOTHROW(detail::check_memory_budget(need, 0, 1234, "free", 1234, "m.fb"));
  CHECK_THROWS_WITH_AS(detail::check_memory_budget(need, 0, 1234, "free", 1233, "m.fb"),
                       "m.fb: the session needs 1234 bytes (arena 1000, weights 200, prepared weights "
                       "30, inputs and outputs 4) but the memory limit is 1233 bytes (max_memory / "
                       "--max-memory)",
                       Error);
  CHECK_THROWS_WITH_AS(detail::check_memory_budget(need, 0, 1233, "free on the device", 0, "m.fb"),
                       Contains("needs 1234 bytes (arena 1000"), Error);
  CHECK_THROWS_WITH_AS(detail::check_memory_budget(need, 0, 1233, "free on the device", 0, "m.fb"),
                       Contains("but only 1233 bytes are free on the device"), Error);
  // What the session already holds (prepared weights uploaded before the check) is not needed again.
  CHECK_NOTHROW(detail::check_memory_budget(need, 30, 1204, "free", 0, "m.fb"));
  CHECK_THROWS_WITH_AS(detail::check_memory_budget(need, 30, 1203, "free", 0, "m.fb"),
                       Contains("needs 1204 more bytes"), Error);
  // Sums saturate instead of wrapping around to a small number.
  need.arena = UINT64_MAX - 10;
  CHECK(need.total() == UINT64_MAX);
  CHECK_THROWS_AS(detail::check_memory_budget(need, 0, uint64_t(1) << 50, "free", 0, "m.fb"), Error);
}

TEST_CASE("host_available_bytes is positive and at most the machine's memory") {
  const uint64_t available = detail::host_available_bytes();
  const uint64_t total = meminfo_total();
  REQUIRE(total > 0);
  CHECK(available > 0);
  CHECK(available <= total);
}

TEST_CASE("SessionOptions::max_memory_bytes: the exact need passes, one byte less is refused") {
  const Model model = small_model();
  for (const char* backend : {"cpu", "reference"}) {
    CAPTURE(backend);
    SessionOptions options;
    options.backend = backend;
    options.batch = 3;
    const Session probe(model, options);
    // cpu: the arena plus float32 input [3,1,6,6] and output [3,3]; weights stay in the file.
    const uint64_t need = probe.memory().arena_bytes + (3 * 36 + 3 * 3) * 4;
    REQUIRE(probe.memory().arena_bytes > 0);
    options.max_memory_bytes = need;
    CHECK_NOTHROW(Session(model, options));
    options.max_memory_bytes = need - 1;
    CHECK_THROWS_WITH_AS(Session(model, options),
                         Contains(("small.fb: the session needs " + std::to_string(need) +
                                   " bytes (arena " + std::to_string(probe.memory().arena_bytes))
                                      .c_str()),
                         Error);
    CHECK_THROWS_WITH_AS(Session(model, options),
                         Contains(("the memory limit is " + std::to_string(need - 1) + " bytes").c_str()),
                         Error);
  }
}

TEST_CASE("a 33 KB file whose plan needs 0.5 TiB is refused before anything is allocated") {
  const std::vector<uint8_t> bytes = huge_arena_bytes();
  CHECK(bytes.size() < 64 * 1024);
  for (const auto& [origin, file] :
       {std::make_pair(std::string("huge_arena.fb"), bytes),
        std::make_pair(std::string("regress_huge_arena.fb"), read_committed("regress_huge_arena.fb"))}) {
    CAPTURE(origin);
    const Model model = Model::from_bytes(file, origin);  // a valid file: the loader accepts it
    SessionOptions options;
    options.backend = "cpu";
    CHECK_THROWS_WITH_AS(Session(model, options), Contains((origin + ": the session needs").c_str()),
                         Error);
    CHECK_THROWS_WITH_AS(Session(model, options),
                         Contains("bytes are available on the host (MemAvailable, cgroup limit)"), Error);
  }
}

TEST_CASE("committed regression: an int64 shape vector off its 8-byte alignment is rejected") {
  CHECK_THROWS_WITH_AS(Model::from_bytes(read_committed("regress_misaligned_shape.fb"), "m.fb"),
                       "m.fb: tensor 3 'conv': field shape is not 8-byte aligned in the file (the file "
                       "is corrupt)",
                       Error);
}

TEST_CASE("loader bounds: a node with more than 1024 inputs") {
  ModelBuilder b("wide_concat");
  const int x = b.input("x", {-1, 1});
  std::vector<int> parts;
  for (int i = 0; i < 1025; ++i) parts.push_back(b.node("r" + std::to_string(i), ActivationParams{}, {x}));
  b.output(b.node("cat", ConcatParams{1}, parts));
  CHECK_THROWS_WITH_AS(Model::from_bytes(b.finish(), "w.fb"),
                       "w.fb: node 1025 'cat' (concat): has 1025 inputs (at most 1024)", Error);
}
