#!/usr/bin/env bash
# Prints the version every build reports: `mcp-exec version`, the MCP handshake's
# serverInfo.version, and the images' org.opencontainers.image.version label. The
# Makefile, scripts/images.sh and scripts/release.sh all ask this script, so the rule
# lives here only.
#
# $MCP_EXEC_VERSION when set; else `git describe --tags --always --dirty` (a release
# tag vX.Y.Z as it is, a later commit as vX.Y.Z-N-gHASH, a changed tree with -dirty, a
# repository without tags as the commit's short hash); else "dev" (no git, or not a
# checkout, as in a source archive).
set -euo pipefail
cd "$(dirname "$0")/.."
if [ -n "${MCP_EXEC_VERSION:-}" ]; then
  v=$MCP_EXEC_VERSION
else
  v=$(git describe --tags --always --dirty 2>/dev/null || echo dev)
fi
# It goes into -ldflags -X and a Dockerfile label: refuse what would not survive either.
if ! [[ "$v" =~ ^[A-Za-z0-9][A-Za-z0-9._+-]{0,127}$ ]]; then
  echo "version.sh: version '$v' must be letters, digits and . _ + - (at most 128)" >&2
  exit 2
fi
echo "$v"
