/* Shared declarations of the gpuwrap command-line tool (never installed). */
#ifndef GW_TOOL_H
#define GW_TOOL_H

#include "gpuwrap.h"

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

/* Commands: argv[0] is the command name. Return the process exit status. */
int gw_tool_info(int argc, char **argv);
int gw_tool_demo(int argc, char **argv);
int gw_tool_bench(int argc, char **argv);

/* Exit status for bad usage (unknown command or option). */
#define GW_TOOL_EXIT_USAGE 2

/* A usage error: "gpuwrap CMD: <message>" and one line pointing at `gpuwrap CMD --help`
 * on stderr (the help itself would bury the message); returns GW_TOOL_EXIT_USAGE. cmd is
 * "" for the top level. */
int gw_tool_usage_error(const char *cmd, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));
/* Why gw_context_create(requested, device) failed, on stderr as "gpuwrap CMD: ...", naming
 * the backend it tried (GW_BACKEND_AUTO resolved through GPUWRAP_BACKEND) and the
 * library's reason (gw_last_error()). Call it right after the failed create. */
void gw_tool_context_error(const char *cmd, gw_backend requested, int device, gw_status s);

/* "cpu" | "cuda" | "hip" | "auto" -> backend; -1 if unknown. */
int gw_tool_parse_backend(const char *s, gw_backend *out);
/* Parse a size with optional K/M/G suffix (binary); 0 on failure. */
size_t gw_tool_parse_size(const char *s);
/* A whole decimal integer in [lo, hi] (no trailing characters): 0, else -1. */
int gw_tool_parse_int(const char *s, long lo, long hi, int *out);
/* "4 KiB", "1 GiB", ... into buf. */
const char *gw_tool_fmt_size(size_t bytes, char *buf, size_t n);
/* One line describing a gw_ptrinfo ("kind=pinned device=0 base=... extent=... flags=..."). */
void gw_tool_print_ptrinfo(FILE *f, const char *indent, const gw_ptrinfo *pi);
/* Names of GW_PTR_* flags set in `flags` ("gpuwrap-registered|host-registered" or "-"). */
const char *gw_tool_ptrflags(unsigned flags, char *buf, size_t n);
/* Monotonic host clock in seconds. */
double gw_tool_now(void);

#endif /* GW_TOOL_H */
