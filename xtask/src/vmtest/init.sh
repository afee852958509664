#!/bin/busybox sh
# The guest init of `cargo xtask vm-test` (xtask/src/vmtest/initramfs.rs puts it at /init).
#
# Kernel command line, written by xtask/src/vmtest/guest.rs:
#   sframe_trace.run=DIR     the run directory (inside the repository): command.sh is run from
#                            it; output.log and status are written to it
#   sframe_trace.repo=DIR    the repository, shared read-write (9p tag `repo`), mounted at DIR
#   sframe_trace.kernel=DIR  the cached kernel (modules under DIR/root/lib/modules/RELEASE)
#
# The host's root file system (9p tag `hostroot`, read-only) becomes the guest's root under a
# throw-away tmpfs layer, so binaries built on the host run unchanged and may write anywhere.
# The command's exit status goes to RUN/status; when no status appears the host reports a
# boot or set-up failure and shows the console (ttyS0).

/bin/busybox --install -s /bin
export PATH=/bin
mount -t proc proc /proc
mount -t sysfs sysfs /sys
mount -t devtmpfs devtmpfs /dev

say() { echo "sframe-trace guest: $*" > /dev/console; }
stop() { sync; poweroff -f; sleep 30; }

for arg in $(cat /proc/cmdline); do
  case $arg in
    sframe_trace.run=*) RUN=${arg#*=} ;;
    sframe_trace.repo=*) REPO=${arg#*=} ;;
    sframe_trace.kernel=*) KERNEL=${arg#*=} ;;
  esac
done
[ -n "$RUN" ] && [ -n "$REPO" ] && [ -n "$KERNEL" ] || { say "kernel command line lacks sframe_trace.*"; stop; }

for module in /lib/boot-modules/*.ko; do
  [ -e "$module" ] && { insmod "$module" || say "insmod $module failed"; }
done

mount -t 9p -o trans=virtio,version=9p2000.L,ro,cache=loose,msize=512000 hostroot /host ||
  { say "cannot mount the host's root (9p)"; stop; }
mount -t tmpfs -o mode=0755 tmpfs /rw && mkdir -p /rw/upper /rw/work
R=/newroot
if ! mount -t overlay overlay -o lowerdir=/host,upperdir=/rw/upper,workdir=/rw/work $R; then
  say "no overlay: the root stays read-only, with tmpfs on /tmp and /var/tmp"
  mount --bind /host $R
  mount -t tmpfs tmpfs $R/tmp
  mount -t tmpfs tmpfs $R/var/tmp
fi
mount -t proc proc $R/proc
mount -t sysfs sysfs $R/sys
mount -t devtmpfs devtmpfs $R/dev
mkdir -p $R/dev/pts $R/dev/shm
mount -t devpts devpts $R/dev/pts
mount -t tmpfs tmpfs $R/dev/shm
mount -t tmpfs tmpfs $R/run
mount -t tracefs tracefs $R/sys/kernel/tracing 2>/dev/null
mount -t debugfs debugfs $R/sys/kernel/debug 2>/dev/null
mount -t bpf bpffs $R/sys/fs/bpf 2>/dev/null
mount -t cgroup2 cgroup2 $R/sys/fs/cgroup 2>/dev/null

release=$(uname -r)
if [ -d "$R$KERNEL/root/lib/modules/$release" ]; then
  mkdir -p "$R/lib/modules/$release"
  mount --bind "$R$KERNEL/root/lib/modules/$release" "$R/lib/modules/$release"
fi
[ -f "$R$KERNEL/config" ] && mkdir -p $R/boot && cp "$R$KERNEL/config" "$R/boot/config-$release"

mkdir -p "$R$REPO" 2>/dev/null
mount -t 9p -o trans=virtio,version=9p2000.L,cache=mmap,msize=512000 repo "$R$REPO" ||
  { say "cannot mount the repository (9p)"; stop; }
ip link set lo up 2>/dev/null

ulimit -l unlimited
ulimit -n 65536
say "running $RUN/command.sh on $release"
chroot $R /bin/sh "$RUN/command.sh" < /dev/null > "$R$RUN/output.log" 2>&1
status=$?
echo $status > "$R$RUN/status"
say "the command exited with status $status"
stop
