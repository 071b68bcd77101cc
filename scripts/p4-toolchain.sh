#!/usr/bin/env bash
# p4-toolchain.sh: build the P4 toolchain that dataplane/p4/cais.p4 needs
# (tests/parity/run-parity.sh --target bmv2, tests/p4/bmv2_e2e.sh), from
# source trees given to it, on Debian 12 (bookworm). Nothing is downloaded by
# this script but Debian packages (step deps).
#
#   p4c    p4c-bm2-ss (BMv2 back end) and the p4c driver  -> $PREFIX/bin
#   BMv2   simple_switch and simple_switch_CLI (Thrift)   -> $PREFIX/bin
#
# Usage: scripts/p4-toolchain.sh [options] [deps|src|p4c|bmv2|all]...  (default: all)
#   --src DIR      folder holding the six sources as OWNER+NAME/repo (bare git
#                  directories, e.g. what the `fetch` tool brings) or OWNER+NAME
#                  (plain source trees): p4lang+p4c, p4lang+behavioral-model,
#                  p4lang+p4runtime, abseil+abseil-cpp, protocolbuffers+protobuf,
#                  ivmai+bdwgc.  (env MIRROR; or P4C_GIT=..., BMV2_GIT=... each)
#   --prefix DIR   install prefix (default /opt/p4; env PREFIX)
#   --work DIR     sources, build trees, logs (default /var/tmp/cais-p4build; env WORK)
#   --jobs N       parallel compile jobs (default: the CPUs; env JOBS)
#   -h, --help     this text
#
# Sources: p4c and BMv2 at the given tree's HEAD (or P4C_REF/BMV2_REF); p4c's
# dependencies at the commits p4c's own CMake files pin (Abseil 20240722.1,
# Protobuf v25.3, BDWGC 8.2.6 = 7f1503db, P4Runtime ec4eb5ef). p4c normally
# downloads them with CMake FetchContent; here FETCHCONTENT_SOURCE_DIR_<NAME>
# points at the exported trees. Versions built and build times:
# dataplane/p4/README.md.
#
# Idempotent: sources are exported once per commit (a stamp file), cmake and
# configure are re-run only when their build dir lacks the result, make only
# rebuilds what changed, install overwrites. Re-running after a failure
# resumes. Compiles run under `nice -n 19`. Takes 1.5-2 hours on 2 cores.
set -euo pipefail

# ---- inputs -------------------------------------------------------------
steps=()
while [ $# -gt 0 ]; do
	case $1 in
	--src) MIRROR=${2:?--src needs a folder}; shift 2 ;;
	--prefix) PREFIX=${2:?--prefix needs a folder}; shift 2 ;;
	--work) WORK=${2:?--work needs a folder}; shift 2 ;;
	--jobs) JOBS=${2:?--jobs needs a number}; shift 2 ;;
	-h | --help) sed -n '2,/^set -euo/p' "$0" | sed '$d; s/^# \{0,1\}//'; exit 0 ;;
	deps | src | p4c | bmv2 | all) steps+=("$1"); shift ;;
	*) echo "p4-toolchain: unknown argument '$1' (see --help)" >&2; exit 2 ;;
	esac
done
MIRROR=${MIRROR:-}   # the folder holding the snapshots as OWNER+NAME/repo; or set each *_GIT
# where NAME's source is: $MIRROR/NAME/repo (bare git) or else $MIRROR/NAME (a tree)
src_of() { if [ -d "$MIRROR/$1/repo" ]; then echo "$MIRROR/$1/repo"; else echo "$MIRROR/$1"; fi; }
P4C_GIT=${P4C_GIT:-$(src_of p4lang+p4c)}
BMV2_GIT=${BMV2_GIT:-$(src_of p4lang+behavioral-model)}
P4RUNTIME_GIT=${P4RUNTIME_GIT:-$(src_of p4lang+p4runtime)}
ABSEIL_GIT=${ABSEIL_GIT:-$(src_of abseil+abseil-cpp)}
PROTOBUF_GIT=${PROTOBUF_GIT:-$(src_of protocolbuffers+protobuf)}
BDWGC_GIT=${BDWGC_GIT:-$(src_of ivmai+bdwgc)}

# Commits. p4c and BMv2: the snapshot's HEAD unless given. The others: what
# p4c's own CMake files pin (cmake/Abseil.cmake 20240722.1, cmake/Protobuf.cmake
# 25.3, cmake/BDWGC.cmake 7f1503db = 8.2.6, CMakeLists.txt p4runtime ec4eb5ef);
# step `src` prints what p4c pins so a mismatch is visible.
P4C_REF=${P4C_REF:-HEAD}
BMV2_REF=${BMV2_REF:-HEAD}
P4RUNTIME_REF=${P4RUNTIME_REF:-ec4eb5ef70dbcbcbf2f8357a4b2b8c2f218845a5}
ABSEIL_REF=${ABSEIL_REF:-20240722.1}
PROTOBUF_REF=${PROTOBUF_REF:-v25.3}
BDWGC_REF=${BDWGC_REF:-7f1503dbfe254e77678666a0e09b735add064b57}

WORK=${WORK:-/var/tmp/cais-p4build}   # sources, build trees, logs
PREFIX=${PREFIX:-/opt/p4}    # install prefix ($PREFIX/bin)
JOBS=${JOBS:-$(nproc)}
NICE=(nice -n 19)
# The Python that simple_switch_CLI runs with: it needs the `thrift` module
# (Debian's python3-thrift is installed for /usr/bin/python3 only, and a
# pyenv python3 earlier in PATH would not find it).
CLI_PYTHON=${CLI_PYTHON:-/usr/bin/python3}

SRC=$WORK/src
LOGS=$WORK/logs
mkdir -p "$SRC" "$LOGS"

say() { echo "[p4-toolchain $(date +%H:%M:%S)] $*"; }

# ---- step deps: Debian packages ----------------------------------------
deps() {
	say "installing Debian build dependencies"
	# Needed: compilers/autotools/cmake, bison+flex, Boost, GMP (p4c),
	# Thrift + pcap + nanomsg + xxhash + jsoncpp + Boost program_options/
	# system/filesystem/thread (BMv2), python3-thrift (simple_switch_CLI),
	# iproute2 + ethtool (tests/parity/run-parity.sh). Not used by this
	# build but installed on the machine it was made on (harmless): libgc-dev
	# (p4c builds BDWGC itself), libabsl-dev, protobuf-compiler and
	# libprotobuf-dev (p4c builds Abseil 20240722 and Protobuf 25.3 itself;
	# BMv2 needs protobuf only for --with-packet-trace), tcpdump.
	apt-get update
	DEBIAN_FRONTEND=noninteractive apt-get install -y --no-install-recommends \
		build-essential g++ git cmake pkg-config automake autoconf libtool \
		bison flex libfl-dev \
		libboost-dev libboost-iostreams-dev libboost-graph-dev \
		libboost-program-options-dev libboost-system-dev \
		libboost-filesystem-dev libboost-thread-dev \
		libgmp-dev libgc-dev libabsl-dev protobuf-compiler libprotobuf-dev \
		libthrift-dev thrift-compiler python3 python3-thrift \
		libpcap-dev libnanomsg-dev libxxhash-dev libjsoncpp-dev \
		libssl-dev libevent-dev ccache \
		iproute2 ethtool tcpdump
}

# ---- step src: export the sources --------------------------------------
# export NAME GITDIR REF: $SRC/NAME holds `git archive REF`, stamped with the
# full commit id (re-exported only when the commit changes).
export_src() {
	local name=$1 git=$2 ref=$3 commit
	[ -d "$git" ] || { echo "p4-toolchain: no source for $name at $git (see --help: --src)" >&2; exit 1; }
	if ! git --git-dir="$git" rev-parse --git-dir >/dev/null 2>&1; then
		# A plain source tree: copied as it is; its version is what it holds
		# (the pinned ref cannot be checked).
		if [ -f "$SRC/$name/.exported-commit" ] &&
			[ "$(cat "$SRC/$name/.exported-commit")" = "tree:$git" ]; then
			say "$name: tree $git already copied"
			return 0
		fi
		say "$name: copying the tree $git (not a git directory: $ref not checked)"
		rm -rf "${SRC:?}/$name"
		cp -a "$git" "$SRC/$name"
		echo "tree:$git" >"$SRC/$name/.exported-commit"
		return 0
	fi
	commit=$(git --git-dir="$git" rev-parse --verify "$ref^{commit}")
	if [ -f "$SRC/$name/.exported-commit" ] &&
		[ "$(cat "$SRC/$name/.exported-commit")" = "$commit" ]; then
		say "$name: $commit already exported"
		return 0
	fi
	say "$name: exporting $ref = $commit"
	rm -rf "${SRC:?}/$name"
	mkdir -p "$SRC/$name"
	# A snapshot may lack some blobs (snapshots may leave out
	# files of 4 MiB and more, e.g. p4c's docs/compiler-design.pptx): leave
	# those paths out of the archive instead of failing, and say which (git
	# archive still prints "error: invalid object ..." for them; harmless).
	local missing=() p
	local tree
	tree=$(git --git-dir="$git" ls-tree -r "$commit" | awk '$2 == "blob" { print $3 "\t" $4 }')
	while read -r p; do
		[ -n "$p" ] && missing+=(":(exclude)$p")
	done < <(cut -f1 <<<"$tree" |
		git --git-dir="$git" cat-file --batch-check='%(objectname) %(objecttype)' |
		awk '$2 == "missing" { print $1 }' |
		while read -r sha; do awk -F'\t' -v s="$sha" '$1 == s { print $2 }' <<<"$tree"; done)
	[ ${#missing[@]} -eq 0 ] || say "$name: not in the snapshot, left out: ${missing[*]}"
	git --git-dir="$git" archive --format=tar "$commit" -- . "${missing[@]}" | tar -x -C "$SRC/$name"
	echo "$commit" >"$SRC/$name/.exported-commit"
}

src() {
	export_src p4c "$P4C_GIT" "$P4C_REF"
	export_src behavioral-model "$BMV2_GIT" "$BMV2_REF"
	export_src p4runtime "$P4RUNTIME_GIT" "$P4RUNTIME_REF"
	export_src abseil "$ABSEIL_GIT" "$ABSEIL_REF"
	export_src protobuf "$PROTOBUF_GIT" "$PROTOBUF_REF"
	export_src bdwgc "$BDWGC_GIT" "$BDWGC_REF"
	say "what this p4c pins (compare with the refs above):"
	grep -h 'P4C_ABSEIL_VERSION "\|P4C_PROTOBUF_VERSION [0-9]\|GIT_TAG' \
		"$SRC/p4c/cmake/Abseil.cmake" "$SRC/p4c/cmake/Protobuf.cmake" \
		"$SRC/p4c/cmake/BDWGC.cmake" "$SRC/p4c/CMakeLists.txt" | sed 's/^ */    /'
}

# ---- step p4c -----------------------------------------------------------
p4c() {
	local b=$WORK/build-p4c sha
	sha=$(cut -c1-10 "$SRC/p4c/.exported-commit")
	# The exported tree is no git checkout: give CMake the version string it
	# would otherwise read with `git rev-parse` (p4c --version shows it).
	P4C_VERSION="$(cat "$SRC/p4c/Version.txt") (SHA: $sha BUILD: Release)"
	export P4C_VERSION
	# Workaround for GCC 12 (Debian 12's compiler): ir/visitor.cpp calls
	# erase_if on a std::map with a lambda taking a non-const value_type&;
	# ADL picks C++20 std::erase_if, whose libstdc++-12 implementation hands
	# the predicate a const reference ("binding reference ... discards
	# qualifiers"). The predicate only reads, so make its parameter const.
	# Idempotent (matches only the non-const form).
	# (grep first: sed -i would rewrite the file, and make rebuild, every time)
	if grep -q '\[this\](flow_join_points_t::value_type &el)' "$SRC/p4c/ir/visitor.cpp"; then
		say "p4c: patching ir/visitor.cpp for GCC 12 (const lambda parameter for std::erase_if)"
		sed -i 's/\[this\](flow_join_points_t::value_type &el)/[this](const flow_join_points_t::value_type \&el)/' \
			"$SRC/p4c/ir/visitor.cpp"
	fi
	mkdir -p "$b"
	if [ ! -f "$b/CMakeCache.txt" ] || [ ! -f "$b/Makefile" ]; then
		say "p4c: cmake (log $LOGS/p4c-cmake.log)"
		# Only the BMv2 back end (p4c-bm2-ss; p4c-bm2-psa/-pna come with it)
		# and the driver: no tests, no other back ends, no graphs, no docs.
		# Dependencies from the exported sources instead of FetchContent
		# downloads; BDWGC built by p4c as upstream does (Debian's libgc-dev
		# has no libcord, which P4C_USE_PREINSTALLED_BDWGC links); Abseil
		# 20240722 as pinned (Debian's 20220623 has no absl::log, which
		# control-plane/ links); Protobuf 25.3 as pinned (Debian's 3.21 ships
		# no CMake package config, which P4C_USE_PREINSTALLED_PROTOBUF needs).
		cmake -S "$SRC/p4c" -B "$b" \
			-DCMAKE_BUILD_TYPE=Release \
			-DCMAKE_INSTALL_PREFIX="$PREFIX" \
			-DENABLE_BMV2=ON \
			-DENABLE_EBPF=OFF -DENABLE_UBPF=OFF -DENABLE_DPDK=OFF \
			-DENABLE_TOFINO=OFF -DENABLE_P4TC=OFF -DENABLE_P4FMT=OFF \
			-DENABLE_P4TEST=OFF -DENABLE_TEST_TOOLS=OFF \
			-DENABLE_P4C_GRAPHS=OFF -DENABLE_DOCS=OFF -DENABLE_GTESTS=OFF \
			-DENABLE_GC=ON -DP4C_USE_PREINSTALLED_BDWGC=OFF \
			-DP4C_USE_PREINSTALLED_ABSEIL=OFF -DP4C_USE_PREINSTALLED_PROTOBUF=OFF \
			-DFETCHCONTENT_SOURCE_DIR_P4RUNTIME="$SRC/p4runtime" \
			-DFETCHCONTENT_SOURCE_DIR_ABSEIL="$SRC/abseil" \
			-DFETCHCONTENT_SOURCE_DIR_PROTOBUF="$SRC/protobuf" \
			-DFETCHCONTENT_SOURCE_DIR_BDWGC="$SRC/bdwgc" \
			-DFETCHCONTENT_UPDATES_DISCONNECTED=ON \
			>"$LOGS/p4c-cmake.log" 2>&1 ||
			{ tail -n 40 "$LOGS/p4c-cmake.log"; exit 1; }
	fi
	say "p4c: make -j$JOBS p4c-bm2-ss p4c_driver, then all (log $LOGS/p4c-make.log)"
	{
		"${NICE[@]}" make -C "$b" -j"$JOBS" p4c-bm2-ss p4c_driver &&
			"${NICE[@]}" make -C "$b" -j"$JOBS"
	} >>"$LOGS/p4c-make.log" 2>&1 ||
		{ grep -n -m 20 'error' "$LOGS/p4c-make.log"; tail -n 40 "$LOGS/p4c-make.log"; exit 1; }
	say "p4c: install to $PREFIX"
	make -C "$b" install >"$LOGS/p4c-install.log" 2>&1 ||
		{ tail -n 40 "$LOGS/p4c-install.log"; exit 1; }
	"$PREFIX/bin/p4c-bm2-ss" --version
	"$PREFIX/bin/p4c" --version
}

# ---- step bmv2 ----------------------------------------------------------
bmv2() {
	local s=$SRC/behavioral-model b=$WORK/build-bmv2
	# The version string (tools/get_version.sh) takes the commit from
	# VERSION-build when the tree is no git checkout.
	local v
	v=$(cut -c1-8 "$s/.exported-commit")
	[ "$(cat "$s/VERSION-build" 2>/dev/null)" = "$v" ] || echo "$v" >"$s/VERSION-build"
	if [ ! -x "$s/configure" ]; then
		say "bmv2: autogen.sh"
		(cd "$s" && ./autogen.sh) >"$LOGS/bmv2-autogen.log" 2>&1 ||
			{ tail -n 40 "$LOGS/bmv2-autogen.log"; exit 1; }
	fi
	mkdir -p "$b"
	if [ ! -f "$b/Makefile" ]; then
		say "bmv2: configure (log $LOGS/bmv2-configure.log)"
		# Thrift on (simple_switch_CLI needs it), PI off (the default:
		# note that --without-pi would turn it ON, configure.ac sets
		# want_pi=yes whenever the option is given), packet trace off (it
		# pulls in protobuf; not needed), no debugger, no coverage.
		# --disable-static: libtool would otherwise compile every file
		# twice (PIC and non-PIC); simple_switch links the shared libs.
		# PYTHON: where the CLI's Python modules go and what runs them.
		(cd "$b" && "$s/configure" --prefix="$PREFIX" --disable-static \
			--with-thrift --without-packet-trace --disable-debugger \
			PYTHON="$CLI_PYTHON" CXXFLAGS="-O2 -g0" CFLAGS="-O2 -g0") \
			>"$LOGS/bmv2-configure.log" 2>&1 ||
			{ tail -n 40 "$LOGS/bmv2-configure.log"; exit 1; }
		sed -n '/Features recap/,$p' "$LOGS/bmv2-configure.log"
	fi
	say "bmv2: make -j$JOBS (log $LOGS/bmv2-make.log)"
	"${NICE[@]}" make -C "$b" -j"$JOBS" >>"$LOGS/bmv2-make.log" 2>&1 ||
		{ grep -n -m 20 'error' "$LOGS/bmv2-make.log"; tail -n 40 "$LOGS/bmv2-make.log"; exit 1; }
	say "bmv2: install to $PREFIX"
	make -C "$b" install >"$LOGS/bmv2-install.log" 2>&1 ||
		{ tail -n 40 "$LOGS/bmv2-install.log"; exit 1; }
	# simple_switch_CLI is `#!/usr/bin/env python3`: pin it to the Python
	# that has the thrift module, so it works whatever python3 PATH finds.
	local cli
	for cli in simple_switch_CLI bm_CLI psa_switch_CLI pna_nic_CLI; do
		[ -f "$PREFIX/bin/$cli" ] || continue
		sed -i "1s|^#!.*python3.*\$|#!$CLI_PYTHON|" "$PREFIX/bin/$cli"
	done
	ldconfig # libbmall etc. live in $PREFIX/lib; simple_switch has an rpath anyway
	"$PREFIX/bin/simple_switch" --version
	echo | "$PREFIX/bin/simple_switch_CLI" --help >/dev/null && say "simple_switch_CLI imports fine"
}

[ ${#steps[@]} -gt 0 ] || steps=(all)
for st in "${steps[@]}"; do
	case $st in
	deps) deps ;;
	src) src ;;
	p4c) p4c ;;
	bmv2) bmv2 ;;
	all) deps; src; p4c; bmv2 ;;
	esac
	say "step $st done ($SECONDS s since start)"
done
