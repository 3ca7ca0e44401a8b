# Cross build for 64-bit Windows with Debian's mingw-w64 (gcc-mingw-w64-x86-64).
#
#   cmake -S . -B build-win -G Ninja --toolchain cmake/mingw-w64.cmake \
#         -DKILN_WIN_DEPS=$PWD/build-win/third_party/prefix
#
# KILN_WIN_DEPS is the prefix that scripts/windows-deps.sh installs zstd,
# xxhash and json-c into (default: <build folder>/third_party/prefix). zlib
# comes from Debian's libz-mingw-w64-dev in the mingw sysroot. pkg-config only
# looks in those two places, so no library of the build machine can leak into
# the Windows build. Tests run under wine (CMAKE_CROSSCOMPILING_EMULATOR), which
# ctest puts in front of every test command.

set(CMAKE_SYSTEM_NAME Windows)
set(CMAKE_SYSTEM_PROCESSOR x86_64)

set(KILN_MINGW_TRIPLE x86_64-w64-mingw32)
set(KILN_MINGW_SYSROOT /usr/${KILN_MINGW_TRIPLE})

# The posix thread model: C11/pthread code links against winpthreads.
find_program(CMAKE_C_COMPILER NAMES ${KILN_MINGW_TRIPLE}-gcc-posix ${KILN_MINGW_TRIPLE}-gcc
             REQUIRED)
find_program(CMAKE_RC_COMPILER NAMES ${KILN_MINGW_TRIPLE}-windres REQUIRED)
find_program(CMAKE_AR NAMES ${KILN_MINGW_TRIPLE}-gcc-ar-posix ${KILN_MINGW_TRIPLE}-ar REQUIRED)
find_program(CMAKE_RANLIB NAMES ${KILN_MINGW_TRIPLE}-gcc-ranlib-posix ${KILN_MINGW_TRIPLE}-ranlib
             REQUIRED)

# The prefix of the third-party libraries built for the target. try_compile
# projects re-read this file with another binary folder, so pass it on.
if(NOT KILN_WIN_DEPS)
  if(DEFINED ENV{KILN_WIN_DEPS})
    set(KILN_WIN_DEPS $ENV{KILN_WIN_DEPS})
  else()
    set(KILN_WIN_DEPS ${CMAKE_BINARY_DIR}/third_party/prefix)
  endif()
endif()
set(KILN_WIN_DEPS ${KILN_WIN_DEPS} CACHE PATH "Prefix of zstd, xxhash and json-c built for Windows")
set(ENV{KILN_WIN_DEPS} ${KILN_WIN_DEPS})
list(APPEND CMAKE_TRY_COMPILE_PLATFORM_VARIABLES KILN_WIN_DEPS)

set(CMAKE_FIND_ROOT_PATH ${KILN_MINGW_SYSROOT} ${KILN_WIN_DEPS})
set(CMAKE_FIND_ROOT_PATH_MODE_PROGRAM NEVER)
set(CMAKE_FIND_ROOT_PATH_MODE_LIBRARY ONLY)
set(CMAKE_FIND_ROOT_PATH_MODE_INCLUDE ONLY)
set(CMAKE_FIND_ROOT_PATH_MODE_PACKAGE ONLY)

# pkg-config: only the target's .pc files, never the build machine's.
set(ENV{PKG_CONFIG_LIBDIR}
    "${KILN_WIN_DEPS}/lib/pkgconfig:${KILN_MINGW_SYSROOT}/lib/pkgconfig")
set(ENV{PKG_CONFIG_PATH} "")
set(ENV{PKG_CONFIG_SYSROOT_DIR} "")

# Static libgcc and winpthreads: kiln.exe and the tests run without the
# toolchain's DLLs beside them (under wine and on a bare Windows machine).
set(CMAKE_EXE_LINKER_FLAGS_INIT "-static")

# Tests run through scripts/wine-test.sh, which tries once more a program
# that wine failed to start or killed on its way out after every case passed
# (and only those).
find_program(KILN_WINE NAMES wine wine64)
if(KILN_WINE)
  set(CMAKE_CROSSCOMPILING_EMULATOR /bin/sh ${CMAKE_CURRENT_LIST_DIR}/../scripts/wine-test.sh
      ${KILN_WINE})
endif()
