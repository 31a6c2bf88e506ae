// Up-front checks of allocations whose size a flag or a file decides: an error naming the
// flag and the memory it needs, instead of a bare std::bad_alloc (or the OOM killer) later.
#pragma once

#include <unistd.h>

#include <cstdint>
#include <initializer_list>
#include <limits>
#include <stdexcept>
#include <string>

#include <fmt/format.h>

namespace ringtrain {

// This machine's physical memory in bytes, 0 when the system does not say.
inline std::uint64_t physical_memory_bytes() noexcept {
  const long pages = ::sysconf(_SC_PHYS_PAGES);
  const long page = ::sysconf(_SC_PAGE_SIZE);
  return pages > 0 && page > 0 ? static_cast<std::uint64_t>(pages) * static_cast<std::uint64_t>(page) : 0;
}

// The product, saturated at UINT64_MAX: sizes typed on a command line may overflow.
inline std::uint64_t saturating_product(std::initializer_list<std::uint64_t> factors) noexcept {
  std::uint64_t p = 1;
  for (std::uint64_t f : factors) {
    if (__builtin_mul_overflow(p, f, &p)) return std::numeric_limits<std::uint64_t>::max();
  }
  return p;
}

// "512 MB", "6.3 TB" (powers of 1000, as `free -g` users read them).
inline std::string format_bytes(std::uint64_t bytes) {
  static constexpr const char* kUnits[] = {"B", "kB", "MB", "GB", "TB", "PB", "EB"};
  double v = static_cast<double>(bytes);
  int u = 0;
  while (v >= 1000.0 && u + 1 < static_cast<int>(std::size(kUnits))) {
    v /= 1000.0;
    ++u;
  }
  return u == 0 ? fmt::format("{} B", bytes) : fmt::format("{:.3g} {}", v, kUnits[u]);
}

// True when an allocation of `bytes` can fit: at most this machine's physical memory
// (anything above it cannot be backed, so it would end in bad_alloc or the OOM killer).
inline bool fits_in_memory(std::uint64_t bytes) noexcept {
  const std::uint64_t total = physical_memory_bytes();
  return total == 0 || bytes <= total;
}

// Throws std::invalid_argument "<what> needs <N>, more than this machine's <M> of memory".
inline void require_memory(std::uint64_t bytes, const std::string& what) {
  if (!fits_in_memory(bytes)) {
    throw std::invalid_argument(fmt::format("{} needs {}, more than this machine's {} of memory", what,
                                            format_bytes(bytes), format_bytes(physical_memory_bytes())));
  }
}

}  // namespace ringtrain
