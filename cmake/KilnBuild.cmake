# Shared build settings and the helpers every module folder uses.

if(CMAKE_SYSTEM_NAME STREQUAL "Linux")
  add_compile_definitions(_GNU_SOURCE)
  set(KILN_PLATFORM unix)
elseif(WIN32)
  add_compile_definitions(WIN32_LEAN_AND_MEAN _WIN32_WINNT=0x0A00 __USE_MINGW_ANSI_STDIO=1)
  set(KILN_PLATFORM win)
else()
  set(KILN_PLATFORM unix)
endif()

set(KILN_WARNINGS -Wall -Wextra -Wshadow -Wstrict-prototypes -Wmissing-prototypes
    -Wpointer-arith -Wformat=2 -Wno-unused-parameter)
if(KILN_WERROR)
  list(APPEND KILN_WARNINGS -Werror)
endif()

if(KILN_SANITIZE)
  string(REPLACE "," ";" _kiln_sanitizers "${KILN_SANITIZE}")
  set(KILN_SANITIZE_FLAGS -fsanitize=${KILN_SANITIZE} -fno-omit-frame-pointer)
  if("undefined" IN_LIST _kiln_sanitizers)
    list(APPEND KILN_SANITIZE_FLAGS -fno-sanitize-recover=undefined)
  endif()
  add_compile_options(${KILN_SANITIZE_FLAGS})
  add_link_options(${KILN_SANITIZE_FLAGS})
  add_compile_definitions(KILN_SANITIZED=1)
endif()

if(KILN_FUZZ)
  # Instrument the whole library for coverage, not only the entry points.
  add_compile_options(-fsanitize=fuzzer-no-link -fno-omit-frame-pointer)
endif()

find_package(Threads REQUIRED)
find_package(PkgConfig REQUIRED)
pkg_check_modules(ZSTD REQUIRED IMPORTED_TARGET libzstd)
pkg_check_modules(XXHASH REQUIRED IMPORTED_TARGET libxxhash)
pkg_check_modules(SHADERC IMPORTED_TARGET shaderc)
pkg_check_modules(VULKAN IMPORTED_TARGET vulkan)
pkg_check_modules(JSONC REQUIRED IMPORTED_TARGET json-c)
pkg_check_modules(ZLIB REQUIRED IMPORTED_TARGET zlib)

# kiln_shaderc: shaderc's C API as one INTERFACE target (KILN_HAVE_SHADERC
# says whether there is one that links). Where the shared libshaderc does
# not link by itself (Debian 12's leaves glslang's symbols undefined, and
# its private copy of glslang's SPIR-V back end does not match the system
# glslang), the static shaderc_combined is linked with glslang and
# SPIRV-Tools instead.
include(CheckCSourceCompiles)
set(_kiln_shaderc_probe "#include <shaderc/shaderc.h>
int main(void) { shaderc_compiler_release(shaderc_compiler_initialize()); return 0; }")
set(_kiln_shaderc_libs)
if(TARGET PkgConfig::SHADERC)
  set(CMAKE_REQUIRED_LIBRARIES PkgConfig::SHADERC)
  check_c_source_compiles("${_kiln_shaderc_probe}" KILN_SHADERC_SHARED_LINKS)
  unset(CMAKE_REQUIRED_LIBRARIES)
  if(KILN_SHADERC_SHARED_LINKS)
    set(_kiln_shaderc_libs PkgConfig::SHADERC)
  else()
    find_library(KILN_SHADERC_COMBINED shaderc_combined)
    set(_kiln_glslang_libs)
    foreach(lib SPIRV glslang MachineIndependent GenericCodeGen OSDependent OGLCompiler
                SPIRV-Tools-opt SPIRV-Tools)
      find_library(KILN_LIB_${lib} NAMES lib${lib}.a ${lib})
      if(KILN_LIB_${lib})
        list(APPEND _kiln_glslang_libs ${KILN_LIB_${lib}})
      endif()
    endforeach()
    if(KILN_SHADERC_COMBINED)
      # glslang's static libraries refer to each other in a cycle.
      set(_kiln_static_shaderc ${KILN_SHADERC_COMBINED} -Wl,--start-group ${_kiln_glslang_libs}
          -Wl,--end-group stdc++ Threads::Threads m)
      set(CMAKE_REQUIRED_INCLUDES ${SHADERC_INCLUDE_DIRS})
      set(CMAKE_REQUIRED_LIBRARIES ${_kiln_static_shaderc})
      check_c_source_compiles("${_kiln_shaderc_probe}" KILN_SHADERC_STATIC_LINKS)
      unset(CMAKE_REQUIRED_LIBRARIES)
      unset(CMAKE_REQUIRED_INCLUDES)
      if(KILN_SHADERC_STATIC_LINKS)
        set(_kiln_shaderc_libs ${_kiln_static_shaderc})
      endif()
    endif()
  endif()
endif()
add_library(kiln_shaderc INTERFACE)
if(_kiln_shaderc_libs)
  set(KILN_HAVE_SHADERC ON)
  target_include_directories(kiln_shaderc INTERFACE ${SHADERC_INCLUDE_DIRS})
  target_link_libraries(kiln_shaderc INTERFACE ${_kiln_shaderc_libs})
else()
  set(KILN_HAVE_SHADERC OFF)
  message(STATUS "kiln: no shaderc that links; the GLSL translator and the vk tests are left out")
endif()

# kiln_module(NAME SOURCES src... DEPS targets...)
# Makes the static library kiln_NAME from one src/ folder. Its private
# headers stay private: only include/ is exported to dependents.
function(kiln_module name)
  cmake_parse_arguments(M "" "" "SOURCES;DEPS" ${ARGN})
  add_library(kiln_${name} STATIC ${M_SOURCES})
  target_include_directories(kiln_${name}
    PUBLIC ${PROJECT_SOURCE_DIR}/include
    PRIVATE ${CMAKE_CURRENT_SOURCE_DIR} ${PROJECT_SOURCE_DIR}/src/common)
  target_compile_options(kiln_${name} PRIVATE ${KILN_WARNINGS})
  target_link_libraries(kiln_${name} PUBLIC ${M_DEPS})
  set_target_properties(kiln_${name} PROPERTIES C_VISIBILITY_PRESET hidden
                        POSITION_INDEPENDENT_CODE ON)
  set_property(GLOBAL APPEND PROPERTY KILN_MODULES kiln_${name})
endfunction()

# kiln_spirv_tools: the SPIR-V validator's C API (SPIRV-Tools), used by the
# vk module to check a stage before a driver sees it (KILN_HAVE_SPIRV_TOOLS
# says whether there is one).
find_path(KILN_SPIRV_TOOLS_INCLUDE spirv-tools/libspirv.h)
find_library(KILN_SPIRV_TOOLS_LIB NAMES libSPIRV-Tools.a SPIRV-Tools)
add_library(kiln_spirv_tools INTERFACE)
if(KILN_SPIRV_TOOLS_INCLUDE AND KILN_SPIRV_TOOLS_LIB)
  set(KILN_HAVE_SPIRV_TOOLS ON)
  target_include_directories(kiln_spirv_tools INTERFACE ${KILN_SPIRV_TOOLS_INCLUDE})
  target_link_libraries(kiln_spirv_tools INTERFACE ${KILN_SPIRV_TOOLS_LIB} stdc++ m)
  target_compile_definitions(kiln_spirv_tools INTERFACE KILN_HAVE_SPIRV_TOOLS=1)
else()
  set(KILN_HAVE_SPIRV_TOOLS OFF)
  message(STATUS "kiln: no SPIRV-Tools; Vulkan stages are not validated before the driver")
endif()
