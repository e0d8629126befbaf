#!/usr/bin/env bash
# guest.sh — runs a command inside a two-node NUMA guest: qemu under TCG with
# one CPU and 256 MiB on each node, the distribution's kernel (downloaded
# once, unpacked into a cache, never installed) and a busybox initramfs that
# mounts the host's root read-only over 9p and chroots into it, so the
# command sees the host's binaries and build tree at their usual paths.
# The output directory is shared writable at its own path, for results.
#
#   guest.sh --cache DIR --out DIR [--timeout S] -- COMMAND...
#   guest.sh --cache DIR --prepare    (fetch the kernel, make the initramfs; no boot)
#
# Exit status: the command's; 77 when qemu or a kernel cannot be had (the
# CTest skip code); 1 when the guest did not finish.
set -euo pipefail

cache="" out="" timeout_s=240 prepare=0
while [ $# -gt 0 ]; do
  case "$1" in
    --prepare) prepare=1; shift ;;
    --cache) cache=$2; shift 2 ;;
    --out) out=$2; shift 2 ;;
    --timeout) timeout_s=$2; shift 2 ;;
    --) shift; break ;;
    *) echo "guest.sh: unknown argument '$1'" >&2; exit 2 ;;
  esac
done
if [ -z "$cache" ] || { [ $prepare = 0 ] && { [ -z "$out" ] || [ $# -eq 0 ]; }; }; then
  echo "usage: guest.sh --cache DIR --out DIR [--timeout S] -- COMMAND...  |  guest.sh --cache DIR --prepare" >&2
  exit 2
fi
[ $prepare = 1 ] && out="$cache/prepare-out"   # unused: only made
skip() { echo "SKIP: $*" >&2; exit 77; }

command -v qemu-system-x86_64 >/dev/null || skip "qemu-system-x86_64 not installed (apt-get install qemu-system-x86)"
busybox=$(command -v busybox || true)
# The initramfs has no libc: busybox must be the static build.
{ [ -n "$busybox" ] && ! ldd "$busybox" >/dev/null 2>&1; } || skip "static busybox not installed (apt-get install busybox-static)"
command -v cpio >/dev/null || skip "cpio not installed"
mkdir -p "$cache" "$out"
cache=$(cd "$cache" && pwd) out=$(cd "$out" && pwd)

# ---- the kernel: the newest distribution kernel apt can download --------
kernel_dir="$cache/kernel"
if ! ls "$kernel_dir"/boot/vmlinuz-* >/dev/null 2>&1; then
  command -v apt-get >/dev/null || skip "no kernel in $kernel_dir and no apt-get to fetch one"
  # Candidates newest first: the generic flavour (its 9p and virtio are modules).
  mapfile -t pkgs < <(apt-cache search --names-only '^linux-image-[0-9.]+-[0-9]+-amd64(-unsigned)?$' 2>/dev/null |
                      awk '{print $1}' | sort -rV)
  [ ${#pkgs[@]} -gt 0 ] || skip "apt knows no linux-image-*-amd64 package (run apt-get update)"
  got=""
  tmp=$(mktemp -d "$cache/dl.XXXXXX")
  for p in "${pkgs[@]}"; do
    if (cd "$tmp" && apt-get download "$p" >/dev/null 2>&1); then got=$p; break; fi
  done
  [ -n "$got" ] || { rm -rf "$tmp"; skip "could not download a kernel package (tried ${pkgs[*]})"; }
  rm -rf "$kernel_dir.new"
  dpkg-deb -x "$tmp"/*.deb "$kernel_dir.new"
  rm -rf "$tmp" "$kernel_dir"
  mv "$kernel_dir.new" "$kernel_dir"
  echo "guest.sh: kernel $got unpacked into $kernel_dir" >&2
fi
vmlinuz=$(ls "$kernel_dir"/boot/vmlinuz-* | head -1)
kver=${vmlinuz##*/vmlinuz-}
mods="$kernel_dir/lib/modules/$kver/kernel"

# ---- the initramfs: busybox, the 9p/virtio modules, an init -------------
initrd="$cache/initrd-$kver.cpio.gz"
here=$(cd "$(dirname "$0")" && pwd)
if [ ! -s "$initrd" ] || [ "$here/guest-init.sh" -nt "$initrd" ]; then
  root=$(mktemp -d "$cache/initrd.XXXXXX")
  mkdir -p "$root"/{bin,proc,sys,dev,host,modules}
  cp "$busybox" "$root/bin/busybox"
  for m in drivers/virtio/virtio drivers/virtio/virtio_ring drivers/virtio/virtio_pci_legacy_dev \
           drivers/virtio/virtio_pci_modern_dev drivers/virtio/virtio_pci fs/netfs/netfs fs/fscache/fscache \
           net/9p/9pnet net/9p/9pnet_virtio fs/9p/9p; do
    for f in "$mods/$m.ko" "$mods/$m.ko.xz"; do [ -e "$f" ] && cp "$f" "$root/modules/"; done
  done
  ls "$root"/modules/9p.ko* >/dev/null 2>&1 || { rm -rf "$root"; skip "kernel $kver has no 9p module"; }
  cp "$here/guest-init.sh" "$root/init"
  chmod +x "$root/init"
  (cd "$root" && find . | cpio -o -H newc --quiet | gzip -1) > "$initrd.tmp"
  mv "$initrd.tmp" "$initrd"
  rm -rf "$root"
fi

if [ $prepare = 1 ]; then
  echo "guest.sh: kernel $kver and $initrd ready"
  exit 0
fi

# ---- boot ------------------------------------------------------------------
# THP madvise (as on most hosts; Debian's kernel defaults to always, which
# places 2 MiB at a time) and no automatic NUMA balancing (it migrates pages
# behind the allocator's back): placement is then Strata's and the kernel's
# first-touch rule only.
# The command goes through the shared directory, so any quoting survives.
printf '%q ' "$@" > "$out/.command"
rm -f "$out/.status"
console="$out/console.log"
set +e
timeout "$timeout_s" qemu-system-x86_64 -accel tcg -cpu max -m 512 -smp 2 -nodefaults -no-user-config \
  -display none -serial stdio -no-reboot \
  -object memory-backend-ram,id=m0,size=256M -object memory-backend-ram,id=m1,size=256M \
  -numa node,nodeid=0,cpus=0,memdev=m0 -numa node,nodeid=1,cpus=1,memdev=m1 \
  -kernel "$vmlinuz" -initrd "$initrd" \
  -append "console=ttyS0 quiet loglevel=3 panic=-1 mitigations=off transparent_hugepage=madvise numa_balancing=disable strata.out=$out strata.cwd=$PWD" \
  -fsdev local,id=hostroot,path=/,security_model=none,readonly=on,multidevs=remap \
  -device virtio-9p-pci,fsdev=hostroot,mount_tag=hostroot \
  -fsdev local,id=out,path="$out",security_model=none \
  -device virtio-9p-pci,fsdev=out,mount_tag=out < /dev/null > "$console" 2>&1
qrc=$?
set -e
# The console carries the command's output (and the kernel's, if it panics).
tr -d '\r' < "$console" | grep -Ev '^\[ *[0-9]+\.[0-9]+\]' || true
if [ ! -s "$out/.status" ]; then
  echo "guest.sh: the guest did not finish (qemu status $qrc); console in $console" >&2
  exit 1
fi
exit "$(cat "$out/.status")"
