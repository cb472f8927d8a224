"""python3 -m gpuwrap info: what `gpuwrap info` prints, through the library itself."""
import sys

import gpuwrap

USAGE = """usage: python3 -m gpuwrap info [--settings] [--json] | where

  info   backends, devices and capabilities (the same report as `gpuwrap info`)
         --settings  every GPUWRAP_* setting: type, default, range, value now, and what it does
         --json      the same report as one JSON object (with --settings: every setting)
  where  the files this package uses: the extension and libgpuwrap
"""


def main(argv):
    if argv and argv[0] == "info" and set(argv[1:]) <= {"--settings", "--json"}:
        try:
            return gpuwrap.info(settings="--settings" in argv, json="--json" in argv)
        except gpuwrap.GpuwrapError as e:  # as `gpuwrap info`: the report, then why, status 1
            sys.stderr.write(f"python3 -m gpuwrap info: {e.detail or e}\n")
            return 1
    if argv == ["where"]:
        print(f"package    {gpuwrap.__file__}")
        print(f"extension  {gpuwrap._c.__file__}")
        print(f"libgpuwrap {gpuwrap._c.library_path()}")
        return 0
    if argv and argv[0] in ("-h", "--help", "help"):
        sys.stdout.write(USAGE)
        return 0
    sys.stderr.write(USAGE)
    return 2


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
