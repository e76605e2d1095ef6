# Source this on the GPU machine: unpacks a bundle made by scripts/gpu_bundle.sh
# into /tmp/mxbundle and sets PATH and LD_LIBRARY_PATH for its binaries.
#   source scripts/gpu_unbundle.sh .carry/bundle.tar.xz
mkdir -p /tmp/mxbundle
xz -dc "$1" | tar -C /tmp/mxbundle -xf -
export PATH=/tmp/mxbundle/bin:$PATH
# NCCL and cuBLAS(Lt) come from the nvidia-* wheels beside the machine's PyTorch.
mx_wheel_libs=$(python3 -c 'import glob, os, sys; import nvidia; print(":".join(sorted(glob.glob(os.path.join(list(nvidia.__path__)[0], "*", "lib")))))' 2>/dev/null)
export LD_LIBRARY_PATH=/tmp/mxbundle/lib${mx_wheel_libs:+:$mx_wheel_libs}${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
export NCCL_NVLS_ENABLE=0
