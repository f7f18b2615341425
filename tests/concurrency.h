// The concurrency check shared by test_concurrency (cpu, reference) and test_cuda_concurrency: N threads
// each create their own Session over one shared Model and run it several times on their own input;
// every output must be bit-identical to what one thread alone computes for that input. This is the
// contract in infer/session.h: a Model is shared freely, a Session belongs to one thread at a time.
#pragma once

#include <doctest/doctest.h>

#include <atomic>
#include <cstring>
#include <exception>
#include <string>
#include <thread>
#include <vector>

#include "infer/infer.h"
#include "test_util.h"

namespace infer::test {

inline bool bit_identical(const std::vector<Tensor>& a, const std::vector<Tensor>& b) {
  if (a.size() != b.size()) return false;
  for (size_t k = 0; k < a.size(); ++k)
    if (a[k].shape != b[k].shape || a[k].data.size() != b[k].data.size() ||
        std::memcmp(a[k].data.data(), b[k].data.data(), a[k].data.size() * sizeof(float)) != 0)
      return false;
  return true;
}

// One seeded input set per thread (values in [-1, 1]).
inline std::vector<Tensor> thread_inputs(const Session& session, uint64_t seed) {
  std::vector<Tensor> in;
  for (const TensorInfo& t : session.inputs()) {
    Tensor x(t.shape);
    x.data = random_vector(x.data.size(), seed++, -1.f, 1.f);
    in.push_back(std::move(x));
  }
  return in;
}

// `threads` threads x `runs` runs; doctest is only called from this thread (it is not thread-safe):
// the workers count differing outputs and keep their exceptions' messages.
inline void check_concurrent_sessions(const Model& model, const SessionOptions& options, int threads,
                                      int runs) {
  // Single-threaded first: the expected outputs for every thread's input.
  std::vector<std::vector<Tensor>> inputs, expected;
  {
    Session alone(model, options);
    for (int t = 0; t < threads; ++t) {
      inputs.push_back(thread_inputs(alone, 1000 + 17 * uint64_t(t)));
      expected.push_back(alone.run(inputs.back()));
    }
  }
  std::atomic<int> differing{0};
  std::vector<std::string> errors(static_cast<size_t>(threads));
  std::atomic<int> ready{0};
  std::vector<std::thread> pool;
  for (int t = 0; t < threads; ++t) {
    pool.emplace_back([&, t] {
      try {
        Session session(model, options);  // sessions are created at the same time, too
        ready.fetch_add(1);
        while (ready.load() < threads) std::this_thread::yield();  // then all run at once
        for (int r = 0; r < runs; ++r)
          if (!bit_identical(session.run(inputs[size_t(t)]), expected[size_t(t)])) differing.fetch_add(1);
      } catch (const std::exception& e) {
        errors[size_t(t)] = e.what();
        ready.fetch_add(1);
      }
    });
  }
  for (std::thread& th : pool) th.join();
  for (int t = 0; t < threads; ++t) {
    CAPTURE(t);
    CHECK(errors[size_t(t)].empty());
  }
  CHECK(differing.load() == 0);
}

}  // namespace infer::test
