//===- Json.h - a small JSON reader for the runtime ------------*- C++ -*-===//
//
// The runtime has no LLVM dependency (an embedding user links only it), so it
// cannot use llvm::json. This reader covers what safetensors headers and the
// model manifest need, and treats its input as untrusted: bounded nesting,
// exact 64-bit integers, positions in every error.
//
//===----------------------------------------------------------------------===//

#ifndef XFMR_LIB_RUNTIME_JSON_H
#define XFMR_LIB_RUNTIME_JSON_H

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace xfmr::rt {

class JsonValue {
public:
  enum class Kind { Null, Bool, Number, String, Array, Object };

  Kind kind = Kind::Null;
  bool boolean = false;
  std::string text; // String contents, or a number's literal text.
  std::vector<JsonValue> array;
  // Keys keep their order of appearance; lookups are linear (small objects)
  // or through `index`.
  std::vector<std::pair<std::string, JsonValue>> object;

  bool isObject() const { return kind == Kind::Object; }
  bool isArray() const { return kind == Kind::Array; }
  bool isString() const { return kind == Kind::String; }
  bool isNumber() const { return kind == Kind::Number; }

  const JsonValue *get(std::string_view key) const;
  /// The number as an exact integer, if it is one that fits.
  std::optional<int64_t> asInt() const;
  std::optional<uint64_t> asUInt() const;
  std::optional<double> asDouble() const;
};

/// Parses `text`; on failure returns nullopt and sets `error` to a message
/// naming the byte offset.
std::optional<JsonValue> parseJson(std::string_view text, std::string &error);

/// Appends `text` as a JSON string literal.
void appendJsonString(std::string &out, std::string_view text);

} // namespace xfmr::rt

#endif // XFMR_LIB_RUNTIME_JSON_H
