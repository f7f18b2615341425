// The memory check a session makes before its one large allocation: what it will hold (arena with the
// workspaces, weights as the backend holds them, prepared weights, host copies of inputs and outputs)
// against what the machine has (host: MemAvailable capped by the cgroup's limit; GPU: cudaMemGetInfo's
// free bytes) and the user's SessionOptions::max_memory_bytes. Refusal is one line naming the bytes.
#pragma once

#include <cstdint>
#include <string>

namespace infer::detail {

struct MemoryNeed {
  uint64_t arena = 0;     // activations + workspaces (the planner's arena)
  uint64_t weights = 0;   // constants the backend copies (0 where they are used in place from the file)
  uint64_t prepared = 0;  // weights re-laid out by kernels (sub-kernels, fused filters)
  uint64_t io = 0;        // host copies of the inputs and outputs of one run (float32)
  uint64_t total() const;
};

// Bytes this process can still allocate on the host: /proc/meminfo's MemAvailable, lowered to the
// headroom under the tightest cgroup (v2 memory.max, v1 memory.limit_in_bytes) above this process.
// UINT64_MAX when none of them can be read.
uint64_t host_available_bytes();

// Throws infer::Error "<origin>: the session needs N bytes (...) but only M bytes are <what>" when
// need.total() exceeds a non-zero `user_limit`, or when the part of it not yet allocated (total minus
// `held`, what the session already holds) exceeds `available` (described by `available_what`).
void check_memory_budget(const MemoryNeed& need, uint64_t held, uint64_t available,
                         const std::string& available_what, uint64_t user_limit,
                         const std::string& origin);

}  // namespace infer::detail
