//===- ChatTemplate.cpp - Hugging Face chat templates ----------*- C++ -*-===//
//
// A lexer, a recursive-descent parser into an AST and a tree-walking
// renderer for the Jinja that chat templates use, following jinja2 3.1 as
// transformers configures it (ImmutableSandboxedEnvironment, trim_blocks,
// lstrip_blocks, loopcontrols, `generation`, raise_exception, strftime_now,
// its own tojson). The values are Python's: None, bool, 64-bit int, float,
// str, list, tuple, dict (in insertion order), jinja2's Undefined, and
// generators (what map, select and friends return: always true, without a
// length). Printing follows Python's str() and repr().
//
// The sandbox is immutable: lists and dicts cannot be changed once built, so
// only namespaces are mutable, which keeps values acyclic except through
// namespaces (whose attributes are dropped after each render).
//
//===----------------------------------------------------------------------===//

#include "ChatTemplate.h"

#include "CommandLine.h"
#include "Json.h"
#include "RuntimeSupport.h"
#include "Tokenizers/Unicode.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <ctime>
#include <functional>
#include <optional>
#include <unordered_map>
#include <unordered_set>
#include <utility>

using namespace xfmr::rt;

namespace {

//===----------------------------------------------------------------------===//
// Limits: what a hostile template may not exceed.
//===----------------------------------------------------------------------===//

/// Any string built, including the output.
constexpr size_t kMaxTextBytes = size_t(64) << 20;
/// Any list or dict built.
constexpr size_t kMaxItems = size_t(1) << 20;
/// Nesting of expressions and of blocks in the source.
constexpr int kMaxSyntaxDepth = 200;
/// Nesting of lists and dicts in values (bounds printing and comparing).
constexpr uint32_t kMaxValueDepth = 200;
/// Nested evaluations while rendering: macro recursion ends here.
constexpr int kMaxRenderDepth = 600;
constexpr uint64_t kMaxLoopIterations = 1000000;
/// Work units: one per evaluation step and per item walked or built, one
/// per 16 bytes of text walked and per 32 bytes copied. A bound on time: a
/// unit is about a microsecond in a sanitized build, 50 ns in a release
/// one; shipped templates need 150 to 350 per message of a chat.
constexpr uint64_t kMaxWork = 5000000;
/// Bytes of the strings, lists and dicts that operations build in one
/// render (what is built is all that can be held): a bound on memory.
constexpr uint64_t kMaxBuiltBytes = uint64_t(1) << 30;
/// jinja2's sandbox refuses larger ranges (MAX_RANGE).
constexpr int64_t kMaxRange = 100000;

/// An error in the template; the parser or renderer adds where and, unless
/// the error has one, the line it is at.
struct TemplateError {
  std::string message;
  int line = 0;
};

[[noreturn]] void raise(std::string message) { throw TemplateError{std::move(message)}; }
[[noreturn]] void raiseAt(int line, std::string message) {
  throw TemplateError{std::move(message), line};
}

[[noreturn]] void raiseTooLong() {
  raise("a string of more than " + std::to_string(kMaxTextBytes >> 20) + " MiB");
}
[[noreturn]] void raiseTooMany() {
  raise("a list of more than " + std::to_string(kMaxItems) + " items");
}

std::string singleQuoted(std::string_view text) { return "'" + std::string(text) + "'"; }

//===----------------------------------------------------------------------===//
// Python's text rules on UTF-8.
//===----------------------------------------------------------------------===//

/// str.isspace(): Unicode White_Space plus the separators \x1c-\x1f.
bool isPySpace(uint32_t cp) { return isSpace(cp) || (cp >= 0x1C && cp <= 0x1F); }

/// Whether text[i] starts a UTF-16 surrogate encoded as UTF-8 (what a
/// template's '\ud800' becomes), which Python keeps as one code point.
bool isEncodedSurrogate(std::string_view text, size_t i) {
  auto byte = [&](size_t k) { return static_cast<uint8_t>(text[i + k]); };
  return i + 2 < text.size() && byte(0) == 0xED && (byte(1) & 0xE0) == 0xA0 &&
         (byte(2) & 0xC0) == 0x80;
}

/// The bytes of the code point at text[i]: a UTF-8 character, an encoded
/// surrogate, or one byte of invalid UTF-8.
size_t codePointBytes(std::string_view text, size_t i) {
  if (size_t length = utf8Length(text, i))
    return length;
  return isEncodedSurrogate(text, i) ? 3 : 1;
}

/// Calls visit(cp, byteOffset, byteLength) for each code point of `text`;
/// a byte of invalid UTF-8 becomes U+DC80 + byte (Python's
/// surrogateescape), which appendCodePoint writes back unchanged.
template <typename Visit> void forEachCodePoint(std::string_view text, Visit visit) {
  for (size_t i = 0; i < text.size();) {
    auto lead = static_cast<uint8_t>(text[i]);
    size_t length = lead < 0x80 ? 1 : codePointBytes(text, i);
    uint32_t cp = length > 1 ? codePointAt(text, i, length) : lead < 0x80 ? lead : 0xDC00u + lead;
    visit(cp, i, length);
    i += length;
  }
}

/// Code points of `text`, decoded as forEachCodePoint does.
std::vector<uint32_t> codePoints(std::string_view text) {
  std::vector<uint32_t> points;
  points.reserve(text.size());
  forEachCodePoint(text, [&](uint32_t cp, size_t, size_t) { points.push_back(cp); });
  return points;
}

/// The code point at text[i].
uint32_t decodeAt(std::string_view text, size_t i) {
  uint32_t cp = 0;
  forEachCodePoint(text.substr(i, codePointBytes(text, i)),
                   [&](uint32_t point, size_t, size_t) { cp = point; });
  return cp;
}

/// The start of the code point that ends at byte `end` (> 0) of `text`.
size_t previousCodePoint(std::string_view text, size_t end) {
  size_t start = end - 1;
  while (start > 0 && end - start < 4 && (static_cast<uint8_t>(text[start]) & 0xC0) == 0x80)
    --start;
  return codePointBytes(text, start) == end - start ? start : end - 1;
}

void appendCodePoint(std::string &out, uint32_t cp) {
  if (cp >= 0xDC80 && cp <= 0xDCFF)
    out += static_cast<char>(cp - 0xDC00);
  else
    appendUtf8(out, cp);
}

std::string fromCodePoints(const uint32_t *points, size_t count) {
  std::string out;
  out.reserve(count);
  for (size_t i = 0; i < count; ++i)
    appendCodePoint(out, points[i]);
  return out;
}

std::string fromCodePoints(const std::vector<uint32_t> &points) {
  return fromCodePoints(points.data(), points.size());
}

size_t codePointCount(std::string_view text) {
  size_t count = 0;
  for (size_t i = 0; i < text.size(); ++count)
    i += static_cast<uint8_t>(text[i]) < 0x80 ? 1 : codePointBytes(text, i);
  return count;
}

/// The byte offset of code point `codePoint` of `text` (its size if past
/// the end).
size_t byteOffset(const std::string &text, int64_t codePoint) {
  size_t i = 0;
  for (int64_t n = 0; n < codePoint && i < text.size(); ++n)
    i += static_cast<uint8_t>(text[i]) < 0x80 ? 1 : codePointBytes(text, i);
  return i;
}

/// The byte length of the Python whitespace character at text[i], or 0.
size_t pySpaceAt(std::string_view text, size_t i) {
  unsigned char c = text[i];
  if (c < 0x80)
    return isPySpace(c) ? 1 : 0;
  size_t length = utf8Length(text, i);
  if (!length)
    return 0;
  return isPySpace(codePoints(text.substr(i, length))[0]) ? length : 0;
}

size_t skipPySpace(std::string_view text, size_t i) {
  while (i < text.size()) {
    size_t length = pySpaceAt(text, i);
    if (!length)
      break;
    i += length;
  }
  return i;
}

/// `text` without its trailing Python whitespace (str.rstrip()).
std::string_view rstripPySpace(std::string_view text) {
  size_t end = 0;
  for (size_t i = 0; i < text.size();) {
    size_t space = pySpaceAt(text, i);
    if (space) {
      i += space;
      continue;
    }
    size_t length = utf8Length(text, i);
    i += length ? length : 1;
    end = i;
  }
  return text.substr(0, end);
}

/// The KMP border table of `pattern` (read backwards if `reversed`).
std::vector<size_t> borders(std::string_view pattern, bool reversed) {
  auto at = [&](size_t i) { return reversed ? pattern[pattern.size() - 1 - i] : pattern[i]; };
  std::vector<size_t> border(pattern.size());
  for (size_t i = 1, k = 0; i < pattern.size(); ++i) {
    while (k && at(i) != at(k))
      k = border[k - 1];
    if (at(i) == at(k))
      ++k;
    border[i] = k;
  }
  return border;
}

/// text.find(needle, from) in linear time: a long needle searched naively
/// could take |text| * |needle| steps, so it is searched with KMP.
size_t findText(std::string_view text, std::string_view needle, size_t from = 0) {
  if (needle.size() <= 16 || from > text.size())
    return text.find(needle, from);
  std::vector<size_t> border = borders(needle, false);
  for (size_t i = from, k = 0; i < text.size(); ++i) {
    while (k && text[i] != needle[k])
      k = border[k - 1];
    if (text[i] == needle[k] && ++k == needle.size())
      return i + 1 - needle.size();
  }
  return std::string_view::npos;
}

/// text.rfind(needle) in linear time, scanning from the end.
size_t rfindText(std::string_view text, std::string_view needle) {
  if (needle.size() <= 16)
    return text.rfind(needle);
  std::vector<size_t> border = borders(needle, true);
  size_t m = needle.size();
  for (size_t i = text.size(), k = 0; i-- > 0;) {
    while (k && text[i] != needle[m - 1 - k])
      k = border[k - 1];
    if (text[i] == needle[m - 1 - k] && ++k == m)
      return i;
  }
  return std::string_view::npos;
}

/// The simple uppercase of `cp`: the inverse of the lowercase table (the
/// first code point that lowercases to it), as Python's for nearly all
/// letters.
uint32_t simpleUpper(uint32_t cp) {
  if (cp < 0x80)
    return cp >= 'a' && cp <= 'z' ? cp - 32 : cp;
  static const std::unordered_map<uint32_t, uint32_t> table = [] {
    std::unordered_map<uint32_t, uint32_t> upper;
    std::vector<uint32_t> lower;
    for (uint32_t c = 0x80; c < 0x20000; ++c) {
      lower.clear();
      appendLowercase(c, lower);
      if (lower.size() == 1 && lower[0] != c)
        upper.emplace(lower[0], c);
    }
    // Lowercase letters whose uppercase lowercases to another letter.
    upper[0x3C2] = 0x3A3; // final sigma
    upper[0x131] = 'I';   // dotless i
    upper[0x17F] = 'S';   // long s
    upper[0xB5] = 0x39C;  // micro sign
    return upper;
  }();
  auto it = table.find(cp);
  return it == table.end() ? cp : it->second;
}

void appendUpper(uint32_t cp, std::vector<uint32_t> &out) {
  if (cp == 0xDF) { // ß
    out.push_back('S');
    out.push_back('S');
    return;
  }
  out.push_back(simpleUpper(cp));
}

/// The titlecase of `cp`: its uppercase, except for the Latin digraphs
/// (Ǆ ǅ ǆ -> ǅ, and Ǉ, Ǌ, Ǳ likewise).
void appendTitle(uint32_t cp, std::vector<uint32_t> &out) {
  if ((cp >= 0x1C4 && cp <= 0x1CC) || (cp >= 0x1F1 && cp <= 0x1F3)) {
    uint32_t first = cp >= 0x1F1 ? 0x1F1 : 0x1C4 + (cp - 0x1C4) / 3 * 3;
    out.push_back(first + 1);
    return;
  }
  appendUpper(cp, out);
}

void appendLower(uint32_t cp, std::vector<uint32_t> &out) {
  if (cp < 0x80)
    out.push_back(cp >= 'A' && cp <= 'Z' ? cp + 32 : cp);
  else
    appendLowercase(cp, out);
}

bool hasLowercase(uint32_t cp) {
  if (cp < 0x80)
    return cp >= 'A' && cp <= 'Z';
  thread_local std::vector<uint32_t> lower;
  lower.clear();
  appendLowercase(cp, lower);
  return lower.size() != 1 || lower[0] != cp;
}

bool isCased(uint32_t cp) { return simpleUpper(cp) != cp || hasLowercase(cp); }
bool isUpperCase(uint32_t cp) { return hasLowercase(cp) && simpleUpper(cp) == cp; }
bool isLowerCase(uint32_t cp) { return simpleUpper(cp) != cp && !hasLowercase(cp); }

/// Appends `text` with each code point mapped by `map` (ASCII directly).
template <typename Map>
std::string mapCodePoints(std::string_view text, char (*mapAscii)(char), Map map) {
  std::string out;
  out.reserve(text.size());
  std::vector<uint32_t> mapped;
  forEachCodePoint(text, [&](uint32_t cp, size_t at, size_t length) {
    if (cp < 0x80) {
      out += mapAscii(static_cast<char>(cp));
      return;
    }
    mapped.clear();
    map(cp, at, length, mapped);
    for (uint32_t m : mapped)
      appendCodePoint(out, m);
  });
  return out;
}

char asciiUpper(char c) { return c >= 'a' && c <= 'z' ? static_cast<char>(c - 32) : c; }
char asciiLower(char c) { return c >= 'A' && c <= 'Z' ? static_cast<char>(c + 32) : c; }

std::string pyUpper(std::string_view text) {
  return mapCodePoints(text, asciiUpper,
                       [](uint32_t cp, size_t, size_t, auto &out) { appendUpper(cp, out); });
}

/// str.lower(), with the final sigma rule.
std::string pyLower(std::string_view text) {
  return mapCodePoints(text, asciiLower, [&](uint32_t cp, size_t at, size_t length, auto &out) {
    if (cp == 0x3A3 && at > 0) {
      size_t next = at + length;
      bool precededByCased = isCased(decodeAt(text, previousCodePoint(text, at)));
      bool followedByCased = next < text.size() && isCased(decodeAt(text, next));
      if (precededByCased && !followedByCased) {
        out.push_back(0x3C2);
        return;
      }
    }
    appendLower(cp, out);
  });
}

/// str.title(): each cased run starts titlecase and continues lowercase.
std::string pyTitle(std::string_view text) {
  std::vector<uint32_t> out;
  bool previousCased = false;
  for (uint32_t cp : codePoints(text)) {
    if (previousCased)
      appendLower(cp, out);
    else
      appendTitle(cp, out);
    previousCased = isCased(cp);
  }
  return fromCodePoints(out);
}

/// str.capitalize(): the first character titlecase, the rest lowercase.
std::string pyCapitalize(std::string_view text) {
  std::vector<uint32_t> points = codePoints(text), out;
  for (size_t i = 0; i < points.size(); ++i) {
    if (i == 0)
      appendTitle(points[i], out);
    else
      appendLower(points[i], out);
  }
  return fromCodePoints(out);
}

/// str.splitlines(): on \n, \r, \r\n, \v, \f, \x1c-\x1e, \x85, \u2028, \u2029.
std::vector<std::string> pySplitLines(std::string_view text, bool keepEnds = false) {
  std::vector<uint32_t> points = codePoints(text);
  std::vector<std::string> lines;
  size_t start = 0;
  for (size_t i = 0; i < points.size(); ++i) {
    uint32_t cp = points[i];
    bool isBreak = cp == '\n' || cp == '\r' || cp == 0x0B || cp == 0x0C ||
                   (cp >= 0x1C && cp <= 0x1E) || cp == 0x85 || cp == 0x2028 || cp == 0x2029;
    if (!isBreak)
      continue;
    if (lines.size() >= kMaxItems)
      raiseTooMany();
    size_t end = i;
    if (cp == '\r' && i + 1 < points.size() && points[i + 1] == '\n')
      ++i;
    lines.push_back(fromCodePoints(points.data() + start, (keepEnds ? i + 1 : end) - start));
    start = i + 1;
  }
  if (start < points.size())
    lines.push_back(fromCodePoints(points.data() + start, points.size() - start));
  return lines;
}

/// Python's repr() of a float: the shortest digits that read back the same,
/// in positional notation from 1e-4 up to 1e16 and exponent notation
/// outside.
std::string pyFloat(double value) {
  if (std::isnan(value))
    return "nan";
  if (std::isinf(value))
    return value > 0 ? "inf" : "-inf";
  char buffer[40];
  for (int precision = 0; precision < 17; ++precision) {
    std::snprintf(buffer, sizeof(buffer), "%.*e", precision, value);
    if (std::strtod(buffer, nullptr) == value)
      break;
  }
  std::string text = buffer;
  bool negative = text[0] == '-';
  size_t e = text.find('e');
  std::string digits;
  for (size_t i = negative ? 1 : 0; i < e; ++i)
    if (text[i] != '.')
      digits += text[i];
  int exponent = std::atoi(text.c_str() + e + 1);
  while (digits.size() > 1 && digits.back() == '0')
    digits.pop_back();
  std::string out = negative ? "-" : "";
  int point = exponent + 1; // digits before the decimal point
  if (point > -4 && point <= 16) {
    if (point <= 0) {
      out += "0." + std::string(-point, '0') + digits;
    } else if (point >= static_cast<int>(digits.size())) {
      out += digits + std::string(point - digits.size(), '0') + ".0";
    } else {
      out += digits.substr(0, point) + "." + digits.substr(point);
    }
    return out;
  }
  out += digits.substr(0, 1);
  if (digits.size() > 1)
    out += "." + digits.substr(1);
  char exponentText[16];
  std::snprintf(exponentText, sizeof(exponentText), "e%c%02d", exponent < 0 ? '-' : '+',
                std::abs(exponent));
  return out + exponentText;
}

/// str.isprintable() of one code point: not a control, format, surrogate,
/// private-use or unassigned character, nor a separator other than ' '.
bool isPrintable(uint32_t cp) {
  if (cp >= 0x20 && cp < 0x7F)
    return true;
  if (cp < 0xA0)
    return false;
  return !isOther(cp) && !isSpace(cp);
}

/// Python's repr() of a str: single quotes unless it holds ' and no ".
void appendStringRepr(std::string &out, std::string_view text) {
  bool hasSingle = text.find('\'') != std::string_view::npos;
  char quote = hasSingle && text.find('"') == std::string_view::npos ? '"' : '\'';
  out += quote;
  forEachCodePoint(text, [&](uint32_t cp, size_t, size_t) {
    char escape[16];
    if (cp == static_cast<uint32_t>(quote) || cp == '\\') {
      out += '\\';
      out += static_cast<char>(cp);
    } else if (cp == '\n') {
      out += "\\n";
    } else if (cp == '\r') {
      out += "\\r";
    } else if (cp == '\t') {
      out += "\\t";
    } else if (isPrintable(cp)) {
      appendCodePoint(out, cp);
    } else {
      std::snprintf(escape, sizeof(escape),
                    cp < 0x100     ? "\\x%02x"
                    : cp < 0x10000 ? "\\u%04x"
                                   : "\\U%08x",
                    cp);
      out += escape;
    }
  });
  out += quote;
}

/// Python json's string literal: ", \ and control characters escaped,
/// everything else as is unless `ensureAscii`.
void appendJsonText(std::string &out, std::string_view text, bool ensureAscii) {
  out += '"';
  forEachCodePoint(text, [&](uint32_t cp, size_t, size_t) {
    char escape[16];
    switch (cp) {
    case '"':
      out += "\\\"";
      break;
    case '\\':
      out += "\\\\";
      break;
    case '\n':
      out += "\\n";
      break;
    case '\r':
      out += "\\r";
      break;
    case '\t':
      out += "\\t";
      break;
    case '\b':
      out += "\\b";
      break;
    case '\f':
      out += "\\f";
      break;
    default:
      if (cp < 0x20 || (ensureAscii && cp >= 0x80)) {
        if (cp >= 0x10000) {
          uint32_t v = cp - 0x10000;
          std::snprintf(escape, sizeof(escape), "\\u%04x\\u%04x", 0xD800 + (v >> 10),
                        0xDC00 + (v & 0x3FF));
        } else {
          std::snprintf(escape, sizeof(escape), "\\u%04x", cp);
        }
        out += escape;
      } else {
        appendCodePoint(out, cp);
      }
    }
  });
  out += '"';
}

//===----------------------------------------------------------------------===//
// Values.
//===----------------------------------------------------------------------===//

class Renderer;
class Object;
class Namespace;
class Value;
struct CallArgs;

struct List;
struct Dict;

/// A Python value. Strings, lists and dicts are shared and immutable;
/// objects (namespaces, macros, functions, loops) have their own classes.
class Value {
public:
  enum class Kind : uint8_t { Undefined, None, Bool, Int, Float, String, List, Dict, Object };
  /// What kind of Python sequence a List is.
  enum class Seq : uint8_t { List, Tuple, Generator };

  Value() = default;
  /// jinja2's Undefined; `hint` is the error using it raises ("'x' is
  /// undefined").
  static Value undefined(std::string hint) {
    Value v;
    v.data = std::make_shared<const std::string>(std::move(hint));
    return v;
  }
  static Value none() { return Value(Kind::None); }
  static Value boolean(bool b) {
    Value v(Kind::Bool);
    v.scalar.b = b;
    return v;
  }
  static Value integer(int64_t i) {
    Value v(Kind::Int);
    v.scalar.i = i;
    return v;
  }
  static Value real(double f) {
    Value v(Kind::Float);
    v.scalar.f = f;
    return v;
  }
  static Value string(std::string text) {
    if (text.size() > kMaxTextBytes)
      raiseTooLong();
    Value v(Kind::String);
    v.data = std::make_shared<const std::string>(std::move(text));
    return v;
  }
  static Value list(std::vector<Value> items, Seq seq = Seq::List);
  static Value dict(Dict dict);
  static Value object(std::shared_ptr<Object> object) {
    Value v(Kind::Object);
    v.data = std::shared_ptr<const void>(std::move(object));
    return v;
  }

  Kind kind() const { return kindTag; }
  bool isUndefined() const { return kindTag == Kind::Undefined; }
  bool isNone() const { return kindTag == Kind::None; }
  bool isString() const { return kindTag == Kind::String; }
  bool isList() const { return kindTag == Kind::List; }
  bool isDict() const { return kindTag == Kind::Dict; }
  bool isObject() const { return kindTag == Kind::Object; }
  /// bool and int: Python's integers.
  bool isIntegral() const { return kindTag == Kind::Bool || kindTag == Kind::Int; }
  bool isNumber() const { return isIntegral() || kindTag == Kind::Float; }
  Seq seq() const { return seqTag; }
  bool isGenerator() const { return isList() && seqTag == Seq::Generator; }

  bool asBool() const { return scalar.b; }
  int64_t asInt() const { return kindTag == Kind::Bool ? scalar.b : scalar.i; }
  double asDouble() const { return kindTag == Kind::Float ? scalar.f : double(asInt()); }
  const std::string &str() const { return *static_cast<const std::string *>(data.get()); }
  /// The message using this Undefined raises.
  std::string undefinedHint() const {
    return data ? *static_cast<const std::string *>(data.get()) : "value is undefined";
  }
  const std::vector<Value> &items() const;
  const Dict &entries() const { return *static_cast<const Dict *>(data.get()); }
  const Object &object() const { return *static_cast<const Object *>(data.get()); }
  std::shared_ptr<const Object> objectPtr() const {
    return std::static_pointer_cast<const Object>(data);
  }
  const void *identity() const { return data.get(); }
  /// How deeply lists and dicts nest in this value (0 for a scalar).
  uint32_t depth() const;

private:
  explicit Value(Kind kind) : kindTag(kind) {}

  Kind kindTag = Kind::Undefined;
  Seq seqTag = Seq::List;
  union {
    bool b;
    int64_t i;
    double f;
  } scalar{};
  std::shared_ptr<const void> data;
};

struct List {
  std::vector<Value> items;
  uint32_t depth = 1;
};

/// A dict in insertion order, its keys indexed by hash.
struct Dict {
  std::vector<std::pair<Value, Value>> entries;
  /// hashKey() of each key -> its entry.
  std::unordered_multimap<size_t, size_t> index;
  uint32_t depth = 1; // set by Value::dict

  const Value *find(std::string_view key) const;
  const Value *find(const Value &key) const;
  /// The entry of `key`, or npos.
  size_t position(std::string_view key) const;
  size_t position(const Value &key) const;
  /// Sets `key` (keeping its first position, as Python does).
  void set(Value key, Value value);
  size_t size() const { return entries.size(); }
};

const std::vector<Value> &Value::items() const {
  return static_cast<const List *>(data.get())->items;
}

uint32_t Value::depth() const {
  if (kindTag == Kind::List)
    return static_cast<const List *>(data.get())->depth;
  if (kindTag == Kind::Dict)
    return entries().depth;
  return 0;
}

void checkDepth(uint32_t depth) {
  if (depth > kMaxValueDepth)
    raise("lists or dicts nested more than " + std::to_string(kMaxValueDepth) + " deep");
}

Value Value::list(std::vector<Value> items, Seq seq) {
  if (items.size() > kMaxItems)
    raiseTooMany();
  auto list = std::make_shared<List>();
  for (const Value &item : items)
    list->depth = std::max(list->depth, 1 + item.depth());
  checkDepth(list->depth);
  list->items = std::move(items);
  Value v(Kind::List);
  v.seqTag = seq;
  v.data = std::shared_ptr<const void>(std::shared_ptr<const List>(std::move(list)));
  return v;
}

Value Value::dict(Dict dict) {
  if (dict.size() > kMaxItems)
    raise("a dict of more than " + std::to_string(kMaxItems) + " items");
  for (const auto &entry : dict.entries)
    dict.depth = std::max(dict.depth, 1 + std::max(entry.first.depth(), entry.second.depth()));
  checkDepth(dict.depth);
  Value v(Kind::Dict);
  v.data = std::shared_ptr<const void>(std::make_shared<const Dict>(std::move(dict)));
  return v;
}

/// Namespaces, macros, functions, loops: what has attributes or can be
/// called.
class Object {
public:
  virtual ~Object() = default;
  /// The Python type name, for messages.
  virtual std::string typeName() const = 0;
  virtual Value attribute(const std::string &name) const {
    return Value::undefined(singleQuoted(typeName() + " object") + " has no attribute " +
                            singleQuoted(name));
  }
  virtual bool isCallable() const { return false; }
  virtual Value call(Renderer &renderer, const CallArgs &args) const;
  /// The runtime builds without RTTI: no dynamic_cast.
  virtual const Namespace *asNamespace() const { return nullptr; }
  /// Python's repr(); `depth` is how deeply the value printed is nested.
  virtual std::string repr(uint32_t depth) const {
    (void)depth;
    return "<" + typeName() + " object>";
  }
};

/// The arguments of a call: positional, then keyword.
struct CallArgs {
  std::vector<Value> positional;
  std::vector<std::pair<std::string, Value>> keywords;
};

Value Object::call(Renderer &, const CallArgs &) const {
  raise(singleQuoted(typeName()) + " object is not callable");
}

std::string typeName(const Value &v) {
  switch (v.kind()) {
  case Value::Kind::Undefined:
    return "Undefined";
  case Value::Kind::None:
    return "NoneType";
  case Value::Kind::Bool:
    return "bool";
  case Value::Kind::Int:
    return "int";
  case Value::Kind::Float:
    return "float";
  case Value::Kind::String:
    return "str";
  case Value::Kind::List:
    return v.seq() == Value::Seq::List    ? "list"
           : v.seq() == Value::Seq::Tuple ? "tuple"
                                          : "generator";
  case Value::Kind::Dict:
    return "dict";
  case Value::Kind::Object:
    return v.object().typeName();
  }
  return "object";
}

[[noreturn]] void raiseUndefined(const Value &v) { raise(v.undefinedHint()); }

bool truthy(const Value &v) {
  switch (v.kind()) {
  case Value::Kind::Undefined:
  case Value::Kind::None:
    return false;
  case Value::Kind::Bool:
    return v.asBool();
  case Value::Kind::Int:
    return v.asInt() != 0;
  case Value::Kind::Float:
    return v.asDouble() != 0;
  case Value::Kind::String:
    return !v.str().empty();
  case Value::Kind::List:
    return v.isGenerator() || !v.items().empty();
  case Value::Kind::Dict:
    return v.entries().size() != 0;
  case Value::Kind::Object:
    return true;
  }
  return false;
}

/// Work units to walk `v`: an item each, a unit per 16 bytes of text.
uint64_t cost(const Value &v) {
  if (v.isString())
    return v.str().size() / 16;
  if (v.isList())
    return v.items().size();
  if (v.isDict())
    return 2 * v.entries().size();
  return 0;
}

bool isHashable(const Value &v) {
  if (v.isList())
    return v.seq() == Value::Seq::Tuple &&
           std::all_of(v.items().begin(), v.items().end(), isHashable);
  return !v.isDict();
}

bool equals(const Value &a, const Value &b);

/// A hash consistent with equals() on hashable values: 1, 1.0 and True
/// hash alike, as in Python.
size_t hashKey(const Value &v) {
  switch (v.kind()) {
  case Value::Kind::String:
    return std::hash<std::string_view>()(v.str());
  case Value::Kind::Bool:
  case Value::Kind::Int:
    return std::hash<int64_t>()(v.asInt());
  case Value::Kind::Float: {
    double f = v.asDouble();
    if (f == std::trunc(f) && std::fabs(f) < 9.2e18)
      return std::hash<int64_t>()(static_cast<int64_t>(f));
    return std::hash<double>()(f);
  }
  case Value::Kind::List: {
    size_t h = v.items().size();
    for (const Value &item : v.items())
      h = h * 1000003 ^ hashKey(item);
    return h;
  }
  case Value::Kind::Object:
    return std::hash<const void *>()(v.identity());
  default:
    return static_cast<size_t>(v.kind());
  }
}

size_t Dict::position(std::string_view key) const {
  auto [first, last] = index.equal_range(std::hash<std::string_view>()(key));
  for (auto it = first; it != last; ++it) {
    const Value &candidate = entries[it->second].first;
    if (candidate.isString() && candidate.str() == key)
      return it->second;
  }
  return std::string::npos;
}

size_t Dict::position(const Value &key) const {
  if (key.isString())
    return position(std::string_view(key.str()));
  auto [first, last] = index.equal_range(hashKey(key));
  for (auto it = first; it != last; ++it)
    if (equals(entries[it->second].first, key))
      return it->second;
  return std::string::npos;
}

const Value *Dict::find(std::string_view key) const {
  size_t at = position(key);
  return at == std::string::npos ? nullptr : &entries[at].second;
}

const Value *Dict::find(const Value &key) const {
  size_t at = position(key);
  return at == std::string::npos ? nullptr : &entries[at].second;
}

void Dict::set(Value key, Value value) {
  if (!isHashable(key))
    raise("unhashable type: " + singleQuoted(typeName(key)));
  size_t at = position(key);
  if (at != std::string::npos) {
    entries[at].second = std::move(value);
    return;
  }
  index.emplace(hashKey(key), entries.size());
  entries.emplace_back(std::move(key), std::move(value));
}

/// Python's ==.
bool equals(const Value &a, const Value &b) {
  using Kind = Value::Kind;
  if (a.isNumber() && b.isNumber()) {
    if (a.isIntegral() && b.isIntegral())
      return a.asInt() == b.asInt();
    return a.asDouble() == b.asDouble();
  }
  if (a.kind() != b.kind())
    return false;
  // The same string, list or dict (Python's `in` and == try identity first).
  if (a.kind() >= Kind::String && a.identity() == b.identity() &&
      (!a.isList() || a.seq() == b.seq()))
    return true;
  switch (a.kind()) {
  case Kind::Undefined:
  case Kind::None:
    return true;
  case Kind::String:
    return a.str() == b.str();
  case Kind::List: {
    if (a.seq() != b.seq() || a.isGenerator())
      return a.identity() == b.identity();
    const auto &x = a.items(), &y = b.items();
    if (x.size() != y.size())
      return false;
    for (size_t i = 0; i < x.size(); ++i)
      if (!equals(x[i], y[i]))
        return false;
    return true;
  }
  case Kind::Dict: {
    const Dict &x = a.entries(), &y = b.entries();
    if (x.size() != y.size())
      return false;
    for (const auto &entry : x.entries) {
      const Value *other = y.find(entry.first);
      if (!other || !equals(entry.second, *other))
        return false;
    }
    return true;
  }
  case Kind::Object:
    return a.identity() == b.identity();
  default:
    return false;
  }
}

enum class CompareOp { Lt, Le, Gt, Ge };

const char *compareSymbol(CompareOp op) {
  switch (op) {
  case CompareOp::Lt:
    return "<";
  case CompareOp::Le:
    return "<=";
  case CompareOp::Gt:
    return ">";
  case CompareOp::Ge:
    return ">=";
  }
  return "?";
}

template <typename T> bool applyOrder(CompareOp op, const T &a, const T &b) {
  switch (op) {
  case CompareOp::Lt:
    return a < b;
  case CompareOp::Le:
    return a <= b;
  case CompareOp::Gt:
    return a > b;
  case CompareOp::Ge:
    return a >= b;
  }
  return false;
}

/// Python's <, <=, >, >= (numbers, strings, and lists or tuples
/// lexicographically); other pairs are a TypeError.
bool order(CompareOp op, const Value &a, const Value &b) {
  if (a.isUndefined())
    raiseUndefined(a);
  if (b.isUndefined())
    raiseUndefined(b);
  if (a.isNumber() && b.isNumber()) {
    if (a.isIntegral() && b.isIntegral())
      return applyOrder(op, a.asInt(), b.asInt());
    return applyOrder(op, a.asDouble(), b.asDouble());
  }
  if (a.isString() && b.isString())
    return applyOrder(op, a.str(), b.str());
  if (a.isList() && b.isList() && a.seq() == b.seq() && !a.isGenerator()) {
    const auto &x = a.items(), &y = b.items();
    for (size_t i = 0; i < x.size() && i < y.size(); ++i)
      if (!equals(x[i], y[i]))
        return order(op, x[i], y[i]);
    return applyOrder(op, x.size(), y.size());
  }
  raise(std::string(singleQuoted(compareSymbol(op))) + " not supported between instances of " +
        singleQuoted(typeName(a)) + " and " + singleQuoted(typeName(b)));
}

bool lessThan(const Value &a, const Value &b) { return order(CompareOp::Lt, a, b); }

/// A stable merge sort that only asks `less`, safe with a comparison that
/// is not a strict weak order (NaN), unlike std::stable_sort.
template <typename T, typename Less> void stableSort(std::vector<T> &items, Less less) {
  std::vector<T> buffer(items.size());
  for (size_t width = 1; width < items.size(); width *= 2) {
    for (size_t start = 0; start < items.size(); start += 2 * width) {
      size_t middle = std::min(start + width, items.size());
      size_t end = std::min(start + 2 * width, items.size());
      size_t i = start, j = middle, k = start;
      while (i < middle && j < end)
        buffer[k++] = less(items[j], items[i]) ? items[j++] : items[i++];
      while (i < middle)
        buffer[k++] = items[i++];
      while (j < end)
        buffer[k++] = items[j++];
    }
    items.swap(buffer);
  }
}

//===----------------------------------------------------------------------===//
// Printing: Python's str() and repr(), and json.dumps.
//===----------------------------------------------------------------------===//

void appendRepr(std::string &out, const Value &v, uint32_t depth = 0);

std::string reprOf(const Value &v) {
  std::string out;
  appendRepr(out, v);
  return out;
}

void appendRepr(std::string &out, const Value &v, uint32_t depth) {
  if (depth > kMaxValueDepth)
    raise("value nested too deeply to print");
  if (out.size() > kMaxTextBytes)
    raiseTooLong();
  switch (v.kind()) {
  case Value::Kind::Undefined:
    out += "Undefined";
    return;
  case Value::Kind::None:
    out += "None";
    return;
  case Value::Kind::Bool:
    out += v.asBool() ? "True" : "False";
    return;
  case Value::Kind::Int:
    out += std::to_string(v.asInt());
    return;
  case Value::Kind::Float:
    out += pyFloat(v.asDouble());
    return;
  case Value::Kind::String:
    appendStringRepr(out, v.str());
    return;
  case Value::Kind::List: {
    if (v.isGenerator()) {
      out += "<generator object>";
      return;
    }
    bool tuple = v.seq() == Value::Seq::Tuple;
    out += tuple ? '(' : '[';
    const auto &items = v.items();
    for (size_t i = 0; i < items.size(); ++i) {
      if (i)
        out += ", ";
      appendRepr(out, items[i], depth + 1);
    }
    if (tuple && items.size() == 1)
      out += ',';
    out += tuple ? ')' : ']';
    return;
  }
  case Value::Kind::Dict: {
    out += '{';
    bool first = true;
    for (const auto &entry : v.entries().entries) {
      if (!first)
        out += ", ";
      first = false;
      appendRepr(out, entry.first, depth + 1);
      out += ": ";
      appendRepr(out, entry.second, depth + 1);
    }
    out += '}';
    return;
  }
  case Value::Kind::Object:
    out += v.object().repr(depth);
    return;
  }
}

/// Python's str(): strings as they are, Undefined as nothing, the rest as
/// repr().
std::string toStr(const Value &v) {
  if (v.isString())
    return v.str();
  if (v.isUndefined())
    return "";
  return reprOf(v);
}

struct JsonStyle {
  std::optional<std::string> indent;
  std::string itemSeparator = ", ", keySeparator = ": ";
  bool sortKeys = false, ensureAscii = false;
};

void appendJsonValue(std::string &out, const Value &v, const JsonStyle &style, uint32_t level) {
  if (level > kMaxValueDepth)
    raise("value nested too deeply for tojson");
  if (out.size() > kMaxTextBytes)
    raiseTooLong();
  auto newline = [&](uint32_t depth) {
    if (!style.indent)
      return;
    out += '\n';
    for (uint32_t i = 0; i < depth; ++i)
      out += *style.indent;
  };
  switch (v.kind()) {
  case Value::Kind::None:
    out += "null";
    return;
  case Value::Kind::Bool:
    out += v.asBool() ? "true" : "false";
    return;
  case Value::Kind::Int:
    out += std::to_string(v.asInt());
    return;
  case Value::Kind::Float: {
    double f = v.asDouble();
    out += std::isnan(f) ? "NaN" : std::isinf(f) ? (f > 0 ? "Infinity" : "-Infinity") : pyFloat(f);
    return;
  }
  case Value::Kind::String:
    appendJsonText(out, v.str(), style.ensureAscii);
    return;
  case Value::Kind::List: {
    if (v.isGenerator())
      break;
    const auto &items = v.items();
    if (items.empty()) {
      out += "[]";
      return;
    }
    out += '[';
    for (size_t i = 0; i < items.size(); ++i) {
      if (i)
        out += style.itemSeparator;
      newline(level + 1);
      appendJsonValue(out, items[i], style, level + 1);
    }
    newline(level);
    out += ']';
    return;
  }
  case Value::Kind::Dict: {
    std::vector<std::pair<std::string, const Value *>> members;
    for (const auto &entry : v.entries().entries) {
      const Value &key = entry.first;
      std::string name;
      if (key.isString())
        name = key.str();
      else if (key.isNone())
        name = "null";
      else if (key.kind() == Value::Kind::Bool)
        name = key.asBool() ? "true" : "false";
      else if (key.isNumber())
        name = key.kind() == Value::Kind::Float ? pyFloat(key.asDouble()) : toStr(key);
      else
        raise("keys must be str, int, float, bool or None, not " + typeName(key));
      members.emplace_back(std::move(name), &entry.second);
    }
    if (style.sortKeys)
      stableSort(members, [](const auto &a, const auto &b) { return a.first < b.first; });
    if (members.empty()) {
      out += "{}";
      return;
    }
    out += '{';
    for (size_t i = 0; i < members.size(); ++i) {
      if (i)
        out += style.itemSeparator;
      newline(level + 1);
      appendJsonText(out, members[i].first, style.ensureAscii);
      out += style.keySeparator;
      appendJsonValue(out, *members[i].second, style, level + 1);
    }
    newline(level);
    out += '}';
    return;
  }
  default:
    break;
  }
  raise("Object of type " + typeName(v) + " is not JSON serializable");
}

Value fromJson(const OrderedJson &json) {
  if (json.is_boolean())
    return Value::boolean(json.get<bool>());
  if (std::optional<int64_t> i = asInt(json))
    return Value::integer(*i);
  if (json.is_number())
    return Value::real(json.get<double>());
  if (json.is_string())
    return Value::string(json.get<std::string>());
  if (json.is_array()) {
    std::vector<Value> items;
    for (const OrderedJson &item : json)
      items.push_back(fromJson(item));
    return Value::list(std::move(items));
  }
  if (json.is_object()) {
    Dict dict;
    for (const auto &[key, value] : json.items())
      dict.set(Value::string(key), fromJson(value));
    return Value::dict(std::move(dict));
  }
  return Value::none();
}

//===----------------------------------------------------------------------===//
// The lexer: jinja2's, with trim_blocks and lstrip_blocks.
//===----------------------------------------------------------------------===//

enum class Tok : uint8_t {
  Data,
  VarBegin,
  VarEnd,
  BlockBegin,
  BlockEnd,
  Name,
  String,
  Int,
  Float,
  Op,
  Eof
};

struct Token {
  Tok type;
  int line;
  /// Data's text, a name, a string's decoded contents, an operator.
  std::string text;
  int64_t intValue = 0;
  double floatValue = 0;
};

bool isDigit(char c) { return c >= '0' && c <= '9'; }
bool isNameStart(char c) { return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || c == '_'; }
bool isNameChar(char c) { return isNameStart(c) || isDigit(c); }

int hexDigit(char c) {
  if (isDigit(c))
    return c - '0';
  if (c >= 'a' && c <= 'f')
    return c - 'a' + 10;
  if (c >= 'A' && c <= 'F')
    return c - 'A' + 10;
  return -1;
}

/// A string literal's body with Python's escapes decoded (jinja2 decodes
/// with "unicode-escape"; unknown escapes stay as they are).
std::string decodeEscapes(std::string_view body) {
  std::string out;
  for (size_t i = 0; i < body.size(); ++i) {
    char c = body[i];
    if (c != '\\') {
      out += c;
      continue;
    }
    if (++i == body.size())
      raise("\\ at end of string");
    char e = body[i];
    auto readHex = [&](int digits) {
      uint32_t cp = 0;
      for (int k = 0; k < digits; ++k) {
        int d = i + 1 < body.size() ? hexDigit(body[i + 1]) : -1;
        if (d < 0)
          raise(std::string("truncated \\") + e + " escape");
        cp = cp * 16 + d;
        ++i;
      }
      return cp;
    };
    switch (e) {
    case '\n':
      break;
    case '\\':
      out += '\\';
      break;
    case '\'':
      out += '\'';
      break;
    case '"':
      out += '"';
      break;
    case 'a':
      out += '\a';
      break;
    case 'b':
      out += '\b';
      break;
    case 'f':
      out += '\f';
      break;
    case 'n':
      out += '\n';
      break;
    case 'r':
      out += '\r';
      break;
    case 't':
      out += '\t';
      break;
    case 'v':
      out += '\v';
      break;
    case 'x':
      appendUtf8(out, readHex(2));
      break;
    case 'u':
      appendUtf8(out, readHex(4));
      break;
    case 'U': {
      uint32_t cp = readHex(8);
      if (cp > 0x10FFFF)
        raise("illegal Unicode character in a \\U escape");
      appendUtf8(out, cp);
      break;
    }
    case 'N':
      raise("\\N{...} escapes are not supported");
    default:
      if (e >= '0' && e <= '7') {
        uint32_t cp = e - '0';
        for (int k = 0; k < 2 && i + 1 < body.size() && body[i + 1] >= '0' && body[i + 1] <= '7';
             ++k)
          cp = cp * 8 + (body[++i] - '0');
        appendUtf8(out, cp);
      } else {
        out += '\\';
        out += e;
      }
    }
  }
  return out;
}

class Lexer {
public:
  explicit Lexer(std::string_view source) {
    // Line ends become \n, and one final newline goes (keep_trailing_newline
    // is off).
    text.reserve(source.size());
    for (size_t i = 0; i < source.size(); ++i) {
      if (source[i] == '\r') {
        text += '\n';
        if (i + 1 < source.size() && source[i + 1] == '\n')
          ++i;
      } else {
        text += source[i];
      }
    }
    if (!text.empty() && text.back() == '\n')
      text.pop_back();
  }

  std::vector<Token> tokenize() {
    while (pos < text.size())
      lexData();
    tokens.push_back({Tok::Eof, line, ""});
    return std::move(tokens);
  }

  int currentLine() const { return line; }

private:
  bool startsWith(size_t at, std::string_view prefix) const {
    return text.compare(at, prefix.size(), prefix) == 0;
  }

  /// Moves to `to`, counting the lines passed.
  void advanceTo(size_t to) {
    line += static_cast<int>(std::count(text.begin() + pos, text.begin() + to, '\n'));
    pos = to;
  }

  void addData(std::string_view data) {
    if (!data.empty())
      tokens.push_back({Tok::Data, line, std::string(data)});
  }

  /// The data before a tag, with the whitespace control of the tag applied:
  /// `-` strips all whitespace before it; lstrip_blocks strips the spaces
  /// that are all that precede a block or comment tag on its line.
  std::string_view stripBefore(std::string_view data, char sign, bool isBlock) const {
    if (sign == '-')
      return rstripPySpace(data);
    if (sign == '+' || !isBlock)
      return data;
    size_t lineStart = data.rfind('\n');
    lineStart = lineStart == std::string_view::npos ? 0 : lineStart + 1;
    if (lineStart == 0 && !lineStarting)
      return data;
    if (lineStart < data.size() && skipPySpace(data, lineStart) == data.size())
      return data.substr(0, lineStart);
    return data;
  }

  /// Where `{% raw %}` (at text[at], after `{%` and its sign) ends, or npos.
  size_t rawBeginEnd(size_t at) const {
    size_t p = skipPySpace(text, at);
    if (!startsWith(p, "raw"))
      return std::string_view::npos;
    p = skipPySpace(text, p + 3);
    if (startsWith(p, "-%}"))
      return skipPySpace(text, p + 3);
    if (startsWith(p, "%}"))
      return p + 2;
    return std::string_view::npos;
  }

  void lexData() {
    size_t tag = pos;
    while ((tag = text.find('{', tag)) != std::string::npos) {
      if (tag + 1 < text.size() &&
          (text[tag + 1] == '{' || text[tag + 1] == '%' || text[tag + 1] == '#'))
        break;
      ++tag;
    }
    if (tag == std::string::npos) {
      addData(std::string_view(text).substr(pos));
      advanceTo(text.size());
      return;
    }
    char kind = text[tag + 1];
    size_t after = tag + 2;
    char sign = after < text.size() && (text[after] == '-' || text[after] == '+') ? text[after] : 0;
    if (sign)
      ++after;
    size_t rawEnd = kind == '%' ? rawBeginEnd(after) : std::string_view::npos;
    addData(stripBefore(std::string_view(text).substr(pos, tag - pos), sign, kind != '{'));
    advanceTo(tag);
    if (rawEnd != std::string_view::npos) {
      lexRaw(rawEnd);
      return;
    }
    if (kind == '#') {
      lexComment(after);
      return;
    }
    int tagLine = line;
    tokens.push_back({kind == '%' ? Tok::BlockBegin : Tok::VarBegin, line, ""});
    advanceTo(after);
    lexTag(kind == '%', tagLine);
  }

  void lexComment(size_t from) {
    for (size_t i = from; i < text.size(); ++i) {
      size_t end = std::string::npos;
      if (startsWith(i, "+#}")) {
        end = i + 3;
      } else if (startsWith(i, "-#}")) {
        end = skipPySpace(text, i + 3);
      } else if (startsWith(i, "#}")) {
        end = i + 2;
        if (end < text.size() && text[end] == '\n')
          ++end;
      }
      if (end != std::string::npos) {
        lineStarting = text[end - 1] == '\n';
        advanceTo(end);
        return;
      }
    }
    raise("missing end of comment tag");
  }

  void lexRaw(size_t bodyStart) {
    lineStarting = text[bodyStart - 1] == '\n';
    advanceTo(bodyStart);
    for (size_t i = bodyStart; i < text.size(); ++i) {
      if (!startsWith(i, "{%"))
        continue;
      size_t p = i + 2;
      char sign = p < text.size() && (text[p] == '-' || text[p] == '+') ? text[p] : 0;
      if (sign)
        ++p;
      p = skipPySpace(text, p);
      if (!startsWith(p, "endraw"))
        continue;
      p = skipPySpace(text, p + 6);
      size_t end;
      if (startsWith(p, "+%}")) {
        end = p + 3;
      } else if (startsWith(p, "-%}")) {
        end = skipPySpace(text, p + 3);
      } else if (startsWith(p, "%}")) {
        end = p + 2;
        if (end < text.size() && text[end] == '\n')
          ++end;
      } else {
        continue;
      }
      addData(stripBefore(std::string_view(text).substr(pos, i - pos), sign, true));
      lineStarting = text[end - 1] == '\n';
      advanceTo(end);
      return;
    }
    raise("missing end of raw directive");
  }

  /// The end of the float literal at pos, or npos (jinja2's float_re).
  size_t floatEnd() const {
    if (pos > 0 && text[pos - 1] == '.')
      return std::string::npos;
    auto digits = [&](size_t p) -> size_t {
      if (p >= text.size() || !isDigit(text[p]))
        return std::string::npos;
      while (true) {
        while (p < text.size() && isDigit(text[p]))
          ++p;
        if (p + 1 < text.size() && text[p] == '_' && isDigit(text[p + 1])) {
          ++p;
          continue;
        }
        return p;
      }
    };
    size_t whole = digits(pos);
    if (whole == std::string::npos)
      return whole;
    size_t fraction = std::string::npos;
    if (whole < text.size() && text[whole] == '.')
      fraction = digits(whole + 1);
    size_t mantissa = fraction != std::string::npos ? fraction : whole;
    if (mantissa < text.size() && (text[mantissa] == 'e' || text[mantissa] == 'E')) {
      size_t p = mantissa + 1;
      if (p < text.size() && (text[p] == '+' || text[p] == '-'))
        ++p;
      size_t exponent = digits(p);
      if (exponent != std::string::npos)
        return exponent;
    }
    return fraction;
  }

  /// The end of the integer literal at pos (jinja2's integer_re), or npos;
  /// sets `value`.
  size_t integerEnd(int64_t &value) const {
    auto accumulate = [&](size_t p, int base, bool underscoreFirst) -> size_t {
      // Digits of `base`, each optionally preceded by one underscore.
      uint64_t v = 0;
      size_t count = 0;
      while (p < text.size()) {
        size_t q = p;
        if (text[q] == '_' && (count > 0 || underscoreFirst))
          ++q;
        int d = q < text.size() ? hexDigit(text[q]) : -1;
        if (d < 0 || d >= base)
          break;
        if (v > (uint64_t(INT64_MAX) - d) / base)
          raise("integer literal too large");
        v = v * base + d;
        p = q + 1;
        ++count;
      }
      value = static_cast<int64_t>(v);
      return count ? p : std::string::npos;
    };
    char c = text[pos];
    if (c == '0' && pos + 1 < text.size()) {
      char prefix = static_cast<char>(text[pos + 1] | 0x20);
      int base = prefix == 'b' ? 2 : prefix == 'o' ? 8 : prefix == 'x' ? 16 : 0;
      if (base) {
        size_t end = accumulate(pos + 2, base, true);
        if (end != std::string::npos)
          return end;
      }
    }
    if (c >= '1' && c <= '9')
      return accumulate(pos, 10, false);
    if (c == '0') {
      size_t p = pos + 1;
      while (p < text.size() &&
             (text[p] == '0' || (text[p] == '_' && p + 1 < text.size() && text[p + 1] == '0')))
        p += text[p] == '_' ? 2 : 1;
      value = 0;
      return p;
    }
    return std::string::npos;
  }

  /// The tokens of a `{{ }}` or `{% %}` tag up to its end; brackets must
  /// balance before the end is recognized.
  void lexTag(bool isBlock, int tagLine) {
    std::vector<char> closers;
    while (true) {
      if (pos >= text.size())
        raiseAt(tagLine, isBlock ? "unclosed '{%' tag" : "unclosed '{{' tag");
      if (closers.empty()) {
        if (isBlock && startsWith(pos, "+%}")) {
          tokens.push_back({Tok::BlockEnd, line, ""});
          advanceTo(pos + 3);
          lineStarting = false;
          return;
        }
        std::string_view end = isBlock ? "%}" : "}}";
        bool strip = text[pos] == '-' && startsWith(pos + 1, end);
        if (strip || startsWith(pos, end)) {
          tokens.push_back({isBlock ? Tok::BlockEnd : Tok::VarEnd, line, ""});
          size_t to = pos + (strip ? 3 : 2);
          if (strip)
            to = skipPySpace(text, to);
          else if (isBlock && to < text.size() && text[to] == '\n') // trim_blocks
            ++to;
          lineStarting = text[to - 1] == '\n';
          advanceTo(to);
          return;
        }
      }
      if (size_t space = pySpaceAt(text, pos)) {
        advanceTo(pos + space);
        continue;
      }
      char c = text[pos];
      if (size_t end = floatEnd(); end != std::string::npos) {
        std::string literal;
        for (size_t i = pos; i < end; ++i)
          if (text[i] != '_')
            literal += text[i];
        Token token{Tok::Float, line, text.substr(pos, end - pos)};
        token.floatValue = std::strtod(literal.c_str(), nullptr);
        tokens.push_back(std::move(token));
        advanceTo(end);
        continue;
      }
      int64_t integer = 0;
      if (size_t end = integerEnd(integer); end != std::string::npos) {
        Token token{Tok::Int, line, text.substr(pos, end - pos)};
        token.intValue = integer;
        tokens.push_back(std::move(token));
        advanceTo(end);
        continue;
      }
      if (isNameStart(c)) {
        size_t end = pos;
        while (end < text.size() && isNameChar(text[end]))
          ++end;
        tokens.push_back({Tok::Name, line, text.substr(pos, end - pos)});
        advanceTo(end);
        continue;
      }
      if (c == '\'' || c == '"') {
        size_t end = pos + 1;
        while (end < text.size() && text[end] != c)
          end += text[end] == '\\' ? 2 : 1;
        if (end >= text.size())
          raise("unterminated string");
        tokens.push_back({Tok::String, line,
                          decodeEscapes(std::string_view(text).substr(pos + 1, end - pos - 1))});
        advanceTo(end + 1);
        continue;
      }
      static const char *const twoCharOps[] = {"//", "**", "==", "!=", ">=", "<="};
      std::string op;
      for (const char *candidate : twoCharOps)
        if (startsWith(pos, candidate))
          op = candidate;
      if (op.empty() && std::strchr("+-/*%~[](){}><=.:|,;", c) && c)
        op = std::string(1, c);
      if (op.empty())
        raise("unexpected character " + reprOf(Value::string(std::string(1, c))));
      if (op == "(" || op == "[" || op == "{") {
        closers.push_back(op == "(" ? ')' : op == "[" ? ']' : '}');
      } else if (op == ")" || op == "]" || op == "}") {
        if (closers.empty())
          raise("unexpected '" + op + "'");
        if (closers.back() != op[0])
          raise("unexpected '" + op + "', expected '" + std::string(1, closers.back()) + "'");
        closers.pop_back();
      }
      tokens.push_back({Tok::Op, line, op});
      advanceTo(pos + op.size());
    }
  }

  std::string text;
  size_t pos = 0;
  int line = 1;
  /// Whether the last tag consumed ended a line (lstrip_blocks' condition
  /// for data without a newline).
  bool lineStarting = true;
  std::vector<Token> tokens;
};

//===----------------------------------------------------------------------===//
// The AST.
//===----------------------------------------------------------------------===//

struct Expr;
using ExprPtr = std::unique_ptr<Expr>;

struct Expr {
  enum class Kind {
    Const,   // value
    Name,    // name
    List,    // operands: the items
    Tuple,   // operands: the items
    Dict,    // operands: key, value, key, value, ...
    GetAttr, // subject.name
    GetItem, // subject[operands[0]]
    Slice,   // operands: start, stop, step (each may be null); only as an index
    Call,    // subject(operands..., keywords..., *starArgs, **starKwargs)
    Filter,  // subject|name(arguments); no subject in filter blocks
    Test,    // subject is name(arguments)
    Neg,     // -subject
    Pos,     // +subject
    Not,     // not subject
    And,     // operands[0] and operands[1]
    Or,      // operands[0] or operands[1]
    Binary,  // operands[0] name operands[1], name one of + - * / // % **
    Concat,  // operands joined by ~
    Compare, // subject ops[0] operands[0] ops[1] operands[1] ...
    Cond,    // operands[0] if subject else operands[1] (may be null)
  };

  Expr(Kind kind, int line) : kind(kind), line(line) {}

  Kind kind;
  int line;
  /// Height of the tree below, bounded so that evaluating and freeing it
  /// cannot exhaust the stack.
  int height = 1;
  Value value;
  std::string name;
  ExprPtr subject;
  std::vector<ExprPtr> operands;
  std::vector<std::pair<std::string, ExprPtr>> keywords;
  ExprPtr starArgs, starKwargs;
  std::vector<std::string> ops;
};

struct Node;
using NodePtr = std::unique_ptr<Node>;
using Body = std::vector<NodePtr>;

/// What set, for and with assign to: a name, names to unpack a sequence
/// into, or a namespace's attribute.
struct Target {
  std::vector<std::string> names;
  bool unpack = false;
  /// `set ns.attribute = ...`: names[0] is the namespace.
  std::string attribute;
};

struct Node {
  enum class Kind {
    Text,        // text
    Output,      // {{ expr }}
    If,          // conditions[i] -> bodies[i]; a last extra body is the else
    For,         // for targets[0] in expr [if condition]: bodies[0], else bodies[1]
    Set,         // targets[0] = expr
    SetBlock,    // targets[0] = bodies[0] rendered, through filter chain expr
    Macro,       // macro text(params = defaults): bodies[0]
    CallBlock,   // call(params) expr: bodies[0] is the caller
    FilterBlock, // bodies[0] rendered, through filter chain expr
    With,        // targets[i] = conditions[i] in a new scope: bodies[0]
    Scope,       // bodies[0] in a new scope (`generation`)
    Break,
    Continue,
  };

  Node(Kind kind, int line) : kind(kind), line(line) {}

  Kind kind;
  int line;
  std::string text;
  ExprPtr expr, condition;
  std::vector<ExprPtr> conditions;
  std::vector<Body> bodies;
  std::vector<Target> targets;
  bool recursive = false;
  /// Macros and call blocks: parameters, the defaults of the last ones, and
  /// whether the body reads varargs, kwargs or caller.
  std::vector<std::string> params;
  std::vector<ExprPtr> defaults;
  bool usesVarargs = false, usesKwargs = false;
};

} // namespace

struct ChatTemplate::Program {
  Body body;
};

namespace {

//===----------------------------------------------------------------------===//
// The parser: jinja2's grammar, recursive descent.
//===----------------------------------------------------------------------===//

class Parser {
public:
  explicit Parser(std::vector<Token> tokens) : tokens(std::move(tokens)) {}

  Body parseTemplate() { return subparse({}); }
  int currentLine() const { return cur().line; }

private:
  /// Bounds the recursion of the parser.
  class NestingGuard {
  public:
    explicit NestingGuard(Parser &parser) : parser(parser) {
      if (++parser.nesting > kMaxSyntaxDepth)
        raise("expressions or blocks nested more than " + std::to_string(kMaxSyntaxDepth) +
              " deep");
    }
    ~NestingGuard() { --parser.nesting; }

  private:
    Parser &parser;
  };

  const Token &cur() const { return tokens[pos]; }
  const Token &peek() const { return tokens[std::min(pos + 1, tokens.size() - 1)]; }
  void advance() {
    if (pos + 1 < tokens.size())
      ++pos;
  }
  bool isOp(std::string_view op) const { return cur().type == Tok::Op && cur().text == op; }
  bool isName(std::string_view name) const { return cur().type == Tok::Name && cur().text == name; }
  bool skipOp(std::string_view op) {
    if (!isOp(op))
      return false;
    advance();
    return true;
  }
  bool skipName(std::string_view name) {
    if (!isName(name))
      return false;
    advance();
    return true;
  }

  static std::string describe(const Token &token) {
    switch (token.type) {
    case Tok::Data:
      return "template data";
    case Tok::VarBegin:
      return "'{{'";
    case Tok::VarEnd:
      return "end of print statement";
    case Tok::BlockBegin:
      return "'{%'";
    case Tok::BlockEnd:
      return "end of statement block";
    case Tok::Name:
      return singleQuoted(token.text);
    case Tok::String:
      return "a string";
    case Tok::Int:
    case Tok::Float:
      return "a number";
    case Tok::Op:
      return singleQuoted(token.text);
    case Tok::Eof:
      return "end of template";
    }
    return "token";
  }

  [[noreturn]] void unexpected(const std::string &expected) {
    raise("expected " + expected + ", got " + describe(cur()));
  }
  void expectOp(std::string_view op) {
    if (!skipOp(op))
      unexpected(singleQuoted(op));
  }
  void expect(Tok type, const char *what) {
    if (cur().type != type)
      unexpected(what);
    advance();
  }
  std::string expectName() {
    if (cur().type != Tok::Name)
      unexpected("a name");
    std::string name = cur().text;
    advance();
    return name;
  }

  /// Checks the height of `expr`'s tree.
  ExprPtr finish(ExprPtr expr) {
    int height = 0;
    auto see = [&](const ExprPtr &child) {
      if (child)
        height = std::max(height, child->height);
    };
    see(expr->subject);
    see(expr->starArgs);
    see(expr->starKwargs);
    for (const ExprPtr &operand : expr->operands)
      see(operand);
    for (const auto &keyword : expr->keywords)
      see(keyword.second);
    expr->height = height + 1;
    if (expr->height > kMaxSyntaxDepth)
      raise("an expression nested more than " + std::to_string(kMaxSyntaxDepth) + " deep");
    return expr;
  }

  ExprPtr make(Expr::Kind kind, int line) { return std::make_unique<Expr>(kind, line); }

  //===--- Statements -----------------------------------------------------===//

  Body subparse(const std::vector<std::string_view> &endTags) {
    Body body;
    while (true) {
      const Token &token = cur();
      switch (token.type) {
      case Tok::Data: {
        auto node = std::make_unique<Node>(Node::Kind::Text, token.line);
        node->text = token.text;
        body.push_back(std::move(node));
        advance();
        break;
      }
      case Tok::VarBegin: {
        auto node = std::make_unique<Node>(Node::Kind::Output, token.line);
        advance();
        node->expr = parseTuple();
        expect(Tok::VarEnd, "end of print statement");
        body.push_back(std::move(node));
        break;
      }
      case Tok::BlockBegin: {
        advance();
        if (cur().type == Tok::Name &&
            std::find(endTags.begin(), endTags.end(), cur().text) != endTags.end())
          return body;
        body.push_back(parseStatement());
        expect(Tok::BlockEnd, "end of statement block");
        break;
      }
      case Tok::Eof:
        if (!openBlocks.empty())
          raiseAt(openBlocks.back().second, "unclosed '{% " + openBlocks.back().first + " %}'");
        return body;
      default:
        unexpected("template data or a tag");
      }
    }
  }

  /// The body of a block up to one of `endTags` (left as the current token).
  Body parseBlockBody(const std::vector<std::string_view> &endTags) {
    NestingGuard guard(*this);
    skipOp(":");
    expect(Tok::BlockEnd, "end of statement block");
    return subparse(endTags);
  }

  /// Parses a block body, then its end tag.
  Body parseBlockTo(std::string_view endTag) {
    Body body = parseBlockBody({endTag});
    advance();
    return body;
  }

  NodePtr parseStatement() {
    if (cur().type != Tok::Name)
      unexpected("a tag name");
    std::string tag = cur().text;
    int line = cur().line;
    if (tag == "for")
      return parseFor();
    if (tag == "if")
      return parseIf();
    if (tag == "set")
      return parseSet();
    if (tag == "macro")
      return parseMacro();
    if (tag == "call")
      return parseCallBlock();
    if (tag == "filter") {
      auto node = std::make_unique<Node>(Node::Kind::FilterBlock, line);
      advance();
      openBlocks.emplace_back(tag, line);
      node->expr = parseFilter(nullptr, true);
      node->bodies.push_back(parseBlockTo("endfilter"));
      openBlocks.pop_back();
      return node;
    }
    if (tag == "with")
      return parseWith();
    if (tag == "print") {
      auto node = std::make_unique<Node>(Node::Kind::Output, line);
      advance();
      node->expr = parseTuple();
      return node;
    }
    if (tag == "break" || tag == "continue") {
      if (loopDepth == 0)
        raise("'" + tag + "' outside a loop");
      advance();
      return std::make_unique<Node>(tag == "break" ? Node::Kind::Break : Node::Kind::Continue,
                                    line);
    }
    if (tag == "generation") {
      // transformers' extension: marks the assistant's text, renders its
      // body like a caller macro.
      auto node = std::make_unique<Node>(Node::Kind::Scope, line);
      advance();
      openBlocks.emplace_back(tag, line);
      int outerLoops = std::exchange(loopDepth, 0);
      node->bodies.push_back(parseBlockTo("endgeneration"));
      loopDepth = outerLoops;
      openBlocks.pop_back();
      return node;
    }
    static const char *const unsupported[] = {"block", "extends", "include",    "import",
                                              "from",  "do",      "autoescape", "trans"};
    for (const char *name : unsupported)
      if (tag == name)
        raise("the '{% " + tag + " %}' tag is not supported in chat templates");
    if (!openBlocks.empty() && (tag.rfind("end", 0) == 0 || tag == "else" || tag == "elif"))
      raise("unexpected '{% " + tag + " %}': the innermost open block is '{% " +
            openBlocks.back().first + " %}' from line " + std::to_string(openBlocks.back().second));
    if (tag.rfind("end", 0) == 0 || tag == "else" || tag == "elif")
      raise("unexpected '{% " + tag + " %}' outside any block");
    raise("unknown tag '" + tag + "'");
  }

  NodePtr parseFor() {
    auto node = std::make_unique<Node>(Node::Kind::For, cur().line);
    openBlocks.emplace_back("for", cur().line);
    advance();
    node->targets.push_back(parseAssignTarget(false, "in"));
    if (!skipName("in"))
      unexpected("'in'");
    node->expr = parseTuple(false, "recursive");
    if (skipName("if"))
      node->condition = parseExpression();
    node->recursive = skipName("recursive");
    ++loopDepth;
    node->bodies.push_back(parseBlockBody({"endfor", "else"}));
    --loopDepth;
    bool hasElse = cur().text == "else";
    advance();
    if (hasElse)
      node->bodies.push_back(parseBlockTo("endfor"));
    openBlocks.pop_back();
    return node;
  }

  NodePtr parseIf() {
    auto node = std::make_unique<Node>(Node::Kind::If, cur().line);
    openBlocks.emplace_back("if", cur().line);
    advance();
    while (true) {
      node->conditions.push_back(parseTuple(false));
      node->bodies.push_back(parseBlockBody({"elif", "else", "endif"}));
      std::string tag = cur().text;
      advance();
      if (tag == "elif")
        continue;
      if (tag == "else")
        node->bodies.push_back(parseBlockTo("endif"));
      break;
    }
    openBlocks.pop_back();
    return node;
  }

  NodePtr parseSet() {
    int line = cur().line;
    advance();
    Target target = parseAssignTarget(true);
    if (skipOp("=")) {
      auto node = std::make_unique<Node>(Node::Kind::Set, line);
      node->targets.push_back(std::move(target));
      node->expr = parseTuple();
      return node;
    }
    auto node = std::make_unique<Node>(Node::Kind::SetBlock, line);
    openBlocks.emplace_back("set", line);
    node->targets.push_back(std::move(target));
    if (isOp("|"))
      node->expr = parseFilter(nullptr, false);
    node->bodies.push_back(parseBlockTo("endset"));
    openBlocks.pop_back();
    return node;
  }

  /// `(a, b=default, ...)` of a macro or call block.
  void parseSignature(Node &node) {
    expectOp("(");
    while (!isOp(")")) {
      if (!node.params.empty())
        expectOp(",");
      std::string param = expectName();
      if (skipOp("="))
        node.defaults.push_back(parseExpression());
      else if (!node.defaults.empty())
        raise("non-default argument follows default argument");
      node.params.push_back(std::move(param));
    }
    expectOp(")");
  }

  /// A macro's or caller's body, in which loops outside do not continue.
  Body parseCallableBody(Node &node, std::string_view endTag) {
    int varargs = nameCounts["varargs"], kwargs = nameCounts["kwargs"];
    int outerLoops = std::exchange(loopDepth, 0);
    Body body = parseBlockTo(endTag);
    loopDepth = outerLoops;
    node.usesVarargs = nameCounts["varargs"] > varargs;
    node.usesKwargs = nameCounts["kwargs"] > kwargs;
    return body;
  }

  NodePtr parseMacro() {
    auto node = std::make_unique<Node>(Node::Kind::Macro, cur().line);
    openBlocks.emplace_back("macro", cur().line);
    advance();
    node->text = expectName();
    parseSignature(*node);
    node->bodies.push_back(parseCallableBody(*node, "endmacro"));
    openBlocks.pop_back();
    return node;
  }

  NodePtr parseCallBlock() {
    auto node = std::make_unique<Node>(Node::Kind::CallBlock, cur().line);
    openBlocks.emplace_back("call", cur().line);
    advance();
    if (isOp("("))
      parseSignature(*node);
    node->expr = parseExpression();
    if (node->expr->kind != Expr::Kind::Call)
      raise("expected a call after '{% call %}'");
    node->bodies.push_back(parseCallableBody(*node, "endcall"));
    openBlocks.pop_back();
    return node;
  }

  NodePtr parseWith() {
    auto node = std::make_unique<Node>(Node::Kind::With, cur().line);
    openBlocks.emplace_back("with", cur().line);
    advance();
    while (cur().type != Tok::BlockEnd) {
      if (!node->targets.empty())
        expectOp(",");
      node->targets.push_back(parseAssignTarget(false));
      expectOp("=");
      node->conditions.push_back(parseExpression());
    }
    node->bodies.push_back(parseBlockTo("endwith"));
    openBlocks.pop_back();
    return node;
  }

  /// A name, names separated by commas (optionally in parentheses), or,
  /// `withNamespace`, `ns.attribute`.
  Target parseAssignTarget(bool withNamespace, std::string_view endName = "") {
    Target target;
    bool parenthesized = skipOp("(");
    while (true) {
      if (cur().type != Tok::Name)
        unexpected("a name to assign to");
      std::string name = cur().text;
      if (name == "true" || name == "false" || name == "none" || name == "True" ||
          name == "False" || name == "None")
        raise("cannot assign to " + singleQuoted(name));
      advance();
      if (withNamespace && target.names.empty() && isOp(".")) {
        advance();
        target.attribute = expectName();
        target.names.push_back(std::move(name));
        return target;
      }
      target.names.push_back(std::move(name));
      if (!skipOp(","))
        break;
      target.unpack = true;
      if (cur().type == Tok::BlockEnd || isOp(")") || isOp("=") ||
          (!endName.empty() && isName(endName)))
        break;
    }
    if (parenthesized) {
      expectOp(")");
      target.unpack = true;
    }
    return target;
  }

  //===--- Expressions ----------------------------------------------------===//

  ExprPtr parseExpression(bool withCondition = true) {
    return withCondition ? parseConditional() : parseOr();
  }

  ExprPtr parseConditional() {
    NestingGuard guard(*this);
    ExprPtr expr = parseOr();
    while (isName("if")) {
      auto cond = make(Expr::Kind::Cond, cur().line);
      advance();
      cond->subject = parseOr();
      cond->operands.push_back(std::move(expr));
      cond->operands.push_back(skipName("else") ? parseConditional() : nullptr);
      expr = finish(std::move(cond));
    }
    return expr;
  }

  ExprPtr parseBinaryChain(Expr::Kind kind, std::string_view word, ExprPtr (Parser::*operand)()) {
    ExprPtr left = (this->*operand)();
    while (isName(word)) {
      auto node = make(kind, cur().line);
      advance();
      node->operands.push_back(std::move(left));
      node->operands.push_back((this->*operand)());
      left = finish(std::move(node));
    }
    return left;
  }

  ExprPtr parseOr() { return parseBinaryChain(Expr::Kind::Or, "or", &Parser::parseAnd); }
  ExprPtr parseAnd() { return parseBinaryChain(Expr::Kind::And, "and", &Parser::parseNot); }

  ExprPtr parseNot() {
    if (!isName("not"))
      return parseCompare();
    NestingGuard guard(*this);
    auto node = make(Expr::Kind::Not, cur().line);
    advance();
    node->subject = parseNot();
    return finish(std::move(node));
  }

  ExprPtr parseCompare() {
    int line = cur().line;
    ExprPtr first = parseMath1();
    auto node = make(Expr::Kind::Compare, line);
    while (true) {
      std::string op;
      if (cur().type == Tok::Op &&
          (cur().text == "==" || cur().text == "!=" || cur().text == "<" || cur().text == "<=" ||
           cur().text == ">" || cur().text == ">=")) {
        op = cur().text;
        advance();
      } else if (skipName("in")) {
        op = "in";
      } else if (isName("not") && peek().type == Tok::Name && peek().text == "in") {
        advance();
        advance();
        op = "not in";
      } else {
        break;
      }
      node->ops.push_back(op);
      node->operands.push_back(parseMath1());
    }
    if (node->ops.empty())
      return first;
    node->subject = std::move(first);
    return finish(std::move(node));
  }

  ExprPtr parseArithmetic(std::initializer_list<std::string_view> ops,
                          ExprPtr (Parser::*operand)()) {
    ExprPtr left = (this->*operand)();
    while (cur().type == Tok::Op && std::find(ops.begin(), ops.end(), cur().text) != ops.end()) {
      auto node = make(Expr::Kind::Binary, cur().line);
      node->name = cur().text;
      advance();
      node->operands.push_back(std::move(left));
      node->operands.push_back((this->*operand)());
      left = finish(std::move(node));
    }
    return left;
  }

  ExprPtr parseMath1() { return parseArithmetic({"+", "-"}, &Parser::parseConcat); }

  ExprPtr parseConcat() {
    int line = cur().line;
    ExprPtr first = parseMath2();
    if (!isOp("~"))
      return first;
    auto node = make(Expr::Kind::Concat, line);
    node->operands.push_back(std::move(first));
    while (skipOp("~"))
      node->operands.push_back(parseMath2());
    return finish(std::move(node));
  }

  ExprPtr parseMath2() { return parseArithmetic({"*", "/", "//", "%"}, &Parser::parsePow); }
  ExprPtr parsePow() { return parseArithmetic({"**"}, &Parser::parseFilteredUnary); }
  ExprPtr parseFilteredUnary() { return parseUnary(true); }

  ExprPtr parseUnary(bool withFilter) {
    NestingGuard guard(*this);
    ExprPtr node;
    if (isOp("-") || isOp("+")) {
      node = make(isOp("-") ? Expr::Kind::Neg : Expr::Kind::Pos, cur().line);
      advance();
      node->subject = parseUnary(false);
      node = finish(std::move(node));
    } else {
      node = parsePrimary();
    }
    node = parsePostfix(std::move(node));
    if (withFilter)
      node = parseFilterExpr(std::move(node));
    return node;
  }

  ExprPtr parsePrimary() {
    const Token &token = cur();
    int line = token.line;
    if (token.type == Tok::Name) {
      auto node = make(Expr::Kind::Const, line);
      const std::string &name = token.text;
      if (name == "true" || name == "True") {
        node->value = Value::boolean(true);
      } else if (name == "false" || name == "False") {
        node->value = Value::boolean(false);
      } else if (name == "none" || name == "None") {
        node->value = Value::none();
      } else {
        node->kind = Expr::Kind::Name;
        node->name = name;
        ++nameCounts[name];
      }
      advance();
      return node;
    }
    if (token.type == Tok::String) {
      // Adjacent string literals are one.
      std::string text;
      while (cur().type == Tok::String) {
        text += cur().text;
        advance();
      }
      auto node = make(Expr::Kind::Const, line);
      node->value = Value::string(std::move(text));
      return node;
    }
    if (token.type == Tok::Int || token.type == Tok::Float) {
      auto node = make(Expr::Kind::Const, line);
      node->value =
          token.type == Tok::Int ? Value::integer(token.intValue) : Value::real(token.floatValue);
      advance();
      return node;
    }
    if (skipOp("(")) {
      ExprPtr node = parseTuple(true, "", true);
      expectOp(")");
      return node;
    }
    if (isOp("["))
      return parseSequence(Expr::Kind::List, "]");
    if (isOp("{"))
      return parseSequence(Expr::Kind::Dict, "}");
    unexpected("an expression");
  }

  /// A list (`[a, b]`) or dict (`{k: v}`) literal; a trailing comma is fine.
  ExprPtr parseSequence(Expr::Kind kind, std::string_view close) {
    auto node = make(kind, cur().line);
    advance();
    while (!isOp(close)) {
      if (!node->operands.empty())
        expectOp(",");
      if (isOp(close))
        break;
      node->operands.push_back(parseExpression());
      if (kind == Expr::Kind::Dict) {
        expectOp(":");
        node->operands.push_back(parseExpression());
      }
    }
    expectOp(close);
    return finish(std::move(node));
  }

  bool isTupleEnd(std::string_view endName) const {
    return cur().type == Tok::VarEnd || cur().type == Tok::BlockEnd || isOp(")") ||
           (!endName.empty() && isName(endName));
  }

  /// An expression, or several separated by commas as a tuple.
  ExprPtr parseTuple(bool withCondition = true, std::string_view endName = "",
                     bool parenthesized = false) {
    int line = cur().line;
    std::vector<ExprPtr> items;
    bool isTuple = false;
    while (true) {
      if (!items.empty())
        expectOp(",");
      if (isTupleEnd(endName))
        break;
      items.push_back(parseExpression(withCondition));
      if (isOp(","))
        isTuple = true;
      else
        break;
    }
    if (!isTuple) {
      if (!items.empty())
        return std::move(items[0]);
      if (!parenthesized)
        unexpected("an expression");
    }
    auto node = make(Expr::Kind::Tuple, line);
    node->operands = std::move(items);
    return finish(std::move(node));
  }

  ExprPtr parsePostfix(ExprPtr node) {
    while (true) {
      if (isOp(".") || isOp("["))
        node = parseSubscript(std::move(node));
      else if (isOp("("))
        node = parseCall(std::move(node));
      else
        return node;
    }
  }

  ExprPtr parseFilterExpr(ExprPtr node) {
    while (true) {
      if (isOp("|"))
        node = parseFilter(std::move(node), false);
      else if (isName("is"))
        node = parseTest(std::move(node));
      else if (isOp("("))
        node = parseCall(std::move(node));
      else
        return node;
    }
  }

  ExprPtr parseSubscript(ExprPtr subject) {
    int line = cur().line;
    if (skipOp(".")) {
      if (cur().type == Tok::Name) {
        auto node = make(Expr::Kind::GetAttr, line);
        node->subject = std::move(subject);
        node->name = cur().text;
        advance();
        return finish(std::move(node));
      }
      if (cur().type != Tok::Int)
        unexpected("a name or number after '.'");
      auto node = make(Expr::Kind::GetItem, line);
      node->subject = std::move(subject);
      auto index = make(Expr::Kind::Const, line);
      index->value = Value::integer(cur().intValue);
      node->operands.push_back(std::move(index));
      advance();
      return finish(std::move(node));
    }
    expectOp("[");
    std::vector<ExprPtr> indices;
    while (!isOp("]")) {
      if (!indices.empty())
        expectOp(",");
      indices.push_back(parseSubscribed());
    }
    expectOp("]");
    auto node = make(Expr::Kind::GetItem, line);
    node->subject = std::move(subject);
    if (indices.size() == 1) {
      node->operands.push_back(std::move(indices[0]));
    } else {
      auto tuple = make(Expr::Kind::Tuple, line);
      tuple->operands = std::move(indices);
      node->operands.push_back(finish(std::move(tuple)));
    }
    return finish(std::move(node));
  }

  /// An index or a slice `start:stop:step`.
  ExprPtr parseSubscribed() {
    int line = cur().line;
    ExprPtr start;
    if (!skipOp(":")) {
      start = parseExpression();
      if (!skipOp(":"))
        return start;
    }
    auto node = make(Expr::Kind::Slice, line);
    node->operands.push_back(std::move(start));
    auto bound = [&]() -> ExprPtr {
      return isOp("]") || isOp(",") || isOp(":") ? nullptr : parseExpression();
    };
    node->operands.push_back(bound());
    node->operands.push_back(skipOp(":") ? bound() : nullptr);
    return finish(std::move(node));
  }

  /// `(args, name=value, *args, **kwargs)` into `node`.
  void parseArguments(Expr &node) {
    expectOp("(");
    bool requireComma = false;
    while (!isOp(")")) {
      if (requireComma) {
        expectOp(",");
        if (isOp(")"))
          break;
      }
      auto ensure = [&](bool ok) {
        if (!ok)
          raise("invalid syntax for function call expression");
      };
      if (skipOp("*")) {
        ensure(!node.starArgs && !node.starKwargs);
        node.starArgs = parseExpression();
      } else if (skipOp("**")) {
        ensure(!node.starKwargs);
        node.starKwargs = parseExpression();
      } else if (cur().type == Tok::Name && peek().type == Tok::Op && peek().text == "=") {
        ensure(!node.starKwargs);
        std::string key = cur().text;
        advance();
        advance();
        node.keywords.emplace_back(std::move(key), parseExpression());
      } else {
        ensure(!node.starArgs && !node.starKwargs && node.keywords.empty());
        node.operands.push_back(parseExpression());
      }
      requireComma = true;
    }
    expectOp(")");
  }

  ExprPtr parseCall(ExprPtr subject) {
    auto node = make(Expr::Kind::Call, cur().line);
    node->subject = std::move(subject);
    parseArguments(*node);
    return finish(std::move(node));
  }

  std::string parseDottedName() {
    std::string name = expectName();
    while (skipOp("."))
      name += "." + expectName();
    return name;
  }

  /// `|name(args)|...`; `inlineFirst`: the first filter has no `|`.
  ExprPtr parseFilter(ExprPtr subject, bool inlineFirst) {
    while (isOp("|") || inlineFirst) {
      if (!inlineFirst)
        advance();
      inlineFirst = false;
      auto node = make(Expr::Kind::Filter, cur().line);
      node->name = parseDottedName();
      node->subject = std::move(subject);
      if (isOp("("))
        parseArguments(*node);
      subject = finish(std::move(node));
    }
    return subject;
  }

  ExprPtr parseTest(ExprPtr subject) {
    int line = cur().line;
    advance(); // is
    bool negated = skipName("not");
    auto node = make(Expr::Kind::Test, line);
    node->name = parseDottedName();
    node->subject = std::move(subject);
    Tok type = cur().type;
    if (isOp("(")) {
      parseArguments(*node);
    } else if ((type == Tok::Name || type == Tok::String || type == Tok::Int ||
                type == Tok::Float || isOp("[") || isOp("{")) &&
               !isName("else") && !isName("or") && !isName("and")) {
      // `x is divisibleby 3`: one argument without parentheses.
      if (isName("is"))
        raise("you cannot chain multiple tests with 'is'");
      node->operands.push_back(parsePostfix(parsePrimary()));
    }
    ExprPtr test = finish(std::move(node));
    if (!negated)
      return test;
    auto inverted = make(Expr::Kind::Not, line);
    inverted->subject = std::move(test);
    return finish(std::move(inverted));
  }

  std::vector<Token> tokens;
  size_t pos = 0;
  /// Open blocks (tag, line), for the message of a missing end tag.
  std::vector<std::pair<std::string, int>> openBlocks;
  int loopDepth = 0;
  int nesting = 0;
  /// How often each name was read so far (for varargs and kwargs).
  std::unordered_map<std::string, int> nameCounts;
};

//===----------------------------------------------------------------------===//
// Scopes and objects of the renderer.
//===----------------------------------------------------------------------===//

/// Variables: the globals, then the context and top-level assignments, then
/// one scope per loop iteration, macro call and with block.
struct Scope {
  explicit Scope(std::shared_ptr<Scope> parent) : parent(std::move(parent)) {}

  /// The variable `name`; `hops` counts the scopes looked in.
  const Value *find(const std::string &name, size_t *hops = nullptr) const {
    for (const Scope *scope = this; scope; scope = scope->parent.get()) {
      if (hops)
        ++*hops;
      auto it = scope->vars.find(name);
      if (it != scope->vars.end())
        return &it->second;
    }
    return nullptr;
  }

  std::shared_ptr<Scope> parent;
  std::unordered_map<std::string, Value> vars;
};
using ScopePtr = std::shared_ptr<Scope>;

/// The binding of call arguments to parameters, as Python does it.
using Bound = std::vector<std::optional<Value>>;

Bound bindArgs(const CallArgs &args, std::initializer_list<const char *> names,
               const std::string &what) {
  Bound bound(names.size());
  if (args.positional.size() > names.size())
    raise(what + "() takes at most " + std::to_string(names.size()) + " argument(s) (" +
          std::to_string(args.positional.size()) + " given)");
  for (size_t i = 0; i < args.positional.size(); ++i)
    bound[i] = args.positional[i];
  for (const auto &keyword : args.keywords) {
    const std::string &key = keyword.first;
    auto it = std::find_if(names.begin(), names.end(), [&](const char *n) { return key == n; });
    if (it == names.end())
      raise(what + "() got an unexpected keyword argument " + singleQuoted(key));
    size_t index = it - names.begin();
    if (bound[index])
      raise(what + "() got multiple values for argument " + singleQuoted(key));
    bound[index] = keyword.second;
  }
  return bound;
}

int64_t intArg(const std::optional<Value> &arg, int64_t fallback, const std::string &what) {
  if (!arg || arg->isNone())
    return fallback;
  if (!arg->isIntegral())
    raise(what + ": " + singleQuoted(typeName(*arg)) +
          " object cannot be interpreted as an integer");
  return arg->asInt();
}

bool boolArg(const std::optional<Value> &arg, bool fallback) {
  return arg ? truthy(*arg) : fallback;
}

std::optional<std::string> strArg(const std::optional<Value> &arg, const std::string &what) {
  if (!arg || arg->isNone())
    return std::nullopt;
  if (!arg->isString())
    raise(what + ": expected a string, not " + singleQuoted(typeName(*arg)));
  return arg->str();
}

class Namespace : public Object {
public:
  std::string typeName() const override { return "Namespace"; }
  const Namespace *asNamespace() const override { return this; }
  Value attribute(const std::string &name) const override {
    if (const Value *value = attrs.find(name))
      return *value;
    return Object::attribute(name);
  }
  void set(const std::string &name, Value value) const {
    if (!name.empty() && name[0] == '_')
      raise("chat templates cannot store underscore-prefixed attributes on a namespace, but got " +
            singleQuoted(name));
    attrs.set(Value::string(name), std::move(value));
  }
  std::string repr(uint32_t depth) const override {
    // A namespace in its own attributes prints as Python's recursive dict.
    if (printing)
      return "<Namespace {...}>";
    printing = true;
    std::string out = "<Namespace {";
    try {
      for (size_t i = 0; i < attrs.entries.size(); ++i) {
        if (i)
          out += ", ";
        appendRepr(out, attrs.entries[i].first, depth + 1);
        out += ": ";
        appendRepr(out, attrs.entries[i].second, depth + 1);
      }
    } catch (...) {
      printing = false;
      throw;
    }
    printing = false;
    return out + "}>";
  }
  /// Cleared after rendering: values can refer back to their namespace.
  mutable Dict attrs;
  mutable bool printing = false;
};

class Function : public Object {
public:
  using Body = std::function<Value(Renderer &, const CallArgs &)>;
  Function(std::string name, Body body) : name(std::move(name)), body(std::move(body)) {}
  std::string typeName() const override { return "builtin_function_or_method"; }
  bool isCallable() const override { return true; }
  Value call(Renderer &renderer, const CallArgs &args) const override {
    return body(renderer, args);
  }
  std::string repr(uint32_t) const override { return "<built-in function " + name + ">"; }

private:
  std::string name;
  Body body;
};

Value makeFunction(std::string name, Function::Body body) {
  return Value::object(std::make_shared<Function>(std::move(name), std::move(body)));
}

/// A macro, or the caller of a call block.
class Macro : public Object {
public:
  Macro(const Node &node, std::string name, const ScopePtr &closure)
      : node(node), name(std::move(name)), closure(closure) {}
  std::string typeName() const override { return "Macro"; }
  bool isCallable() const override { return true; }
  Value call(Renderer &renderer, const CallArgs &args) const override;
  std::string repr(uint32_t) const override { return "<Macro " + singleQuoted(name) + ">"; }

  const Node &node;
  std::string name;
  /// Weak: a macro lives in the scope it closes over.
  std::weak_ptr<Scope> closure;
};

/// jinja2's LoopContext.
class Loop : public Object {
public:
  std::string typeName() const override { return "LoopContext"; }
  Value attribute(const std::string &name) const override;
  bool isCallable() const override { return node->recursive; }
  Value call(Renderer &renderer, const CallArgs &args) const override;
  std::string repr(uint32_t) const override {
    return "<LoopContext " + std::to_string(index0 + 1) + "/" + std::to_string(items.size()) + ">";
  }

  std::vector<Value> items;
  size_t index0 = 0;
  int depth = 1;
  const Node *node = nullptr;
  std::weak_ptr<Scope> scope;
  std::shared_ptr<std::optional<std::vector<Value>>> lastChanged =
      std::make_shared<std::optional<std::vector<Value>>>();
};

Value Loop::attribute(const std::string &name) const {
  int64_t length = static_cast<int64_t>(items.size()), index = static_cast<int64_t>(index0);
  if (name == "index")
    return Value::integer(index + 1);
  if (name == "index0")
    return Value::integer(index);
  if (name == "revindex")
    return Value::integer(length - index);
  if (name == "revindex0")
    return Value::integer(length - index - 1);
  if (name == "first")
    return Value::boolean(index == 0);
  if (name == "last")
    return Value::boolean(index + 1 == length);
  if (name == "length")
    return Value::integer(length);
  if (name == "depth")
    return Value::integer(depth);
  if (name == "depth0")
    return Value::integer(depth - 1);
  if (name == "previtem")
    return index > 0 ? items[index0 - 1] : Value::undefined("there is no previous item");
  if (name == "nextitem")
    return index + 1 < length ? items[index0 + 1] : Value::undefined("there is no next item");
  if (name == "cycle")
    return makeFunction("cycle", [index](Renderer &, const CallArgs &args) {
      if (args.positional.empty())
        raise("no items for cycling given");
      return args.positional[index % args.positional.size()];
    });
  if (name == "changed")
    return makeFunction("changed", [state = lastChanged](Renderer &, const CallArgs &args) {
      if (*state && state->value().size() == args.positional.size() &&
          std::equal(args.positional.begin(), args.positional.end(), state->value().begin(),
                     equals))
        return Value::boolean(false);
      *state = args.positional;
      return Value::boolean(true);
    });
  return Object::attribute(name);
}

class Joiner : public Object {
public:
  explicit Joiner(std::string separator) : separator(std::move(separator)) {}
  std::string typeName() const override { return "Joiner"; }
  bool isCallable() const override { return true; }
  Value call(Renderer &, const CallArgs &) const override {
    return Value::string(std::exchange(used, true) ? separator : "");
  }

private:
  std::string separator;
  mutable bool used = false;
};

class Cycler : public Object, public std::enable_shared_from_this<Cycler> {
public:
  explicit Cycler(std::vector<Value> items) : items(std::move(items)) {}
  std::string typeName() const override { return "Cycler"; }
  Value attribute(const std::string &name) const override {
    if (name == "current")
      return items[position];
    if (name == "next")
      return makeFunction("next", [self = shared_from_this()](Renderer &, const CallArgs &) {
        Value current = self->items[self->position];
        self->position = (self->position + 1) % self->items.size();
        return current;
      });
    if (name == "reset")
      return makeFunction("reset", [self = shared_from_this()](Renderer &, const CallArgs &) {
        self->position = 0;
        return Value::none();
      });
    return Object::attribute(name);
  }

private:
  std::vector<Value> items;
  mutable size_t position = 0;
};

//===----------------------------------------------------------------------===//
// The renderer.
//===----------------------------------------------------------------------===//

class Renderer {
public:
  explicit Renderer(const ChatTemplate::Program &program) : program(program) {}
  ~Renderer() {
    // Values may refer to the namespace holding them: break the cycles.
    for (const auto &ns : namespaces)
      ns->attrs = Dict();
  }

  std::string run(const OrderedJson &context);

  /// Where rendering is, for error messages.
  int line = 0;

  /// Counts what an operation built against the limits.
  void account(const Value &built);
  /// str(v), printing a list or dict charged by what it prints.
  std::string printed(const Value &v) {
    if (v.isString())
      return v.str();
    std::string text = toStr(v);
    spend(text.size() / 4);
    return text;
  }

  void spend(uint64_t units) {
    work += units;
    if (work > kMaxWork)
      raise("the template takes more than " + std::to_string(kMaxWork) +
            " steps to render (a runaway loop?)");
  }

  Value callMacro(const Macro &macro, const CallArgs &args);
  std::string loopOver(const Node &node, const Value &iterable, const ScopePtr &scope, int depth);
  Value call(const Value &callee, const CallArgs &args);
  Value filter(const std::string &name, const Value &input, const CallArgs &args);
  bool test(const std::string &name, const Value &input, const CallArgs &args);
  Value getAttr(const Value &object, const std::string &name);
  Value getItem(const Value &object, const Value &key);
  std::vector<Value> iterate(const Value &value);
  /// `item`'s attribute path "a.b.0" (jinja2's make_attrgetter), with
  /// `fallback` for an undefined result if given.
  Value attributePath(const Value &item, const Value &path, const std::optional<Value> &fallback);
  std::shared_ptr<Namespace> newNamespace() {
    namespaces.push_back(std::make_shared<Namespace>());
    return namespaces.back();
  }

private:
  enum class Flow { Normal, Break, Continue };

  class DepthGuard {
  public:
    explicit DepthGuard(Renderer &renderer) : renderer(renderer) {
      if (++renderer.depth > kMaxRenderDepth)
        raise("rendering nested more than " + std::to_string(kMaxRenderDepth) +
              " deep (a macro calling itself without end?)");
    }
    ~DepthGuard() { --renderer.depth; }

  private:
    Renderer &renderer;
  };

  void append(std::string &out, std::string_view text) {
    if (out.size() + text.size() > kMaxTextBytes)
      raise("the rendered text exceeds " + std::to_string(kMaxTextBytes >> 20) + " MiB");
    spend(text.size() / 32);
    out += text;
  }

  Flow render(const Body &body, const ScopePtr &scope, std::string &out);
  Flow renderNode(const Node &node, const ScopePtr &scope, std::string &out);
  Flow renderFor(const Node &node, const ScopePtr &scope, std::string &out);
  void assign(const Target &target, const Value &value, Scope &scope);
  Value eval(const Expr &expr, const ScopePtr &scope);
  Value evalUncounted(const Expr &expr, const ScopePtr &scope);
  CallArgs evalArgs(const Expr &expr, const ScopePtr &scope);
  Value filterChain(const Expr &filter, const Value &input, const ScopePtr &scope);
  void defineGlobals(Scope &globals);

  const ChatTemplate::Program &program;
  int depth = 0;
  uint64_t work = 0, iterations = 0, builtBytes = 0;
  std::vector<std::shared_ptr<Namespace>> namespaces;
};

Value Macro::call(Renderer &renderer, const CallArgs &args) const {
  return renderer.callMacro(*this, args);
}

Value Loop::call(Renderer &renderer, const CallArgs &args) const {
  if (args.positional.size() != 1 || !args.keywords.empty())
    raise("loop() takes exactly one argument, the items to loop over");
  ScopePtr outer = scope.lock();
  if (!outer)
    raise("the recursive loop has ended");
  return Value::string(renderer.loopOver(*node, args.positional[0], outer, depth + 1));
}

std::string Renderer::run(const OrderedJson &context) {
  if (!context.is_object())
    raise("the context must be a JSON object");
  auto globals = std::make_shared<Scope>(nullptr);
  defineGlobals(*globals);
  auto top = std::make_shared<Scope>(globals);
  for (const auto &[key, value] : context.items())
    top->vars[key] = fromJson(value);
  std::string out;
  render(program.body, top, out);
  return out;
}

Renderer::Flow Renderer::render(const Body &body, const ScopePtr &scope, std::string &out) {
  for (const NodePtr &node : body) {
    Flow flow = renderNode(*node, scope, out);
    if (flow != Flow::Normal)
      return flow;
  }
  return Flow::Normal;
}

Renderer::Flow Renderer::renderNode(const Node &node, const ScopePtr &scope, std::string &out) {
  DepthGuard guard(*this);
  spend(1);
  line = node.line;
  switch (node.kind) {
  case Node::Kind::Text:
    append(out, node.text);
    break;
  case Node::Kind::Output:
    append(out, printed(eval(*node.expr, scope)));
    break;
  case Node::Kind::If:
    for (size_t i = 0; i < node.conditions.size(); ++i)
      if (truthy(eval(*node.conditions[i], scope)))
        return render(node.bodies[i], scope, out);
    if (node.bodies.size() > node.conditions.size())
      return render(node.bodies.back(), scope, out);
    break;
  case Node::Kind::For:
    return renderFor(node, scope, out);
  case Node::Kind::Set:
    assign(node.targets[0], eval(*node.expr, scope), *scope);
    break;
  case Node::Kind::SetBlock: {
    auto inner = std::make_shared<Scope>(scope);
    std::string text;
    Flow flow = render(node.bodies[0], inner, text);
    Value value = Value::string(std::move(text));
    if (node.expr)
      value = filterChain(*node.expr, value, scope);
    assign(node.targets[0], value, *scope);
    return flow;
  }
  case Node::Kind::Macro:
    scope->vars[node.text] = Value::object(std::make_shared<Macro>(node, node.text, scope));
    break;
  case Node::Kind::CallBlock: {
    const Expr &callExpr = *node.expr;
    Value callee = eval(*callExpr.subject, scope);
    CallArgs args = evalArgs(callExpr, scope);
    args.keywords.emplace_back("caller",
                               Value::object(std::make_shared<Macro>(node, "caller", scope)));
    line = node.line;
    append(out, toStr(call(callee, args)));
    break;
  }
  case Node::Kind::FilterBlock: {
    auto inner = std::make_shared<Scope>(scope);
    std::string text;
    Flow flow = render(node.bodies[0], inner, text);
    append(out, toStr(filterChain(*node.expr, Value::string(std::move(text)), scope)));
    return flow;
  }
  case Node::Kind::With: {
    auto inner = std::make_shared<Scope>(scope);
    for (size_t i = 0; i < node.targets.size(); ++i)
      assign(node.targets[i], eval(*node.conditions[i], scope), *inner);
    return render(node.bodies[0], inner, out);
  }
  case Node::Kind::Scope:
    return render(node.bodies[0], std::make_shared<Scope>(scope), out);
  case Node::Kind::Break:
    return Flow::Break;
  case Node::Kind::Continue:
    return Flow::Continue;
  }
  return Flow::Normal;
}

void Renderer::assign(const Target &target, const Value &value, Scope &scope) {
  if (!target.attribute.empty()) {
    const Value *ns = scope.find(target.names[0]);
    const Namespace *object = ns && ns->isObject() ? ns->object().asNamespace() : nullptr;
    if (!object)
      raise("cannot assign attribute on non-namespace object");
    object->set(target.attribute, value);
    return;
  }
  if (!target.unpack) {
    scope.vars[target.names[0]] = value;
    return;
  }
  std::vector<Value> items = iterate(value);
  size_t expected = target.names.size();
  if (items.size() > expected)
    raise("too many values to unpack (expected " + std::to_string(expected) + ")");
  if (items.size() < expected)
    raise("not enough values to unpack (expected " + std::to_string(expected) + ", got " +
          std::to_string(items.size()) + ")");
  for (size_t i = 0; i < expected; ++i)
    scope.vars[target.names[i]] = items[i];
}

Renderer::Flow Renderer::renderFor(const Node &node, const ScopePtr &scope, std::string &out) {
  append(out, loopOver(node, eval(*node.expr, scope), scope, 1));
  return Flow::Normal;
}

std::string Renderer::loopOver(const Node &node, const Value &iterable, const ScopePtr &scope,
                               int loopDepth) {
  DepthGuard guard(*this);
  std::vector<Value> items = iterate(iterable);
  if (node.condition) {
    // `for x in items if condition`: the loop sees only what passes.
    std::vector<Value> kept;
    for (const Value &item : items) {
      auto inner = std::make_shared<Scope>(scope);
      assign(node.targets[0], item, *inner);
      if (truthy(eval(*node.condition, inner)))
        kept.push_back(item);
    }
    items = std::move(kept);
  }
  auto loop = std::make_shared<Loop>();
  loop->items = items;
  loop->depth = loopDepth;
  loop->node = &node;
  loop->scope = scope;
  Value loopValue = Value::object(loop);
  std::string out;
  for (size_t i = 0; i < items.size(); ++i) {
    if (++iterations > kMaxLoopIterations)
      raise("more than " + std::to_string(kMaxLoopIterations) + " loop iterations");
    auto inner = std::make_shared<Scope>(scope);
    assign(node.targets[0], items[i], *inner);
    loop->index0 = i;
    inner->vars["loop"] = loopValue;
    if (render(node.bodies[0], inner, out) == Flow::Break)
      break;
  }
  // jinja2's else: when the loop ran no iteration at all.
  if (items.empty() && node.bodies.size() > 1)
    render(node.bodies[1], std::make_shared<Scope>(scope), out);
  return out;
}

Value Renderer::callMacro(const Macro &macro, const CallArgs &args) {
  DepthGuard guard(*this);
  spend(8);
  ScopePtr closure = macro.closure.lock();
  if (!closure)
    raise("macro " + singleQuoted(macro.name) +
          " is called after the scope it was defined in ended");
  const Node &node = macro.node;
  auto scope = std::make_shared<Scope>(closure);
  const std::vector<std::string> &params = node.params;
  if (args.positional.size() > params.size() && !node.usesVarargs)
    raise("macro " + singleQuoted(macro.name) + " takes not more than " +
          std::to_string(params.size()) + " argument(s)");
  std::vector<bool> given(params.size());
  for (size_t i = 0; i < args.positional.size() && i < params.size(); ++i) {
    scope->vars[params[i]] = args.positional[i];
    given[i] = true;
  }
  Dict extraKeywords;
  for (const auto &[key, value] : args.keywords) {
    auto it = std::find(params.begin(), params.end(), key);
    if (it != params.end()) {
      size_t index = it - params.begin();
      if (given[index])
        raise("macro " + singleQuoted(macro.name) + " got multiple values for argument " +
              singleQuoted(key));
      scope->vars[key] = value;
      given[index] = true;
    } else if (key == "caller") {
      scope->vars["caller"] = value;
    } else if (node.usesKwargs) {
      extraKeywords.set(Value::string(key), value);
    } else {
      raise("macro " + singleQuoted(macro.name) + " takes no keyword argument " +
            singleQuoted(key));
    }
  }
  size_t firstDefault = params.size() - node.defaults.size();
  for (size_t i = 0; i < params.size(); ++i) {
    if (given[i])
      continue;
    scope->vars[params[i]] =
        i >= firstDefault
            ? eval(*node.defaults[i - firstDefault], scope)
            : Value::undefined("parameter " + singleQuoted(params[i]) + " was not provided");
  }
  std::vector<Value> extraPositional;
  for (size_t i = params.size(); i < args.positional.size(); ++i)
    extraPositional.push_back(args.positional[i]);
  scope->vars["varargs"] = Value::list(std::move(extraPositional), Value::Seq::Tuple);
  scope->vars["kwargs"] = Value::dict(std::move(extraKeywords));
  std::string out;
  render(node.bodies[0], scope, out);
  return Value::string(std::move(out));
}

Value Renderer::call(const Value &callee, const CallArgs &args) {
  if (callee.isUndefined())
    raiseUndefined(callee);
  if (!callee.isObject() || !callee.object().isCallable())
    raise(singleQuoted(typeName(callee)) + " object is not callable");
  return callee.object().call(*this, args);
}

CallArgs Renderer::evalArgs(const Expr &expr, const ScopePtr &scope) {
  CallArgs args;
  for (const ExprPtr &operand : expr.operands)
    args.positional.push_back(eval(*operand, scope));
  for (const auto &[key, value] : expr.keywords)
    args.keywords.emplace_back(key, eval(*value, scope));
  if (expr.starArgs)
    for (Value &item : iterate(eval(*expr.starArgs, scope)))
      args.positional.push_back(std::move(item));
  if (expr.starKwargs) {
    Value kwargs = eval(*expr.starKwargs, scope);
    if (!kwargs.isDict())
      raise("argument after ** must be a mapping, not " + typeName(kwargs));
    for (const auto &[key, value] : kwargs.entries().entries) {
      if (!key.isString())
        raise("keywords must be strings");
      args.keywords.emplace_back(key.str(), value);
    }
  }
  return args;
}

Value Renderer::filterChain(const Expr &filterExpr, const Value &input, const ScopePtr &scope) {
  Value value = filterExpr.subject ? filterChain(*filterExpr.subject, input, scope) : input;
  CallArgs args = evalArgs(filterExpr, scope);
  line = filterExpr.line;
  return filter(filterExpr.name, value, args);
}

//===----------------------------------------------------------------------===//
// Operators and string formatting.
//===----------------------------------------------------------------------===//

[[noreturn]] void raiseOverflow() { raise("integer overflow (beyond 64 bits)"); }

std::string checkedRepeat(std::string_view text, int64_t count) {
  if (count <= 0 || text.empty())
    return "";
  if (static_cast<uint64_t>(count) > kMaxTextBytes / text.size())
    raiseTooLong();
  // Doubling: a few appends even for a million copies.
  std::string out(text);
  size_t total = text.size() * static_cast<size_t>(count);
  out.reserve(total);
  while (out.size() * 2 <= total)
    out += out;
  out.append(out, 0, total - out.size());
  return out;
}

Value repeatList(const Value &list, int64_t count) {
  const auto &items = list.items();
  if (count <= 0 || items.empty())
    return Value::list({}, list.seq());
  if (static_cast<uint64_t>(count) > kMaxItems / items.size())
    raiseTooMany();
  std::vector<Value> out;
  for (int64_t i = 0; i < count; ++i)
    out.insert(out.end(), items.begin(), items.end());
  return Value::list(std::move(out), list.seq());
}

/// Pads `text` to `width` code points with `fill`: '<' left-aligns, '>'
/// right-aligns, '^' centres (extra fill on the right, as str.format does).
std::string padded(const std::string &text, int64_t width, char align, uint32_t fill = ' ') {
  int64_t length = static_cast<int64_t>(codePointCount(text));
  if (width <= length)
    return text;
  if (width > static_cast<int64_t>(kMaxTextBytes))
    raiseTooLong();
  int64_t total = width - length;
  int64_t left = align == '>' ? total : align == '^' ? total / 2 : 0;
  std::string fillText;
  appendCodePoint(fillText, fill);
  return checkedRepeat(fillText, left) + text + checkedRepeat(fillText, total - left);
}

/// printf-style formatting of a float with a C conversion (eEfFgG).
std::string cFormat(const std::string &flags, std::optional<int64_t> width,
                    std::optional<int64_t> precision, char conversion, const Value &value) {
  if (width && *width > 4096)
    raise("format width too large");
  if (precision && *precision > 4096)
    raise("format precision too large");
  std::string spec = "%" + flags;
  if (width)
    spec += std::to_string(*width);
  if (precision)
    spec += "." + std::to_string(*precision);
  spec += conversion;
  std::vector<char> buffer(8192 + 64);
  std::snprintf(buffer.data(), buffer.size(), spec.c_str(), value.asDouble());
  return buffer.data();
}

/// Python's `format % args`.
std::string percentFormat(const std::string &format, const Value &args) {
  std::vector<Value> positional;
  const Dict *mapping = args.isDict() ? &args.entries() : nullptr;
  if (args.isList() && args.seq() == Value::Seq::Tuple)
    positional = args.items();
  else
    positional.push_back(args);
  size_t next = 0;
  auto nextArg = [&]() -> const Value & {
    if (next >= positional.size())
      raise("not enough arguments for format string");
    return positional[next++];
  };
  std::string out;
  for (size_t i = 0; i < format.size(); ++i) {
    if (format[i] != '%') {
      out += format[i];
      continue;
    }
    if (++i >= format.size())
      raise("incomplete format");
    std::optional<Value> keyed;
    if (format[i] == '(') {
      size_t close = format.find(')', i);
      if (close == std::string::npos)
        raise("incomplete format key");
      if (!mapping)
        raise("format requires a mapping");
      const Value *found = mapping->find(std::string_view(format).substr(i + 1, close - i - 1));
      if (!found)
        raise("KeyError: " + singleQuoted(format.substr(i + 1, close - i - 1)));
      keyed = *found;
      i = close + 1;
    }
    std::string flags;
    while (i < format.size() && std::strchr("-+ #0", format[i]) && format[i])
      flags += format[i++];
    std::optional<int64_t> width, precision;
    auto number = [&]() -> int64_t {
      if (i < format.size() && format[i] == '*') {
        ++i;
        const Value &star = nextArg();
        if (!star.isIntegral())
          raise("* wants int");
        return star.asInt();
      }
      int64_t n = 0;
      while (i < format.size() && isDigit(format[i]) && n < 100000)
        n = n * 10 + (format[i++] - '0');
      return n;
    };
    if (i < format.size() && (isDigit(format[i]) || format[i] == '*'))
      width = number();
    if (i < format.size() && format[i] == '.') {
      ++i;
      precision = number();
    }
    while (i < format.size() && std::strchr("hlL", format[i]) && format[i])
      ++i;
    if (i >= format.size())
      raise("incomplete format");
    char conversion = format[i];
    if (conversion == '%') {
      out += '%';
      continue;
    }
    const Value &arg = keyed ? *keyed : nextArg();
    bool left = flags.find('-') != std::string::npos;
    switch (conversion) {
    case 's':
    case 'r':
    case 'a': {
      std::string text = conversion == 's' ? toStr(arg) : reprOf(arg);
      if (precision) {
        std::vector<uint32_t> points = codePoints(text);
        if (static_cast<int64_t>(points.size()) > *precision)
          text = fromCodePoints(points.data(), *precision);
      }
      out += padded(text, width.value_or(0), left ? '<' : '>');
      break;
    }
    case 'c': {
      std::string text;
      if (arg.isIntegral() && arg.asInt() >= 0 && arg.asInt() <= 0x10FFFF)
        appendUtf8(text, static_cast<uint32_t>(arg.asInt()));
      else if (arg.isString() && codePointCount(arg.str()) == 1)
        text = arg.str();
      else
        raise("%c requires an int or a unicode character");
      out += padded(text, width.value_or(0), left ? '<' : '>');
      break;
    }
    case 'd':
    case 'i':
    case 'u':
    case 'o':
    case 'x':
    case 'X': {
      bool decimal = conversion == 'd' || conversion == 'i' || conversion == 'u';
      if (decimal ? !arg.isNumber() : !arg.isIntegral())
        raise(std::string("%") + conversion + " format: " +
              (decimal ? "a real number" : "an integer") + " is required, not " + typeName(arg));
      int64_t n = arg.asInt();
      if (arg.kind() == Value::Kind::Float) {
        double f = std::trunc(arg.asDouble());
        if (!(std::fabs(f) < 9.2e18))
          raiseOverflow();
        n = static_cast<int64_t>(f);
      }
      uint64_t magnitude = n < 0 ? 0 - static_cast<uint64_t>(n) : static_cast<uint64_t>(n);
      int base = decimal ? 10 : conversion == 'o' ? 8 : 16;
      const char *digitChars = conversion == 'X' ? "0123456789ABCDEF" : "0123456789abcdef";
      std::string digits;
      do {
        digits.insert(digits.begin(), digitChars[magnitude % base]);
        magnitude /= base;
      } while (magnitude);
      if (precision && *precision > static_cast<int64_t>(digits.size()))
        digits = checkedRepeat("0", *precision - digits.size()) + digits;
      bool alternate = flags.find('#') != std::string::npos;
      std::string prefix = n < 0                                  ? "-"
                           : flags.find('+') != std::string::npos ? "+"
                           : flags.find(' ') != std::string::npos ? " "
                                                                  : "";
      if (alternate && !decimal)
        prefix += conversion == 'o' ? "0o" : conversion == 'x' ? "0x" : "0X";
      int64_t fieldWidth = width.value_or(0);
      if (flags.find('0') != std::string::npos && !left &&
          fieldWidth > static_cast<int64_t>(prefix.size() + digits.size()))
        digits = checkedRepeat("0", fieldWidth - prefix.size() - digits.size()) + digits;
      out += padded(prefix + digits, fieldWidth, left ? '<' : '>');
      break;
    }
    case 'e':
    case 'E':
    case 'f':
    case 'F':
    case 'g':
    case 'G':
      if (!arg.isNumber())
        raise("must be real number, not " + typeName(arg));
      out += cFormat(flags, width, precision, conversion, arg);
      break;
    default:
      raise(std::string("unsupported format character ") +
            singleQuoted(std::string(1, conversion)));
    }
  }
  if (!mapping && next < positional.size())
    raise("not all arguments converted during string formatting");
  if (out.size() > kMaxTextBytes)
    raiseTooLong();
  return out;
}

/// format(value, spec): Python's format mini-language for strings, ints and
/// floats.
std::string formatWithSpec(const Value &value, const std::string &spec) {
  if (spec.empty())
    return toStr(value);
  std::vector<uint32_t> s = codePoints(spec);
  size_t i = 0;
  uint32_t fill = ' ';
  char align = 0;
  auto isAlign = [](uint32_t c) { return c == '<' || c == '>' || c == '=' || c == '^'; };
  if (s.size() >= 2 && isAlign(s[1])) {
    fill = s[0];
    align = static_cast<char>(s[1]);
    i = 2;
  } else if (!s.empty() && isAlign(s[0])) {
    align = static_cast<char>(s[0]);
    i = 1;
  }
  char sign = 0;
  if (i < s.size() && (s[i] == '+' || s[i] == '-' || s[i] == ' '))
    sign = static_cast<char>(s[i++]);
  bool alternate = false, zero = false;
  if (i < s.size() && s[i] == '#') {
    alternate = true;
    ++i;
  }
  if (i < s.size() && s[i] == '0') {
    zero = true;
    ++i;
  }
  int64_t width = 0;
  while (i < s.size() && s[i] >= '0' && s[i] <= '9' && width < 100000)
    width = width * 10 + (s[i++] - '0');
  char grouping = 0;
  if (i < s.size() && (s[i] == ',' || s[i] == '_'))
    grouping = static_cast<char>(s[i++]);
  std::optional<int64_t> precision;
  if (i < s.size() && s[i] == '.') {
    ++i;
    precision = 0;
    while (i < s.size() && s[i] >= '0' && s[i] <= '9' && *precision < 100000)
      *precision = *precision * 10 + (s[i++] - '0');
  }
  char type = i < s.size() ? static_cast<char>(s[i++]) : 0;
  if (i != s.size())
    raise("invalid format specifier " + singleQuoted(spec));
  if (zero && !align) {
    fill = '0';
    align = '=';
  }

  std::string body, prefix;
  if (value.isString()) {
    if (type && type != 's')
      raise("unknown format code " + singleQuoted(std::string(1, type)) +
            " for object of type 'str'");
    body = value.str();
    if (precision) {
      std::vector<uint32_t> points = codePoints(body);
      if (static_cast<int64_t>(points.size()) > *precision)
        body = fromCodePoints(points.data(), *precision);
    }
    if (!align)
      align = '<';
  } else if (value.isIntegral() && !std::strchr("eEfFgG%", type ? type : 'd')) {
    int64_t n = value.asInt();
    uint64_t magnitude = n < 0 ? 0 - static_cast<uint64_t>(n) : static_cast<uint64_t>(n);
    int base = 10;
    const char *digits = "0123456789abcdef";
    switch (type) {
    case 0:
    case 'd':
    case 'n':
      break;
    case 'b':
      base = 2;
      break;
    case 'o':
      base = 8;
      break;
    case 'x':
      base = 16;
      break;
    case 'X':
      base = 16;
      digits = "0123456789ABCDEF";
      break;
    case 'c':
      appendUtf8(body, static_cast<uint32_t>(magnitude & 0x1FFFFF));
      break;
    default:
      raise("unknown format code " + singleQuoted(std::string(1, type)) +
            " for object of type 'int'");
    }
    if (type != 'c') {
      do {
        body.insert(body.begin(), digits[magnitude % base]);
        magnitude /= base;
      } while (magnitude);
      if (grouping) {
        size_t group = base == 10 ? 3 : 4;
        for (size_t k = body.size(); k > group; k -= group)
          body.insert(k - group, 1, grouping);
      }
      if (alternate && base != 10)
        prefix = base == 2 ? "0b" : base == 8 ? "0o" : type == 'X' ? "0X" : "0x";
    }
    prefix = (n < 0 ? "-" : sign == '+' ? "+" : sign == ' ' ? " " : "") + prefix;
    if (!align)
      align = '>';
  } else if (value.isNumber()) {
    double f = value.asDouble();
    std::string flags;
    if (sign == '+' || sign == ' ')
      flags += sign;
    if (alternate)
      flags += '#';
    if (!type) {
      if (precision) {
        body = cFormat(flags, std::nullopt, precision, 'g', Value::real(f));
        if (body.find_first_of(".eninf") == std::string::npos)
          body += ".0";
      } else {
        body = (f >= 0 && sign == '+' ? "+" : f >= 0 && sign == ' ' ? " " : "") + pyFloat(f);
      }
    } else if (type == '%') {
      body = cFormat(flags, std::nullopt, precision.value_or(6), 'f', Value::real(f * 100)) + "%";
    } else if (std::strchr("eEfFgG", type)) {
      body = cFormat(flags, std::nullopt, precision.value_or(6), type, Value::real(f));
    } else {
      raise("unknown format code " + singleQuoted(std::string(1, type)) +
            " for object of type 'float'");
    }
    if (!body.empty() && (body[0] == '-' || body[0] == '+' || body[0] == ' ')) {
      prefix = body.substr(0, 1);
      body = body.substr(1);
    }
    if (!align)
      align = '>';
  } else {
    raise("unsupported format string passed to " + typeName(value) + ".__format__");
  }
  if (align == '=') {
    int64_t length = static_cast<int64_t>(codePointCount(prefix + body));
    std::string fillText;
    appendCodePoint(fillText, fill);
    return prefix + checkedRepeat(fillText, width - length) + body;
  }
  return padded(prefix + body, width, align, fill);
}

//===----------------------------------------------------------------------===//
// Evaluating expressions.
//===----------------------------------------------------------------------===//

Value arithmetic(const std::string &op, const Value &a, const Value &b) {
  if (a.isUndefined())
    raiseUndefined(a);
  if (b.isUndefined())
    raiseUndefined(b);
  if (a.isNumber() && b.isNumber()) {
    if (a.isIntegral() && b.isIntegral() && op != "/") {
      int64_t x = a.asInt(), y = b.asInt(), r = 0;
      if (op == "+") {
        if (__builtin_add_overflow(x, y, &r))
          raiseOverflow();
        return Value::integer(r);
      }
      if (op == "-") {
        if (__builtin_sub_overflow(x, y, &r))
          raiseOverflow();
        return Value::integer(r);
      }
      if (op == "*") {
        if (__builtin_mul_overflow(x, y, &r))
          raiseOverflow();
        return Value::integer(r);
      }
      if (op == "//" || op == "%") {
        if (y == 0)
          raise("integer division or modulo by zero");
        if (y == -1)
          return op == "%"        ? Value::integer(0)
                 : x == INT64_MIN ? (raiseOverflow(), Value())
                                  : Value::integer(-x);
        int64_t q = x / y, m = x % y;
        if (m != 0 && ((m < 0) != (y < 0))) {
          --q;
          m += y;
        }
        return Value::integer(op == "//" ? q : m);
      }
      if (op == "**") {
        if (y < 0) {
          if (x == 0)
            raise("0.0 cannot be raised to a negative power");
          return Value::real(std::pow(double(x), double(y)));
        }
        int64_t result = 1, base = x;
        for (int64_t e = y; e > 0; e >>= 1) {
          if ((e & 1) && __builtin_mul_overflow(result, base, &result))
            raiseOverflow();
          if (e > 1 && __builtin_mul_overflow(base, base, &base))
            raiseOverflow();
        }
        return Value::integer(result);
      }
    }
    double x = a.asDouble(), y = b.asDouble();
    if (op == "+")
      return Value::real(x + y);
    if (op == "-")
      return Value::real(x - y);
    if (op == "*")
      return Value::real(x * y);
    if (op == "/") {
      if (y == 0)
        raise(a.isIntegral() && b.isIntegral() ? "division by zero" : "float division by zero");
      return Value::real(x / y);
    }
    if (op == "//" || op == "%") {
      if (y == 0)
        raise(op == "%" ? "float modulo" : "float floor division by zero");
      // CPython's float_divmod.
      double mod = std::fmod(x, y), div = (x - mod) / y;
      if (mod != 0) {
        if ((y < 0) != (mod < 0)) {
          mod += y;
          div -= 1;
        }
      } else {
        mod = std::copysign(0.0, y);
      }
      double floorDiv;
      if (div != 0) {
        floorDiv = std::floor(div);
        if (div - floorDiv > 0.5)
          floorDiv += 1;
      } else {
        floorDiv = std::copysign(0.0, x / y);
      }
      return Value::real(op == "%" ? mod : floorDiv);
    }
    if (op == "**") {
      if (x == 0 && y < 0)
        raise("0.0 cannot be raised to a negative power");
      if (x < 0 && y != std::floor(y))
        raise("a negative number cannot be raised to a fractional power");
      return Value::real(std::pow(x, y));
    }
  }
  if (op == "+") {
    if (a.isString() && b.isString()) {
      if (a.str().size() + b.str().size() > kMaxTextBytes)
        raiseTooLong();
      return Value::string(a.str() + b.str());
    }
    if (a.isList() && b.isList() && a.seq() == b.seq() && !a.isGenerator()) {
      if (a.items().size() + b.items().size() > kMaxItems)
        raiseTooMany();
      std::vector<Value> items = a.items();
      items.insert(items.end(), b.items().begin(), b.items().end());
      return Value::list(std::move(items), a.seq());
    }
    if (a.isString() || (a.isList() && !a.isGenerator()))
      raise("can only concatenate " + typeName(a) + " (not \"" + typeName(b) + "\") to " +
            typeName(a));
  }
  if (op == "*") {
    const Value *sequence = a.isString() || (a.isList() && !a.isGenerator()) ? &a : &b;
    const Value *count = sequence == &a ? &b : &a;
    if (count->isIntegral()) {
      if (sequence->isString())
        return Value::string(checkedRepeat(sequence->str(), count->asInt()));
      if (sequence->isList() && !sequence->isGenerator())
        return repeatList(*sequence, count->asInt());
    }
  }
  if (op == "%" && a.isString())
    return Value::string(percentFormat(a.str(), b));
  raise("unsupported operand type(s) for " + op + ": " + singleQuoted(typeName(a)) + " and " +
        singleQuoted(typeName(b)));
}

bool contains(const Value &container, const Value &item) {
  switch (container.kind()) {
  case Value::Kind::String:
    if (!item.isString())
      raise("'in <string>' requires string as left operand, not " + typeName(item));
    return findText(container.str(), item.str()) != std::string::npos;
  case Value::Kind::List:
    return std::any_of(container.items().begin(), container.items().end(),
                       [&](const Value &v) { return equals(v, item); });
  case Value::Kind::Dict:
    if (!isHashable(item))
      raise("unhashable type: " + singleQuoted(typeName(item)));
    return container.entries().find(item) != nullptr;
  case Value::Kind::Undefined:
    return false;
  default:
    raise("argument of type " + singleQuoted(typeName(container)) + " is not iterable");
  }
}

bool compare(const std::string &op, const Value &a, const Value &b) {
  if (op == "==")
    return equals(a, b);
  if (op == "!=")
    return !equals(a, b);
  if (op == "in")
    return contains(b, a);
  if (op == "not in")
    return !contains(b, a);
  CompareOp ordering = op == "<"    ? CompareOp::Lt
                       : op == "<=" ? CompareOp::Le
                       : op == ">"  ? CompareOp::Gt
                                    : CompareOp::Ge;
  return order(ordering, a, b);
}

/// Python's slice of a list, tuple or str.
Value sliceOf(const Value &object, const Value &startValue, const Value &stopValue,
              const Value &stepValue) {
  // jinja2 slices with Python's own subscript, so errors are raised.
  if (object.isUndefined())
    raiseUndefined(object);
  if (!object.isString() && !(object.isList() && !object.isGenerator()))
    raise(singleQuoted(typeName(object)) + " object cannot be sliced");
  auto bound = [](const Value &v) { return v.isNone() || v.isIntegral(); };
  if (!bound(startValue) || !bound(stopValue) || !bound(stepValue))
    raise("slice indices must be integers or None or have an __index__ method");
  int64_t step = stepValue.isNone() ? 1 : stepValue.asInt();
  if (step == 0)
    raise("slice step cannot be zero");
  std::vector<uint32_t> points;
  int64_t length;
  if (object.isString()) {
    points = codePoints(object.str());
    length = static_cast<int64_t>(points.size());
  } else {
    length = static_cast<int64_t>(object.items().size());
  }
  int64_t lower = step > 0 ? 0 : -1, upper = step > 0 ? length : length - 1;
  auto clamp = [&](const Value &v, int64_t fallback) {
    if (v.isNone())
      return fallback;
    int64_t i = v.asInt();
    if (i < 0) {
      i += length;
      return i < lower ? lower : i;
    }
    return i > upper ? upper : i;
  };
  int64_t start = clamp(startValue, step > 0 ? lower : upper);
  int64_t stop = clamp(stopValue, step > 0 ? upper : lower);
  std::vector<uint32_t> slicedPoints;
  std::vector<Value> slicedItems;
  for (int64_t i = start; step > 0 ? i < stop : i > stop; i += step) {
    if (object.isString())
      slicedPoints.push_back(points[i]);
    else
      slicedItems.push_back(object.items()[i]);
  }
  if (object.isString())
    return Value::string(fromCodePoints(slicedPoints));
  return Value::list(std::move(slicedItems), object.seq());
}

Value Renderer::eval(const Expr &expr, const ScopePtr &scope) {
  DepthGuard guard(*this);
  spend(1);
  Value result = evalUncounted(expr, scope);
  switch (expr.kind) {
  case Expr::Kind::GetItem:
    if (expr.operands[0]->kind != Expr::Kind::Slice)
      break;
    [[fallthrough]];
  case Expr::Kind::Call:
  case Expr::Kind::Filter:
  case Expr::Kind::Binary:
  case Expr::Kind::Concat:
  case Expr::Kind::List:
  case Expr::Kind::Tuple:
  case Expr::Kind::Dict:
    account(result);
    break;
  default:
    break;
  }
  return result;
}

void Renderer::account(const Value &built) {
  uint64_t bytes = built.isString() ? built.str().size()
                   : built.isList() ? built.items().size() * sizeof(Value)
                   : built.isDict() ? built.entries().size() * 2 * sizeof(Value)
                                    : 0;
  builtBytes += bytes;
  if (builtBytes > kMaxBuiltBytes)
    raise("the template builds more than " + std::to_string(kMaxBuiltBytes >> 20) +
          " MiB of strings and lists (a runaway loop?)");
  // Text is copied, not walked: half the price.
  spend(built.isString() ? built.str().size() / 32 : cost(built));
}

Value Renderer::evalUncounted(const Expr &expr, const ScopePtr &scope) {
  line = expr.line;
  const auto &operands = expr.operands;
  switch (expr.kind) {
  case Expr::Kind::Const:
    return expr.value;
  case Expr::Kind::Name: {
    // Deeply nested loops make long chains of scopes.
    size_t hops = 0;
    const Value *value = scope->find(expr.name, &hops);
    spend(hops / 4);
    if (value)
      return *value;
    return Value::undefined(singleQuoted(expr.name) + " is undefined");
  }
  case Expr::Kind::List:
  case Expr::Kind::Tuple: {
    std::vector<Value> items;
    for (const ExprPtr &operand : operands)
      items.push_back(eval(*operand, scope));
    return Value::list(std::move(items),
                       expr.kind == Expr::Kind::List ? Value::Seq::List : Value::Seq::Tuple);
  }
  case Expr::Kind::Dict: {
    Dict dict;
    for (size_t i = 0; i + 1 < operands.size(); i += 2) {
      Value key = eval(*operands[i], scope);
      dict.set(std::move(key), eval(*operands[i + 1], scope));
    }
    return Value::dict(std::move(dict));
  }
  case Expr::Kind::GetAttr: {
    Value object = eval(*expr.subject, scope);
    line = expr.line;
    return getAttr(object, expr.name);
  }
  case Expr::Kind::GetItem: {
    Value object = eval(*expr.subject, scope);
    const Expr &index = *operands[0];
    if (index.kind == Expr::Kind::Slice) {
      auto bound = [&](const ExprPtr &e) { return e ? eval(*e, scope) : Value::none(); };
      Value start = bound(index.operands[0]), stop = bound(index.operands[1]),
            step = bound(index.operands[2]);
      line = expr.line;
      spend(cost(object));
      return sliceOf(object, start, stop, step);
    }
    Value key = eval(index, scope);
    line = expr.line;
    return getItem(object, key);
  }
  case Expr::Kind::Slice:
    return Value::undefined("a slice is only an index");
  case Expr::Kind::Call: {
    Value callee = eval(*expr.subject, scope);
    CallArgs args = evalArgs(expr, scope);
    line = expr.line;
    return call(callee, args);
  }
  case Expr::Kind::Filter: {
    Value input = eval(*expr.subject, scope);
    CallArgs args = evalArgs(expr, scope);
    line = expr.line;
    return filter(expr.name, input, args);
  }
  case Expr::Kind::Test: {
    Value input = eval(*expr.subject, scope);
    CallArgs args = evalArgs(expr, scope);
    line = expr.line;
    return Value::boolean(test(expr.name, input, args));
  }
  case Expr::Kind::Neg:
  case Expr::Kind::Pos: {
    Value v = eval(*expr.subject, scope);
    line = expr.line;
    bool negate = expr.kind == Expr::Kind::Neg;
    if (v.isUndefined())
      raiseUndefined(v);
    if (v.kind() == Value::Kind::Float)
      return Value::real(negate ? -v.asDouble() : v.asDouble());
    if (v.isIntegral()) {
      if (negate && v.asInt() == INT64_MIN)
        raiseOverflow();
      return Value::integer(negate ? -v.asInt() : v.asInt());
    }
    raise(std::string("bad operand type for unary ") + (negate ? "-" : "+") + ": " +
          singleQuoted(typeName(v)));
  }
  case Expr::Kind::Not:
    return Value::boolean(!truthy(eval(*expr.subject, scope)));
  case Expr::Kind::And: {
    Value left = eval(*operands[0], scope);
    return truthy(left) ? eval(*operands[1], scope) : left;
  }
  case Expr::Kind::Or: {
    Value left = eval(*operands[0], scope);
    return truthy(left) ? left : eval(*operands[1], scope);
  }
  case Expr::Kind::Binary: {
    Value a = eval(*operands[0], scope), b = eval(*operands[1], scope);
    line = expr.line;
    return arithmetic(expr.name, a, b);
  }
  case Expr::Kind::Concat: {
    std::string joined;
    for (const ExprPtr &operand : operands) {
      std::string part = printed(eval(*operand, scope));
      if (joined.size() + part.size() > kMaxTextBytes)
        raiseTooLong();
      joined += part;
    }
    return Value::string(std::move(joined));
  }
  case Expr::Kind::Compare: {
    Value left = eval(*expr.subject, scope);
    for (size_t i = 0; i < operands.size(); ++i) {
      Value right = eval(*operands[i], scope);
      line = expr.line;
      spend(cost(left) + cost(right));
      if (!compare(expr.ops[i], left, right))
        return Value::boolean(false);
      left = std::move(right);
    }
    return Value::boolean(true);
  }
  case Expr::Kind::Cond:
    if (truthy(eval(*expr.subject, scope)))
      return eval(*operands[0], scope);
    if (operands[1])
      return eval(*operands[1], scope);
    return Value::undefined(
        "the inline if-expression evaluated to false and no else section was defined");
  }
  return Value();
}

//===----------------------------------------------------------------------===//
// Attributes, items and methods, as the immutable sandbox allows them.
//===----------------------------------------------------------------------===//

bool isOneOf(const std::string &name, std::initializer_list<const char *> names) {
  return std::any_of(names.begin(), names.end(), [&](const char *n) { return name == n; });
}

const std::initializer_list<const char *> kStringMethods = {
    "capitalize",   "casefold",     "center",  "count",      "endswith",   "find",    "format",
    "index",        "isalnum",      "isalpha", "isdecimal",  "isdigit",    "islower", "isnumeric",
    "isspace",      "isupper",      "join",    "ljust",      "lower",      "lstrip",  "partition",
    "removeprefix", "removesuffix", "replace", "rfind",      "rindex",     "rjust",   "rpartition",
    "rsplit",       "rstrip",       "split",   "splitlines", "startswith", "strip",   "swapcase",
    "title",        "upper",        "zfill"};
const std::initializer_list<const char *> kDictMethods = {"items", "keys", "values", "get", "copy"};
const std::initializer_list<const char *> kListMethods = {"index", "count", "copy"};
/// Methods that would change a list or dict: the immutable sandbox refuses
/// them.
const std::initializer_list<const char *> kMutatingMethods = {
    "append", "extend", "insert",  "pop",        "remove", "reverse", "sort",
    "clear",  "update", "popitem", "setdefault", "add",    "discard"};

Value unsafeAttribute(const Value &object, const std::string &name) {
  return Value::undefined("access to attribute " + singleQuoted(name) + " of " +
                          singleQuoted(typeName(object)) + " object is unsafe.");
}

Value callMethod(Renderer &renderer, const Value &self, const std::string &name,
                 const CallArgs &args);

/// `object.name` if it is a method: bound, refused, or nothing.
std::optional<Value> methodOf(const Value &object, const std::string &name) {
  bool sequence = object.isList() && !object.isGenerator();
  if ((object.isString() && isOneOf(name, kStringMethods)) ||
      (object.isDict() && isOneOf(name, kDictMethods)) || (sequence && isOneOf(name, kListMethods)))
    return makeFunction(name, [object, name](Renderer &renderer, const CallArgs &args) {
      return callMethod(renderer, object, name, args);
    });
  if ((object.isDict() || sequence) && isOneOf(name, kMutatingMethods))
    return unsafeAttribute(object, name);
  return std::nullopt;
}

Value Renderer::getAttr(const Value &object, const std::string &name) {
  if (object.isUndefined())
    raiseUndefined(object);
  if (!name.empty() && name[0] == '_')
    return unsafeAttribute(object, name);
  if (std::optional<Value> method = methodOf(object, name))
    return *method;
  if (object.isDict())
    if (const Value *value = object.entries().find(std::string_view(name)))
      return *value;
  if (object.isObject())
    return object.object().attribute(name);
  return Value::undefined(singleQuoted(typeName(object) + " object") + " has no attribute " +
                          singleQuoted(name));
}

Value Renderer::getItem(const Value &object, const Value &key) {
  if (object.isUndefined())
    raiseUndefined(object);
  if (object.isDict()) {
    if (isHashable(key))
      if (const Value *value = object.entries().find(key))
        return *value;
  } else if ((object.isList() && !object.isGenerator()) || object.isString()) {
    if (key.isIntegral()) {
      int64_t index = key.asInt();
      if (object.isString()) {
        // Walks to the character, not through the whole string.
        const std::string &text = object.str();
        if (index < 0) {
          spend(cost(object));
          index += static_cast<int64_t>(codePointCount(text));
        }
        if (index >= 0) {
          size_t at = byteOffset(text, index);
          spend(at / 16);
          if (at < text.size())
            return Value::string(text.substr(at, codePointBytes(text, at)));
        }
      } else {
        int64_t length = static_cast<int64_t>(object.items().size());
        if (index < 0)
          index += length;
        if (index >= 0 && index < length)
          return object.items()[index];
      }
      return Value::undefined(singleQuoted(typeName(object) + " object") + " has no element " +
                              std::to_string(key.asInt()));
    }
  }
  if (key.isString()) {
    spend(cost(key));
    if (!key.str().empty() && key.str()[0] == '_')
      return unsafeAttribute(object, key.str());
    if (std::optional<Value> method = methodOf(object, key.str()))
      return *method;
    if (object.isObject())
      return object.object().attribute(key.str());
    return Value::undefined(singleQuoted(typeName(object) + " object") + " has no attribute " +
                            singleQuoted(key.str()));
  }
  return Value::undefined(singleQuoted(typeName(object) + " object") + " has no element " +
                          reprOf(key));
}

std::vector<Value> Renderer::iterate(const Value &value) {
  switch (value.kind()) {
  case Value::Kind::Undefined:
    return {};
  case Value::Kind::String: {
    if (codePointCount(value.str()) > kMaxItems)
      raiseTooMany();
    std::vector<Value> chars;
    for (uint32_t cp : codePoints(value.str()))
      chars.push_back(Value::string(fromCodePoints(&cp, 1)));
    spend(chars.size());
    return chars;
  }
  case Value::Kind::List:
    spend(value.items().size());
    return value.items();
  case Value::Kind::Dict: {
    std::vector<Value> keys;
    for (const auto &entry : value.entries().entries)
      keys.push_back(entry.first);
    spend(keys.size());
    return keys;
  }
  default:
    raise(singleQuoted(typeName(value)) + " object is not iterable");
  }
}

Value Renderer::attributePath(const Value &item, const Value &path,
                              const std::optional<Value> &fallback) {
  std::vector<Value> parts;
  if (path.isString()) {
    const std::string &text = path.str();
    for (size_t start = 0;;) {
      size_t dot = text.find('.', start);
      std::string part = text.substr(start, dot == std::string::npos ? dot : dot - start);
      bool numeric = !part.empty() && std::all_of(part.begin(), part.end(), isDigit);
      parts.push_back(numeric && part.size() < 18 ? Value::integer(std::stoll(part))
                                                  : Value::string(part));
      if (dot == std::string::npos)
        break;
      start = dot + 1;
    }
  } else {
    parts.push_back(path);
  }
  Value current = item;
  spend(parts.size());
  for (const Value &part : parts) {
    current = getItem(current, part);
    if (fallback && current.isUndefined())
      current = *fallback;
  }
  return current;
}

/// A str method's [start:end] arguments as a byte range of `text`.
std::pair<size_t, size_t> byteRange(const std::string &text, const std::optional<Value> &start,
                                    const std::optional<Value> &end) {
  auto absent = [](const std::optional<Value> &v) { return !v || v->isNone(); };
  if (absent(start) && absent(end))
    return {0, text.size()};
  int64_t length = static_cast<int64_t>(codePointCount(text));
  auto position = [&](const std::optional<Value> &v, int64_t fallback) {
    int64_t i = intArg(v, fallback, "slice index");
    if (i < 0)
      i = std::max<int64_t>(0, i + length);
    return byteOffset(text, std::min(i, length));
  };
  return {position(start, 0), position(end, length)};
}

std::string pyStrip(const std::string &text, const std::optional<std::string> &chars, bool left,
                    bool right) {
  std::vector<uint32_t> set = chars ? codePoints(*chars) : std::vector<uint32_t>();
  std::sort(set.begin(), set.end());
  auto strip = [&](uint32_t cp) {
    return chars ? std::binary_search(set.begin(), set.end(), cp) : isPySpace(cp);
  };
  // Only the ends are decoded: the middle of a long text is not walked.
  size_t begin = 0, end = text.size();
  while (left && begin < end && strip(decodeAt(text, begin)))
    begin += codePointBytes(text, begin);
  while (right && end > begin) {
    size_t start = previousCodePoint(text, end);
    if (!strip(decodeAt(text, start)))
      break;
    end = start;
  }
  return text.substr(begin, end - begin);
}

/// str.split / str.rsplit (CPython's algorithms).
std::vector<std::string> pySplit(const std::string &text, const std::optional<std::string> &sep,
                                 int64_t maxSplit, bool fromRight) {
  std::vector<std::string> parts;
  // No more parts than a list may hold.
  int64_t budget = maxSplit < 0 || maxSplit > int64_t(kMaxItems) ? int64_t(kMaxItems) : maxSplit;
  if (sep) {
    if (sep->empty())
      raise("empty separator");
    if (!fromRight) {
      size_t i = 0;
      for (size_t at; budget-- > 0 && (at = findText(text, *sep, i)) != std::string::npos;
           i = at + sep->size())
        parts.push_back(text.substr(i, at - i));
      parts.push_back(text.substr(i));
      return parts;
    }
    size_t j = text.size();
    while (budget-- > 0 && j >= sep->size()) {
      size_t at = rfindText(std::string_view(text).substr(0, j), *sep);
      if (at == std::string::npos)
        break;
      parts.push_back(text.substr(at + sep->size(), j - at - sep->size()));
      j = at;
    }
    parts.push_back(text.substr(0, j));
    std::reverse(parts.begin(), parts.end());
    return parts;
  }
  std::vector<uint32_t> p = codePoints(text);
  int64_t n = static_cast<int64_t>(p.size());
  auto piece = [&](int64_t from, int64_t to) {
    parts.push_back(fromCodePoints(&p[0] + from, to - from));
  };
  if (!fromRight) {
    int64_t i = 0;
    while (budget-- > 0) {
      while (i < n && isPySpace(p[i]))
        ++i;
      if (i == n)
        break;
      int64_t j = i++;
      while (i < n && !isPySpace(p[i]))
        ++i;
      piece(j, i);
    }
    if (i < n) {
      while (i < n && isPySpace(p[i]))
        ++i;
      if (i != n)
        piece(i, n);
    }
    return parts;
  }
  int64_t i = n - 1;
  while (budget-- > 0) {
    while (i >= 0 && isPySpace(p[i]))
      --i;
    if (i < 0)
      break;
    int64_t j = i--;
    while (i >= 0 && !isPySpace(p[i]))
      --i;
    piece(i + 1, j + 1);
  }
  if (i >= 0) {
    while (i >= 0 && isPySpace(p[i]))
      --i;
    if (i >= 0)
      piece(0, i + 1);
  }
  std::reverse(parts.begin(), parts.end());
  return parts;
}

std::string pyReplace(const std::string &text, const std::string &old, const std::string &with,
                      int64_t count) {
  if (count < 0)
    count = INT64_MAX;
  std::string out;
  auto grow = [&](std::string_view piece) {
    if (out.size() + piece.size() > kMaxTextBytes)
      raiseTooLong();
    out += piece;
  };
  if (old.empty()) {
    // Between all characters and at both ends.
    std::vector<uint32_t> points = codePoints(text);
    for (size_t i = 0; i <= points.size(); ++i) {
      if (count-- > 0)
        grow(with);
      if (i < points.size())
        grow(fromCodePoints(&points[i], 1));
    }
    return out;
  }
  size_t i = 0;
  for (size_t at; count-- > 0 && (at = findText(text, old, i)) != std::string::npos;
       i = at + old.size()) {
    grow(std::string_view(text).substr(i, at - i));
    grow(with);
  }
  grow(std::string_view(text).substr(i));
  return out;
}

Value stringList(const std::vector<std::string> &parts, Value::Seq seq = Value::Seq::List) {
  std::vector<Value> items;
  for (const std::string &part : parts)
    items.push_back(Value::string(part));
  return Value::list(std::move(items), seq);
}

/// str.format(*args, **kwargs).
std::string braceFormat(Renderer &renderer, const std::string &format, const CallArgs &args) {
  std::string out;
  size_t autoIndex = 0;
  enum { Unknown, Automatic, Manual } numbering = Unknown;
  for (size_t i = 0; i < format.size(); ++i) {
    char c = format[i];
    if (c == '}') {
      if (i + 1 < format.size() && format[i + 1] == '}') {
        out += '}';
        ++i;
        continue;
      }
      raise("Single '}' encountered in format string");
    }
    if (c != '{') {
      out += c;
      continue;
    }
    if (i + 1 < format.size() && format[i + 1] == '{') {
      out += '{';
      ++i;
      continue;
    }
    size_t close = format.find('}', i);
    if (close == std::string::npos)
      raise("Single '{' encountered in format string");
    std::string field = format.substr(i + 1, close - i - 1);
    i = close;
    if (field.find('{') != std::string::npos)
      raise("nested replacement fields are not supported");
    std::string spec, conversion;
    if (size_t colon = field.find(':'); colon != std::string::npos) {
      spec = field.substr(colon + 1);
      field.resize(colon);
    }
    if (size_t bang = field.find('!'); bang != std::string::npos) {
      conversion = field.substr(bang + 1);
      field.resize(bang);
    }
    size_t nameEnd = field.find_first_of(".[");
    std::string name = field.substr(0, nameEnd);
    Value value;
    if (name.empty() || std::all_of(name.begin(), name.end(), isDigit)) {
      bool automatic = name.empty();
      if (numbering != Unknown && (numbering == Automatic) != automatic)
        raise(automatic
                  ? "cannot switch from manual field specification to automatic field numbering"
                  : "cannot switch from automatic field numbering to manual field specification");
      numbering = automatic ? Automatic : Manual;
      size_t index = automatic ? autoIndex++ : std::stoul(name.substr(0, 9));
      if (index >= args.positional.size())
        raise("Replacement index " + std::to_string(index) +
              " out of range for positional args tuple");
      value = args.positional[index];
    } else {
      auto it = std::find_if(args.keywords.begin(), args.keywords.end(),
                             [&](const auto &kw) { return kw.first == name; });
      if (it == args.keywords.end())
        raise("KeyError: " + singleQuoted(name));
      value = it->second;
    }
    for (size_t p = nameEnd; p != std::string::npos && p < field.size();) {
      if (field[p] == '.') {
        size_t next = field.find_first_of(".[", p + 1);
        value = renderer.getAttr(value, field.substr(p + 1, next - p - 1));
        p = next;
      } else {
        size_t end = field.find(']', p);
        if (end == std::string::npos)
          raise("Missing ']' in format string");
        std::string key = field.substr(p + 1, end - p - 1);
        bool numeric =
            !key.empty() && key.size() < 18 && std::all_of(key.begin(), key.end(), isDigit);
        value =
            renderer.getItem(value, numeric ? Value::integer(std::stoll(key)) : Value::string(key));
        p = end + 1;
      }
    }
    if (conversion == "r" || conversion == "a")
      value = Value::string(reprOf(value));
    else if (conversion == "s")
      value = Value::string(toStr(value));
    else if (!conversion.empty())
      raise("Unknown conversion specifier " + conversion);
    out += formatWithSpec(value, spec);
    if (out.size() > kMaxTextBytes)
      raiseTooLong();
  }
  return out;
}

bool allCodePoints(const std::string &text, bool (*predicate)(uint32_t)) {
  bool all = true;
  forEachCodePoint(text, [&](uint32_t cp, size_t, size_t) { all = all && predicate(cp); });
  return !text.empty() && all;
}

/// islower / isupper: some cased character, and all of them in that case.
bool casedAll(const std::string &text, bool (*inCase)(uint32_t)) {
  bool cased = false, all = true;
  forEachCodePoint(text, [&](uint32_t cp, size_t, size_t) {
    if (!all || !isCased(cp))
      return;
    all = inCase(cp);
    cased = true;
  });
  return cased && all;
}

Value stringMethod(Renderer &renderer, const std::string &self, const std::string &name,
                   const CallArgs &args) {
  std::string what = "str." + name;
  renderer.spend(self.size() / 16);
  if (name == "format")
    return Value::string(braceFormat(renderer, self, args));
  if (name == "strip" || name == "lstrip" || name == "rstrip") {
    Bound a = bindArgs(args, {"chars"}, what);
    return Value::string(pyStrip(self, strArg(a[0], what), name != "rstrip", name != "lstrip"));
  }
  if (name == "split" || name == "rsplit") {
    Bound a = bindArgs(args, {"sep", "maxsplit"}, what);
    return stringList(pySplit(self, strArg(a[0], what), intArg(a[1], -1, what), name == "rsplit"));
  }
  if (name == "splitlines") {
    Bound a = bindArgs(args, {"keepends"}, what);
    return stringList(pySplitLines(self, boolArg(a[0], false)));
  }
  if (name == "upper")
    return Value::string(pyUpper(self));
  if (name == "lower" || name == "casefold")
    return Value::string(pyLower(self));
  if (name == "title")
    return Value::string(pyTitle(self));
  if (name == "capitalize")
    return Value::string(pyCapitalize(self));
  if (name == "swapcase") {
    std::vector<uint32_t> out;
    for (uint32_t cp : codePoints(self))
      isUpperCase(cp) ? appendLower(cp, out) : appendUpper(cp, out);
    return Value::string(fromCodePoints(out));
  }
  if (name == "replace") {
    Bound a = bindArgs(args, {"old", "new", "count"}, what);
    if (!a[0] || !a[1])
      raise(what + "() takes at least 2 arguments");
    return Value::string(
        pyReplace(self, *strArg(a[0], what), *strArg(a[1], what), intArg(a[2], -1, what)));
  }
  if (name == "startswith" || name == "endswith") {
    Bound a = bindArgs(args, {"prefix", "start", "end"}, what);
    if (!a[0])
      raise(what + "() takes at least 1 argument");
    auto [begin, end] = byteRange(self, a[1], a[2]);
    std::string_view range = std::string_view(self).substr(begin, end > begin ? end - begin : 0);
    std::vector<Value> candidates =
        a[0]->isList() && a[0]->seq() == Value::Seq::Tuple ? a[0]->items() : std::vector{*a[0]};
    for (const Value &candidate : candidates) {
      if (!candidate.isString())
        raise(what + " first arg must be str or a tuple of str, not " + typeName(candidate));
      const std::string &affix = candidate.str();
      bool match = affix.size() <= range.size() &&
                   (name == "startswith" ? range.substr(0, affix.size()) == affix
                                         : range.substr(range.size() - affix.size()) == affix);
      if (match)
        return Value::boolean(true);
    }
    return Value::boolean(false);
  }
  if (name == "find" || name == "rfind" || name == "index" || name == "rindex" || name == "count") {
    Bound a = bindArgs(args, {"sub", "start", "end"}, what);
    if (!a[0])
      raise(what + "() takes at least 1 argument");
    std::string sub = *strArg(a[0], what);
    auto [begin, end] = byteRange(self, a[1], a[2]);
    if (begin > end)
      return Value::integer(name == "count" ? 0 : -1);
    std::string_view range = std::string_view(self).substr(begin, end - begin);
    if (name == "count") {
      if (sub.empty())
        return Value::integer(static_cast<int64_t>(codePointCount(range)) + 1);
      int64_t count = 0;
      for (size_t at = findText(range, sub); at != std::string_view::npos;
           at = findText(range, sub, at + sub.size()))
        ++count;
      return Value::integer(count);
    }
    bool reverse = name == "rfind" || name == "rindex";
    size_t at = reverse ? rfindText(range, sub) : findText(range, sub);
    if (at == std::string_view::npos) {
      if (name == "index" || name == "rindex")
        raise("substring not found");
      return Value::integer(-1);
    }
    return Value::integer(static_cast<int64_t>(codePointCount(self.substr(0, begin + at))));
  }
  if (name == "join") {
    Bound a = bindArgs(args, {"iterable"}, what);
    if (!a[0])
      raise(what + "() takes exactly one argument");
    std::vector<Value> items = renderer.iterate(*a[0]);
    std::string out;
    for (size_t i = 0; i < items.size(); ++i) {
      if (!items[i].isString())
        raise("sequence item " + std::to_string(i) + ": expected str instance, " +
              typeName(items[i]) + " found");
      if (out.size() + self.size() + items[i].str().size() > kMaxTextBytes)
        raiseTooLong();
      if (i)
        out += self;
      out += items[i].str();
    }
    return Value::string(std::move(out));
  }
  if (name == "center" || name == "ljust" || name == "rjust") {
    Bound a = bindArgs(args, {"width", "fillchar"}, what);
    int64_t width = intArg(a[0], 0, what);
    std::optional<std::string> fill = strArg(a[1], what);
    std::vector<uint32_t> fillPoints = fill ? codePoints(*fill) : std::vector<uint32_t>{' '};
    if (fillPoints.size() != 1)
      raise("The fill character must be exactly one character long");
    if (name != "center")
      return Value::string(padded(self, width, name == "ljust" ? '<' : '>', fillPoints[0]));
    // str.center puts the odd fill character on the left when width is odd.
    int64_t length = static_cast<int64_t>(codePointCount(self));
    if (width <= length)
      return Value::string(self);
    int64_t total = width - length, left = total / 2 + (total & width & 1);
    std::string fillText;
    appendCodePoint(fillText, fillPoints[0]);
    return Value::string(checkedRepeat(fillText, left) + self +
                         checkedRepeat(fillText, total - left));
  }
  if (name == "zfill") {
    Bound a = bindArgs(args, {"width"}, what);
    int64_t width = intArg(a[0], 0, what), length = static_cast<int64_t>(codePointCount(self));
    if (width <= length)
      return Value::string(self);
    bool hasSign = !self.empty() && (self[0] == '-' || self[0] == '+');
    std::string zeros = checkedRepeat("0", width - length);
    return Value::string(hasSign ? self.substr(0, 1) + zeros + self.substr(1) : zeros + self);
  }
  if (name == "partition" || name == "rpartition") {
    Bound a = bindArgs(args, {"sep"}, what);
    std::string sep = strArg(a[0], what).value_or("");
    if (sep.empty())
      raise("empty separator");
    size_t at = name == "partition" ? findText(self, sep) : rfindText(self, sep);
    if (at == std::string::npos)
      return stringList(name == "partition" ? std::vector<std::string>{self, "", ""}
                                            : std::vector<std::string>{"", "", self},
                        Value::Seq::Tuple);
    return stringList({self.substr(0, at), sep, self.substr(at + sep.size())}, Value::Seq::Tuple);
  }
  if (name == "removeprefix" || name == "removesuffix") {
    Bound a = bindArgs(args, {"affix"}, what);
    std::string affix = strArg(a[0], what).value_or("");
    if (name == "removeprefix")
      return Value::string(self.compare(0, affix.size(), affix) == 0 ? self.substr(affix.size())
                                                                     : self);
    bool suffix = affix.size() <= self.size() &&
                  self.compare(self.size() - affix.size(), affix.size(), affix) == 0;
    return Value::string(suffix && !affix.empty() ? self.substr(0, self.size() - affix.size())
                                                  : self);
  }
  bindArgs(args, {}, what);
  if (name == "isspace")
    return Value::boolean(allCodePoints(self, isPySpace));
  if (name == "isalpha")
    return Value::boolean(allCodePoints(self, isLetter));
  if (name == "isdigit" || name == "isdecimal" || name == "isnumeric")
    return Value::boolean(allCodePoints(self, [](uint32_t cp) {
      return (cp >= '0' && cp <= '9') || (cp >= 0x80 && isNumber(cp));
    }));
  if (name == "isalnum")
    return Value::boolean(
        allCodePoints(self, [](uint32_t cp) { return isLetter(cp) || isNumber(cp); }));
  if (name == "islower")
    return Value::boolean(casedAll(self, isLowerCase));
  if (name == "isupper")
    return Value::boolean(casedAll(self, isUpperCase));
  raise("str." + name + "() is not supported");
}

Value callMethod(Renderer &renderer, const Value &self, const std::string &name,
                 const CallArgs &args) {
  std::string what = typeName(self) + "." + name;
  if (self.isString())
    return stringMethod(renderer, self.str(), name, args);
  if (self.isDict()) {
    const Dict &dict = self.entries();
    renderer.spend(dict.size());
    if (name == "get") {
      Bound a = bindArgs(args, {"key", "default"}, what);
      if (!a[0])
        raise("get expected at least 1 argument, got 0");
      if (!isHashable(*a[0]))
        raise("unhashable type: " + singleQuoted(typeName(*a[0])));
      const Value *found = dict.find(*a[0]);
      return found ? *found : a[1].value_or(Value::none());
    }
    bindArgs(args, {}, what);
    if (name == "copy")
      return self;
    std::vector<Value> items;
    for (const auto &[key, value] : dict.entries)
      items.push_back(name == "keys"     ? key
                      : name == "values" ? value
                                         : Value::list({key, value}, Value::Seq::Tuple));
    return Value::list(std::move(items));
  }
  const std::vector<Value> &items = self.items();
  renderer.spend(items.size());
  if (name == "copy") {
    bindArgs(args, {}, what);
    return self;
  }
  Bound a = bindArgs(args, {"value"}, what);
  if (!a[0])
    raise(what + "() takes exactly one argument");
  if (name == "count")
    return Value::integer(std::count_if(items.begin(), items.end(),
                                        [&](const Value &v) { return equals(v, *a[0]); }));
  for (size_t i = 0; i < items.size(); ++i)
    if (equals(items[i], *a[0]))
      return Value::integer(static_cast<int64_t>(i));
  raise(reprOf(*a[0]) + " is not in list");
}

//===----------------------------------------------------------------------===//
// Filters (jinja2's, with transformers' tojson).
//===----------------------------------------------------------------------===//

using FilterFunction = Value (*)(Renderer &, const Value &, const CallArgs &);

/// Work units of sorting `n` items.
uint64_t sortCost(size_t n) {
  uint64_t log = 1;
  while ((size_t(1) << log) < n)
    ++log;
  return n * (log + 1);
}

/// jinja2's ignore_case: strings compare lowercased unless case-sensitive.
Value sortKey(const Value &v, bool caseSensitive) {
  return !caseSensitive && v.isString() ? Value::string(pyLower(v.str())) : v;
}

Value lengthOf(const Value &v) {
  switch (v.kind()) {
  case Value::Kind::Undefined:
    return Value::integer(0);
  case Value::Kind::String:
    return Value::integer(static_cast<int64_t>(codePointCount(v.str())));
  case Value::Kind::List:
    if (!v.isGenerator())
      return Value::integer(static_cast<int64_t>(v.items().size()));
    break;
  case Value::Kind::Dict:
    return Value::integer(static_cast<int64_t>(v.entries().size()));
  default:
    break;
  }
  raise("object of type " + singleQuoted(typeName(v)) + " has no len()");
}

Value generator(std::vector<Value> items) {
  return Value::list(std::move(items), Value::Seq::Generator);
}

/// float(value) for a str, as Python parses it; nullopt if it does not.
std::optional<double> parsePyFloat(const std::string &text) {
  std::string s = pyStrip(text, std::nullopt, true, true), clean;
  for (size_t i = 0; i < s.size(); ++i) {
    bool between = i > 0 && i + 1 < s.size() && isDigit(s[i - 1]) && isDigit(s[i + 1]);
    if (s[i] == '_' && between)
      continue;
    clean += s[i];
  }
  std::string lower = pyLower(clean);
  std::string magnitude =
      lower.empty() || (lower[0] != '+' && lower[0] != '-') ? lower : lower.substr(1);
  bool negative = !lower.empty() && lower[0] == '-';
  if (magnitude == "inf" || magnitude == "infinity")
    return negative ? -HUGE_VAL : HUGE_VAL;
  if (magnitude == "nan")
    return std::nan("");
  // Digits, an optional fraction, an optional exponent: nothing else (no hex).
  size_t i = 0, digits = 0;
  while (i < magnitude.size() && isDigit(magnitude[i]))
    ++i, ++digits;
  if (i < magnitude.size() && magnitude[i] == '.')
    for (++i; i < magnitude.size() && isDigit(magnitude[i]); ++i)
      ++digits;
  if (!digits)
    return std::nullopt;
  if (i < magnitude.size() && magnitude[i] == 'e') {
    ++i;
    if (i < magnitude.size() && (magnitude[i] == '+' || magnitude[i] == '-'))
      ++i;
    size_t start = i;
    while (i < magnitude.size() && isDigit(magnitude[i]))
      ++i;
    if (i == start)
      return std::nullopt;
  }
  if (i != magnitude.size())
    return std::nullopt;
  return std::strtod(clean.c_str(), nullptr);
}

/// int(text, base) as Python parses it; nullopt if it does not.
std::optional<int64_t> parsePyInt(const std::string &text, int64_t base) {
  std::string s = pyStrip(text, std::nullopt, true, true);
  size_t i = 0;
  bool negative = false;
  if (i < s.size() && (s[i] == '+' || s[i] == '-'))
    negative = s[i++] == '-';
  auto prefixBase = [&]() -> int64_t {
    if (i + 1 >= s.size() || s[i] != '0')
      return 0;
    char p = static_cast<char>(s[i + 1] | 0x20);
    return p == 'x' ? 16 : p == 'o' ? 8 : p == 'b' ? 2 : 0;
  };
  int64_t prefixed = prefixBase();
  if (base == 0) {
    base = prefixed ? prefixed : 10;
    if (prefixed)
      i += 2;
  } else if (prefixed && prefixed == base) {
    i += 2;
  }
  if (base < 2 || base > 36)
    return std::nullopt;
  uint64_t value = 0;
  size_t digits = 0;
  for (; i < s.size(); ++i) {
    if (s[i] == '_' && digits > 0 && i + 1 < s.size() && s[i + 1] != '_')
      continue;
    char c = static_cast<char>(s[i] | 0x20);
    int d = isDigit(s[i]) ? s[i] - '0' : c >= 'a' && c <= 'z' ? c - 'a' + 10 : 99;
    if (d >= base)
      return std::nullopt;
    if (value > (uint64_t(INT64_MAX) - d) / base)
      raiseOverflow();
    value = value * base + d;
    ++digits;
  }
  if (!digits)
    return std::nullopt;
  return negative ? -static_cast<int64_t>(value) : static_cast<int64_t>(value);
}

std::string htmlEscape(const std::string &text) {
  std::string out;
  for (char c : text) {
    switch (c) {
    case '&':
      out += "&amp;";
      break;
    case '<':
      out += "&lt;";
      break;
    case '>':
      out += "&gt;";
      break;
    case '"':
      out += "&#34;";
      break;
    case '\'':
      out += "&#39;";
      break;
    default:
      out += c;
    }
  }
  return out;
}

/// select / reject / selectattr / rejectattr.
Value selectOrReject(Renderer &r, const Value &input, const CallArgs &args, bool select,
                     bool byAttribute) {
  size_t offset = 0;
  std::optional<Value> attribute;
  if (byAttribute) {
    if (args.positional.empty())
      raise("missing parameter for attribute name");
    attribute = args.positional[0];
    offset = 1;
  }
  std::optional<std::string> testName;
  CallArgs testArgs;
  if (args.positional.size() > offset) {
    if (!args.positional[offset].isString())
      raise("the test name must be a string");
    testName = args.positional[offset].str();
    testArgs.positional.assign(args.positional.begin() + offset + 1, args.positional.end());
    testArgs.keywords = args.keywords;
  }
  std::vector<Value> kept;
  for (const Value &item : r.iterate(input)) {
    Value subject = attribute ? r.attributePath(item, *attribute, std::nullopt) : item;
    bool passes = testName ? r.test(*testName, subject, testArgs) : truthy(subject);
    if (passes == select)
      kept.push_back(item);
  }
  return generator(std::move(kept));
}

/// min / max: the first item with the smallest (largest) key.
Value minOrMax(Renderer &r, const Value &input, const CallArgs &args, bool wantMax) {
  Bound a = bindArgs(args, {"case_sensitive", "attribute"}, wantMax ? "max" : "min");
  std::vector<Value> items = r.iterate(input);
  if (items.empty())
    return Value::undefined("No aggregated item, sequence was empty.");
  bool caseSensitive = boolArg(a[0], false);
  auto key = [&](const Value &item) {
    return sortKey(a[1] ? r.attributePath(item, *a[1], std::nullopt) : item, caseSensitive);
  };
  size_t best = 0;
  Value bestKey = key(items[0]);
  for (size_t i = 1; i < items.size(); ++i) {
    Value k = key(items[i]);
    if (wantMax ? lessThan(bestKey, k) : lessThan(k, bestKey)) {
      best = i;
      bestKey = k;
    }
  }
  return items[best];
}

Value roundValue(const Value &input, int64_t precision, const std::string &method) {
  if (!input.isNumber())
    raise("type " + typeName(input) + " doesn't define __round__ method");
  if (method != "common" && method != "ceil" && method != "floor")
    raise("method must be common, ceil or floor");
  if (method == "common" && input.isIntegral()) {
    if (precision >= 0)
      return Value::integer(input.asInt());
    if (precision < -18) // beyond every int64
      return Value::integer(0);
    double scale = std::pow(10.0, double(-precision));
    return Value::integer(static_cast<int64_t>(std::nearbyint(input.asInt() / scale) * scale));
  }
  double x = input.asDouble();
  if (!std::isfinite(x))
    return Value::real(x);
  precision = std::clamp<int64_t>(precision, -400, 400);
  if (precision < -308)
    return Value::real(std::copysign(0.0, x));
  if (method != "common") {
    double scale = std::pow(10.0, double(precision));
    return Value::real((method == "ceil" ? std::ceil(x * scale) : std::floor(x * scale)) / scale);
  }
  if (precision > 300)
    return Value::real(x);
  if (precision >= 0) {
    // printf rounds the exact binary value half to even, as Python's round().
    char buffer[512];
    std::snprintf(buffer, sizeof(buffer), "%.*f", static_cast<int>(precision), x);
    return Value::real(std::strtod(buffer, nullptr));
  }
  double scale = std::pow(10.0, double(-precision));
  return Value::real(std::nearbyint(x / scale) * scale);
}

const std::unordered_map<std::string, FilterFunction> &filterTable() {
  using R = Renderer;
  using V = Value;
  using A = CallArgs;
  static const std::unordered_map<std::string, FilterFunction> table = {
      {"abs",
       [](R &, const V &v, const A &a) {
         bindArgs(a, {}, "abs");
         if (v.kind() == Value::Kind::Float)
           return Value::real(std::fabs(v.asDouble()));
         if (!v.isIntegral())
           raise("bad operand type for abs(): " + singleQuoted(typeName(v)));
         if (v.asInt() == INT64_MIN)
           raiseOverflow();
         return Value::integer(std::llabs(v.asInt()));
       }},
      {"attr",
       [](R &r, const V &v, const A &a) {
         Bound b = bindArgs(a, {"name"}, "attr");
         std::string name = toStr(b[0].value_or(Value::string("")));
         if (v.isUndefined())
           raiseUndefined(v);
         if (!name.empty() && name[0] == '_')
           return unsafeAttribute(v, name);
         if (std::optional<Value> method = methodOf(v, name))
           return *method;
         if (v.isObject())
           return v.object().attribute(name);
         (void)r;
         return Value::undefined(singleQuoted(typeName(v) + " object") + " has no attribute " +
                                 singleQuoted(name));
       }},
      {"batch",
       [](R &r, const V &v, const A &a) {
         Bound b = bindArgs(a, {"linecount", "fill_with"}, "batch");
         int64_t count = intArg(b[0], 0, "batch");
         if (count > static_cast<int64_t>(kMaxItems))
           raise("batch size too large");
         std::vector<Value> batches, current;
         for (const Value &item : r.iterate(v)) {
           if (static_cast<int64_t>(current.size()) == count)
             batches.push_back(Value::list(std::exchange(current, {})));
           current.push_back(item);
         }
         if (!current.empty()) {
           if (b[1] && !b[1]->isNone())
             while (static_cast<int64_t>(current.size()) < count)
               current.push_back(*b[1]);
           batches.push_back(Value::list(std::move(current)));
         }
         return generator(std::move(batches));
       }},
      {"capitalize",
       [](R &, const V &v, const A &a) {
         bindArgs(a, {}, "capitalize");
         return Value::string(pyCapitalize(toStr(v)));
       }},
      {"center",
       [](R &r, const V &v, const A &a) {
         Bound b = bindArgs(a, {"width"}, "center");
         CallArgs width;
         width.positional.push_back(b[0].value_or(Value::integer(80)));
         return callMethod(r, Value::string(toStr(v)), "center", width);
       }},
      {"count",
       [](R &, const V &v, const A &a) {
         bindArgs(a, {}, "count");
         return lengthOf(v);
       }},
      {"default",
       [](R &, const V &v, const A &a) {
         Bound b = bindArgs(a, {"default_value", "boolean"}, "default");
         if (v.isUndefined() || (boolArg(b[1], false) && !truthy(v)))
           return b[0].value_or(Value::string(""));
         return v;
       }},
      {"dictsort",
       [](R &r, const V &v, const A &a) {
         Bound b = bindArgs(a, {"case_sensitive", "by", "reverse"}, "dictsort");
         if (!v.isDict())
           raise("dictsort needs a dict, not " + singleQuoted(typeName(v)));
         std::string by = strArg(b[1], "dictsort").value_or("key");
         if (by != "key" && by != "value")
           raise("You can only sort by either \"key\" or \"value\"");
         bool caseSensitive = boolArg(b[0], false), reverse = boolArg(b[2], false);
         size_t position = by == "key" ? 0 : 1;
         std::vector<std::pair<Value, Value>> pairs = v.entries().entries;
         r.spend(sortCost(pairs.size()));
         stableSort(pairs, [&](const auto &x, const auto &y) {
           const Value &kx = position ? x.second : x.first, &ky = position ? y.second : y.first;
           Value sx = sortKey(kx, caseSensitive), sy = sortKey(ky, caseSensitive);
           return reverse ? lessThan(sy, sx) : lessThan(sx, sy);
         });
         std::vector<Value> items;
         for (auto &[key, value] : pairs)
           items.push_back(Value::list({key, value}, Value::Seq::Tuple));
         return Value::list(std::move(items));
       }},
      {"escape",
       [](R &, const V &v, const A &a) {
         bindArgs(a, {}, "escape");
         return Value::string(htmlEscape(toStr(v)));
       }},
      {"first",
       [](R &r, const V &v, const A &a) {
         bindArgs(a, {}, "first");
         if (v.isList() && !v.items().empty())
           return v.items().front();
         std::vector<Value> items = r.iterate(v);
         return items.empty() ? Value::undefined("No first item, sequence was empty.") : items[0];
       }},
      {"float",
       [](R &, const V &v, const A &a) {
         Bound b = bindArgs(a, {"default"}, "float");
         if (v.isNumber())
           return Value::real(v.asDouble());
         if (v.isString())
           if (std::optional<double> f = parsePyFloat(v.str()))
             return Value::real(*f);
         return b[0].value_or(Value::real(0.0));
       }},
      {"format",
       [](R &, const V &v, const A &a) {
         if (!a.positional.empty() && !a.keywords.empty())
           raise("can't handle positional and keyword arguments at the same time");
         if (!a.keywords.empty()) {
           Dict mapping;
           for (const auto &[key, value] : a.keywords)
             mapping.set(Value::string(key), value);
           return Value::string(percentFormat(toStr(v), Value::dict(std::move(mapping))));
         }
         return Value::string(percentFormat(toStr(v), Value::list(a.positional, Value::Seq::Tuple)));
       }},
      {"indent",
       [](R &, const V &v, const A &a) {
         Bound b = bindArgs(a, {"width", "first", "blank"}, "indent");
         std::string indentation = b[0] && b[0]->isString()
                                       ? b[0]->str()
                                       : checkedRepeat(" ", intArg(b[0], 4, "indent"));
         std::vector<std::string> lines = pySplitLines(toStr(v) + "\n");
         std::string out;
         auto grow = [&](std::string_view piece) {
           if (out.size() + piece.size() > kMaxTextBytes)
             raiseTooLong();
           out += piece;
         };
         for (size_t i = 0; i < lines.size(); ++i) {
           if (i) {
             grow("\n");
             if (boolArg(b[2], false) || !lines[i].empty())
               grow(indentation);
           }
           grow(lines[i]);
         }
         if (boolArg(b[1], false))
           out = indentation + out;
         return Value::string(std::move(out));
       }},
      {"int",
       [](R &, const V &v, const A &a) {
         Bound b = bindArgs(a, {"default", "base"}, "int");
         Value fallback = b[0].value_or(Value::integer(0));
         if (v.isIntegral())
           return Value::integer(v.asInt());
         std::optional<double> f;
         if (v.isString()) {
           if (std::optional<int64_t> i = parsePyInt(v.str(), intArg(b[1], 10, "int")))
             return Value::integer(*i);
           f = parsePyFloat(v.str());
         } else if (v.kind() == Value::Kind::Float) {
           f = v.asDouble();
         }
         if (!f || !std::isfinite(*f))
           return fallback;
         if (std::fabs(*f) >= 9.2e18)
           raiseOverflow();
         return Value::integer(static_cast<int64_t>(std::trunc(*f)));
       }},
      {"items",
       [](R &, const V &v, const A &a) {
         bindArgs(a, {}, "items");
         if (v.isUndefined())
           return generator({});
         if (!v.isDict())
           raise("Can only get item pairs from a mapping.");
         std::vector<Value> items;
         for (const auto &[key, value] : v.entries().entries)
           items.push_back(Value::list({key, value}, Value::Seq::Tuple));
         return generator(std::move(items));
       }},
      {"join",
       [](R &r, const V &v, const A &a) {
         Bound b = bindArgs(a, {"d", "attribute"}, "join");
         std::string separator = b[0] ? toStr(*b[0]) : "", out;
         std::vector<Value> items = r.iterate(v);
         for (size_t i = 0; i < items.size(); ++i) {
           std::string part =
               r.printed(b[1] && !b[1]->isNone() ? r.attributePath(items[i], *b[1], std::nullopt)
                                              : items[i]);
           if (out.size() + separator.size() + part.size() > kMaxTextBytes)
             raiseTooLong();
           if (i)
             out += separator;
           out += part;
         }
         return Value::string(std::move(out));
       }},
      {"last",
       [](R &r, const V &v, const A &a) {
         bindArgs(a, {}, "last");
         if (v.isGenerator())
           raise("'generator' object is not reversible");
         if (v.isList() && !v.items().empty())
           return v.items().back();
         std::vector<Value> items = r.iterate(v);
         return items.empty() ? Value::undefined("No last item, sequence was empty.")
                              : items.back();
       }},
      {"length",
       [](R &, const V &v, const A &a) {
         bindArgs(a, {}, "length");
         return lengthOf(v);
       }},
      {"list",
       [](R &r, const V &v, const A &a) {
         bindArgs(a, {}, "list");
         return Value::list(r.iterate(v));
       }},
      {"lower",
       [](R &, const V &v, const A &a) {
         bindArgs(a, {}, "lower");
         return Value::string(pyLower(toStr(v)));
       }},
      {"map",
       [](R &r, const V &v, const A &a) {
         std::vector<Value> out;
         if (a.positional.empty()) {
           Bound b = bindArgs(a, {"attribute", "default"}, "map");
           if (!b[0])
             raise("map requires a filter argument");
           std::optional<Value> fallback = b[1] && !b[1]->isNone() ? b[1] : std::nullopt;
           for (const Value &item : r.iterate(v))
             out.push_back(r.attributePath(item, *b[0], fallback));
           return generator(std::move(out));
         }
         if (!a.positional[0].isString())
           raise("map requires a filter name");
         CallArgs filterArgs;
         filterArgs.positional.assign(a.positional.begin() + 1, a.positional.end());
         filterArgs.keywords = a.keywords;
         for (const Value &item : r.iterate(v))
           out.push_back(r.filter(a.positional[0].str(), item, filterArgs));
         return generator(std::move(out));
       }},
      {"max", [](R &r, const V &v, const A &a) { return minOrMax(r, v, a, true); }},
      {"min", [](R &r, const V &v, const A &a) { return minOrMax(r, v, a, false); }},
      {"reject", [](R &r, const V &v, const A &a) { return selectOrReject(r, v, a, false, false); }},
      {"rejectattr",
       [](R &r, const V &v, const A &a) { return selectOrReject(r, v, a, false, true); }},
      {"replace",
       [](R &, const V &v, const A &a) {
         Bound b = bindArgs(a, {"old", "new", "count"}, "replace");
         if (!b[0] || !b[1])
           raise("replace() takes at least 2 arguments");
         return Value::string(
             pyReplace(toStr(v), toStr(*b[0]), toStr(*b[1]), intArg(b[2], -1, "replace")));
       }},
      {"reverse",
       [](R &r, const V &v, const A &a) {
         bindArgs(a, {}, "reverse");
         if (v.isString()) {
           std::vector<uint32_t> points = codePoints(v.str());
           std::reverse(points.begin(), points.end());
           return Value::string(fromCodePoints(points));
         }
         if (!(v.isList() || v.isDict() || v.isUndefined()))
           raise("argument must be iterable");
         std::vector<Value> items = r.iterate(v);
         std::reverse(items.begin(), items.end());
         // reversed() gives an iterator; a generator's reversal is a list.
         return v.isGenerator() ? Value::list(std::move(items)) : generator(std::move(items));
       }},
      {"round",
       [](R &, const V &v, const A &a) {
         Bound b = bindArgs(a, {"precision", "method"}, "round");
         return roundValue(v, intArg(b[0], 0, "round"),
                           strArg(b[1], "round").value_or("common"));
       }},
      {"safe",
       [](R &, const V &v, const A &a) {
         bindArgs(a, {}, "safe");
         return Value::string(toStr(v));
       }},
      {"select", [](R &r, const V &v, const A &a) { return selectOrReject(r, v, a, true, false); }},
      {"selectattr",
       [](R &r, const V &v, const A &a) { return selectOrReject(r, v, a, true, true); }},
      {"slice",
       [](R &r, const V &v, const A &a) {
         Bound b = bindArgs(a, {"slices", "fill_with"}, "slice");
         int64_t slices = intArg(b[0], 0, "slice");
         if (slices <= 0 || slices > static_cast<int64_t>(kMaxItems))
           raise("slice count out of range");
         std::vector<Value> items = r.iterate(v), out;
         int64_t length = static_cast<int64_t>(items.size()), perSlice = length / slices,
                 withExtra = length % slices, offset = 0;
         for (int64_t n = 0; n < slices; ++n) {
           int64_t start = offset + n * perSlice;
           if (n < withExtra)
             ++offset;
           int64_t end = offset + (n + 1) * perSlice;
           std::vector<Value> part(items.begin() + start, items.begin() + end);
           if (b[1] && !b[1]->isNone() && n >= withExtra)
             part.push_back(*b[1]);
           out.push_back(Value::list(std::move(part)));
         }
         return generator(std::move(out));
       }},
      {"sort",
       [](R &r, const V &v, const A &a) {
         Bound b = bindArgs(a, {"reverse", "case_sensitive", "attribute"}, "sort");
         bool reverse = boolArg(b[0], false), caseSensitive = boolArg(b[1], false);
         std::vector<Value> items = r.iterate(v);
         r.spend(sortCost(items.size()));
         std::vector<std::pair<Value, Value>> keyed;
         for (const Value &item : items) {
           // jinja2's make_multi_attrgetter: the key is a list, so that
           // equal (even undefined) keys compare without `<`.
           std::vector<Value> keys;
           if (b[2] && b[2]->isString()) {
             for (const std::string &path : pySplit(b[2]->str(), std::string(","), -1, false))
               keys.push_back(sortKey(r.attributePath(item, Value::string(path), std::nullopt),
                                      caseSensitive));
           } else {
             keys.push_back(sortKey(
                 b[2] && !b[2]->isNone() ? r.attributePath(item, *b[2], std::nullopt) : item,
                 caseSensitive));
           }
           Value key = Value::list(std::move(keys));
           keyed.emplace_back(std::move(key), item);
         }
         stableSort(keyed, [&](const auto &x, const auto &y) {
           return reverse ? lessThan(y.first, x.first) : lessThan(x.first, y.first);
         });
         std::vector<Value> sorted;
         for (auto &[key, item] : keyed)
           sorted.push_back(std::move(item));
         return Value::list(std::move(sorted));
       }},
      {"string",
       [](R &r, const V &v, const A &a) {
         bindArgs(a, {}, "string");
         return Value::string(r.printed(v));
       }},
      {"sum",
       [](R &r, const V &v, const A &a) {
         Bound b = bindArgs(a, {"attribute", "start"}, "sum");
         Value total = b[1].value_or(Value::integer(0));
         for (const Value &item : r.iterate(v)) {
           total = arithmetic(
               "+", total,
               b[0] && !b[0]->isNone() ? r.attributePath(item, *b[0], std::nullopt) : item);
           r.account(total);
         }
         return total;
       }},
      {"title",
       [](R &, const V &v, const A &a) {
         bindArgs(a, {}, "title");
         // jinja2's own title: words begin after whitespace, - ( { [ <.
         std::vector<uint32_t> out;
         bool wordStart = true;
         for (uint32_t cp : codePoints(toStr(v))) {
           bool separator = isPySpace(cp) || cp == '-' || cp == '(' || cp == '{' || cp == '[' ||
                            cp == '<';
           if (wordStart)
             appendUpper(cp, out);
           else
             appendLower(cp, out);
           wordStart = separator;
         }
         return Value::string(fromCodePoints(out));
       }},
      {"tojson",
       [](R &r, const V &v, const A &a) {
         Bound b = bindArgs(a, {"ensure_ascii", "indent", "separators", "sort_keys"}, "tojson");
         JsonStyle style;
         style.ensureAscii = boolArg(b[0], false);
         style.sortKeys = boolArg(b[3], false);
         if (b[1] && !b[1]->isNone()) {
           style.indent = b[1]->isString() ? b[1]->str()
                                           : checkedRepeat(" ", intArg(b[1], 0, "tojson"));
           style.itemSeparator = ",";
         }
         if (b[2] && !b[2]->isNone()) {
           if (!b[2]->isList() || b[2]->items().size() != 2 || !b[2]->items()[0].isString() ||
               !b[2]->items()[1].isString())
             raise("tojson: separators must be a pair of strings");
           style.itemSeparator = b[2]->items()[0].str();
           style.keySeparator = b[2]->items()[1].str();
         }
         std::string out;
         appendJsonValue(out, v, style, 0);
         r.spend(out.size() / 4);
         return Value::string(std::move(out));
       }},
      {"trim",
       [](R &, const V &v, const A &a) {
         Bound b = bindArgs(a, {"chars"}, "trim");
         return Value::string(pyStrip(toStr(v), strArg(b[0], "trim"), true, true));
       }},
      {"truncate",
       [](R &, const V &v, const A &a) {
         Bound b = bindArgs(a, {"length", "killwords", "end", "leeway"}, "truncate");
         int64_t length = intArg(b[0], 255, "truncate"), leeway = intArg(b[3], 5, "truncate");
         std::string end = b[2] ? toStr(*b[2]) : "...";
         std::vector<uint32_t> points = codePoints(toStr(v));
         int64_t endLength = static_cast<int64_t>(codePointCount(end));
         if (length < endLength || leeway < 0)
           raise("truncate: expected length >= " + std::to_string(endLength));
         if (static_cast<int64_t>(points.size()) <= length + leeway)
           return Value::string(fromCodePoints(points));
         std::string kept = fromCodePoints(points.data(), length - endLength);
         if (!boolArg(b[1], false))
           kept = pySplit(kept, std::string(" "), 1, true)[0];
         return Value::string(kept + end);
       }},
      {"unique",
       [](R &r, const V &v, const A &a) {
         Bound b = bindArgs(a, {"case_sensitive", "attribute"}, "unique");
         bool caseSensitive = boolArg(b[0], false);
         Dict seen;
         std::vector<Value> out;
         for (const Value &item : r.iterate(v)) {
           Value key = sortKey(
               b[1] && !b[1]->isNone() ? r.attributePath(item, *b[1], std::nullopt) : item,
               caseSensitive);
           if (seen.find(key))
             continue;
           seen.set(key, Value::none());
           out.push_back(item);
         }
         return generator(std::move(out));
       }},
      {"upper",
       [](R &, const V &v, const A &a) {
         bindArgs(a, {}, "upper");
         return Value::string(pyUpper(toStr(v)));
       }},
      {"wordcount",
       [](R &, const V &v, const A &a) {
         bindArgs(a, {}, "wordcount");
         int64_t words = 0;
         bool inWord = false;
         forEachCodePoint(toStr(v), [&](uint32_t cp, size_t, size_t) {
           bool word = cp < 0x80 ? isNameChar(static_cast<char>(cp)) : isLetter(cp) || isNumber(cp);
           words += word && !inWord;
           inWord = word;
         });
         return Value::integer(words);
       }},
  };
  return table;
}

Value Renderer::filter(const std::string &name, const Value &input, const CallArgs &args) {
  // Filters call filters and tests (map, select): that nests too.
  DepthGuard guard(*this);
  // Lists are charged as they are walked (iterate); strings here.
  spend(4 + (input.isString() ? cost(input) : 0));
  static const std::unordered_map<std::string, std::string> aliases = {
      {"d", "default"}, {"e", "escape"}, {"forceescape", "escape"}};
  auto alias = aliases.find(name);
  const std::string &canonical = alias == aliases.end() ? name : alias->second;
  const auto &table = filterTable();
  auto it = table.find(canonical);
  if (it == table.end())
    raise("no filter named " + singleQuoted(name));
  return it->second(*this, input, args);
}

//===----------------------------------------------------------------------===//
// Tests.
//===----------------------------------------------------------------------===//

bool Renderer::test(const std::string &name, const Value &v, const CallArgs &args) {
  DepthGuard guard(*this);
  spend(2 + cost(v));
  for (const Value &arg : args.positional)
    spend(cost(arg));
  auto argument = [&]() -> Value {
    Bound b = bindArgs(args, {"other"}, "test " + singleQuoted(name));
    if (!b[0])
      raise("test " + singleQuoted(name) + " takes one argument");
    return *b[0];
  };
  auto noArguments = [&] { bindArgs(args, {}, "test " + singleQuoted(name)); };
  auto integer = [&](const char *what) {
    if (v.isUndefined())
      raiseUndefined(v);
    if (!v.isNumber())
      raise("test " + singleQuoted(what) + " needs a number, not " + singleQuoted(typeName(v)));
  };
  static const std::unordered_map<std::string, std::string> comparisons = {
      {"eq", "=="}, {"equalto", "=="},    {"==", "=="}, {"ne", "!="}, {"!=", "!="},
      {"lt", "<"},  {"lessthan", "<"},    {"<", "<"},   {"le", "<="}, {"<=", "<="},
      {"gt", ">"},  {"greaterthan", ">"}, {">", ">"},   {"ge", ">="}, {">=", ">="}};
  if (auto it = comparisons.find(name); it != comparisons.end())
    return compare(it->second, v, argument());
  if (name == "in")
    return contains(argument(), v);
  if (name == "sameas") {
    Value other = argument();
    if (v.kind() != other.kind())
      return false;
    if (v.isNone() || v.isUndefined())
      return true;
    if (v.kind() == Value::Kind::Bool)
      return v.asBool() == other.asBool();
    if (v.isNumber())
      return equals(v, other);
    return v.identity() == other.identity();
  }
  if (name == "divisibleby") {
    Value other = argument();
    integer("divisibleby");
    return equals(arithmetic("%", v, other), Value::integer(0));
  }
  if (name == "filter" || name == "test") {
    Value other = v;
    noArguments();
    if (!other.isString())
      return false;
    if (name == "filter")
      return filterTable().count(other.str()) || other.str() == "d" || other.str() == "e" ||
             other.str() == "forceescape";
    static const std::unordered_set<std::string> tests = {
        "boolean", "callable", "defined",  "divisibleby", "eq",    "equalto", "escaped",
        "even",    "false",    "filter",   "float",       "ge",    "gt",      "greaterthan",
        "in",      "integer",  "iterable", "le",          "lower", "lt",      "lessthan",
        "mapping", "ne",       "none",     "number",      "odd",   "sameas",  "sequence",
        "string",  "test",     "true",     "undefined",   "upper"};
    return tests.count(other.str()) > 0;
  }
  noArguments();
  if (name == "defined")
    return !v.isUndefined();
  if (name == "undefined")
    return v.isUndefined();
  if (name == "none")
    return v.isNone();
  if (name == "boolean")
    return v.kind() == Value::Kind::Bool;
  if (name == "true")
    return v.kind() == Value::Kind::Bool && v.asBool();
  if (name == "false")
    return v.kind() == Value::Kind::Bool && !v.asBool();
  if (name == "integer")
    return v.kind() == Value::Kind::Int;
  if (name == "float")
    return v.kind() == Value::Kind::Float;
  if (name == "number")
    return v.isNumber();
  if (name == "string")
    return v.isString();
  if (name == "mapping")
    return v.isDict();
  if (name == "iterable")
    return v.isString() || v.isList() || v.isDict() || v.isUndefined();
  if (name == "sequence")
    return v.isString() || (v.isList() && !v.isGenerator()) || v.isDict() || v.isUndefined();
  if (name == "callable")
    return v.isUndefined() || (v.isObject() && v.object().isCallable());
  if (name == "escaped")
    return false;
  if (name == "odd" || name == "even") {
    integer(name.c_str());
    Value remainder = arithmetic("%", v, Value::integer(2));
    return equals(remainder, Value::integer(name == "odd" ? 1 : 0));
  }
  if (name == "lower" || name == "upper") {
    std::string text = toStr(v);
    return casedAll(text, name == "lower" ? isLowerCase : isUpperCase);
  }
  raise("no test named " + singleQuoted(name));
}

//===----------------------------------------------------------------------===//
// Globals: jinja2's, and transformers' raise_exception and strftime_now.
//===----------------------------------------------------------------------===//

/// Python's dict(*args, **kwargs), for dict() and namespace().
Dict dictFromArgs(Renderer &r, const CallArgs &args, const char *what) {
  if (args.positional.size() > 1)
    raise(std::string(what) + " expected at most 1 argument, got " +
          std::to_string(args.positional.size()));
  Dict dict;
  if (!args.positional.empty()) {
    const Value &source = args.positional[0];
    if (source.isDict()) {
      dict = source.entries();
    } else {
      std::vector<Value> pairs = r.iterate(source);
      for (size_t i = 0; i < pairs.size(); ++i) {
        std::vector<Value> pair = r.iterate(pairs[i]);
        if (pair.size() != 2)
          raise("dictionary update sequence element #" + std::to_string(i) + " has length " +
                std::to_string(pair.size()) + "; 2 is required");
        dict.set(pair[0], pair[1]);
      }
    }
  }
  for (const auto &[key, value] : args.keywords)
    dict.set(Value::string(key), value);
  return dict;
}

std::string strftimeNow(const std::string &format) {
  auto now = std::chrono::system_clock::now();
  long microseconds = static_cast<long>(
      std::chrono::duration_cast<std::chrono::microseconds>(now.time_since_epoch()).count() %
      1000000);
  std::tm local{};
  time_t seconds = std::chrono::system_clock::to_time_t(now);
  localtime_r(&seconds, &local);
  // datetime.strftime handles %f (microseconds) itself.
  std::string expanded;
  for (size_t i = 0; i < format.size(); ++i) {
    if (format[i] == '%' && i + 1 < format.size()) {
      if (format[i + 1] == 'f') {
        char micro[8];
        std::snprintf(micro, sizeof(micro), "%06ld", microseconds);
        expanded += micro;
      } else {
        expanded += format.substr(i, 2);
      }
      ++i;
      continue;
    }
    expanded += format[i];
  }
  if (expanded.empty())
    return "";
  // strftime returns 0 both for an empty result and a buffer too small.
  for (size_t size = 256; size <= 64 * expanded.size() + 256; size *= 4) {
    std::vector<char> buffer(size);
    size_t length = std::strftime(buffer.data(), buffer.size(), expanded.c_str(), &local);
    if (length)
      return std::string(buffer.data(), length);
  }
  return "";
}

void Renderer::defineGlobals(Scope &globals) {
  globals.vars["range"] = makeFunction("range", [](Renderer &, const CallArgs &args) {
    if (!args.keywords.empty() || args.positional.empty() || args.positional.size() > 3)
      raise("range expected 1 to 3 integer arguments");
    for (const Value &arg : args.positional)
      if (!arg.isIntegral())
        raise(singleQuoted(typeName(arg)) + " object cannot be interpreted as an integer");
    int64_t start = 0, stop, step = 1;
    if (args.positional.size() == 1) {
      stop = args.positional[0].asInt();
    } else {
      start = args.positional[0].asInt();
      stop = args.positional[1].asInt();
      if (args.positional.size() == 3)
        step = args.positional[2].asInt();
    }
    if (step == 0)
      raise("range() arg 3 must not be zero");
    // The count in 128 bits: the bounds may be far apart.
    __int128 span = step > 0 ? __int128(stop) - start : __int128(start) - stop;
    __int128 stepSize = step > 0 ? __int128(step) : -__int128(step);
    __int128 count = span <= 0 ? 0 : (span + stepSize - 1) / stepSize;
    if (count > kMaxRange)
      raise("Range too big. The sandbox blocks ranges larger than MAX_RANGE (" +
            std::to_string(kMaxRange) + ").");
    std::vector<Value> items;
    for (int64_t i = 0; i < static_cast<int64_t>(count); ++i)
      items.push_back(Value::integer(start + i * step));
    return Value::list(std::move(items));
  });
  globals.vars["dict"] = makeFunction("dict", [](Renderer &r, const CallArgs &args) {
    return Value::dict(dictFromArgs(r, args, "dict"));
  });
  globals.vars["namespace"] = makeFunction("namespace", [](Renderer &r, const CallArgs &args) {
    std::shared_ptr<Namespace> ns = r.newNamespace();
    for (auto &[key, value] : dictFromArgs(r, args, "namespace").entries)
      ns->set(toStr(key), value);
    return Value::object(ns);
  });
  globals.vars["raise_exception"] =
      makeFunction("raise_exception", [](Renderer &, const CallArgs &args) -> Value {
        Bound b = bindArgs(args, {"message"}, "raise_exception");
        raise("the template raised: " + (b[0] ? toStr(*b[0]) : std::string()));
      });
  globals.vars["strftime_now"] = makeFunction("strftime_now", [](Renderer &, const CallArgs &args) {
    Bound b = bindArgs(args, {"format"}, "strftime_now");
    if (!b[0] || !b[0]->isString())
      raise("strftime_now() needs a format string");
    if (b[0]->str().size() > 4096)
      raise("strftime_now() format longer than 4096 bytes");
    return Value::string(strftimeNow(b[0]->str()));
  });
  globals.vars["joiner"] = makeFunction("joiner", [](Renderer &, const CallArgs &args) {
    Bound b = bindArgs(args, {"sep"}, "joiner");
    return Value::object(std::make_shared<Joiner>(b[0] ? toStr(*b[0]) : ", "));
  });
  globals.vars["cycler"] = makeFunction("cycler", [](Renderer &, const CallArgs &args) {
    if (args.positional.empty())
      raise("cycler() needs at least one item");
    return Value::object(std::make_shared<Cycler>(args.positional));
  });
}

} // namespace

//===----------------------------------------------------------------------===//
// ChatTemplate
//===----------------------------------------------------------------------===//

ChatTemplate::ChatTemplate(const std::string &source, const std::string &where) : where(where) {
  try {
    for (size_t i = 0; i < source.size(); i += utf8Length(source, i))
      if (!utf8Length(source, i))
        raiseAt(1 + static_cast<int>(std::count(source.begin(), source.begin() + i, '\n')),
                "the template is not valid UTF-8");
    Lexer lexer(source);
    std::vector<Token> tokens;
    try {
      tokens = lexer.tokenize();
    } catch (TemplateError &error) {
      if (!error.line)
        error.line = lexer.currentLine();
      throw;
    }
    Parser parser(std::move(tokens));
    try {
      program = std::make_unique<Program>();
      program->body = parser.parseTemplate();
    } catch (TemplateError &error) {
      if (!error.line)
        error.line = parser.currentLine();
      throw;
    }
  } catch (const TemplateError &error) {
    fail(where + ": line " + std::to_string(error.line) + ": " + error.message);
  }
}

ChatTemplate::~ChatTemplate() = default;

std::string ChatTemplate::render(const OrderedJson &context) const {
  Renderer renderer(*program);
  try {
    return renderer.run(context);
  } catch (const TemplateError &error) {
    fail(where + ": line " + std::to_string(error.line ? error.line : renderer.line) + ": " +
         error.message);
  }
}
