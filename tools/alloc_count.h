/*
 * Heap-allocation counting for `gpuwrap bench` and `gpuwrap demo`.
 *
 * How: the executable itself defines malloc, calloc, realloc, free, aligned_alloc,
 * posix_memalign and memalign, forwarding to glibc's __libc_* entry points. Symbols of the
 * executable come first in the dynamic linker's lookup order, so calls made by libgpuwrap.so
 * (and by the tool) land here: no LD_PRELOAD, no re-exec, no deprecated malloc hooks.
 * Counting is per thread (thread-local counters), so it costs nothing measurable and the
 * 8-thread benchmarks do not contend on it. Built only where glibc's __libc_malloc exists
 * and no sanitizer replaces malloc (CMake option GW_TOOL_ALLOC_COUNT); otherwise the
 * functions below report "not available" and counts print as n/a.
 */
#ifndef GW_TOOL_ALLOC_COUNT_H
#define GW_TOOL_ALLOC_COUNT_H

/* 1 if allocations are counted in this build. */
int gw_tool_alloc_counting(void);
/* Allocations (malloc, calloc, realloc of NULL or growth, aligned) made by this thread. */
unsigned long gw_tool_alloc_count(void);
/* Watch one pointer: gw_tool_watch_freed() becomes 1 once free(p) is called on it. */
void gw_tool_watch_free(void *p);
int gw_tool_watch_freed(void);

#endif
