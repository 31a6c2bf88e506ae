// The fuzzers' input as a file path for readers that open files: one memfd per process,
// rewritten for every input and named through /proc/self/fd, so no disk is touched.
#pragma once

#include <sys/mman.h>
#include <unistd.h>

#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <string>

namespace ringtrain::fuzz {

inline std::string as_file(const std::uint8_t* data, std::size_t size) {
  static const int fd = ::memfd_create("ringtrain-fuzz", 0);
  if (fd < 0 || ::ftruncate(fd, 0) != 0) std::abort();
  std::size_t done = 0;
  while (done < size) {
    const ssize_t n = ::pwrite(fd, data + done, size - done, static_cast<off_t>(done));
    if (n <= 0) std::abort();
    done += static_cast<std::size_t>(n);
  }
  return "/proc/self/fd/" + std::to_string(fd);
}

}  // namespace ringtrain::fuzz
