// Running the command-line tools from tests, as users run them: a scratch folder per test process
// (under the build dir, removed at exit), shell quoting, whole-file reads, and one shell command run
// with stdin closed, stdout and stderr captured, and the exit status decoded (128 + signal when the
// process was killed, so a crash never passes for an exit code). Shared by the CLI suites.
#pragma once

#include <sys/wait.h>
#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <system_error>
#include <vector>

namespace infer::test {

inline const std::filesystem::path& scratch_dir() {
  struct Dir {
    std::filesystem::path path;
    Dir() {
      path = std::filesystem::path(INFER_BINARY_DIR) / ("cli_test_tmp_" + std::to_string(::getpid()));
      std::filesystem::remove_all(path);
      std::filesystem::create_directories(path);
    }
    ~Dir() {
      std::error_code ec;
      std::filesystem::remove_all(path, ec);
    }
  };
  static Dir dir;
  return dir.path;
}

// A path in the scratch folder.
inline std::string tmp(const std::string& name) { return (scratch_dir() / name).string(); }

// `s` as one single-quoted /bin/sh word.
inline std::string quote(const std::string& s) {
  std::string q = "'";
  for (char c : s) q += c == '\'' ? std::string("'\\''") : std::string(1, c);
  return q + "'";
}

// The whole file ("" when it cannot be read).
inline std::string slurp(const std::string& path) {
  std::ifstream f(path, std::ios::binary);
  std::stringstream ss;
  ss << f.rdbuf();
  return ss.str();
}

struct Result {
  int code = -1;  // exit status; 128 + signal when killed (a crash)
  std::string out, err;
  std::vector<std::string> err_lines() const {
    std::vector<std::string> lines;
    std::istringstream in(err);
    for (std::string line; std::getline(in, line);) lines.push_back(line);
    return lines;
  }
};

// Runs `cmd` (already shell-quoted where needed) through /bin/sh with stdin from /dev/null.
inline Result run_shell(const std::string& cmd) {
  static int counter = 0;
  const std::string out = tmp("stdout_" + std::to_string(counter)),
                    err = tmp("stderr_" + std::to_string(counter++));
  const std::string full = cmd + " >" + quote(out) + " 2>" + quote(err) + " </dev/null";
  const int status = std::system(full.c_str());
  Result r;
  if (status != -1 && WIFEXITED(status))
    r.code = WEXITSTATUS(status);
  else if (status != -1 && WIFSIGNALED(status))
    r.code = 128 + WTERMSIG(status);
  r.out = slurp(out);
  r.err = slurp(err);
  return r;
}

}  // namespace infer::test
