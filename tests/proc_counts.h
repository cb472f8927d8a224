/*
 * What a test counts in /proc/self to show that nothing was left behind: this process's
 * open descriptors, and its mappings whose line in /proc/self/maps contains `name` (the CPU
 * model's shared pages: "gw-cpu-dev-" device memory, "gw-cpu-evt-" interprocess events).
 * -1 when /proc cannot be read (the caller's assertion then fails). Shared by the
 * single-process harness (test.h) and the MPI tests (halo/halo_test.h).
 */
#ifndef GW_TESTS_PROC_COUNTS_H
#define GW_TESTS_PROC_COUNTS_H

#include <dirent.h>
#include <stdio.h>
#include <string.h>

static inline int proc_open_fds(void) {
  DIR *d = opendir("/proc/self/fd");
  if (!d) return -1;
  int n = 0;
  while (readdir(d)) n++;
  closedir(d);
  return n;
}

static inline int proc_maps_naming(const char *name) {
  FILE *f = fopen("/proc/self/maps", "r");
  if (!f) return -1;
  char line[512];
  int n = 0;
  while (fgets(line, sizeof line, f))
    if (strstr(line, name)) n++;
  fclose(f);
  return n;
}

#endif /* GW_TESTS_PROC_COUNTS_H */
