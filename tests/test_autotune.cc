// Tests of autotune by whole-forward replay and the plan cache (engine/src/autotune.cc,
// plan_cache.cc) on the cpu backend: an autotuned session computes what the default one does, saves
// its plan, and a later session takes the plan from the file without timing; files that are not plan
// caches are Errors and stay untouched; stale entries are ignored. Speed itself is never asserted.
#include <doctest/doctest.h>

#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include "infer/infer.h"
#include "test_util.h"
#include "zoo.h"

using namespace infer;
using infer::test::rel_error;

namespace {

std::string temp_path(const std::string& name) {
  return (std::filesystem::temp_directory_path() / ("infer_test_autotune_" + name)).string();
}

std::string read_file(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::ostringstream s;
  s << in.rdbuf();
  return s.str();
}

void write_file(const std::string& path, const std::string& text) {
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  out << text;
}

bool has_line(const Session& s, const std::string& prefix) {
  for (const std::string& line : s.passes())
    if (line.rfind(prefix, 0) == 0) return true;
  return false;
}

std::vector<std::string> variants(const Session& s) {
  std::vector<std::string> out;
  for (const NodeInfo& n : s.nodes()) out.push_back(n.variant);
  return out;
}

// DCGAN at batch 1: five transposed convolutions with several applicable variants each.
Model dcgan() { return Model::from_bytes(zoo::build("dcgan").finish(), "dcgan"); }

std::vector<Tensor> latent(const Session& s) {
  Tensor z(s.inputs()[0].shape);
  z.data = infer::test::random_vector(z.data.size(), 7);
  return {z};
}

}  // namespace

TEST_CASE("autotune: same outputs as the default plan, plan saved and reused without timing") {
  const Model model = dcgan();
  const std::string cache = temp_path("cache.json");
  std::filesystem::remove(cache);

  SessionOptions base;
  base.backend = "cpu";
  Session plain(model, base);
  const std::vector<Tensor> in = latent(plain);
  const std::vector<Tensor> want = plain.run(in);

  SessionOptions tuned_options = base;
  tuned_options.autotune = true;
  tuned_options.plan_cache = cache;
  Session tuned(model, tuned_options);
  CHECK(has_line(tuned, "autotune: "));
  CHECK_FALSE(has_line(tuned, "plan cache: "));
  CHECK(rel_error(tuned.run(in)[0].data, want[0].data) < 1e-5);
  REQUIRE(std::filesystem::exists(cache));
  const std::string saved = read_file(cache);
  CHECK(saved.find("\"format\": \"infer-plan-cache\"") != std::string::npos);
  for (const NodeInfo& n : tuned.nodes())
    CHECK(saved.find("\"" + n.name + "\": \"" + n.variant + "\"") != std::string::npos);

  // The same graph again: the plan comes from the file (nothing timed), autotune asked or not.
  for (bool autotune : {true, false}) {
    SessionOptions again = tuned_options;
    again.autotune = autotune;
    Session reused(model, again);
    CHECK(has_line(reused, "plan cache: "));
    CHECK_FALSE(has_line(reused, "autotune: "));
    CHECK(variants(reused) == variants(tuned));
    CHECK(rel_error(reused.run(in)[0].data, want[0].data) < 1e-5);
  }
  CHECK(read_file(cache) == saved);  // a hit writes nothing

  // Another batch is another graph: its own entry, the first one kept.
  SessionOptions batch2 = tuned_options;
  batch2.batch = 2;
  Session second(model, batch2);
  CHECK(has_line(second, "autotune: "));
  const std::string both = read_file(cache);
  CHECK(both.find("\"batch\": \"1\"") != std::string::npos);
  CHECK(both.find("\"batch\": \"2\"") != std::string::npos);
  std::filesystem::remove(cache);
}

TEST_CASE("plan cache: a file that is not one is an Error and stays untouched") {
  const Model model = dcgan();
  const std::string path = temp_path("not_a_cache.json");
  SessionOptions o;
  o.backend = "cpu";
  o.autotune = true;
  o.plan_cache = path;
  for (const auto& [text, message] : std::vector<std::pair<std::string, std::string>>{
           {"this is not json", "not JSON"},
           {"{\"plans\": []}", "not an infer plan cache"},
           {"{\"format\": \"infer-plan-cache\", \"version\": 99, \"plans\": []}", "version 99"},
       }) {
    write_file(path, text);
    CHECK_THROWS_WITH_AS(Session(model, o), doctest::Contains(message.c_str()), Error);
    CHECK(read_file(path) == text);
  }
  std::filesystem::remove(path);
}

TEST_CASE("plan cache: a stale entry is ignored; no autotune, no entry: nothing written") {
  const Model model = dcgan();
  const std::string cache = temp_path("stale.json");
  std::filesystem::remove(cache);
  SessionOptions o;
  o.backend = "cpu";
  o.plan_cache = cache;
  {
    Session s(model, o);  // no autotune and no entry: the default, and no file
    CHECK_FALSE(has_line(s, "plan cache: "));
    CHECK_FALSE(std::filesystem::exists(cache));
  }
  o.autotune = true;
  std::vector<std::string> tuned;
  {
    Session s(model, o);
    tuned = variants(s);
  }
  // The saved entry's first variant renamed to one that does not exist: not used, the session
  // plans as without an entry (default here, autotune off).
  std::string text = read_file(cache);
  const size_t at = text.find("\"" + tuned[0] + "\"", text.find("\"variants\""));
  REQUIRE(at != std::string::npos);
  text.replace(at, tuned[0].size() + 2, "\"no_such_variant\"");
  write_file(cache, text);
  o.autotune = false;
  Session s(model, o);
  CHECK_FALSE(has_line(s, "plan cache: "));
  SessionOptions plain;
  plain.backend = "cpu";
  CHECK(variants(s) == variants(Session(model, plain)));
  std::filesystem::remove(cache);
}
