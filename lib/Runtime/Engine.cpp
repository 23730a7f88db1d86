//===- Engine.cpp - generation of many requests over one batch ------------===//

#include "Engine.h"

#include "CommandLine.h"
#include "RuntimeSupport.h"

#include <algorithm>
#include <cmath>
#include <iterator>
#include <limits>
#include <numeric>

using namespace xfmr::rt;

Engine::Engine(xfmr_generator &generator, const Tokenizer *tokenizer, int64_t slots)
    : generator(generator), tokenizer(tokenizer) {
  if (slots <= 0 || slots > generator.batch)
    slots = generator.batch;
  running.resize(slots);
  logits.resize(generator.batch * generator.vocab);
}

void Engine::submit(std::shared_ptr<Generation> generation) {
  size_t length = generation->context.size() + generation->prompt.size();
  if (generation->prompt.empty())
    fail("the prompt is empty");
  if (static_cast<int64_t>(length) > generator.context)
    fail("the prompt has " + std::to_string(length) + " tokens, more than the context of " +
         std::to_string(generator.context) + " positions (xfmrc --max-context)");
  for (int32_t id : generation->prompt)
    if (id < 0 || id >= generator.vocab)
      fail("token id " + std::to_string(id) + " is outside the vocabulary [0, " +
           std::to_string(generator.vocab) + ")");
  const GenerationSettings &settings = generation->settings;
  if (settings.beams < 1)
    fail("the number of beams must be at least 1, got " + std::to_string(settings.beams));
  if (settings.beams > slots())
    fail("beam search over " + std::to_string(settings.beams) + " beams needs as many slots; " +
         "the engine has " + std::to_string(slots()) + " (xfmrc --batch)");
  if (settings.beams > 1 &&
      (!settings.stops.empty() || settings.topLogprobs >= 0 || settings.frequencyPenalty != 0 ||
       settings.presencePenalty != 0 || settings.keepLogits || !generation->context.empty()))
    fail("beam search takes no stop texts, logprobs, frequency or presence penalties, kept "
         "logits or earlier context");
  generation->submitted = std::chrono::steady_clock::now();
  {
    std::lock_guard<std::mutex> lock(mutex);
    queue.push_back(std::move(generation));
  }
  work.notify_one();
}

size_t Engine::queued() const {
  std::lock_guard<std::mutex> lock(mutex);
  return queue.size();
}

void Engine::waitForWork(std::chrono::milliseconds timeout) {
  std::unique_lock<std::mutex> lock(mutex);
  work.wait_for(lock, timeout, [&] { return !queue.empty() || busySlots > 0; });
}

void Engine::admit() {
  for (;;) {
    std::vector<int64_t> free;
    for (int64_t s = 0; s < slots(); ++s)
      if (running[s].free())
        free.push_back(s);
    if (free.empty())
      return;
    std::shared_ptr<Generation> g;
    {
      std::lock_guard<std::mutex> lock(mutex);
      // First come, first served: a beam search waits for all its slots.
      if (queue.empty() || (!queue.front()->cancelled &&
                            queue.front()->settings.beams > static_cast<int64_t>(free.size())))
        return;
      g = std::move(queue.front());
      queue.pop_front();
    }
    int64_t s = free[0];
    Slot &slot = running[s];
    slot.generation = g;
    ++busySlots;
    if (g->cancelled) {
      finish(s, FinishReason::Cancelled);
      continue;
    }
    const GenerationSettings &settings = g->settings;
    slot.sampler.emplace(settings.sampling, settings.seed);
    slot.history = g->context;
    slot.history.insert(slot.history.end(), g->prompt.begin(), g->prompt.end());
    if (settings.frequencyPenalty != 0 || settings.presencePenalty != 0)
      slot.counts.assign(generator.vocab, 0);
    if (tokenizer) {
      slot.stream = std::make_shared<DecodeStream>(*tokenizer);
      slot.stream->prime(g->prompt);
    }
    generator.lengths[s] = static_cast<int64_t>(g->context.size());
    if (settings.beams > 1) {
      slot.beams = std::make_unique<BeamSearch>(
          BeamSearch::Settings{settings.beams, settings.lengthPenalty, settings.earlyStopping,
                               settings.sampling, settings.ignoreEos},
          generator.prefill.manifest, g->prompt,
          static_cast<int64_t>(g->prompt.size()) + settings.maxTokens, generator.context,
          generator.vocab);
      slot.beamSlots.assign(free.begin(), free.begin() + settings.beams);
      for (size_t b = 1; b < slot.beamSlots.size(); ++b) {
        running[slot.beamSlots[b]].lent = true;
        ++busySlots;
      }
    }
  }
}

void Engine::endQueued(bool cancelledOnly, FinishReason reason) {
  std::vector<std::shared_ptr<Generation>> ended;
  {
    std::lock_guard<std::mutex> lock(mutex);
    auto ends = [&](const std::shared_ptr<Generation> &g) {
      return !cancelledOnly || g->cancelled.load();
    };
    std::copy_if(queue.begin(), queue.end(), std::back_inserter(ended), ends);
    queue.erase(std::remove_if(queue.begin(), queue.end(), ends), queue.end());
  }
  for (auto &g : ended) {
    g->finish = reason;
    g->finished = std::chrono::steady_clock::now();
    if (g->onFinish)
      g->onFinish("");
  }
}

void Engine::abort() {
  for (int64_t s = 0; s < slots(); ++s)
    if (running[s].generation)
      finish(s, FinishReason::Failed);
  endQueued(/*cancelledOnly=*/false, FinishReason::Failed);
}

bool Engine::step() {
  for (int64_t s = 0; s < slots(); ++s)
    if (running[s].generation && running[s].generation->cancelled)
      finish(s, FinishReason::Cancelled);
  endQueued(/*cancelledOnly=*/true, FinishReason::Cancelled);
  admit();
  int64_t vocab = generator.vocab;
  bool worked = false;
  // One chunk of each prompt being read.
  std::vector<std::vector<int32_t>> chunk(generator.batch);
  std::vector<int64_t> ready;
  for (int64_t s = 0; s < slots(); ++s) {
    Slot &slot = running[s];
    if (!slot.generation || slot.promptRead == slot.generation->prompt.size())
      continue;
    const std::vector<int32_t> &prompt = slot.generation->prompt;
    size_t take = std::min<size_t>(generator.prefill.tokens, prompt.size() - slot.promptRead);
    chunk[s].assign(prompt.begin() + slot.promptRead, prompt.begin() + slot.promptRead + take);
    slot.promptRead += take;
    worked = true;
    if (slot.promptRead == prompt.size())
      ready.push_back(s);
  }
  if (worked) {
    generator.call(generator.prefill, chunk, logits.data());
    auto now = std::chrono::steady_clock::now();
    for (int64_t s : ready) {
      running[s].generation->promptRead = now;
      if (running[s].beams)
        startBeams(s);
      else
        choose(s, logits.data() + s * vocab);
    }
  }
  // One decode step of the sequences generating.
  for (std::vector<int32_t> &tokens : chunk)
    tokens.clear();
  std::vector<int64_t> decoding;
  for (int64_t s = 0; s < slots(); ++s) {
    Slot &slot = running[s];
    if (!slot.beamTokens.empty()) {
      for (size_t b = 0; b < slot.beamSlots.size(); ++b)
        chunk[slot.beamSlots[b]] = {slot.beamTokens[b]};
      slot.beamTokens.clear();
      decoding.push_back(s);
    } else if (slot.generation && slot.next >= 0) {
      chunk[s] = {slot.next};
      slot.next = -1;
      decoding.push_back(s);
    }
  }
  if (!decoding.empty()) {
    generator.call(generator.decode, chunk, logits.data());
    for (int64_t s : decoding) {
      if (running[s].beams)
        stepBeams(s);
      else
        choose(s, logits.data() + s * vocab);
    }
  }
  return worked || !decoding.empty();
}

void Engine::runUntilIdle() {
  while (step()) {
  }
}

void Engine::choose(int64_t s, float *row) {
  Slot &slot = running[s];
  Generation &g = *slot.generation;
  const GenerationSettings &settings = g.settings;
  int64_t vocab = generator.vocab;
  if (settings.keepLogits)
    g.logits.insert(g.logits.end(), row, row + vocab);
  applyTokenRules(generator.prefill.manifest, row, vocab, slot.history.size(),
                  g.context.size() + g.prompt.size() + settings.maxTokens, settings.ignoreEos);
  for (int64_t v = 0; v < static_cast<int64_t>(slot.counts.size()); ++v)
    if (slot.counts[v])
      row[v] -=
          static_cast<float>(settings.frequencyPenalty * slot.counts[v] + settings.presencePenalty);
  GeneratedToken token;
  token.id = slot.sampler->sample(row, vocab, slot.history);
  if (settings.topLogprobs >= 0) {
    double shift = logSumExp(row, vocab);
    token.logprob = row[token.id] - shift;
    std::vector<int32_t> order(vocab);
    std::iota(order.begin(), order.end(), 0);
    size_t count = std::min<size_t>(settings.topLogprobs, vocab);
    std::partial_sort(order.begin(), order.begin() + count, order.end(), [&](int32_t a, int32_t b) {
      return row[a] != row[b] ? row[a] > row[b] : a < b;
    });
    for (size_t i = 0; i < count; ++i)
      token.top.push_back({order[i], row[order[i]] - shift});
  }
  const std::vector<int64_t> &ends = generator.prefill.manifest.eosTokenIds;
  if (!settings.ignoreEos && std::find(ends.begin(), ends.end(), token.id) != ends.end())
    return finish(s, FinishReason::EndToken);
  g.generated.push_back(token.id);
  slot.history.push_back(token.id);
  if (!slot.counts.empty())
    ++slot.counts[token.id];
  token.text = slot.stream ? slot.stream->step(token.id) : " " + std::to_string(token.id);
  size_t before = g.text.size();
  g.text += token.text;
  for (const std::string &stop : settings.stops) {
    size_t at = g.text.find(stop, before >= stop.size() ? before - stop.size() + 1 : 0);
    g.stopAt = std::min(g.stopAt, at);
  }
  if (g.onToken)
    g.onToken(token);
  if (g.stopAt != std::string::npos)
    return finish(s, FinishReason::Stop);
  if (static_cast<int64_t>(g.generated.size()) >= settings.maxTokens)
    return finish(s, FinishReason::Length);
  if (generator.lengths[s] + 1 > generator.context)
    return finish(s, FinishReason::ContextFull);
  slot.next = token.id;
}

void Engine::startBeams(int64_t s) {
  Slot &slot = running[s];
  int64_t vocab = generator.vocab;
  generator.copyRows(slot.beamSlots, std::vector<int64_t>(slot.beamSlots.size(), s),
                     /*withSource=*/true);
  for (int64_t target : slot.beamSlots)
    if (target != s)
      std::copy_n(logits.data() + s * vocab, vocab, logits.data() + target * vocab);
  stepBeams(s);
}

void Engine::stepBeams(int64_t s) {
  Slot &slot = running[s];
  std::vector<const float *> rows;
  for (int64_t row : slot.beamSlots)
    rows.push_back(logits.data() + row * generator.vocab);
  if (slot.beams->step(rows)) {
    std::vector<int64_t> sources;
    for (int64_t parent : slot.beams->parents())
      sources.push_back(slot.beamSlots[parent]);
    generator.copyRows(slot.beamSlots, sources);
    slot.beamTokens = slot.beams->tokens();
    return;
  }
  // The best sequence's tokens, as if generated one by one.
  Generation &g = *slot.generation;
  const std::vector<int32_t> &best = slot.beams->best();
  bool ended = false;
  for (size_t t = g.prompt.size(); t < best.size(); ++t) {
    if (slot.beams->isEnd(best[t])) {
      ended = true;
      continue;
    }
    GeneratedToken token;
    token.id = best[t];
    token.text = slot.stream ? slot.stream->step(token.id) : " " + std::to_string(token.id);
    g.generated.push_back(token.id);
    g.text += token.text;
    if (g.onToken)
      g.onToken(token);
  }
  FinishReason reason = ended ? FinishReason::EndToken
                        : static_cast<int64_t>(g.generated.size()) < g.settings.maxTokens
                            ? FinishReason::ContextFull
                            : FinishReason::Length;
  finish(s, reason);
}

void Engine::finish(int64_t s, FinishReason reason) {
  Slot slot = std::move(running[s]);
  running[s] = Slot();
  for (size_t b = 1; b < slot.beamSlots.size(); ++b)
    running[slot.beamSlots[b]] = Slot();
  Generation &g = *slot.generation;
  std::string tail = slot.stream ? slot.stream->finish() : "";
  g.text += tail;
  g.finish = reason;
  g.finished = std::chrono::steady_clock::now();
  if (g.onFinish)
    g.onFinish(tail);
  // Counted free only now: whoever sees no slot busy sees the ends reported.
  busySlots -= std::max<size_t>(1, slot.beamSlots.size());
}

struct xfmr_engine {
  Engine engine;
};

struct xfmr_generation {
  std::shared_ptr<Generation> generation;
};

xfmr_generation_settings xfmr_generation_settings_defaults(void) {
  GenerationSettings defaults;
  return {defaults.sampling, defaults.seed,          defaults.maxTokens,           nullptr, 0, 0,
          defaults.beams,    defaults.lengthPenalty, XFMR_EARLY_STOPPING_HEURISTIC};
}

xfmr_engine *xfmr_engine_create(xfmr_generator *generator, const xfmr_tokenizer *tokenizer,
                                int64_t slots) {
  return new xfmr_engine{Engine(*generator, tokenizer ? tokenizer->tokenizer.get() : nullptr,
                                slots)};
}

void xfmr_engine_free(xfmr_engine *engine) { delete engine; }

xfmr_generation *xfmr_engine_submit(xfmr_engine *engine, const int32_t *prompt, size_t length,
                                    const xfmr_generation_settings *settings,
                                    void (*onToken)(void *, int32_t, const char *, size_t),
                                    void *user, char *err, size_t errSize) {
  auto g = std::make_shared<Generation>();
  g->prompt.assign(prompt, prompt + length);
  GenerationSettings &s = g->settings;
  s.sampling = settings->sampling;
  s.seed = settings->seed;
  s.maxTokens = settings->max_tokens;
  s.stops.assign(settings->stops, settings->stops + settings->stop_count);
  s.ignoreEos = settings->ignore_eos != 0;
  s.beams = settings->num_beams;
  s.lengthPenalty = settings->length_penalty;
  s.earlyStopping = settings->early_stopping == XFMR_EARLY_STOPPING_ALL_FINISHED
                        ? EarlyStopping::True
                    : settings->early_stopping == XFMR_EARLY_STOPPING_NEVER ? EarlyStopping::Never
                                                                            : EarlyStopping::False;
  if (onToken) {
    g->onToken = [onToken, user](const GeneratedToken &token) {
      onToken(user, token.id, token.text.data(), token.text.size());
    };
    g->onFinish = [onToken, user](const std::string &tail) {
      if (!tail.empty())
        onToken(user, -1, tail.data(), tail.size());
    };
  }
  try {
    if (s.maxTokens < 1)
      fail("max_tokens must be at least 1");
    engine->engine.submit(g);
  } catch (const Failure &failure) {
    setError(err, errSize, failure.message);
    return nullptr;
  }
  return new xfmr_generation{std::move(g)};
}

int xfmr_engine_step(xfmr_engine *engine, char *err, size_t errSize) {
  try {
    return engine->engine.step() ? 1 : 0;
  } catch (const Failure &failure) {
    engine->engine.abort();
    setError(err, errSize, failure.message);
    return -1;
  }
}

void xfmr_generation_cancel(xfmr_generation *generation) {
  generation->generation->cancelled = true;
}

xfmr_finish xfmr_generation_finish(const xfmr_generation *generation) {
  return static_cast<xfmr_finish>(generation->generation->finish);
}

size_t xfmr_generation_text(const xfmr_generation *generation, char *text, size_t capacity) {
  const std::string &all = generation->generation->text;
  std::copy_n(all.data(), std::min(capacity, all.size()), text);
  return all.size();
}

size_t xfmr_generation_tokens(const xfmr_generation *generation, int32_t *ids, size_t capacity) {
  const std::vector<int32_t> &all = generation->generation->generated;
  std::copy_n(all.data(), std::min(capacity, all.size()), ids);
  return all.size();
}

void xfmr_generation_free(xfmr_generation *generation) {
  if (generation)
    generation->generation->cancelled = true;
  delete generation;
}
