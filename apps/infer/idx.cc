// IDX reading (idx.h): the whole file is read, inflated in memory when gzip-compressed (zlib's inflate
// with gzip framing, concatenated members allowed, output capped so a gzip bomb is an error rather
// than an exhausted machine), then the header is validated against the exact byte count.
#include "idx.h"

#include <zlib.h>

#include <algorithm>

#include "infer/error.h"
#include "npy.h"

namespace infer::cli {
namespace {

// Far above any IDX data set in use (the 60,000 training images are 47 MB).
constexpr uint64_t kMaxBytes = 1ULL << 31;
constexpr int kMaxDims = 8;

bool is_gzip(const std::vector<uint8_t>& bytes) {
  return bytes.size() >= 2 && bytes[0] == 0x1f && bytes[1] == 0x8b;
}

std::vector<uint8_t> gunzip(const std::vector<uint8_t>& in, const std::string& origin) {
  z_stream zs{};
  if (inflateInit2(&zs, 15 + 16) != Z_OK) throw Error("'" + origin + "': cannot start zlib inflate");
  std::vector<uint8_t> out;
  uint8_t chunk[1 << 16];
  size_t consumed = 0;
  int status = Z_OK;
  try {
    while (true) {
      // zlib counts in uInt; feed at most 1 GiB at a time.
      const size_t feed = std::min<size_t>(in.size() - consumed, 1u << 30);
      zs.next_in = const_cast<Bytef*>(in.data() + consumed);
      zs.avail_in = static_cast<uInt>(feed);
      do {
        zs.next_out = chunk;
        zs.avail_out = sizeof chunk;
        status = inflate(&zs, Z_NO_FLUSH);
        if (status == Z_NEED_DICT || status == Z_DATA_ERROR || status == Z_MEM_ERROR)
          throw Error("'" + origin + "': corrupt gzip data (" + (zs.msg ? zs.msg : "inflate failed") +
                      ")");
        out.insert(out.end(), chunk, chunk + (sizeof chunk - zs.avail_out));
        if (out.size() > kMaxBytes)
          throw Error("'" + origin + "': inflates to more than 2 GiB; not an IDX data set");
      } while (zs.avail_out == 0 && status != Z_STREAM_END);
      consumed += feed - zs.avail_in;
      if (status == Z_STREAM_END) {
        // Another gzip member may follow (gzip allows concatenation); anything else is an error.
        if (consumed == in.size()) break;
        if (in.size() - consumed >= 2 && in[consumed] == 0x1f && in[consumed + 1] == 0x8b) {
          inflateReset(&zs);
          continue;
        }
        throw Error("'" + origin + "': " + std::to_string(in.size() - consumed) +
                    " bytes of garbage after the gzip stream");
      }
      // All input used without reaching the stream's end (more remains only past the 1 GiB feed cap).
      if (consumed == in.size())
        throw Error("'" + origin + "': truncated gzip stream (" + std::to_string(out.size()) +
                    " bytes inflated)");
    }
  } catch (...) {
    inflateEnd(&zs);
    throw;
  }
  inflateEnd(&zs);
  return out;
}

uint32_t be32(const uint8_t* p) {
  return (uint32_t(p[0]) << 24) | (uint32_t(p[1]) << 16) | (uint32_t(p[2]) << 8) | uint32_t(p[3]);
}

}  // namespace

IdxArray parse_idx(const std::vector<uint8_t>& bytes, const std::string& origin) {
  const std::string where = "IDX file '" + origin + "'";
  if (bytes.size() < 4) throw Error(where + ": " + std::to_string(bytes.size()) + " bytes, no header");
  if (bytes[0] != 0 || bytes[1] != 0)
    throw Error(where + ": bad magic (first two bytes must be zero; not an IDX file)");
  if (bytes[2] != 0x08)
    throw Error(where + ": data type " + std::to_string(bytes[2]) +
                " is not supported (only 8, unsigned byte)");
  const int ndims = bytes[3];
  if (ndims < 1 || ndims > kMaxDims)
    throw Error(where + ": " + std::to_string(ndims) + " dimensions (1 to " +
                std::to_string(kMaxDims) + " supported)");
  const size_t header = 4 + 4 * size_t(ndims);
  if (bytes.size() < header)
    throw Error(where + ": truncated header (" + std::to_string(bytes.size()) + " of " +
                std::to_string(header) + " bytes)");

  IdxArray a;
  uint64_t count = 1;
  for (int i = 0; i < ndims; ++i) {
    const uint32_t d = be32(bytes.data() + 4 + 4 * i);
    if (d == 0) throw Error(where + ": dimension " + std::to_string(i) + " is zero");
    // Each factor is < 2^32 and the product is checked against 2^31 after every step: no overflow.
    count *= d;
    if (count > kMaxBytes)
      throw Error(where + ": dimensions describe more than 2 GiB of data");
    a.dims.push_back(int64_t(d));
  }
  const uint64_t have = bytes.size() - header;
  if (have < count)
    throw Error(where + ": truncated: " + std::to_string(have) + " data bytes, the header needs " +
                std::to_string(count));
  if (have > count)
    throw Error(where + ": " + std::to_string(have - count) + " bytes after the data the header "
                "describes");
  a.data.assign(bytes.begin() + std::ptrdiff_t(header), bytes.end());
  return a;
}

IdxArray decode_idx(std::vector<uint8_t> bytes, const std::string& origin) {
  if (is_gzip(bytes)) bytes = gunzip(bytes, origin);
  return parse_idx(bytes, origin);
}

IdxArray read_idx(const std::string& path) {
  return decode_idx(read_file(path), path);  // Error "cannot read '<path>': ..." on failure
}

}  // namespace infer::cli
