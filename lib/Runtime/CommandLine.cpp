//===- CommandLine.cpp - flags, threads and errors of the mains -----------===//

#include "CommandLine.h"

#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <sstream>
#include <malloc.h>

extern "C" void omp_set_num_threads(int) __attribute__((weak));

using namespace xfmr::rt;

void xfmr::rt::fail(const std::string &message) { throw Failure(message); }

bool xfmr::rt::flagValue(int argc, char **argv, int &i, const char *flag, std::string &value) {
  std::string arg = argv[i];
  std::string prefix = std::string(flag) + "=";
  if (arg.rfind(prefix, 0) == 0) {
    value = arg.substr(prefix.size());
    return true;
  }
  if (arg != flag)
    return false;
  if (i + 1 >= argc)
    fail(std::string("flag ") + flag + " needs a value");
  value = argv[++i];
  return true;
}

int64_t xfmr::rt::parseCount(const char *flag, const std::string &text, int64_t max) {
  char *end = nullptr;
  errno = 0;
  long long parsed = std::strtoll(text.c_str(), &end, 10);
  if (text.empty() || *end || errno == ERANGE || parsed < 0 || parsed > max)
    fail(std::string("flag ") + flag + " needs an integer in [0, " + std::to_string(max) +
         "], got '" + text + "'");
  return parsed;
}

std::string xfmr::rt::readFileText(const std::string &path, const std::string &what) {
  std::ifstream in(path, std::ios::binary);
  if (!in)
    fail("cannot read " + what + " '" + path + "': " + std::strerror(errno));
  std::stringstream text;
  text << in.rdbuf();
  return text.str();
}

bool xfmr::rt::wantsHelp(int argc, char **argv) {
  for (int i = 1; i < argc; ++i)
    if (!std::strcmp(argv[i], "--help") || !std::strcmp(argv[i], "-h"))
      return true;
  return false;
}

void xfmr::rt::setThreads(int threads) {
  if (threads > 0 && omp_set_num_threads)
    omp_set_num_threads(threads);
}

int xfmr::rt::runCommandLine(const char *argv0, const std::function<int()> &body) {
  // Models allocate their intermediate tensors on every call. Served by
  // mmap, each would cost fresh zeroed pages per call; kept in the heap they
  // are reused.
  mallopt(M_MMAP_THRESHOLD, 1 << 30);
  mallopt(M_TRIM_THRESHOLD, 1 << 30);
  try {
    return body();
  } catch (const Failure &failure) {
    std::fprintf(stderr, "%s: error: %s\n", argv0, failure.message.c_str());
    return 1;
  }
}
