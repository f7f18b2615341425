// The checks and conversions the op definitions share (op_util.h), and the op table itself: one
// pointer per op, in OpType order, made from INFER_OPS, so op_def(op) is an index.
#include "engine/ops/op_util.h"

#include <cmath>
#include <cstdio>
#include <iterator>
#include <type_traits>
#include <variant>

namespace infer::detail {

namespace {

// INFER_OPS (which makes OpType) names each op's parameter struct: checked against OpParams here, once.
#define INFER_OP_CHECK(type, params, name)                                                              \
  static_assert(std::is_same_v<std::variant_alternative_t<static_cast<size_t>(OpType::type), OpParams>, \
                               params>,                                                                 \
                "INFER_OPS and OpParams disagree at " #type);
INFER_OPS(INFER_OP_CHECK)
#undef INFER_OP_CHECK

#define INFER_OP_ADDRESS(type, params, name) &name##_op,
constexpr const OpDef* kOpTable[] = {INFER_OPS(INFER_OP_ADDRESS)};
#undef INFER_OP_ADDRESS
static_assert(std::size(kOpTable) == kNumOpTypes && std::variant_size_v<OpParams> == kNumOpTypes,
              "every op has one OpDef");

// A float as a short decimal ("6", "0.5") for messages.
std::string fmt_float(float v) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%g", double(v));
  return buf;
}

}  // namespace

const OpDef& op_def(OpType op) {
  const size_t i = static_cast<size_t>(op);
  if (i >= std::size(kOpTable)) throw Error("unknown op " + std::to_string(i));
  return *kOpTable[i];
}

void fail(const std::string& where, const std::string& what) { throw Error(where + ": " + what); }

// ---- Inputs --------------------------------------------------------------------------------------

void Inputs::expect_count(size_t lo, size_t hi) const {
  const size_t n = shapes_.size();
  if (n >= lo && n <= hi) return;
  std::string want = lo == hi ? std::to_string(lo)
                     : hi == SIZE_MAX ? "at least " + std::to_string(lo)
                                      : std::to_string(lo) + " or " + std::to_string(hi);
  fail(where_, "expects " + want + " inputs, got " + std::to_string(n));
}

std::string Inputs::label(size_t i) const {
  std::string s = "input " + std::to_string(i);
  if (i < num_roles_ && roles_[i]) s += std::string(" (") + roles_[i] + ")";
  return s;
}

const Shape& Inputs::with_rank(size_t i, size_t rank, const char* layout) const {
  const Shape& s = shapes_[i];
  if (s.size() != rank)
    fail(where_, label(i) + " has shape " + shape_str(s) + " but must have rank " + std::to_string(rank) +
                     " " + layout);
  return s;
}

void Inputs::expect_vector(size_t i, int64_t n, const char* what) const {
  const Shape& s = shapes_[i];
  if (s.size() != 1 || s[0] != n)
    fail(where_, label(i) + " has shape " + shape_str(s) + " but must be [" + std::to_string(n) + "] (" +
                     what + ")");
}

// ---- parameter checks ----------------------------------------------------------------------------

void check_activation(const std::string& where, const std::string& field, const Activation& a,
                      bool prelu_epilogue) {
  const int k = static_cast<int>(a.kind);
  if ((k < 0 || k >= kNumActivationKinds) && !(prelu_epilogue && a.kind == ActivationKind::PRelu))
    fail(where, "field " + field + " has unknown value " + std::to_string(k));
  const std::string alpha = field == "kind" ? std::string("alpha") : field + "_alpha";
  const std::string beta = field == "kind" ? std::string("beta") : field + "_beta";
  if (!std::isfinite(a.alpha)) fail(where, "field " + alpha + " must be finite");
  if (!std::isfinite(a.beta)) fail(where, "field " + beta + " must be finite");
  if (a.kind == ActivationKind::Clip && !(a.alpha <= a.beta))
    fail(where, "field " + alpha + " (clip min " + fmt_float(a.alpha) + ") must be <= " + beta +
                    " (clip max " + fmt_float(a.beta) + ")");
}

bool expect_epilogue_inputs(const Inputs& in, const Activation& a) {
  const bool prelu = a.kind == ActivationKind::PRelu;
  if (prelu) in.expect_count(4, 4);  // x, weight, bias, slope
  else in.expect_count(2, 3);
  return prelu;
}

void expect_prelu_slope(const Inputs& in, int64_t channels) {
  const Shape& s = in[3];
  if (s.size() != 1 || s[0] != channels)
    fail(in.where(), "input 3 (prelu slope) has shape " + shape_str(s) + " but must be [" +
                         std::to_string(channels) + "] (one per output channel)");
}

fb::ActivationKind fb_kind(ActivationKind k) {
  if (k == ActivationKind::PRelu)
    throw Error("activation prelu (per-channel slopes) is engine-internal (the fuse_prelu pass) and has "
                "no file form");
  return static_cast<fb::ActivationKind>(k);
}

void positive(const std::string& where, const std::string& field, int64_t v) {
  if (v <= 0) fail(where, "field " + field + " must be > 0 (got " + std::to_string(v) + ")");
}

void check_padding(const std::string& where, const std::string& prefix, const Padding2D& p, int64_t kh,
                   int64_t kw, bool below_kernel) {
  struct Side { const char* name; int value; int64_t kernel; const char* axis; };
  const Side sides[] = {{"top", p.top, kh, "height"}, {"left", p.left, kw, "width"},
                        {"bottom", p.bottom, kh, "height"}, {"right", p.right, kw, "width"}};
  for (const Side& s : sides) {
    const std::string field = prefix + "padding." + s.name;
    if (s.value < 0)
      fail(where, "field " + field + " must be >= 0 (got " + std::to_string(s.value) + ")");
    if (below_kernel && s.value >= s.kernel)
      fail(where, "field " + field + " must be < kernel " + s.axis + " " + std::to_string(s.kernel) +
                      " (got " + std::to_string(s.value) + ")");
  }
}

int64_t window_out(const std::string& where, const char* axis, int64_t in, int pad_a, int pad_b,
                   int64_t kernel, int stride, bool ceil_mode) {
  const int64_t padded = in + pad_a + pad_b;  // in <= 2^40 and pads are int: no overflow
  if (kernel > padded)
    fail(where, std::string("kernel ") + axis + " " + std::to_string(kernel) +
                    " is larger than the padded input " + axis + " " + std::to_string(padded));
  if (!ceil_mode) return (padded - kernel) / stride + 1;
  int64_t out = (padded - kernel + stride - 1) / stride + 1;
  if ((out - 1) * stride >= in + pad_a) --out;
  return out;
}

void check_axis(const std::string& where, int axis, size_t rank) {
  if (rank < 2) fail(where, "input 0 has rank " + std::to_string(rank) + " but must have rank >= 2");
  if (axis < 1 || axis > static_cast<int>(rank) - 1)
    fail(where, "field axis must be in [1, " + std::to_string(rank - 1) + "] (got " +
                    std::to_string(axis) + ")");
}

void check_enum(const std::string& where, const char* field, int value, int max) {
  if (value < 0 || value > max)
    fail(where, std::string("field ") + field + " has unknown value " + std::to_string(value));
}

bool bounded(const Shape& s, std::string* why, bool allow_empty) {
  int64_t n = 1;
  for (int64_t d : s) {
    if (d < (allow_empty ? 0 : 1)) {
      *why = "dimension " + std::to_string(d) + " is not >= " + (allow_empty ? "0" : "1");
      return false;
    }
    if (d == 0) n = 0;  // empty: no element count to overflow
    if (n != 0 && d > kMaxShapeElements / n) {
      *why = "more than 2^40 elements";
      return false;
    }
    n *= d;
  }
  return true;
}

// ---- the file form of shared fields --------------------------------------------------------------

Activation read_activation(fb::ActivationKind kind, float alpha, float beta, const std::string& where,
                           const std::string& field) {
  static_assert(static_cast<int>(fb::ActivationKind::MAX) == kNumActivationKinds - 1,
                "schema/model.fbs and infer/ops.h disagree on the activation kinds");
  const int k = static_cast<int>(kind);
  if (k < static_cast<int>(fb::ActivationKind::MIN) || k > static_cast<int>(fb::ActivationKind::MAX))
    throw Error(where + ": field " + field + " has unknown value " + std::to_string(k));
  return Activation{static_cast<ActivationKind>(k), alpha, beta};
}

Padding2D read_padding(const fb::Padding* p) {
  Padding2D out;
  if (p) {
    out.top = p->top();
    out.left = p->left();
    out.bottom = p->bottom();
    out.right = p->right();
  }
  return out;
}

void check_aligned(const flatbuffers::Vector<int64_t>* v, const std::string& where) {
  if (v && reinterpret_cast<uintptr_t>(v->Data()) % alignof(int64_t) != 0)
    throw Error(where + " is not 8-byte aligned in the file (the file is corrupt)");
}

// ---- the cost model's shape helpers --------------------------------------------------------------

double numel_f(const Shape& s) {
  double n = 1;
  for (int64_t d : s) n *= static_cast<double>(d);
  return n;
}

double dim_f(const Shape& s, size_t i) { return i < s.size() ? static_cast<double>(s[i]) : 0.0; }

namespace {
const Shape kNoShape;
}

const Shape& input_shape(const NodeDesc& node, size_t i) {
  return i < node.input_shapes.size() ? node.input_shapes[i] : kNoShape;
}

const Shape& output_shape(const NodeDesc& node) {
  return node.output_shapes.empty() ? kNoShape : node.output_shapes[0];
}

}  // namespace infer::detail
