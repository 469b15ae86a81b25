#!/usr/bin/env bash
# Builds the local base image that container test tasks start FROM, without any image
# registry: a Debian bookworm root file system from the Debian package archive
# (debootstrap, minbase variant, plus tmux and python3), imported into Podman or Docker.
#
#   scripts/base_image.sh [IMAGE]     default IMAGE: localhost/turnbon-bookworm:latest
#
# Idempotent and cached: nothing is done when IMAGE exists; the root file system is kept
# as a tarball under ${XDG_CACHE_HOME:-~/.cache}/turnbon-graph/, so a later import needs
# no download. debootstrap needs root. Settings (environment variables):
#   TURNBON_ENGINE         podman or docker (default: podman when installed, else docker)
#   TURNBON_DEBIAN_MIRROR  Debian archive URL (default: the one apt uses here, else
#                          http://deb.debian.org/debian)
#   TURNBON_BASE_INCLUDE   extra packages, comma-separated (default: tmux,python3)
set -euo pipefail

image="${1:-localhost/turnbon-bookworm:latest}"
suite=bookworm
include="${TURNBON_BASE_INCLUDE-tmux,python3}"
cache_dir="${XDG_CACHE_HOME:-$HOME/.cache}/turnbon-graph"
# The package list is part of the name: another list is another tarball.
tarball="$cache_dir/debian-$suite-minbase-${include//,/_}.tar"

die() {
	echo "base_image.sh: $*" >&2
	exit 1
}

engine="${TURNBON_ENGINE:-}"
if [ -z "$engine" ]; then
	if command -v podman >/dev/null 2>&1; then engine=podman; else engine=docker; fi
fi
command -v "$engine" >/dev/null 2>&1 ||
	die "$engine is not installed: run 'make setup-podman' (as root) or install Docker"

if "$engine" image inspect "$image" >/dev/null 2>&1; then
	echo "base image $image exists ($engine): nothing to do"
	exit 0
fi

# The archive apt itself uses here (deb822 sources first, then sources.list).
debian_mirror() {
	local uri
	uri="$(sed -n 's/^URIs:[[:space:]]*\([^[:space:]]*\).*/\1/p' \
		/etc/apt/sources.list.d/debian.sources 2>/dev/null | grep -v security | head -1)"
	if [ -z "$uri" ]; then
		uri="$(sed -n 's/^deb[[:space:]]\+\(\[[^]]*\][[:space:]]\+\)\?\([^[:space:]]*\).*/\2/p' \
			/etc/apt/sources.list 2>/dev/null | grep -v security | head -1)"
	fi
	echo "${uri:-http://deb.debian.org/debian}"
}

if [ ! -s "$tarball" ]; then
	[ "$(id -u)" = 0 ] || die "debootstrap needs root: run this script as root (sudo)"
	command -v debootstrap >/dev/null 2>&1 ||
		die "debootstrap is not installed: apt-get install debootstrap (or make setup-podman)"
	mirror="${TURNBON_DEBIAN_MIRROR:-$(debian_mirror)}"
	mkdir -p "$cache_dir"
	rootfs="$(mktemp -d "$cache_dir/rootfs.XXXXXX")"
	trap 'rm -rf "$rootfs" "$tarball.part"' EXIT
	echo "debootstrap $suite (minbase${include:+, with $include}) from $mirror"
	debootstrap --variant=minbase ${include:+--include="$include"} \
		"$suite" "$rootfs" "$mirror" >"$cache_dir/debootstrap.log" 2>&1 ||
		die "debootstrap failed; its log: $cache_dir/debootstrap.log"
	# The downloaded packages and index files are not needed in the image (-80 MB).
	rm -rf "$rootfs"/var/cache/apt/archives/*.deb "$rootfs"/var/lib/apt/lists/*
	tar --numeric-owner -C "$rootfs" -cf "$tarball.part" .
	mv "$tarball.part" "$tarball"
	rm -rf "$rootfs"
	trap - EXIT
fi

echo "importing $tarball as $image ($engine)"
quiet=()
[ "$engine" = podman ] && quiet=(--quiet) # podman prints its copy progress otherwise
"$engine" import "${quiet[@]}" \
	--change 'ENV PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin' \
	--change 'CMD ["/bin/bash"]' \
	"$tarball" "$image" >/dev/null
echo "base image $image is ready"
