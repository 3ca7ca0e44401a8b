# Shared build settings and the helpers every module folder uses.
#
# Nothing here changes a parent project: the platform definitions and the
# sanitizer and fuzzer flags are kept in variables and put on kiln's own
# targets only, by kiln_apply_build_flags() at the end of the top-level
# CMakeLists.txt.

if(CMAKE_SYSTEM_NAME STREQUAL "Linux")
  set(KILN_PLATFORM_DEFS _GNU_SOURCE)
  set(KILN_PLATFORM unix)
elseif(WIN32)
  set(KILN_PLATFORM_DEFS WIN32_LEAN_AND_MEAN _WIN32_WINNT=0x0A00 __USE_MINGW_ANSI_STDIO=1)
  set(KILN_PLATFORM win)
else()
  set(KILN_PLATFORM_DEFS)
  set(KILN_PLATFORM unix)
endif()

set(KILN_WARNINGS -Wall -Wextra -Wshadow -Wstrict-prototypes -Wmissing-prototypes
    -Wpointer-arith -Wformat=2 -Wno-unused-parameter)
if(KILN_WERROR)
  list(APPEND KILN_WARNINGS -Werror)
endif()

set(KILN_FLAGS_COMPILE)
set(KILN_FLAGS_LINK)
set(KILN_FLAGS_DEFS ${KILN_PLATFORM_DEFS})
if(KILN_SANITIZE)
  string(REPLACE "," ";" _kiln_sanitizers "${KILN_SANITIZE}")
  set(KILN_SANITIZE_FLAGS -fsanitize=${KILN_SANITIZE} -fno-omit-frame-pointer)
  if("undefined" IN_LIST _kiln_sanitizers)
    list(APPEND KILN_SANITIZE_FLAGS -fno-sanitize-recover=undefined)
  endif()
  list(APPEND KILN_FLAGS_COMPILE ${KILN_SANITIZE_FLAGS})
  list(APPEND KILN_FLAGS_LINK ${KILN_SANITIZE_FLAGS})
  list(APPEND KILN_FLAGS_DEFS KILN_SANITIZED=1)
endif()

if(KILN_FUZZ)
  # Instrument the whole library for coverage, not only the entry points.
  list(APPEND KILN_FLAGS_COMPILE -fsanitize=fuzzer-no-link -fno-omit-frame-pointer)
endif()

# kiln_apply_build_flags(DIR): puts the flags above on every target defined
# in DIR and its subfolders (kiln's own targets; a parent's never).
function(kiln_apply_build_flags dir)
  get_property(_targets DIRECTORY ${dir} PROPERTY BUILDSYSTEM_TARGETS)
  foreach(t ${_targets})
    get_target_property(_type ${t} TYPE)
    if(_type MATCHES "^(STATIC_LIBRARY|SHARED_LIBRARY|MODULE_LIBRARY|OBJECT_LIBRARY|EXECUTABLE)$")
      set_property(TARGET ${t} APPEND PROPERTY COMPILE_DEFINITIONS ${KILN_FLAGS_DEFS})
      set_property(TARGET ${t} APPEND PROPERTY COMPILE_OPTIONS ${KILN_FLAGS_COMPILE})
      if(NOT _type MATCHES "^(STATIC_LIBRARY|OBJECT_LIBRARY)$")
        set_property(TARGET ${t} APPEND PROPERTY LINK_OPTIONS ${KILN_FLAGS_LINK})
      endif()
    endif()
  endforeach()
  get_property(_subdirs DIRECTORY ${dir} PROPERTY SUBDIRECTORIES)
  foreach(d ${_subdirs})
    kiln_apply_build_flags(${d})
  endforeach()
endfunction()

# The version macros of include/kiln/common.h come from project(VERSION ...).
configure_file(${PROJECT_SOURCE_DIR}/include/kiln/version.h.in
               ${PROJECT_BINARY_DIR}/include/kiln/version.h @ONLY)
set(KILN_INCLUDE_DIRS ${PROJECT_SOURCE_DIR}/include ${PROJECT_BINARY_DIR}/include)

find_package(Threads REQUIRED)
find_package(PkgConfig REQUIRED)

# zstd and xxhash: a parent project's targets when it has them (or the ones
# named by KILN_ZSTD_TARGET / KILN_XXHASH_TARGET), else the system's through
# pkg-config. Either way the modules link PkgConfig::ZSTD / PkgConfig::XXHASH.
set(KILN_ZSTD_TARGET "" CACHE STRING "A target that provides zstd (default: the parent's, else pkg-config)")
set(KILN_XXHASH_TARGET "" CACHE STRING "A target that provides xxhash (default: the parent's, else pkg-config)")
function(kiln_dependency var pkg module)
  set(_use "${${var}}")
  if(NOT _use)
    foreach(t ${ARGN})
      if(TARGET ${t})
        set(_use ${t})
        break()
      endif()
    endforeach()
  endif()
  if(TARGET PkgConfig::${pkg})
    return()
  elseif(_use)
    message(STATUS "kiln: ${module} from the target ${_use}")
    add_library(PkgConfig::${pkg} INTERFACE IMPORTED)
    set_property(TARGET PkgConfig::${pkg} PROPERTY INTERFACE_LINK_LIBRARIES ${_use})
  else()
    pkg_check_modules(${pkg} REQUIRED IMPORTED_TARGET ${module})
  endif()
endfunction()
kiln_dependency(KILN_ZSTD_TARGET ZSTD libzstd zstd::libzstd zstd::libzstd_static
                zstd::libzstd_shared libzstd_static libzstd_shared)
kiln_dependency(KILN_XXHASH_TARGET XXHASH libxxhash xxHash::xxhash xxhash::xxhash xxhash)
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
# Makes the static library kiln_NAME from one folder. Its private headers
# stay private: only include/ is exported to dependents. A module under src/
# is part of the core: its objects go into libkiln (src/CMakeLists.txt). The
# module archives are what kiln's own tests and tools link (they reach the
# kiln__ names); KILN_STATIC says so to include/kiln/common.h.
function(kiln_module name)
  cmake_parse_arguments(M "" "" "SOURCES;DEPS" ${ARGN})
  add_library(kiln_${name} STATIC ${M_SOURCES})
  target_include_directories(kiln_${name}
    PUBLIC ${KILN_INCLUDE_DIRS}
    PRIVATE ${CMAKE_CURRENT_SOURCE_DIR} ${PROJECT_SOURCE_DIR}/src/common)
  target_compile_options(kiln_${name} PRIVATE ${KILN_WARNINGS})
  target_compile_definitions(kiln_${name} PUBLIC KILN_STATIC)
  target_link_libraries(kiln_${name} PUBLIC ${M_DEPS})
  set_target_properties(kiln_${name} PROPERTIES C_VISIBILITY_PRESET hidden
                        POSITION_INDEPENDENT_CODE ON)
  string(FIND "${CMAKE_CURRENT_SOURCE_DIR}/" "${PROJECT_SOURCE_DIR}/src/" _at)
  if(NOT _at EQUAL 0)
    set_property(GLOBAL APPEND PROPERTY KILN_TOOL_MODULES kiln_${name})
    return()
  endif()
  set_property(GLOBAL APPEND PROPERTY KILN_MODULES kiln_${name})
  if(WIN32 AND KILN_BUILD_SHARED)
    # The DLL's objects carry dllexport, so they are compiled once more.
    add_library(kiln_${name}_dll OBJECT ${M_SOURCES})
    target_include_directories(kiln_${name}_dll
      PRIVATE ${KILN_INCLUDE_DIRS} ${CMAKE_CURRENT_SOURCE_DIR} ${PROJECT_SOURCE_DIR}/src/common)
    target_compile_options(kiln_${name}_dll PRIVATE ${KILN_WARNINGS})
    target_compile_definitions(kiln_${name}_dll PRIVATE KILN_BUILDING_DLL)
    target_link_libraries(kiln_${name}_dll PRIVATE ${M_DEPS})
    set_target_properties(kiln_${name}_dll PROPERTIES C_VISIBILITY_PRESET hidden)
  endif()
endfunction()

# Vulkan headers to put before the system's (a folder holding vulkan/), for
# what newer headers declare: the host tier of driver binaries
# (VK_KHR_pipeline_binary) is compiled only where they know it.
set(KILN_VULKAN_INCLUDE_DIR "" CACHE PATH "Vulkan headers to use before the system's")

# kiln_vulkan_headers(TARGET...)
# Gives each target that exists, and its DLL twin (kiln_<m>_dll, Windows),
# the Vulkan headers: the found package's, else KILN_VULKAN_INCLUDE. Only the
# headers: Vulkan itself is opened at run time (src/vk).
function(kiln_vulkan_headers)
  foreach(t ${ARGN})
    foreach(v ${t} ${t}_dll)
      if(NOT TARGET ${v})
        continue()
      endif()
      if(KILN_VULKAN_INCLUDE_DIR)
        # Newer headers first (VK_KHR_pipeline_binary: docs/vk.md).
        target_include_directories(${v} BEFORE PRIVATE ${KILN_VULKAN_INCLUDE_DIR})
      endif()
      if(VULKAN_FOUND)
        target_include_directories(${v} PRIVATE ${VULKAN_INCLUDE_DIRS})
      elseif(KILN_VULKAN_INCLUDE)
        target_include_directories(${v} PRIVATE ${KILN_VULKAN_INCLUDE})
      endif()
    endforeach()
  endforeach()
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
