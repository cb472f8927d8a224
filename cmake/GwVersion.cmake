# The version's one source is project(gpuwrap VERSION ...) in the top CMakeLists.txt. This
# writes it into ${CMAKE_BINARY_DIR}/include/gpuwrap/version.h (GW_GENERATED_INCLUDE_DIR),
# which <gpuwrap.h> includes, the install ships, and python/setup.py reads. Included by the
# top CMakeLists.txt and by src/backends/gpu when that is built from a scratch driver
# project; there the version is read from the top CMakeLists.txt's text.
if(PROJECT_NAME STREQUAL "gpuwrap")
  set(GW_VERSION ${PROJECT_VERSION})
else()
  file(STRINGS "${CMAKE_CURRENT_LIST_DIR}/../CMakeLists.txt" _gw_line
       REGEX "^project\\(gpuwrap VERSION [0-9]+\\.[0-9]+\\.[0-9]+")
  string(REGEX REPLACE "^project\\(gpuwrap VERSION ([0-9]+\\.[0-9]+\\.[0-9]+).*" "\\1" GW_VERSION
         "${_gw_line}")
  unset(_gw_line)
endif()
if(NOT GW_VERSION MATCHES "^([0-9]+)\\.([0-9]+)\\.([0-9]+)$")
  message(FATAL_ERROR "gpuwrap: no MAJOR.MINOR.PATCH version in project() (got '${GW_VERSION}')")
endif()
set(GW_VERSION_MAJOR ${CMAKE_MATCH_1})
set(GW_VERSION_MINOR ${CMAKE_MATCH_2})
set(GW_VERSION_PATCH ${CMAKE_MATCH_3})
set(GW_GENERATED_INCLUDE_DIR "${CMAKE_BINARY_DIR}/include")
configure_file("${CMAKE_CURRENT_LIST_DIR}/version.h.in" "${GW_GENERATED_INCLUDE_DIR}/gpuwrap/version.h" @ONLY)
