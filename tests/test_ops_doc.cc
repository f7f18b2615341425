// docs/ops.md (the supported-ops table) against the kernel registry: every op of infer/ops.h has one
// row, and each row's "variants" column lists exactly the registered variants per backend (highest
// priority first, the reference variant said once for all). On a mismatch the test prints the rows as
// they should read, so keeping the table true is a copy. Built with and without CUDA: the CUDA column
// is compared only when the CUDA backend is built.
#include <doctest/doctest.h>

#include <fstream>
#include <iostream>
#include <map>
#include <sstream>
#include <string>
#include <vector>

#include "infer/kernel.h"
#include "infer/ops.h"

using namespace infer;

namespace {

std::string trim(const std::string& s) {
  const size_t a = s.find_first_not_of(" `"), b = s.find_last_not_of(" `");
  return a == std::string::npos ? "" : s.substr(a, b - a + 1);
}

// The table's rows: op -> its cells, for lines "| op | ... |" whose first cell names an op.
std::map<std::string, std::vector<std::string>> table_rows(const std::string& path) {
  std::ifstream in(path);
  REQUIRE_MESSAGE(in.good(), "cannot read " << path);
  std::map<std::string, std::vector<std::string>> rows;
  std::string line;
  while (std::getline(in, line)) {
    if (line.rfind("| ", 0) != 0 || line.back() != '|') continue;  // table lines only
    std::vector<std::string> cells;
    std::stringstream ss(line.substr(1, line.size() - 2));
    std::string cell;
    while (std::getline(ss, cell, '|')) cells.push_back(trim(cell));
    if (cells.size() >= 4 && cells[0] != "op" && cells[0].rfind("---", 0) != 0) rows[cells[0]] = cells;
  }
  return rows;
}

// "cpu: a, b; cuda: c" for op from the registry (the reference variant left out: every op has it).
std::string variants_cell(const std::string& op, const std::string& backend_filter) {
  std::string out;
  for (const char* backend : {"cpu", "cuda"}) {
    if (!backend_filter.empty() && backend_filter != backend) continue;
    std::string names;
    for (const KernelVariant* v : KernelRegistry::global().variants(backend, op))
      if (v->name != "reference") names += (names.empty() ? "" : ", ") + v->name;
    if (!names.empty()) out += (out.empty() ? "" : "; ") + std::string(backend) + ": " + names;
  }
  return out;
}

// The part of a documented cell for one backend ("cuda: x, y"). A build without cuDNN has no cudnn*
// variants: they are dropped from the documented list before comparing.
std::string backend_part(const std::string& cell, const std::string& backend) {
  std::stringstream ss(cell);
  std::string part;
  while (std::getline(ss, part, ';')) {
    part = trim(part);
    if (part.rfind(backend + ":", 0) != 0) continue;
#ifndef INFER_WITH_CUDNN
    std::stringstream names(part.substr(backend.size() + 1));
    std::string name, kept;
    while (std::getline(names, name, ','))
      if (trim(name).rfind("cudnn", 0) != 0) kept += (kept.empty() ? "" : ", ") + trim(name);
    part = backend + ": " + kept;
#endif
    return part;
  }
  return "";
}

}  // namespace

TEST_CASE("docs/ops.md lists every op and exactly the registered kernel variants") {
  const auto rows = table_rows(std::string(INFER_SOURCE_DIR) + "/docs/ops.md");
  std::string expected;
  bool ok = true;
  for (int i = 0; i < kNumOpTypes; ++i) {
    const std::string op = op_name(static_cast<OpType>(i));
    CAPTURE(op);
    CHECK_MESSAGE(KernelRegistry::global().find("cpu", op, "reference") != nullptr,
                  "every op has a reference kernel");
    const auto it = rows.find(op);
    const bool found = it != rows.end();
    CHECK_MESSAGE(found, "docs/ops.md has no row for op '" << op << "'");
    ok = ok && found;
    if (!found) continue;
    const std::string& cell = it->second[3];
    const std::string want_cpu = variants_cell(op, "cpu");
    CHECK(backend_part(cell, "cpu") == want_cpu);
    ok = ok && backend_part(cell, "cpu") == want_cpu;
#ifdef INFER_WITH_CUDA
    const std::string want_cuda = variants_cell(op, "cuda");
    CHECK(backend_part(cell, "cuda") == want_cuda);
    ok = ok && backend_part(cell, "cuda") == want_cuda;
#endif
    expected += "| " + op + " | ... | ... | " + variants_cell(op, "") + " |\n";
  }
  CHECK(rows.size() == static_cast<size_t>(kNumOpTypes));  // no row for an op that does not exist
  if (!ok) std::cout << "docs/ops.md: the variants column should read:\n" << expected;
}
