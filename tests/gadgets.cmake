foreach(t chain pipeline accumulate remove_oversampling fft coil_combine image_out frames placement)
  mr_add_test(test_gadgets_${t} SOURCES test_gadgets_${t}.c LIBS mr_gadget_harness)
endforeach()
