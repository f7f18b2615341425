// Tests of the apps' file I/O (apps/common): .npy round trips and exact decoding of v1/v2 headers and
// f4/f8/f2 data, every malformed .npy as an infer::Error naming the file; PNG grids read back with stb
// (layout, value mapping, clamping); images loaded with channel conversion, resize and normalisation;
// atomic writes that leave nothing behind on failure.
#include <doctest/doctest.h>
#include <stb/stb_image.h>
#include <stb/stb_image_write.h>
#include <unistd.h>

#include <cmath>
#include <cstring>
#include <filesystem>
#include <limits>
#include <string>

#include "image_io.h"
#include "infer/error.h"
#include "npy.h"
#include "image_checks.h"
#include "test_util.h"

namespace fs = std::filesystem;
using infer::Error;
using infer::Tensor;

namespace {

// A scratch directory unique to this process, removed at exit.
struct ScratchDir {
  fs::path path;
  ScratchDir() {
    path = fs::path(INFER_BINARY_DIR) / ("test_npy_image_tmp_" + std::to_string(::getpid()));
    fs::remove_all(path);
    fs::create_directories(path);
  }
  ~ScratchDir() {
    std::error_code ec;
    fs::remove_all(path, ec);
  }
  std::string file(const std::string& name) const { return (path / name).string(); }
};
const ScratchDir& scratch() {
  static ScratchDir dir;
  return dir;
}

std::vector<uint8_t> bytes_of(const std::string& s) { return {s.begin(), s.end()}; }

// A .npy file built by hand: magic, version, little-endian header length, header, raw data.
std::vector<uint8_t> make_npy(const std::string& header, const std::vector<uint8_t>& data, int major = 1,
                              int minor = 0) {
  std::vector<uint8_t> out = bytes_of(std::string("\x93NUMPY", 6));
  out.push_back(uint8_t(major));
  out.push_back(uint8_t(minor));
  const size_t n = header.size();
  out.push_back(uint8_t(n & 0xff));
  out.push_back(uint8_t((n >> 8) & 0xff));
  if (major == 2) {
    out.push_back(uint8_t((n >> 16) & 0xff));
    out.push_back(uint8_t((n >> 24) & 0xff));
  }
  out.insert(out.end(), header.begin(), header.end());
  out.insert(out.end(), data.begin(), data.end());
  return out;
}

std::vector<uint8_t> f32_bytes(const std::vector<float>& v) {
  std::vector<uint8_t> out(v.size() * 4);
  std::memcpy(out.data(), v.data(), out.size());  // the test host is little-endian (x86-64 / arm64)
  return out;
}

// The message of the Error `f` throws ("" if it throws none).
template <class F>
std::string error_of(F&& f) {
  try {
    f();
  } catch (const Error& e) {
    return e.what();
  }
  return "";
}

bool contains(const std::string& s, const std::string& part) {
  return s.find(part) != std::string::npos;
}

}  // namespace

TEST_CASE("npy: float32 round trip through bytes and files, any rank") {
  for (const infer::Shape& shape : {infer::Shape{2, 3, 4}, infer::Shape{5}, infer::Shape{},
                                    infer::Shape{0, 3}, infer::Shape{1, 1, 1, 1, 7}}) {
    Tensor t(shape, infer::test::random_vector(size_t(infer::shape_numel(shape)), 7));
    const std::vector<uint8_t> bytes = infer::encode_npy(t);
    // Data starts on a 64-byte boundary, and the header ends with a newline, as NumPy writes it.
    const size_t header_len = bytes[8] | (bytes[9] << 8);
    CHECK((10 + header_len) % 64 == 0);
    CHECK(bytes[10 + header_len - 1] == '\n');
    CHECK(bytes.size() == 10 + header_len + t.data.size() * 4);

    Tensor back = infer::parse_npy(bytes, "mem.npy");
    CHECK(back.shape == shape);
    CHECK(back.data == t.data);

    const std::string path = scratch().file("round.npy");
    infer::write_npy(path, t);
    Tensor from_file = infer::read_npy(path);
    CHECK(from_file.shape == shape);
    CHECK(from_file.data == t.data);
  }
}

TEST_CASE("npy: header text is what NumPy writes") {
  Tensor t({2, 3}, std::vector<float>(6, 0.f));
  std::vector<uint8_t> bytes = infer::encode_npy(t);
  const std::string header(bytes.begin() + 10, bytes.begin() + 10 + (bytes[8] | (bytes[9] << 8)));
  CHECK(header.rfind("{'descr': '<f4', 'fortran_order': False, 'shape': (2, 3), }", 0) == 0);
  Tensor one({4}, std::vector<float>(4, 1.f));
  bytes = infer::encode_npy(one);
  CHECK(contains(std::string(bytes.begin(), bytes.begin() + 80), "'shape': (4,)"));
}

TEST_CASE("npy: version 2.0 headers, f8 and f2 data, spacing and quoting variants") {
  const std::vector<float> values = {1.5f, -2.f, 0.25f, 3.f};
  Tensor v2 = infer::parse_npy(
      make_npy("{'descr': '<f4', 'fortran_order': False, 'shape': (2, 2), }\n", f32_bytes(values), 2, 0),
      "v2.npy");
  CHECK(v2.shape == infer::Shape{2, 2});
  CHECK(v2.data == values);

  std::vector<uint8_t> f8(3 * 8);
  const double doubles[3] = {0.1, -1e10, 3.25};
  std::memcpy(f8.data(), doubles, sizeof doubles);
  Tensor d = infer::parse_npy(make_npy("{\"shape\":(3,),\"descr\":\"<f8\",\"fortran_order\":False}", f8),
                              "f8.npy");
  CHECK(d.shape == infer::Shape{3});
  CHECK(d.data == std::vector<float>{0.1f, -1e10f, 3.25f});

  // f2: 1, -2, the smallest subnormal 2^-24, +inf, 65504 (largest finite), -0.
  const uint16_t halves[6] = {0x3c00, 0xc000, 0x0001, 0x7c00, 0x7bff, 0x8000};
  std::vector<uint8_t> f2(sizeof halves);
  std::memcpy(f2.data(), halves, sizeof halves);
  Tensor h = infer::parse_npy(
      make_npy("{'descr': '<f2', 'fortran_order': False, 'shape': (2, 3L), }", f2), "f2.npy");
  CHECK(h.shape == infer::Shape{2, 3});
  CHECK(h.data[0] == 1.f);
  CHECK(h.data[1] == -2.f);
  CHECK(h.data[2] == std::ldexp(1.f, -24));
  CHECK(std::isinf(h.data[3]));
  CHECK(h.data[4] == 65504.f);
  CHECK(h.data[5] == 0.f);
  CHECK(std::signbit(h.data[5]));

  Tensor scalar = infer::parse_npy(
      make_npy("{'descr':'<f4','fortran_order':False,'shape':()}", f32_bytes({9.f})), "scalar.npy");
  CHECK(scalar.shape.empty());
  CHECK(scalar.data == std::vector<float>{9.f});
}

TEST_CASE("npy: every malformed file is an Error naming the file and the problem") {
  const std::string ok_header = "{'descr': '<f4', 'fortran_order': False, 'shape': (2,), }\n";
  const std::vector<uint8_t> two = f32_bytes({1.f, 2.f});
  struct Case {
    const char* what;
    std::vector<uint8_t> bytes;
    const char* expect;  // part of the message
  };
  std::vector<uint8_t> short_len = bytes_of(std::string("\x93NUMPY\x01\x00\x05", 9));
  std::vector<uint8_t> long_len = make_npy(ok_header, two);
  long_len[8] = 0xff;  // header length past the end
  long_len[9] = 0x7f;
  std::vector<uint8_t> non_ascii =
      make_npy("{'descr': '<f4', 'fortran_order': False, 'shape': (2,), '\xff': 1}", two);
  const std::vector<Case> cases = {
      {"empty", {}, "bad magic"},
      {"bad magic", bytes_of("NUMPY\x01\x00 not really"), "bad magic"},
      {"random bytes", bytes_of(std::string("\x12\x34\x56\x78\x9a\xbc\xde\xf0xx", 10)), "bad magic"},
      {"version 3.0", make_npy(ok_header, two, 3, 0), "version 3.0"},
      {"version 1.5", make_npy(ok_header, two, 1, 5), "version 1.5"},
      {"truncated length field", short_len, "truncated header"},
      {"header length lies", long_len, "runs past the end"},
      {"fortran order", make_npy("{'descr': '<f4', 'fortran_order': True, 'shape': (2,), }", two),
       "fortran_order"},
      {"big-endian", make_npy("{'descr': '>f4', 'fortran_order': False, 'shape': (2,), }", two),
       "big-endian"},
      {"int dtype", make_npy("{'descr': '<i4', 'fortran_order': False, 'shape': (2,), }", two),
       "unsupported dtype '<i4'"},
      {"missing shape", make_npy("{'descr': '<f4', 'fortran_order': False}", two), "lacks key 'shape'"},
      {"missing descr", make_npy("{'fortran_order': False, 'shape': (2,)}", two), "lacks key 'descr'"},
      {"extra key", make_npy("{'descr': '<f4', 'fortran_order': False, 'shape': (2,), 'x': 1}", two),
       "unexpected key 'x'"},
      {"repeated key",
       make_npy("{'descr': '<f4', 'descr': '<f4', 'fortran_order': False, 'shape': (2,)}", two),
       "repeats key"},
      {"negative dim", make_npy("{'descr': '<f4', 'fortran_order': False, 'shape': (-2,), }", two),
       "negative"},
      {"shape not a tuple", make_npy("{'descr': '<f4', 'fortran_order': False, 'shape': [2], }", two),
       "expected '('"},
      {"shape of floats", make_npy("{'descr': '<f4', 'fortran_order': False, 'shape': (2.0,), }", two),
       "shape"},
      {"fortran_order not bool", make_npy("{'descr': '<f4', 'fortran_order': 0, 'shape': (2,), }", two),
       "True or False"},
      {"unterminated string", make_npy("{'descr: <f4", two), "unterminated"},
      {"no closing brace", make_npy("{'descr': '<f4', 'fortran_order': False, 'shape': (2,)", two),
       "expected ',' or '}'"},
      {"text after dict", make_npy("{'descr': '<f4', 'fortran_order': False, 'shape': (2,)} junk", two),
       "after the closing"},
      {"non-ascii header", non_ascii, "not ASCII"},
      {"huge dims",
       make_npy("{'descr': '<f4', 'fortran_order': False, 'shape': (4294967296, 4294967296), }", two),
       "too many elements"},
      {"dim overflows",
       make_npy("{'descr': '<f4', 'fortran_order': False, 'shape': (99999999999999999999999,), }", two),
       "too large"},
      {"truncated data", make_npy("{'descr': '<f4', 'fortran_order': False, 'shape': (3,), }", two),
       "truncated data"},
      {"trailing bytes", make_npy("{'descr': '<f4', 'fortran_order': False, 'shape': (1,), }", two),
       "after the data"},
      {"f8 truncated", make_npy("{'descr': '<f8', 'fortran_order': False, 'shape': (2,), }", two),
       "truncated data"},
  };
  for (const Case& c : cases) {
    CAPTURE(c.what);
    const std::string message = error_of([&] { infer::parse_npy(c.bytes, "bad.npy"); });
    CHECK(contains(message, "'bad.npy'"));
    CHECK(contains(message, c.expect));
  }

  const std::string missing = scratch().file("missing.npy");
  CHECK(contains(error_of([&] { infer::read_npy(missing); }), "cannot read '" + missing + "'"));
  CHECK(contains(error_of([&] { infer::read_npy(scratch().path.string()); }), "cannot read"));

  Tensor lying({2, 2}, std::vector<float>(3));
  CHECK(contains(error_of([&] { infer::encode_npy(lying); }), "does not match"));
}

TEST_CASE("write_file_atomic: replaces the file and leaves no temporary, on success and failure") {
  const std::string path = scratch().file("atomic.bin");
  infer::write_file_atomic(path, {1, 2, 3});
  infer::write_file_atomic(path, {4, 5});
  CHECK(infer::read_file(path) == std::vector<uint8_t>{4, 5});
  for (const auto& entry : fs::directory_iterator(scratch().path))
    CHECK(entry.path().filename().string().find(".tmp-") == std::string::npos);

  const std::string bad = "/nonexistent-dir-infer-test/x.npy";
  const std::string message = error_of([&] { infer::write_file_atomic(bad, {1}); });
  CHECK(contains(message, "cannot write '" + bad + "'"));
  // A directory in the way: the rename fails, the temporary is removed.
  fs::create_directories(scratch().path / "adir");
  CHECK(contains(error_of([&] { infer::write_file_atomic(scratch().file("adir"), {1}); }),
                 "cannot write"));
  for (const auto& entry : fs::directory_iterator(scratch().path))
    CHECK(entry.path().filename().string().find(".tmp-") == std::string::npos);
}

TEST_CASE("image grid: layout, value mapping and clamping, read back with stb") {
  CHECK(infer::grid_layout(1, 4, 4).columns == 1);
  CHECK(infer::grid_layout(16, 4, 4).columns == 4);
  CHECK(infer::grid_layout(16, 4, 4).rows == 4);
  CHECK(infer::grid_layout(17, 4, 4).columns == 5);
  CHECK(infer::grid_layout(17, 4, 4).rows == 4);

  // 5 RGB images of 2x3: ceil(sqrt(5)) = 3 columns, 2 rows; 2-pixel border everywhere.
  const int n = 5, c = 3, h = 2, w = 3;
  Tensor batch({n, c, h, w});
  for (size_t i = 0; i < batch.data.size(); ++i) batch.data[i] = -1.f + 2.f * float(i % 11) / 10.f;
  batch.data[0] = 5.f;                                      // clamps to 255
  batch.data[1] = -7.f;                                     // clamps to 0
  batch.data[2] = std::numeric_limits<float>::quiet_NaN();  // NaN -> 0
  const std::vector<uint8_t> png = infer::encode_png_grid(batch, -1.f, 1.f);

  int gw = 0, gh = 0, gc = 0;
  stbi_uc* pixels = stbi_load_from_memory(png.data(), int(png.size()), &gw, &gh, &gc, 0);
  REQUIRE(pixels != nullptr);
  CHECK(gc == 3);
  CHECK(gw == 3 * (w + 2) + 2);
  CHECK(gh == 2 * (h + 2) + 2);
  auto at = [&](int x, int y, int ch) { return int(pixels[(y * gw + x) * gc + ch]); };
  for (int i = 0; i < n; ++i)
    for (int ch = 0; ch < c; ++ch)
      for (int y = 0; y < h; ++y)
        for (int x = 0; x < w; ++x) {
          const float v = batch.data[((i * c + ch) * h + y) * w + x];
          const int expect =
              std::isnan(v) ? 0
                            : int(std::lround(std::min(255.f, std::max(0.f, (v + 1.f) / 2.f * 255.f))));
          CHECK(at(2 + (i % 3) * (w + 2) + x, 2 + (i / 3) * (h + 2) + y, ch) == expect);
        }
  CHECK(at(2, 2, 0) == 255);
  CHECK(at(3, 2, 0) == 0);
  CHECK(at(4, 2, 0) == 0);
  // Border pixels and the unused 6th cell are black.
  CHECK(at(0, 0, 0) == 0);
  CHECK(at(1, 5, 1) == 0);
  CHECK(at(gw - 1, gh - 1, 2) == 0);
  CHECK(at(2 + 2 * (w + 2), 2 + (h + 2), 0) == 0);
  stbi_image_free(pixels);

  // Gray images and another range: 0 -> 0, 0.5 -> 128 (127.5 rounds up), 1 -> 255.
  Tensor gray({1, 1, 1, 3}, {0.f, 0.5f, 1.f});
  const std::string path = scratch().file("gray.png");
  infer::write_image_grid(path, gray, 0.f, 1.f);
  std::vector<uint8_t> file = infer::read_file(path);
  pixels = stbi_load_from_memory(file.data(), int(file.size()), &gw, &gh, &gc, 0);
  REQUIRE(pixels != nullptr);
  CHECK(gc == 1);
  CHECK(gw == 7);
  CHECK(gh == 5);
  CHECK(int(pixels[2 * gw + 2]) == 0);
  CHECK(int(pixels[2 * gw + 3]) == 128);
  CHECK(int(pixels[2 * gw + 4]) == 255);
  stbi_image_free(pixels);
}

TEST_CASE("image grid: bad batches, ranges and paths are Errors") {
  CHECK(contains(error_of([] {
                   infer::encode_png_grid(Tensor({2, 2, 4, 4}), -1, 1);
                 }),
                 "1 or 3 channels"));
  CHECK(contains(error_of([] { infer::encode_png_grid(Tensor({2, 3, 4}), -1, 1); }), "4-D"));
  CHECK(contains(error_of([] { infer::encode_png_grid(Tensor({1, 3, 4, 4}), 1, 1); }), "range"));
  CHECK(contains(error_of([] { infer::encode_png_grid(Tensor({1, 3, 4, 4}), 0, NAN); }), "range"));
  CHECK(contains(error_of([] { infer::encode_png_grid(Tensor({0, 3, 4, 4}), -1, 1); }), "geometry"));
  Tensor lying({1, 1, 2, 2}, std::vector<float>(3));
  CHECK(contains(error_of([&] { infer::encode_png_grid(lying, -1, 1); }), "does not match"));
  const std::string bad = "/nonexistent-dir-infer-test/x.png";
  CHECK(contains(error_of([&] {
                   infer::write_image_grid(bad, Tensor({1, 1, 2, 2}), -1, 1);
                 }),
                 "cannot write '" + bad + "'"));
}

namespace {
// A PNG in memory from interleaved 8-bit pixels.
std::vector<uint8_t> png_of(int w, int h, int c, const std::vector<uint8_t>& pixels) {
  std::vector<uint8_t> out;
  auto append = [](void* ctx, void* data, int size) {
    auto* v = static_cast<std::vector<uint8_t>*>(ctx);
    v->insert(v->end(), static_cast<uint8_t*>(data), static_cast<uint8_t*>(data) + size);
  };
  REQUIRE(stbi_write_png_to_func(append, &out, w, h, c, pixels.data(), w * c) != 0);
  return out;
}
}  // namespace

TEST_CASE("load_image: exact normalisation at the native size, channel conversion, resize") {
  // 2x2 RGB: red, green, blue, a gray (64, 128, 192).
  const std::vector<uint8_t> rgb = {255, 0, 0, 0, 255, 0, 0, 0, 255, 64, 128, 192};
  const std::string path = scratch().file("rgb.png");
  infer::write_file_atomic(path, png_of(2, 2, 3, rgb));

  infer::ImageNormalization norm{{0.5f, 0.25f, 0.f}, {0.5f, 2.f, 1.f}};
  Tensor t = infer::load_image(path, 3, 2, 2, norm);
  CHECK(t.shape == infer::Shape{1, 3, 2, 2});
  for (int c = 0; c < 3; ++c)
    for (int i = 0; i < 4; ++i) {
      const float expect = (rgb[i * 3 + c] / 255.f - norm.mean[c]) / norm.std[c];
      CHECK(t.data[c * 4 + i] == doctest::Approx(expect).epsilon(1e-6));
    }

  // RGB -> gray uses stb's luminance: (77 r + 150 g + 29 b) >> 8.
  Tensor g = infer::load_image(path, 1, 2, 2);
  CHECK(g.shape == infer::Shape{1, 1, 2, 2});
  for (int i = 0; i < 4; ++i) {
    const int lum = (rgb[i * 3] * 77 + rgb[i * 3 + 1] * 150 + rgb[i * 3 + 2] * 29) >> 8;
    CHECK(g.data[i] == doctest::Approx(lum / 255.f).epsilon(1e-6));
  }

  // Gray -> RGB copies the value into every channel; one mean/std value applies to all channels.
  const std::string gray_path = scratch().file("gray3x5.png");
  infer::write_file_atomic(gray_path, png_of(3, 5, 1, std::vector<uint8_t>(15, 51)));
  Tensor rgb_from_gray = infer::load_image(gray_path, 3, 5, 3, {{0.1f}, {0.5f}});
  for (float v : rgb_from_gray.data) CHECK(v == doctest::Approx((0.2f - 0.1f) / 0.5f).epsilon(1e-6));

  // Resize, up and down: a uniform image stays uniform; a left/right split stays ordered.
  Tensor up = infer::load_image(gray_path, 1, 11, 7);
  CHECK(up.shape == infer::Shape{1, 1, 11, 7});
  for (float v : up.data) CHECK(v == doctest::Approx(0.2f).epsilon(1e-4));
  std::vector<uint8_t> split(8 * 8);
  for (int y = 0; y < 8; ++y)
    for (int x = 0; x < 8; ++x) split[y * 8 + x] = x < 4 ? 0 : 255;
  const std::string split_path = scratch().file("split.png");
  infer::write_file_atomic(split_path, png_of(8, 8, 1, split));
  Tensor down = infer::load_image(split_path, 1, 2, 2);
  // The downsampling filter (Mitchell) blurs the edge a little, symmetrically.
  CHECK(down.data[0] < 0.2f);
  CHECK(down.data[1] > 0.8f);
  CHECK(down.data[0] == doctest::Approx(1.f - down.data[1]).epsilon(1e-4));
  CHECK(down.data[2] == doctest::Approx(down.data[0]).epsilon(1e-6));
  CHECK(down.data[3] == doctest::Approx(down.data[1]).epsilon(1e-6));
  for (float v : down.data) CHECK((v >= 0.f && v <= 1.f));
}

TEST_CASE("images_to_input: a generator's batch prepared exactly as load_image prepares a file") {
  // 64x64 -> 28x28 (the shipped generator into LeNet-5): the same bits as decoding a PNG of the same
  // pixels, for each image of the batch.
  std::vector<uint8_t> pixels(2 * 64 * 64);
  for (size_t i = 0; i < pixels.size(); ++i) pixels[i] = uint8_t((i * 37 + i / 64 * 11) % 256);
  Tensor batch({2, 1, 64, 64});
  for (size_t i = 0; i < pixels.size(); ++i) batch.data[i] = pixels[i] / 255.f * 2.f - 1.f;  // in [-1, 1]
  const infer::ImageNormalization norm{{0.5f}, {0.5f}};
  const Tensor got = infer::images_to_input(batch, -1.f, 1.f, 28, 28, norm);
  REQUIRE(got.shape == infer::Shape{2, 1, 28, 28});
  for (int i = 0; i < 2; ++i) {
    CAPTURE(i);
    const std::vector<uint8_t> image(pixels.begin() + i * 4096, pixels.begin() + (i + 1) * 4096);
    const Tensor want = infer::decode_image(png_of(64, 64, 1, image), "image", 1, 28, 28, norm);
    // (v + 1) / 2 differs from p / 255 by float rounding only.
    CHECK(infer::test::rel_error(std::vector<float>(got.data.begin() + i * 784, got.data.begin() + (i + 1) * 784),
                                 want.data) <= 1e-6);
  }

  // At the native size with mean 0.5, std 0.5, a [-1, 1] image maps onto itself; values outside the
  // range clamp like pixels.
  Tensor same({1, 1, 2, 3}, {-1.f, -0.5f, 0.f, 0.25f, 1.f, 3.f});
  const Tensor mapped = infer::images_to_input(same, -1.f, 1.f, 2, 3, norm);
  CHECK(mapped.data == std::vector<float>{-1.f, -0.5f, 0.f, 0.25f, 1.f, 1.f});

  CHECK(contains(error_of([&] {
                   Tensor bad({1, 1, 2, 2}, {0.f, std::nanf(""), 0.f, 0.f});
                   infer::images_to_input(bad, -1.f, 1.f, 2, 2);
                 }),
                 "NaN"));
  CHECK_THROWS_AS(infer::images_to_input(Tensor({1, 2, 2, 2}), -1.f, 1.f, 2, 2), Error);  // 2 channels
  CHECK_THROWS_AS(infer::images_to_input(Tensor({1, 1, 2, 2}), 1.f, 1.f, 2, 2), Error);   // empty range
  CHECK_THROWS_AS(infer::images_to_input(Tensor({4, 4}), -1.f, 1.f, 2, 2), Error);        // not 4-D
}

namespace {
// An 8x8 JPEG of the colour (200, 100, 50), written once by stbi_write_jpg at quality 90. Embedded
// rather than encoded here because stb's JPEG *writer* trips UBSan (a signed shift) in sanitizer builds.
const char kJpegHex[] =
    "ffd8ffe000104a46494600010100000100010000ffdb0084000302020302020303030304030304050805050404050a07"
    "0706080c0a0c0c0b0a0b0b0d0e12100d0e110e0b0b1016101113141515150c0f17181614181214151401030404050405"
    "09050509140d0b0d14141414141414141414141414141414141414141414141414141414141414141414141414141414"
    "14141414141414141414ffc00011080008000803012200021101031101ffc401a2000001050101010101010000000000"
    "0000000102030405060708090a0b100002010303020403050504040000017d0102030004110512213141061351610722"
    "7114328191a1082342b1c11552d1f02433627282090a161718191a25262728292a3435363738393a434445464748494a"
    "535455565758595a636465666768696a737475767778797a838485868788898a92939495969798999aa2a3a4a5a6a7a8"
    "a9aab2b3b4b5b6b7b8b9bac2c3c4c5c6c7c8c9cad2d3d4d5d6d7d8d9dae1e2e3e4e5e6e7e8e9eaf1f2f3f4f5f6f7f8f9"
    "fa0100030101010101010101010000000000000102030405060708090a0b110002010204040304070504040001027700"
    "0102031104052131061241510761711322328108144291a1b1c109233352f0156272d10a162434e125f11718191a2627"
    "28292a35363738393a434445464748494a535455565758595a636465666768696a737475767778797a82838485868788"
    "898a92939495969798999aa2a3a4a5a6a7a8a9aab2b3b4b5b6b7b8b9bac2c3c4c5c6c7c8c9cad2d3d4d5d6d7d8d9dae2"
    "e3e4e5e6e7e8e9eaf2f3f4f5f6f7f8f9faffda000c03010002110311003f00ab451457e1e7f481ffd9";

std::vector<uint8_t> from_hex(const char* hex) {
  std::vector<uint8_t> out;
  for (size_t i = 0; hex[i] && hex[i + 1]; i += 2)
    out.push_back(uint8_t(std::stoi(std::string(hex + i, 2), nullptr, 16)));
  return out;
}
}  // namespace

TEST_CASE("load_image: JPEG and BMP decode too") {
  Tensor j = infer::decode_image(from_hex(kJpegHex), "x.jpg", 3, 8, 8);
  const float colour[3] = {200 / 255.f, 100 / 255.f, 50 / 255.f};
  for (int c = 0; c < 3; ++c)
    for (int i = 0; i < 64; ++i) CHECK(j.data[c * 64 + i] == doctest::Approx(colour[c]).epsilon(0.03));

  std::vector<uint8_t> bmp;
  auto append = [](void* ctx, void* data, int size) {
    auto* v = static_cast<std::vector<uint8_t>*>(ctx);
    v->insert(v->end(), static_cast<uint8_t*>(data), static_cast<uint8_t*>(data) + size);
  };
  const std::vector<uint8_t> pixels(16 * 16 * 3, 200);
  REQUIRE(stbi_write_bmp_to_func(append, &bmp, 16, 16, 3, pixels.data()) != 0);
  Tensor b = infer::decode_image(bmp, "x.bmp", 3, 16, 16);
  for (float v : b.data) CHECK(v == doctest::Approx(200 / 255.f).epsilon(1e-6));
}

TEST_CASE("load_image: undecodable files and bad requests are Errors naming the file") {
  const std::string text = scratch().file("not-an-image.png");
  infer::write_file_atomic(text, bytes_of("this is not an image at all"));
  CHECK(contains(error_of([&] { infer::load_image(text, 3, 4, 4); }),
                 "cannot decode image '" + text + "'"));

  std::vector<uint8_t> truncated = png_of(8, 8, 3, std::vector<uint8_t>(8 * 8 * 3, 9));
  truncated.resize(truncated.size() / 2);
  CHECK(contains(error_of([&] { infer::decode_image(truncated, "half.png", 3, 8, 8); }),
                 "cannot decode image 'half.png'"));
  CHECK(contains(error_of([&] { infer::decode_image({}, "empty.png", 3, 8, 8); }),
                 "cannot decode image 'empty.png'"));

  const std::string corpus = std::string(INFER_SOURCE_DIR) + "/fuzz/corpus/image/";
  // fuzz_image's find: a PNG with an empty IDAT chunk (stb's memcpy(NULL, src, 0), apps/CMakeLists.txt),
  // then a damaged one: a one-line error under ASan + UBSan as in the release build.
  const std::vector<uint8_t> empty_idat = infer::read_file(corpus + "png_empty_idat.png");
  REQUIRE(empty_idat.size() == 65);
  CHECK(contains(error_of([&] { infer::decode_image(empty_idat, "idat.png", 3, 3, 3); }),
                 "cannot decode image 'idat.png'"));

  // fuzz_image's second find: a chunk length far beyond the file, which stb turned into a 2 GB
  // allocation before reading it (apps/common/image_checks.h); refused before stb sees it.
  const std::vector<uint8_t> long_chunk = infer::read_file(corpus + "png_idat_length.png");
  REQUIRE(long_chunk.size() == 87);
  CHECK(contains(error_of([&] { infer::decode_image(long_chunk, "len.png", 3, 3, 3); }),
                 "cannot decode image 'len.png': corrupt PNG (chunk of"));
  // a well-formed PNG passes the check; the same with its IHDR length set to ~2 GB does not
  std::vector<uint8_t> png = png_of(2, 2, 1, {0, 1, 2, 3});
  CHECK_NOTHROW(infer::check_png_chunk_lengths(png, "ok.png"));
  png[8] = 0x7F;
  CHECK(contains(error_of([&] { infer::check_png_chunk_lengths(png, "ok.png"); }), "corrupt PNG"));

  // fuzz_image's third find: a 158-byte BMP declaring 2054 x 32260 pixels, which stb decoded as a
  // 66-megapixel black image (it reads past the end as zeros); refused, while a complete BMP passes.
  const std::vector<uint8_t> short_bmp = infer::read_file(corpus + "bmp_truncated_pixels.bmp");
  REQUIRE(short_bmp.size() == 158);
  CHECK(contains(error_of([&] { infer::decode_image(short_bmp, "short.bmp", 3, 3, 3); }),
                 "cannot decode image 'short.bmp': corrupt BMP (2054x32260 pixels at 24 bits need"));
  // and the same header with a compression field stb reads as a negative int (uncompressed rows)
  const std::vector<uint8_t> neg_bmp = infer::read_file(corpus + "bmp_negative_compression.bmp");
  REQUIRE(neg_bmp.size() == 129);
  CHECK(contains(error_of([&] { infer::decode_image(neg_bmp, "neg.bmp", 3, 3, 3); }),
                 "cannot decode image 'neg.bmp': corrupt BMP"));
  // fuzz_image's fourth find: a 9 x 35589 JPEG strip, whose resize to a small square took seconds;
  // refused as a 3954-fold aspect distortion, while a 10-fold one still resizes
  const std::vector<uint8_t> strip = infer::read_file(corpus + "jpeg_strip.jpg");
  REQUIRE(strip.size() == 677);
  CHECK(contains(error_of([&] { infer::decode_image(strip, "strip.jpg", 3, 8, 8); }),
                 "image 'strip.jpg' is 9x35589 (width x height): resizing it to 8x8 would distort"));
  CHECK(infer::decode_image(png_of(40, 4, 1, std::vector<uint8_t>(160, 7)), "wide.png", 1, 8, 8).data.size() == 64);
  // fuzz_image's sixth find: 588 bytes declaring a 36617 x 217 JPEG, which stb decoded (past the end as
  // zeros) before the resize check refused it; now refused from the header, as is the strip above
  const std::vector<uint8_t> tiny = infer::read_file(corpus + "jpeg_tiny_huge.jpg");
  REQUIRE(tiny.size() == 588);
  CHECK(contains(error_of([&] { infer::decode_image(tiny, "tiny.jpg", 3, 8, 8); }),
                 "cannot decode image 'tiny.jpg': it declares 36617x217 pixels in 588 bytes (more than 4096"));
  // a uniform 512 x 512 PNG (about 1 KB) still decodes: real compression stays far below the bound
  CHECK(infer::decode_image(png_of(512, 512, 1, std::vector<uint8_t>(512 * 512, 9)), "flat.png", 1, 4, 4)
            .data.size() == 16);
  // fuzz_image's fifth find: a damaged JPEG whose entropy-coded data drives stb's bit count negative
  // (a 32-bit shift by 33 inside stb; apps/CMakeLists.txt): a one-line error or an image, never a crash
  const std::vector<uint8_t> shifty = infer::read_file(corpus + "jpeg_shift_exponent.jpg");
  REQUIRE(shifty.size() == 674);
  try {
    const infer::Tensor t = infer::decode_image(shifty, "shift.jpg", 3, 8, 8);
    CHECK(t.data.size() == 3 * 8 * 8);
  } catch (const infer::Error& e) {
    CHECK(contains(e.what(), "image 'shift.jpg'"));  // today: "cannot decode image 'shift.jpg': unknown marker"
  }
  std::vector<uint8_t> bmp;
  stbi_write_bmp_to_func([](void* ctx, void* d, int n) {
    auto* out = static_cast<std::vector<uint8_t>*>(ctx);
    out->insert(out->end(), static_cast<uint8_t*>(d), static_cast<uint8_t*>(d) + n);
  }, &bmp, 3, 5, 3, std::vector<uint8_t>(45, 200).data());
  CHECK_NOTHROW(infer::check_bmp_pixel_data(bmp, "ok.bmp"));
  CHECK(infer::decode_image(bmp, "ok.bmp", 3, 5, 3).data.size() == 45);
  bmp.pop_back();  // the last row's padding (3 pixels x 3 bytes = 9, padded to 12): still accepted
  CHECK_NOTHROW(infer::check_bmp_pixel_data(bmp, "ok.bmp"));
  bmp.resize(bmp.size() - 4);  // into the last row's pixels
  CHECK(contains(error_of([&] { infer::check_bmp_pixel_data(bmp, "cut.bmp"); }), "corrupt BMP"));

  const std::string missing = scratch().file("missing.png");
  CHECK(
      contains(error_of([&] { infer::load_image(missing, 3, 4, 4); }), "cannot read '" + missing + "'"));

  const std::vector<uint8_t> ok = png_of(2, 2, 1, {0, 1, 2, 3});
  CHECK(contains(error_of([&] { infer::decode_image(ok, "a.png", 2, 2, 2); }), "1 or 3 channels"));
  CHECK(contains(error_of([&] { infer::decode_image(ok, "a.png", 3, 0, 2); }), "out of range"));
  CHECK(contains(error_of([&] {
                   infer::decode_image(ok, "a.png", 3, 2, 2, {{1, 2}, {}});
                 }),
                 "mean has 2 values"));
  CHECK(contains(error_of([&] {
                   infer::decode_image(ok, "a.png", 3, 2, 2, {{}, {1, 0, 1}});
                 }),
                 "std must not be zero"));
}

TEST_CASE("JPEG Huffman tables with more than 256 codes are refused before stb reads them") {
  // fuzz_image's finding (Debian's stb_image 2.27 overflowed its 257-entry size table): 9 bytes, a DHT
  // whose 16 code counts add up to 244 + 191 = 435 (reads past the end count as 0, as in stb).
  const std::vector<uint8_t> minimal = {0xFF, 0xD8, 0xFF, 0xC4, 0xBF, 0xA2, 0x01, 0xF4, 0xBF};
  const std::string fuzz_dir = std::string(INFER_SOURCE_DIR) + "/fuzz/corpus/image/";
  CHECK(infer::read_file(fuzz_dir + "regress_dht_overflow.jpg") == minimal);
  for (int channels : {1, 3}) {
    CHECK_THROWS_WITH_AS(infer::decode_image(minimal, "dht.jpg", channels, 4, 4),
                         "cannot decode image 'dht.jpg': corrupt JPEG (a Huffman table declares 435 "
                         "codes; at most 256)",
                         Error);
  }
  // stb takes fill bytes before the first marker too (the fuzzer's second finding): FF FF FF D8 ...
  const std::vector<uint8_t> filled = {0xFF, 0xFF, 0xFF, 0xD8, 0xFF, 0xC4, 0xBF, 0xA2, 0x01, 0xF4, 0xBF};
  CHECK(infer::read_file(fuzz_dir + "regress_dht_overflow_fill.jpg") == filled);
  CHECK_THROWS_WITH_AS(infer::decode_image(filled, "fill.jpg", 3, 4, 4),
                       doctest::Contains("declares 435 codes"), Error);
  // The same table in a well-formed JPEG: stb's own DHT (a valid file) is accepted, and one count
  // raised to push the total past 256 is refused.
  std::vector<uint8_t> jpeg = infer::read_file(fuzz_dir + "rgb_8x8.jpg");
  const Tensor ok = infer::decode_image(jpeg, "ok.jpg", 3, 8, 8);
  CHECK(ok.shape == infer::Shape{1, 3, 8, 8});
  size_t dht = 0;
  for (size_t i = 2; i + 1 < jpeg.size(); ++i)
    if (jpeg[i] == 0xFF && jpeg[i + 1] == 0xC4) {
      dht = i;
      break;
    }
  REQUIRE(dht > 0);
  jpeg[dht + 5 + 15] = 255;  // the 16th count of the first table (after FF C4, length, class/id)
  CHECK_THROWS_WITH_AS(infer::decode_image(jpeg, "raised.jpg", 3, 8, 8), doctest::Contains("corrupt JPEG"),
                       Error);
}
