#!/usr/bin/env bash
# Build the worker image with podman on a machine without Docker and without an image registry.
#
#   deploy/image/build.sh            # -> localhost/streamforest:<version> and :latest
#
# 1. A Debian bookworm base image (Python 3.11 from Debian) made with debootstrap from Debian's
#    packages, kept as a tarball in ~/.cache/streamforest/image and imported with `podman import`
#    once (both reused by later runs).
# 2. A wheelhouse in build/wheelhouse: the pinned runtime dependencies
#    (deploy/docker/requirements.txt) and the build backend (build-requirements.txt), downloaded on
#    the host with pip, so the image build reads no package index (containers here do not trust
#    PyPI's certificate chain) and installs the same files every time.
# 3. `podman build` of deploy/docker/Dockerfile on that base (flags in deploy/image/podman).
#
# Needs root (podman and debootstrap as root), debootstrap, podman, runc and Python 3.11 with pip
# on the host. Variables: IMAGE (default localhost/streamforest), BASE_IMAGE (skip step 1 and use
# this base, e.g. docker.io/library/python:3.11-slim), DEBIAN_MIRROR, PYTHON, STREAMFOREST_CACHE.
set -euo pipefail

repo="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
cd "$repo"
podman=("$repo/deploy/image/podman")
cache="${STREAMFOREST_CACHE:-$HOME/.cache/streamforest}/image"
mirror="${DEBIAN_MIRROR:-http://deb.debian.org/debian}"
python="${PYTHON:-$(command -v .venv/bin/python || command -v python3.11 || command -v python3)}"
image="${IMAGE:-localhost/streamforest}"
version="$("$python" -c 'import tomllib; print(tomllib.load(open("pyproject.toml", "rb"))["project"]["version"])')"
revision="$(git rev-parse HEAD 2>/dev/null || echo unknown)"
git diff --quiet HEAD -- 2>/dev/null || revision="$revision-dirty"
source_url="${SOURCE_URL:-$(git remote get-url origin 2>/dev/null || echo "streamforest@$revision")}"
started=$(date +%s)

say() { echo "build.sh: $*" >&2; }

# -- 1. base image ---------------------------------------------------------------------------
# What the base holds: Debian's minimal package set, Python 3.11 with venv, CA certificates.
# Its name carries a digest of that recipe, so changing the recipe makes a new base.
base_packages="python3,python3-venv,ca-certificates"
base_tag="bookworm-$(echo "$base_packages" | sha256sum | cut -c1-8)"
base_tar="$cache/debian-$base_tag.tar.gz"
if [ -z "${BASE_IMAGE:-}" ]; then
    BASE_IMAGE="localhost/streamforest-base:$base_tag"
    if ! "${podman[@]}" image exists "$BASE_IMAGE"; then
        if [ ! -s "$base_tar" ]; then
            command -v debootstrap >/dev/null || { say "debootstrap is required (apt-get install debootstrap)"; exit 1; }
            mkdir -p "$cache"
            rootfs="$(mktemp -d "$cache/rootfs.XXXXXX")"
            trap 'rm -rf "$rootfs"' EXIT
            say "debootstrap bookworm from $mirror (about a minute)"
            debootstrap --variant=minbase --include="$base_packages" bookworm "$rootfs" "$mirror" \
                > "$cache/debootstrap.log" 2>&1 || { tail -20 "$cache/debootstrap.log" >&2; exit 1; }
            # package lists and caches are not needed at run time; a container has its own /dev
            chroot "$rootfs" apt-get clean
            rm -rf "$rootfs"/var/lib/apt/lists/* "$rootfs"/var/cache/apt/*.bin "$rootfs"/var/log/*.log
            tar --numeric-owner --exclude='./dev/*' --exclude='./proc/*' --exclude='./sys/*' \
                -C "$rootfs" -czf "$base_tar.tmp" .
            mv "$base_tar.tmp" "$base_tar"
            rm -rf "$rootfs"
            trap - EXIT
        fi
        say "importing $base_tar as $BASE_IMAGE"
        "${podman[@]}" import \
            --change 'ENV PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin' \
            --change 'ENV LANG=C.UTF-8' --change 'CMD ["/bin/bash"]' \
            "$base_tar" "$BASE_IMAGE" >/dev/null
    fi
fi
say "base image $BASE_IMAGE"

# -- 2. wheelhouse ---------------------------------------------------------------------------
# Downloaded again only when the pinned lists change (a stamp holds their digest).
wheelhouse="$repo/build/wheelhouse"
stamp="$wheelhouse/.requirements.sha256"
digest="$(cat deploy/docker/requirements.txt deploy/docker/build-requirements.txt | sha256sum | cut -c1-64)"
if [ "$(cat "$stamp" 2>/dev/null)" != "$digest" ]; then
    say "wheelhouse: downloading the pinned wheels into build/wheelhouse"
    rm -rf "$wheelhouse"
    mkdir -p "$wheelhouse"
    # the image's interpreter is CPython 3.11 on glibc 2.36 (bookworm): ask for exactly those wheels
    "$python" -m pip download --quiet --disable-pip-version-check --no-deps --only-binary=:all: \
        --implementation cp --python-version 3.11 --abi cp311 --abi abi3 --abi none \
        --platform manylinux_2_36_x86_64 --platform manylinux_2_28_x86_64 \
        --platform manylinux_2_17_x86_64 --platform manylinux2014_x86_64 --platform any \
        -r deploy/docker/requirements.txt -r deploy/docker/build-requirements.txt -d "$wheelhouse"
    echo "$digest" > "$stamp"
fi

# -- 3. the worker image ---------------------------------------------------------------------
say "podman build $image:$version (revision $revision)"
# the labels that change with each build also go on the command line: podman 4.3 reuses the
# Dockerfile's LABEL layer from its cache when only the build arguments changed, which left a
# rebuilt image naming the revision of an earlier build
"${podman[@]}" build --format docker -f deploy/docker/Dockerfile \
    --build-arg BASE_IMAGE="$BASE_IMAGE" --build-arg VERSION="$version" \
    --build-arg REVISION="$revision" --build-arg SOURCE="$source_url" \
    --label org.opencontainers.image.version="$version" \
    --label org.opencontainers.image.revision="$revision" \
    --label org.opencontainers.image.source="$source_url" \
    -t "$image:$version" -t "$image:latest" .

size=$("${podman[@]}" image inspect --format '{{.Size}}' "$image:latest")
say "built $image:$version and $image:latest in $(( $(date +%s) - started )) s;" \
    "size $(( size / 1000000 )) MB ($size bytes)"
