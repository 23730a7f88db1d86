//===- CommandLine.h - what the mains share ---------------------*- C++ -*-===//
//
// The mains' errors (a Failure, reported as one line), flags, thread count
// and heap settings.
//
//===----------------------------------------------------------------------===//

#ifndef XFMR_LIB_RUNTIME_COMMANDLINE_H
#define XFMR_LIB_RUNTIME_COMMANDLINE_H

#include <cstdint>
#include <functional>
#include <string>

namespace xfmr::rt {

/// Reported as `<argv0>: error: <message>` and exit code 1.
class Failure {
public:
  explicit Failure(std::string message) : message(std::move(message)) {}
  std::string message;
};

[[noreturn]] void fail(const std::string &message);

/// Parses `--flag=value` / `--flag value` at argv[i]; advances i past a
/// separate value.
bool flagValue(int argc, char **argv, int &i, const char *flag, std::string &value);

/// A non-negative integer flag value no larger than `max`.
int64_t parseCount(const char *flag, const std::string &text, int64_t max = int64_t(1) << 40);

/// The bytes of the file at `path`; a Failure "cannot read WHAT 'PATH': why"
/// if it cannot be read.
std::string readFileText(const std::string &path, const std::string &what);

/// Whether the command line asks for --help (or -h).
bool wantsHelp(int argc, char **argv);

/// Sets the OpenMP thread count; 0 keeps the default.
void setThreads(int threads);

/// Runs `body` as a program's main: with the heap tuned for per-call
/// temporaries, and a Failure reported as `argv0: error: ...`, exit code 1.
int runCommandLine(const char *argv0, const std::function<int()> &body);

} // namespace xfmr::rt

#endif // XFMR_LIB_RUNTIME_COMMANDLINE_H
