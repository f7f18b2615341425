// Every op once, in OpType order (infer/ops.h): X(OpType enumerator, parameter struct, name). The op
// table (op_def.h) is made from this list: each op's definition is the object <name>_op in
// engine/ops/<name>.cc and its reference kernel is ref::run_<name> in kernels/reference/. op_util.cc
// checks at compile time that the list agrees with OpType and OpParams, so none can drift.
#pragma once

#define INFER_OPS(X)                                           \
  X(Conv2D, Conv2DParams, conv2d)                              \
  X(ConvTranspose2D, ConvTranspose2DParams, conv_transpose2d)  \
  X(Pool2D, Pool2DParams, pool2d)                              \
  X(Dense, DenseParams, dense)                                 \
  X(BatchNorm, BatchNormParams, batchnorm)                     \
  X(Activation, ActivationParams, activation)                  \
  X(Flatten, FlattenParams, flatten)                           \
  X(Reshape, ReshapeParams, reshape)                           \
  X(Softmax, SoftmaxParams, softmax)                           \
  X(Add, AddParams, add)                                       \
  X(Concat, ConcatParams, concat)                              \
  X(ConvPool2D, ConvPool2DParams, conv_pool2d)                 \
  X(Binary, BinaryParams, binary)                              \
  X(Pad2D, Pad2DParams, pad2d)                                 \
  X(InstanceNorm, InstanceNormParams, instance_norm)           \
  X(ChannelShuffle, ChannelShuffleParams, channel_shuffle)     \
  X(Slice, SliceParams, slice)                                 \
  X(Resize, ResizeParams, resize)                              \
  X(DepthToSpace, DepthToSpaceParams, depth_to_space)          \
  X(Layout, LayoutParams, layout)                              \
  X(SqueezeExcite, SqueezeExciteParams, squeeze_excite)
