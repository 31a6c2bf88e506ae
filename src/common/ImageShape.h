// The (channels, height, width) shape of one sample, shared by datasets and models.
#pragma once

#include <cstddef>
#include <string>

#include <fmt/format.h>

namespace ringtrain {

struct ImageShape {
  int channels = 0;
  int height = 0;
  int width = 0;

  std::size_t numel() const noexcept {
    return static_cast<std::size_t>(channels) * static_cast<std::size_t>(height) * static_cast<std::size_t>(width);
  }
  std::string str() const { return fmt::format("{}x{}x{}", channels, height, width); }
  friend bool operator==(const ImageShape&, const ImageShape&) = default;
};

}  // namespace ringtrain
