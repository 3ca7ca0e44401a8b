if(TARGET kiln_prep)
  kiln_fuzz(isolate_frame SOURCE ${CMAKE_CURRENT_SOURCE_DIR}/fuzz_isolate_frame.c
            LIBS kiln_prep)
  # The frames' header is the prep module's own, over the Vulkan headers.
  set(_kiln_iso_inc ${PROJECT_SOURCE_DIR}/src/prep ${VULKAN_INCLUDE_DIRS} ${KILN_VULKAN_INCLUDE})
  target_include_directories(fuzz_replay_isolate_frame PRIVATE ${_kiln_iso_inc})
  if(KILN_FUZZ)
    target_include_directories(fuzz_isolate_frame PRIVATE ${_kiln_iso_inc})
  endif()
endif()
