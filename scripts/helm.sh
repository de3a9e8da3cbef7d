#!/usr/bin/env bash
# The pinned helm (tools/helm), built once by scripts/go-tool.sh:
#   scripts/helm.sh          build if missing, print the path of the helm binary on stdout
#   scripts/helm.sh path     print that path (built or not)
exec "$(dirname "$0")/go-tool.sh" helm "$@"
