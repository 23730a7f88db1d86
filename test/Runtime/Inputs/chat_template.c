/* Renders a chat template with a context through the runtime's C API:
 *   chat_template TEMPLATE_FILE|CHECKPOINT_DIRECTORY CONTEXT_JSON_FILE
 * (a directory: its own template and special tokens) prints the rendered text (its exact bytes) to
 * stdout, or "error: MSG" to stderr and exits 1. */
#include "xfmr-rt/xfmr_runtime.h"

#include <stdio.h>
#include <stdlib.h>
#include <sys/stat.h>

static char *readFile(const char *path, size_t *length) {
  FILE *file = fopen(path, "rb");
  if (!file)
    return NULL;
  size_t capacity = 1 << 16, size = 0;
  char *data = malloc(capacity);
  size_t got;
  while (data && (got = fread(data + size, 1, capacity - size, file)) > 0) {
    size += got;
    if (size == capacity)
      data = realloc(data, capacity *= 2);
  }
  fclose(file);
  *length = size;
  return data;
}

int main(int argc, char **argv) {
  char err[1024];
  if (argc != 3) {
    fprintf(stderr, "usage: chat_template TEMPLATE_FILE CONTEXT_JSON_FILE\n");
    return 2;
  }
  struct stat info;
  int directory = stat(argv[1], &info) == 0 && S_ISDIR(info.st_mode);
  size_t sourceLength = 0, jsonLength;
  char *source = directory ? NULL : readFile(argv[1], &sourceLength);
  char *json = readFile(argv[2], &jsonLength);
  if ((!directory && !source) || !json) {
    fprintf(stderr, "error: cannot read %s\n", json ? argv[1] : argv[2]);
    return 1;
  }
  xfmr_chat_template *chatTemplate =
      directory ? xfmr_chat_template_load(argv[1], err, sizeof(err))
                : xfmr_chat_template_parse(source, sourceLength, err, sizeof(err));
  if (!chatTemplate) {
    fprintf(stderr, "error: %s\n", err);
    return 1;
  }
  /* Too small on purpose at first: the second call gets the exact size. */
  size_t capacity = 16;
  char *text = malloc(capacity);
  int64_t length =
      xfmr_chat_template_render(chatTemplate, json, jsonLength, text, capacity, err, sizeof(err));
  if (length > (int64_t)capacity) {
    capacity = (size_t)length;
    text = realloc(text, capacity);
    length =
        xfmr_chat_template_render(chatTemplate, json, jsonLength, text, capacity, err, sizeof(err));
  }
  if (length < 0) {
    fprintf(stderr, "error: %s\n", err);
    return 1;
  }
  fwrite(text, 1, (size_t)length, stdout);
  free(text);
  free(json);
  free(source);
  xfmr_chat_template_free(chatTemplate);
  return 0;
}
