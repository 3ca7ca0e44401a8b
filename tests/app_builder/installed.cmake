cmake_minimum_required(VERSION 3.20)
# cmake -DPREFIX=dir -DOUT=dir -DSOURCE=examples/app-builder -DGENERATOR=Ninja -DCC=cc
#       -P installed.cmake
# Configures, builds and runs the app-builder example as a separate project
# against the kiln installed in PREFIX (find_package(kiln), the shared
# library). Prints SKIP when the example finds no Vulkan device (exit 77).
file(REMOVE_RECURSE ${OUT})
set(ENV{CMAKE_PREFIX_PATH} "")
execute_process(COMMAND ${CMAKE_COMMAND} -S ${SOURCE} -B ${OUT} -G ${GENERATOR}
                        -DCMAKE_C_COMPILER=${CC} -DCMAKE_PREFIX_PATH=${PREFIX}
                        -DCMAKE_BUILD_TYPE=Release
                RESULT_VARIABLE rc OUTPUT_VARIABLE log ERROR_VARIABLE log)
if(NOT rc EQUAL 0)
  message(FATAL_ERROR "configuring the app-builder example failed:\n${log}")
endif()
execute_process(COMMAND ${CMAKE_COMMAND} --build ${OUT} RESULT_VARIABLE rc OUTPUT_VARIABLE log
                ERROR_VARIABLE log)
if(NOT rc EQUAL 0)
  message(FATAL_ERROR "building the app-builder example failed:\n${log}")
endif()
execute_process(COMMAND ldd ${OUT}/app-builder OUTPUT_VARIABLE deps)
if(NOT deps MATCHES "libkiln\\.so\\.2 => ${PREFIX}/")
  message(FATAL_ERROR "the example does not use ${PREFIX}'s libkiln.so.2:\n${deps}")
endif()
execute_process(COMMAND ${OUT}/app-builder ${OUT}/cache RESULT_VARIABLE rc)
if(rc EQUAL 77)
  message("SKIP: no Vulkan device")
elseif(NOT rc EQUAL 0)
  message(FATAL_ERROR "the app-builder example failed: exit ${rc}")
endif()
