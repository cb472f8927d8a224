# A usage error of the tool: run CMD ('|'-separated words), expect exit status 2 and a
# message on stderr matching EXPECT (which option, and why its value is wrong), then one
# line pointing at --help: not the whole help, which buried the message.
string(REPLACE "|" ";" CMD "${CMD}")
list(REMOVE_ITEM CMD "")
execute_process(COMMAND ${CMD} RESULT_VARIABLE rc OUTPUT_QUIET ERROR_VARIABLE err)
if(NOT rc EQUAL 2)
  message(FATAL_ERROR "exit status ${rc}, want 2 (bad usage); stderr: ${err}")
endif()
if(NOT err MATCHES "${EXPECT}")
  message(FATAL_ERROR "stderr does not say '${EXPECT}': ${err}")
endif()
if(NOT err MATCHES "\nRun '[^']*--help' for the usage[.]\n$")
  message(FATAL_ERROR "stderr does not end in the line pointing at --help: ${err}")
endif()
if(err MATCHES "usage:")
  message(FATAL_ERROR "stderr holds the whole help, not just the error: ${err}")
endif()
