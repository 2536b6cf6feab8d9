#!/usr/bin/env bash
# Installs the Debian packages that tools/os-packages.txt lists for PURPOSE (test or bench) and that this machine
# lacks, so that `make test` and `make bench` alone set up a fresh machine. As root it runs apt-get; otherwise
# `sudo -n` (never a password prompt: make may run unattended); when neither can, it stops at once with the
# exact command to run.
# Usage: tools/ensure-os-packages.sh PURPOSE   (TOOLHOST_OS_PACKAGES names another list, for the tests)
set -euo pipefail

purpose=${1:?usage: $0 test|bench}
list=${TOOLHOST_OS_PACKAGES:-$(dirname "$0")/os-packages.txt}

missing_packages=()
missing_things=()
while read -r line_purpose needed package _; do
  [[ -z $line_purpose || $line_purpose == \#* || $line_purpose != "$purpose" ]] && continue
  if [[ $needed == /* ]]; then
    [[ -e $needed ]] && continue
  else
    command -v "$needed" >/dev/null && continue
  fi
  missing_things+=("$needed")
  [[ " ${missing_packages[*]} " == *" $package "* ]] || missing_packages+=("$package")
done <"$list"

((${#missing_packages[@]})) || exit 0

packages=${missing_packages[*]}
echo "make $purpose needs ${missing_things[*]}: installing the Debian packages $packages" >&2
if ! command -v apt-get >/dev/null; then
  echo "error: this machine has no apt-get; install the equivalent of the Debian packages $packages" >&2
  exit 2
fi
install="apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends $packages"
if [[ $(id -u) == 0 ]]; then
  bash -c "$install"
elif command -v sudo >/dev/null && sudo -n true 2>/dev/null; then
  sudo -n bash -c "$install"
else
  echo "error: installing needs root, and sudo -n cannot run without a password here. Run:" >&2
  echo "  sudo apt-get update && sudo apt-get install -y --no-install-recommends $packages" >&2
  exit 2
fi

# A package that installed but does not provide what the list expects is a wrong line in the list.
for needed in "${missing_things[@]}"; do
  if [[ $needed == /* ]]; then [[ -e $needed ]]; else command -v "$needed" >/dev/null; fi || {
    echo "error: $needed is still missing after installing $packages (see $list)" >&2
    exit 1
  }
done
