//===- Json.cpp - a small JSON reader for the runtime ----------*- C++ -*-===//

#include "Json.h"

#include <cerrno>
#include <cstdlib>

using namespace xfmr::rt;

namespace {

constexpr int kMaxDepth = 64;

class Parser {
public:
  Parser(std::string_view text, std::string &error) : text(text), error(error) {}

  std::optional<JsonValue> parseDocument() {
    JsonValue value;
    if (!parseValue(value, 0))
      return std::nullopt;
    skipSpace();
    if (pos != text.size()) {
      fail("unexpected text after the JSON value");
      return std::nullopt;
    }
    return value;
  }

private:
  bool fail(const std::string &message) {
    if (error.empty())
      error = message + " at byte " + std::to_string(pos);
    return false;
  }

  void skipSpace() {
    while (pos < text.size() &&
           (text[pos] == ' ' || text[pos] == '\t' || text[pos] == '\n' || text[pos] == '\r'))
      ++pos;
  }

  bool consume(char c) {
    skipSpace();
    if (pos < text.size() && text[pos] == c) {
      ++pos;
      return true;
    }
    return false;
  }

  bool parseValue(JsonValue &out, int depth) {
    if (depth > kMaxDepth)
      return fail("JSON nested deeper than " + std::to_string(kMaxDepth));
    skipSpace();
    if (pos >= text.size())
      return fail("unexpected end of JSON");
    char c = text[pos];
    if (c == '{')
      return parseObject(out, depth);
    if (c == '[')
      return parseArray(out, depth);
    if (c == '"') {
      out.kind = JsonValue::Kind::String;
      return parseString(out.text);
    }
    if (c == '-' || (c >= '0' && c <= '9'))
      return parseNumber(out);
    struct Literal {
      std::string_view word;
      JsonValue::Kind kind;
      bool value;
    };
    static constexpr Literal literals[] = {{"true", JsonValue::Kind::Bool, true},
                                           {"false", JsonValue::Kind::Bool, false},
                                           {"null", JsonValue::Kind::Null, false}};
    for (const Literal &literal : literals) {
      if (text.substr(pos, literal.word.size()) == literal.word) {
        pos += literal.word.size();
        out.kind = literal.kind;
        out.boolean = literal.value;
        return true;
      }
    }
    return fail(std::string("unexpected character '") + c + "'");
  }

  bool parseObject(JsonValue &out, int depth) {
    out.kind = JsonValue::Kind::Object;
    ++pos; // '{'
    if (consume('}'))
      return true;
    do {
      skipSpace();
      if (pos >= text.size() || text[pos] != '"')
        return fail("expected a string key");
      std::string key;
      if (!parseString(key))
        return false;
      if (!consume(':'))
        return fail("expected ':' after key \"" + key + "\"");
      JsonValue value;
      if (!parseValue(value, depth + 1))
        return false;
      for (const auto &entry : out.object)
        if (entry.first == key)
          return fail("duplicate key \"" + key + "\"");
      out.object.emplace_back(std::move(key), std::move(value));
    } while (consume(','));
    if (!consume('}'))
      return fail("expected ',' or '}' in object");
    return true;
  }

  bool parseArray(JsonValue &out, int depth) {
    out.kind = JsonValue::Kind::Array;
    ++pos; // '['
    if (consume(']'))
      return true;
    do {
      JsonValue value;
      if (!parseValue(value, depth + 1))
        return false;
      out.array.push_back(std::move(value));
    } while (consume(','));
    if (!consume(']'))
      return fail("expected ',' or ']' in array");
    return true;
  }

  static void appendUtf8(std::string &out, uint32_t code) {
    if (code < 0x80) {
      out += static_cast<char>(code);
    } else if (code < 0x800) {
      out += static_cast<char>(0xC0 | (code >> 6));
      out += static_cast<char>(0x80 | (code & 0x3F));
    } else if (code < 0x10000) {
      out += static_cast<char>(0xE0 | (code >> 12));
      out += static_cast<char>(0x80 | ((code >> 6) & 0x3F));
      out += static_cast<char>(0x80 | (code & 0x3F));
    } else {
      out += static_cast<char>(0xF0 | (code >> 18));
      out += static_cast<char>(0x80 | ((code >> 12) & 0x3F));
      out += static_cast<char>(0x80 | ((code >> 6) & 0x3F));
      out += static_cast<char>(0x80 | (code & 0x3F));
    }
  }

  bool parseHex4(uint32_t &code) {
    if (pos + 4 > text.size())
      return fail("truncated \\u escape");
    code = 0;
    for (int i = 0; i < 4; ++i) {
      char h = text[pos++];
      code <<= 4;
      if (h >= '0' && h <= '9')
        code |= h - '0';
      else if (h >= 'a' && h <= 'f')
        code |= h - 'a' + 10;
      else if (h >= 'A' && h <= 'F')
        code |= h - 'A' + 10;
      else
        return fail("bad hex digit in \\u escape");
    }
    return true;
  }

  bool parseString(std::string &out) {
    ++pos; // '"'
    while (pos < text.size()) {
      char c = text[pos++];
      if (c == '"')
        return true;
      if (static_cast<unsigned char>(c) < 0x20)
        return fail("control character in string");
      if (c != '\\') {
        out += c;
        continue;
      }
      if (pos >= text.size())
        break;
      char e = text[pos++];
      switch (e) {
      case '"': out += '"'; break;
      case '\\': out += '\\'; break;
      case '/': out += '/'; break;
      case 'b': out += '\b'; break;
      case 'f': out += '\f'; break;
      case 'n': out += '\n'; break;
      case 'r': out += '\r'; break;
      case 't': out += '\t'; break;
      case 'u': {
        uint32_t code;
        if (!parseHex4(code))
          return false;
        if (code >= 0xD800 && code < 0xDC00 && text.substr(pos, 2) == "\\u") {
          pos += 2;
          uint32_t low;
          if (!parseHex4(low))
            return false;
          if (low < 0xDC00 || low >= 0xE000)
            return fail("bad surrogate pair");
          code = 0x10000 + ((code - 0xD800) << 10) + (low - 0xDC00);
        }
        appendUtf8(out, code);
        break;
      }
      default:
        return fail(std::string("bad escape '\\") + e + "'");
      }
    }
    return fail("unterminated string");
  }

  bool parseNumber(JsonValue &out) {
    size_t start = pos;
    if (text[pos] == '-')
      ++pos;
    auto digits = [&] {
      size_t before = pos;
      while (pos < text.size() && text[pos] >= '0' && text[pos] <= '9')
        ++pos;
      return pos > before;
    };
    if (!digits())
      return fail("bad number");
    if (pos < text.size() && text[pos] == '.') {
      ++pos;
      if (!digits())
        return fail("bad number");
    }
    if (pos < text.size() && (text[pos] == 'e' || text[pos] == 'E')) {
      ++pos;
      if (pos < text.size() && (text[pos] == '+' || text[pos] == '-'))
        ++pos;
      if (!digits())
        return fail("bad number");
    }
    out.kind = JsonValue::Kind::Number;
    out.text = std::string(text.substr(start, pos - start));
    return true;
  }

  std::string_view text;
  std::string &error;
  size_t pos = 0;
};

} // namespace

const JsonValue *JsonValue::get(std::string_view key) const {
  for (const auto &entry : object)
    if (entry.first == key)
      return &entry.second;
  return nullptr;
}

std::optional<int64_t> JsonValue::asInt() const {
  if (kind != Kind::Number || text.find_first_of(".eE") != std::string::npos)
    return std::nullopt;
  errno = 0;
  char *end = nullptr;
  long long value = std::strtoll(text.c_str(), &end, 10);
  if (errno == ERANGE || *end)
    return std::nullopt;
  return value;
}

std::optional<uint64_t> JsonValue::asUInt() const {
  if (kind != Kind::Number || text.empty() || text[0] == '-' ||
      text.find_first_of(".eE") != std::string::npos)
    return std::nullopt;
  errno = 0;
  char *end = nullptr;
  unsigned long long value = std::strtoull(text.c_str(), &end, 10);
  if (errno == ERANGE || *end)
    return std::nullopt;
  return value;
}

std::optional<double> JsonValue::asDouble() const {
  if (kind != Kind::Number)
    return std::nullopt;
  return std::strtod(text.c_str(), nullptr);
}

std::optional<JsonValue> xfmr::rt::parseJson(std::string_view text, std::string &error) {
  error.clear();
  return Parser(text, error).parseDocument();
}

void xfmr::rt::appendJsonString(std::string &out, std::string_view text) {
  out += '"';
  for (char c : text) {
    switch (c) {
    case '"': out += "\\\""; break;
    case '\\': out += "\\\\"; break;
    case '\n': out += "\\n"; break;
    case '\t': out += "\\t"; break;
    case '\r': out += "\\r"; break;
    default:
      if (static_cast<unsigned char>(c) < 0x20) {
        static const char hex[] = "0123456789abcdef";
        out += "\\u00";
        out += hex[(c >> 4) & 0xF];
        out += hex[c & 0xF];
      } else {
        out += c;
      }
    }
  }
  out += '"';
}
