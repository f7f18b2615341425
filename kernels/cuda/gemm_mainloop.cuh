// The one k-loop of the hand-written CUDA GEMMs (CUTLASS's Mma of <Mma, Epilogue>, its MmaMultistage
// schedule in plain CUDA-C): a pipeline of kStages shared-memory stages over a block's k-iterations
// [begin, end), generic in the tile iterator (what one k-iteration copies into a stage) and the Mma
// (what the warps multiply from a stage). Every thread of the block calls it (it holds the barriers).
// kStages >= 2: kStages - 1 iterations in flight, one barrier per iteration; 1: two. CUDA-C only.
#pragma once

#include <type_traits>

#include "kernels/cuda/gemm_tiles.cuh"

namespace infer::cuda {

// A tile iterator: three callables (lambdas over the kernel's indices), any of them NoOp:
//   copy(k, stage): starts iteration k's cp_async16 copies into `stage` (uncommitted: the loop commits
//                   one group per iteration);
//   fetch(k):       loads iteration k's register-staged operands (an implicit im2col gather with
//                   bounds, streamed weights) into registers, one iteration ahead;
//   store(k, stage): moves iteration k's fetched registers into `stage` (or into the registers the
//                   Mma reads).
// Register-staged operands hold one iteration: with fetch / store, kStages <= 2.
struct NoOp {
  template <class... A>
  __device__ __forceinline__ void operator()(A...) const {}
};
template <class Copy, class Fetch = NoOp, class Store = NoOp>
struct TileIterator {
  Copy copy;
  Fetch fetch = {};
  Store store = {};
};
template <class Copy, class Fetch = NoOp, class Store = NoOp>
__device__ __forceinline__ TileIterator<Copy, Fetch, Store> tile_iterator(Copy copy, Fetch fetch = {},
                                                                          Store store = {}) {
  return {copy, fetch, store};
}

// mma(k, stage) multiplies iteration k's operands in `stage` into the caller's accumulators (through a
// warp-level Mma policy: WarpTile32, ThreadTile4x4, WarpMma16816 in gemm_tiles.cuh). Stage s of
// iteration k is s = (k - begin) % kStages; it is refilled only after every thread has passed the
// barrier that follows its mma.
template <int kStages, class Iterator, class Mma>
__device__ __forceinline__ void gemm_mainloop(Iterator& it, int begin, int end, Mma&& mma) {
  static_assert(kStages >= 1, "at least one stage");
  static_assert(kStages <= 2 || (std::is_same_v<std::decay_t<decltype(it.fetch)>, NoOp> &&
                                 std::is_same_v<std::decay_t<decltype(it.store)>, NoOp>),
                "register-staged operands hold one iteration: at most 2 stages");
  if constexpr (kStages == 1) {
    // per iteration: barrier, copy, store the registers fetched one iteration ago, wait, barrier,
    // fetch the next iteration's registers (in flight during the multiply), multiply
    if (begin < end) it.fetch(begin);
    for (int k = begin; k < end; ++k) {
      __syncthreads();  // the previous iteration's reads of the stage are done
      it.copy(k, 0);
      cp_async_commit();
      it.store(k, 0);
      cp_async_wait_all();
      __syncthreads();
      if (k + 1 < end) it.fetch(k + 1);
      mma(k, 0);
    }
  } else {
#pragma unroll
    for (int s = 0; s < kStages - 1; ++s) {  // the prologue: the first kStages - 1 iterations in flight
      if (begin + s < end) {
        it.copy(begin + s, s);
        it.fetch(begin + s);
      }
      cp_async_commit();  // an empty group past the end keeps the count of groups per iteration fixed
    }
    for (int k = begin, st = 0; k < end; ++k) {
      it.store(k, st);                       // iteration k's register-staged operands
      cp_async_wait_pending<kStages - 2>();  // iteration k's copies have landed (this thread's)
      __syncthreads();  // everyone's operands of k are visible; iteration k - 1's stage is consumed
      if (k + kStages - 1 < end) {
        it.copy(k + kStages - 1, st == 0 ? kStages - 1 : st - 1);
        it.fetch(k + kStages - 1);
      }
      cp_async_commit();
      mma(k, st);
      st = st + 1 == kStages ? 0 : st + 1;
    }
  }
}

}  // namespace infer::cuda
