"""python3 -m gpuwrap info: what `gpuwrap info` prints, through the library itself."""
import sys

import gpuwrap

USAGE = """usage: python3 -m gpuwrap info | where

  info   backends, devices and capabilities (the same report as `gpuwrap info`)
  where  the files this package uses: the extension and libgpuwrap
"""


def main(argv):
    if argv in (["info"],):
        return gpuwrap.info()
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
