/* Counting allocator front end; see alloc_count.h for why it is done this way. */
#include "alloc_count.h"

#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>

#ifdef GW_TOOL_ALLOC_COUNT

#include <errno.h>

extern void *__libc_malloc(size_t n);
extern void *__libc_calloc(size_t n, size_t m);
extern void *__libc_realloc(void *p, size_t n);
extern void *__libc_memalign(size_t align, size_t n);
extern void __libc_free(void *p);

static _Thread_local unsigned long allocs;
static _Atomic(uintptr_t) watched;
static atomic_int watched_freed;

/* The replacements must be visible to the dynamic linker even though the tool builds with
 * hidden visibility by default. */
#define GW_EXPORT __attribute__((visibility("default")))

GW_EXPORT void *malloc(size_t n) {
  allocs++;
  return __libc_malloc(n);
}
GW_EXPORT void *calloc(size_t n, size_t m) {
  allocs++;
  return __libc_calloc(n, m);
}
GW_EXPORT void *realloc(void *p, size_t n) {
  allocs++;
  return __libc_realloc(p, n);
}
GW_EXPORT void free(void *p) {
  if (p && (uintptr_t)p == atomic_load_explicit(&watched, memory_order_relaxed))
    atomic_store(&watched_freed, 1);
  __libc_free(p);
}
GW_EXPORT void *aligned_alloc(size_t align, size_t n) {
  allocs++;
  return __libc_memalign(align, n);
}
GW_EXPORT void *memalign(size_t align, size_t n) {
  allocs++;
  return __libc_memalign(align, n);
}
GW_EXPORT int posix_memalign(void **out, size_t align, size_t n) {
  if (align < sizeof(void *) || (align & (align - 1)) != 0) return EINVAL;
  allocs++;
  void *p = __libc_memalign(align, n);
  if (!p) return ENOMEM;
  *out = p;
  return 0;
}

int gw_tool_alloc_counting(void) { return 1; }
unsigned long gw_tool_alloc_count(void) { return allocs; }
void gw_tool_watch_free(void *p) {
  atomic_store(&watched_freed, 0);
  atomic_store(&watched, (uintptr_t)p);
}
int gw_tool_watch_freed(void) { return atomic_load(&watched_freed); }

#else

int gw_tool_alloc_counting(void) { return 0; }
unsigned long gw_tool_alloc_count(void) { return 0; }
void gw_tool_watch_free(void *p) { (void)p; }
int gw_tool_watch_freed(void) { return 0; }

#endif
