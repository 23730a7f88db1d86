//===- Json.cpp - JSON values for the runtime -----------------------------===//

#include "Json.h"

#include <algorithm>
#include <unordered_set>
#include <vector>

using namespace xfmr::rt;

namespace {

constexpr int kMaxDepth = 64;
constexpr size_t kMaxOrderedMembers = 4096;

template <typename JsonT>
std::optional<JsonT> parseBounded(std::string_view text, std::string &error, size_t maxMembers) {
  error.clear();
  // The keys so far of each object being read, innermost last.
  std::vector<std::unordered_set<std::string>> keys;
  auto bound = [&](int depth, typename JsonT::parse_event_t event, JsonT &parsed) {
    using Event = typename JsonT::parse_event_t;
    if (!error.empty())
      return false;
    if (depth > kMaxDepth) {
      error = "JSON nested deeper than " + std::to_string(kMaxDepth) + " levels";
    } else if (event == Event::object_start) {
      keys.emplace_back();
    } else if (event == Event::object_end && !keys.empty()) {
      keys.pop_back();
    } else if (event == Event::key && !keys.empty()) {
      const std::string &key = parsed.template get_ref<const std::string &>();
      if (!keys.back().insert(key).second)
        error = "duplicate key \"" + key + "\"";
      else if (keys.back().size() > maxMembers)
        error = "a JSON object has more than " + std::to_string(maxMembers) + " members";
    }
    return error.empty();
  };
  try {
    JsonT value = JsonT::parse(text.begin(), text.end(), bound);
    if (!error.empty())
      return std::nullopt;
    return value;
  } catch (const typename JsonT::exception &e) {
    // A syntax error, or a number past a double's range: "[json.exception.
    // parse_error.101] parse error at line 1, column 4: ...; last read:
    // '<bytes>'; expected ..." without the library's tag, and without the
    // bytes read, which need not be UTF-8.
    std::string message = e.what();
    size_t tag = message.find("] ");
    if (tag != std::string::npos)
      message.erase(0, tag + 2);
    size_t read = message.find("; last read: '");
    if (read != std::string::npos)
      message.erase(read, std::min(message.size(), message.find("; expected ", read)) - read);
    error = message;
    return std::nullopt;
  }
}

} // namespace

std::optional<Json> xfmr::rt::parseJson(std::string_view text, std::string &error) {
  return parseBounded<Json>(text, error, SIZE_MAX);
}

std::optional<OrderedJson> xfmr::rt::parseOrderedJson(std::string_view text, std::string &error) {
  return parseBounded<OrderedJson>(text, error, kMaxOrderedMembers);
}
