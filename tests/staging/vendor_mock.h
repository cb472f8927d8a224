/* A mock vendor runtime for the staging pipeline's CPU test (test_staging_model.c), in
 * place of vendor_cuda.h / vendor_hip.h: the names gpu_staging.c calls, implemented by the
 * test (one in-order stream whose copies run late, failure injection). Selected by
 * GW_VENDOR_MOCK in gpu_internal.h; nothing else of the backend is built with it. */
#ifndef GW_VENDOR_MOCK_H
#define GW_VENDOR_MOCK_H

#include <stddef.h>

#define GWV_NAME "mock"
typedef int gwv_err;
typedef void *gwv_stream;
typedef struct gwm_event *gwv_event;
typedef void *gwv_ctxtok;
typedef int gwv_capmode; /* gwg_prev's field; the test's gwg_enter does not exchange modes */

#define GWV_SUCCESS 0
#define GWV_MOCK_ERROR 700     /* what an injected failure returns */
#define GWV_MOCK_NOT_READY 600 /* an event whose copies have not run yet */
#define GWV_IS_NOT_READY(e) ((e) == GWV_MOCK_NOT_READY)
#define GWV_EVENT_FLAGS 0
#define GWV_HOST_ALLOC_FLAGS 0
#define GWV_MEMCPY_DEFAULT 0

typedef enum { GWV_ATTR_PAGEABLE_HOST_PAGE_TABLES = 1 } gwv_attr;
int gwv_device_attr(gwv_attr a, int device);

gwv_err gwv_HostAlloc(void **p, size_t n, int flags);
gwv_err gwv_FreeHost(void *p);
gwv_err gwv_EventCreateWithFlags(gwv_event *e, int flags);
gwv_err gwv_EventDestroy(gwv_event e);
gwv_err gwv_EventRecord(gwv_event e, gwv_stream s);
gwv_err gwv_EventQuery(gwv_event e);
gwv_err gwv_EventSynchronize(gwv_event e);
gwv_err gwv_MemcpyAsync(void *dst, const void *src, size_t n, int kind, gwv_stream s);
gwv_err gwv_StreamSynchronize(gwv_stream s);
gwv_err gwv_GetLastError(void);

#endif
