//===- Server.h - the OpenAI-compatible HTTP server -------------*- C++ -*-===//
//
// `--serve` on a compiled generator: /v1/completions, /v1/chat/completions
// (whole or streamed as server-sent events), /v1/models, /health and
// /metrics, over an Engine whose batch rows are the slots requests are
// continuously batched into. The server lives in libxfmr_server.a (it needs
// cpp-httplib); the runtime reaches it through serveHook(), which
// xfmr_generator_enable_server() sets, as SentencePiece is reached.
//
//===----------------------------------------------------------------------===//

#ifndef XFMR_LIB_RUNTIME_SERVER_SERVER_H
#define XFMR_LIB_RUNTIME_SERVER_SERVER_H

#include "../Chat.h"
#include "../Generator.h"
#include "../Tokenizer.h"

#include <csignal>
#include <string>

namespace xfmr::rt {

struct ServerOptions {
  std::string host = "127.0.0.1";
  int port = 8080; // 0: any free port (printed)
  std::string apiKey;
  int64_t parallel = 0; // slots; 0: the compiled batch
  int64_t queue = 64;   // requests waiting for a slot before 429
  size_t maxBodyBytes = 1 << 20;
};

/// What a server serves.
struct ServedModel {
  xfmr_generator &generator;
  const Tokenizer &tokenizer;
  const ChatFormat *chat; // null: no /v1/chat/completions
  std::string name;
};

/// SIGTERM and SIGINT, which a server's threads block and one waits for.
const sigset_t &terminationSignals();

using ServeFunction = int (*)(ServedModel &model, const ServerOptions &options);
/// Runs the server until SIGTERM or SIGINT, then drains the requests
/// running; null unless libxfmr_server.a is linked and enabled.
ServeFunction &serveHook();

} // namespace xfmr::rt

#endif // XFMR_LIB_RUNTIME_SERVER_SERVER_H
