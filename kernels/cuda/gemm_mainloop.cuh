// The one k-loop of the hand-written CUDA GEMMs (CUTLASS's Mma of <Mma, Epilogue>, its MmaMultistage
// schedule in plain CUDA-C): a pipeline of kStages shared-memory stages over a block's k-iterations
// [begin, end), generic in the tile iterator (what one k-iteration copies into a stage) and the Mma
// (what the warps multiply from a stage). Every thread of the block calls it (it holds the barriers).
// kStages >= 2: kStages - 1 iterations in flight, one barrier per iteration. CUDA-C only.
#pragma once

#include <type_traits>

#include "kernels/cuda/gemm_tiles.cuh"

namespace infer::cuda {

// A tile iterator made of two callables (lambdas over the kernel's indices):
//   load(k, stage): starts iteration k's copies into `stage` (cp_async16, uncommitted: the loop commits
//                   one group per iteration) and / or its loads into registers;
//   store(stage):   writes the registers of the last load() into `stage` (operands gathered through
//                   registers, e.g. an implicit im2col with bounds); with kStages <= 2 only.
struct NoStore {
  __device__ __forceinline__ void operator()(int) const {}
};
template <class Load, class Store = NoStore>
struct TileIterator {
  Load load;
  Store store = {};
};
template <class Load, class Store = NoStore>
__device__ __forceinline__ TileIterator<Load, Store> tile_iterator(Load load, Store store = {}) {
  return {load, store};
}

// mma(k, stage) multiplies iteration k's operands in `stage` into the caller's accumulators (through a
// warp-level Mma policy:
// WarpTile32, ThreadTile4x4, WarpMma16816 in gemm_tiles.cuh). Stage s of iteration k is s = (k - begin)
// % kStages; it is refilled only after every thread has passed the barrier that follows its mma.
template <int kStages, class Iterator, class Mma>
__device__ __forceinline__ void gemm_mainloop(Iterator& it, int begin, int end, Mma&& mma) {
  static_assert(kStages >= 1, "at least one stage");
  static_assert(kStages <= 2 || std::is_same_v<std::decay_t<decltype(it.store)>, NoStore>,
                "register-staged operands hold one iteration: at most 2 stages");
  if constexpr (kStages == 1) {
    for (int k = begin; k < end; ++k) {
      __syncthreads();  // the previous iteration's reads of the stage are done
      it.load(k, 0);
      cp_async_commit();
      it.store(0);
      cp_async_wait_all();
      __syncthreads();
      mma(k, 0);
    }
  } else {
#pragma unroll
    for (int s = 0; s < kStages - 1; ++s) {  // the prologue: the first kStages - 1 iterations in flight
      if (begin + s < end) it.load(begin + s, s);
      cp_async_commit();  // an empty group past the end keeps the count of groups per iteration fixed
    }
    for (int k = begin, st = 0; k < end; ++k) {
      it.store(st);                          // iteration k's register-staged operands
      cp_async_wait_pending<kStages - 2>();  // iteration k's copies have landed (this thread's)
      __syncthreads();  // everyone's operands of k are visible; iteration k - 1's stage is consumed
      if (k + kStages - 1 < end) it.load(k + kStages - 1, st == 0 ? kStages - 1 : st - 1);
      cp_async_commit();
      mma(k, st);
      st = st + 1 == kStages ? 0 : st + 1;
    }
  }
}

}  // namespace infer::cuda
