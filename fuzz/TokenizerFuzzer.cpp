//===- TokenizerFuzzer.cpp - tokenizer files and encoding -----------------===//
//
// Each of a checkpoint's tokenizer layouts (the first byte chooses one), its
// files separated by kSeparator, and then a text to encode and decode:
//   0  tokenizer.json (byte-level BPE or WordPiece)
//   1  vocab.json, merges.txt, tokenizer_config.json (byte-level BPE)
//   2  vocab.txt, tokenizer_config.json (WordPiece)
//   3  spiece.model (SentencePiece)
//   4  source.spm, vocab.json (Marian's SentencePiece)
// SentencePiece models are binary, so the text is what follows the last
// separator and each file what precedes the next.
//
//===----------------------------------------------------------------------===//

#include "FuzzSupport.h"

#include "xfmr-rt/xfmr_runtime.h"

#include <vector>

namespace {

constexpr std::string_view kSeparator = "\n#-#\n";

struct Layout {
  std::vector<const char *> files;
};

const Layout kLayouts[] = {
    {{"tokenizer.json"}},
    {{"vocab.json", "merges.txt", "tokenizer_config.json"}},
    {{"vocab.txt", "tokenizer_config.json"}},
    {{"spiece.model"}},
    {{"source.spm", "vocab.json"}},
};

const char *const kAllFiles[] = {"tokenizer.json",        "vocab.json",   "merges.txt", "vocab.txt",
                                 "tokenizer_config.json", "spiece.model", "source.spm"};

} // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  static const bool enabled = (xfmr_tokenizer_enable_sentencepiece(), true);
  (void)enabled;
  if (size == 0)
    return 0;
  const Layout &layout = kLayouts[data[0] % std::size(kLayouts)];
  std::string_view input = xfmr::fuzz::asText(data + 1, size - 1);
  size_t last = input.rfind(kSeparator);
  std::string_view text =
      last == std::string_view::npos ? std::string_view() : input.substr(last + kSeparator.size());
  input = input.substr(0, last);
  for (const char *name : kAllFiles)
    xfmr::fuzz::removeScratchFile(name);
  for (const char *name : layout.files) {
    bool present = !input.empty();
    std::string_view contents = xfmr::fuzz::takeUntil(input, kSeparator);
    if (present)
      xfmr::fuzz::writeScratchFile(name, contents);
  }

  char err[512];
  xfmr_tokenizer *tokenizer =
      xfmr_tokenizer_load(xfmr::fuzz::scratchDirectory().c_str(), err, sizeof(err));
  if (!tokenizer)
    return 0;
  std::vector<int32_t> ids(text.size() + 8);
  int64_t count = xfmr_tokenizer_encode(tokenizer, text.data(), text.size(), ids.data(), ids.size(),
                                        err, sizeof(err));
  if (count > int64_t(ids.size())) {
    ids.resize(count);
    count = xfmr_tokenizer_encode(tokenizer, text.data(), text.size(), ids.data(), ids.size(), err,
                                  sizeof(err));
  }
  if (count >= 0) {
    std::vector<char> decoded(4 * text.size() + 64);
    xfmr_tokenizer_decode(tokenizer, ids.data(), size_t(count), decoded.data(), decoded.size());
    // Ids the model never made: any id in range must decode.
    for (int32_t id : {0, 1, 2, 3, 255, 256, 1000})
      xfmr_tokenizer_decode(tokenizer, &id, 1, decoded.data(), decoded.size());
  }
  xfmr_tokenizer_free(tokenizer);
  return 0;
}
