/* Vendor pointer attributes -> gw_ptrinfo. Pure: no vendor headers, no runtime calls. The
 * classification itself is gwc_classify_inline (gpu_classify.h), inline for the backend's
 * query; this is its out-of-line copy for the other callers and the tests. */
#include "gpu_classify.h"

gw_status gwc_classify(const void *ptr, const gwc_attrs *a, const gwc_caps *caps, gw_ptrinfo *out) {
  return gwc_classify_inline(ptr, a, caps, out);
}
