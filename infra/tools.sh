#!/usr/bin/env bash
# Install the Go command-line tools the tests drive as real clients of the core:
#   grpc-health-probe  (test/rpc/health.test.ts: the Kubernetes-style probe)
#   grpcurl            (test/rpc/health.test.ts: a generic gRPC client)
# with `go install` from the Go module proxy, at pinned versions, into
# $(go env GOBIN) or $(go env GOPATH)/bin. Idempotent: a tool whose binary is
# already there at the pinned version is skipped. Prints where each one is.
# Needs Go (1.26+ for grpc-health-probe v0.4.61; older Go fetches a toolchain
# when GOTOOLCHAIN allows it).
# Usage: infra/tools.sh
set -euo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/common.sh"

# name|module path (the one `go version -m` reports)|package to install|version
TOOLS=(
  "grpc-health-probe|github.com/grpc-ecosystem/grpc-health-probe|github.com/grpc-ecosystem/grpc-health-probe|v0.4.61"
  "grpcurl|github.com/fullstorydev/grpcurl|github.com/fullstorydev/grpcurl/cmd/grpcurl|v1.9.4"
)

command -v go >/dev/null || die "go not found (install Go 1.26+ from https://go.dev/dl/)"

GOBIN_DIR="$(go env GOBIN)"
[[ -n $GOBIN_DIR ]] || GOBIN_DIR="$(go env GOPATH)/bin"

# The module version a Go binary was built from ("" when unknown).
built_version() {
  local binary=$1 module=$2
  go version -m "$binary" 2>/dev/null | awk -v m="$module" '$1 == "mod" && $2 == m { print $3 }'
}

for tool in "${TOOLS[@]}"; do
  IFS='|' read -r name module package version <<<"$tool"
  binary="$GOBIN_DIR/$name"
  if [[ -x $binary && "$(built_version "$binary" "$module")" == "$version" ]]; then
    log "$name $version already installed: $binary"
    continue
  fi
  log "installing $name $version (go install $package@$version) ..."
  t0=$(now_ms)
  GOBIN="$GOBIN_DIR" go install "$package@$version"
  [[ -x $binary ]] || die "go install finished but $binary is missing"
  log "$name $version installed in $(elapsed "$t0") s: $binary"
done

case ":$PATH:" in
  *":$GOBIN_DIR:"*) ;;
  *) log "note: $GOBIN_DIR is not on PATH; the tests look there anyway" ;;
esac
