// The backend interface (ggml style): what the session needs from a device, and nothing more. A
// backend allocates the one activation arena, makes constants visible to its kernels, copies tensors
// between the host and the arena, synchronizes, and times nodes. The CPU backend is cpu_backend.cc;
// a CUDA backend implements the same interface (device memory, uploads, streams, events).
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>

namespace infer::detail {

// One allocation on a backend's device, freed when destroyed.
class DeviceBuffer {
 public:
  virtual ~DeviceBuffer() = default;
  virtual void* data() = 0;  // aligned to kArenaAlignment (planner.h)
  virtual uint64_t bytes() const = 0;
};

// Marks points in the stream of work and reports the time between them once synchronized (CPU:
// steady_clock when mark() is called; CUDA: events recorded on the stream).
class Timer {
 public:
  virtual ~Timer() = default;
  virtual void mark(int slot) = 0;                     // slot in [0, slots)
  virtual double elapsed_ms(int from, int to) const = 0;  // valid after Backend::synchronize()
};

class Backend {
 public:
  virtual ~Backend() = default;

  // The registry's backend name of the kernels this backend runs ("cpu", "cuda").
  virtual const std::string& name() const = 0;

  // One allocation of `bytes` (may be 0: returns an empty buffer with data() == nullptr).
  // Throws infer::Error naming the bytes asked for when the device is out of memory.
  virtual std::unique_ptr<DeviceBuffer> allocate(uint64_t bytes) = 0;

  // A pointer kernels can read `count` floats of a host constant through (CPU: `host` itself; a GPU
  // backend uploads once and owns the copy for its lifetime).
  virtual const float* constant(const float* host, size_t count) = 0;

  // Host <-> device copies of `bytes` bytes; may be asynchronous until synchronize().
  virtual void copy_in(void* device_dst, const void* host_src, size_t bytes) = 0;
  virtual void copy_out(void* host_dst, const void* device_src, size_t bytes) = 0;
  virtual void synchronize() = 0;

  virtual std::unique_ptr<Timer> make_timer(int slots) = 0;
};

std::unique_ptr<Backend> make_cpu_backend();

}  // namespace infer::detail
