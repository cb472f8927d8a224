# The ABI numbers are checked, not remembered: each number in src/core/abi.lock is recorded
# with a hash of the declarations it covers, and this script fails when those
# declarations no longer hash to what the header's number was recorded with.
#
#   cmake -DSRC=<source dir> -DKIND=private|backend -P abi_check.cmake
#
# What is hashed (comments and whitespace removed, so rewording a comment is free):
#   private  src/core/private.h, the order of the settings' ids (settings_table.h: the halo
#            and the Python extension pass ids to gw__setting_int) and src/core/settings.h;
#   both     src/core/signals.h (the one type both ABIs pass on);
#   backend  src/core/backend.h, the settings' ids (the host API takes them) and the public
#            types a plugin fills or reads: gw_status, gw_memkind, gw_ptrinfo (gpuwrap.h).
# The line `#define GW__<KIND>_ABI N` itself is left out of the hash.
cmake_minimum_required(VERSION 3.16)
if(NOT SRC OR NOT KIND)
  message(FATAL_ERROR "usage: cmake -DSRC=<source dir> -DKIND=private|backend -P abi_check.cmake")
endif()
string(TOUPPER "${KIND}" K)
set(lock "${SRC}/src/core/abi.lock")
if(KIND STREQUAL "private")
  set(header "${SRC}/src/core/private.h")
elseif(KIND STREQUAL "backend")
  set(header "${SRC}/src/core/backend.h")
else()
  message(FATAL_ERROR "KIND: '${KIND}' is not private or backend")
endif()

# Text without /* */ and // comments, whitespace runs made one space.
function(gw_strip_c text out)
  set(res "")
  while(TRUE)
    string(FIND "${text}" "/*" open)
    if(open EQUAL -1)
      break()
    endif()
    string(SUBSTRING "${text}" 0 ${open} head)
    string(APPEND res "${head} ")
    math(EXPR after "${open} + 2")
    string(SUBSTRING "${text}" ${after} -1 text)
    string(FIND "${text}" "*/" close)
    if(close EQUAL -1)
      message(FATAL_ERROR "an unterminated comment")
    endif()
    math(EXPR after "${close} + 2")
    string(SUBSTRING "${text}" ${after} -1 text)
  endwhile()
  string(APPEND res "${text}")
  string(REGEX REPLACE "//[^\n]*" " " res "${res}")
  string(REGEX REPLACE "[ \t\r\n\\\\]+" " " res "${res}")
  string(STRIP "${res}" res)
  set(${out} "${res}" PARENT_SCOPE)
endfunction()

file(READ "${header}" htext)
if(NOT htext MATCHES "#define GW__${K}_ABI ([0-9]+)")
  message(FATAL_ERROR "${header}: no #define GW__${K}_ABI <number>")
endif()
set(number ${CMAKE_MATCH_1})
string(REGEX REPLACE "#define GW__${K}_ABI [0-9]+" "" htext "${htext}")
gw_strip_c("${htext}" canon)

file(READ "${SRC}/src/core/settings_table.h" stext)
string(REGEX MATCHALL "X\\([A-Z0-9_]+," ids "${stext}")
string(APPEND canon "\nsettings ids: ${ids}")
# (from private 9 and backend 18: the shared gw__signals)
file(READ "${SRC}/src/core/signals.h" sigtext)
gw_strip_c("${sigtext}" sigtext)
string(APPEND canon "\nsignals.h: ${sigtext}")

if(KIND STREQUAL "private")
  file(READ "${SRC}/src/core/settings.h" t)
  gw_strip_c("${t}" t)
  string(APPEND canon "\nsettings.h: ${t}")
else()
  file(READ "${SRC}/include/gpuwrap.h" ptext)
  gw_strip_c("${ptext}" ptext)
  foreach(type gw_status gw_memkind gw_ptrinfo)
    if(NOT ptext MATCHES "typedef (enum|struct) {[^}]*} ${type};")
      message(FATAL_ERROR "include/gpuwrap.h: no typedef of ${type} (update abi_check.cmake)")
    endif()
    string(APPEND canon "\n${CMAKE_MATCH_0}")
  endforeach()
endif()
string(SHA256 hash "${canon}")

# The recorded lines of this kind, oldest first: "<kind> <number> <sha256>".
file(STRINGS "${lock}" lines REGEX "^${KIND} ")
set(last_number "")
set(last_hash "")
foreach(line IN LISTS lines)
  if(NOT line MATCHES "^${KIND} ([0-9]+) ([0-9a-f]+)$")
    message(FATAL_ERROR "${lock}: malformed line '${line}'")
  endif()
  if(last_number AND NOT CMAKE_MATCH_1 GREATER last_number)
    message(FATAL_ERROR "${lock}: ${KIND} ABI ${CMAKE_MATCH_1} after ${last_number}: numbers only grow (append a line, never edit one)")
  endif()
  set(last_number ${CMAKE_MATCH_1})
  set(last_hash ${CMAKE_MATCH_2})
endforeach()

math(EXPR next "${number} + 1")
if(NOT number STREQUAL last_number)
  message(FATAL_ERROR
    "GW__${K}_ABI is ${number} (${header}) but the last ${KIND} ABI recorded in "
    "src/core/abi.lock is '${last_number}'. If you bumped it for a change of the "
    "declarations, append this line to src/core/abi.lock:\n  ${KIND} ${number} ${hash}")
endif()
if(NOT hash STREQUAL last_hash)
  message(FATAL_ERROR
    "The declarations the ${KIND} ABI covers changed, but GW__${K}_ABI is still ${number}: "
    "a ${KIND} ABI ${number} library or plugin built before the change would be called "
    "with the new declarations. Bump GW__${K}_ABI to ${next} in ${header} (say what "
    "changed in its comment) and append this line to src/core/abi.lock:\n"
    "  ${KIND} ${next} <the hash this check prints then>\n"
    "(hashed now: ${hash}; recorded for ${number}: ${last_hash})")
endif()
message(STATUS "${KIND} ABI ${number}: the declarations hash as recorded (${hash})")
