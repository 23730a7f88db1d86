/* Encodes each line of a text file with a checkpoint's tokenizer through the
 * runtime's C API, then decodes the ids again:
 *   tokenize DIR TEXT   prints "ids: ..." and "text: <hex of the decoded bytes>"
 * per line (hex, so that any bytes survive). */
#include "xfmr-rt/xfmr_runtime.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

int main(int argc, char **argv) {
  char err[512];
  if (argc != 3) {
    fprintf(stderr, "usage: tokenize DIR TEXT\n");
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
  static char line[1 << 16];
  static int32_t ids[1 << 16];
  static char text[1 << 18];
  while (fgets(line, sizeof(line), in)) {
    size_t length = strlen(line);
    if (length && line[length - 1] == '\n')
      line[--length] = 0;
    int64_t count = xfmr_tokenizer_encode(tokenizer, line, length, ids, 1 << 16, err, sizeof(err));
    if (count < 0) {
      printf("error: %s\n", err);
      continue;
    }
    printf("ids:");
    for (int64_t i = 0; i < count; ++i)
      printf(" %d", ids[i]);
    size_t bytes = xfmr_tokenizer_decode(tokenizer, ids, (size_t)count, text, sizeof(text));
    printf("\ntext: ");
    for (size_t i = 0; i < bytes; ++i)
      printf("%02x", (unsigned char)text[i]);
    printf("\n");
  }
  fclose(in);
  xfmr_tokenizer_free(tokenizer);
  return 0;
}
