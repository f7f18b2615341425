// The parts of conv2d's definition that conv_pool2d (a convolution followed by average pooling) reuses:
// its file form, its parameter and shape checks, and its FLOP count.
#pragma once

#include <string>

#include "engine/ops/op_util.h"

namespace infer::detail {

// An absent table (ConvPool2D.conv) means all defaults, as an absent field would. `prefix` ("" or
// "conv.") prefixes field names in messages.
Conv2DParams read_conv(const fb::Conv2D* c, const std::string& where, const std::string& prefix);
flatbuffers::Offset<fb::Conv2D> write_conv(flatbuffers::FlatBufferBuilder& fbb, const Conv2DParams& p);

// Parameter checks, input checks and the output shape. Weight [C_out, C_in/groups, KH, KW]; the dilated
// kernel d*(K-1)+1 must fit in the padded input and each padding must be below it. conv_pool2d
// (grouped=false) accepts groups and dilation 1 only.
Shape conv2d_shape(const std::string& where, const std::string& prefix, const Conv2DParams& p,
                   const Inputs& in, bool grouped);

// N*C_out*out_h*out_w*(C_in/groups)*KH*KW multiply-adds, 2 FLOPs each.
double conv_flops(const NodeDesc& node, double out_h, double out_w);

}  // namespace infer::detail
