# The recorded-state check of Fossilize closures (src/foz/foz_check.c):
# seeds in corpus/foz_check/ (good closures and one per refusal rule).
if(TARGET kiln_foz)
  kiln_fuzz(foz_check SOURCE ${CMAKE_CURRENT_SOURCE_DIR}/fuzz_foz_check.c LIBS kiln_foz)
endif()
