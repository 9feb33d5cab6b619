#!/bin/sh
# ftlscope's NVMe paths against QEMU's emulated NVMe controller.
#
# Builds a guest from Debian's package archive (the linux-image-amd64 kernel; a busybox initramfs that loads
# the nvme, 9p and virtio modules), shares the host's root read-only over 9p so the ftlscope of this checkout
# runs inside unchanged, and checks: `ftlscope devices`, a read run, the refusal to write without
# --destructive, a write run with --destructive and --verify, Write Zeroes (the block layer's REQ_OP_WRITE_ZEROES,
# which the nvme driver sends as the NVMe Write Zeroes command), the health log against `nvme smart-log`
# field by field, and the OCP 0xC0 log reported absent (QEMU's controller has none).
#
# Without vmx/svm only TCG works, and `-cpu Nehalem`: under `-cpu max` numpy's AVX2 sort crashes in the
# guest (a QEMU bug). Each command then takes 20-100 s to start, so the check list is short.
#
# Usage: tests/system/nvme_qemu.sh [WORKDIR]     (root; installs the apt packages below when missing)
# Prints one "CHECK <name> PASS|FAIL <detail>" line per check and exits 0 only when all pass; 77 when it
# cannot run here (the reason on stderr).
set -eu

REPO=$(cd "$(dirname "$0")/../.." && pwd)
WORK=${1:-${FTLSCOPE_QEMU_DIR:-/tmp/ftlscope-qemu}}
APT_PACKAGES="qemu-system-x86 nvme-cli busybox-static cpio kmod xz-utils"
MODULES="nvme 9p 9pnet_virtio virtio_pci"
PYTHON=${FTLSCOPE_PYTHON:-$(command -v python3)}
TIMEOUT=${FTLSCOPE_QEMU_TIMEOUT:-1500}

skip() { echo "nvme_qemu: cannot run here: $*" >&2; exit 77; }

[ "$(id -u)" = 0 ] || skip "needs root (apt-get, and the guest runs ftlscope as root)"
missing=""
for p in $APT_PACKAGES; do dpkg -s "$p" >/dev/null 2>&1 || missing="$missing $p"; done
if [ -n "$missing" ]; then
    apt-get install -y --no-install-recommends $missing >/dev/null || skip "apt-get could not install$missing"
fi
command -v qemu-system-x86_64 >/dev/null || skip "qemu-system-x86_64 missing"
mkdir -p "$WORK"

# The kernel: the package linux-image-amd64 depends on, unpacked (not installed: the host keeps its own).
KPKG=$(apt-cache depends linux-image-amd64 | sed -n 's/.*Depends: \(linux-image-[0-9].*-amd64\)$/\1/p' | head -1)
[ -n "$KPKG" ] || skip "no linux-image-amd64 in the package archive"
if [ ! -d "$WORK/kernel/boot" ]; then
    (cd "$WORK" && apt-get download "$KPKG" >/dev/null 2>&1) || skip "apt-get download $KPKG failed"
    dpkg -x "$WORK"/"$KPKG"_*.deb "$WORK/kernel"
fi
KVER=$(ls "$WORK/kernel/lib/modules" | head -1)
# The package leaves modules.dep to depmod at installation.
[ -f "$WORK/kernel/lib/modules/$KVER/modules.dep" ] || depmod -b "$WORK/kernel" "$KVER"
VMLINUZ="$WORK/kernel/boot/vmlinuz-$KVER"

# The guest's checks, with this host's absolute paths (the guest sees the same tree). The checkout's python/ is
# put first only where it holds the compiled module (an editable or in-place build); otherwise the ftlscope
# installed for $PYTHON runs (pip install . leaves the checkout without it).
PYPATH=""
if ls "$REPO"/python/ftlscope/_native*.so >/dev/null 2>&1; then PYPATH="$REPO/python"; fi
cat > "$WORK/guest.sh" <<GUEST
#!/bin/sh
export PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin HOME=/run XDG_STATE_HOME=/run/state
export XDG_DATA_HOME=/run/data XDG_CACHE_HOME=/run/cache TMPDIR=/run/tmp PYTHONPATH="$PYPATH"
export PYTHONDONTWRITEBYTECODE=1 MPLCONFIGDIR=/run/mpl
mkdir -p /run/tmp
cd /run
exec "$PYTHON" "$REPO/tests/system/nvme_qemu_guest.py"
GUEST

# The initramfs: busybox, the modules with their dependencies in load order, the guest script, and an init
# that mounts the host's root and runs the guest script there.
INITRD="$WORK/initramfs.cpio.gz"
R="$WORK/initramfs"
if [ ! -f "$R/init" ]; then
    rm -rf "$R" && mkdir -p "$R/bin" "$R/mod" "$R/proc" "$R/sys" "$R/dev" "$R/host"
    cp /bin/busybox "$R/bin/busybox"
    for a in sh mount insmod mkdir chroot poweroff sleep cat echo xz; do ln -s busybox "$R/bin/$a"; done
    MD="$WORK/kernel/lib/modules/$KVER"
    order=""
    add() {  # depth-first: a module's dependencies are loaded before it (`local`: dash and busybox have it)
        local path dep
        path=$(grep -E "(^|/)$1\.ko(\.xz)?:" "$MD/modules.dep" | head -1 | cut -d: -f1)
        [ -n "$path" ] || return 0   # built into the kernel
        case " $order " in *" $path "*) return 0 ;; esac
        for dep in $(grep -E "^$path:" "$MD/modules.dep" | cut -d: -f2); do
            add "$(basename "$dep" | sed 's/\.ko.*//')"
        done
        order="$order $path"
    }
    for m in $MODULES; do add "$m"; done
    n=0
    for path in $order; do
        n=$((n + 1))
        case "$path" in
            *.xz) xz -dc "$MD/$path" > "$R/mod/$(printf %02d $n).ko" ;;
            *) cp "$MD/$path" "$R/mod/$(printf %02d $n).ko" ;;
        esac
    done
    cat > "$R/init" <<'INIT'
#!/bin/sh
mount -t proc proc /proc; mount -t sysfs sys /sys; mount -t devtmpfs dev /dev
for m in /mod/*.ko; do insmod "$m" || echo "GUEST insmod $m failed"; done
mount -t 9p -o trans=virtio,version=9p2000.L,ro,cache=loose hostroot /host || echo "GUEST 9p mount failed"
mount -t proc proc /host/proc; mount -t sysfs sys /host/sys; mount -t devtmpfs dev /host/dev
mount -t tmpfs run /host/run
# The guest writes only under /run (its own tmpfs). The host's /tmp stays visible: a checkout or a Python
# environment there (a CI runner's) is what the guest runs.
cp /guest.sh /host/run/guest.sh
chroot /host /bin/sh /run/guest.sh
echo "GUEST done"
poweroff -f
INIT
    chmod +x "$R/init"
fi
cp "$WORK/guest.sh" "$R/guest.sh"
(cd "$R" && find . | cpio -o -H newc 2>/dev/null | gzip -1) > "$INITRD"

# The NVMe namespace: a 1 GiB sparse file.
DISK="$WORK/nvme.img"
rm -f "$DISK" && truncate -s 1G "$DISK"

ACCEL="-accel tcg -cpu Nehalem"
if [ -w /dev/kvm ] && grep -qE 'vmx|svm' /proc/cpuinfo; then ACCEL="-accel kvm -cpu host"; fi
LOG="$WORK/console.log"
START=$(date +%s)
# shellcheck disable=SC2086
timeout "$TIMEOUT" qemu-system-x86_64 -machine q35 $ACCEL -m 2048 -smp 2 -nographic -no-reboot -nic none \
    -kernel "$VMLINUZ" -initrd "$INITRD" \
    -append "console=ttyS0 quiet panic=-1" \
    -drive file="$DISK",if=none,id=nvm,format=raw -device nvme,serial=ftlscope-qemu,drive=nvm \
    -fsdev local,id=hostroot,path=/,security_model=none,readonly=on,multidevs=remap \
    -device virtio-9p-pci,fsdev=hostroot,mount_tag=hostroot > "$LOG" 2>&1 || true
END=$(date +%s)
tr -d '\r' < "$LOG" | grep -E '^(CHECK|GUEST) ' || true
echo "nvme_qemu: guest ran $((END - START)) s ($ACCEL); console log: $LOG"
tr -d '\r' < "$LOG" | grep -q '^GUEST done' || { echo "nvme_qemu: the guest did not finish" >&2; exit 1; }
if tr -d '\r' < "$LOG" | grep -q '^CHECK .* FAIL'; then exit 1; fi
tr -d '\r' < "$LOG" | grep -q '^CHECK .* PASS' || { echo "nvme_qemu: no check ran" >&2; exit 1; }
