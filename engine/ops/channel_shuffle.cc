// channel_shuffle: ShuffleNet's shuffle of x [N,C,H,W] in `groups` (C % groups == 0): output channel
// j*groups + i reads input channel i*(C/groups) + j. Only copies: 0 FLOPs.
#include "engine/ops/op_util.h"

namespace infer::detail {

namespace {

OpParams read(const fb::Node& node, const std::string&) {
  return ChannelShuffleParams{node.options_as_ChannelShuffle()->groups()};
}

FbOptions write(flatbuffers::FlatBufferBuilder& fbb, const OpParams& params) {
  return {fb::Op::ChannelShuffle,
          fb::CreateChannelShuffle(fbb, std::get<ChannelShuffleParams>(params).groups).Union()};
}

std::vector<Shape> shape(const std::string& where, const OpParams& params, const Inputs& in,
                         const std::vector<bool>*) {
  const auto& p = std::get<ChannelShuffleParams>(params);
  in.expect_count(1, 1);
  const Shape& x = in.with_rank(0, 4, "[N,C,H,W]");
  positive(where, "groups", p.groups);
  if (x[1] % p.groups != 0)
    fail(where, "field groups " + std::to_string(p.groups) + " does not divide the " + std::to_string(x[1]) +
                    " channels of input 0");
  return {x};
}

}  // namespace

constinit const OpDef channel_shuffle_op{
    .read = read,
    .write = write,
    .shape = shape,
    .reference = ref::run_channel_shuffle,
};

}  // namespace infer::detail
