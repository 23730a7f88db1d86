//===- Json.h - JSON values for the runtime --------------------*- C++ -*-===//
//
// The runtime has no LLVM dependency (an embedding user links only it), so it
// reads JSON with nlohmann-json rather than llvm::json. Files and requests are
// untrusted: parseJson refuses duplicate keys, bounds what would later
// recurse (copying and printing nested values) and the members of one
// object, and the accessors below answer "absent" for a value of another
// type instead of throwing.
//
// `Json` keeps an object's members sorted (tokenizer vocabularies hold 10^5
// of them); `OrderedJson` keeps them in the order written, which chat
// templates show (`tojson`, `dict.items()`) as Python's dicts do.
//
//===----------------------------------------------------------------------===//

#ifndef XFMR_LIB_RUNTIME_JSON_H
#define XFMR_LIB_RUNTIME_JSON_H

#include <nlohmann/json.hpp>

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

namespace xfmr::rt {

using Json = nlohmann::json;
using OrderedJson = nlohmann::ordered_json;

/// Parses `text`; on failure returns nullopt and sets `error` to a message
/// naming the place ("parse error at line 1, column 12: ...") or the
/// duplicate key. Nesting is bounded by 64 levels and an OrderedJson object
/// by 4096 members (its insertion is linear in its size).
std::optional<Json> parseJson(std::string_view text, std::string &error);
std::optional<OrderedJson> parseOrderedJson(std::string_view text, std::string &error);

/// `key` of `object`, or null when `object` is not an object or lacks it.
template <typename JsonT> const JsonT *field(const JsonT &object, std::string_view key) {
  if (!object.is_object())
    return nullptr;
  auto it = object.find(key);
  return it == object.end() ? nullptr : &*it;
}

/// The elements of an array, or none.
template <typename JsonT> const typename JsonT::array_t &elements(const JsonT &value) {
  static const typename JsonT::array_t none;
  return value.is_array() ? value.template get_ref<const typename JsonT::array_t &>() : none;
}

/// The members of an object, or none.
template <typename JsonT> const typename JsonT::object_t &members(const JsonT &value) {
  static const typename JsonT::object_t none;
  return value.is_object() ? value.template get_ref<const typename JsonT::object_t &>() : none;
}

/// A string's text, or "".
template <typename JsonT> const std::string &textOf(const JsonT &value) {
  static const std::string none;
  return value.is_string() ? value.template get_ref<const std::string &>() : none;
}

/// A number written as an integer, when it fits.
template <typename JsonT> std::optional<int64_t> asInt(const JsonT &value) {
  if (value.is_number_unsigned())
    return value.template get<uint64_t>() <= static_cast<uint64_t>(INT64_MAX)
               ? std::optional<int64_t>(value.template get<int64_t>())
               : std::nullopt;
  if (value.is_number_integer())
    return value.template get<int64_t>();
  return std::nullopt;
}

template <typename JsonT> std::optional<uint64_t> asUInt(const JsonT &value) {
  if (value.is_number_unsigned())
    return value.template get<uint64_t>();
  return std::nullopt;
}

template <typename JsonT> std::optional<double> asDouble(const JsonT &value) {
  if (value.is_number())
    return value.template get<double>();
  return std::nullopt;
}

/// Whether `value` is the literal true.
template <typename JsonT> bool isTrue(const JsonT &value) {
  return value.is_boolean() && value.template get<bool>();
}

/// Prints `value`; invalid UTF-8 in its strings becomes U+FFFD.
template <typename JsonT> std::string dumpJson(const JsonT &value) {
  return value.dump(-1, ' ', false, JsonT::error_handler_t::replace);
}

} // namespace xfmr::rt

#endif // XFMR_LIB_RUNTIME_JSON_H
