//===- CommandLine.cpp - flags, threads and errors of the mains -----------===//

#include "CommandLine.h"

#include "Server/Server.h"

#include <csignal>
#include <pthread.h>

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

const char *const xfmr::rt::kServerHelp =
    "  --serve               serve OpenAI's API over HTTP until SIGTERM (generators:\n"
    "                        /v1/completions and /v1/chat/completions, batching requests\n"
    "                        continuously; sentence-transformers encoders: /v1/embeddings;\n"
    "                        both: /v1/models, /health, /metrics)\n"
    "  --host HOST           address to listen on (default 127.0.0.1)\n"
    "  --port N              port (default 8080; 0: any free one, printed)\n"
    "  --api-key KEY         require 'Authorization: Bearer KEY'\n"
    "  --parallel N          requests generated at once (default: the compiled\n"
    "                        --batch, at most that)\n"
    "  --queue N             requests waiting for a slot before 429 (default 64, at\n"
    "                        most 1024)\n";

bool xfmr::rt::parseServerFlag(int argc, char **argv, int &i, bool &serve, ServerOptions &options) {
  std::string arg = argv[i], v;
  if (arg == "--serve") {
    serve = true;
  } else if (flagValue(argc, argv, i, "--host", v)) {
    options.host = v;
  } else if (flagValue(argc, argv, i, "--port", v)) {
    options.port = static_cast<int>(parseCount("--port", v, 65535));
  } else if (flagValue(argc, argv, i, "--api-key", v)) {
    if (v.empty())
      fail("flag --api-key needs a non-empty key");
    options.apiKey = v;
  } else if (flagValue(argc, argv, i, "--parallel", v)) {
    options.parallel = parseCount("--parallel", v, 1 << 16);
    if (options.parallel < 1)
      fail("flag --parallel needs at least 1 slot, got " + v);
  } else if (flagValue(argc, argv, i, "--queue", v)) {
    options.queue = parseCount("--queue", v, 1024);
  } else {
    return false;
  }
  return true;
}

void xfmr::rt::blockTerminationSignals() {
  sigset_t signals;
  sigemptyset(&signals);
  sigaddset(&signals, SIGTERM);
  sigaddset(&signals, SIGINT);
  pthread_sigmask(SIG_BLOCK, &signals, nullptr);
}

std::string xfmr::rt::servedModelName(const std::string &weights, const Manifest &manifest,
                                      const char *argv0) {
  std::string source = weights.empty() ? manifest.defaultWeights : weights;
  while (source.size() > 1 && source.back() == '/')
    source.pop_back();
  std::string name = source.substr(source.find_last_of('/') + 1);
  if (name.empty())
    name = std::string(argv0).substr(std::string(argv0).find_last_of('/') + 1);
  return name;
}

ServeFunction &xfmr::rt::serveHook() {
  static ServeFunction hook = nullptr;
  return hook;
}

int xfmr::rt::runServer(ServedModel &model, const ServerOptions &options) {
  if (!serveHook())
    fail("--serve: this executable was linked without the server (libxfmr_server.a)");
  return serveHook()(model, options);
}
