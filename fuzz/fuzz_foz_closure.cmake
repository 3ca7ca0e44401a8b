# Fossilize pipeline closures (src/foz/foz_state.c): seeds in corpus/foz_closure/.
if(TARGET kiln_foz)
  kiln_fuzz(foz_closure SOURCE ${CMAKE_CURRENT_SOURCE_DIR}/fuzz_foz_closure.c LIBS kiln_foz)
endif()
