# Tests of client/: one program per module, and the end-to-end run of
# reconclient against reconserver on loopback.

foreach(noun dataset output)
  mr_add_test(test_client_${noun} SOURCES test_client_${noun}.c LIBS mr_client)
endforeach()
