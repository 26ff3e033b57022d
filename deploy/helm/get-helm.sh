#!/usr/bin/env bash
# Builds the helm CLI used by the chart tests (tests/unit/test_helm_chart.py) and by `make helm-template`.
#
# helm is built from its Go module rather than downloaded as a release tarball: the Go module proxy is the
# one source of Go code every development machine and CI reach. The first build takes about 3 minutes on
# 2 cores, downloads included. The binary is cached (default ~/.cache/streamforest/bin/helm), and the script
# returns at once when the cached binary already has the pinned version.
#
#   deploy/helm/get-helm.sh                 build (or reuse) the pinned helm, print its path
#   HELM_VERSION=v3.21.4 deploy/helm/get-helm.sh
#   HELM_BIN_DIR=/some/dir deploy/helm/get-helm.sh
set -euo pipefail

HELM_VERSION="${HELM_VERSION:-v3.22.0}"
HELM_BIN_DIR="${HELM_BIN_DIR:-${XDG_CACHE_HOME:-$HOME/.cache}/streamforest/bin}"
helm="$HELM_BIN_DIR/helm"

if [[ -x "$helm" ]] && [[ "$("$helm" version --template '{{.Version}}' 2>/dev/null || true)" == "$HELM_VERSION" ]]; then
    echo "$helm"
    exit 0
fi

if ! command -v go >/dev/null 2>&1; then
    echo "get-helm.sh: Go is not installed; install Go (or put a helm $HELM_VERSION binary at $helm)" >&2
    exit 1
fi

mkdir -p "$HELM_BIN_DIR"
echo "get-helm.sh: building helm $HELM_VERSION into $HELM_BIN_DIR (first time: a few minutes)" >&2
# Stamped the way helm's own Makefile does it. Without the version, `helm version` reports the branch
# default; without the Kubernetes version (the minor of the client-go that release is built on, plus one
# major as in helm's Makefile), `helm template` and `helm lint` judge the chart against Kubernetes 1.20.
gomod="$(go mod download -json "helm.sh/helm/v3@$HELM_VERSION" | sed -n 's/.*"GoMod": "\(.*\)".*/\1/p')"
client_go="$(awk '$1 == "k8s.io/client-go" { print $2 }' "$gomod")"   # e.g. v0.37.0
kube_minor="$(echo "$client_go" | cut -d. -f2)"
pkg=helm.sh/helm/v3
ldflags="-s -w -X $pkg/internal/version.version=$HELM_VERSION"
for p in pkg/lint/rules pkg/chartutil; do
    ldflags+=" -X $pkg/$p.k8sVersionMajor=1 -X $pkg/$p.k8sVersionMinor=$kube_minor"
done
GOBIN="$HELM_BIN_DIR" CGO_ENABLED=0 go install -ldflags "$ldflags" "$pkg/cmd/helm@$HELM_VERSION"
echo "$helm"
