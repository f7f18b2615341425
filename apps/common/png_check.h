// A check of PNG chunk lengths made before any byte reaches stb_image. stb_image 2.27 grows its IDAT
// buffer to a chunk's declared length before it reads the chunk, so a damaged length (up to 2^31)
// makes it allocate gigabytes for a file of a few bytes; the image fuzzer found it
// (fuzz/corpus/image/png_idat_length.png). Non-PNG bytes pass untouched.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace infer {

// Throws infer::Error "cannot decode image '<origin>': corrupt PNG (...)" when `bytes` carry the PNG
// signature and a chunk before IEND declares more data than the file holds after its header.
void check_png_chunk_lengths(const std::vector<uint8_t>& bytes, const std::string& origin);

}  // namespace infer
