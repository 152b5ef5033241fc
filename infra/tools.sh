#!/usr/bin/env bash
# Install the tools the tests drive as real clients of the core and of the protos:
#   grpc-health-probe     (test/transport/health.test.ts: the Kubernetes-style probe)
#   grpcurl               (test/transport/health.test.ts, test/transport/reflection.test.ts: a generic gRPC client)
#   protoc-gen-go         (test/repo/proto-codegen.test.ts: Go messages)
#   protoc-gen-go-grpc    (test/repo/proto-codegen.test.ts: grpc-go clients and servers)
#   protoc-gen-connect-go (test/repo/proto-codegen.test.ts: connect-go clients and handlers)
#   helm                  (test/repo/helm-chart.test.ts: `helm lint` and `helm template` of deploy/helm/; v4, the
#                          major the module proxy serves beside v3)
#   ghz                   (bench/overhead.ts: the gRPC load generator; v0.120.0 is not in the module
#                          proxy's version list, but `go install …@v0.120.0` fetches it; @latest is v0.93.0,
#                          which cannot read proto3 `optional`)
# with `go install` from the Go module proxy, at pinned versions, into
# $(go env GOBIN) or $(go env GOPATH)/bin; and grpcio-tools (Python's protoc
# with the gRPC plugin, test/repo/proto-codegen.test.ts) from PyPI, at the
# versions pinned in infra/proto-python.requirements.txt, into a virtual
# environment of its own, .infra/proto-python (ignored by git).
# Idempotent: a tool whose binary is already there at the pinned version, and
# a venv that already holds exactly the pinned requirements, are skipped.
# Prints where each one is.
# Needs Go (1.26+ for grpc-health-probe v0.4.61; older Go fetches a toolchain
# when GOTOOLCHAIN allows it) and python3 (3.9+) with its venv module.
# Usage: infra/tools.sh [go|python]   (default: both; infra/setup.sh runs the
# two parts side by side, since `go install` waits on the CPU and pip on the network)
set -euo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/common.sh"

part=${1:-all}
case $part in
  all|go|python) ;;
  *) die "unknown part '$part' (expected go or python)" ;;
esac

# name|module path (the one `go version -m` reports)|package to install|version
TOOLS=(
  "grpc-health-probe|github.com/grpc-ecosystem/grpc-health-probe|github.com/grpc-ecosystem/grpc-health-probe|v0.4.61"
  "grpcurl|github.com/fullstorydev/grpcurl|github.com/fullstorydev/grpcurl/cmd/grpcurl|v1.9.4"
  "protoc-gen-go|google.golang.org/protobuf|google.golang.org/protobuf/cmd/protoc-gen-go|v1.36.12"
  "protoc-gen-go-grpc|google.golang.org/grpc/cmd/protoc-gen-go-grpc|google.golang.org/grpc/cmd/protoc-gen-go-grpc|v1.6.2"
  "protoc-gen-connect-go|connectrpc.com/connect|connectrpc.com/connect/cmd/protoc-gen-connect-go|v1.21.1"
  "ghz|github.com/bojand/ghz|github.com/bojand/ghz/cmd/ghz|v0.120.0"
  "helm|helm.sh/helm/v4|helm.sh/helm/v4/cmd/helm|v4.3.2"
)

# The module version a Go binary was built from ("" when unknown).
built_version() {
  local binary=$1 module=$2
  go version -m "$binary" 2>/dev/null | awk -v m="$module" '$1 == "mod" && $2 == m { print $3 }'
}

# The Go tools, each skipped when its binary is there at the pinned version. The
# missing ones are installed side by side (their module downloads overlap, and the
# build cache is shared and safe to use at once); each one's output is printed whole.
go_tools() {
  local GOBIN_DIR tool name module package version binary t0 logs i rc failed=()
  local pids=() names=()
  command -v go >/dev/null || die "go not found (install Go 1.26+ from https://go.dev/dl/)"

  GOBIN_DIR="$(go env GOBIN)"
  [[ -n $GOBIN_DIR ]] || GOBIN_DIR="$(go env GOPATH)/bin"

  logs=$(mktemp -d)
  for tool in "${TOOLS[@]}"; do
    IFS='|' read -r name module package version <<<"$tool"
    binary="$GOBIN_DIR/$name"
    if [[ -x $binary && "$(built_version "$binary" "$module")" == "$version" ]]; then
      log "$name $version already installed: $binary"
      continue
    fi
    log "installing $name $version (go install $package@$version) ..."
    (
      t0=$(now_ms)
      GOBIN="$GOBIN_DIR" go install "$package@$version"
      [[ -x $binary ]] || die "go install finished but $binary is missing"
      log "$name $version installed in $(elapsed "$t0") s: $binary"
    ) >"$logs/$name" 2>&1 &
    pids+=($!) names+=("$name")
  done
  for i in "${!pids[@]}"; do
    rc=0
    wait "${pids[$i]}" || rc=$?
    cat "${logs}/${names[$i]}" >&2
    [[ $rc -eq 0 ]] || failed+=("${names[$i]}")
  done
  rm -rf "$logs"
  [[ ${#failed[@]} -eq 0 ]] || die "go install failed: ${failed[*]}"

  case ":$PATH:" in
    *":$GOBIN_DIR:"*) ;;
    *) log "note: $GOBIN_DIR is not on PATH; the tests look there anyway" ;;
  esac
}

[[ $part == python ]] || go_tools

# grpcio-tools: `python -m grpc_tools.protoc` with --python_out, --pyi_out and --grpc_python_out.
[[ $part == go ]] || python_venv proto-python "$INFRA_DIR/proto-python.requirements.txt" \
  'import grpc, grpc_tools, google.protobuf; print("grpcio", grpc.__version__, "protobuf", google.protobuf.__version__)'
