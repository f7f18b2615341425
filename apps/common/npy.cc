// .npy reading and writing (see npy.h). The header is a Python dict literal with exactly the keys
// 'descr', 'fortran_order' and 'shape'; it is parsed by a small hand-written scanner that never reads
// past the header and checks every number, so no input file can make it read out of bounds.
#include "npy.h"


#include <cerrno>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <limits>
#include <optional>

#include "infer/error.h"

namespace infer {
namespace {

constexpr char kMagic[] = "\x93NUMPY";
constexpr size_t kMagicSize = 6;
// Dimensions and element counts above this are rejected outright: no real array is this large, and
// it keeps every size product far from overflowing 64 bits.
constexpr uint64_t kMaxElements = uint64_t(1) << 40;

[[noreturn]] void fail(const std::string& origin, const std::string& what) {
  throw Error("npy file '" + origin + "': " + what);
}

// Scanner over the header text [pos, end).
class HeaderParser {
 public:
  HeaderParser(const std::string& text, const std::string& origin) : s_(text), origin_(origin) {}

  struct Result {
    std::string descr;
    bool fortran_order = false;
    Shape shape;
  };

  Result parse() {
    Result r;
    bool have_descr = false, have_order = false, have_shape = false;
    skip_space();
    expect('{');
    while (true) {
      skip_space();
      if (peek() == '}') break;
      std::string key = parse_string();
      skip_space();
      expect(':');
      skip_space();
      if (key == "descr") {
        if (have_descr) fail(origin_, "header repeats key 'descr'");
        r.descr = parse_string();
        have_descr = true;
      } else if (key == "fortran_order") {
        if (have_order) fail(origin_, "header repeats key 'fortran_order'");
        r.fortran_order = parse_bool();
        have_order = true;
      } else if (key == "shape") {
        if (have_shape) fail(origin_, "header repeats key 'shape'");
        r.shape = parse_shape();
        have_shape = true;
      } else {
        fail(origin_, "header has unexpected key '" + key + "'");
      }
      skip_space();
      if (peek() == ',') {
        ++pos_;
        continue;
      }
      if (peek() == '}') break;
      fail(origin_, "header: expected ',' or '}' at offset " + std::to_string(pos_));
    }
    ++pos_;  // the closing '}'
    skip_space();
    if (pos_ != s_.size()) fail(origin_, "header has text after the closing '}'");
    if (!have_descr) fail(origin_, "header lacks key 'descr'");
    if (!have_order) fail(origin_, "header lacks key 'fortran_order'");
    if (!have_shape) fail(origin_, "header lacks key 'shape'");
    return r;
  }

 private:
  const std::string& s_;
  const std::string& origin_;
  size_t pos_ = 0;

  // '\0' at the end, which matches no expected character.
  char peek() const { return pos_ < s_.size() ? s_[pos_] : '\0'; }

  void skip_space() {
    while (pos_ < s_.size() && (s_[pos_] == ' ' || s_[pos_] == '\t' || s_[pos_] == '\n' || s_[pos_] == '\r'))
      ++pos_;
  }

  void expect(char c) {
    if (peek() != c)
      fail(origin_, std::string("header: expected '") + c + "' at offset " + std::to_string(pos_));
    ++pos_;
  }

  bool starts_with(const char* word) const { return s_.compare(pos_, std::strlen(word), word) == 0; }

  std::string parse_string() {
    char quote = peek();
    if (quote != '\'' && quote != '"')
      fail(origin_, "header: expected a quoted string at offset " + std::to_string(pos_));
    ++pos_;
    size_t close = s_.find(quote, pos_);
    if (close == std::string::npos) fail(origin_, "header: unterminated string");
    std::string value = s_.substr(pos_, close - pos_);
    pos_ = close + 1;
    return value;
  }

  bool parse_bool() {
    if (starts_with("True")) {
      pos_ += 4;
      return true;
    }
    if (starts_with("False")) {
      pos_ += 5;
      return false;
    }
    fail(origin_, "header: 'fortran_order' must be True or False");
  }

  // A tuple of non-negative integers: (), (3,), (2, 3) and trailing commas.
  Shape parse_shape() {
    Shape shape;
    expect('(');
    while (true) {
      skip_space();
      if (peek() == ')') break;
      shape.push_back(parse_dim());
      skip_space();
      if (peek() == ',') {
        ++pos_;
        continue;
      }
      if (peek() == ')') break;
      fail(origin_, "header: bad 'shape' tuple at offset " + std::to_string(pos_));
    }
    ++pos_;
    if (shape.size() > 32) fail(origin_, "header: 'shape' has more than 32 dimensions");
    return shape;
  }

  int64_t parse_dim() {
    if (peek() == '-') fail(origin_, "header: 'shape' has a negative dimension");
    if (peek() < '0' || peek() > '9') fail(origin_, "header: 'shape' entries must be integers");
    uint64_t value = 0;
    while (peek() >= '0' && peek() <= '9') {
      value = value * 10 + uint64_t(peek() - '0');
      if (value > kMaxElements) fail(origin_, "header: 'shape' dimension is too large");
      ++pos_;
    }
    if (peek() == 'L') ++pos_;  // Python 2 long literal, written by old NumPy
    return int64_t(value);
  }
};

uint16_t read_u16le(const uint8_t* p) { return uint16_t(p[0] | (p[1] << 8)); }
uint32_t read_u32le(const uint8_t* p) {
  return uint32_t(p[0]) | (uint32_t(p[1]) << 8) | (uint32_t(p[2]) << 16) | (uint32_t(p[3]) << 24);
}

// IEEE 754 binary16 -> binary32, exact for every input (subnormals, inf, NaN included).
float half_to_float(uint16_t h) {
  uint32_t sign = uint32_t(h & 0x8000u) << 16;
  uint32_t exponent = (h >> 10) & 0x1fu;
  uint32_t mantissa = h & 0x3ffu;
  uint32_t bits;
  if (exponent == 0x1f) {
    bits = sign | 0x7f800000u | (mantissa << 13);
  } else if (exponent != 0) {
    bits = sign | ((exponent + 112) << 23) | (mantissa << 13);
  } else if (mantissa == 0) {
    bits = sign;
  } else {
    // Subnormal half: value = mantissa * 2^-24, exactly representable as a float.
    float magnitude = std::ldexp(float(mantissa), -24);
    return sign ? -magnitude : magnitude;
  }
  float f;
  std::memcpy(&f, &bits, sizeof f);
  return f;
}

}  // namespace

Tensor parse_npy(const std::vector<uint8_t>& bytes, const std::string& origin) {
  if (bytes.size() < kMagicSize + 2 || std::memcmp(bytes.data(), kMagic, kMagicSize) != 0)
    fail(origin, "not a .npy file (bad magic)");
  const uint8_t major = bytes[6], minor = bytes[7];
  size_t length_bytes;
  if (major == 1 && minor == 0) {
    length_bytes = 2;
  } else if (major == 2 && minor == 0) {
    length_bytes = 4;
  } else {
    fail(origin, "unsupported format version " + std::to_string(major) + "." + std::to_string(minor) +
                     " (1.0 and 2.0 are read)");
  }
  const size_t prefix = kMagicSize + 2 + length_bytes;
  if (bytes.size() < prefix) fail(origin, "truncated header");
  const uint64_t header_len =
      length_bytes == 2 ? read_u16le(&bytes[8]) : read_u32le(&bytes[8]);
  if (header_len > bytes.size() - prefix)
    fail(origin, "header length " + std::to_string(header_len) + " runs past the end of the file");
  const std::string header(reinterpret_cast<const char*>(&bytes[prefix]), size_t(header_len));
  for (char c : header)
    if (static_cast<unsigned char>(c) >= 0x80 || c == '\0') fail(origin, "header is not ASCII text");

  HeaderParser::Result h = HeaderParser(header, origin).parse();
  if (h.fortran_order) fail(origin, "fortran_order arrays are not supported (save in C order)");

  size_t item_size;
  if (h.descr == "<f4") {
    item_size = 4;
  } else if (h.descr == "<f8") {
    item_size = 8;
  } else if (h.descr == "<f2") {
    item_size = 2;
  } else if (h.descr.size() == 3 && h.descr[0] == '>') {
    fail(origin, "big-endian dtype '" + h.descr + "' is not supported");
  } else {
    fail(origin, "unsupported dtype '" + h.descr + "' (expected <f4, <f8 or <f2)");
  }

  uint64_t count = 1;
  for (int64_t d : h.shape) {
    // Checked before multiplying, so the product never wraps around.
    if (d != 0 && count > kMaxElements / uint64_t(d)) fail(origin, "shape has too many elements");
    count *= uint64_t(d);
  }
  const uint64_t data_bytes = count * item_size;
  const uint64_t available = bytes.size() - prefix - header_len;
  if (available < data_bytes)
    fail(origin, "truncated data: shape " + shape_str(h.shape) + " needs " + std::to_string(data_bytes) +
                     " bytes, file has " + std::to_string(available));
  if (available > data_bytes)
    fail(origin, "file has " + std::to_string(available - data_bytes) +
                     " bytes after the data that the header does not describe");

  Tensor t(h.shape);
  const uint8_t* p = bytes.data() + prefix + header_len;
  for (size_t i = 0; i < count; ++i, p += item_size) {
    // Element-wise little-endian decoding: correct on any host byte order and any alignment.
    if (item_size == 4) {
      uint32_t bits = read_u32le(p);
      std::memcpy(&t.data[i], &bits, 4);
    } else if (item_size == 8) {
      uint64_t bits = uint64_t(read_u32le(p)) | (uint64_t(read_u32le(p + 4)) << 32);
      double d;
      std::memcpy(&d, &bits, 8);
      t.data[i] = static_cast<float>(d);
    } else {
      t.data[i] = half_to_float(read_u16le(p));
    }
  }
  return t;
}

Tensor read_npy(const std::string& path) { return parse_npy(read_file(path), path); }

std::vector<uint8_t> encode_npy(const Tensor& tensor) {
  if (tensor.numel() < 0 || uint64_t(tensor.numel()) != tensor.data.size())
    throw Error("cannot encode .npy: tensor shape " + shape_str(tensor.shape) + " does not match its " +
                std::to_string(tensor.data.size()) + " values");
  for (int64_t d : tensor.shape)
    if (d < 0) throw Error("cannot encode .npy: negative dimension in shape " + shape_str(tensor.shape));
  // Python's tuple repr: (), (3,), (2, 3).
  std::string dims;
  for (size_t i = 0; i < tensor.shape.size(); ++i)
    dims += (i ? ", " : "") + std::to_string(tensor.shape[i]);
  if (tensor.shape.size() == 1) dims += ",";
  std::string header = "{'descr': '<f4', 'fortran_order': False, 'shape': (" + dims + "), }";
  // Pad with spaces and a final newline so the data starts at a multiple of 64 bytes, as NumPy does.
  const size_t unpadded = kMagicSize + 2 + 2 + header.size() + 1;
  header.append((64 - unpadded % 64) % 64, ' ');
  header.push_back('\n');
  if (header.size() > 0xffff) throw Error("cannot encode .npy: header too long");

  std::vector<uint8_t> out(kMagic, kMagic + kMagicSize);
  out.push_back(1);
  out.push_back(0);
  out.push_back(uint8_t(header.size() & 0xff));
  out.push_back(uint8_t(header.size() >> 8));
  out.insert(out.end(), header.begin(), header.end());
  out.reserve(out.size() + tensor.data.size() * 4);
  for (float v : tensor.data) {
    uint32_t bits;
    std::memcpy(&bits, &v, 4);
    for (int b = 0; b < 4; ++b) out.push_back(uint8_t(bits >> (8 * b)));
  }
  return out;
}

void write_npy(const std::string& path, const Tensor& tensor) {
  write_file_atomic(path, encode_npy(tensor));
}

std::vector<uint8_t> read_file(const std::string& path) {
  std::FILE* f = std::fopen(path.c_str(), "rb");
  if (!f) throw Error("cannot read '" + path + "': " + std::strerror(errno));
  std::vector<uint8_t> bytes;
  uint8_t chunk[1 << 16];
  while (true) {
    size_t n = std::fread(chunk, 1, sizeof chunk, f);
    bytes.insert(bytes.end(), chunk, chunk + n);
    if (n < sizeof chunk) break;
  }
  // A directory opens fine on Linux but fails to read (EISDIR); report that, not an empty file.
  const bool failed = std::ferror(f) != 0;
  const int err = errno;
  std::fclose(f);
  if (failed) throw Error("cannot read '" + path + "': " + std::strerror(err));
  return bytes;
}

}  // namespace infer
