#pragma once
// Writes a fuzzer's seed corpus: one file per seed, DIR/PREFIX-N, N counting from 0. A file that cannot be written
// ends the program (the corpus would be incomplete).
#include <cstddef>
#include <cstdio>
#include <cstdlib>
#include <span>
#include <string>
#include <utility>

namespace rill::fuzz {

class seed_writer {
 public:
  seed_writer(std::string dir, std::string prefix) : dir_(std::move(dir)), prefix_(std::move(prefix)) {}

  void put(std::span<const std::byte> bytes) {
    const std::string path = dir_ + "/" + prefix_ + "-" + std::to_string(written_++);
    std::FILE* f = std::fopen(path.c_str(), "wb");
    if (f == nullptr) {
      std::perror(path.c_str());
      std::exit(1);
    }
    std::fwrite(bytes.data(), 1, bytes.size(), f);
    std::fclose(f);
  }
  [[nodiscard]] int written() const noexcept { return written_; }
  [[nodiscard]] const std::string& dir() const noexcept { return dir_; }

 private:
  std::string dir_;
  std::string prefix_;
  int written_ = 0;
};

}  // namespace rill::fuzz
