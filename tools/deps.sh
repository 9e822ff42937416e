#!/usr/bin/env bash
# deps.sh PKG... — install the Debian packages that are missing (as root), or print the command.
set -u
missing=()
for p in "$@"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if [ ${#missing[@]} -eq 0 ]; then
  echo "deps: all present ($*)"
  exit 0
fi
cmd="apt-get update && apt-get install -y ${missing[*]}"
if [ "$(id -u)" = 0 ]; then
  echo "deps: installing ${missing[*]}"
  export DEBIAN_FRONTEND=noninteractive
  apt-get update -qq && apt-get install -y -qq "${missing[@]}" || { echo "deps: apt-get failed; run: $cmd" >&2; exit 1; }
else
  echo "deps: missing ${missing[*]}; as root run: $cmd" >&2
  exit 1
fi
