# A usage error of the tool: run CMD ('|'-separated words), expect exit status 2 and a
# message on stderr matching EXPECT (which option, and why its value is wrong).
string(REPLACE "|" ";" CMD "${CMD}")
execute_process(COMMAND ${CMD} RESULT_VARIABLE rc OUTPUT_QUIET ERROR_VARIABLE err)
if(NOT rc EQUAL 2)
  message(FATAL_ERROR "exit status ${rc}, want 2 (bad usage); stderr: ${err}")
endif()
if(NOT err MATCHES "${EXPECT}")
  message(FATAL_ERROR "stderr does not say '${EXPECT}': ${err}")
endif()
