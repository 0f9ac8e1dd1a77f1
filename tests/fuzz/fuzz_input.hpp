// Shared by the fuzz targets: the input as a file (the parsers read files), and the rule they check. A parser may refuse
// any input with optimus::Error; anything else — a crash, a sanitizer report, a leak, another exception — is a bug.
#pragma once

#include <unistd.h>

#include <cstddef>
#include <cstdint>
#include <filesystem>
#include <fstream>
#include <string>

namespace optimus::fuzz {

// A file of this process holding `size` bytes of `data`, rewritten for each input (in memory where /dev/shm exists).
inline std::string as_file(const std::uint8_t* data, std::size_t size, const char* name) {
  const std::filesystem::path base =
      std::filesystem::is_directory("/dev/shm") ? std::filesystem::path("/dev/shm") : std::filesystem::temp_directory_path();
  const std::filesystem::path dir = base / ("optimus_fuzz_" + std::to_string(::getpid()));
  struct RemovedAtExit {
    std::filesystem::path dir;
    ~RemovedAtExit() {
      std::error_code ignored;
      std::filesystem::remove_all(dir, ignored);
    }
  };
  static const RemovedAtExit cleanup{dir};  // the process's directory goes when it ends
  std::filesystem::create_directories(dir);
  const std::string path = (dir / name).string();
  std::ofstream(path, std::ios::binary | std::ios::trunc).write(reinterpret_cast<const char*>(data),
                                                                 static_cast<std::streamsize>(size));
  return path;
}

}  // namespace optimus::fuzz
