#!/bin/busybox sh
# guest-init.sh — the guest's /init (see guest.sh): loads the virtio and 9p
# modules, mounts the host's root read-only and the output share, chroots
# into the host root to run the command, records its status, powers off.
/bin/busybox --install -s /bin
export PATH=/bin
mount -t proc proc /proc
mount -t sysfs sys /sys
mount -t devtmpfs dev /dev
# Dependencies differ between kernel builds (virtio needs virtio_ring in some):
# passes until every module is in, each loaded once.
for pass in 1 2 3 4; do
  for m in virtio_ring virtio virtio_pci_legacy_dev virtio_pci_modern_dev virtio_pci netfs fscache 9pnet 9pnet_virtio 9p; do
    [ -e /sys/module/$m ] && continue
    for f in /modules/$m.ko*; do [ -e "$f" ] && insmod "$f" 2>/dev/null; done
  done
done
for a in $(cat /proc/cmdline); do
  case "$a" in strata.out=*) out=${a#strata.out=} ;; strata.cwd=*) cwd=${a#strata.cwd=} ;; esac
done
h=/host
mount -t 9p -o trans=virtio,version=9p2000.L,ro,msize=262144 hostroot $h || { echo "guest: cannot mount the host root"; dmesg | tail -15; poweroff -f; }
mount -t 9p -o trans=virtio,version=9p2000.L,msize=262144 out $h$out || { echo "guest: cannot mount $out"; poweroff -f; }
mount -t proc proc $h/proc
mount -t sysfs sys $h/sys
mount -t devtmpfs dev $h/dev
# A tmpfs on /tmp, unless the build or output lives there (it would hide them).
case "$out:$cwd" in /tmp/*|*:/tmp/*) ;; *) mount -t tmpfs tmp $h/tmp ;; esac
mount -t tmpfs run $h/run 2>/dev/null
mount -t cgroup -o cpuset cpuset $h/sys/fs/cgroup 2>/dev/null || mount -t tmpfs cg $h/sys/fs/cgroup
chroot $h /bin/sh -c "cd '$cwd' 2>/dev/null; export PATH=/usr/local/bin:/usr/bin:/bin:/usr/sbin:/sbin HOME=/tmp; eval \"\$(cat '$out/.command')\"" </dev/null 2>&1
echo $? > $h$out/.status
sync
poweroff -f
