// What the op definitions (engine/ops/<op>.cc) share, so each check is written once: the inputs of a
// node with their role names, the parameter checks (activation, padding, positive fields, axes, the
// window arithmetic of convolutions and pools), the schema conversions of shared fields (activation,
// padding) and the shape helpers of the cost model. Size arithmetic stays bounded by kMaxElements.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "engine/ops/op_def.h"
#include "infer/error.h"

namespace infer::detail {

// No tensor may exceed 2^40 elements; every product is checked before it is formed.
constexpr int64_t kMaxShapeElements = int64_t(1) << 40;
// The most dims a shape in a file may have (tensors, reshape targets; docs/format.md "Limits").
constexpr size_t kMaxRank = 8;

[[noreturn]] void fail(const std::string& where, const std::string& what);

// The inputs of one node plus the op's names for them, so messages say "input 1 (weight)".
class Inputs {
 public:
  Inputs(const std::string& where, const std::vector<Shape>& shapes, const char* const* roles,
         size_t num_roles)
      : where_(where), shapes_(shapes), roles_(roles), num_roles_(num_roles) {}

  // lo..hi inputs (hi == SIZE_MAX: at least lo).
  void expect_count(size_t lo, size_t hi) const;
  std::string label(size_t i) const;  // "input 1 (weight)"
  const Shape& with_rank(size_t i, size_t rank, const char* layout) const;
  void expect_vector(size_t i, int64_t n, const char* what) const;  // shape [n]

  size_t size() const { return shapes_.size(); }
  const std::string& where() const { return where_; }
  const Shape& operator[](size_t i) const { return shapes_[i]; }

 private:
  const std::string& where_;
  const std::vector<Shape>& shapes_;
  const char* const* roles_;
  size_t num_roles_;
};

// ---- parameter checks ----------------------------------------------------------------------------

// `field` names the kind; its parameters are `field`_alpha and `field`_beta, or plain "alpha" and
// "beta" for the Activation op's "kind". Both must be finite for every kind (an ignored parameter too:
// a file that carries a NaN is corrupt); Clip's min (alpha) must not exceed its max (beta). The
// engine-internal PRelu kind passes only where `prelu_epilogue` says the op takes it (conv2d,
// conv_transpose2d, dense), else it is an unknown value like any kind past the schema's.
void check_activation(const std::string& where, const std::string& field, const Activation& a,
                      bool prelu_epilogue = false);
// The inputs of an op with an optional bias and the engine-internal PRelu epilogue: x, weight,
// optional bias; with `a` a PRelu, always x, weight, bias and the slope, checked to be [channels].
// Returns whether `a` is a PRelu (the caller expects the bias and the slope then).
bool expect_epilogue_inputs(const Inputs& in, const Activation& a);
void expect_prelu_slope(const Inputs& in, int64_t channels);  // input 3 is [channels]
void positive(const std::string& where, const std::string& field, int64_t v);  // v > 0
// 0 <= padding, and (when below_kernel) padding < kernel on each side.
void check_padding(const std::string& where, const std::string& prefix, const Padding2D& p, int64_t kh,
                   int64_t kw, bool below_kernel);
// floor((in + pads - kernel) / stride) + 1, requiring the kernel to fit in the padded input. With
// ceil_mode: ceil instead of floor, less one when the last window would start at or after in + pad_a,
// i.e. wholly in the end padding (PyTorch's pooling_output_shape; ONNX opset 19 says the same).
int64_t window_out(const std::string& where, const char* axis, int64_t in, int pad_a, int pad_b,
                   int64_t kernel, int stride, bool ceil_mode = false);
// An axis that keeps the batch: 1 <= axis <= rank - 1.
void check_axis(const std::string& where, int axis, size_t rank);
// An enum field read from a file: 0 <= value <= max, else "field <name> has unknown value v".
void check_enum(const std::string& where, const char* field, int value, int max);
// Every dim >= 1 (>= 0 with allow_empty) and the element count <= 2^40, checked without overflowing.
bool bounded(const Shape& s, std::string* why, bool allow_empty = false);

// ---- element types (engine/ops/quantize.cc) ------------------------------------------------------

// The output's element type of a node whose inputs are stored as `in`, checking them: quantize_linear
// takes float x and scale and a zero point of its dtype (returned); dequantize_linear integer x (i8,
// u8, i32), float scale, a zero point of x's type (returns f32); every other op float tensors only.
DType node_output_dtype(const std::string& where, const OpParams& params, const std::vector<DType>& in);
// The constant values of a quantize_linear / dequantize_linear node (data[i] nullptr for an
// activation): each scale finite and > 0, an i32 zero point 0. Other ops: nothing to check.
void check_quant_constants(const std::string& where, const OpParams& params, const std::vector<DType>& dtypes,
                           const std::vector<const float*>& data, const std::vector<Shape>& shapes);

// ---- the file form of shared fields --------------------------------------------------------------

// An fb::ActivationKind outside the schema's range is "field <field> has unknown value k". The
// parameter values (finite, Clip's min <= max) are checked by check_activation, in the shape rule.
Activation read_activation(fb::ActivationKind kind, float alpha, float beta, const std::string& where,
                           const std::string& field);
Padding2D read_padding(const fb::Padding* p);  // absent: zeros
// FlatBuffers 2.0.8's verifier checks a vector's 4-byte length prefix, not the alignment of 8-byte
// elements, and reading a misaligned int64 in place is undefined behaviour: check before reading.
// (The file itself starts 8-byte aligned: load_graph copies it otherwise.)
void check_aligned(const flatbuffers::Vector<int64_t>* v, const std::string& where);
// The schema's kind; an Error for the engine-internal PRelu epilogue, which has no file form.
fb::ActivationKind fb_kind(ActivationKind k);
inline fb::Padding fb_padding(const Padding2D& p) { return fb::Padding(p.top, p.left, p.bottom, p.right); }

// ---- the cost model's shape helpers --------------------------------------------------------------

double numel_f(const Shape& s);                 // element count as a double
double dim_f(const Shape& s, size_t i);         // dim i, 0 when the shape is too short (malformed: cost 0)
const Shape& input_shape(const NodeDesc& node, size_t i);  // an empty shape when absent
const Shape& output_shape(const NodeDesc& node);           // output 0, or an empty shape

}  // namespace infer::detail
