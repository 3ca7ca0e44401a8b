#!/bin/sh
# Prepares the Windows cross build: installs Debian's mingw-w64 toolchain and
# wine when they are missing (scripts/deps.sh windows), then fetches the
# pinned Debian source packages of zstd, xxhash and json-c and builds them as
# static libraries for x86_64-w64-mingw32 into BUILD/third_party/prefix.
#
# usage: scripts/windows-deps.sh [BUILD]     (BUILD defaults to build-win)
#
# Reproducible: every source package is pinned by version and by the SHA-256
# of its .dsc, and dpkg-source checks the tarballs against the .dsc. Nothing
# fetched or built here goes into the source tree. A second run finds the
# stamp of the same pins and does nothing.
set -eu

root=$(cd "$(dirname "$0")/.." && pwd)
build=${1:-build-win}
case "$build" in /*) ;; *) build="$root/$build" ;; esac
tp="$build/third_party"
prefix="$tp/prefix"
jobs=${JOBS:-2}

# Pinned Debian (bookworm) source packages: name, version, SHA-256 of the .dsc.
zstd_pkg=libzstd zstd_ver=1.5.4+dfsg2-5
zstd_dsc=8f602f92b575aa8b5e979196fb6ee82d78f233521dc9636526d3ecba1f63c1b1
xxhash_pkg=xxhash xxhash_ver=0.8.1-1
xxhash_dsc=4a961627c06efc8fa3bc4b06ee9dba6cfaf092f2550b88d63e9218a2728721b4
jsonc_pkg=json-c jsonc_ver=0.16-2
jsonc_dsc=e91baf0603ed23df4c54030df4cd5e8371a7436006e2b85efab7ee4f1d9718c1
deb_src=${KILN_DEB_SRC:-http://deb.debian.org/debian bookworm main}

# --- Debian packages --------------------------------------------------------
sh "$root/scripts/deps.sh" windows

# --- Third-party libraries for the target -----------------------------------
stamp="$prefix/.kiln-windows-deps"
vkh_ver=$(dpkg-query -W -f='${Version}' libvulkan-dev)
want_stamp="zstd=$zstd_ver xxhash=$xxhash_ver json-c=$jsonc_ver vulkan-headers=$vkh_ver"
if [ -f "$stamp" ] && [ "$(cat "$stamp")" = "$want_stamp" ]; then
    exit 0
fi
echo "kiln: building $want_stamp for x86_64-w64-mingw32 in $tp" >&2
rm -rf "$tp/src" "$tp/build" "$prefix"
mkdir -p "$tp/dl" "$tp/src" "$tp/build" "$prefix/lib/pkgconfig" "$prefix/include"

# A private apt state that knows only the deb-src line: the system's apt
# configuration is neither read nor changed.
apt_dir="$tp/apt"
mkdir -p "$apt_dir/lists/partial"
echo "deb-src $deb_src" >"$apt_dir/sources.list"
aopt="-o Dir::Etc::SourceList=$apt_dir/sources.list -o Dir::Etc::SourceParts=/dev/null
  -o Dir::State::Lists=$apt_dir/lists -o APT::Sandbox::User=root"

have_dsc() { # name version sha256
    dsc="$tp/dl/$1_$(echo "$2" | sed 's/^[0-9]*://').dsc"
    [ -f "$dsc" ] && echo "$3  $dsc" | sha256sum -c --status
}
need=""
have_dsc $zstd_pkg $zstd_ver $zstd_dsc || need="$need $zstd_pkg=$zstd_ver"
have_dsc $xxhash_pkg $xxhash_ver $xxhash_dsc || need="$need $xxhash_pkg=$xxhash_ver"
have_dsc $jsonc_pkg $jsonc_ver $jsonc_dsc || need="$need $jsonc_pkg=$jsonc_ver"
if [ -n "$need" ]; then
    # shellcheck disable=SC2086
    apt-get $aopt update -qq
    # shellcheck disable=SC2086
    (cd "$tp/dl" && apt-get $aopt source -qq --download-only $need)
fi

unpack() { # name version sha256 -> prints the source folder
    v=$(echo "$2" | sed 's/^[0-9]*://')
    dsc="$tp/dl/$1_$v.dsc"
    if ! echo "$3  $dsc" | sha256sum -c --status; then
        echo "kiln: $dsc does not match its pinned SHA-256" >&2
        exit 1
    fi
    out="$tp/src/$1-$v"
    # The pinned .dsc vouches for the tarballs (dpkg-source checks their
    # hashes); Debian's patches are applied as for Debian's own build.
    dpkg-source --no-copy -q -x "$dsc" "$out" >/dev/null 2>"$tp/src/$1.log" || {
        cat "$tp/src/$1.log" >&2
        exit 1
    }
    echo "$out"
}

cc=x86_64-w64-mingw32-gcc-posix
ar=x86_64-w64-mingw32-ar
toolchain="$root/cmake/mingw-w64.cmake"

# Runs a build step with its output in a log, shown only when it fails.
quiet() { # log-name command...
    log="$tp/build/$1.log"
    shift
    "$@" >"$log" 2>&1 || {
        cat "$log" >&2
        echo "kiln: failed: $*" >&2
        exit 1
    }
}

cmake_target() { # source-folder build-folder extra-args...
    src=$1 bld=$2
    shift 2
    name=$(basename "$bld")
    quiet "$name-configure" cmake -S "$src" -B "$bld" -G Ninja --toolchain "$toolchain" \
        -DKILN_WIN_DEPS="$prefix" -DCMAKE_BUILD_TYPE=Release -DCMAKE_INSTALL_PREFIX="$prefix" \
        -DCMAKE_INSTALL_LIBDIR=lib -DBUILD_SHARED_LIBS=OFF -DBUILD_TESTING=OFF "$@"
    quiet "$name-build" cmake --build "$bld" -j "$jobs"
    quiet "$name-install" cmake --install "$bld"
}

# zstd: its lib Makefile (C only; zstd's CMake project also wants a C++
# compiler). The static library is single-threaded, as Debian's libzstd.a is:
# kiln spreads work over its own workers, never over zstd's.
zsrc=$(unpack $zstd_pkg $zstd_ver $zstd_dsc)
zmake="make -C $zsrc/lib -j$jobs CC=$cc AR=$ar ZSTD_LEGACY_SUPPORT=0 PREFIX=$prefix LIBDIR=$prefix/lib"
# shellcheck disable=SC2086
quiet zstd-build $zmake libzstd.a libzstd.pc
# shellcheck disable=SC2086
quiet zstd-install $zmake install-static install-includes install-pc

# xxhash: one C file; the header-only parts are installed beside it.
xsrc=$(unpack $xxhash_pkg $xxhash_ver $xxhash_dsc)
mkdir -p "$tp/build/xxhash"
quiet xxhash-build $cc -O2 -c "$xsrc/xxhash.c" -o "$tp/build/xxhash/xxhash.o"
quiet xxhash-ar $ar rcs "$prefix/lib/libxxhash.a" "$tp/build/xxhash/xxhash.o"
cp "$xsrc/xxhash.h" "$xsrc/xxh3.h" "$prefix/include/"
xxver=$(echo "$xxhash_ver" | sed 's/-.*//')
cat >"$prefix/lib/pkgconfig/libxxhash.pc" <<EOF
prefix=$prefix
libdir=\${prefix}/lib
includedir=\${prefix}/include

Name: xxhash
Description: extremely fast hash algorithm (static, x86_64-w64-mingw32)
Version: $xxver
Libs: -L\${libdir} -lxxhash
Cflags: -I\${includedir}
EOF

# json-c: its CMake build, static library only.
jsrc=$(unpack $jsonc_pkg $jsonc_ver $jsonc_dsc)
cmake_target "$jsrc" "$tp/build/json-c" -DBUILD_STATIC_LIBS=ON -DDISABLE_WERROR=ON

# The Vulkan headers: the same text on every platform, so Debian's
# libvulkan-dev provides them. Only the headers: on Windows kiln loads
# vulkan-1.dll at run time.
mkdir -p "$prefix/include/vulkan" "$prefix/include/vk_video"
cp /usr/include/vulkan/*.h "$prefix/include/vulkan/"
cp /usr/include/vk_video/*.h "$prefix/include/vk_video/"

# Each library's pkg-config file must exist, or the kiln configure would
# silently look elsewhere.
for pc in libzstd libxxhash json-c; do
    if [ ! -f "$prefix/lib/pkgconfig/$pc.pc" ]; then
        echo "kiln: $pc.pc was not installed into $prefix/lib/pkgconfig" >&2
        exit 1
    fi
done
echo "$want_stamp" >"$stamp"
echo "kiln: Windows third-party libraries are in $prefix" >&2
