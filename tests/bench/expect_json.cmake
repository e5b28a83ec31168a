# Included by the quick benches' checks (cmake -P): expect_number(KEY...)
# fails unless the member of ${json} at that path is a number (${OUT}
# names the file in the message).
function(expect_number)
  string(JSON type ERROR_VARIABLE err TYPE "${json}" ${ARGN})
  if(err OR NOT type STREQUAL "NUMBER")
    string(REPLACE ";" "." path "${ARGN}")
    message(FATAL_ERROR "${path} is not a number (${type}${err}) in ${OUT}")
  endif()
endfunction()
