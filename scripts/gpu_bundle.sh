#!/usr/bin/env bash
# Packs binaries built here (CUDA build, sm_90a) with the shared libraries the
# GPU machine lacks (it has CUDA's driver but no Debian packages) into one
# compressed file that travels with the device tool's `carry`:
#   scripts/gpu_bundle.sh OUT.tar.xz build-cuda/mxserve build-cuda/src/cuda/ops_parity ...
# On the GPU machine: `source scripts/gpu_unbundle.sh OUT.tar.xz` unpacks it into
# /tmp/mxbundle and puts bin/ on PATH and lib/ on LD_LIBRARY_PATH.
set -euo pipefail
out=$1; shift
[[ $# -gt 0 ]] || { echo "usage: $0 OUT.tar.xz BINARY..." >&2; exit 2; }
stage=$(mktemp -d)
trap 'rm -rf "$stage"' EXIT
mkdir -p "$stage/bin" "$stage/lib"
for bin in "$@"; do
  cp "$bin" "$stage/bin/"
  # Every non-system library the binary resolves here (libc, libstdc++, libm,
  # libgcc and the dynamic loader are on the GPU machine, newer).
  ldd "$bin" | awk '/=> \//{print $3}' | while read -r lib; do
    case $(basename "$lib") in
      libc.so*|libm.so*|libstdc++.so*|libgcc_s.so*|libdl.so*|libpthread.so*|librt.so*|ld-linux*) ;;
      libcuda.so*|libnvidia*) ;;  # the driver's, never ours
      libnccl.so*|libcublas*.so*) ;;  # hundreds of MB; the GPU machine's PyTorch ships them (gpu_unbundle.sh)
      *) cp -Ln "$lib" "$stage/lib/" ;;
    esac
  done
done
mkdir -p "$(dirname "$out")"
# -9e: ~18 MB instead of ~29 for the five test binaries; the device tool carries at most
# 64 MiB with the working tree (~50 MB since session 22: gpu_all's four binaries, 18.4 MB,
# no longer fit beside it). Built without -lineinfo, all five take 16.4 MB (four: 16.1 MB)
# and fit again with the tree in one call. The device tool counts the tree's disk usage
# (`git ls-files -z | du -c --files0-from=-`), not its bytes: 52.8 MB of blocks for 49.7 MB
# of files refused the bundle in session 23 until three 2.2 MB JSONs were gzipped and the
# records' duplicate per-part JSONLs dropped (45.1 MB of blocks at the end of session 23):
#   MX_BUILD_DIR=build-bundle scripts/build.sh -DMXSERVE_CUDA=ON -DMXSERVE_CUDA_LINEINFO=OFF -DMXSERVE_TESTS=OFF
#   scripts/gpu_bundle.sh .carry/all.tar.xz build-bundle/mxserve build-bundle/src/cuda/{ops_parity,attention_parity,sampler_parity,mxfp4_bench}
tar -C "$stage" -cf - . | xz -T0 -9e > "$out"
echo "bundle $out: $(du -h "$out" | cut -f1) ($(ls "$stage/bin" | tr '\n' ' '))"
