// The im2col + cuBLAS GEMM convolution shared by the CUDA conv-shaped kernels (conv2d, conv_pool2d,
// and usable by conv_transpose2d's flipped / zero-insertion variants): the geometry of one image's
// convolution (any stride, top/left padding as an offset that may be negative, output size given
// explicitly, optionally a box sum per column element for conv_pool2d's direct_sum), a column-matrix
// kernel, and a driver that runs im2col + one strided-batched GEMM per chunk of images so the column
// workspace stays bounded (1 GiB). Host-callable; the kernels live in im2col.cu.
#pragma once

#include <cstddef>
#include <cstdint>

#include "infer/kernel.h"  // ConvProblem (dilation 1 here), im2col_is_identity
#include "kernels/cuda/context.h"

namespace infer::cuda {

// The column workspace of every driver below is at most this many bytes (but always one image).
// 1 GiB: VGG16 conv1_2 at 224x224 needs 116 MB of fp32 columns per image, so 256 MiB held only 2
// images per chunk (many small GEMMs and launches at batch 64); 1 GiB holds 9.
constexpr size_t kMaxColumnBytes = size_t(1) << 30;

inline size_t align256(size_t bytes) { return (bytes + 255) / 256 * 256; }

// How many of `images` images to process per chunk when each needs `per_image_bytes` of workspace:
// all of them when they fit in `budget`, else as many as fit, but at least 1 (0 when images == 0).
int64_t images_per_chunk(int64_t images, size_t per_image_bytes, size_t budget = kMaxColumnBytes);

// Chunk size and column workspace of conv_gemm() for `images` images of geometry g (0 bytes when
// im2col is the identity): images_per_chunk(images, one column matrix) column matrices.
int64_t conv_gemm_chunk(const ConvProblem& g, int64_t images, Precision p);
size_t conv_gemm_workspace_bytes(const ConvProblem& g, int64_t images, Precision p);

// Column matrices of `images` images: image i is x + i*x_image_stride (elements) [C][H][W]; its
// matrix is col + i*col_elements() [C*KH*KW][HO*WO], row (c*KH + ky)*KW + kx, column oy*WO + ox,
// = x[c][oy*stride_h - pad_top + ky][ox*stride_w - pad_left + kx], 0 outside the image (with a box:
// the sum over dy, dx < box of x[.. + dy*box_stride_h][.. + dx*box_stride_w], cells outside the image
// 0, summed in float and rounded once). Every element is written. Elements are p's storage type.
// Asynchronous on ctx.stream. HO*WO must be <= INT_MAX (as the GEMM's n).
void im2col(Context& ctx, Precision p, const ConvProblem& g, const void* x, int64_t x_image_stride,
            void* col, int64_t images);

// For i < images: y_i [M][HO*WO] (at y + i*y_image_stride elements, rows HO*WO apart) =
// alpha * A [M][C*KH*KW] (row-major, shared by all images) x columns(x_i). im2col into `col` (which
// holds `chunk` column matrices; unused when im2col is the identity), then one strided-batched GEMM,
// per chunk of `chunk` images. Every output element is written (zeros when C*KH*KW == 0). No bias or
// activation: callers follow with bias_activation (epilogue.h) or their own epilogue.
void conv_gemm(Context& ctx, Precision p, const ConvProblem& g, const void* a, int64_t M,
               const void* x, int64_t x_image_stride, void* y, int64_t y_image_stride, int64_t images,
               void* col, int64_t chunk, float alpha = 1.f);

}  // namespace infer::cuda
