# Source this on the GPU machine: unpacks a bundle made by scripts/gpu_bundle.sh
# into /tmp/mxbundle and sets PATH and LD_LIBRARY_PATH for its binaries.
#   source scripts/gpu_unbundle.sh .carry/bundle.tar.xz
mkdir -p /tmp/mxbundle
xz -dc "$1" | tar -C /tmp/mxbundle -xf -
export PATH=/tmp/mxbundle/bin:$PATH
export LD_LIBRARY_PATH=/tmp/mxbundle/lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
export NCCL_NVLS_ENABLE=0
