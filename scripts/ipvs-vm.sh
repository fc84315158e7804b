#!/usr/bin/env bash
# ipvs-vm.sh runs the Go tests of one package inside a small qemu virtual
# machine (software emulation, no KVM) that boots Debian's own kernel with
# IPVS loaded as modules. The host kernel needs no IPVS.
#
# Usage: scripts/ipvs-vm.sh PKG [test flags...]
#   scripts/ipvs-vm.sh ./vip -test.v
#   scripts/ipvs-vm.sh ./vip -test.v -test.run 'TestVM'
#   scripts/ipvs-vm.sh ./bench/ipvs -test.v -test.run TestBench
#
# The test binary is built with the build tag "ipvsvm", so VM-only test
# files carry "//go:build ipvsvm" and stay out of a plain `go test ./...`.
#
# Environment:
#   LBDNS_VM_CACHE    kernel, modules and tools cache (default /var/cache/lbdns-vm)
#   LBDNS_VM_TIMEOUT  seconds before the VM is killed (default 300)
#   LBDNS_VM_MEM      guest memory in MiB (default 512)
#   LBDNS_VM_SMP      guest CPUs (default 2)
#   LBDNS_VM_NOAPT    set to 1 to skip apt-get install of qemu and busybox
#
# Exit status: the test binary's exit status as reported by the guest; 1 if
# the guest printed no result marker (crash, timeout, kernel panic).
set -euo pipefail

if [ $# -lt 1 ]; then
	echo "usage: $0 PKG [test flags...]" >&2
	exit 2
fi
pkg=$1
shift

cache=${LBDNS_VM_CACHE:-/var/cache/lbdns-vm}
vm_timeout=${LBDNS_VM_TIMEOUT:-300}
vm_mem=${LBDNS_VM_MEM:-512}
vm_smp=${LBDNS_VM_SMP:-2}
marker=LBDNS-VM-EXIT

# Modules loaded in the guest, in this order. busybox insmod does not follow
# soft dependencies: libcrc32c needs crc32c, so crc32c_generic comes first.
# Hard dependencies from modules.dep are added before each module anyway.
modules="crc32c_generic nf_defrag_ipv4 nf_defrag_ipv6 libcrc32c nf_conntrack ip_vs
ip_vs_rr ip_vs_wrr ip_vs_wlc ip_vs_lc ip_vs_sh ip_vs_mh ip_vs_dh ip_vs_sed ip_vs_nq ip_vs_fo ip_vs_ovf
dummy veth"

log() { echo "ipvs-vm: $*" >&2; }
elapsed() { awk -v a="$1" -v b="$2" 'BEGIN { printf "%.1f", b - a }'; }

if ! command -v go >/dev/null 2>&1 && [ -x /usr/local/go/bin/go ]; then
	PATH=$PATH:/usr/local/go/bin
fi

# --- host tools --------------------------------------------------------------
if [ "${LBDNS_VM_NOAPT:-0}" != 1 ]; then
	# busybox-static ships depmod and is a static binary; the dynamic
	# busybox package is not enough for the initramfs.
	bb_list=$(/bin/busybox --list 2>/dev/null || true)
	bb_ldd=$(ldd /bin/busybox 2>&1 || true)
	if ! command -v qemu-system-x86_64 >/dev/null 2>&1 ||
		! grep -qx depmod <<<"$bb_list" || ! grep -q 'not a dynamic' <<<"$bb_ldd"; then
		log "installing qemu-system-x86 busybox-static"
		for i in 1 2 3 4 5 6; do
			if DEBIAN_FRONTEND=noninteractive apt-get install -y -q --no-install-recommends \
				qemu-system-x86 busybox-static >&2; then
				break
			fi
			[ "$i" = 6 ] && { log "apt-get install failed"; exit 1; }
			sleep 10 # another apt may hold the dpkg lock
		done
	fi
fi
busybox=/bin/busybox

# --- kernel and tools cache ---------------------------------------------------
resolve_kernel() {
	apt-cache depends linux-image-amd64 2>/dev/null | awk '/Depends: linux-image-[0-9]/ {print $2; exit}'
}
kpkg=$(resolve_kernel)
if [ -z "$kpkg" ]; then
	log "apt lists lack linux-image-amd64; running apt-get update"
	apt-get update -q >&2
	kpkg=$(resolve_kernel)
fi
if [ -z "$kpkg" ]; then
	log "cannot resolve the kernel package from 'apt-cache depends linux-image-amd64'"
	exit 1
fi
kver=${kpkg#linux-image-}
root=$cache/$kver
mkdir -p "$cache"
exec 9>"$cache/.lock"
flock 9
if [ ! -e "$root/.done" ]; then
	log "fetching $kpkg and ipvsadm into $root"
	rm -rf "$root" "$root.tmp"
	mkdir -p "$root.tmp/debs" "$root.tmp/root"
	(cd "$root.tmp/debs" && apt-get download -q "$kpkg" ipvsadm libnl-3-200 libnl-genl-3-200 libpopt0 >&2) 2>&1 |
		grep -v 'unsandboxed' >&2 || true
	for d in "$root.tmp"/debs/*.deb; do
		dpkg -x "$d" "$root.tmp/root"
	done
	# Compressed modules (.ko.xz/.ko.zst) are unpacked so busybox insmod
	# can load any of them.
	find "$root.tmp/root/lib/modules" -name '*.ko.xz' -exec xz -d {} +
	find "$root.tmp/root/lib/modules" -name '*.ko.zst' -exec zstd -q -d --rm {} +
	"$busybox" depmod -b "$root.tmp/root" "$kver"
	rm -rf "$root.tmp/debs"
	mv "$root.tmp" "$root"
	touch "$root/.done"
fi
exec 9>&-
kroot=$root/root
kernel=$kroot/boot/vmlinuz-$kver
[ -e "$kernel" ] || { log "no kernel at $kernel"; exit 1; }

# --- test binary ----------------------------------------------------------------
work=$(mktemp -d "${TMPDIR:-/tmp}/lbdns-vm.XXXXXX")
trap 'rm -rf "$work"' EXIT
ird=$work/initrd
mkdir -p "$ird"/{bin,sbin,proc,sys,dev,tmp,run,etc,lib64,lib/x86_64-linux-gnu,usr/lib/x86_64-linux-gnu,lib/modules,test}

log "building test binary for $pkg"
t0=$(date +%s.%N)
CGO_ENABLED=0 go test -c -tags ipvsvm -o "$ird/test/pkg.test" "$pkg"
if [ ! -e "$ird/test/pkg.test" ]; then
	log "package $pkg has no test files"
	exit 1
fi
pkgdir=$(go list -f '{{.Dir}}' "$pkg")
if [ -d "$pkgdir/testdata" ]; then
	cp -r "$pkgdir/testdata" "$ird/test/testdata"
fi

# --- initramfs -------------------------------------------------------------------
cp "$busybox" "$ird/bin/busybox"
for a in $("$busybox" --list); do
	[ "$a" = busybox ] || ln -sf busybox "$ird/bin/$a"
done

# ipvsadm with its libraries and the loader, to cross-check from the tests.
cp "$kroot/sbin/ipvsadm" "$ird/sbin/ipvsadm"
LD_LIBRARY_PATH=$kroot/lib/x86_64-linux-gnu:$kroot/usr/lib/x86_64-linux-gnu \
	ldd "$kroot/sbin/ipvsadm" | awk '/=> \// {print $3} /^\t\/lib64/ {print $1}' |
	while read -r lib; do
		case $lib in
		/lib64/*) dst=$ird$lib ;;
		*) dst=$ird/lib/x86_64-linux-gnu/$(basename "$lib") ;;
		esac
		cp -L "$lib" "$dst"
	done

# Modules with their hard dependencies, in load order.
mdir=$kroot/lib/modules/$kver
declare -A seen=()
order=()
add_mod() { # add_mod RELPATH
	local rel=$1 dep
	[ -n "${seen[$rel]:-}" ] && return
	seen[$rel]=1
	for dep in $(awk -v m="$rel:" '$1 == m { for (i = NF; i > 1; i--) print $i }' "$mdir/modules.dep"); do
		add_mod "$dep"
	done
	order+=("$rel")
}
for m in $modules; do
	rel=$(awk -v m="$m" -F: '{ n = $1; sub(/.*\//, "", n); sub(/\.ko.*/, "", n); gsub(/-/, "_", n); if (n == m) { print $1; exit } }' "$mdir/modules.dep")
	[ -n "$rel" ] || { log "module $m not found in $kver"; exit 1; }
	add_mod "$rel"
done
for rel in "${order[@]}"; do
	cp "$mdir/$rel" "$ird/lib/modules/"
	basename "$rel" >>"$ird/etc/modules"
done

# Test flags go through a file, quoted for the guest shell.
: >"$ird/etc/test-args"
for a in "$@"; do
	printf '%q ' "$a" >>"$ird/etc/test-args"
done

cat >"$ird/init" <<EOF
#!/bin/busybox sh
export PATH=/bin:/sbin
mount -t proc proc /proc
mount -t sysfs sysfs /sys
mount -t devtmpfs devtmpfs /dev
mount -t tmpfs tmpfs /tmp
mount -t tmpfs tmpfs /run
rc=0
for m in \$(cat /etc/modules); do
	insmod /lib/modules/\$m || { echo "insmod \$m failed"; rc=1; }
done
ip link set lo up
if [ \$rc = 0 ]; then
	cd /test
	eval "set -- \$(cat /etc/test-args)"
	HOME=/tmp TMPDIR=/tmp LBDNS_IPVS_VM=1 ./pkg.test "\$@"
	rc=\$?
fi
echo
echo "$marker=\$rc"
sync
poweroff -f
EOF
chmod +x "$ird/init"

(cd "$ird" && find . | "$busybox" cpio -o -H newc 2>/dev/null | gzip -1) >"$work/initrd.gz"
t1=$(date +%s.%N)
log "kernel $kver, initramfs $(du -h "$work/initrd.gz" | cut -f1), build took $(elapsed "$t0" "$t1")s; booting"

# --- boot ----------------------------------------------------------------------------
out=$work/console.log
set +e
timeout --kill-after=10 "$vm_timeout" qemu-system-x86_64 \
	-accel tcg -cpu max -smp "$vm_smp" -m "$vm_mem" \
	-nographic -no-reboot -nic none \
	-kernel "$kernel" -initrd "$work/initrd.gz" \
	-append 'console=ttyS0 panic=-1 quiet' </dev/null |
	tr -d '\r' | tee "$out"
qrc=${PIPESTATUS[0]}
set -e
t2=$(date +%s.%N)
log "guest ran $(elapsed "$t1" "$t2")s"

code=$(sed -n "s/^$marker=\([0-9]*\)\$/\1/p" "$out" | tail -n 1)
if [ -z "$code" ]; then
	if [ "$qrc" = 124 ] || [ "$qrc" = 137 ]; then
		log "FAIL: timed out after ${vm_timeout}s without a result"
	else
		log "FAIL: no result marker from the guest (qemu status $qrc)"
	fi
	exit 1
fi
exit "$code"
