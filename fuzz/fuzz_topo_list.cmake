# topo's CPU list and mask parsers (sysfs / cgroup text): seeds in corpus/topo_list/.
if(TARGET kiln_topo)
  kiln_fuzz(topo_list SOURCE ${CMAKE_CURRENT_SOURCE_DIR}/fuzz_topo_list.c LIBS kiln_topo)
endif()
