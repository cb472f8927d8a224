/* The library's own version, compiled from the same generated header (gpuwrap/version.h,
 * from project(VERSION)) that a program's GW_VERSION_* macros come from: comparing the two
 * tells a program whether it runs against the libgpuwrap it was built with. */
#include "internal.h"

const char *gw_version_string(void) { return GW_VERSION_STRING; }
