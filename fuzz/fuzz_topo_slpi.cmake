# topo's parser of GetLogicalProcessorInformationEx buffers (portable code):
# seeds in corpus/topo_slpi/ (a 5900X-like and a 9950X3D-like layout,
# written by scripts/slpi_seeds.py).
if(TARGET kiln_topo)
  kiln_fuzz(topo_slpi SOURCE ${CMAKE_CURRENT_SOURCE_DIR}/fuzz_topo_slpi.c LIBS kiln_topo)
  target_include_directories(fuzz_replay_topo_slpi PRIVATE ${PROJECT_SOURCE_DIR}/src/topo)
  if(TARGET fuzz_topo_slpi)
    target_include_directories(fuzz_topo_slpi PRIVATE ${PROJECT_SOURCE_DIR}/src/topo)
  endif()
endif()
