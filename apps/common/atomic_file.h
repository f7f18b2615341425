// Output files that are never left half-written: the bytes go to a temporary file in the target's
// folder (same file system, so rename() is atomic), are flushed to disk (fsync), and only then renamed
// over the target. A full disk, an error or a kill leaves either the old file or the new one.
// StagedWrites does this for several files at once and renames only when the whole command succeeded.
#pragma once

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

namespace infer {

// Writes bytes to a temporary next to path, then renames it over path. Error "cannot write '<path>':
// <reason>" when it fails; the temporary is removed and an existing file at path is left as it was.
void write_file_atomic(const std::string& path, const std::vector<uint8_t>& bytes);

// The outputs of one command: add() writes each file's temporary at once (a full disk fails there,
// before anything is replaced); commit() renames them all into place. Destroyed without commit() (an
// error, an exception) it removes its temporaries and every existing output stays untouched.
class StagedWrites {
 public:
  StagedWrites() = default;
  StagedWrites(const StagedWrites&) = delete;
  StagedWrites& operator=(const StagedWrites&) = delete;
  ~StagedWrites();

  void add(const std::string& path, const std::vector<uint8_t>& bytes);
  void commit();

 private:
  std::vector<std::pair<std::string, std::string>> staged_;  // (temporary, target)
};

}  // namespace infer
