/*
 * Replay driver for the fuzz targets when libFuzzer is not used (gcc, valgrind): runs
 * LLVMFuzzerTestOneInput once per file named on the command line; a directory means
 * every regular file in it (sorted). Exit 0 when all inputs ran.
 */
#include <dirent.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static int run_file(const char *path) {
  FILE *f = fopen(path, "rb");
  if (!f) {
    perror(path);
    return 1;
  }
  uint8_t *buf = NULL;
  size_t n = 0, cap = 0;
  for (;;) {
    if (n == cap) {
      cap = cap ? 2 * cap : 4096;
      buf = realloc(buf, cap);
      if (!buf) return 1;
    }
    size_t r = fread(buf + n, 1, cap - n, f);
    if (r == 0) break;
    n += r;
  }
  fclose(f);
  /* a copy of exactly n bytes, so reads past the input are caught by ASan/valgrind */
  uint8_t *exact = malloc(n ? n : 1);
  if (n) memcpy(exact, buf, n);
  free(buf);
  LLVMFuzzerTestOneInput(exact, n);
  free(exact);
  return 0;
}

static int cmp(const void *a, const void *b) {
  return strcmp(*(char *const *)a, *(char *const *)b);
}

int main(int argc, char **argv) {
  long inputs = 0;
  for (int i = 1; i < argc; i++) {
    struct stat st;
    if (stat(argv[i], &st) != 0) {
      perror(argv[i]);
      return 1;
    }
    if (!S_ISDIR(st.st_mode)) {
      if (run_file(argv[i])) return 1;
      inputs++;
      continue;
    }
    DIR *d = opendir(argv[i]);
    if (!d) return 1;
    char **names = NULL;
    size_t nn = 0;
    struct dirent *e;
    while ((e = readdir(d)) != NULL) {
      if (e->d_name[0] == '.') continue;
      names = realloc(names, (nn + 1) * sizeof *names);
      size_t len = strlen(argv[i]) + strlen(e->d_name) + 2;
      names[nn] = malloc(len);
      snprintf(names[nn], len, "%s/%s", argv[i], e->d_name);
      nn++;
    }
    closedir(d);
    qsort(names, nn, sizeof *names, cmp);
    for (size_t k = 0; k < nn; k++) {
      if (run_file(names[k])) return 1;
      inputs++;
      free(names[k]);
    }
    free(names);
  }
  printf("replayed %ld inputs\n", inputs);
  return 0;
}
