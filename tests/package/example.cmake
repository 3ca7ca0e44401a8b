cmake_minimum_required(VERSION 3.20)
# cmake -DWAY=cmake|cmake-static|pkg-config-static -DPREFIX=dir -DOUT=dir
#       -DSOURCE=examples/emulator -DGENERATOR=Ninja -DCC=cc -P example.cmake
# Configures, builds and runs the emulator example as a separate project
# against the kiln installed in PREFIX.
file(REMOVE_RECURSE ${OUT})
file(GLOB_RECURSE pcs ${PREFIX}/*/kiln.pc)
list(GET pcs 0 pc)
get_filename_component(pcdir ${pc} DIRECTORY)
# Only the installed kiln: no kiln.pc or kilnConfig.cmake from elsewhere.
set(ENV{PKG_CONFIG_PATH} ${pcdir})
set(ENV{CMAKE_PREFIX_PATH} "")
execute_process(COMMAND ${CMAKE_COMMAND} -S ${SOURCE} -B ${OUT} -G ${GENERATOR}
                        -DCMAKE_C_COMPILER=${CC} -DKILN_LINK=${WAY} -DCMAKE_PREFIX_PATH=${PREFIX}
                        -DCMAKE_BUILD_TYPE=Release
                RESULT_VARIABLE rc OUTPUT_VARIABLE log ERROR_VARIABLE log)
if(NOT rc EQUAL 0)
  message(FATAL_ERROR "configuring the example (${WAY}) failed:\n${log}")
endif()
execute_process(COMMAND ${CMAKE_COMMAND} --build ${OUT} RESULT_VARIABLE rc OUTPUT_VARIABLE log
                ERROR_VARIABLE log)
if(NOT rc EQUAL 0)
  message(FATAL_ERROR "building the example (${WAY}) failed:\n${log}")
endif()
# The shared build must run from the installed libkiln.so, not a copy in the
# build tree: ldd says which one it found.
if(WAY STREQUAL "cmake")
  execute_process(COMMAND ldd ${OUT}/emulator OUTPUT_VARIABLE deps)
  if(NOT deps MATCHES "libkiln\\.so\\.2 => ${PREFIX}/")
    message(FATAL_ERROR "the example does not use ${PREFIX}'s libkiln.so.2:\n${deps}")
  endif()
elseif(WAY MATCHES "static")
  execute_process(COMMAND ldd ${OUT}/emulator OUTPUT_VARIABLE deps)
  if(deps MATCHES "libkiln")
    message(FATAL_ERROR "the static example links a shared libkiln:\n${deps}")
  endif()
endif()
execute_process(COMMAND ${OUT}/emulator ${OUT}/cache RESULT_VARIABLE rc)
if(NOT rc EQUAL 0)
  message(FATAL_ERROR "the example (${WAY}) failed: exit ${rc}")
endif()
