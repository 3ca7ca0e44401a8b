cmake_minimum_required(VERSION 3.20)
# cmake -DPREFIX=dir -DOUT=dir -DSOURCE=examples/runtime -DGENERATOR=Ninja -DCC=cc
#       -P example_runtime.cmake
# Builds examples/runtime as a separate project against the kiln installed
# in PREFIX (find_package(kiln), the shared library) and runs it twice on
# one cache folder: the first run stores the program it meets during play,
# the second must find it and build it at its warm start (--expect-warm 1).
file(REMOVE_RECURSE ${OUT})
set(ENV{PKG_CONFIG_PATH} "")
set(ENV{CMAKE_PREFIX_PATH} "")
execute_process(COMMAND ${CMAKE_COMMAND} -S ${SOURCE} -B ${OUT} -G ${GENERATOR}
                        -DCMAKE_C_COMPILER=${CC} -DCMAKE_PREFIX_PATH=${PREFIX}
                        -DCMAKE_BUILD_TYPE=Release
                RESULT_VARIABLE rc OUTPUT_VARIABLE log ERROR_VARIABLE log)
if(NOT rc EQUAL 0)
  message(FATAL_ERROR "configuring examples/runtime failed:\n${log}")
endif()
execute_process(COMMAND ${CMAKE_COMMAND} --build ${OUT} RESULT_VARIABLE rc OUTPUT_VARIABLE log
                ERROR_VARIABLE log)
if(NOT rc EQUAL 0)
  message(FATAL_ERROR "building examples/runtime failed:\n${log}")
endif()
execute_process(COMMAND ldd ${OUT}/runtime OUTPUT_VARIABLE deps)
if(NOT deps MATCHES "libkiln\\.so\\.[0-9]+ => ${PREFIX}/")
  message(FATAL_ERROR "examples/runtime does not use ${PREFIX}'s libkiln.so:\n${deps}")
endif()
foreach(run 1 2)
  math(EXPR expect "${run} - 1")
  execute_process(COMMAND ${OUT}/runtime ${OUT}/cache --expect-warm ${expect}
                  RESULT_VARIABLE rc OUTPUT_VARIABLE out ERROR_VARIABLE err)
  message("run ${run}:\n${out}${err}")
  if(rc EQUAL 77)
    message("SKIP: no Vulkan device")
    return()
  endif()
  if(NOT rc EQUAL 0)
    message(FATAL_ERROR "examples/runtime run ${run} failed: exit ${rc}")
  endif()
endforeach()
if(NOT out MATCHES "warm start: 1 records, 1 built" OR NOT out MATCHES "already in the cache")
  message(FATAL_ERROR "the second run did not find and build the stored program")
endif()
