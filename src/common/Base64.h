// Base64 (RFC 4648, with padding): binary data inside JSON text (a checkpoint's graph).
#pragma once

#include <optional>
#include <string>

namespace ringtrain {

std::string base64_encode(const std::string& bytes);
// nullopt for text that is not canonical padded base64.
std::optional<std::string> base64_decode(const std::string& text);

}  // namespace ringtrain
