# topo's cache size parser (sysfs `size`): seeds in corpus/topo_size/.
if(TARGET kiln_topo)
  kiln_fuzz(topo_size SOURCE ${CMAKE_CURRENT_SOURCE_DIR}/fuzz_topo_size.c LIBS kiln_topo)
endif()
