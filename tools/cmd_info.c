/* `gpuwrap info`: the library's report (gw_info_report), as text or JSON. */
#include "tool.h"

#include <string.h>

static void info_usage(FILE *f) {
  fprintf(
      f,
      "usage: gpuwrap info [--settings] [--json] [--help]\n"
      "\n"
      "Lists the backends gpuwrap knows (cpu, cuda, hip): present or absent and why,\n"
      "their devices, and per device what it can do: which memory kinds can be\n"
      "allocated (a tiny gw_alloc of each), whether pageable host memory is reached\n"
      "directly or registered on wrap, and whether gw_fill runs on wrapped pinned memory.\n"
      "Then the GPUWRAP_* settings that are set.\n"
      "\n"
      "  --settings  every GPUWRAP_* setting: type, default, range, value now, and what it does\n"
      "  --json      the same report as one JSON object (with --settings: every setting)\n"
      "\n"
      "Exit status 0 (also when no GPU backend is present); 1 when a setting is not valid.\n");
}

int gw_tool_info(int argc, char **argv) {
  unsigned flags = 0;
  for (int i = 1; i < argc; i++) {
    if (strcmp(argv[i], "--help") == 0 || strcmp(argv[i], "-h") == 0) {
      info_usage(stdout);
      return 0;
    } else if (strcmp(argv[i], "--json") == 0) {
      flags |= GW_INFO_JSON;
    } else if (strcmp(argv[i], "--settings") == 0) {
      flags |= GW_INFO_ALL_SETTINGS;
    } else {
      fprintf(stderr,
              "gpuwrap info: unknown option '%s'\nRun 'gpuwrap info --help' for the usage.\n",
              argv[i]);
      return GW_TOOL_EXIT_USAGE;
    }
  }
  gw_status s = gw_info_report(stdout, flags);
  if (s != GW_OK) {
    fprintf(stderr, "gpuwrap info: %s\n", gw_last_error());
    return 1;
  }
  return 0;
}
