// The progress bar of `infer eval`: "[#####-----] 4096/10000 <what>" on stderr, redrawn in place, only
// when stderr is a terminal (so pipes, logs and tests see nothing), and erased when done so that
// stdout's results stay clean.
#pragma once

#include <unistd.h>

#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <string>

namespace infer::cli {

class Progress {
 public:
  explicit Progress(int64_t total, std::string what = "")
      : total_(total), what_(std::move(what)), enabled_(isatty(fileno(stderr)) != 0) {}
  void update(int64_t done) const {
    if (!enabled_) return;
    constexpr int kWidth = 40;
    const int filled = int(kWidth * done / std::max<int64_t>(total_, 1));
    std::fprintf(stderr, "\r[%s%s] %lld/%lld %s", std::string(size_t(filled), '#').c_str(),
                 std::string(size_t(kWidth - filled), '-').c_str(), static_cast<long long>(done),
                 static_cast<long long>(total_), what_.c_str());
    std::fflush(stderr);
  }
  void finish() const {
    if (!enabled_) return;
    std::fprintf(stderr, "\r%*s\r", 79, "");
    std::fflush(stderr);
  }

 private:
  int64_t total_;
  std::string what_;
  bool enabled_;
};

}  // namespace infer::cli
