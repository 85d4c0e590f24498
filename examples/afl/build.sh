#!/bin/sh
# build.sh [OUT]: build the fuzz target of this campaign (target.c) with
# AFL++'s compiler and AddressSanitizer, as OUT (default: ./target beside
# this script). Needs Debian's afl++ and clang (apt-get install afl++ clang).
set -eu
here=$(cd "$(dirname "$0")" && pwd)
out=${1:-$here/target}
cc=$(command -v afl-clang-fast || command -v afl-cc) || {
  echo "build.sh: afl-clang-fast or afl-cc not found: apt-get install afl++ clang" >&2
  exit 1
}
AFL_USE_ASAN=1 AFL_QUIET=1 "$cc" -O1 -g -o "$out" "$here/target.c"
