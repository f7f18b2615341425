// Backend passes (backend_passes.h). Each asks the registry through the session's KernelSelector
// about a node the pass would make (a merged conv2d with its residual, a squeeze_excite node, a node
// in each layout, a depthwise_pointwise node, a quantized_conv2d node) and rewrites the graph with the
// graph-level passes of passes.h and layout.h.
#include "backend_passes.h"

#include <algorithm>
#include <optional>
#include <utility>

#include <fmt/format.h>

#include "layout.h"
#include "passes.h"
#include "shape_inference.h"

namespace infer::detail {

void ShapedGraph::adopt(Graph rewritten) {
  graph = std::make_shared<const Graph>(std::move(rewritten));
  validate_graph(*graph);
  shapes = infer_shapes(*graph, batch);
}

namespace {

// The variant the session would pick for `desc` among `candidates` (allowed, runnable, applicable:
// the highest priority, the first of equals) and that priority; {nullptr, -1} when none applies.
struct Best {
  const KernelVariant* variant = nullptr;
  int priority = -1;
};
Best best_variant(const BackendPassContext& c, const std::vector<const KernelVariant*>& candidates,
                  const NodeDesc& desc) {
  Best b;
  for (const KernelVariant* v : candidates)
    if (c.kernels.allowed(*v) && v->run && variant_applies(*v, desc))
      if (const int p = KernelSelector::priority(*v, desc); p > b.priority) b = {v, p};
  return b;
}

// Whether channels_last will make this session's convolutions NHWC where a variant prefers it: cpu, and
// cuda outside strict fp32, with the pass on (choose_layouts' rule, and fuse_quantized_conv2d's question).
bool channels_last_runs(const BackendPassContext& c) {
  const std::string& name = c.kernels.backend_name();
  return c.passes.channels_last && (name == "cpu" || (name == "cuda" && c.precision != Precision::FP32));
}

}  // namespace

// The channels_last pass (engine/src/layout.h) on backends and precisions where a layout other than
// NCHW can pay: cuda in fp16 and tf32. Strict fp32 keeps NCHW, where its tuned kernels live. The
// support table asks the registry, per node and layout, for the best priority of an applicable variant
// (only the forced one where --kernel forces the op). Shapes are inferred again for the new values.
void choose_layouts(ShapedGraph& g, const BackendPassContext& c, std::vector<std::string>& pass_log) {
  if (!c.passes.channels_last) {
    pass_log.push_back("channels_last: off");
    return;
  }
  // cuda in fp16 and tf32 (strict fp32 keeps NCHW, where its tuned kernels live); cpu in fp32 (its NHWC
  // variants' priorities make depthwise networks switch, docs/kernels.md); never the reference backend
  if (!channels_last_runs(c)) {
    pass_log.push_back(fmt::format("channels_last: not used ({} in {} keeps NCHW)", c.kernels.backend_name(),
                                   precision_name(c.precision)));
    return;
  }
  std::vector<LayoutSupport> support(g.graph->nodes.size());
  for (size_t i = 0; i < g.graph->nodes.size(); ++i) {
    NodeDesc desc = describe_node(*g.graph, g.shapes, i, c.precision, c.cpu_isa);
    const std::vector<const KernelVariant*> candidates = c.kernels.candidates_for(g.graph->nodes[i]);
    for (Layout layout : {Layout::NCHW, Layout::NHWC}) {
      desc.layout = layout;
      (layout == Layout::NHWC ? support[i].nhwc : support[i].nchw) = best_variant(c, candidates, desc).priority;
    }
  }
  g.graph = std::make_shared<const Graph>(assign_layouts(*g.graph, support, &pass_log));
  validate_graph(*g.graph);
  g.shapes = infer_shapes(*g.graph, g.batch);
}

namespace {

// A fusion's log line: the pass's own, or "<name>: ?" if it logged none.
std::string first_line(const std::vector<std::string>& log, const char* name) {
  return log.empty() ? std::string(name) + ": ?" : log.front();
}

// The fuse_conv_residual backend pass, after shape inference: a conv2d + residual add pair is fused
// where a kernel variant this session may run (the forced one under --kernel) applies to the merged
// node in NCHW (every layout pass starts there): on cpu any conv2d; on cuda ungrouped ones (GEMM,
// cuDNN and direct variants add the residual in their epilogue), grouped ones where cuDNN or direct
// takes them. Shapes are inferred again for the zero biases it adds. Returns its log line.
std::string fuse_residual_where_taken(ShapedGraph& g, const BackendPassContext& c) {
  if (!c.passes.fuse_conv_residual) return "fuse_conv_residual: off";
  const std::vector<const KernelVariant*> candidates = c.kernels.candidates_for("conv2d");
  const std::vector<Shape>& shapes = g.shapes;
  auto takes = [&](const Graph& graph, const Node& conv, int residual, const Activation& act) {
    Conv2DParams p = std::get<Conv2DParams>(conv.params);
    p.add_residual = true;
    p.activation = act;
    NodeDesc desc{p, {}, {}, {}, c.precision, Layout::NCHW, c.cpu_isa};
    for (int id : conv.inputs) {
      desc.input_shapes.push_back(shapes.at(static_cast<size_t>(id)));
      desc.constants.push_back(graph.values.at(static_cast<size_t>(id)).data);
    }
    std::vector<float> zero_bias;  // the one the pass adds to a conv without bias
    if (conv.inputs.size() == 2) {
      zero_bias.assign(static_cast<size_t>(desc.input_shapes[1].at(0)), 0.f);
      desc.input_shapes.push_back(Shape{desc.input_shapes[1].at(0)});
      desc.constants.push_back(zero_bias.data());
    }
    desc.input_shapes.push_back(shapes.at(static_cast<size_t>(residual)));
    desc.constants.push_back(nullptr);
    desc.output_shapes.push_back(shapes.at(static_cast<size_t>(conv.outputs.at(0))));
    return c.kernels.some_variant_runs(candidates, desc);
  };
  std::vector<std::string> log;
  Graph rewritten = fuse_conv_residual(*g.graph, takes, &log);
  g.adopt(std::move(rewritten));
  return first_line(log, "fuse_conv_residual");
}

// The NodeDesc of a node a fusion pass proposes, in NCHW (every layout pass starts there), at the
// shapes of `sg` (values the pass just added have no entry there yet: constants keep their declared
// shape, activations theirs with the leading -1 as sg's batch).
NodeDesc proposed_desc(const Graph& graph, const Node& node, const ShapedGraph& sg, const BackendPassContext& c) {
  NodeDesc desc{node.params, {}, {}, {}, c.precision, Layout::NCHW, c.cpu_isa};
  auto shape_of = [&](int id) {
    const Value& v = graph.values.at(static_cast<size_t>(id));
    if (v.is_constant()) return v.shape;
    if (static_cast<size_t>(id) < sg.shapes.size()) return sg.shapes[static_cast<size_t>(id)];
    Shape s = v.shape;
    if (!s.empty() && s[0] == -1) s[0] = sg.batch;
    return s;
  };
  for (int id : node.inputs) {
    desc.input_shapes.push_back(shape_of(id));
    desc.constants.push_back(graph.values.at(static_cast<size_t>(id)).data);
  }
  desc.output_shapes.push_back(shape_of(node.outputs.at(0)));
  return desc;
}

// The fuse_squeeze_excite backend pass, right after fuse_conv_residual and the same way: a block is
// fused where a squeeze_excite variant this session may run applies to the merged node in NCHW.
std::string fuse_squeeze_excite_where_taken(ShapedGraph& g, const BackendPassContext& c) {
  if (!c.passes.fuse_squeeze_excite) return "fuse_squeeze_excite: off";
  const std::vector<const KernelVariant*> candidates = c.kernels.candidates_for("squeeze_excite");
  auto takes = [&](const Graph& graph, const Node& se) {
    return c.kernels.some_variant_runs(candidates, proposed_desc(graph, se, g, c));
  };
  std::vector<std::string> log;
  Graph rewritten = fuse_squeeze_excite(*g.graph, takes, &log);
  g.adopt(std::move(rewritten));
  return first_line(log, "fuse_squeeze_excite");
}

// The fuse_prelu backend pass, after fuse_squeeze_excite (whose 1x1 convolutions keep their plain
// activations): a per-channel PRelu becomes its producer's epilogue where a variant of the producer's
// op this session may run declares KernelVariant::fuses_prelu and applies to the merged node in NCHW,
// and only where the best such variant ranks no lower than the producer's own choice without the
// PRelu (so the fusion never trades the producer's default kernel for a slower one: cpu's
// conv_transpose2d.segregated_unified, for one, does not fuse). The layout pass then offers the node
// NHWC only where a fusing variant runs NHWC (variant_applies).
std::string fuse_prelu_where_taken(ShapedGraph& g, const BackendPassContext& c) {
  if (!c.passes.fuse_prelu) return "fuse_prelu: off";
  auto best = [&](const std::vector<const KernelVariant*>& candidates, const NodeDesc& desc) {
    return best_variant(c, candidates, desc).priority;
  };
  auto takes = [&](const Graph& graph, const Node& merged) {
    const std::vector<const KernelVariant*> candidates = c.kernels.candidates_for(merged);
    const NodeDesc fused = proposed_desc(graph, merged, g, c);
    NodeDesc plain = fused;  // the producer as it is: no activation, no slope input
    *epilogue(plain.params) = Activation{ActivationKind::None, 0.01f, 0.f};
    plain.input_shapes.pop_back();
    plain.constants.pop_back();
    const int with = best(candidates, fused);
    return with >= 0 && with >= best(candidates, plain);
  };
  std::vector<std::string> log;
  Graph rewritten = fuse_prelu(*g.graph, takes, &log);
  g.adopt(std::move(rewritten));
  return first_line(log, "fuse_prelu");
}

// True when a variant among `candidates` other than the reference one, that this session may run,
// applies to `desc`: what the cpu-only fusions ask (the reference variant of a fused op would be slower
// than the unfused nodes' own kernels).
bool fast_variant_runs(const BackendPassContext& c, const std::vector<const KernelVariant*>& candidates,
                       const NodeDesc& desc) {
  for (const KernelVariant* v : candidates)
    if (v->name != "reference" && c.kernels.allowed(*v) && v->run && variant_applies(*v, desc)) return true;
  return false;
}

// A fusion whose merged node one op's variants run: `pass` rewrites where a variant of `op` other than
// the reference one, that this session may run, applies to the node it proposes, in that node's own
// layout (`ask` empty: passes after channels_last) or in `ask` (before it, where every node is still
// NCHW: the layout the node will get). Returns the pass's log line, "<name>: off" when it is switched off.
using BackendFusion = Graph (*)(Graph, const QuantizedConvPredicate&, std::vector<std::string>*);
std::string backend_fusion(ShapedGraph& g, const BackendPassContext& c, bool on, const char* name, const char* op,
                           std::optional<Layout> ask, BackendFusion pass) {
  if (!on) return std::string(name) + ": off";
  const std::vector<const KernelVariant*> candidates = c.kernels.candidates_for(op);
  auto takes = [&](const Graph& graph, const Node& node) {
    NodeDesc desc = proposed_desc(graph, node, g, c);
    desc.layout = ask ? *ask : node.layout;
    return fast_variant_runs(c, candidates, desc);
  };
  std::vector<std::string> log;
  Graph rewritten = pass(*g.graph, takes, &log);
  g.adopt(std::move(rewritten));
  return first_line(log, name);
}

bool has_op(const Graph& g, OpType op) {
  return std::any_of(g.nodes.begin(), g.nodes.end(), [op](const Node& n) { return n.op() == op; });
}

// The fusions through backend_fusion. Each returns whether it logged, and its line: backends without
// the fused kernel log nothing (their pass logs stay as they were), and the quantization passes log
// only for graphs they could apply to (every float model's pass log stays as it was).
// fuse_depthwise_pointwise, after channels_last (its kernel runs NHWC): a depthwise + 1x1 pair in one
// layout, in that layout (the reference variant would be slower than the pair's own kernels).
bool fuse_depthwise_pointwise_where_taken(ShapedGraph& g, const BackendPassContext& c, std::string& line) {
  if (c.kernels.backend_name() != "cpu") return false;
  line = backend_fusion(g, c, c.passes.fuse_depthwise_pointwise, "fuse_depthwise_pointwise", "depthwise_pointwise",
                        std::nullopt, fuse_depthwise_pointwise);
  return true;
}
// fuse_quantized_conv2d as each backend runs it (see below).
Graph fuse_quantized_conv2d_cpu(Graph g, const QuantizedConvPredicate& takes, std::vector<std::string>* log) {
  return fuse_quantized_conv2d(std::move(g), takes, log, /*interleave=*/true);
}
Graph fuse_quantized_conv2d_cuda(Graph g, const QuantizedConvPredicate& takes, std::vector<std::string>* log) {
  return fuse_quantized_conv2d(std::move(g), takes, log, /*interleave=*/false);
}
// fuse_quantized_conv2d, before channels_last: a QDQ conv2d chain; graphs with a quantize_linear node.
// cpu asks in NCHW (its kernels run either layout); cuda in the layout channels_last will give the node
// (its int8 kernel is NHWC: in strict fp32, which stays NCHW, nothing fuses). A strided transposed
// convolution becomes int8 phases + concat + depth_to_space on cpu only: on cuda those two copies are
// memory-bound passes over the layer's output that cost more than the int8 arithmetic saves (EB-GAN at
// batch 64 fp16 on an H200: 11.1 ms against 1.5 for the float model; docs/quantization.md), so there
// they stay fake-quantized (cuDNN) until one int8 kernel writes the interleaved output itself.
bool fuse_quantized_conv2d_where_taken(ShapedGraph& g, const BackendPassContext& c, std::string& line) {
  const std::string& backend = c.kernels.backend_name();
  if ((backend != "cpu" && backend != "cuda") || !has_op(*g.graph, OpType::QuantizeLinear)) return false;
  const Layout ask = backend == "cuda" && channels_last_runs(c) ? Layout::NHWC : Layout::NCHW;
  line = backend_fusion(g, c, c.passes.fuse_quantized_conv2d, "fuse_quantized_conv2d", "quantized_conv2d", ask,
                        backend == "cpu" ? fuse_quantized_conv2d_cpu : fuse_quantized_conv2d_cuda);
  return true;
}
// fuse_quantized_add, right after fuse_quantized_conv2d (the convolutions take their pairs first; the
// add reads what is left): an add reading QDQ pairs, in NCHW; graphs with a quantize_linear node.
bool fuse_quantized_add_where_taken(ShapedGraph& g, const BackendPassContext& c, std::string& line) {
  if (c.kernels.backend_name() != "cpu" || !has_op(*g.graph, OpType::QuantizeLinear)) return false;
  line = backend_fusion(g, c, c.passes.fuse_quantized_add, "fuse_quantized_add", "add", Layout::NCHW,
                        fuse_quantized_add);
  return true;
}
// quantized_activations, after channels_last (each node's layout is then known): a tensor between
// quantized_conv2d nodes stays 8-bit where each node as it would then be runs, in its layout; graphs
// with a quantized_conv2d node (cpu and cuda: the backends with its kernels).
bool quantized_activations_where_taken(ShapedGraph& g, const BackendPassContext& c, std::string& line) {
  const std::string& backend = c.kernels.backend_name();
  if ((backend != "cpu" && backend != "cuda") || !has_op(*g.graph, OpType::QuantizedConv2D)) return false;
  line = backend_fusion(g, c, c.passes.quantized_activations, "quantized_activations", "quantized_conv2d",
                        std::nullopt, quantized_activations);
  return true;
}

// The fuse_input_epilogue backend pass, cuda only, after channels_last (the reader's variant may be
// NHWC-only): a producer's bias + activation move into its conv2d reader where the variant the reader
// would get without them (its best by priority, in its layout) also runs the merged node (so the
// reader's kernel never changes for it) and the producer's best variant runs it bare. Returns whether
// it logged, and its line.
bool fuse_input_epilogue_where_taken(ShapedGraph& g, const BackendPassContext& c, std::string& line) {
  if (c.kernels.backend_name() != "cuda") return false;
  if (!c.passes.fuse_input_epilogue) {
    line = "fuse_input_epilogue: off";
    return true;
  }
  auto takes = [&](const Graph& graph, const Node& consumer, const Node& producer) {
    // `consumer` has the merged params and its own inputs (x, weight, optional bias): the reader as
    // it is, and as the pass would make it (zero biases stand in for those it would add)
    NodeDesc plain = proposed_desc(graph, consumer, g, c);
    plain.layout = consumer.layout;
    auto& pp = std::get<Conv2DParams>(plain.params);
    pp.input_epilogue = false;
    pp.input_activation = Activation{};
    NodeDesc merged = proposed_desc(graph, consumer, g, c);
    merged.layout = consumer.layout;
    const std::vector<float> zero_out(static_cast<size_t>(merged.input_shapes[1].at(0)), 0.f);
    const std::vector<float> zero_in(static_cast<size_t>(merged.input_shapes[0].at(1)), 0.f);
    if (merged.input_shapes.size() == 2) {
      merged.input_shapes.push_back(Shape{merged.input_shapes[1].at(0)});
      merged.constants.push_back(zero_out.data());
    }
    merged.input_shapes.push_back(Shape{merged.input_shapes[0].at(1)});
    merged.constants.push_back(zero_in.data());
    const std::vector<const KernelVariant*> readers = c.kernels.candidates_for(consumer);
    const KernelVariant* own = best_variant(c, readers, plain).variant;
    if (!own || !own->fuses_input_epilogue || !variant_applies(*own, merged)) return false;
    NodeDesc bare = proposed_desc(graph, producer, g, c);
    bare.layout = producer.layout;
    return best_variant(c, c.kernels.candidates_for(producer), bare).variant != nullptr;
  };
  std::vector<std::string> log;
  Graph rewritten = fuse_input_epilogue(*g.graph, takes, &log);
  g.adopt(std::move(rewritten));
  line = first_line(log, "fuse_input_epilogue");
  return true;
}

}  // namespace

std::vector<std::string> run_backend_passes(ShapedGraph& g, const BackendPassContext& c,
                                            std::vector<std::string>& pass_log) {
  std::vector<std::string> deferred;
  deferred.push_back(fuse_residual_where_taken(g, c));
  deferred.push_back(fuse_squeeze_excite_where_taken(g, c));
  deferred.push_back(fuse_prelu_where_taken(g, c));
  std::string line;
  if (fuse_quantized_conv2d_where_taken(g, c, line)) deferred.push_back(line);
  if (fuse_quantized_add_where_taken(g, c, line)) deferred.push_back(line);
  choose_layouts(g, c, pass_log);
  if (fuse_depthwise_pointwise_where_taken(g, c, line)) deferred.push_back(line);
  if (quantized_activations_where_taken(g, c, line)) deferred.push_back(line);
  if (fuse_input_epilogue_where_taken(g, c, line)) deferred.push_back(line);
  return deferred;
}


// One pass-log line for fold_width, from the variants chosen (a folded variant requires the pass).
std::string fold_width_log(const Graph& graph, const std::vector<const KernelVariant*>& variants,
                           const PassOptions& passes) {
  if (!passes.fold_width) return "fold_width: off";
  std::string names;
  int count = 0;
  for (size_t i = 0; i < variants.size(); ++i)
    if (variants[i]->requires_pass == "fold_width") {
      names += (count++ ? ", " : "") + graph.nodes[i].name;
    }
  return count ? fmt::format("fold_width: {} convolution(s) width-folded ({})", count, names)
               : "fold_width: no convolution width-folded";
}

}  // namespace infer::detail
