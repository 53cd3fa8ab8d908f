#!/usr/bin/env bash
# cuda-deps.sh installs what the CUDA backend needs to build on Debian 12
# (bookworm): nvcc 11.8 to turn kernels/cuda/src/*.cu into PTX, the CUDA 11.8
# headers that gorgonia.org/cu's cgo code compiles against, and libcuda1,
# the driver's user-space library it links with (on a machine without a GPU
# it simply reports "no device", so tagged test binaries still start and
# run their no-GPU checks). gorgonia.org/cu does not build against CUDA 13
# headers, which is why the distribution's 11.8 toolkit is used rather than
# a newer one; the driver API is backward compatible, so the binaries run
# on newer drivers.
#
# Idempotent: it does nothing when nvcc and cuda.h are already present.
# Needs root (or sudo) and network access to the Debian mirror.
set -euo pipefail

if command -v nvcc >/dev/null 2>&1 && [ -f /usr/include/cuda.h ]; then
	echo "cuda-deps: already installed ($(nvcc --version | tail -n 1))"
	exit 0
fi

SUDO=""
if [ "$(id -u)" -ne 0 ]; then
	SUDO="sudo"
fi

. /etc/os-release
if [ "${VERSION_CODENAME:-}" != "bookworm" ]; then
	echo "cuda-deps: this script targets Debian 12 (bookworm), found ${PRETTY_NAME:-unknown}" >&2
	exit 1
fi

# The CUDA toolkit lives in Debian's non-free component, which a default
# install does not enable. A separate sources file, pointing at the same
# mirror the system already uses for bookworm's main component, leaves the
# system's own entries untouched.
mirror=""
if [ -f /etc/apt/sources.list.d/debian.sources ]; then
	mirror=$(awk '/^URIs:/ {u = $2} /^Suites:/ && / bookworm( |$)/ {print u; exit}' /etc/apt/sources.list.d/debian.sources)
fi
if [ -z "$mirror" ] && [ -f /etc/apt/sources.list ]; then
	mirror=$(awk '$1 == "deb" && $3 == "bookworm" {print $2; exit}' /etc/apt/sources.list)
fi
if [ -z "$mirror" ]; then
	echo "cuda-deps: no apt source for bookworm found to add the non-free component to" >&2
	exit 1
fi
src=/etc/apt/sources.list.d/nonfree.sources
if [ ! -f "$src" ]; then
	$SUDO tee "$src" >/dev/null <<SOURCES
Types: deb
URIs: $mirror
Suites: bookworm bookworm-updates
Components: contrib non-free
Signed-By: /usr/share/keyrings/debian-archive-keyring.gpg
SOURCES
fi

export DEBIAN_FRONTEND=noninteractive
$SUDO apt-get update
$SUDO apt-get install -y --no-install-recommends nvidia-cuda-toolkit libcuda1

nvcc --version | tail -n 1
