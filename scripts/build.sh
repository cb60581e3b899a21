#!/usr/bin/env bash
# build.sh DIR [CMAKE_OPTION…] — configures and builds DIR (make build), with
# a line of progress instead of a minute of silence:
#   payonce: building build/ on 2 cores: 10% 20% … 100% (48 s)
# Compiler diagnostics are printed as they come; the exit status is the
# build's.
set -euo pipefail
cd "$(dirname "$0")/.."
dir=${1:?build directory}; shift
jobs=$(nproc 2>/dev/null || echo 2)
cmake -S . -B "$dir" "$@" >/dev/null
start=$SECONDS
printf 'payonce: building %s/ on %s cores:' "$dir" "$jobs"
last=-10 # -1: a diagnostic was the last thing printed
status=0
while IFS= read -r line; do
  if [[ $line =~ ^\[\ *([0-9]+)%\] ]]; then
    p=${BASH_REMATCH[1]}
    if [ "$p" -ge $((last + 10)) ]; then
      [ "$last" -eq -1 ] && printf '\npayonce: building %s/ (go on):' "$dir"
      printf ' %s%%' "$p"; last=$p
    fi
  elif [[ $line != make* && $line != gmake* && -n $line ]]; then
    printf '\n%s' "$line" # a diagnostic: shown as it comes
    last=-1
  fi
done < <(cmake --build "$dir" -j"$jobs" 2>&1; echo "$?" >"$dir/.build-status")
status=$(cat "$dir/.build-status" 2>/dev/null || echo 1)
rm -f "$dir/.build-status"
if [ "$status" -ne 0 ]; then
  printf '\npayonce: the build failed (exit %s)\n' "$status"
  exit "$status"
fi
printf ' (%d s)\n' "$((SECONDS - start))"
