# snap-lib.sh: what the snapshot tests (505-509, issue 22) share, sourced
# after contain-lib.sh (and after setting CT_NET). snap_rootfs: a static
# busybox tree in $ROOTFS (/data writable by the workload, base.txt and
# keep.txt in it) and $OUTSIDE/precious; skips without busybox-static or
# overlayfs. After ct_start: api METHOD PATH [JSON] ("STATUS BODY"),
# claim [FROM] (a new sandbox's id), in_sbx ID SCRIPT, $TREE (a script
# printing the hash of /data as the workload sees it).

snap_rootfs()
{
	BB=$(command -v busybox) || skip "busybox not installed (busybox-static)"
	file -L "$BB" 2>/dev/null | grep -q 'statically linked' ||
	    skip "busybox is not the static one (busybox-static)"
	grep -qw overlay /proc/filesystems || modprobe overlay 2>/dev/null ||
	    skip "no overlayfs here"
	ROOTFS=$T/rootfs
	OUTSIDE=$T/outside
	mkdir -p "$ROOTFS/bin" "$ROOTFS/data" "$ROOTFS/etc" "$OUTSIDE"
	cp "$BB" "$ROOTFS/bin/busybox"
	for a in sh cat echo ls rm mkdir ln sha256sum find sort true sleep \
	    id head dd wc; do
		ln -s busybox "$ROOTFS/bin/$a"
	done
	echo base >"$ROOTFS/data/base.txt"
	echo keep >"$ROOTFS/data/keep.txt"
	chmod 0777 "$ROOTFS/data"
	chmod -R go+rX "$ROOTFS"
	echo precious >"$OUTSIDE/precious"
}

api()
{
	"$PYTHON" - "$@" <<'PY'
import json, os, sys
sys.path.insert(0, os.environ["top_srcdir"] + "/tests/integration")
import adminlib
st, h, b = adminlib.call("unix:" + os.environ["T"] + "/state/admin.sock",
    sys.argv[1], sys.argv[2], json.loads(sys.argv[3]) if len(sys.argv) > 3 else None,
    token=adminlib.token(os.environ["T"] + "/state"))
print(st, json.dumps(b))
PY
}

claim()
{
	if [ -n "${1:-}" ]; then _body="{\"from\": \"$1\"}"; else _body='{}'; fi
	api POST /v1/sandboxes/claim "$_body" >"$T/claim.out"
	read -r _st _rest <"$T/claim.out"
	[ "$_st" = 200 ] || fail "claim ${1:-}: $(cat "$T/claim.out")"
	printf '%s\n' "$_rest" | "$PYTHON" -c 'import json,sys; print(json.load(sys.stdin)["id"])'
}

claim_warm()	# the "warm" of the last claim
{
	sed 's/^[0-9]* //' "$T/claim.out" | "$PYTHON" -c 'import json,sys; print(json.load(sys.stdin)["warm"])'
}

in_sbx() { ctl run --sandbox "$1" -- sh -c "$2"; }

snap_layer() { ctl --json snapshot show "$1" | "$PYTHON" -c 'import json,sys; print(json.load(sys.stdin)["layer"])'; }

# names, types and contents under /data as the workload sees them
TREE='cd /data && find . | sort | while read -r f; do
  if [ -L "$f" ]; then echo "L $f $(readlink "$f")";
  elif [ -d "$f" ]; then echo "D $f";
  else echo "F $f $(cat "$f" | sha256sum)"; fi; done | sha256sum'
