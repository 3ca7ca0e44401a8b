cmake_minimum_required(VERSION 3.20)
# cmake -DPREFIX=dir -DOUT=dir -DSOURCE=examples/NAME -DEXE=NAME -DGENERATOR=Ninja -DCC=cc
#       [-DRUNS=2 -DEXPECT=regex] -P installed_example.cmake
# Configures, builds and runs an example (examples/app-builder,
# examples/runtime) as a separate project against the kiln installed in
# PREFIX (find_package(kiln), the shared library). It runs RUNS times
# (default 1) on one cache folder, run i with "--expect-warm i-1" when
# RUNS > 1; the last run's output must match EXPECT when given. Prints SKIP
# when the example finds no Vulkan device (exit 77).
file(REMOVE_RECURSE ${OUT})
set(ENV{PKG_CONFIG_PATH} "")
set(ENV{CMAKE_PREFIX_PATH} "")
if(NOT RUNS)
  set(RUNS 1)
endif()
execute_process(COMMAND ${CMAKE_COMMAND} -S ${SOURCE} -B ${OUT} -G ${GENERATOR}
                        -DCMAKE_C_COMPILER=${CC} -DCMAKE_PREFIX_PATH=${PREFIX}
                        -DCMAKE_BUILD_TYPE=Release
                RESULT_VARIABLE rc OUTPUT_VARIABLE log ERROR_VARIABLE log)
if(NOT rc EQUAL 0)
  message(FATAL_ERROR "configuring the ${EXE} example failed:\n${log}")
endif()
execute_process(COMMAND ${CMAKE_COMMAND} --build ${OUT} RESULT_VARIABLE rc OUTPUT_VARIABLE log
                ERROR_VARIABLE log)
if(NOT rc EQUAL 0)
  message(FATAL_ERROR "building the ${EXE} example failed:\n${log}")
endif()
execute_process(COMMAND ldd ${OUT}/${EXE} OUTPUT_VARIABLE deps)
if(NOT deps MATCHES "libkiln\\.so\\.2 => ${PREFIX}/")
  message(FATAL_ERROR "the example does not use ${PREFIX}'s libkiln.so.2:\n${deps}")
endif()
foreach(run RANGE 1 ${RUNS})
  set(args)
  if(RUNS GREATER 1)
    math(EXPR expect "${run} - 1")
    set(args --expect-warm ${expect})
  endif()
  execute_process(COMMAND ${OUT}/${EXE} ${OUT}/cache ${args} RESULT_VARIABLE rc
                  OUTPUT_VARIABLE out ERROR_VARIABLE err)
  message("${EXE} run ${run}:\n${out}${err}")
  if(rc EQUAL 77)
    message("SKIP: no Vulkan device")
    return()
  elseif(NOT rc EQUAL 0)
    message(FATAL_ERROR "the ${EXE} example failed (run ${run}): exit ${rc}")
  endif()
endforeach()
if(EXPECT AND NOT out MATCHES "${EXPECT}")
  message(FATAL_ERROR "the ${EXE} example's last run does not say '${EXPECT}'")
endif()
