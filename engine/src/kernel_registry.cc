// KernelRegistry: the list of kernel variants of every built backend. Filled once, on first use, by
// each kernel folder's register_*_kernels() (explicit calls: static-initialiser registration is
// silently dropped by linkers). Every variant's run goes through check_kernel_call first.
#include <algorithm>

#include "engine/src/kernel_api.h"

namespace infer {

const KernelRegistry& KernelRegistry::global() {
  static const KernelRegistry registry = [] {
    KernelRegistry r;
    register_reference_kernels(r);
    register_cpu_kernels(r);
#ifdef INFER_WITH_CUDA
    register_cuda_kernels(r);
#endif
    return r;
  }();
  return registry;
}

bool variant_applies(const KernelVariant& v, const NodeDesc& node) {
  if (std::find(v.layouts.begin(), v.layouts.end(), node.layout) == v.layouts.end()) return false;
  return !v.applicable || v.applicable(node);
}

void KernelRegistry::add(const std::string& backend, std::vector<KernelVariant> variants) {
  for (KernelVariant& v : variants) {
    v.backend = backend;
    auto entry = std::make_unique<KernelVariant>(std::move(v));
    // The checked run refers to the variant by address: entries are never moved once added.
    const KernelVariant* self = entry.get();
    entry->run = [self, run = std::move(entry->run)](const KernelCall& call) {
      check_kernel_call(*self, call);
      run(call);
    };
    variants_.push_back(std::move(entry));
  }
}

std::vector<const KernelVariant*> KernelRegistry::variants(const std::string& backend,
                                                           const std::string& op) const {
  std::vector<const KernelVariant*> out;
  for (const auto& v : variants_)
    if (v->backend == backend && v->op == op) out.push_back(v.get());
  std::stable_sort(out.begin(), out.end(), [](const KernelVariant* a, const KernelVariant* b) {
    return a->priority > b->priority;
  });
  return out;
}

const KernelVariant* KernelRegistry::find(const std::string& backend, const std::string& op,
                                          const std::string& name) const {
  for (const auto& v : variants_)
    if (v->backend == backend && v->op == op && v->name == name) return v.get();
  return nullptr;
}

std::vector<const KernelVariant*> KernelRegistry::all() const {
  std::vector<const KernelVariant*> out;
  for (const auto& v : variants_) out.push_back(v.get());
  return out;
}

}  // namespace infer
