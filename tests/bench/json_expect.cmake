# Included by the quick benches' checks (stream_quick.cmake,
# load_quick.cmake): expect_number() reads the caller's ${json} (the JSON
# text) and ${OUT} (its file, for the message).

# Fails unless the member at the path (a list of keys) is a number.
function(expect_number)
  string(JSON type ERROR_VARIABLE err TYPE "${json}" ${ARGN})
  if(err OR NOT type STREQUAL "NUMBER")
    string(REPLACE ";" "." path "${ARGN}")
    message(FATAL_ERROR "${path} is not a number (${type}${err}) in ${OUT}")
  endif()
endfunction()
