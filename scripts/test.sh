#!/bin/sh
# Fresh Debian 12 (root): install packages, build, run the whole test suite
# twice: a -Werror build, then an ASan+UBSan build (leak checking on);
# then a clang libFuzzer build runs every fuzz target for FUZZ_SECONDS
# (default 40) each: any crash, leak or UBSan report fails.
set -eu
cd "$(dirname "$0")/.."
scripts/install-deps.sh --test
autoreconf -fi >/dev/null 2>&1 || autoreconf -fi
# an in-tree build (scripts/quickstart.sh) would block out-of-tree ones
if [ -f config.status ]; then
	make distclean >/dev/null
fi
jobs=$(nproc)
rm -rf _build
mkdir -p _build/release _build/asan _build/fuzz

echo "== release build (-Werror) and make check"
(cd _build/release && ../../configure --enable-werror >/dev/null &&
    make -j"$jobs" >/dev/null && make -j"$jobs" check) || {
	cat _build/release/test-suite.log 2>/dev/null || true
	exit 1
}

echo "== ASan+UBSan build and make check"
export ASAN_OPTIONS="detect_leaks=1:halt_on_error=1:abort_on_error=0"
export UBSAN_OPTIONS="halt_on_error=1:print_stacktrace=1"
# Check forks per test by default; LeakSanitizer only fails a run in-process
export CK_FORK=no
(cd _build/asan && ../../configure --enable-werror --enable-sanitizers \
    >/dev/null && make -j"$jobs" >/dev/null && make -j"$jobs" check) || {
	cat _build/asan/test-suite.log 2>/dev/null || true
	exit 1
}
unset CK_FORK
echo "== libFuzzer build (clang) and make fuzz-smoke, ${FUZZ_SECONDS:-40} s per target"
t0=$(date +%s)
(cd _build/fuzz && CC=clang ../../configure --enable-fuzzing >/dev/null &&
    make -j"$jobs" fuzz-build >/dev/null &&
    make fuzz-smoke FUZZ_SECONDS="${FUZZ_SECONDS:-40}") || exit 1
echo "== fuzz stage: $(( $(date +%s) - t0 )) s"
echo "== all tests passed (release and sanitizer builds, fuzz smoke)"
