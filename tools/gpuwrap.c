/* gpuwrap: command-line tool. `gpuwrap info | demo | bench`, each with --help. */
#include "tool.h"

#include <string.h>

static const struct {
  const char *name;
  int (*run)(int argc, char **argv);
  const char *what;
} commands[] = {
    {"info", gw_tool_info, "backends built in, devices, and what each can do"},
    {"demo", gw_tool_demo, "walk through wrapping host, device, pinned and managed memory"},
    {"bench", gw_tool_bench, "measure gpuwrap against the raw runtime, side by side"},
};
#define NCOMMANDS (sizeof commands / sizeof commands[0])

static void usage(FILE *f) { /* the help: stdout, asked for */
  fprintf(f,
          "usage: gpuwrap <command> [options]\n"
          "       gpuwrap --help | --version\n"
          "\n"
          "gpuwrap %d.%d.%d: use any pointer (device, pinned, managed, pageable host) as a\n"
          "typed N-d GPU array without copying.\n"
          "\ncommands:\n",
          GW_VERSION_MAJOR, GW_VERSION_MINOR, GW_VERSION_PATCH);
  for (size_t i = 0; i < NCOMMANDS; i++)
    fprintf(f, "  %-6s %s\n", commands[i].name, commands[i].what);
  fprintf(f, "\n`gpuwrap <command> --help` describes a command's options.\n"
             "Environment: GPUWRAP_BACKEND=cpu|cuda|hip overrides --backend auto.\n");
}

int main(int argc, char **argv) {
  if (argc < 2) return gw_tool_usage_error("", "no command (info, demo or bench)");
  const char *cmd = argv[1];
  if (strcmp(cmd, "--help") == 0 || strcmp(cmd, "-h") == 0 || strcmp(cmd, "help") == 0) {
    usage(stdout);
    return 0;
  }
  if (strcmp(cmd, "--version") == 0) {
    printf("gpuwrap %d.%d.%d\n", GW_VERSION_MAJOR, GW_VERSION_MINOR, GW_VERSION_PATCH);
    return 0;
  }
  for (size_t i = 0; i < NCOMMANDS; i++)
    if (strcmp(cmd, commands[i].name) == 0) return commands[i].run(argc - 1, argv + 1);
  return gw_tool_usage_error("", "unknown command '%s' (info, demo or bench)", cmd);
}
