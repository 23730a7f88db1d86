/* Encodes each text of a file with a checkpoint's tokenizer through the
 * runtime's C API, then decodes the ids again:
 *   tokenize DIR TEXTS   prints "ids: ..." and "text: <hex of the decoded bytes>"
 * per text (hex, so that any bytes survive). Texts are separated by NUL
 * bytes, so that they may hold newlines. */
#include "xfmr-rt/xfmr_runtime.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

int main(int argc, char **argv) {
  char err[512];
  if (argc != 3) {
    fprintf(stderr, "usage: tokenize DIR TEXTS\n");
    return 2;
  }
  xfmr_tokenizer_enable_sentencepiece();
  xfmr_tokenizer *tokenizer = xfmr_tokenizer_load(argv[1], err, sizeof(err));
  if (!tokenizer) {
    fprintf(stderr, "tokenize: error: %s\n", err);
    return 1;
  }
  FILE *in = fopen(argv[2], "rb");
  if (!in) {
    fprintf(stderr, "tokenize: cannot open %s\n", argv[2]);
    return 1;
  }
  static char texts[1 << 20];
  static int32_t ids[1 << 16];
  static char decoded[1 << 18];
  size_t size = fread(texts, 1, sizeof(texts) - 1, in);
  fclose(in);
  texts[size] = 0;
  for (size_t start = 0; start < size;) {
    size_t length = strlen(texts + start);
    int64_t count =
        xfmr_tokenizer_encode(tokenizer, texts + start, length, ids, 1 << 16, err, sizeof(err));
    start += length + 1;
    if (count < 0) {
      printf("error: %s\n", err);
      continue;
    }
    printf("ids:");
    for (int64_t i = 0; i < count; ++i)
      printf(" %d", ids[i]);
    size_t bytes = xfmr_tokenizer_decode(tokenizer, ids, (size_t)count, decoded, sizeof(decoded));
    printf("\ntext: ");
    for (size_t i = 0; i < bytes; ++i)
      printf("%02x", (unsigned char)decoded[i]);
    printf("\n");
  }
  xfmr_tokenizer_free(tokenizer);
  return 0;
}
