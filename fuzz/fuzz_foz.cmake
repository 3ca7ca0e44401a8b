# The Fossilize archive reader (src/foz): seeds in corpus/foz/.
if(TARGET kiln_foz)
  kiln_fuzz(foz SOURCE ${CMAKE_CURRENT_SOURCE_DIR}/fuzz_foz.c LIBS kiln_foz)
endif()
