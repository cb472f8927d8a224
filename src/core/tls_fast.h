/*
 * The thread-locals read on every wrap and release (the context's reference slot, the
 * registry lock's stripe): the initial-exec TLS model, so reading one is an fs-relative
 * load instead of a call to __tls_get_addr (the model a shared library gets by default,
 * a visible part of a warm wrap + release: see docs/BENCHMARKS.md, 'Measurements behind
 * the code's choices'). Only small variables: a library loaded with dlopen (Python's
 * ctypes) takes them from the static TLS space glibc keeps for that, which is a few hundred
 * bytes; the error buffers stay dynamic.
 */
#ifndef GW_CORE_TLS_FAST_H
#define GW_CORE_TLS_FAST_H

#if defined(__GNUC__) && !defined(__APPLE__)
#define GW__TLS_FAST __attribute__((tls_model("initial-exec")))
#else
#define GW__TLS_FAST
#endif

#endif /* GW_CORE_TLS_FAST_H */
