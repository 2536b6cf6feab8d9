#!/usr/bin/env bash
# Fails when the committed generated code differs from what `make generate` makes of proto/ now.
# Usage: tools/check-generated.sh FRESH_TREE DIR... — FRESH_TREE holds a fresh generation laid out like the repo;
# each DIR (relative to the repo root) must match it file for file, with no file missing or left over.
set -euo pipefail
fresh=$1
shift
status=0
for dir in "$@"; do
  while IFS= read -r file; do
    if ! cmp -s "$fresh/$dir/$file" "$dir/$file"; then
      echo "generated code is stale: $dir/$file (run make generate)"
      status=1
    fi
  done < <(cd "$fresh/$dir" && find . -type f | sed "s|^\./||" | sort)
  while IFS= read -r file; do
    if [[ ! -e "$fresh/$dir/$file" ]]; then
      echo "generated file without a proto: $dir/$file (run make generate)"
      status=1
    fi
  done < <(cd "$dir" && find . -type f -not -path '*/__pycache__/*' \( -name '*_pb2*' -o -name '*.pb.go' -o -name '*_pb.ts' \) | sed "s|^\./||" | sort)
done
exit $status
