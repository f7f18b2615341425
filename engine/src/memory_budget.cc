// Host memory available to this process (MemAvailable and cgroup headroom) and the session's memory
// check (memory_budget.h). Files that cannot be read count as "no limit": a machine without cgroups
// or /proc still runs, and the user's --max-memory still applies.
#include "memory_budget.h"

#include <fmt/format.h>

#include <algorithm>
#include <fstream>
#include <limits>
#include <sstream>
#include <string>
#include <vector>

#include "infer/error.h"

namespace infer::detail {
namespace {

constexpr uint64_t kUnknown = std::numeric_limits<uint64_t>::max();

uint64_t saturating_add(uint64_t a, uint64_t b) { return a > kUnknown - b ? kUnknown : a + b; }

// The first number in a file ("max" or anything unreadable -> kUnknown).
uint64_t read_number(const std::string& path) {
  std::ifstream f(path);
  std::string word;
  if (!(f >> word) || word.empty() || word.find_first_not_of("0123456789") != std::string::npos)
    return kUnknown;
  try {
    return std::stoull(word);
  } catch (...) {
    return kUnknown;
  }
}

uint64_t meminfo_available() {
  std::ifstream f("/proc/meminfo");
  std::string key, unit;
  uint64_t kib = 0;
  while (f >> key >> kib) {
    std::getline(f, unit);
    if (key == "MemAvailable:") return kib * 1024;
  }
  return kUnknown;
}

// Headroom (limit - usage) of a cgroup folder, kUnknown without a limit.
uint64_t headroom(const std::string& limit_file, const std::string& usage_file) {
  const uint64_t limit = read_number(limit_file);
  if (limit == kUnknown) return kUnknown;
  const uint64_t usage = read_number(usage_file);
  if (usage == kUnknown) return limit;
  return usage >= limit ? 0 : limit - usage;
}

uint64_t cgroup_headroom() {
  uint64_t best = kUnknown;
  std::ifstream f("/proc/self/cgroup");
  for (std::string line; std::getline(f, line);) {
    // "hierarchy-id:controllers:path"; v2 is "0::/path", v1's memory controller "N:memory:/path".
    const size_t a = line.find(':'), b = line.find(':', a + 1);
    if (a == std::string::npos || b == std::string::npos) continue;
    const std::string controllers = line.substr(a + 1, b - a - 1);
    std::string path = line.substr(b + 1);
    const bool v2 = controllers.empty();
    const bool v1 = controllers.find("memory") != std::string::npos;
    if (!v1 && !v2) continue;
    const std::string root = v2 ? "/sys/fs/cgroup" : "/sys/fs/cgroup/memory";
    const std::string limit = v2 ? "/memory.max" : "/memory.limit_in_bytes";
    const std::string usage = v2 ? "/memory.current" : "/memory.usage_in_bytes";
    // Every ancestor's limit applies; in a container the path may not exist, so the root is tried too.
    while (true) {
      const std::string dir = root + (path == "/" ? "" : path);
      best = std::min(best, headroom(dir + limit, dir + usage));
      if (path.empty() || path == "/") break;
      const size_t slash = path.rfind('/');
      path = slash == 0 || slash == std::string::npos ? "/" : path.substr(0, slash);
    }
  }
  return best;
}

}  // namespace

uint64_t MemoryNeed::total() const {
  return saturating_add(saturating_add(arena, weights), saturating_add(prepared, io));
}

uint64_t host_available_bytes() { return std::min(meminfo_available(), cgroup_headroom()); }

void check_memory_budget(const MemoryNeed& need, uint64_t held, uint64_t available,
                         const std::string& available_what, uint64_t user_limit,
                         const std::string& origin) {
  const uint64_t total = need.total();
  const std::string detail =
      fmt::format("arena {}, weights {}, prepared weights {}, inputs and outputs {}", need.arena,
                  need.weights, need.prepared, need.io);
  if (user_limit != 0 && total > user_limit)
    throw Error(fmt::format("{}: the session needs {} bytes ({}) but the memory limit is {} bytes "
                            "(max_memory / --max-memory)",
                            origin, total, detail, user_limit));
  const uint64_t more = total - std::min(held, total);
  if (available != kUnknown && more > available)
    throw Error(fmt::format("{}: the session needs {}{} bytes ({}) but only {} bytes are {}", origin,
                            more, held ? " more" : "", detail, available, available_what));
}

}  // namespace infer::detail
