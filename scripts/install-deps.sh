#!/usr/bin/env bash
# Install what CAIS needs to build and test on Debian 12, only what is missing.
# Usage: scripts/install-deps.sh [--fuzz] [--bench] [--python]
#   (as root; --fuzz adds clang for libFuzzer; --bench adds OpenMPI, the
#   end-to-end benchmark's baseline, and gnuplot for the benchmarks' plots;
#   --python adds PyTorch (CPU) and numpy for /usr/bin/python3: the package
#   python/cais, its tests and examples/)
set -euo pipefail

pkgs=(build-essential meson ninja-build pkg-config python3
	dpdk-dev libdpdk-dev libnuma-dev libjansson-dev libcmocka-dev libssl-dev libsqlite3-dev
	iproute2 ethtool iputils-ping procps kmod nftables)
for a in "$@"; do
	case "$a" in
	--fuzz) pkgs+=(clang llvm libclang-rt-14-dev) ;;
	--bench) pkgs+=(openmpi-bin libopenmpi-dev gnuplot-nox) ;;
	--python) pkgs+=(python3-torch python3-numpy) ;;
	-h | --help)
		sed -n '2,7p' "$0" | sed 's/^# \{0,1\}//'
		exit 0
		;;
	*)
		echo "install-deps: unknown argument '$a' (--fuzz, --bench, --python)" >&2
		exit 2
		;;
	esac
done

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
