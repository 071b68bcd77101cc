#!/usr/bin/env bash
# Install what CAIS needs to build and test on Debian 12, only what is missing.
# Usage: scripts/install-deps.sh [--fuzz]   (as root; --fuzz adds clang for libFuzzer)
set -euo pipefail

pkgs=(build-essential meson ninja-build pkg-config python3
	dpdk-dev libdpdk-dev libnuma-dev libjansson-dev libcmocka-dev libssl-dev libsqlite3-dev
	iproute2 ethtool iputils-ping procps kmod nftables)
if [ "${1:-}" = "--fuzz" ]; then
	pkgs+=(clang llvm libclang-rt-14-dev)
fi

missing=()
for p in "${pkgs[@]}"; do
	dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if [ ${#missing[@]} -eq 0 ]; then
	echo "install-deps: everything is installed"
	exit 0
fi
if [ "$(id -u)" -ne 0 ]; then
	echo "install-deps: missing ${missing[*]}; run as root (sudo $0)" >&2
	exit 1
fi
echo "install-deps: installing ${missing[*]}"
export DEBIAN_FRONTEND=noninteractive
apt-get update -qq
apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
echo "install-deps: done"
