//===- GenerateMain.cpp - main() of compiled generators -------------------===//
//
// `xfmrc --generate` links this (libxfmr_generate_main.a) with a model object
// that defines the prefill and decode entries under the symbol prefix
// `xfmr_model`.
//
//===----------------------------------------------------------------------===//

#include "xfmr-rt/xfmr_runtime.h"

// An encoder-decoder also has an encode entry; a decoder alone does not.
extern "C" const char xfmr_model_encode_manifest[] __attribute__((weak));
extern "C" void xfmr_model_encode_packed(void **args) __attribute__((weak));
extern "C" const char xfmr_model_prefill_manifest[];
extern "C" void xfmr_model_prefill_packed(void **args);
extern "C" const char xfmr_model_decode_manifest[];
extern "C" void xfmr_model_decode_packed(void **args);
// A generator over a batch also has a prefill of one sequence, and may have
// a decode step of one and of a group of a few.
extern "C" const char xfmr_model_prefill_row_manifest[] __attribute__((weak));
extern "C" void xfmr_model_prefill_row_packed(void **args) __attribute__((weak));
extern "C" const char xfmr_model_decode_row_manifest[] __attribute__((weak));
extern "C" void xfmr_model_decode_row_packed(void **args) __attribute__((weak));
extern "C" const char xfmr_model_decode_group_manifest[] __attribute__((weak));
extern "C" void xfmr_model_decode_group_packed(void **args) __attribute__((weak));

int main(int argc, char **argv) {
  xfmr_tokenizer_enable_sentencepiece();
  xfmr_enable_server();
  return xfmr_seq2seq_generator_main(
      argc, argv, xfmr_model_encode_manifest, xfmr_model_encode_packed, xfmr_model_prefill_manifest,
      xfmr_model_prefill_packed, xfmr_model_decode_manifest, xfmr_model_decode_packed,
      xfmr_model_prefill_row_manifest, xfmr_model_prefill_row_packed,
      xfmr_model_decode_row_manifest, xfmr_model_decode_row_packed,
      xfmr_model_decode_group_manifest, xfmr_model_decode_group_packed);
}
