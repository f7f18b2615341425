// KernelRegistry: the list of kernel variants of every built backend. Filled once, on first use: the
// reference kernels first (register_reference_kernels), then every registration the cpu and cuda
// kernel files queued while libinfer was loaded (INFER_REGISTER_KERNELS, infer/kernel.h), in the order
// of their source paths. Every variant's run goes through check_kernel_call first.
#include <algorithm>
#include <cstring>
#include <utility>

#include "infer/kernel.h"

namespace infer {
namespace {

struct QueuedRegistration {
  const char* file;
  KernelRegistrar registrar;
};
// A function-local static: the kernel files' static objects may be constructed before anything else
// of this file is.
std::vector<QueuedRegistration>& queued_registrations() {
  static std::vector<QueuedRegistration> queue;
  return queue;
}

}  // namespace

KernelRegistration::KernelRegistration(const char* source_file, KernelRegistrar registrar) {
  queued_registrations().push_back({source_file, registrar});
}

const KernelRegistry& KernelRegistry::global() {
  static const KernelRegistry registry = [] {
    KernelRegistry r;
    register_reference_kernels(r);
    // By path, not by load order (the linker's); stable, so one file's registrations keep theirs.
    std::vector<QueuedRegistration> queue = queued_registrations();
    std::stable_sort(queue.begin(), queue.end(), [](const QueuedRegistration& a, const QueuedRegistration& b) {
      return std::strcmp(a.file, b.file) < 0;
    });
    for (const QueuedRegistration& q : queue) q.registrar(r);
    return r;
  }();
  return registry;
}

bool variant_applies(const KernelVariant& v, const NodeDesc& node) {
  if (std::find(v.layouts.begin(), v.layouts.end(), node.layout) == v.layouts.end()) return false;
  if (!v.fuses_prelu && fused_activation(node.params).kind == ActivationKind::PRelu) return false;
  if (!v.fuses_input_epilogue && has_input_epilogue(node.params)) return false;
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
