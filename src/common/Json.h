// A small JSON value with a writer and a strict parser: enough for the run directory's
// config/summary/jsonl files and the checkpoint's config section, without a dependency.
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <string_view>
#include <variant>
#include <vector>

namespace ringtrain {

class Json {
 public:
  using Array = std::vector<Json>;
  // Keys keep insertion order so files read in the order they were written.
  using Object = std::vector<std::pair<std::string, Json>>;

  Json() = default;  // null
  Json(std::nullptr_t) {}
  Json(bool b) : value_(b) {}
  Json(double d) : value_(d) {}
  Json(float d) : value_(static_cast<double>(d)) {}
  Json(int i) : value_(static_cast<std::int64_t>(i)) {}
  Json(long i) : value_(static_cast<std::int64_t>(i)) {}
  Json(long long i) : value_(static_cast<std::int64_t>(i)) {}
  Json(unsigned i) : value_(static_cast<std::int64_t>(i)) {}
  Json(unsigned long i) : value_(static_cast<std::int64_t>(i)) {}
  Json(unsigned long long i) : value_(static_cast<std::int64_t>(i)) {}
  Json(const char* s) : value_(std::string(s)) {}
  Json(std::string s) : value_(std::move(s)) {}
  Json(std::string_view s) : value_(std::string(s)) {}
  Json(Array a) : value_(std::move(a)) {}
  Json(Object o) : value_(std::move(o)) {}

  static Json object() { return Json(Object{}); }
  static Json array() { return Json(Array{}); }

  bool is_null() const noexcept { return std::holds_alternative<std::monostate>(value_); }
  bool is_bool() const noexcept { return std::holds_alternative<bool>(value_); }
  bool is_number() const noexcept {
    return std::holds_alternative<double>(value_) || std::holds_alternative<std::int64_t>(value_);
  }
  bool is_integer() const noexcept { return std::holds_alternative<std::int64_t>(value_); }
  bool is_string() const noexcept { return std::holds_alternative<std::string>(value_); }
  bool is_array() const noexcept { return std::holds_alternative<Array>(value_); }
  bool is_object() const noexcept { return std::holds_alternative<Object>(value_); }

  // Typed access; throws std::runtime_error naming the expected type.
  bool as_bool() const;
  double as_double() const;
  std::int64_t as_int() const;
  const std::string& as_string() const;
  const Array& as_array() const;
  const Object& as_object() const;

  // Object access. set() replaces an existing key; find() returns nullptr if absent;
  // at() throws std::runtime_error naming the missing key.
  Json& set(std::string key, Json value);
  const Json* find(std::string_view key) const;
  const Json& at(std::string_view key) const;
  // Array append.
  Json& push(Json value);

  // Compact single-line JSON (what .jsonl wants), or indented with indent > 0.
  std::string dump(int indent = 0) const;

  // Throws std::runtime_error with the byte offset of the first error.
  static Json parse(std::string_view text);

 private:
  void dump_to(std::string& out, int indent, int depth) const;
  std::variant<std::monostate, bool, std::int64_t, double, std::string, Array, Object> value_;
};

}  // namespace ringtrain
