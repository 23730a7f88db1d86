//===- Server.cpp - the OpenAI-compatible HTTP server ---------------------===//
//
// HTTP handlers run on cpp-httplib's thread pool; one compute thread runs
// the model (steps the Engine, or an encoder's embedding batches). A
// completion becomes n Generations whose callbacks (on the compute thread)
// queue server-sent events for the handler's thread, or mark the request
// complete for a whole response.
//
//===----------------------------------------------------------------------===//

#include "Server.h"

#include "ApiRequests.h"
#include "CommandLine.h"
#include "Engine.h"
#include "Json.h"

#include "xfmr-rt/xfmr_runtime.h"

#include <httplib.h>

#include <chrono>
#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <dirent.h>
#include <functional>
#include <future>
#include <map>
#include <netdb.h>
#include <optional>
#include <poll.h>
#include <pthread.h>
#include <random>
#include <set>
#include <sys/socket.h>
#include <thread>

using namespace xfmr::rt;
using nlohmann::json;

namespace {

/// Compares without stopping at the first difference, so that the time
/// taken does not tell how much of a guess was right.
bool sameSecret(const std::string &given, const std::string &secret) {
  unsigned char difference = given.size() != secret.size();
  for (size_t i = 0; i < given.size(); ++i)
    difference |= static_cast<unsigned char>(given[i] ^ secret[i % (secret.size() + 1)]);
  return difference == 0;
}

/// The numeric host and port of a socket address, as cpp-httplib writes a
/// request's.
std::optional<std::pair<std::string, int>> numericAddress(const sockaddr_storage &address,
                                                          socklen_t size) {
  char host[NI_MAXHOST], service[NI_MAXSERV];
  if (getnameinfo(reinterpret_cast<const sockaddr *>(&address), size, host, sizeof(host), service,
                  sizeof(service), NI_NUMERICHOST | NI_NUMERICSERV) != 0)
    return std::nullopt;
  return std::pair(std::string(host), std::atoi(service));
}

/// The descriptor of the connection `req` came on, or -1. cpp-httplib 0.11
/// gives a handler no way to see its client leave; the connection is the
/// socket of this process with the request's two addresses, and it stays
/// open while the handler runs. (A scan of the process's descriptors, a few
/// hundred at most: microseconds beside a generation.)
int connectionSocket(const httplib::Request &req) {
  DIR *fds = opendir("/proc/self/fd");
  if (!fds)
    return -1;
  int found = -1;
  while (dirent *entry = readdir(fds)) {
    char *end = nullptr;
    long fd = std::strtol(entry->d_name, &end, 10);
    if (*end || end == entry->d_name)
      continue;
    sockaddr_storage peer{}, local{};
    socklen_t peerSize = sizeof(peer), localSize = sizeof(local);
    if (getpeername(fd, reinterpret_cast<sockaddr *>(&peer), &peerSize) != 0 ||
        getsockname(fd, reinterpret_cast<sockaddr *>(&local), &localSize) != 0)
      continue;
    if (numericAddress(peer, peerSize) == std::pair(req.remote_addr, req.remote_port) &&
        numericAddress(local, localSize) == std::pair(req.local_addr, req.local_port)) {
      found = static_cast<int>(fd);
      break;
    }
  }
  closedir(fds);
  return found;
}

/// Whether the client of `connection` has closed (or shut down) its side.
/// A client that shuts its side down after its request, which HTTP allows,
/// counts as gone: OpenAI's clients and browsers do not, and a reply it
/// still reads costs a whole generation.
bool clientGone(int connection) {
  pollfd entry{connection, POLLRDHUP, 0};
  return poll(&entry, 1, 0) > 0 && (entry.revents & (POLLRDHUP | POLLHUP | POLLERR));
}

/// OpenAI's finish_reason ("error": a failed model call), or "cancelled",
/// or "" while running.
const char *finishReasonName(FinishReason reason) {
  switch (reason) {
  case FinishReason::Running:
    return "";
  case FinishReason::EndToken:
  case FinishReason::Stop:
    return "stop";
  case FinishReason::Length:
  case FinishReason::ContextFull:
    return "length";
  case FinishReason::Cancelled:
    return "cancelled";
  case FinishReason::Failed:
    return "error";
  }
  return "";
}

/// OpenAI's finish_reason: none for a running or cancelled choice.
json finishReason(FinishReason reason) {
  std::string name = finishReasonName(reason);
  return name.empty() || name == "cancelled" ? json(nullptr) : json(name);
}

/// Counters and sums for /metrics.
class Metrics {
public:
  void request(const std::string &path, int status) {
    std::lock_guard<std::mutex> lock(mutex);
    ++requests[{path, status}];
  }
  void generation(const Generation &g) {
    std::lock_guard<std::mutex> lock(mutex);
    promptTokens += g.prompt.size();
    generatedTokens += g.generated.size();
    ++finishes[finishReasonName(g.finish)];
    if (g.promptRead >= g.submitted) {
      firstTokenSeconds += std::chrono::duration<double>(g.promptRead - g.submitted).count();
      ++firstTokens;
    }
    generationSeconds += std::chrono::duration<double>(g.finished - g.submitted).count();
    ++generations;
  }
  void embedded(size_t tokens) {
    std::lock_guard<std::mutex> lock(mutex);
    promptTokens += tokens;
  }
  std::string text(const Engine *engine) const {
    std::lock_guard<std::mutex> lock(mutex);
    std::string out = "# TYPE xfmr_requests_total counter\n";
    for (const auto &[key, count] : requests)
      out += "xfmr_requests_total{path=\"" + key.first + "\",status=\"" +
             std::to_string(key.second) + "\"} " + std::to_string(count) + "\n";
    auto line = [&](const char *name, const char *type, uint64_t value) {
      out += std::string("# TYPE ") + name + " " + type + "\n" + name + " " +
             std::to_string(value) + "\n";
    };
    out += "# TYPE xfmr_generations_total counter\n";
    for (const auto &[reason, count] : finishes)
      out += "xfmr_generations_total{finish_reason=\"" + reason + "\"} " + std::to_string(count) +
             "\n";
    line("xfmr_prompt_tokens_total", "counter", promptTokens);
    line("xfmr_generated_tokens_total", "counter", generatedTokens);
    if (engine) {
      line("xfmr_queue_length", "gauge", engine->queued());
      line("xfmr_slots", "gauge", engine->slots());
      line("xfmr_slots_busy", "gauge", engine->busy());
    }
    out += "# TYPE xfmr_time_to_first_token_seconds summary\n"
           "xfmr_time_to_first_token_seconds_sum " +
           json(firstTokenSeconds).dump() + "\nxfmr_time_to_first_token_seconds_count " +
           std::to_string(firstTokens) + "\n";
    out += "# TYPE xfmr_generation_seconds summary\nxfmr_generation_seconds_sum " +
           json(generationSeconds).dump() + "\nxfmr_generation_seconds_count " +
           std::to_string(generations) + "\n";
    return out;
  }

private:
  mutable std::mutex mutex;
  std::map<std::pair<std::string, int>, uint64_t> requests;
  std::map<std::string, uint64_t> finishes;
  uint64_t promptTokens = 0, generatedTokens = 0, firstTokens = 0, generations = 0;
  double firstTokenSeconds = 0, generationSeconds = 0;
};

/// One completion request in flight: its choices and, when streamed, the
/// events not yet written.
struct Exchange {
  CompletionRequest request;
  std::string id, model;
  int64_t created = 0;
  std::vector<int32_t> prompt;
  std::vector<std::shared_ptr<Generation>> choices;
  std::mutex mutex;
  std::condition_variable changed;
  /// Each choice's tokens (with logprobs asked for), and how many of them
  /// and of its text's bytes were streamed.
  std::vector<std::vector<GeneratedToken>> tokens;
  std::vector<size_t> tokensSent, textSent;
  std::deque<std::string> events;
  size_t unfinished = 0;

  void cancel() {
    for (auto &g : choices)
      g->cancelled = true;
  }
};

/// Counts a request from its start to the end of its response (a stream's
/// last byte), so that a shutdown waits for it.
struct InFlight {
  explicit InFlight(std::atomic<int> &count) : count(count) { ++count; }
  ~InFlight() { --count; }
  std::atomic<int> &count;
};

/// How many bytes at the end of `text` could begin a stop text, and so are
/// held back from a stream until the next token tells.
size_t stopPrefixLength(const std::string &text, const std::vector<std::string> &stops) {
  size_t held = 0;
  for (const std::string &stop : stops)
    for (size_t k = std::min(stop.size() - 1, text.size()); k > held; --k)
      if (text.compare(text.size() - k, k, stop, 0, k) == 0) {
        held = k;
        break;
      }
  return held;
}

/// The generated text a client sees: up to the stop text.
std::string visibleText(const Generation &g) {
  return g.text.substr(0, std::min(g.stopAt, g.text.size()));
}

class Server {
public:
  Server(ServedModel &model, const ServerOptions &options) : model(model), options(options) {
    if (model.generator)
      engine = std::make_unique<Engine>(*model.generator, &model.tokenizer, options.parallel);
  }

  int run();

private:
  void route();
  bool authorized(const httplib::Request &req, httplib::Response &res);
  void complete(const httplib::Request &req, httplib::Response &res, bool chat);
  void embed(const httplib::Request &req, httplib::Response &res);
  bool idle() const;
  std::shared_ptr<Exchange> start(const httplib::Request &req, bool chat);
  std::vector<int32_t> promptOf(const CompletionRequest &request) const;
  /// Queues choice i's next server-sent event (x.mutex held).
  void queueChunk(Exchange &x, size_t i, bool finished);
  json logprobsOf(const Exchange &x, const std::vector<GeneratedToken> &tokens,
                  size_t offset) const;
  json usage(const Exchange &x) const;
  json envelope(const Exchange &x, const char *object) const;
  void stream(const std::shared_ptr<Exchange> &x, httplib::Response &res,
              std::shared_ptr<InFlight> counted);
  std::string tokenText(int32_t id) const { return model.tokenizer.decode({id}); }

  /// Runs `task` on the compute thread and waits for it (an embedder's
  /// batches: the model runs on one thread, with one OpenMP team).
  void compute(const std::function<void()> &task);
  /// The compute thread: steps the engine, or runs the tasks given.
  void computeLoop(const std::atomic<bool> &stopped);

  ServedModel &model;
  ServerOptions options;
  std::unique_ptr<Engine> engine; // a generator's
  httplib::Server http;
  Metrics metrics;
  std::atomic<bool> draining{false};
  std::atomic<int> inFlight{0};
  std::mutex taskMutex;
  std::condition_variable taskReady;
  std::deque<std::packaged_task<void()>> tasks;
  std::atomic<uint64_t> nextId{0};
};

void sendError(httplib::Response &res, const ApiError &e) {
  res.status = e.status;
  res.set_content(dumpJson(e.body()), "application/json");
}

bool Server::authorized(const httplib::Request &req, httplib::Response &res) {
  if (options.apiKey.empty())
    return true;
  std::string header = req.get_header_value("Authorization");
  const std::string bearer = "Bearer ";
  if (header.compare(0, bearer.size(), bearer) == 0 &&
      sameSecret(header.substr(bearer.size()), options.apiKey))
    return true;
  sendError(res, {401, "invalid or missing API key (Authorization: Bearer KEY)", "",
                  "authentication_error"});
  return false;
}

std::vector<int32_t> Server::promptOf(const CompletionRequest &request) const {
  const char *param = request.chat ? "messages" : "prompt";
  std::vector<int32_t> ids;
  try {
    if (request.chat) {
      if (!model.chat)
        throw ApiError{400, "the model has no chat template: use /v1/completions", param};
      OrderedJson context = {{"messages", request.messages}, {"add_generation_prompt", true}};
      ids = model.tokenizer.encode(model.chat->render(std::move(context)), "the chat",
                                   /*addSpecialTokens=*/false);
    } else if (request.promptIsIds) {
      ids = request.promptIds;
      for (int32_t id : ids)
        if (id >= model.generator->vocab)
          throw ApiError{400, "token id " + std::to_string(id) + " is outside the vocabulary",
                         param};
    } else {
      ids = model.tokenizer.encode(request.prompt, "the prompt");
    }
  } catch (const Failure &failure) {
    throw ApiError{400, failure.message, param};
  }
  if (ids.empty())
    throw ApiError{400, "the prompt has no tokens", param};
  int64_t context = model.generator->context;
  if (static_cast<int64_t>(ids.size()) >= context)
    throw ApiError{400,
                   "the prompt has " + std::to_string(ids.size()) +
                       " tokens; the model's context holds " + std::to_string(context) +
                       " with room for one generated token",
                   param, "context_length_exceeded"};
  return ids;
}

std::shared_ptr<Exchange> Server::start(const httplib::Request &req, bool chat) {
  if (draining)
    throw ApiError{503, "the server is shutting down", "", "server_error"};
  auto x = std::make_shared<Exchange>();
  x->request = parseCompletionRequest(req.body, chat);
  x->prompt = promptOf(x->request);
  GenerationSettings settings = x->request.settings;
  int64_t room = model.generator->context - static_cast<int64_t>(x->prompt.size());
  if (x->request.maxTokensGiven && settings.maxTokens > room)
    throw ApiError{400,
                   "max_tokens " + std::to_string(settings.maxTokens) + " and the prompt's " +
                       std::to_string(x->prompt.size()) + " tokens exceed the context of " +
                       std::to_string(model.generator->context),
                   "max_tokens", "context_length_exceeded"};
  settings.maxTokens = std::min(settings.maxTokens, room);
  if (!x->request.seeded)
    settings.seed = std::random_device{}() | (uint64_t(std::random_device{}()) << 32);
  size_t free = static_cast<size_t>(engine->slots()) - engine->busy();
  if (engine->queued() + x->request.n > static_cast<size_t>(options.queue) + free)
    throw ApiError{429, "too many requests are waiting: try again later", "", "rate_limit_error"};
  size_t n = static_cast<size_t>(x->request.n);
  x->id = std::string(chat ? "chatcmpl-" : "cmpl-") + std::to_string(++nextId);
  x->model = model.name;
  x->created = std::chrono::duration_cast<std::chrono::seconds>(
                   std::chrono::system_clock::now().time_since_epoch())
                   .count();
  x->unfinished = n;
  x->tokens.resize(n);
  x->tokensSent.assign(n, 0);
  x->textSent.assign(n, 0);
  std::weak_ptr<Exchange> weak = x;
  for (size_t i = 0; i < n; ++i) {
    auto g = std::make_shared<Generation>();
    g->prompt = x->prompt;
    g->settings = settings;
    g->settings.seed = settings.seed + i;
    g->onToken = [this, weak, i](const GeneratedToken &token) {
      auto x = weak.lock();
      if (!x)
        return;
      std::lock_guard<std::mutex> lock(x->mutex);
      if (x->request.logprobs)
        x->tokens[i].push_back(token);
      if (x->request.stream)
        queueChunk(*x, i, false);
    };
    // The engine holds the generation while it calls back; the exchange
    // may be gone (its client left).
    g->onFinish = [this, weak, i, generation = g.get()](const std::string &) {
      metrics.generation(*generation);
      auto x = weak.lock();
      if (!x)
        return;
      std::lock_guard<std::mutex> lock(x->mutex);
      if (x->request.stream && x->choices[i]->finish != FinishReason::Cancelled)
        queueChunk(*x, i, true);
      if (--x->unfinished == 0 && x->request.stream) {
        if (x->request.includeUsage) {
          json last = envelope(*x, x->request.chat ? "chat.completion.chunk" : "text_completion");
          last["choices"] = json::array();
          last["usage"] = usage(*x);
          x->events.push_back("data: " + dumpJson(last) + "\n\n");
        }
        x->events.push_back("data: [DONE]\n\n");
      }
      x->changed.notify_all();
    };
    x->choices.push_back(std::move(g));
  }
  if (x->request.stream && chat)
    for (size_t i = 0; i < n; ++i) {
      json first = envelope(*x, "chat.completion.chunk");
      first["choices"] = json::array({{{"index", i},
                                       {"delta", {{"role", "assistant"}, {"content", ""}}},
                                       {"logprobs", nullptr},
                                       {"finish_reason", nullptr}}});
      x->events.push_back("data: " + dumpJson(first) + "\n\n");
    }
  try {
    for (auto &g : x->choices)
      engine->submit(g);
  } catch (const Failure &failure) {
    x->cancel();
    throw ApiError{400, failure.message, chat ? "messages" : "prompt"};
  }
  return x;
}

json Server::envelope(const Exchange &x, const char *object) const {
  json body = {{"id", x.id}, {"object", object}, {"created", x.created}, {"model", x.model}};
  if (x.request.includeUsage)
    body["usage"] = nullptr;
  return body;
}

void Server::queueChunk(Exchange &x, size_t i, bool finished) {
  const Generation &g = *x.choices[i];
  size_t end = g.stopAt != std::string::npos ? g.stopAt
               : finished                    ? g.text.size()
                          : g.text.size() - stopPrefixLength(g.text, g.settings.stops);
  size_t from = std::min(x.textSent[i], end);
  std::string text = g.text.substr(from, end - from);
  std::vector<GeneratedToken> tokens(x.tokens[i].begin() + x.tokensSent[i], x.tokens[i].end());
  if (text.empty() && tokens.empty() && !finished)
    return;
  json choice = {{"index", i},
                 {"logprobs", x.request.logprobs && !tokens.empty() ? logprobsOf(x, tokens, from)
                                                                    : json(nullptr)},
                 {"finish_reason", finished ? json(finishReason(g.finish)) : json(nullptr)}};
  if (x.request.chat)
    choice["delta"] = text.empty() ? json::object() : json{{"content", text}};
  else
    choice["text"] = text;
  json body = envelope(x, x.request.chat ? "chat.completion.chunk" : "text_completion");
  body["choices"] = json::array({choice});
  x.events.push_back("data: " + dumpJson(body) + "\n\n");
  x.textSent[i] = end;
  x.tokensSent[i] = x.tokens[i].size();
  x.changed.notify_all();
}

json Server::usage(const Exchange &x) const {
  size_t generated = 0;
  for (const auto &g : x.choices)
    generated += g->generated.size();
  return {{"prompt_tokens", x.prompt.size()},
          {"completion_tokens", generated},
          {"total_tokens", x.prompt.size() + generated}};
}

/// Logprobs of `tokens` in the endpoint's format; `offset`: the length of
/// the text before the first (completions' text_offset).
json Server::logprobsOf(const Exchange &x, const std::vector<GeneratedToken> &tokens,
                        size_t offset) const {
  auto bytes = [](const std::string &text) {
    json out = json::array();
    for (unsigned char c : text)
      out.push_back(c);
    return out;
  };
  if (x.request.chat) {
    json content = json::array();
    for (const GeneratedToken &t : tokens) {
      json top = json::array();
      for (auto [id, logprob] : t.top)
        top.push_back(
            {{"token", tokenText(id)}, {"logprob", logprob}, {"bytes", bytes(tokenText(id))}});
      content.push_back({{"token", tokenText(t.id)},
                         {"logprob", t.logprob},
                         {"bytes", bytes(tokenText(t.id))},
                         {"top_logprobs", top}});
    }
    return {{"content", content}};
  }
  json texts = json::array(), logprobs = json::array(), tops = json::array(),
       offsets = json::array();
  for (const GeneratedToken &t : tokens) {
    std::string text = tokenText(t.id);
    texts.push_back(text);
    logprobs.push_back(t.logprob);
    json top = json::object();
    for (auto [id, logprob] : t.top)
      top[tokenText(id)] = logprob;
    tops.push_back(top);
    offsets.push_back(offset);
    offset += text.size();
  }
  return {{"tokens", texts},
          {"token_logprobs", logprobs},
          {"top_logprobs", tops},
          {"text_offset", offsets}};
}

void Server::stream(const std::shared_ptr<Exchange> &x, httplib::Response &res,
                    std::shared_ptr<InFlight> counted) {
  res.set_header("Cache-Control", "no-cache");
  res.set_chunked_content_provider(
      "text/event-stream",
      [x](size_t, httplib::DataSink &sink) {
        std::unique_lock<std::mutex> lock(x->mutex);
        bool ready = x->changed.wait_for(lock, std::chrono::milliseconds(200), [&] {
          return !x->events.empty() || x->unfinished == 0;
        });
        // A comment while nothing comes (queued, or reading a long prompt):
        // writing it is how a client that went away is noticed.
        if (!ready) {
          lock.unlock();
          return sink.write(": \n\n", 4);
        }
        while (!x->events.empty()) {
          std::string event = std::move(x->events.front());
          x->events.pop_front();
          lock.unlock();
          if (!sink.write(event.data(), event.size()))
            return false;
          lock.lock();
        }
        if (x->unfinished == 0) {
          lock.unlock();
          sink.done();
          return true;
        }
        return sink.is_writable();
      },
      // A client gone before the end frees its slots.
      [x, counted](bool success) {
        if (!success)
          x->cancel();
      });
}

void Server::complete(const httplib::Request &req, httplib::Response &res, bool chat) {
  auto counted = std::make_shared<InFlight>(inFlight);
  // A client gone before its response is not served, or stops being served
  // (its slots and queue places freed); 499 is nginx's "client closed
  // request", for the log and /metrics.
  int connection = connectionSocket(req);
  auto gone = [&] { return connection >= 0 && clientGone(connection); };
  if (gone()) {
    res.status = 499;
    return;
  }
  std::shared_ptr<Exchange> x;
  try {
    x = start(req, chat);
  } catch (const ApiError &e) {
    return sendError(res, e);
  }
  if (x->request.stream)
    return stream(x, res, std::move(counted));
  std::unique_lock<std::mutex> lock(x->mutex);
  auto done = [&] { return x->unfinished == 0; };
  while (!done()) {
    if (gone()) {
      x->cancel();
      res.status = 499;
      return;
    }
    x->changed.wait_for(lock, std::chrono::milliseconds(100), done);
  }
  for (const auto &g : x->choices)
    if (g->finish == FinishReason::Failed)
      return sendError(res, {500, "the model failed (see the server's log)", "", "server_error"});
  json choices = json::array();
  for (size_t i = 0; i < x->choices.size(); ++i) {
    const Generation &g = *x->choices[i];
    json choice = {
        {"index", i},
        {"logprobs", x->request.logprobs ? logprobsOf(*x, x->tokens[i], 0) : json(nullptr)},
        {"finish_reason", finishReason(g.finish)}};
    if (chat)
      choice["message"] = {{"role", "assistant"}, {"content", visibleText(g)}};
    else
      choice["text"] = visibleText(g);
    choices.push_back(std::move(choice));
  }
  json body = envelope(*x, chat ? "chat.completion" : "text_completion");
  body.erase("usage");
  body["choices"] = std::move(choices);
  body["usage"] = usage(*x);
  res.set_content(dumpJson(body), "application/json");
}

void Server::route() {
  http.set_payload_max_length(options.maxBodyBytes);
  // Every request holds a worker while it runs: one per slot and queued
  // request, and a few for /health and /metrics.
  size_t workers =
      std::min<size_t>(256, static_cast<size_t>((engine ? engine->slots() : 1) + options.queue + 4));
  http.new_task_queue = [workers] { return new httplib::ThreadPool(workers); };
  http.set_logger([this](const httplib::Request &req, const httplib::Response &res) {
    static const std::set<std::string> routes = {"/health", "/metrics", "/v1/models",
                                                 "/v1/completions", "/v1/chat/completions",
                                                 "/v1/embeddings"};
    metrics.request(routes.count(req.path) ? req.path : "other", res.status);
  });
  http.set_exception_handler(
      [](const httplib::Request &, httplib::Response &res, std::exception_ptr) {
        sendError(res, {500, "internal error", "", "server_error"});
      });
  http.set_error_handler([](const httplib::Request &req, httplib::Response &res) {
    if (!res.body.empty())
      return;
    if (res.status == 404)
      sendError(res, {404, "no route " + req.method + " " + req.path, "", "not_found_error"});
    else if (res.status == 413)
      sendError(res, {413, "the body is too large", ""});
    else
      sendError(res,
                {res.status, "the request failed (HTTP " + std::to_string(res.status) + ")", ""});
  });
  http.Get("/health", [this](const httplib::Request &, httplib::Response &res) {
    if (draining)
      return sendError(res, {503, "the server is shutting down", "", "server_error"});
    res.set_content("{\"status\":\"ok\"}", "application/json");
  });
  http.Get("/metrics", [this](const httplib::Request &req, httplib::Response &res) {
    if (authorized(req, res))
      res.set_content(metrics.text(engine.get()), "text/plain; version=0.0.4");
  });
  http.Get("/v1/models", [this](const httplib::Request &req, httplib::Response &res) {
    if (!authorized(req, res))
      return;
    json entry = {{"id", model.name}, {"object", "model"}, {"created", 0}, {"owned_by", "xfmr"}};
    res.set_content(dumpJson(json{{"object", "list"}, {"data", json::array({entry})}}),
                    "application/json");
  });
  if (engine) {
    http.Post("/v1/completions", [this](const httplib::Request &req, httplib::Response &res) {
      if (authorized(req, res))
        complete(req, res, false);
    });
    http.Post("/v1/chat/completions", [this](const httplib::Request &req, httplib::Response &res) {
      if (authorized(req, res))
        complete(req, res, true);
    });
  }
  if (model.embedder)
    http.Post("/v1/embeddings", [this](const httplib::Request &req, httplib::Response &res) {
      if (authorized(req, res))
        embed(req, res);
    });
}

bool Server::idle() const { return inFlight == 0; }

void Server::compute(const std::function<void()> &task) {
  std::packaged_task<void()> packaged(task);
  std::future<void> done = packaged.get_future();
  {
    std::lock_guard<std::mutex> lock(taskMutex);
    tasks.push_back(std::move(packaged));
  }
  taskReady.notify_one();
  done.get();
}

void Server::computeLoop(const std::atomic<bool> &stopped) {
  setThreads(options.threads);
  if (engine)
    model.generator->warmUp();
  while (!stopped) {
    if (!engine) {
      std::unique_lock<std::mutex> lock(taskMutex);
      if (!taskReady.wait_for(lock, std::chrono::milliseconds(100),
                              [&] { return !tasks.empty(); }))
        continue;
      std::packaged_task<void()> task = std::move(tasks.front());
      tasks.pop_front();
      lock.unlock();
      task();
      continue;
    }
    engine->waitForWork(std::chrono::milliseconds(100));
    try {
      engine->step();
    } catch (const std::exception &e) {
      std::fprintf(stderr, "error: %s\n", e.what());
      engine->abort();
    } catch (const Failure &failure) {
      std::fprintf(stderr, "error: %s\n", failure.message.c_str());
      engine->abort();
    }
  }
}

/// Little-endian float32 bytes in base64, as OpenAI's encoding_format.
std::string base64Floats(const std::vector<float> &values) {
  static const char digits[] = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
  std::string bytes(reinterpret_cast<const char *>(values.data()), values.size() * sizeof(float));
  std::string out;
  for (size_t i = 0; i < bytes.size(); i += 3) {
    uint32_t chunk = static_cast<uint8_t>(bytes[i]) << 16;
    if (i + 1 < bytes.size())
      chunk |= static_cast<uint8_t>(bytes[i + 1]) << 8;
    if (i + 2 < bytes.size())
      chunk |= static_cast<uint8_t>(bytes[i + 2]);
    out += digits[chunk >> 18 & 63];
    out += digits[chunk >> 12 & 63];
    out += i + 1 < bytes.size() ? digits[chunk >> 6 & 63] : '=';
    out += i + 2 < bytes.size() ? digits[chunk & 63] : '=';
  }
  return out;
}

void Server::embed(const httplib::Request &req, httplib::Response &res) {
  InFlight counted(inFlight);
  std::vector<std::vector<int32_t>> sequences;
  EmbeddingRequest request;
  Embedder &embedder = *model.embedder;
  try {
    if (draining)
      throw ApiError{503, "the server is shutting down", "", "server_error"};
    request = parseEmbeddingRequest(req.body);
    if (request.dimensions && request.dimensions != embedder.width())
      throw ApiError{
          400, "the model's embeddings have " + std::to_string(embedder.width()) + " dimensions",
          "dimensions"};
    for (size_t i = 0; i < request.inputs.size(); ++i) {
      const EmbeddingRequest::Input &input = request.inputs[i];
      std::string what = "input " + std::to_string(i);
      std::vector<int32_t> ids;
      try {
        ids = input.textual ? model.tokenizer.encode(input.text, what) : input.ids;
      } catch (const Failure &failure) {
        throw ApiError{400, failure.message, "input"};
      }
      int64_t vocab = embedder.vocab() ? embedder.vocab() : model.tokenizer.size();
      for (int32_t id : ids)
        if (id >= vocab)
          throw ApiError{400,
                         what + ": token id " + std::to_string(id) + " is outside the vocabulary",
                         "input"};
      if (ids.empty() || static_cast<int64_t>(ids.size()) > embedder.tokens())
        throw ApiError{400,
                       what + " has " + std::to_string(ids.size()) +
                           " tokens; the model reads 1 to " + std::to_string(embedder.tokens()) +
                           " (xfmrc --seq-len)",
                       "input", "context_length_exceeded"};
      sequences.push_back(std::move(ids));
    }
  } catch (const ApiError &e) {
    return sendError(res, e);
  }
  std::vector<std::vector<float>> embeddings;
  compute([&] { embeddings = embedder.embed(sequences); });
  size_t tokens = 0;
  for (const auto &sequence : sequences)
    tokens += sequence.size();
  metrics.embedded(tokens);
  json data = json::array();
  for (size_t i = 0; i < embeddings.size(); ++i)
    data.push_back(
        {{"object", "embedding"},
         {"index", i},
         {"embedding", request.base64 ? json(base64Floats(embeddings[i])) : json(embeddings[i])}});
  json body = {{"object", "list"},
               {"data", std::move(data)},
               {"model", model.name},
               {"usage", {{"prompt_tokens", tokens}, {"total_tokens", tokens}}}};
  res.set_content(dumpJson(body), "application/json");
}

int Server::run() {
  blockTerminationSignals();
  sigset_t signals;
  sigemptyset(&signals);
  sigaddset(&signals, SIGTERM);
  sigaddset(&signals, SIGINT);
  route();
  int port = options.port == 0                               ? http.bind_to_any_port(options.host)
             : http.bind_to_port(options.host, options.port) ? options.port
                                                             : -1;
  if (port < 0)
    fail("cannot listen on " + options.host + ":" + std::to_string(options.port));
  std::fprintf(stderr, "serving '%s' on http://%s:%d (%s)\n", model.name.c_str(),
               options.host.c_str(), port,
               engine ? (std::to_string(engine->slots()) + " slots, up to " +
                         std::to_string(options.queue) + " requests queued")
                            .c_str()
                      : "embeddings");
  std::fflush(stderr);

  std::atomic<bool> stopped{false};
  std::thread computeThread([&] { computeLoop(stopped); });
  std::thread signalThread([&] {
    int signal = 0;
    sigwait(&signals, &signal);
    if (stopped)
      return;
    // Drain: refuse new requests, finish those running and queued, then
    // stop listening (once listening began: a stop before is lost).
    draining = true;
    std::fprintf(stderr, "stopping: finishing the requests running and queued\n");
    while ((!idle() || !http.is_running()) && !stopped)
      std::this_thread::sleep_for(std::chrono::milliseconds(20));
    http.stop();
  });
  bool listened = http.listen_after_bind();
  stopped = true;
  computeThread.join();
  // Listening failed before a signal: wake the signal thread.
  if (!draining)
    pthread_kill(signalThread.native_handle(), SIGTERM);
  signalThread.join();
  if (!listened && !draining)
    fail("the server stopped listening on " + options.host + ":" + std::to_string(port));
  return 0;
}

int serve(ServedModel &model, const ServerOptions &options) { return Server(model, options).run(); }

} // namespace

extern "C" void xfmr_enable_server(void) { serveHook() = &serve; }
