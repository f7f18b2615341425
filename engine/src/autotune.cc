// Autotune (autotune.h): per-node timing proposes, whole-forward replay decides. A node timed alone
// misleads: cuDNN's host time counts against it outside a CUDA graph, and a variant that wins alone
// can lose in the graph (workspace, layout, cache effects on its neighbours). So every change the
// per-node timing proposes is kept only if the replayed forward confirms it.
#include "autotune.h"

#include <algorithm>
#include <set>

#include <fmt/format.h>
#include <spdlog/spdlog.h>

namespace infer::detail {
namespace {

// Step i of `choice` runs `variant` with what its prepare() returned (`size` device bytes).
void assign_step(KernelChoice& choice, size_t i, const KernelVariant* variant, std::shared_ptr<void> prepared,
                 uint64_t size) {
  choice.variants[i] = variant;
  choice.prepared[i] = std::move(prepared);
  choice.prepared_bytes = choice.prepared_bytes - choice.prepared_size[i] + size;
  choice.prepared_size[i] = size;
}

}  // namespace

void set_variant(KernelChoice& choice, size_t i, const KernelVariant* variant, const NodeDesc& desc,
                 Backend& backend) {
  const uint64_t before = backend.allocated_bytes();
  std::shared_ptr<void> prepared = variant->prepare ? variant->prepare(desc) : nullptr;
  assign_step(choice, i, variant, std::move(prepared), backend.allocated_bytes() - before);
}

std::string AutotuneReport::summary() const {
  if (proposed == 0)
    return fmt::format("autotune: the default plan is the fastest per node ({:.4f} ms a forward)", default_ms);
  return fmt::format(
      "autotune: {} node(s) faster alone with another variant; {} kept by whole-forward replay "
      "({} timings): {:.4f} ms a forward, default {:.4f} ms ({:.3f}x)",
      proposed, changed, trials, tuned_ms, default_ms, tuned_ms > 0 ? default_ms / tuned_ms : 0.0);
}

namespace {

// The per-node proposal and, per step, how much faster its proposed variant ran alone (ms).
struct Proposal {
  KernelChoice choice;
  std::vector<double> gain_ms;
};

Proposal time_nodes(const KernelSelector& selector, const Graph& graph, const std::vector<NodeDesc>& descs,
                    const std::vector<KernelCall>& calls, Backend& backend, DeviceBuffer& arena,
                    const KernelChoice& current) {
  constexpr int kTimed = 3;
  const KernelRegistry& registry = KernelRegistry::global();
  Proposal out{current, std::vector<double>(calls.size(), 0.0)};
  backend.zero(arena.data(), static_cast<size_t>(arena.bytes()));
  std::unique_ptr<Timer> timer = backend.make_timer(2 * kTimed);
  for (size_t i = 0; i < calls.size(); ++i) {
    if (current.forced_step.count(i)) continue;
    const std::string op = op_name(graph.nodes[i].op());
    std::vector<const KernelVariant*> candidates;
    for (const KernelVariant* v : registry.variants(selector.kernel_backend(), op))
      if (selector.allowed(*v) && variant_applies(*v, descs[i]) && v->run) candidates.push_back(v);
    if (candidates.size() < 2) continue;
    const KernelVariant* best = nullptr;
    std::shared_ptr<void> best_prepared;
    uint64_t best_prep_bytes = 0;
    double best_ms = 0, current_ms = 0;
    std::string log;
    for (const KernelVariant* v : candidates) {
      const uint64_t before = backend.allocated_bytes();
      const bool is_current = v == current.variants[i];
      std::shared_ptr<void> prep =
          is_current ? current.prepared[i] : (v->prepare ? v->prepare(descs[i]) : nullptr);
      const uint64_t prep_bytes = is_current ? current.prepared_size[i] : backend.allocated_bytes() - before;
      const size_t ws = v->workspace_bytes ? v->workspace_bytes(descs[i]) : 0;
      std::unique_ptr<DeviceBuffer> workspace = backend.allocate(ws);
      KernelCall call{descs[i], calls[i].inputs, calls[i].outputs, workspace->data(), prep.get(),
                      backend.context()};
      v->run(call);  // warm-up
      for (int r = 0; r < kTimed; ++r) {
        timer->mark(2 * r);
        v->run(call);
        timer->mark(2 * r + 1);
      }
      backend.synchronize();
      std::vector<double> ms;
      for (int r = 0; r < kTimed; ++r) ms.push_back(timer->elapsed_ms(2 * r, 2 * r + 1));
      const double t = median(ms);
      log += fmt::format(" {}={:.4f}ms", v->name, t);
      if (is_current) current_ms = t;
      if (!best || t < best_ms) {
        best = v;
        best_ms = t;
        best_prepared = prep;
        best_prep_bytes = prep_bytes;
      }
    }
    spdlog::debug("{}: autotune alone:{} -> {}", node_where(graph, i), log, best->name);
    if (best == current.variants[i]) continue;
    assign_step(out.choice, i, best, best_prepared, best_prep_bytes);
    out.gain_ms[i] = current_ms - best_ms;
  }
  return out;
}

// Step i of `from` in `into`.
void take_step(KernelChoice& into, const KernelChoice& from, size_t i) {
  assign_step(into, i, from.variants[i], from.prepared[i], from.prepared_size[i]);
}

}  // namespace

AutotuneResult autotune(const KernelSelector& selector, const Graph& graph, const std::vector<NodeDesc>& descs,
                        const std::vector<KernelCall>& calls, Backend& backend, DeviceBuffer& arena,
                        const KernelChoice& current, const TimePlan& time_plan) {
  // Per-node first: `calls` and `arena` are the session's as built now, before any rebuild.
  const Proposal proposal = time_nodes(selector, graph, descs, calls, backend, arena, current);
  std::vector<size_t> differing;
  for (size_t i = 0; i < current.variants.size(); ++i)
    if (proposal.choice.variants[i] != current.variants[i]) differing.push_back(i);
  // Largest gain alone first: those are the likeliest to pay in the whole forward too.
  std::stable_sort(differing.begin(), differing.end(),
                   [&](size_t a, size_t b) { return proposal.gain_ms[a] > proposal.gain_ms[b]; });

  AutotuneResult result{current, {}};
  AutotuneReport& r = result.report;
  r.proposed = static_cast<int>(differing.size());
  r.default_ms = time_plan(current);
  r.trials = 1;
  r.tuned_ms = r.default_ms;
  if (differing.empty()) return result;  // built with the default by the call above

  constexpr double kMinGain = 0.005;  // a change must make the forward this much faster to count
  const double proposal_ms = time_plan(proposal.choice);
  ++r.trials;
  spdlog::debug("autotune: whole forward, default {:.4f} ms, per-node proposal {:.4f} ms", r.default_ms,
                proposal_ms);
  bool built_best = true;  // the session is built with result.choice
  if (proposal_ms < r.default_ms * (1 - kMinGain)) {
    result.choice = proposal.choice;
    r.tuned_ms = proposal_ms;
  } else {
    built_best = false;
  }
  // Each differing node toggled on the better plan: back to the default on the proposal, or to the
  // proposal on the default. Bounded: a plan with hundreds of differing nodes takes the first 48.
  const size_t max_trials = std::min<size_t>(differing.size(), 48);
  if (differing.size() > 1) {  // one node: the two plans above are all there is
    for (size_t k = 0; k < max_trials; ++k) {
      const size_t i = differing[k];
      KernelChoice trial = result.choice;
      take_step(trial, trial.variants[i] == current.variants[i] ? proposal.choice : current, i);
      const double t = time_plan(trial);
      ++r.trials;
      spdlog::debug("{}: autotune replay {} -> {:.4f} ms (best {:.4f})", node_where(graph, i),
                    trial.variants[i]->name, t, r.tuned_ms);
      if (t < r.tuned_ms * (1 - kMinGain)) {
        result.choice = std::move(trial);
        r.tuned_ms = t;
        built_best = true;
      } else {
        built_best = false;
      }
    }
  }
  if (!built_best) {  // leave the session built with the choice, and measure it once more
    const double t = time_plan(result.choice);
    ++r.trials;
    spdlog::debug("autotune: chosen plan re-timed {:.4f} ms (best seen {:.4f})", t, r.tuned_ms);
  }
  for (size_t i = 0; i < current.variants.size(); ++i)
    r.changed += result.choice.variants[i] != current.variants[i] ? 1 : 0;
  return result;
}

std::optional<KernelChoice> apply_cached_plan(const CachedPlan& cached, const KernelSelector& selector,
                                              const Graph& graph, const std::vector<NodeDesc>& descs,
                                              Backend& backend, const KernelChoice& current) {
  const KernelRegistry& registry = KernelRegistry::global();
  auto stale = [&](const std::string& why) {
    spdlog::warn("plan cache entry {} not used: {}", cached.key, why);
    return std::nullopt;
  };
  if (cached.variants.size() != graph.nodes.size())
    return stale(fmt::format("{} nodes, the graph has {}", cached.variants.size(), graph.nodes.size()));
  KernelChoice choice = current;
  for (size_t i = 0; i < graph.nodes.size(); ++i) {
    const Node& node = graph.nodes[i];
    auto it = cached.variants.find(node.name);
    if (it == cached.variants.end()) return stale("no variant for node '" + node.name + "'");
    if (current.forced_step.count(i) || it->second == current.variants[i]->name) continue;
    const KernelVariant* v = registry.find(selector.kernel_backend(), op_name(node.op()), it->second);
    if (!v || !v->run || !selector.allowed(*v) || !variant_applies(*v, descs[i]))
      return stale(fmt::format("variant '{}' does not run {}", it->second, node_where(graph, i)));
    set_variant(choice, i, v, descs[i], backend);
  }
  return choice;
}

namespace {

// Values in [-1, 1) from a fixed seed (a linear congruential generator): the same inputs every run,
// never all zeros (which some kernels would skip through faster).
Tensor seeded_tensor(const Shape& shape, uint64_t seed) {
  Tensor t(shape);
  uint64_t x = seed * 6364136223846793005ull + 1442695040888963407ull;
  for (float& v : t.data) {
    x = x * 6364136223846793005ull + 1442695040888963407ull;
    v = static_cast<float>(static_cast<double>(x >> 40) / static_cast<double>(1ull << 23) - 1.0);
  }
  return t;
}

}  // namespace

std::string choose_plan(const ChoosePlanRequest& request, Executor& executor,
                        const std::function<void(KernelChoice)>& use_and_build) {
  Backend& backend = executor.backend();
  const std::string key =
      request.plan_cache.empty() ? "" : plan_key(request.graph, request.descs, request.key);
  if (!key.empty()) {
    if (std::optional<CachedPlan> cached = load_plan(request.plan_cache, key)) {
      if (std::optional<KernelChoice> c = apply_cached_plan(*cached, request.selector, request.graph,
                                                             request.descs, backend, request.current)) {
        use_and_build(std::move(*c));
        return fmt::format("plan cache: entry {} of {} (autotuned: {:.4f} ms a forward, default {:.4f} ms)",
                           key, request.plan_cache, cached->tuned_ms, cached->default_ms);
      }
    }
  }
  if (!request.autotune) {
    use_and_build(request.current);  // a copy: the parameter is by value
    return "";
  }
  AutotuneResult tuned;
  {
    // A copy: request.current is the session's own choice, which every use_and_build replaces.
    const KernelChoice default_choice = request.current;
    use_and_build(default_choice);
    std::vector<Tensor> in;
    for (size_t k = 0; k < request.inputs.size(); ++k)
      in.push_back(seeded_tensor(request.inputs[k].shape, 1234 + k));
    std::vector<TensorView> views;
    for (const Tensor& t : in) views.push_back({t.shape, t.data.data()});
    auto time_plan = [&](const KernelChoice& choice) {
      use_and_build(choice);
      const double once = executor.benchmark(views, 1, 2)[0];
      const int runs = std::clamp(static_cast<int>(200.0 / std::max(once, 1e-3)), 5, 50);
      return median(executor.benchmark(views, runs, 1));
    };
    // Per-node timing runs on the calls and arena of the build above, before any rebuild.
    tuned = autotune(request.selector, request.graph, request.descs, executor.calls(), backend,
                     executor.arena(), default_choice, time_plan);
  }
  // Built once more now that the other candidates' prepared weights and workspaces are freed, so the
  // arena is placed as in a fresh session (on an H200 at batch 1 the tuning session otherwise ran its
  // plan 2-3 us slower than a fresh session with the same plan did).
  use_and_build(tuned.choice);
  if (!key.empty()) {
    CachedPlan saved{key, {}, tuned.report.default_ms, tuned.report.tuned_ms};
    for (size_t i = 0; i < request.graph.nodes.size(); ++i)
      saved.variants[request.graph.nodes[i].name] = tuned.choice.variants[i]->name;
    save_plan(request.plan_cache, saved,
              {{"model", request.graph.name}, {"backend", request.key.backend}, {"device", request.key.device},
               {"precision", precision_name(request.key.precision)},
               {"batch", std::to_string(request.key.batch)}, {"cpu_isa", request.key.cpu_isa}});
  }
  return tuned.report.summary();
}

}  // namespace infer::detail
