//===- Server.h - the OpenAI-compatible HTTP server -------------*- C++ -*-===//
//
// `--serve` on a compiled generator: /v1/completions, /v1/chat/completions
// (whole or streamed as server-sent events) over an Engine whose batch rows
// are the slots requests are continuously batched into; on a compiled
// sentence-transformers encoder, /v1/embeddings; on both, /v1/models,
// /health and /metrics. The server lives in libxfmr_server.a (it needs
// cpp-httplib); the runtime reaches it through serveHook(), which
// xfmr_enable_server() sets, as SentencePiece is reached.
//
//===----------------------------------------------------------------------===//

#ifndef XFMR_LIB_RUNTIME_SERVER_SERVER_H
#define XFMR_LIB_RUNTIME_SERVER_SERVER_H

#include "Chat.h"
#include "Embedder.h"
#include "Generator.h"
#include "Tokenizers/Tokenizer.h"

#include <string>

namespace xfmr::rt {

struct ServerOptions {
  std::string host = "127.0.0.1";
  int port = 8080; // 0: any free port (printed)
  std::string apiKey;
  int64_t parallel = 0; // slots; 0: the compiled batch
  int64_t queue = 64;   // requests waiting for a slot before 429
  size_t maxBodyBytes = 1 << 20;
  int threads = 0; // the model's OpenMP threads (0: OMP_NUM_THREADS or all cores)
};

/// Whether argv[i] is a flag of the server (--serve, --host, --port,
/// --api-key, --parallel, --queue); takes its value if so.
bool parseServerFlag(int argc, char **argv, int &i, bool &serve, ServerOptions &options);

/// The --serve lines of an executable's --help.
extern const char *const kServerHelp;

/// What a server serves: a generator, or an embedder.
struct ServedModel {
  std::string name;
  const Tokenizer &tokenizer;
  xfmr_generator *generator = nullptr;
  const ChatFormat *chat = nullptr; // null: no /v1/chat/completions
  Embedder *embedder = nullptr;
};

/// Blocks SIGTERM and SIGINT in this thread and those it starts from now on
/// (OpenMP's): a server waits for them on a thread of its own. To be called
/// before the first parallel region.
void blockTerminationSignals();

/// What /v1/models calls the model: its checkpoint's (or weights file's)
/// name, else the executable's.
std::string servedModelName(const std::string &weights, const Manifest &manifest,
                            const char *argv0);

/// Serves `model` until SIGTERM or SIGINT, then drains the requests
/// running; fails if the executable was linked without libxfmr_server.a.
int runServer(ServedModel &model, const ServerOptions &options);

using ServeFunction = int (*)(ServedModel &model, const ServerOptions &options);
/// Set by xfmr_enable_server() (libxfmr_server.a); null without it.
ServeFunction &serveHook();

} // namespace xfmr::rt

#endif // XFMR_LIB_RUNTIME_SERVER_SERVER_H
